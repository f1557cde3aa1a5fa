/* Fork callbacks of the program's own, registered before latte's, that
 * record while the process forks: the prepare callback (which runs after
 * latte's has taken the registry lock) asks for a new ID and is refused and
 * counted rather than waiting for ever; the child callback (which runs
 * before latte's) records on a thread whose switch ring the child does not
 * have mapped, and must not load from it. An alarm turns a hang into a
 * failure. Built with and without LATTE_DISABLE. */
#define _GNU_SOURCE
#include "check.h"
#include "latte_inline.h"
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef LATTE_DISABLE

static int prepared, childed;

static void prepare_records(void) {
  /* A new ID: the slow path, which needs the registry lock. */
  latte_start("fork.prepare.new", LATTE_MODE_FAST);
  (void)latte_stop("fork.prepare.new", LATTE_MODE_FAST);
  prepared++;
}

static void child_records(void) {
  /* A cached ID on the forking thread: the inline fast path. */
  latte_start_inline("fork.cached", LATTE_MODE_FAST);
  (void)latte_stop_inline("fork.cached", LATTE_MODE_FAST);
  LATTE_PULSE_AT("fork.cached.pulse");
  childed++;
}

int main(void) {
  latte_counters before, after;
  pid_t pid;
  int st = 0, round;
  CHECK(pthread_atfork(prepare_records, NULL, child_records) == 0);
  alarm(20);
  child_records();
  child_records();
  /* Tracking on (when the kernel allows it): the child's inherited state
   * would point at a perf page the child does not have. */
  printf("fork_handlers: switch tracking %s\n", latte_sched_enable() == 0 ? "on" : "refused");
  for (round = 0; round < 3; round++) {
    CHECK(latte_region_get_counters(&before) == 0);
    pid = fork();
    if (pid == 0) {
      child_records(); /* and once more after latte's own callback */
      _exit(childed >= 2 ? 0 : 3);
    }
    CHECK(pid > 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (WIFSIGNALED(st)) printf("fork_handlers: child killed by signal %d\n", WTERMSIG(st));
    CHECK(latte_region_get_counters(&after) == 0);
    CHECK(after.reentrant_drops > before.reentrant_drops);
  }
  CHECK(prepared == 3);
  /* The parent's thread records and is tracked as before. */
  child_records();
  CHECK(latte_sched_status() == LATTE_SCHED_ON || latte_sched_status() < 0);
  return check_summary("c fork_handlers");
}

#else

int main(void) { return check_summary("c fork_handlers (disabled)"); }

#endif
