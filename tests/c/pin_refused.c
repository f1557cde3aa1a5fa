/* latte cannot pin the object that holds it (its dlopen with RTLD_NOLOAD |
 * RTLD_NODELETE is refused: this program's dlopen refuses it, after having
 * the loader fail once so that an error is pending). latte then makes no
 * key (this program counts the keys made through pthread_key_create with
 * a destructor in liblatte.so) and
 * retires threads by its thread-local guard (src/recorder/exit.rs):
 * a thread's spans are kept and its ring closes at its end, and latte
 * leaves no loader error of its own for the program's next dlerror().
 * Where latte is linked into the program (the static build) no pin is
 * needed and none is asked for; the same checks hold.
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

typedef void *(*dlopen_fn)(const char *, int);
static int pins_refused;

void *dlopen(const char *file, int mode) {
  dlopen_fn next;
  void *f = dlsym(RTLD_NEXT, "dlopen");
  if (f == NULL) abort();
  memcpy(&next, &f, sizeof f); /* POSIX: a function's address */
  if ((mode & RTLD_NOLOAD) && (mode & RTLD_NODELETE)) {
    __atomic_add_fetch(&pins_refused, 1, __ATOMIC_RELAXED);
    /* The loader's own failure, so that a dlerror() is pending. */
    (void)next("/nonexistent/latte-pin-refused.so", RTLD_LAZY);
    return NULL;
  }
  return next(file, mode);
}

typedef int (*key_create_fn)(pthread_key_t *, void (*)(void *));
static int keys_made; /* with a destructor in liblatte.so */

int pthread_key_create(pthread_key_t *key, void (*destructor)(void *)) {
  key_create_fn next;
  void *f = dlsym(RTLD_NEXT, "pthread_key_create");
  if (f == NULL) abort();
  memcpy(&next, &f, sizeof f);
  int rc = next(key, destructor);
  Dl_info in;
  void *d;
  memcpy(&d, &destructor, sizeof d);
  if (rc == 0 && d != NULL && dladdr(d, &in) != 0 && in.dli_fname != NULL && strstr(in.dli_fname, "liblatte.so") != NULL)
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
  char name[64];
  snprintf(name, sizeof name, "/latte-pin-refused-%d", (int)getpid());
  CHECK(latte_init_shared_region(name) == 0 || ON(1) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  /* The pin was asked for, and refused, only where latte is a library. */
  CHECK(latte_is_shared() ? pins_refused >= ON(1) : pins_refused == 0);
  /* Without a pin latte made no key (its destructor could be unmapped). */
  CHECK_EQ_U(keys_made, 0);
  CHECK_EQ_U(count_of("pin_refused.worker"), ON(4));
  latte_counters c = {0};
  int rc = latte_region_get_counters(&c);
  CHECK(rc == 0 || ON(1) == 0);
  CHECK_EQ_U(c.late_drops + c.no_slot_drops, 0);
  /* The guard retired the worker at its end: its ring closed. */
  CHECK_EQ_U(closed_rings(name, 8), ON(1));
  latte_region_unlink(name);
  return check_summary("c pin_refused");
}
