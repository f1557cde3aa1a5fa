/*
 * latte_inline.h: the Start/Stop/pulse fast path for C and C++ callers,
 * inlined into the caller. Hand-written (not generated).
 *
 * It reads and writes the per-thread state that Rust owns and lays out
 * (latte_thread in latte.h) exactly as Rust's own path does (src/recorder/hot.rs:
 * start, stop_at, pulse, write_sample), the LATTE_SAMPLE_SWITCHED bit
 * included; every slow path (first use of a
 * thread or an ID, more than 64 open spans, a Stop with nothing open, a
 * span that cannot be recorded) is a call into the library.
 * tests/c/shared.c checks that both paths write identical samples, and
 * tests/c/sched.c that they flag the same ones.
 *
 * The state is a thread-local object of the caller's (latte__state below),
 * zero-initialised, so the fast path reaches it at a fixed offset from the
 * thread pointer with no indirection; the first slow path attaches it to the
 * thread. In C++ there is one per program (an inline variable); in C it is
 * a weak definition, merged across translation units by the linker. Should
 * a program end up with two (say a shared library built with hidden
 * visibility), each Start through the other one moves the open spans over
 * (src/layout.rs, latte_thread): correct, only slower.
 *
 * Ring writer protocol (src/ring.rs, steps W1-W3): load write_idx (relaxed,
 * sole writer), store the sample's two words (release), store write_idx + 1
 * (release). On x86-64 these are plain moves.
 *
 * latte retires a thread after its thread-local destructors (in a pthread
 * key's destructor, src/recorder/exit.rs; where no key can be had, in a
 * thread-local destructor of its own): those may record. Do not record
 * after the retirement (from a pthread key destructor that runs after
 * latte's): such spans go to a sink and are counted as late drops, but a
 * pulse site resolved earlier would write into a ring that may have been
 * handed to another thread.
 */
#ifndef LATTE_INLINE_H
#define LATTE_INLINE_H

#include "latte.h"
#include <x86intrin.h>

#ifdef __cplusplus
#define LATTE__FN inline
#define LATTE__TLS thread_local
#else
#define LATTE__FN static inline
#define LATTE__TLS __thread
#endif
/* The fast path is inlined wherever it is called, however many call sites a
 * program has: left to its own judgement GCC stops inlining it in a function
 * with a few hundred of them (tests/inline: 256), and each Start, Stop or
 * pulse there pays a call. (The original Latte forces it the same way.) The
 * rare paths stay the compiler's choice. */
#define LATTE_ALWAYS_INLINE __attribute__((always_inline))
#define LATTE__HOT LATTE__FN LATTE_ALWAYS_INLINE

#ifndef LATTE_DISABLE

#ifdef __cplusplus
inline thread_local latte_thread latte__state{};
#else
__attribute__((weak)) __thread latte_thread latte__state;
#endif

LATTE__HOT latte_mode latte__norm(latte_mode m) {
  return (m == LATTE_MODE_MID || m == LATTE_MODE_HARD) ? m : LATTE_MODE_FAST;
}

/* rdtscp without storing the processor id it also returns (the intrinsic
 * takes an address for it, which can cost a store on the timed path). */
LATTE__HOT uint64_t latte__rdtscp(void) {
  uint32_t lo, hi;
  __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi) : : "rcx");
  return ((uint64_t)hi << 32) | lo;
}

LATTE__HOT uint64_t latte__tsc_start(latte_mode m) {
  if (m == LATTE_MODE_MID) return latte__rdtscp();
  if (m == LATTE_MODE_HARD) {
    _mm_lfence();
    return latte__rdtscp();
  }
  return __rdtsc();
}

LATTE__HOT uint64_t latte__tsc_stop(latte_mode m) {
  if (m == LATTE_MODE_MID) return latte__rdtscp();
  if (m == LATTE_MODE_HARD) {
    uint64_t t = latte__rdtscp();
    _mm_lfence();
    return t;
  }
  return __rdtsc();
}

/* The thread's switch count (src/recorder/hot.rs: switch_count): its perf
 * switch ring's head, or a word that never moves when it is not tracked.
 * Relaxed: only ever compared with an earlier load by the same thread. */
LATTE__HOT uint64_t latte__switch_count(const latte_thread *t) {
  return __atomic_load_n(t->switch_head, __ATOMIC_RELAXED);
}

/* The thread's switch base (latte_thread.switch_base), 0 when it is not
 * tracked, loaded through an asm: the compiler would compare memory with an
 * immediate, which does not fuse with the branch on it (and with the
 * thread-pointer prefix is an 11-byte instruction); a load and a test do. */
LATTE__HOT uint64_t latte__switch_base(const latte_thread *t) {
  uint64_t base;
  __asm__("movq %1, %0" : "=r"(base) : "m"(t->switch_base));
  return base;
}

/* Same as Rust's switch_mark (src/recorder/hot.rs): 0 on an untracked
 * thread, which loads nothing more; else count + base, never 0. Step H of
 * the binding protocol (src/sched/watch.rs). */
LATTE__HOT uint64_t latte__switch_mark(const latte_thread *t) {
  uint64_t base = latte__switch_base(t);
  return __builtin_expect(base != 0, 0) ? latte__switch_count(t) + base : 0;
}

/* Same as Rust's switched_since: the LATTE_SAMPLE_SWITCHED bit of an
 * interval that began at `mark`, and the mark now (*now). */
LATTE__HOT uint64_t latte__switched_since(const latte_thread *t, uint64_t mark, uint64_t *now) {
  uint64_t base = latte__switch_base(t), count;
  *now = 0;
  if (__builtin_expect(base == 0, 1)) return 0;
  count = latte__switch_count(t);
  *now = count + base;
  /* From a mark of 0 the count is compared with 0: now with base. */
  return (uint64_t)(*now != (mark != 0 ? mark : base)) << LATTE_SAMPLE_SWITCHED_SHIFT;
}

/* Home entry of an ID pointer in the per-thread cache: the constants come
 * from latte.h, generated from src/layout.rs (cache_index). */
LATTE__HOT size_t latte__cache_index(const char *id) {
  return (size_t)(((uint64_t)(uintptr_t)id * (uint64_t)LATTE_CACHE_HASH) >> LATTE_CACHE_SHIFT);
}

/* Whether entry e holds id, and its ring in *ring: the key, the ring, then
 * the key again, with a compiler fence between each two, as Rust's
 * cache_entry does (rule C3 of src/recorder/cache.rs: a signal handler
 * that put another ID in the entry between the loads is noticed). */
LATTE__HOT int latte__cached(const latte_cache_entry *e, const char *id, uint64_t *ring) {
  if (e->key != id || id == NULL) return 0;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  *ring = e->ring;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  return e->key == id;
}

/* Not at its home entry: probe on, as Rust's cache_probe does (the cache is
 * at most half full, so an empty entry ends the probe); the slow path when
 * it is not cached. Kept out of the hot path's layout. */
LATTE__FN uint64_t latte__probe(latte_thread *t, const char *id, size_t i) {
  const char *k;
  uint64_t ring;
  size_t home = i;
  if (id != NULL)
    for (;; i = (i + 1) & (LATTE_CACHE_SIZE - 1)) {
      k = t->cache[i].key;
      if (k == id) {
        if (!latte__cached(&t->cache[i], id, &ring)) break;
        /* Past its home: now and then (one such find in 64, drawn at
         * random) it takes the home entry, so that later Starts find it at
         * the first look (src/recorder/cache.rs, rule C4). */
        if (i != home) latte_internal_thread_promote_v3(t, id, i);
        return ring;
      }
      if (k == NULL) break;
    }
  return latte_internal_thread_resolve_v3(t, id);
}

/* Duration stop - start; one that does not fit 48 bits is made defined as
 * in Rust (src/layout.rs: fix_duration): negative -> 0, else saturated. */
LATTE__HOT uint64_t latte__duration(uint64_t start, uint64_t stop) {
  uint64_t dur = stop - start;
  if (__builtin_expect(dur > LATTE_MAX_DURATION, 0)) dur = (int64_t)dur < 0 ? 0 : LATTE_MAX_DURATION;
  return dur;
}

/* What the pulse's single shift below relies on: the depth field is 6 bits
 * wide and at most 64 (its top value lands on the start mode's low bit, which
 * LATTE_MODE_PULSE sets anyway). A header that changed any of these fails to
 * compile here rather than writing wrong bits. */
typedef char latte__assert_pulse_bits[(LATTE_START_MODE_SHIFT - LATTE_DEPTH_SHIFT == 6 && LATTE_MAX_DEPTH == 64 &&
                                       (LATTE_MODE_PULSE & 1) == 1 && LATTE_STOP_MODE_SHIFT - LATTE_START_MODE_SHIFT == 2)
                                          ? 1
                                          : -1];

/* Writes a sample at idx, which must be the ring's write_idx; returns the
 * new one. Only below the ring's committed end (write_limit, on write_idx's
 * line): at or past it the library grows the ring first, or laps it early
 * (ring protocol, G1-G3), in a slow path. The compare takes write_limit as
 * a memory operand, in an asm goto as Rust's write_sample_at does (the
 * compiler would load it into a register first, which measured Fast
 * Start+Stop 1.06 x the same code with no check, against 1.02 x). */
LATTE__HOT uint64_t latte__write_at(latte_slot_header *s, uint64_t mask, uint64_t idx, uint64_t tsc, uint64_t packed) {
  latte_sample *smp;
  __asm__ goto("cmpq %0, %1\n\tjae %l2" : : "m"(s->write_limit), "r"(idx) : "cc" : latte__at_limit);
  /* The ring starts right after the header: its offset folds into the stores. */
  smp = (latte_sample *)((char *)s + ((idx & mask) << LATTE_SAMPLE_SHIFT) + LATTE_SLOT_HEADER_SIZE);
  __atomic_store_n(&smp->start_tsc, tsc, __ATOMIC_RELEASE);
  __atomic_store_n(&smp->packed, packed, __ATOMIC_RELEASE);
  __atomic_store_n(&s->write_idx, idx + 1, __ATOMIC_RELEASE);
  return idx + 1;
latte__at_limit:
  return latte_internal_ring_write_at_limit_v3(s, mask, idx, tsc, packed);
}

/* Writes a sample into a tagged ring (address | token << LATTE_RING_TOKEN_SHIFT)
 * at the thread's own copy of its index when the ring's agrees (ring
 * protocol W1, src/ring.rs: writer_index_own): the sample's address does not
 * wait for the load of the ring's index. The copy is taken through an asm:
 * a plain read would let the compiler write at the loaded index instead
 * (it knows they are equal), which arrives later. */
LATTE__HOT void latte__write_own(latte_thread *t, uint64_t ring, uint64_t tsc, uint64_t packed) {
  latte_slot_header *s = (latte_slot_header *)(uintptr_t)(ring & LATTE_FRAME_RING_MASK);
  uint64_t *own = &t->next_idx[ring >> LATTE_RING_TOKEN_SHIFT];
  uint64_t idx = *own, w = __atomic_load_n(&s->write_idx, __ATOMIC_RELAXED);
  /* Compared in an asm, so that the compiler cannot know idx == w after it. */
  __asm__ goto("cmpq %0, %1\n\tjne %l2" : : "r"(w), "r"(idx) : "cc" : latte__other_writer);
  *own = latte__write_at(s, t->sample_mask, idx, tsc, packed);
  return;
latte__other_writer:
  *own = latte__write_at(s, t->sample_mask, w, tsc, packed);
}

LATTE__HOT void latte__write(latte_slot_header *s, uint64_t mask, uint64_t tsc, uint64_t packed) {
  (void)latte__write_at(s, mask, __atomic_load_n(&s->write_idx, __ATOMIC_RELAXED), tsc, packed);
}

/* Start on a given state (the calling thread's own): what
 * latte_start_inline does on latte__state. */
LATTE__HOT void latte__start_on(latte_thread *t, const char *id, latte_mode mode) {
  uint64_t ring;
  size_t i;
  uint32_t d = t->depth;
  if (__builtin_expect(d >= LATTE_MAX_DEPTH, 0)) {
    latte_internal_thread_note_overflow_v3(t);
    return;
  }
  mode = latte__norm(mode);
  i = latte__cache_index(id);
  if (__builtin_expect(!latte__cached(&t->cache[i], id, &ring), 0)) {
    /* The slow path may have moved open spans onto t: read the depth again. */
    ring = latte__probe(t, id, i);
    d = t->depth;
    if (__builtin_expect(d >= LATTE_MAX_DEPTH, 0)) {
      latte_internal_thread_note_overflow_v3(t);
      return;
    }
  }
  /* Steps S1-S3 of the span stack protocol (src/recorder/hot.rs), kept in
   * order for signal handlers that record on this thread. */
  t->depth = d + 1; /* S1 */
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  /* S2: the outer tagged ring and this span's packed bits in one word (src/layout.rs: frame_word). */
  t->frame_word[d] = t->top_ring | ((uint64_t)d << LATTE_DEPTH_SHIFT) | ((uint64_t)mode << LATTE_START_MODE_SHIFT);
  t->frame_head[d] = latte__switch_mark(t);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t->top_ring = ring; /* S3 */
  t->frame_tsc[d] = latte__tsc_start(mode);
}

/* Stop on a given state with the TSC read: what latte_stop_inline does
 * on latte__state. */
LATTE__HOT uint64_t latte__stop_on(latte_thread *t, latte_mode mode, uint64_t now) {
  uint64_t ring, st, dur, word, mark, mark_now, switched;
  uint32_t d = t->depth;
  if (__builtin_expect(d == 0, 0)) return latte_internal_thread_stop_slow_v3(t, latte__norm(mode), now);
  /* Steps P1-P3 of the span stack protocol (src/recorder/hot.rs). */
  ring = t->top_ring; /* P1 */
  d -= 1;
  word = t->frame_word[d];
  st = t->frame_tsc[d];
  mark = t->frame_head[d];
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t->top_ring = word & ~LATTE_FRAME_SPAN_MASK; /* P2 */
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t->depth = d; /* P3 */
  dur = latte__duration(st, now);
  switched = latte__switched_since(t, mark, &mark_now);
  latte__write_own(t, ring, st, dur | (word & LATTE_FRAME_SPAN_MASK) | ((uint64_t)latte__norm(mode) << LATTE_STOP_MODE_SHIFT) | switched);
  return dur;
}

/* Same effect as latte_start(id, mode): resolves the ring now (a cache
 * hit is one compare), pushes it, reads the TSC last. */
LATTE__HOT void latte_start_inline(const char *id, latte_mode mode) { latte__start_on(&latte__state, id, mode); }

/* Same effect as latte_stop(id, mode): reads the TSC first, closes the
 * innermost span, writes its sample. */
LATTE__HOT uint64_t latte_stop_inline(const char *id, latte_mode mode) {
  uint64_t now = latte__tsc_stop(mode);
  (void)id;
  return latte__stop_on(&latte__state, mode, now);
}

/* Same effect as Rust's pulse_switched (src/recorder/hot.rs): the
 * LATTE_SAMPLE_SWITCHED bit of the interval since the site's mark, and the
 * site's mark brought up to date. */
LATTE__FN uint64_t latte__pulse_switched(const latte_thread *t, latte_pulse_site *site) {
  return latte__switched_since(t, site->last_head, &site->last_head);
}

/* Same effect as latte_pulse(site, id): the site keeps its ring, and the
 * ring's index as it left it (next_idx), so the write need not wait for the
 * ring's own index: it is compared in the shadow of the write, and when
 * something else wrote the ring meanwhile (a span, another site of the ID)
 * the sample goes to the ring's own index instead. An untracked thread's
 * pulse does not load its switch count (switch_base is 0); a tracked one's
 * compares count + base with what its site saw last.
 *
 * Three loads go through an asm, each for a measured reason (make
 * speedtest): the depth, so that it is loaded early rather than after the
 * duration's arithmetic; the base (latte__switch_base); and the site's
 * index. The site's index and ring are read once, before the ring's index,
 * and the two indices are compared in an asm goto, as latte__write_own
 * does: a plain compare would let the compiler write at the loaded index
 * (it knows they are equal), which arrives later; and the site read again
 * after the compare could hold another ID's ring and index, when a signal
 * handler pulsed at this site under another ID in between. The tracked
 * path has its own copy of the write rather than a jump back. */
LATTE__HOT void latte_pulse_inline(latte_pulse_site *site, const char *id) {
  uint64_t now = __rdtsc();
  latte_thread *t = &latte__state;
  latte_slot_header *s;
  uint64_t last, packed, base, idx;
  uint32_t depth;
  if (__builtin_expect(site->id != id || id == NULL, 0)) {
    latte_internal_thread_pulse_slow_v3(t, site, id, now);
    return;
  }
  last = site->last_tsc;
  site->last_tsc = now;
  __asm__("movl %1, %0" : "=r"(depth) : "m"(t->depth));
  /* The depth and both modes in one shift. depth <= 64; at 64 its bit lands
   * on the start mode's low bit, which PULSE (3) sets anyway: the same word
   * as Rust's `depth & LATTE_DEPTH_MASK`, with no mask. */
  packed = latte__duration(last, now) |
           ((uint64_t)(depth | (LATTE_MODE_PULSE << (LATTE_START_MODE_SHIFT - LATTE_DEPTH_SHIFT)) |
                       (LATTE_MODE_PULSE << (LATTE_STOP_MODE_SHIFT - LATTE_DEPTH_SHIFT)))
            << LATTE_DEPTH_SHIFT);
  s = site->slot;
  __asm__("movq %1, %0" : "=r"(idx) : "m"(site->next_idx));
  /* Two rare cases, each its own branch: something else wrote the ring (a
   * span, another site of the ID), or the thread is tracked and its count +
   * base moved since this site's previous pulse. */
  __asm__ goto("cmpq %0, %1\n\tjne %l2" : : "r"(__atomic_load_n(&s->write_idx, __ATOMIC_RELAXED)), "r"(idx) : "cc" : latte__other);
  base = latte__switch_base(t);
  if (__builtin_expect(base != 0, 0)) {
    if (__builtin_expect(latte__switch_count(t) + base != site->last_head, 0)) goto latte__other;
    site->next_idx = latte__write_at(s, t->sample_mask, idx, last, packed);
    return;
  }
  site->next_idx = latte__write_at(s, t->sample_mask, idx, last, packed);
  return;
latte__other:
  packed |= latte__pulse_switched(t, site);
  latte__write(s, t->sample_mask, last, packed);
  site->next_idx = __atomic_load_n(&s->write_idx, __ATOMIC_RELAXED);
}

#else /* LATTE_DISABLE */

#define latte_start_inline(id, mode) latte__off_void(sizeof(id) + sizeof(mode))
#define latte_stop_inline(id, mode) latte__off_u64(sizeof(id) + sizeof(mode))
#define latte_pulse_inline(site, id) latte__off_void(sizeof(site) + sizeof(id))

#endif /* LATTE_DISABLE */

/* Statement: a pulse from this call site (state per site and thread). */
#define LATTE_PULSE_AT(id)                                   \
  do {                                                       \
    static LATTE__TLS latte_pulse_site latte__pulse_site_;   \
    latte_pulse_inline(&latte__pulse_site_, (id));           \
  } while (0)

#endif /* LATTE_INLINE_H */
