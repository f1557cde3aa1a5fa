/* Recording from a signal handler through the inline path: a handler's
 * spans, interleaved at any instruction with the interrupted thread's
 * Start and Stop, leave its span stack intact (every sample keeps its
 * depth and modes); and a handler that records under the ID its thread is
 * putting in the ID cache (a round-robin over more IDs than the cache
 * keeps, so that every Start inserts) records under that ID; and Starts
 * interrupted by a handler that records under 1,500 other IDs (emptying
 * the cache and reusing its entries) keep their own ID; and a handler that
 * records under the IDs sharing the home entry of the one its thread is
 * starting, while the thread promotes among them, keeps every span under
 * its own ID. The Rust path has the same tests (tests/signals.rs,
 * tests/cache_promotion.rs). */
#define _POSIX_C_SOURCE 200809L
#include "latte_inline.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "counts.h"

static volatile sig_atomic_t g_done;
static volatile long g_handler_spans;

static void on_usr1(int sig) {
  (void)sig;
  latte_start_inline("sig.c.handler", LATTE_MODE_FAST);
  (void)latte_stop_inline(NULL, LATTE_MODE_FAST);
  g_handler_spans = g_handler_spans + 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile int g_ready;

/* Runs worker(arg) on a thread of its own, with handler installed for sig,
 * and sends it sig every 20 us from when it sets g_ready until it sets
 * g_done. */
/* The worker and the signal of the run under way, for `run_worker`. */
static void *(*g_worker)(void *);
static int g_sig;

/* Runs the worker, then blocks the signal before the thread ends: the
 * sender may find `g_done` still 0 and send once more after the worker
 * returned, and a handler run during the thread's teardown would find its
 * latte state retired (its spans counted as late drops, not recorded). */
static void *run_worker(void *arg) {
  void *r = g_worker(arg);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, g_sig);
  pthread_sigmask(SIG_BLOCK, &s, NULL);
  return r;
}

static void under_signals(int sig, void (*handler)(int), void *(*worker)(void *), void *arg) {
  struct sigaction act;
  struct timespec gap = {0, 20000};
  pthread_t th;
  memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  act.sa_flags = SA_RESTART;
  sigemptyset(&act.sa_mask);
  sigaction(sig, &act, NULL);
  g_done = 0;
  g_ready = 0;
  g_worker = worker;
  g_sig = sig;
  pthread_create(&th, NULL, run_worker, arg);
  while (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) nanosleep(&gap, NULL);
  while (!g_done) {
    pthread_kill(th, sig);
    nanosleep(&gap, NULL);
  }
  pthread_join(th, NULL);
}

/* The round-robin's names, the index the worker is starting (-1: none),
 * and the handler's spans per name. */
#define RR_IDS 2000
static char g_rr_names[RR_IDS][16];
static long g_rr_current = -1;
static long g_rr_handler[RR_IDS];

static void on_usr2(int sig) {
  long i = __atomic_load_n(&g_rr_current, __ATOMIC_RELAXED);
  (void)sig;
  if (i < 0) return;
  latte_start_inline(g_rr_names[i], LATTE_MODE_FAST);
  (void)latte_stop_inline(NULL, LATTE_MODE_FAST);
  __atomic_fetch_add(&g_rr_handler[i], 1, __ATOMIC_RELAXED);
}

static void *rr_worker(void *arg) {
  long *per_id = (long *)arg;
  double t0;
  int i;
  /* Every name interned and given its ring first: the Starts below take
   * the thread's second level, with no lock, and insert into the cache. */
  for (i = 0; i < RR_IDS; i++) {
    latte_start_inline(g_rr_names[i], LATTE_MODE_FAST);
    (void)latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
  t0 = now_s();
  while (now_s() - t0 < 1.0) {
    for (i = 0; i < RR_IDS; i++) {
      __atomic_store_n(&g_rr_current, (long)i, __ATOMIC_RELAXED);
      latte_start_inline(g_rr_names[i], LATTE_MODE_FAST);
      __atomic_store_n(&g_rr_current, -1L, __ATOMIC_RELAXED);
      (void)latte_stop_inline(NULL, LATTE_MODE_FAST);
      per_id[i]++;
    }
  }
  g_done = 1;
  return NULL;
}

/* The round-robin under SIGUSR2; the samples of each name must be what the
 * worker and the handler wrote under it. */
static void handler_under_the_id_being_cached(void) {
  static long per_id[RR_IDS];
  static uint32_t tokens[RR_IDS];
  static size_t got[RR_IDS];
  latte_sample_record *recs;
  size_t n = 0, i, wrong = 0, handler = 0;
  long k;
  for (k = 0; k < RR_IDS; k++) snprintf(g_rr_names[k], sizeof g_rr_names[k], "sig.c.rr.%ld", k);
  under_signals(SIGUSR2, on_usr2, rr_worker, per_id);
  /* The worker interned the names in order: their tokens are consecutive. */
  for (k = 0; k < RR_IDS; k++) tokens[k] = latte_intern_id(g_rr_names[k]);
#ifndef LATTE_DISABLE
  for (k = 1; k < RR_IDS && tokens[k] == tokens[0] + (uint32_t)k; k++) {
  }
  CHECK_EQ_U(k, RR_IDS);
#endif
  (void)latte_samples_extract(NULL, 0, &n);
  recs = (latte_sample_record *)malloc((n + 1) * sizeof *recs);
  CHECK(latte_samples_extract(recs, n + 1, &n) == 0);
  for (i = 0; i < n; i++)
    if (recs[i].token - tokens[0] < RR_IDS) got[recs[i].token - tokens[0]]++;
  for (k = 0; k < RR_IDS; k++) {
    long want = 1 + per_id[k] + g_rr_handler[k];
    handler += (size_t)g_rr_handler[k];
    wrong += got[k] != (size_t)(want < 65536 ? want : 65536);
  }
  free(recs);
#ifndef LATTE_DISABLE
  printf("signals: %zu handler spans under the ID being cached, %zu IDs with a wrong count\n", handler, wrong);
  CHECK(handler > 100);
  CHECK_EQ_U(wrong, 0);
#endif
}

static void *worker(void *arg) {
  long *iters = (long *)arg;
  double t0;
  /* Every ID resolved before the signals: only fast paths below. */
  on_usr1(0);
  latte_start_inline("sig.c.outer", LATTE_MODE_HARD);
  latte_start_inline("sig.c.inner", LATTE_MODE_MID);
  (void)latte_stop_inline(NULL, LATTE_MODE_MID);
  (void)latte_stop_inline(NULL, LATTE_MODE_HARD);
  *iters = 1;
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
  t0 = now_s();
  while (now_s() - t0 < 1.0) {
    int k;
    for (k = 0; k < 100; k++) {
      latte_start_inline("sig.c.outer", LATTE_MODE_HARD);
      latte_start_inline("sig.c.inner", LATTE_MODE_MID);
      (void)latte_stop_inline(NULL, LATTE_MODE_MID);
      (void)latte_stop_inline(NULL, LATTE_MODE_HARD);
    }
    *iters += 100;
  }
  g_done = 1;
  return NULL;
}

/* Phase 3: 256 of the round-robin's names on the worker (HARD), 1,500
 * others in the handler (MID), 600 spans a signal. */
#define MINE_IDS 256
#define OTHER_IDS 1500
static char g_other_names[OTHER_IDS][24];
static long g_other_next;
static long g_other_handler[OTHER_IDS];

static void on_usr2_many(int sig) {
  int k;
  (void)sig;
  for (k = 0; k < 600; k++) {
    long i = __atomic_fetch_add(&g_other_next, 1, __ATOMIC_RELAXED) % OTHER_IDS;
    latte_start_inline(g_other_names[i], LATTE_MODE_MID);
    (void)latte_stop_inline(NULL, LATTE_MODE_MID);
    __atomic_fetch_add(&g_other_handler[i], 1, __ATOMIC_RELAXED);
  }
}

static void *mine_worker(void *arg) {
  long *per_id = (long *)arg;
  double t0;
  int i;
  for (i = 0; i < OTHER_IDS; i++) {
    latte_start_inline(g_other_names[i], LATTE_MODE_FAST);
    (void)latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
  t0 = now_s();
  while (now_s() - t0 < 1.0) {
    for (i = 0; i < MINE_IDS; i++) {
      latte_start_inline(g_rr_names[i], LATTE_MODE_HARD);
      (void)latte_stop_inline(NULL, LATTE_MODE_HARD);
      per_id[i]++;
    }
  }
  g_done = 1;
  return NULL;
}

/* The worker's IDs keep exactly the worker's samples (all HARD), the
 * handler's exactly the handler's. Runs after phase 2, whose worker
 * interned the round-robin's names and wrote one span under each. */
static void starts_interrupted_by_a_handler_reusing_their_entries(void) {
  static long per_id[MINE_IDS];
  static size_t got_mine[MINE_IDS], got_other[OTHER_IDS], foreign[MINE_IDS];
  latte_sample_record *recs;
  uint32_t mine0, other0;
  size_t n = 0, i, wrong = 0, handler = 0, missing = 0;
  unsigned long long refused = 0;
  long k;
  for (k = 0; k < OTHER_IDS; k++) snprintf(g_other_names[k], sizeof g_other_names[k], "sig.c.other.%ld", k);
#ifndef LATTE_DISABLE
  {
    latte_counters c;
    memset(&c, 0, sizeof c);
    (void)latte_region_get_counters(&c);
    refused = c.reentrant_drops;
  }
#endif
  under_signals(SIGUSR2, on_usr2_many, mine_worker, per_id);
  mine0 = latte_intern_id(g_rr_names[0]);
  other0 = latte_intern_id(g_other_names[0]);
  (void)latte_samples_extract(NULL, 0, &n);
  recs = (latte_sample_record *)malloc((n + 1) * sizeof *recs);
  CHECK(latte_samples_extract(recs, n + 1, &n) == 0);
  for (i = 0; i < n; i++) {
    uint32_t m = recs[i].token - mine0, o = recs[i].token - other0;
    if (m < MINE_IDS && recs[i].start_mode == LATTE_MODE_HARD) got_mine[m]++;
    if (m < MINE_IDS && recs[i].start_mode == LATTE_MODE_MID) foreign[m]++;
    if (o < OTHER_IDS) got_other[o]++;
  }
  free(recs);
  /* Phase 2's spans under the worker's names were FAST; a handler's span
   * in one of its rings would be MID. */
  for (k = 0; k < MINE_IDS; k++) wrong += got_mine[k] != (size_t)(per_id[k] < 65536 ? per_id[k] : 65536) || foreign[k] != 0;
  /* A handler's span that lands in its thread's slow path (the worker
   * holding the registry lock after the handlers' IDs pushed its own out
   * of the cache) is refused and counted as a reentrant drop: each ID
   * holds at most its spans, and the spans missing are exactly the
   * refusals counted meanwhile. */
  for (k = 0; k < OTHER_IDS; k++) {
    long want = 1 + g_other_handler[k];
    size_t cap = (size_t)(want < 65536 ? want : 65536);
    handler += (size_t)g_other_handler[k];
    if (got_other[k] > cap)
      wrong++;
    else
      missing += cap - got_other[k];
  }
#ifndef LATTE_DISABLE
  {
    latte_counters c;
    memset(&c, 0, sizeof c);
    (void)latte_region_get_counters(&c);
    refused = c.reentrant_drops - refused;
    printf("signals: %zu handler spans under 1,500 other IDs, %zu IDs with too many, %zu spans missing, %llu refused (late drops %llu)\n",
           handler, wrong, missing, refused, (unsigned long long)c.late_drops);
  }
  CHECK(handler > 6000);
  CHECK_EQ_U(wrong, 0);
  CHECK_EQ_U(missing, refused);
#else
  (void)refused;
  (void)missing;
#endif
}

/* Phase 4: 300 names, three to a home entry of the cache (100 homes 8
 * entries apart), so that two of each three sit past their home and the
 * thread's Starts promote among them (src/recorder/cache.rs, rule C4);
 * the handler records under the three sharing the home of the ID being
 * started, while that Start may be swapping two of them. */
#define PR_IDS 300
static char g_pr_pool[1 << 22];
static char *g_pr_names[PR_IDS];
static long g_pr_current = -1;
static long g_pr_handler[PR_IDS];
#ifndef LATTE_DISABLE
static size_t g_pr_past_home;
#endif

static void on_usr2_trio(int sig) {
  long i = __atomic_load_n(&g_pr_current, __ATOMIC_RELAXED), j;
  (void)sig;
  if (i < 0) return;
  for (j = i / 3 * 3; j < i / 3 * 3 + 3; j++) {
    latte_start_inline(g_pr_names[j], LATTE_MODE_FAST);
    (void)latte_stop_inline(NULL, LATTE_MODE_FAST);
    __atomic_fetch_add(&g_pr_handler[j], 1, __ATOMIC_RELAXED);
  }
}

static void *pr_worker(void *arg) {
  long *per_id = (long *)arg;
  int i, r;
  for (i = 0; i < PR_IDS; i++) {
    latte_start_inline(g_pr_names[i], LATTE_MODE_FAST);
    (void)latte_stop_inline(NULL, LATTE_MODE_FAST);
    per_id[i] = 1;
  }
#ifndef LATTE_DISABLE
  for (i = 0; i < PR_IDS; i++) g_pr_past_home += latte__state.cache[latte__cache_index(g_pr_names[i])].key != g_pr_names[i];
#endif
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
  /* Each ID stays below its ring's 65,536 samples: every one kept. */
  for (r = 0; r < 20000; r++)
    for (i = 0; i < PR_IDS; i++) {
      __atomic_store_n(&g_pr_current, (long)i, __ATOMIC_RELAXED);
      __atomic_signal_fence(__ATOMIC_SEQ_CST);
      latte_start_inline(g_pr_names[i], LATTE_MODE_FAST);
      __atomic_signal_fence(__ATOMIC_SEQ_CST);
      __atomic_store_n(&g_pr_current, -1L, __ATOMIC_RELAXED);
      (void)latte_stop_inline(NULL, LATTE_MODE_FAST);
      per_id[i]++;
    }
  g_done = 1;
  return NULL;
}

static void handlers_during_promotions(void) {
  static long per_id[PR_IDS];
  size_t o, n = 0, wrong = 0, handler = 0;
  int count[PR_IDS / 3] = {0}, k;
  /* The pool's pointers by home: the first three of homes 0, 8, 16, ... */
  for (o = 0; o + 32 <= sizeof g_pr_pool && n < PR_IDS; o += 32) {
#ifndef LATTE_DISABLE
    size_t h = latte__cache_index(g_pr_pool + o);
#else
    size_t h = (o / 32) % (8 * PR_IDS / 3);
#endif
    if (h % 8 || h / 8 >= PR_IDS / 3 || count[h / 8] == 3) continue;
    g_pr_names[h / 8 * 3 + (size_t)count[h / 8]++] = g_pr_pool + o;
    n++;
  }
  CHECK_EQ_U(n, PR_IDS);
  if (n < PR_IDS) return;
  for (k = 0; k < PR_IDS; k++) snprintf(g_pr_names[k], 32, "sig.c.pr.%d", k);
  under_signals(SIGUSR2, on_usr2_trio, pr_worker, per_id);
  for (k = 0; k < PR_IDS; k++) {
    handler += (size_t)g_pr_handler[k];
    wrong += count_of(g_pr_names[k]) != (size_t)ON(per_id[k] + g_pr_handler[k]);
  }
#ifndef LATTE_DISABLE
  printf("signals: %zu handler spans among IDs being promoted, %zu IDs past their home at first, %zu IDs with a wrong count\n", handler,
         g_pr_past_home, wrong);
  CHECK_EQ_U(g_pr_past_home, 2 * PR_IDS / 3);
  CHECK(handler > 100);
#endif
  CHECK_EQ_U(wrong, 0);
}

int main(void) {
  long iters = 0;
  size_t n = 0, i, bad = 0, outer = 0, inner = 0;
  latte_sample_record *recs;
  uint32_t t_outer, t_inner, t_handler;
  under_signals(SIGUSR1, on_usr1, worker, &iters);
  t_outer = latte_intern_id("sig.c.outer");
  t_inner = latte_intern_id("sig.c.inner");
  t_handler = latte_intern_id("sig.c.handler");
  (void)latte_samples_extract(NULL, 0, &n);
  recs = (latte_sample_record *)malloc((n + 1) * sizeof *recs);
  CHECK(latte_samples_extract(recs, n + 1, &n) == 0);
  for (i = 0; i < n; i++) {
    const latte_sample_record *r = &recs[i];
    if (r->token == t_outer) {
      outer++;
      bad += !(r->depth == 0 && r->start_mode == LATTE_MODE_HARD && r->stop_mode == LATTE_MODE_HARD);
    } else if (r->token == t_inner) {
      inner++;
      bad += !(r->depth == 1 && r->start_mode == LATTE_MODE_MID && r->stop_mode == LATTE_MODE_MID);
    } else if (r->token == t_handler) {
      bad += !(r->depth <= 2 && r->start_mode == LATTE_MODE_FAST && r->stop_mode == LATTE_MODE_FAST);
    }
  }
  free(recs);
#ifndef LATTE_DISABLE
  printf("signals: %ld handler spans, %ld iterations\n", (long)g_handler_spans, iters);
  CHECK(g_handler_spans > 100);
  CHECK_EQ_U(outer, iters < 65536 ? iters : 65536);
  CHECK_EQ_U(inner, iters < 65536 ? iters : 65536);
#endif
  CHECK_EQ_U(bad, 0);
  handler_under_the_id_being_cached();
  starts_interrupted_by_a_handler_reusing_their_entries();
  handlers_during_promotions();
  return check_summary("c signals");
}
