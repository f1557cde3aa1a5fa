/*
 * latte_inline.h: the Start/Stop/pulse fast path for C and C++ callers,
 * inlined into the caller. Hand-written (not generated).
 *
 * It reads and writes the per-thread state that Rust owns and lays out
 * (latte_thread in latte.h) exactly as Rust's own path does (src/recorder.rs:
 * start, stop_at, pulse, write_sample); every slow path (first use of a
 * thread, an ID or a slot; more than 64 open spans; a Stop with nothing
 * open) is a call into the library. tests/c/shared.c checks that both
 * paths write identical samples.
 *
 * Ring writer protocol (see src/recorder.rs): load write_idx (relaxed, sole
 * writer), store the sample's two words (release), store write_idx + 1
 * (release). On x86-64 these are plain moves.
 *
 * Threads: the state pointer is cached in a thread-local of the caller's
 * (per translation unit in C, one per program in C++). Do not record from a
 * thread-local destructor that runs after latte's own has retired the thread.
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

#ifndef LATTE_DISABLE

/* Key of an unused cache entry (src/layout.rs: LATTE_CACHE_EMPTY). */
#define LATTE__CACHE_EMPTY ((const char *)~(uintptr_t)0)

#ifdef __cplusplus
inline thread_local latte_thread *latte__tls_state = nullptr;
#else
static __thread latte_thread *latte__tls_state;
#endif

/* The calling thread's state (NULL only while the thread is torn down). */
LATTE__FN latte_thread *latte_self(void) {
  latte_thread *t = latte__tls_state;
  if (__builtin_expect(t == NULL, 0)) {
    t = latte_thread_current();
    latte__tls_state = t;
  }
  return t;
}

LATTE__FN latte_mode latte__norm(latte_mode m) {
  return (m == LATTE_MODE_MID || m == LATTE_MODE_HARD) ? m : LATTE_MODE_FAST;
}

LATTE__FN uint64_t latte__tsc_start(latte_mode m) {
  unsigned int aux;
  if (m == LATTE_MODE_MID) return __rdtscp(&aux);
  if (m == LATTE_MODE_HARD) {
    _mm_lfence();
    return __rdtscp(&aux);
  }
  return __rdtsc();
}

LATTE__FN uint64_t latte__tsc_stop(latte_mode m) {
  unsigned int aux;
  if (m == LATTE_MODE_MID) return __rdtscp(&aux);
  if (m == LATTE_MODE_HARD) {
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
  }
  return __rdtsc();
}

LATTE__FN size_t latte__cache_index(const char *id) {
  return (size_t)(((uint64_t)(uintptr_t)id * 0x9E3779B97F4A7C15ull) >> 57);
}

LATTE__FN uint64_t latte__pack(uint64_t dur, uint32_t depth, uint32_t start_mode, uint32_t stop_mode) {
  if (dur > LATTE_MAX_DURATION) dur = LATTE_MAX_DURATION;
  return dur | ((uint64_t)(depth & 63u) << LATTE_DEPTH_SHIFT) |
         ((uint64_t)(start_mode & 3u) << LATTE_START_MODE_SHIFT) |
         ((uint64_t)(stop_mode & 3u) << LATTE_STOP_MODE_SHIFT);
}

LATTE__FN void latte__write(latte_slot_header *s, uint64_t mask, uint64_t tsc, uint64_t packed) {
  uint64_t idx = __atomic_load_n(&s->write_idx, __ATOMIC_RELAXED);
  latte_sample *smp = (latte_sample *)((char *)s + LATTE_SLOT_HEADER_SIZE) + (idx & mask);
  __atomic_store_n(&smp->start_tsc, tsc, __ATOMIC_RELEASE);
  __atomic_store_n(&smp->packed, packed, __ATOMIC_RELEASE);
  __atomic_store_n(&s->write_idx, idx + 1, __ATOMIC_RELEASE);
}

/* Same effect as latte_start(id, mode): resolves the ring now (a cache
 * hit is one compare), pushes it, reads the TSC last. */
LATTE__FN void latte_start_inline(const char *id, latte_mode mode) {
  latte_thread *t = latte_self();
  latte_cache_entry *e;
  latte_slot_header *slot;
  uint32_t d;
  if (__builtin_expect(t == NULL, 0)) return;
  d = t->depth;
  if (__builtin_expect(d >= LATTE_MAX_DEPTH, 0)) {
    latte_thread_note_overflow(t);
    return;
  }
  mode = latte__norm(mode);
  e = &t->cache[latte__cache_index(id)];
  slot = __builtin_expect(e->key == id, 1) ? e->slot : latte_thread_resolve(t, id);
  t->frames[d].slot = slot;
  t->depth = d + 1;
  t->frames[d].tsc_mode = (latte__tsc_start(mode) & LATTE_FRAME_TSC_MASK) | ((uint64_t)mode << LATTE_FRAME_MODE_SHIFT);
}

/* Same effect as latte_stop(id, mode): reads the TSC first, closes the
 * innermost span, writes its sample. */
LATTE__FN uint64_t latte_stop_inline(const char *id, latte_mode mode) {
  uint64_t now = latte__tsc_stop(mode) & LATTE_FRAME_TSC_MASK;
  latte_thread *t = latte_self();
  latte_frame *f;
  uint64_t st, dur;
  uint32_t d;
  (void)id;
  if (__builtin_expect(t == NULL, 0)) return 0;
  d = t->depth;
  if (__builtin_expect(d == 0, 0)) {
    latte_thread_note_orphan(t);
    return 0;
  }
  d -= 1;
  t->depth = d;
  f = &t->frames[d];
  st = f->tsc_mode & LATTE_FRAME_TSC_MASK;
  dur = now > st ? now - st : 0;
  if (__builtin_expect(f->slot != NULL, 1))
    latte__write(f->slot, t->sample_mask, st,
                 latte__pack(dur, d, (uint32_t)(f->tsc_mode >> LATTE_FRAME_MODE_SHIFT), latte__norm(mode)));
  return dur;
}

/* Same effect as latte_pulse(site, id): the site keeps its ring. */
LATTE__FN void latte_pulse_inline(latte_pulse_site *site, const char *id) {
  uint64_t now = __rdtsc();
  uint64_t last = site->last_tsc;
  latte_thread *t = latte_self();
  site->last_tsc = now;
  if (__builtin_expect(t == NULL, 0)) return;
  if (__builtin_expect(site->id != id || site->slot == NULL, 0)) {
    site->slot = latte_thread_resolve(t, id);
    site->id = id;
    if (site->slot == NULL) return;
  }
  if (__builtin_expect(last == 0, 0)) return;
  latte__write(site->slot, t->sample_mask, last,
               latte__pack(now > last ? now - last : 0, t->depth, LATTE_MODE_PULSE, LATTE_MODE_PULSE));
}

#else /* LATTE_DISABLE */

#define latte_self() latte__off_thread()
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
