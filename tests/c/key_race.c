/* Threads that race to their first span in a process that has not recorded
 * yet, so that several may make latte's pthread key at once: one key is
 * kept, the others are deleted (src/recorder/exit.rs), every span is kept
 * and every thread is retired at its end, which leaves its rings closed.
 * Each round is a child process forked before anything recorded (the
 * parent never records), so each starts with no key.
 * Built with and without LATTE_DISABLE (then every count is 0). */
#define _GNU_SOURCE
#include <latte.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "counts.h"

#define ROUNDS 20
#define THREADS 8
#define SPANS 5

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

/* Keys the process can still make (each made, then all deleted). */
static int free_keys(void) {
  static pthread_key_t keys[2048];
  int n = 0;
  while (n < 2048 && pthread_key_create(&keys[n], NULL) == 0) n++;
  for (int i = 0; i < n; i++) pthread_key_delete(keys[i]);
  return n;
}

/* The rings of `name` closed so far (their thread retired). */
static size_t closed_rings(const char *name) {
  struct latte_reader *r = NULL;
  latte_slot_info slots[4 * THREADS];
  size_t n = 0, closed = 0;
  CHECK(latte_reader_open(name, &r) == 0);
  if (r == NULL) return 0;
  CHECK(latte_reader_slots(r, slots, 4 * THREADS, &n) == 0);
  for (size_t i = 0; i < n && i < 4 * THREADS; i++) closed += slots[i].state == LATTE_SLOT_CLOSED;
  latte_reader_close(r);
  return closed;
}

/* One round, in a fresh child: its exit status is its failed checks. */
static int round_in_child(void) {
  char name[64];
  snprintf(name, sizeof name, "/latte-key-race-%d", (int)getpid());
  CHECK(latte_init_shared_region(name) == 0 || ON(1) == 0);
  int before = free_keys();
  pthread_t t[THREADS];
  pthread_barrier_init(&go, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, racer, NULL) == 0);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  /* latte holds one key: the racers that lost deleted theirs. */
  CHECK_EQ_U(free_keys(), before - ON(1));
  CHECK_EQ_U(count_of("key_race.span"), ON(THREADS * SPANS));
  latte_counters c = {0};
  int rc = latte_region_get_counters(&c);
  CHECK(rc == 0 || ON(1) == 0);
  CHECK_EQ_U(c.late_drops + c.no_slot_drops + c.reentrant_drops, 0);
  CHECK_EQ_U(c.threads_seen, ON(THREADS));
  /* Every racer armed the key that was kept: each one's ring closed. */
  if (ON(1)) CHECK_EQ_U(closed_rings(name), THREADS);
  latte_region_unlink(name);
  return check_failed;
}

int main(void) {
  for (int r = 0; r < ROUNDS; r++) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(round_in_child() ? 1 : 0);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return check_summary("c key_race");
}
