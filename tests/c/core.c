/* The recording core through the C ABI and the inline path, in the default
 * private region: exact counts, ring wrap, the 64-span limit, orphan Stops,
 * NULL and overlong IDs, reading back while writers run, fork.
 * Built with and without LATTE_DISABLE (then every count is 0). */
#define _GNU_SOURCE
#include "can_move.h"
#include "check.h"
#include "counts.h"
#include "latte_inline.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


static const char *thread_ids[8] = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"};

static void *worker(void *arg) {
  int k = (int)(size_t)arg, i;
  for (i = 0; i < 2000; i++) {
    if (i % 2) {
      latte_start(thread_ids[k], LATTE_MODE_FAST);
      latte_stop(NULL, LATTE_MODE_FAST);
    } else {
      latte_start_inline(thread_ids[k], LATTE_MODE_MID);
      latte_stop_inline(NULL, LATTE_MODE_HARD);
    }
  }
  if (k < 4)
    for (i = 0; i < 1000; i++) {
      latte_start_inline("shared", LATTE_MODE_FAST);
      latte_stop_inline("shared", LATTE_MODE_FAST);
    }
  return NULL;
}

static void exact_counts(void) {
  pthread_t th[8];
  size_t k;
  for (k = 0; k < 8; k++) pthread_create(&th[k], NULL, worker, (void *)k);
  for (k = 0; k < 8; k++) pthread_join(th[k], NULL);
  for (k = 0; k < 8; k++) CHECK_EQ_U(count_of(thread_ids[k]), ON(2000));
  CHECK_EQ_U(count_of("shared"), ON(4000));
  CHECK_EQ_U(count_of("never-recorded"), 0);
}

static void ring_wrap(void) {
  enum { N = 70000, CAP = 65536 };
  uint64_t *want = malloc(N * sizeof *want), *got = malloc(CAP * 2 * sizeof *got);
  size_t n = 0, i;
  int ok = 1;
  for (i = 0; i < N; i++) {
    latte_start("wrap", LATTE_MODE_FAST);
    want[i] = latte_stop(NULL, LATTE_MODE_FAST);
  }
  CHECK(latte_samples_snapshot("wrap", got, CAP * 2, &n) == 0);
  CHECK_EQ_U(n, ON(CAP));
  for (i = 0; i < n; i++) ok &= got[i] == want[N - CAP + i];
  CHECK(ok);
  /* A buffer too small: -ERANGE and the needed count. */
#ifndef LATTE_DISABLE
  CHECK(latte_samples_snapshot("wrap", got, 10, &n) == -34);
  CHECK_EQ_U(n, CAP);
#endif
  free(want);
  free(got);
}

static void depth_limit_and_orphans(void) {
  latte_thread_counters before, after;
  int i;
  CHECK(latte_thread_get_counters(&before) == 0);
  for (i = 0; i < 70; i++) latte_start_inline(i % 2 ? "deep" : "deep2", LATTE_MODE_FAST);
  for (i = 0; i < 70; i++) latte_stop_inline(NULL, LATTE_MODE_FAST);
  CHECK(latte_stop(NULL, LATTE_MODE_FAST) == 0);
  CHECK(latte_thread_get_counters(&after) == 0);
  CHECK_EQ_U(after.overflow_starts - before.overflow_starts, ON(6));
  CHECK_EQ_U(after.orphan_stops - before.orphan_stops, ON(7));
  CHECK_EQ_U(after.depth, 0);
  CHECK_EQ_U(count_of("deep") + count_of("deep2"), ON(64));
  CHECK(latte_thread_get_counters(NULL) != 0 || ON(1) == 0);
}

static void odd_ids(void) {
  char name[64];
  const char *long_a = "a_component_name_that_is_longer_than_31_bytes_A";
  const char *long_b = "a_component_name_that_is_longer_than_31_bytes_B";
  uint32_t ta, tb;
  latte_start(NULL, LATTE_MODE_FAST);
  latte_stop(NULL, LATTE_MODE_FAST);
  CHECK_EQ_U(count_of(NULL), ON(1));
  CHECK_EQ_U(count_of("<null-id>"), ON(1));
#ifndef LATTE_DISABLE
  CHECK(latte_id_name(latte_intern_id(NULL), name, sizeof name) == 9);
  CHECK(strcmp(name, "<null-id>") == 0);
  ta = latte_intern_id(long_a);
  tb = latte_intern_id(long_b);
  CHECK(ta != LATTE_INVALID_ID && tb != LATTE_INVALID_ID && ta != tb);
  /* Names are kept whole. */
  CHECK(latte_id_name(ta, name, sizeof name) == (int)strlen(long_a));
  CHECK(strcmp(name, long_a) == 0);
  /* Same text at another address: the same token. */
  strcpy(name, "t3");
  CHECK(latte_intern_id(name) == latte_intern_id("t3"));
  /* A buffer too small gets the name cut, a NUL, and the whole length. */
  CHECK(latte_id_name(ta, name, 4) == (int)strlen(long_a) && strlen(name) == 3);
  CHECK(latte_id_name(99999, name, sizeof name) < 0);
#else
  (void)name; (void)long_a; (void)long_b; (void)ta; (void)tb;
  CHECK(latte_intern_id("x") == LATTE_INVALID_ID);
#endif
  latte_start_inline(long_a, LATTE_MODE_FAST);
  latte_stop_inline(NULL, LATTE_MODE_FAST);
  CHECK_EQ_U(count_of(long_a), ON(1));
  CHECK_EQ_U(count_of(long_b), 0);
  /* Unknown modes record as FAST and do not crash. */
  latte_start("mode", 77);
  latte_stop(NULL, 99);
  CHECK_EQ_U(count_of("mode"), ON(1));
}

static volatile int writers_stop;
static size_t writer_spans;

static void *busy_writer(void *arg) {
  (void)arg;
  while (!writers_stop) {
    latte_start_inline("live", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
    writer_spans++;
  }
  return NULL;
}

static void read_while_writing(void) {
  pthread_t th;
  size_t n, i, cap = 70000;
  uint64_t *buf = malloc(cap * sizeof *buf);
  int bounded = 1;
  writers_stop = 0;
  pthread_create(&th, NULL, busy_writer, NULL);
  for (i = 0; i < 200; i++) {
    n = 0;
    CHECK(latte_samples_snapshot("live", buf, cap, &n) == 0);
    if (n > 65536) bounded = 0;
    usleep(500);
  }
  writers_stop = 1;
  pthread_join(th, NULL);
  CHECK(bounded);
  /* The writer exited: its ring is final and fully readable. */
  CHECK_EQ_U(count_of("live"), ON(writer_spans < 65536 ? writer_spans : 65536));
  free(buf);
}

static void fork_child_is_separate(void) {
  int i, status = 0;
  pid_t pid;
  for (i = 0; i < 10; i++) {
    latte_start_inline("forky", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  pid = fork();
  if (pid == 0) {
    for (i = 0; i < 5; i++) {
      latte_start_inline("forky", LATTE_MODE_FAST);
      latte_stop_inline(NULL, LATTE_MODE_FAST);
    }
    /* The child's recording has begun (inherited): its private region
     * moves into a shared one of its own, with every sample. */
    char name[64];
    snprintf(name, sizeof name, "/latte-test-fork-child-%d", (int)getpid());
    if (ON(1) && !can_move()) _exit(latte_init_shared_region(name) == -EBUSY ? 0 : 6);
    if (latte_init_shared_region(name) != 0) _exit(4);
    if (ON(1) && latte_region_unlink(name) != 0) _exit(5);
    _exit(count_of("forky") == (size_t)ON(15) ? 0 : 3);
  }
  CHECK(pid > 0);
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_EQ_U(count_of("forky"), ON(10));
}

static void report_and_trace(void) {
  char *r = latte_report_string(LATTE_UNIT_CYCLE, LATTE_DATA_RAW);
  char *rc = latte_report_string_color(LATTE_UNIT_CYCLE, LATTE_DATA_RAW);
#ifndef LATTE_DISABLE
  CHECK(r != NULL && strstr(r, "LATTE TELEMETRY [CYCLES][RAW]") && strstr(r, "shared"));
  /* Plain text by default; the colour call has the original's gray borders. */
  CHECK(r != NULL && strchr(r, 0x1b) == NULL);
  CHECK(rc != NULL && strstr(rc, "\x1b[90m") != NULL && strstr(rc, "LATTE TELEMETRY [CYCLES][RAW]"));
  CHECK(latte_trace_write("/nonexistent-dir/trace.json") < 0);
  CHECK(latte_trace_write(NULL) < 0);
  CHECK(strlen(latte_error_string(LATTE_ERR_CORRUPT)) > 0);
  {
    /* Recording began: the private region moves into a shared one, with
     * what it holds; a second call is refused. */
    char name[64];
    size_t before = count_of("forky");
    snprintf(name, sizeof name, "/latte-core-moved-%d", (int)getpid());
    if (can_move()) {
      CHECK(latte_init_shared_region(name) == 0);
      CHECK_EQ_U(count_of("forky"), before);
      CHECK(latte_init_shared_region(name) == -EALREADY);
      CHECK(latte_region_unlink(name) == 0);
    } else {
      /* A kernel that cannot pause writers: refused, nothing changed. */
      CHECK(latte_init_shared_region(name) == -EBUSY);
      CHECK_EQ_U(count_of("forky"), before);
    }
  }
  /* The libraries `make lib` builds have the io_uring flush; a build
   * without it says so. */
  if (latte_flush_supported())
    CHECK(latte_flush_async(-1, LATTE_UNIT_TIME) == -EBADF);
  else
    CHECK(latte_flush_async(1, LATTE_UNIT_TIME) == LATTE_ERR_NOT_SUPPORTED);
#else
  CHECK(r == NULL);
#endif
  latte_string_free(r);
  latte_string_free(rc);
}

#ifndef LATTE_DISABLE
/* Where the inline Start looks for id: its cache entry on the probe order
 * from its home (-1 when absent), as latte__start_on / latte__probe do. */
static int probe_distance(const char *id) {
  size_t i = latte__cache_index(id);
  int n;
  for (n = 0; n < (int)LATTE_CACHE_SIZE; n++, i = (i + 1) & (LATTE_CACHE_SIZE - 1)) {
    if (latte__state.cache[i].key == id) return n;
    if (latte__state.cache[i].key == NULL) return -1;
  }
  return -1;
}

/* IDs whose pointers share a home entry of the per-thread cache: linear
 * probing keeps all of them, each is found without the slow path, and
 * every span lands under its own ID. */
static char id_pool[1 << 18];
static void cache_home_collisions(void) {
  char *p[3];
  int n = 0, k, i;
  size_t home = latte__cache_index(id_pool);
  for (k = 16; k < (1 << 18) - 16 && n < 3; k += 16)
    if (latte__cache_index(id_pool + k) == home) p[n++] = id_pool + k;
  CHECK_EQ_U(n, 3);
  if (n < 3) return;
  strcpy(p[0], "set.a");
  strcpy(p[1], "set.b");
  strcpy(p[2], "set.c");
  for (i = 0; i < 1000; i++)
    for (k = 0; k < 3; k++) {
      if (k == 2 && i % 10) continue;
      latte_start_inline(p[k], LATTE_MODE_FAST);
      latte_stop_inline(NULL, LATTE_MODE_FAST);
    }
  for (k = 0; k < 3; k++) CHECK(probe_distance(p[k]) >= 0);
  CHECK_EQ_U(count_of("set.a"), 1000);
  CHECK_EQ_U(count_of("set.b"), 1000);
  CHECK_EQ_U(count_of("set.c"), 100);
}

/* After its first Start, an ID's second inline Start is a cache hit: the
 * entry on its probe order holds the ring its span went to. For one ID and
 * for 200 on one thread. */
static char sweep_pool[200 * 16];
static void second_start_is_a_hit(void) {
  const char *ids[200];
  uint64_t ring;
  size_t at;
  int k, far = 0;
  for (k = 0, at = 0; k < 200; k++) {
    ids[k] = sweep_pool + at;
    at += (size_t)sprintf(sweep_pool + at, "hit.%d", k) + 1;
  }
  for (k = 0; k < 200; k++) {
    latte_start_inline(ids[k], LATTE_MODE_FAST);
    ring = latte__state.top_ring;
    latte_stop_inline(NULL, LATTE_MODE_FAST);
    CHECK(probe_distance(ids[k]) >= 0);
    /* The second Start finds that entry and pushes the same ring. */
    latte_start_inline(ids[k], LATTE_MODE_FAST);
    CHECK(latte__state.top_ring == ring);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  for (k = 0; k < 200; k++) {
    int d = probe_distance(ids[k]);
    CHECK(d >= 0);
    if (d > 1) far++;
  }
  /* Few IDs in a table of 1,024: nearly all at their home or the next entry. */
  CHECK(far < 20);
  CHECK(latte__state.cache_used <= LATTE_CACHE_MAX_USED);
  for (k = 0; k < 200; k++) CHECK_EQ_U(count_of(ids[k]), 2);
}

/* An ID found past its home entry takes it (src/recorder/cache.rs, rule
 * C4): a thread's hot IDs, first started after others had taken their
 * homes, are soon found by the inline Start's first look, and the IDs
 * moved on stay cached and keep their spans. On a
 * thread of its own, so that the cache starts empty and nothing empties
 * it meanwhile. */
#define HOT_IDS 8
static char home_pool[1 << 20];
static void start_stop(const char *id) {
  latte_start_inline(id, LATTE_MODE_FAST);
  latte_stop_inline(NULL, LATTE_MODE_FAST);
}
static void *hot_takes_home_thread(void *arg) {
  char *hot[HOT_IDS], *old[HOT_IDS][2];
  size_t homes[HOT_IDS];
  size_t at = 0;
  int n = 0, k, j, rounds;
  (void)arg;
  /* Hot IDs with distinct homes, then for each two pointers sharing it. */
  for (at = 0; n < HOT_IDS && at < 4096 * 16; at += 16) {
    size_t h = latte__cache_index(home_pool + at);
    for (k = 0; k < n && homes[k] != h; k++) {
    }
    if (k < n) continue;
    homes[n] = h;
    hot[n] = home_pool + at;
    sprintf(hot[n], "home.hot.%d", n);
    n++;
  }
  CHECK_EQ_U(n, HOT_IDS);
  for (k = 0; k < n; k++)
    for (j = 0; j < 2; j++) {
      for (; at < sizeof home_pool - 16 && latte__cache_index(home_pool + at) != homes[k]; at += 16) {
      }
      CHECK(at < sizeof home_pool - 16);
      old[k][j] = home_pool + at;
      sprintf(old[k][j], "home.old.%d.%d", k, j);
      at += 16;
    }
  for (k = 0; k < n; k++)
    for (j = 0; j < 2; j++) start_stop(old[k][j]);
  for (k = 0; k < n; k++) CHECK(probe_distance(old[k][0]) == 0);
  /* First Start: cached at the first empty entry, past the old ones. */
  for (k = 0; k < n; k++) start_stop(hot[k]);
  for (k = 0; k < n; k++) CHECK(probe_distance(hot[k]) == 2);
  /* Later Starts find them by the probe; about one such Start in 64 on
   * the thread (drawn at random) promotes its ID. A hot ID still past its
   * home stays there 4,096 rounds with a chance of (63/64)^4096, 1e-28. */
  for (rounds = 0; rounds < 4096; rounds++) {
    for (k = 0; k < n && probe_distance(hot[k]) == 0; k++) {
    }
    if (k == n) break;
    for (k = 0; k < n; k++) start_stop(hot[k]);
  }
  CHECK(rounds < 4096);
  for (k = 0; k < n; k++) {
    CHECK(probe_distance(hot[k]) == 0);
    CHECK(probe_distance(old[k][0]) == 2);
    CHECK(probe_distance(old[k][1]) == 1);
  }
  /* Each found again without the slow path: one sample more in its ring. */
  for (k = 0; k < n; k++) {
    start_stop(hot[k]);
    for (j = 0; j < 2; j++) start_stop(old[k][j]);
  }
  for (k = 0; k < n; k++) {
    CHECK_EQ_U(count_of(hot[k]), (size_t)rounds + 2);
    for (j = 0; j < 2; j++) CHECK_EQ_U(count_of(old[k][j]), 2);
  }
  CHECK(latte__state.cache_used == (uint64_t)(3 * n));
  return NULL;
}
static void hot_id_takes_its_home(void) {
  pthread_t th;
  pthread_create(&th, NULL, hot_takes_home_thread, NULL);
  pthread_join(th, NULL);
}

/* latte_thread_prefault commits a fresh ring's pages (one touch a page, the ring
 * of 65,536 samples of 16 bytes plus its header: 257 pages), caches the ID
 * for the inline path, and changes no sample: the spans after it read back
 * exactly. On a ring that has wrapped there is nothing left to touch. */
static void prefault_commits_a_fresh_ring(void) {
  int64_t pages = latte_thread_prefault("prefault.fresh");
  int k;
  CHECK(pages >= 256 && pages <= 257);
  CHECK(probe_distance("prefault.fresh") >= 0);
  CHECK_EQ_U(count_of("prefault.fresh"), 0);
  for (k = 0; k < 10; k++) {
    latte_start_inline("prefault.fresh", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  CHECK_EQ_U(count_of("prefault.fresh"), 10);
  /* Ten samples in: the first page is still touched (it holds index 10). */
  CHECK(latte_thread_prefault("prefault.fresh") == pages);
  for (k = 0; k < (int)LATTE_DEFAULT_SAMPLES; k++) {
    latte_start_inline("prefault.fresh", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  CHECK(latte_thread_prefault("prefault.fresh") == 0);
}
#else
static void prefault_commits_a_fresh_ring(void) { CHECK(latte_thread_prefault("prefault.fresh") == 0); }
static void cache_home_collisions(void) {}
static void second_start_is_a_hit(void) {}
static void hot_id_takes_its_home(void) {}
#endif

int main(void) {
  exact_counts();
  cache_home_collisions();
  second_start_is_a_hit();
  hot_id_takes_its_home();
  prefault_commits_a_fresh_ring();
  ring_wrap();
  depth_limit_and_orphans();
  odd_ids();
  read_while_writing();
  fork_child_is_separate();
  report_and_trace();
  return check_summary("c core");
}
