/* A thread whose end cannot be armed for want of memory. The program makes
 * 40 pthread keys before its first span, so latte's key comes after glibc's
 * first 32, and arming it on a thread allocates that thread's block of key
 * values (glibc's pthread_setspecific: calloc(32, 16)). This program's
 * calloc refuses that one request on one thread: that thread's spans are
 * refused and counted as no-slot drops, the program is told once on
 * standard error, and once the memory comes back the thread records and
 * ends as any other (src/recorder/exit.rs, thread.rs).
 * Built with and without LATTE_DISABLE (then every count is 0). */
#define _GNU_SOURCE
#include <latte.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "counts.h"

/* glibc's request for a thread's second block of key values. */
#define KEY_BLOCK_COUNT 32
#define KEY_BLOCK_SIZE 16

static void *(*next_calloc)(size_t, size_t);
static __thread int refuse_key_block;
static __thread int key_blocks_refused;

/* The allocator's calloc (ASan's, under ASan), found before main. */
__attribute__((constructor)) static void find_calloc(void) {
  void *found = dlsym(RTLD_NEXT, "calloc");
  memcpy(&next_calloc, &found, sizeof found); /* POSIX: a function's address */
}

void *calloc(size_t n, size_t size) {
  if (refuse_key_block && n == KEY_BLOCK_COUNT && size == KEY_BLOCK_SIZE) {
    key_blocks_refused++;
    errno = ENOMEM;
    return NULL;
  }
  if (!next_calloc) { /* dlsym's own request, before it has answered */
    errno = ENOMEM;
    return NULL;
  }
  return next_calloc(n, size);
}

static void spans(const char *id, int n) {
  for (int i = 0; i < n; i++) {
    latte_start(id, LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
  }
}

static uint64_t no_slot_drops(void) {
  latte_counters c = {0};
  int rc = latte_region_get_counters(&c);
  CHECK(rc == 0 || ON(1) == 0);
  return c.no_slot_drops;
}

static int refused_on_worker;

static void *worker(void *arg) {
  (void)arg;
  refuse_key_block = 1;
  spans("key_no_memory.refused", 3);
  refuse_key_block = 0;
  refused_on_worker = key_blocks_refused;
  spans("key_no_memory.after", 2);
  return NULL;
}

/* The standard error written so far into `f`, searched for `text`. */
static int said(FILE *f, const char *text) {
  char buf[4096];
  size_t n = 0;
  rewind(f);
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  const char *first = strstr(buf, text);
  return first == NULL ? 0 : strstr(first + 1, text) == NULL ? 1 : 2;
}

int main(void) {
  unsetenv("LATTE_QUIET");
  pthread_key_t keys[40];
  for (int i = 0; i < 40; i++) CHECK(pthread_key_create(&keys[i], NULL) == 0);
  int saved_err = dup(2);
  FILE *err = tmpfile();
  CHECK(saved_err >= 0 && err != NULL);
  if (saved_err < 0 || err == NULL) return check_summary("c key_no_memory");
  fflush(stderr);
  dup2(fileno(err), 2);

  spans("key_no_memory.main", 1);
  uint64_t before = no_slot_drops();
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  uint64_t after = no_slot_drops();

  fflush(stderr);
  dup2(saved_err, 2);
  /* Each refused span tried to arm the thread again (its Start, and its
   * Stop looking for a state), and was refused each time. */
  CHECK(refused_on_worker >= ON(3));
  CHECK_EQ_U(after - before, ON(3));
  CHECK_EQ_U(count_of("key_no_memory.refused"), 0);
  CHECK_EQ_U(count_of("key_no_memory.after"), ON(2));
  CHECK_EQ_U(count_of("key_no_memory.main"), ON(1));
  CHECK_EQ_U(said(err, "latte: out of memory"), ON(1));
  for (int i = 0; i < 40; i++) pthread_key_delete(keys[i]);
  return check_summary("c key_no_memory");
}
