/* sleep_switched: a sleep the kernel counted as a switch-out of the thread.
 * A plain usleep need not leave the CPU: when the vCPU stalls between the
 * kernel arming the timer and blocking, the timer has already fired and the
 * call returns on the CPU. Tests that expect a sleep to flag a sample or to
 * show in a diff sleep with this, which sleeps again until the thread's
 * switch count (getrusage RUSAGE_THREAD) has moved. */
#ifndef LATTE_TEST_SLEEP_H
#define LATTE_TEST_SLEEP_H
#include <sys/resource.h>
#include <unistd.h>

static inline long thread_switches(void) {
  struct rusage u;
  if (getrusage(RUSAGE_THREAD, &u) != 0) return -1;
  return u.ru_nvcsw + u.ru_nivcsw;
}

static inline void sleep_switched(unsigned us) {
  long k;
  do {
    k = thread_switches();
    usleep(us);
  } while (thread_switches() <= k);
}
#endif
