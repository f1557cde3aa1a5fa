/* A thread whose end cannot be armed for want of memory. The program makes
 * 40 pthread keys before its first span, so latte's key comes after glibc's
 * first 32, and arming it on a thread allocates that thread's block of key
 * values (glibc's pthread_setspecific: calloc(32, 16) on 64-bit). This
 * program's calloc refuses that one request on one thread: that thread's
 * spans are refused and counted as no-slot drops, the program is told once
 * on standard error, and once the memory comes back the thread records,
 * and is retired at its end as any other (src/recorder/exit.rs,
 * thread.rs).
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

/* glibc's request for a thread's second block of key values: 32 entries
 * of a sequence number and a pointer. */
#define KEY_BLOCK_COUNT 32
#define KEY_BLOCK_SIZE (2 * sizeof(void *))

/* clang links ASan's calloc into the program itself, where this program's
 * calloc would replace it: the test runs under gcc's ASan (a library) and
 * without sanitizers. */
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CALLOC_IS_ASANS 1
#endif
#endif

static __thread int refuse_key_block;
static __thread int key_blocks_refused;

#ifndef CALLOC_IS_ASANS
static void *(*next_calloc)(size_t, size_t);

/* What calloc hands out while dlsym, looking up the allocator's calloc,
 * asks for memory itself (never freed: dlsym keeps what it asks for). */
static union {
  long double align; /* 16 bytes on x86-64, as malloc aligns */
  char bytes[4096];
} early;
static size_t early_used;

void *calloc(size_t n, size_t size) {
  if (refuse_key_block && n == KEY_BLOCK_COUNT && size == KEY_BLOCK_SIZE) {
    key_blocks_refused++;
    errno = ENOMEM;
    return NULL;
  }
  if (__atomic_load_n(&next_calloc, __ATOMIC_ACQUIRE) == NULL) {
    static __thread int looking_up;
    if (looking_up) {
      size_t bytes = (n * size + 15) & ~(size_t)15;
      if (size != 0 && n > sizeof early.bytes / size) return NULL;
      size_t at = __atomic_fetch_add(&early_used, bytes, __ATOMIC_RELAXED);
      return at + bytes <= sizeof early.bytes ? early.bytes + at : NULL;
    }
    looking_up = 1;
    void *found = dlsym(RTLD_NEXT, "calloc");
    void *(*f)(size_t, size_t);
    memcpy(&f, &found, sizeof found); /* POSIX: a function's address */
    __atomic_store_n(&next_calloc, f, __ATOMIC_RELEASE);
    looking_up = 0;
    if (f == NULL) abort();
  }
  return next_calloc(n, size);
}
#endif

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
#ifdef CALLOC_IS_ASANS
  puts("c key_no_memory: not run (clang's ASan: calloc is in the program)");
  return 0;
#endif
  unsetenv("LATTE_QUIET");
  char name[64];
  snprintf(name, sizeof name, "/latte-key-no-memory-%d", (int)getpid());
  CHECK(latte_init_shared_region(name) == 0 || ON(1) == 0);
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
  /* Each refused Start tried to arm the thread again, and was refused. */
  CHECK(refused_on_worker >= ON(3));
  CHECK_EQ_U(after - before, ON(3));
  CHECK_EQ_U(count_of("key_no_memory.refused"), 0);
  CHECK_EQ_U(count_of("key_no_memory.after"), ON(2));
  CHECK_EQ_U(count_of("key_no_memory.main"), ON(1));
  CHECK_EQ_U(said(err, "latte: out of memory"), ON(1));
  /* The worker's ring ("after") closed at its end; main's stays open. */
  CHECK_EQ_U(closed_rings(name, 8), ON(1));
  latte_region_unlink(name);
  for (int i = 0; i < 40; i++) pthread_key_delete(keys[i]);
  return check_summary("c key_no_memory");
}
