/* Threads that race to their first span in a process that has not recorded
 * yet, so that several may make latte's pthread key at once: one key is
 * kept, the others are deleted (src/recorder/exit.rs), every span is kept
 * and every thread is retired at its end, which leaves its rings closed.
 * Each round is a child process forked before anything recorded (the
 * parent never records), so each starts with no key. This program's
 * pthread_key_create and pthread_key_delete count the keys made and
 * deleted through them (latte's calls; glibc's own keys are made
 * inside it); the rounds in which two or more were made, a race, are
 * printed.
 * Built with and without LATTE_DISABLE (then every count is 0). */
#define _GNU_SOURCE
#include <latte.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "counts.h"

#define ROUNDS 20
#define THREADS 8
#define SPANS 5
/* A child's exit status: all checks passed, and whether keys raced. */
#define ROUND_OK 0
#define ROUND_FAILED 1
#define ROUND_RACED 2

typedef int (*key_delete_fn)(pthread_key_t);
static int made, deleted;

/* The next object's definition of `name` (libc's). */
static void *next_definition(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (f == NULL) abort();
  return f;
}

/* glibc's exported name of pthread_key_create, called without dlsym: a
 * sanitizer's start-up makes keys before anything else is ready. */
extern int __pthread_key_create(pthread_key_t *key, void (*destructor)(void *));

int pthread_key_create(pthread_key_t *key, void (*destructor)(void *)) {
  int rc = __pthread_key_create(key, destructor);
  if (rc == 0) __atomic_add_fetch(&made, 1, __ATOMIC_RELAXED);
  return rc;
}

int pthread_key_delete(pthread_key_t key) {
  key_delete_fn next;
  void *f = next_definition("pthread_key_delete");
  memcpy(&next, &f, sizeof f); /* POSIX: a function's address */
  int rc = next(key);
  if (rc == 0) __atomic_add_fetch(&deleted, 1, __ATOMIC_RELAXED);
  return rc;
}

static pthread_barrier_t go;

static void *racer(void *arg) {
  (void)arg;
  pthread_barrier_wait(&go);
  for (int i = 0; i < SPANS; i++) {
    latte_start("key_race.span", LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
  }
  return NULL;
}

/* One round, in a fresh child: its exit status (ROUND_*). */
static int round_in_child(void) {
  made = deleted = 0; /* keys made before the fork (a sanitizer's) */
  char name[64];
  snprintf(name, sizeof name, "/latte-key-race-%d", (int)getpid());
  CHECK(latte_init_shared_region(name) == 0 || ON(1) == 0);
  pthread_t t[THREADS];
  pthread_barrier_init(&go, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, racer, NULL) == 0);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  /* latte holds one key: the racers that lost deleted theirs. */
  int held = __atomic_load_n(&made, __ATOMIC_RELAXED) - __atomic_load_n(&deleted, __ATOMIC_RELAXED);
  CHECK_EQ_U(held, ON(1));
  CHECK_EQ_U(count_of("key_race.span"), ON(THREADS * SPANS));
  latte_counters c = {0};
  int rc = latte_region_get_counters(&c);
  CHECK(rc == 0 || ON(1) == 0);
  CHECK_EQ_U(c.late_drops + c.no_slot_drops + c.reentrant_drops, 0);
  CHECK_EQ_U(c.threads_seen, ON(THREADS));
  /* Every racer armed the key that was kept: each one's ring closed. */
  CHECK_EQ_U(closed_rings(name, 4 * THREADS), ON(THREADS));
  latte_region_unlink(name);
  if (check_failed) return ROUND_FAILED;
  return made >= 2 ? ROUND_RACED : ROUND_OK;
}

int main(void) {
  int raced = 0;
  for (int r = 0; r < ROUNDS; r++) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(round_in_child());
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != ROUND_FAILED);
    raced += WIFEXITED(status) && WEXITSTATUS(status) == ROUND_RACED;
  }
  printf("c key_race: keys made by two or more threads at once in %d of %d rounds\n", raced, ROUNDS);
  return check_summary("c key_race");
}
