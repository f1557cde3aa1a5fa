/* The main thread ends with pthread_exit, the last thread to end: the
 * process's exit then runs on it, and an atexit handler there records and
 * reads back as after a return from main. latte never retires the main
 * thread (src/recorder/exit.rs): glibc runs its pthread key destructors,
 * latte's among them, before its atexit handlers.
 * Built with and without LATTE_DISABLE (then every count is 0). */
#include <latte.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "counts.h"

static void spans(const char *id, int n) {
  for (int i = 0; i < n; i++) {
    latte_start(id, LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
  }
}

static void at_end(void) {
  spans("main_exit.atexit", 5);
  latte_counters c = {0};
  int rc = latte_region_get_counters(&c);
  CHECK(rc == 0 || ON(1) == 0);
  CHECK_EQ_U(c.late_drops, 0);
  CHECK_EQ_U(count_of("main_exit.main"), ON(3));
  CHECK_EQ_U(count_of("main_exit.worker"), ON(4));
  CHECK_EQ_U(count_of("main_exit.atexit"), ON(5));
  int failed = check_summary("c main_exit");
  fflush(stdout);
  _exit(failed);
}

static void *worker(void *arg) {
  (void)arg;
  spans("main_exit.worker", 4);
  return NULL;
}

int main(void) {
  atexit(at_end);
  spans("main_exit.main", 3);
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
  if (pthread_join(t, NULL) != 0) return 1;
  pthread_exit(NULL);
}
