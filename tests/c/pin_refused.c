/* latte cannot pin liblatte.so, the object that holds it: its dlopen with
 * RTLD_NOLOAD | RTLD_NODELETE is refused (this program's dlopen refuses
 * it, after having the loader fail once so that an error is pending).
 * latte then makes no key and retires threads by its thread-local guard
 * (src/recorder/exit.rs says why, thread.rs holds the guard): every
 * thread's spans are kept and its ring closes at its end, the refusal is
 * remembered (one pin asked for, whatever the threads), and latte leaves
 * no loader error of its own for the program's next dlerror(). This
 * program counts the keys made with a destructor in latte's object.
 * Where latte is linked into the program (the static build) no pin is
 * needed and none is asked for: there latte makes its key, whose
 * destructor retires the threads, and the other checks hold the same.
 * Built with and without LATTE_DISABLE (then every count is 0). */
#define _GNU_SOURCE
#include <latte.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "counts.h"

#define WORKERS 2

/* glibc's exported name of pthread_key_create, called without dlsym: a
 * sanitizer's start-up makes keys before anything else is ready. */
extern int __pthread_key_create(pthread_key_t *key, void (*destructor)(void *));

typedef void *(*dlopen_fn)(const char *, int);
static int pins_refused;
static int keys_made; /* with a destructor in latte's object */
static int in_main;   /* keys made before main are a runtime's, not latte's */

void *dlopen(const char *file, int mode) {
  dlopen_fn next;
  void *f = dlsym(RTLD_NEXT, "dlopen");
  if (f == NULL) abort();
  memcpy(&next, &f, sizeof f); /* POSIX: a function's address */
  int pin = (mode & RTLD_NOLOAD) && (mode & RTLD_NODELETE);
  if (pin && file != NULL && strstr(file, "liblatte.so") != NULL) {
    __atomic_add_fetch(&pins_refused, 1, __ATOMIC_RELAXED);
    /* The loader's own failure, so that a dlerror() is pending. */
    (void)next("/nonexistent/latte-pin-refused.so", RTLD_LAZY);
    return NULL;
  }
  return next(file, mode);
}

static void *worker(void *arg);

/* Whether `code` lies in liblatte.so or in the program itself. */
static int in_latte_or_program(void *code) {
  Dl_info at, program;
  void *(*w)(void *) = worker;
  void *program_code;
  memcpy(&program_code, &w, sizeof program_code);
  if (dladdr(code, &at) == 0 || dladdr(program_code, &program) == 0) return 0;
  return at.dli_fbase == program.dli_fbase || (at.dli_fname != NULL && strstr(at.dli_fname, "liblatte.so") != NULL);
}

int pthread_key_create(pthread_key_t *key, void (*destructor)(void *)) {
  int rc = __pthread_key_create(key, destructor);
  void *d;
  memcpy(&d, &destructor, sizeof d);
  if (rc == 0 && d != NULL && __atomic_load_n(&in_main, __ATOMIC_RELAXED) && in_latte_or_program(d))
    __atomic_add_fetch(&keys_made, 1, __ATOMIC_RELAXED);
  return rc;
}

static void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++) {
    latte_start("pin_refused.worker", LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
  }
  /* latte's refused pin left no error for this thread's next dlerror(). */
  CHECK(dlerror() == NULL);
  return NULL;
}

/* Whether latte lives in a shared object of its own (not the program). */
static int latte_is_shared(void) {
  void *h = dlopen("liblatte.so.0", RTLD_LAZY | RTLD_NOLOAD);
  if (h != NULL) dlclose(h);
  return h != NULL;
}

int main(void) {
  __atomic_store_n(&in_main, 1, __ATOMIC_RELAXED);
  char name[64];
  snprintf(name, sizeof name, "/latte-pin-refused-%d", (int)getpid());
  CHECK(latte_init_shared_region(name) == 0 || ON(1) == 0);
  /* One worker after another: the second finds the refusal remembered. */
  for (int w = 0; w < WORKERS; w++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }
  int shared = latte_is_shared();
  /* The pin is asked for once, and only where latte is a library; without
   * it latte makes no key (its destructor could be unmapped). */
  CHECK_EQ_U(pins_refused, shared ? ON(1) : 0);
  CHECK_EQ_U(keys_made, shared ? 0 : ON(1));
  CHECK_EQ_U(count_of("pin_refused.worker"), ON(4 * WORKERS));
  latte_counters c = {0};
  int rc = latte_region_get_counters(&c);
  CHECK(rc == 0 || ON(1) == 0);
  CHECK_EQ_U(c.late_drops + c.no_slot_drops, 0);
  /* Every worker was retired at its end: its ring closed. */
  CHECK_EQ_U(closed_rings(name, 8), ON(WORKERS));
  latte_region_unlink(name);
  return check_summary("c pin_refused");
}
