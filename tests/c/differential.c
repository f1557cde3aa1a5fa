/* The inline C hot path against the library's (Rust) hot path: random
 * sequences of Starts, Stops and pulses, run once through each.
 *
 * For each seed, two threads run the same sequence of operations, one
 * through latte_inline.h (latte_start_inline, latte_stop_inline,
 * latte_pulse_inline) and one through the C ABI (latte_start, latte_stop,
 * latte_pulse), on the same ID pointers. A sequence nests past the 64 spans
 * a thread can hold open, Stops with nothing open, pulses at eight sites,
 * uses a few hot IDs, hundreds of cold ones (more than the thread's ID
 * cache keeps) and IDs the thread meets for the first time, and raises
 * signals whose handler records a span and a pulse through the same path
 * as the thread it interrupts. Then, per ID, both threads' rings must hold
 * the same number of samples with the same bits above the duration (depth,
 * start and stop modes, flags), every Stop must have returned a duration
 * exactly when the other path's did, and the threads' counters (overflow,
 * orphan Stops, drops, depth) must be equal. The first difference is
 * printed with its seed. */
#define _GNU_SOURCE
#include "check.h"
#include "latte_inline.h"
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef LATTE_DISABLE

#define OPS 20000
#define SEEDS 5
#define HOT 8
#define COLD 600
#define FRESH_PER_SEED 200
#define SITES 8
#define RING 1024

static char region_name[64];
static char *hot_ids[HOT], *cold_ids[COLD], *fresh_ids[SEEDS * FRESH_PER_SEED];
static char *site_ids[SITES];
static const char *sig_span = "diff.signal.span", *sig_pulse = "diff.signal.pulse";

/* What one thread saw: its counters and each Stop's "returned a duration". */
struct run {
  int inl;
  uint64_t seed;
  int fresh_base;
  latte_thread_counters counters;
  unsigned char stopped[OPS];
  uint32_t thread_idx;
  /* Posted by the thread when its sequence is done; the thread then waits
   * on `release`, so that its rings stay its own while they are compared
   * (a ring of an exited thread may be handed to the next). */
  sem_t done, release;
};

static __thread int tls_inline;
static __thread latte_pulse_site sig_sites[2];

static void on_signal(int sig) {
  (void)sig;
  if (tls_inline) {
    latte_start_inline(sig_span, LATTE_MODE_FAST);
    latte_pulse_inline(&sig_sites[1], sig_pulse);
    latte_stop_inline(NULL, LATTE_MODE_MID);
  } else {
    latte_start(sig_span, LATTE_MODE_FAST);
    latte_pulse(&sig_sites[0], sig_pulse);
    latte_stop(NULL, LATTE_MODE_MID);
  }
}

static uint64_t next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static void *run_thread(void *arg) {
  struct run *r = arg;
  latte_pulse_site sites[SITES];
  uint64_t s = r->seed;
  int fresh = 0, i, depth = 0;
  const char *open[80];
  memset(sites, 0, sizeof sites);
  tls_inline = r->inl;
  for (i = 0; i < OPS; i++) {
    uint64_t x = next(&s);
    unsigned op = (unsigned)(x % 100);
    latte_mode mode = (latte_mode)((x >> 8) % 3);
    const char *id;
    uint64_t pick = (x >> 16) % 100;
    r->stopped[i] = 2;
    if (pick < 70)
      id = hot_ids[(x >> 24) % HOT];
    else if (pick < 99 || fresh >= FRESH_PER_SEED)
      id = cold_ids[(x >> 24) % COLD];
    else
      id = fresh_ids[r->fresh_base + fresh++];
    /* Mostly a random walk of the depth, up to past 64 open spans. */
    if (op < 44 && depth < 72) {
      if (r->inl)
        latte_start_inline(id, mode);
      else
        latte_start(id, mode);
      if (depth < 80) open[depth] = id;
      depth++;
    } else if (op < 88) {
      /* With the ID of the innermost span or NULL; at depth 0 an orphan. */
      const char *sid = (x >> 40) & 1 && depth > 0 && depth <= 80 ? open[depth - 1] : NULL;
      uint64_t d = r->inl ? latte_stop_inline(sid, mode) : latte_stop(sid, mode);
      r->stopped[i] = d != 0;
      if (depth > 0) depth--;
    } else if (op < 97) {
      unsigned k = (unsigned)((x >> 32) % SITES);
      if (r->inl)
        latte_pulse_inline(&sites[k], site_ids[k]);
      else
        latte_pulse(&sites[k], site_ids[k]);
    } else {
      raise(SIGUSR1);
    }
  }
  CHECK(latte_thread_get_counters(&r->counters) == 0);
  r->thread_idx = r->counters.thread_idx;
  sem_post(&r->done);
  while (sem_wait(&r->release) != 0) {
  }
  return NULL;
}

/* The samples of `id` that thread `thread_idx` wrote, in order. */
static size_t read_samples(latte_reader *rd, uint32_t tok, uint32_t thread_idx, latte_raw_sample *out, size_t cap) {
  static latte_slot_info slots[4096];
  size_t n = 0, i, total = 0;
  latte_reader_slots(rd, slots, 4096, &n);
  for (i = 0; i < n && i < 4096; i++)
    if (slots[i].id_token == tok && slots[i].thread_idx == thread_idx) {
      latte_cursor cur;
      size_t got = 0;
      memset(&cur, 0, sizeof cur);
      CHECK(latte_reader_read(rd, slots[i].index, &cur, out + total, cap - total, &got) == 0);
      CHECK_EQ_U(cur.read + cur.lost, slots[i].write_idx);
      total += got;
    }
  return total;
}

static int compare(const struct run *a, const struct run *b) {
  static latte_raw_sample x[RING], y[RING];
  latte_reader *rd = NULL;
  uint32_t t, n;
  int bad = 0, i;
  char name[128];
  for (i = 0; i < OPS && !bad; i++)
    if (a->stopped[i] != b->stopped[i]) {
      fprintf(stderr, "seed %llu: op %d: the inline Stop returned %s, the ABI's %s\n", (unsigned long long)a->seed, i,
              a->stopped[i] ? "a duration" : "0", b->stopped[i] ? "a duration" : "0");
      bad = 1;
    }
  if (a->counters.overflow_starts != b->counters.overflow_starts || a->counters.orphan_stops != b->counters.orphan_stops ||
      a->counters.dropped != b->counters.dropped || a->counters.depth != b->counters.depth) {
    fprintf(stderr, "seed %llu: counters differ: overflow %llu/%llu orphan %llu/%llu dropped %llu/%llu depth %u/%u\n",
            (unsigned long long)a->seed, (unsigned long long)a->counters.overflow_starts,
            (unsigned long long)b->counters.overflow_starts, (unsigned long long)a->counters.orphan_stops,
            (unsigned long long)b->counters.orphan_stops, (unsigned long long)a->counters.dropped,
            (unsigned long long)b->counters.dropped, a->counters.depth, b->counters.depth);
    bad = 1;
  }
  /* A sequence that never overflows or orphans would test less. */
  CHECK(a->counters.overflow_starts > 0 && a->counters.orphan_stops > 0);
  CHECK(latte_reader_open(region_name, &rd) == 0);
  if (!rd) return 1;
  n = latte_reader_id_count(rd);
  for (t = 0; t < n && !bad; t++) {
    size_t nx, ny, k;
    if (latte_reader_id_name(rd, t, name, sizeof name) < 0) continue;
    nx = read_samples(rd, t, a->thread_idx, x, RING);
    ny = read_samples(rd, t, b->thread_idx, y, RING);
    if (nx != ny) {
      fprintf(stderr, "seed %llu: ID %s: %zu samples inline, %zu through the ABI\n", (unsigned long long)a->seed, name, nx, ny);
      bad = 1;
      break;
    }
    for (k = 0; k < nx; k++)
      if (x[k].packed >> LATTE_DEPTH_SHIFT != y[k].packed >> LATTE_DEPTH_SHIFT) {
        fprintf(stderr, "seed %llu: ID %s: sample %zu: bits %#llx inline, %#llx through the ABI\n", (unsigned long long)a->seed,
                name, k, (unsigned long long)(x[k].packed >> LATTE_DEPTH_SHIFT),
                (unsigned long long)(y[k].packed >> LATTE_DEPTH_SHIFT));
        bad = 1;
        break;
      }
  }
  latte_reader_close(rd);
  return bad;
}

static char *id_name(const char *kind, int i) {
  char *s = malloc(32);
  snprintf(s, 32, "diff.%s.%d", kind, i);
  return s;
}

int main(void) {
  latte_region_config cfg;
  struct sigaction sa;
  static struct run runs[2];
  int i, seed;
  snprintf(region_name, sizeof region_name, "/latte-test-differential-%d", (int)getpid());
  memset(&cfg, 0, sizeof cfg);
  cfg.samples_per_slot = RING;
  CHECK(latte_init_shared_region_with(region_name, &cfg) == 0);
  for (i = 0; i < HOT; i++) hot_ids[i] = id_name("hot", i);
  for (i = 0; i < COLD; i++) cold_ids[i] = id_name("cold", i);
  for (i = 0; i < SEEDS * FRESH_PER_SEED; i++) fresh_ids[i] = id_name("fresh", i);
  for (i = 0; i < SITES; i++) site_ids[i] = id_name("pulse", i);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  for (seed = 0; seed < SEEDS; seed++) {
    pthread_t th[2];
    int k;
    for (k = 0; k < 2; k++) {
      /* Which path runs first alternates: the second finds the IDs interned. */
      struct run *r = &runs[k];
      memset(r, 0, sizeof *r);
      sem_init(&r->done, 0, 0);
      sem_init(&r->release, 0, 0);
      r->inl = (k + seed) % 2;
      r->seed = 0x9E3779B97F4A7C15ull * (uint64_t)(seed + 1);
      r->fresh_base = seed * FRESH_PER_SEED;
      CHECK(pthread_create(&th[k], NULL, run_thread, r) == 0);
      while (sem_wait(&r->done) != 0) {
      }
    }
    CHECK(compare(runs[0].inl ? &runs[0] : &runs[1], runs[0].inl ? &runs[1] : &runs[0]) == 0);
    for (k = 0; k < 2; k++) {
      sem_post(&runs[k].release);
      CHECK(pthread_join(th[k], NULL) == 0);
      sem_destroy(&runs[k].done);
      sem_destroy(&runs[k].release);
    }
  }
  CHECK(latte_region_unlink(region_name) == 0);
  return check_summary("c differential");
}

#else

int main(void) {
  latte_start_inline("diff.off", LATTE_MODE_FAST);
  CHECK(latte_stop_inline(NULL, LATTE_MODE_FAST) == 0);
  return check_summary("c differential (disabled)");
}

#endif
