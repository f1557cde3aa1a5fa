/* Switch tracking through the C ABI: enable, status, counters, a point
 * before and after a sleep, the diff and its one-line form (the buffer
 * rule), a ring overrun, points of another thread, and a thread's event
 * released at its exit.
 * Built with and without LATTE_DISABLE (then enabling says "not supported"
 * and points are refused as with tracking off). */
#define _GNU_SOURCE
#include "check.h"
#include "sleep.h"
#include "latte_inline.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#ifndef LATTE_DISABLE

static latte_sched_point other_point;
static int other_rc;

static void *other_thread(void *arg) {
  (void)arg;
  other_rc = latte_sched_snap(&other_point);
  return NULL;
}

/* The samples under `id` in ring order (this thread's only ring for it). */
static size_t records_of(const char *id, latte_sample_record *out, size_t cap) {
  static latte_sample_record all[1 << 16];
  size_t n = 0, i, k = 0;
  uint32_t tok = latte_intern_id(id);
  CHECK(latte_samples_extract(all, sizeof all / sizeof all[0], &n) == 0);
  for (i = 0; i < n && k < cap; i++)
    if (all[i].token == tok) out[k++] = all[i];
  return k;
}

/* The inline path and the ABI path set LATTE_SAMPLE_SWITCHED alike: a span
 * around a sleep that blocked is flagged by both; a span whose bracketing
 * diff saw no switch-out is flagged by neither; the rest of the sample
 * agrees. The same for pulses with a sleep that blocked between them. */
static void inline_and_abi_flag_alike(void) {
  enum { N = 100 };
  static int expect[2][N];
  static latte_sample_record rec[2][N + 1];
  const char *ids[2] = {"c.sched.abi", "c.sched.inline"};
  latte_sched_point a, b;
  latte_sched_delta d;
  latte_pulse_site site = {0};
  int k, p, sleeps, determinate = 0;
  size_t n0, n1;
  for (k = 0; k < N; k++)
    for (p = 0; p < 2; p++) {
      sleeps = k % 2;
      CHECK(latte_sched_snap(&a) == 0);
      if (p)
        latte_start_inline(ids[p], LATTE_MODE_MID);
      else
        latte_start(ids[p], LATTE_MODE_MID);
      if (sleeps) usleep(50);
      if (p)
        latte_stop_inline(ids[p], LATTE_MODE_HARD);
      else
        latte_stop(ids[p], LATTE_MODE_HARD);
      CHECK(latte_sched_snap(&b) == 0);
      CHECK(latte_sched_diff(&a, &b, &d) == 0);
      /* Known answers only: no switch-out between the two points, or a
       * blocking one, which only the sleep inside the span can be (a
       * sleep whose timer fired before the thread got to block does not
       * switch at all, and a preemption may fall outside the span). */
      expect[p][k] = d.switch_outs == 0 ? 0 : (sleeps && d.blocked_ns > 0) ? 1 : -1;
    }
  n0 = records_of(ids[0], rec[0], N);
  n1 = records_of(ids[1], rec[1], N);
  CHECK(n0 == N && n1 == N);
  for (k = 0; k < N && k < (int)n0 && k < (int)n1; k++) {
    CHECK(rec[0][k].depth == rec[1][k].depth && rec[0][k].start_mode == rec[1][k].start_mode &&
          rec[0][k].stop_mode == rec[1][k].stop_mode);
    for (p = 0; p < 2; p++)
      if (expect[p][k] >= 0) {
        CHECK_EQ_U(rec[p][k].switched, expect[p][k]);
        determinate++;
      }
  }
  /* Nearly every span has a known answer on an idle machine; a loaded one
   * leaves fewer, never none. */
  CHECK(determinate >= N / 2);
  printf("sched: %d of %d spans with a known answer, both paths agree\n", determinate, 2 * N);

  /* Pulses: a sleep that blocked between two pulses flags the second. */
  for (k = 0; k < 11; k++) {
    CHECK(latte_sched_snap(&a) == 0);
    usleep(50);
    CHECK(latte_sched_snap(&b) == 0);
    CHECK(latte_sched_diff(&a, &b, &d) == 0);
    if (k > 0) expect[0][k - 1] = d.blocked_ns > 0 ? 1 : -1;
    latte_pulse(&site, "c.sched.pulse.abi");
    LATTE_PULSE_AT("c.sched.pulse.inline");
  }
  n0 = records_of("c.sched.pulse.abi", rec[0], N);
  n1 = records_of("c.sched.pulse.inline", rec[1], N);
  CHECK(n0 == 10 && n1 == 10);
  determinate = 0;
  for (k = 0; k < 10 && k < (int)n0 && k < (int)n1; k++) {
    if (expect[0][k] == 1) {
      CHECK(rec[0][k].switched == 1 && rec[1][k].switched == 1);
      determinate++;
    }
    CHECK(rec[0][k].start_mode == LATTE_MODE_PULSE && rec[1][k].start_mode == LATTE_MODE_PULSE);
  }
  CHECK(determinate > 0);
}

/* One pulse of path p (0: latte_pulse, 1: latte_pulse_inline) with the
 * thread's switch count read just before and after it: prev is the point
 * taken before this site's previous pulse, updated to this one's. Returns
 * the flag it must have: 1 after a sleep on a tracked thread, 0 when the
 * thread is untracked or its ring did not move across both pulses, -1
 * when that cannot be known. */
static int pulse_step(int p, latte_pulse_site *site, const char *id, int sleep, int tracked, latte_sched_point *prev) {
  latte_sched_point x, y;
  int known;
  if (sleep) sleep_switched(50);
  if (tracked) CHECK(latte_sched_snap(&x) == 0);
  if (p)
    latte_pulse_inline(site, id);
  else
    latte_pulse(site, id);
  if (!tracked) return 0;
  CHECK(latte_sched_snap(&y) == 0);
  known = sleep ? 1 : prev->ring == y.ring && prev->head == y.head ? 0 : -1;
  *prev = x;
  return known;
}

/* Pulses across the thread's ring closing and opening, on both paths: an
 * untracked thread's pulse is never flagged; a pulse after a sleep on a
 * tracked one always is; one whose interval saw no switch is not, once a
 * pulse of the site has seen the current ring; right after the ring opens,
 * a site that last looked while untracked is flagged exactly when the new
 * ring counted a switch. Both paths flag alike wherever the answer is known. */
static void pulses_across_ring_changes(void) {
  enum { N = 64 };
  static latte_sample_record rec[2][N];
  static int expect[2][N];
  const char *ids[2] = {"c.sched.ring.abi", "c.sched.ring.inline"};
  latte_pulse_site site[2];
  latte_sched_point prev[2], x, y;
  int n = 0, k, p, phase, known = 0;
  size_t got[2];
  memset(site, 0, sizeof site);
  memset(prev, 0, sizeof prev);
  CHECK(latte_sched_release() == 0);
  for (p = 0; p < 2; p++) pulse_step(p, &site[p], ids[p], 0, 0, &prev[p]); /* primes */
  for (phase = 0; phase < 3; phase++) {
    /* Untracked: sleeps flag nothing. */
    for (k = 0; k < 3; k++, n++)
      for (p = 0; p < 2; p++) expect[p][n] = pulse_step(p, &site[p], ids[p], 1, 0, &prev[p]);
    CHECK(latte_sched_enable() == 0);
    /* The first pulse after the ring opens. A site that never saw a ring
     * (phase 0) is flagged when the new ring had counted a switch before
     * the pulse, and not when it counted none until after it. A site whose
     * last mark came from a ring that closed since (later phases) is
     * flagged, switch or not. */
    for (p = 0; p < 2; p++) {
      CHECK(latte_sched_snap(&x) == 0);
      if (p)
        latte_pulse_inline(&site[p], ids[p]);
      else
        latte_pulse(&site[p], ids[p]);
      CHECK(latte_sched_snap(&y) == 0);
      expect[p][n] = phase > 0 ? 1 : x.head != 0 ? 1 : y.head == 0 ? 0 : -1;
      prev[p] = x;
    }
    n++;
    for (k = 0; k < 12; k++, n++)
      for (p = 0; p < 2; p++) expect[p][n] = pulse_step(p, &site[p], ids[p], k % 3 == 0, 1, &prev[p]);
    CHECK(latte_sched_release() == 0);
    for (p = 0; p < 2; p++) {
      pulse_step(p, &site[p], ids[p], 0, 0, &prev[p]);
      expect[p][n] = -1; /* across the close: may be flagged */
    }
    n++;
  }
  CHECK(n <= N);
  got[0] = records_of(ids[0], rec[0], N);
  got[1] = records_of(ids[1], rec[1], N);
  CHECK(got[0] == (size_t)n && got[1] == (size_t)n);
  for (k = 0; k < n && k < (int)got[0] && k < (int)got[1]; k++)
    for (p = 0; p < 2; p++)
      if (expect[p][k] >= 0) {
        CHECK_EQ_U(rec[p][k].switched, expect[p][k]);
        known++;
      }
  CHECK(known >= 2 * (3 * (3 + 4) + 2));
  printf("sched: pulses across ring changes, %d of %d samples with a known answer, both paths agree\n", known, 2 * n);
  CHECK(latte_sched_enable() == 0);
}

/* A signal handler that takes the thread over with another copy of the
 * state (as a second copy of the inline path in a library would) while the
 * thread is inside latte_sched_snap: the copy it activates is still bound
 * to the thread's ring, and a span across a sleep through it is flagged. */
static __thread latte_thread other_copy;
static volatile sig_atomic_t flip, unbound;
static void on_alarm(int sig) {
  latte_thread *t = (flip ^= 1) ? &other_copy : &latte__state;
  (void)sig;
  latte__start_on(t, "c.sched.handler", LATTE_MODE_FAST);
  (void)latte__stop_on(t, LATTE_MODE_FAST, __rdtsc());
  if (t->switch_base == 0) unbound++;
}

static void handler_takeovers_during_snap(void) {
  struct itimerval it = {{0, 50}, {0, 50}}, off = {{0, 0}, {0, 0}};
  latte_sched_point p, a, b;
  latte_sample_record rec[4];
  latte_thread *t;
  long i;
  CHECK(latte_sched_status() == LATTE_SCHED_ON);
  CHECK(signal(SIGALRM, on_alarm) != SIG_ERR);
  CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
  for (i = 0; i < 2000000; i++) (void)latte_sched_snap(&p);
  CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
  CHECK(signal(SIGALRM, SIG_DFL) != SIG_ERR);
  CHECK_EQ_U(unbound, 0);
  t = flip ? &other_copy : &latte__state;
  CHECK(t->switch_base != 0);
  CHECK(latte_sched_snap(&a) == 0);
  latte__start_on(t, "c.sched.handler.after", LATTE_MODE_MID);
  sleep_switched(1000);
  (void)latte__stop_on(t, LATTE_MODE_MID, latte__tsc_stop(LATTE_MODE_MID));
  CHECK(latte_sched_snap(&b) == 0);
  CHECK(b.head > a.head);
  CHECK(records_of("c.sched.handler.after", rec, 4) == 1);
  CHECK_EQ_U(rec[0].switched, 1);
}

int main(void) {
  latte_sched_point a, b;
  latte_sched_delta d;
  latte_sched_counters c;
  char line[512];
  size_t n = 0;
  pthread_t th;
  int i, rc;

  CHECK(latte_sched_enable() == 0);
  CHECK(latte_sched_status() == LATTE_SCHED_ON);
  CHECK(latte_sched_get_counters(&c) == 0);
  CHECK(c.enabled == 1 && c.tracked == 1 && c.refused == 0);
  CHECK(latte_sched_get_counters(NULL) == -EINVAL);

  /* A sleep: blocked, the parts sum to the wall time. */
  CHECK(latte_sched_snap(&a) == 0);
  sleep_switched(2000);
  CHECK(latte_sched_snap(&b) == 0);
  CHECK(a.ring == b.ring && a.ring != 0 && b.head > a.head);
  CHECK(latte_sched_diff(&a, &b, &d) == 0);
  CHECK(d.switch_outs >= 1 && d.blocked_ns >= 1000000 && d.lost == 0);
  CHECK_EQ_U(d.on_cpu_ns + d.preempted_ns + d.blocked_ns, d.wall_ns);
  CHECK_EQ_U(d.off_cpu_ns, d.preempted_ns + d.blocked_ns);

  /* The one-line form: *out_n and -ERANGE, then the text. */
  CHECK(latte_sched_format(&d, NULL, 0, &n) == -ERANGE);
  CHECK(n > 20 && n < sizeof line);
  memset(line, 'x', sizeof line);
  CHECK(latte_sched_format(&d, line, n, &n) == -ERANGE);
  CHECK(line[0] == 'x');
  CHECK(latte_sched_format(&d, line, sizeof line, &n) == 0);
  CHECK(strlen(line) == n && strncmp(line, "wall ", 5) == 0 && strstr(line, "blocked") != NULL);
  printf("sched: %s\n", line);

  /* More switches than the ring holds: reported, nothing guessed. */
  CHECK(latte_sched_snap(&a) == 0);
  for (i = 0; i < 400; i++) sleep_switched(1);
  CHECK(latte_sched_snap(&b) == 0);
  memset(&d, 0xff, sizeof d);
  rc = latte_sched_diff(&a, &b, &d);
  CHECK(rc == LATTE_ERR_SCHED_LOST);
  CHECK(d.lost == 1 && d.switch_outs == 0 && d.on_cpu_ns == 0 && d.wall_ns > 0);
  CHECK(latte_sched_format(&d, line, sizeof line, &n) == 0 && strstr(line, "lost") != NULL);
  CHECK(strcmp(latte_error_string(LATTE_ERR_SCHED_LOST), "switch records were lost (overwritten in the thread's ring before they were read)") == 0);

  /* Another thread's point: its ring is not ours (and is gone with it). */
  CHECK(pthread_create(&th, NULL, other_thread, NULL) == 0);
  CHECK(pthread_join(th, NULL) == 0);
  CHECK(other_rc == 0 && other_point.ring != a.ring);
  CHECK(latte_sched_diff(&a, &other_point, &d) == -EINVAL);
  CHECK(latte_sched_diff(&b, &a, &d) == -EINVAL);
  CHECK(latte_sched_get_counters(&c) == 0);
  CHECK(c.tracked == 1 && c.opened == 2);

  inline_and_abi_flag_alike();
  pulses_across_ring_changes();
  handler_takeovers_during_snap();

  /* Recording goes on beside it. */
  for (i = 0; i < 5; i++) {
    latte_start("c.sched", LATTE_MODE_FAST);
    latte_stop("c.sched", LATTE_MODE_FAST);
  }
  CHECK(latte_samples_snapshot("c.sched", NULL, 0, &n) == -ERANGE && n == 5);
  return check_summary("c sched");
}

#else /* LATTE_DISABLE */

int main(void) {
  latte_sched_point p;
  latte_sched_delta d;
  latte_sched_counters c;
  char line[8] = "x";
  size_t n = 9;
  CHECK(latte_sched_enable() == LATTE_ERR_NOT_SUPPORTED);
  CHECK(latte_sched_status() == LATTE_SCHED_OFF);
  CHECK(latte_sched_get_counters(&c) == 0 && c.tracked == 0);
  CHECK(latte_sched_snap(&p) == LATTE_ERR_SCHED_OFF && p.ring == 0);
  CHECK(latte_sched_diff(&p, &p, &d) == LATTE_ERR_SCHED_OFF && d.wall_ns == 0);
  CHECK(latte_sched_format(&d, line, sizeof line, &n) == 0 && line[0] == 0 && n == 0);
  return check_summary("c sched (disabled)");
}

#endif
