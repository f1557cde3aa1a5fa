//! The ring protocol, stated once: how a slot's single writer publishes
//! samples and how any number of readers, in any process, copy them without
//! ever returning a torn or stale one. The code sites cite the steps.
//!
//! A slot holds a header (`write_idx` alone on the first cache line;
//! `generation`, `state` and the owner on the second) and a ring of `cap`
//! 16-byte samples; index `j` lives at `samples[j & (cap - 1)]`.
//!
//! | step | writer: the slot's owner thread | pairs with |
//! |---|---|---|
//! | W1 | `idx = write_idx` (relaxed: this thread is its only writer), or the writer's own copy of it once compared equal to `write_idx` (`writer_index_own`) | |
//! | W2 | store both words of `samples[idx & mask]`, each with release | R6 |
//! | W3 | `write_idx = idx + 1` with release: publishes the sample | R3 |
//! | W4 | at thread exit, `state = CLOSED` with release: the ring is final | R2 |
//!
//! A ring's memory is committed as it is written: `write_limit`, on
//! `write_idx`'s line, is the index its committed memory ends at. W2
//! happens only at an index below it (`committed`: the hot path folds the
//! load into the compare, a memory operand); a write at or past it takes
//! the growth steps first, on the owner thread, in a slow path.
//!
//! | step | growth: the writer, at an index `idx` (W1) at or past `write_limit` | pairs with |
//! |---|---|---|
//! | G1 | `lim = write_limit` (relaxed: this thread is its only writer). `idx < lim`: a write of this thread's (a signal handler's) grew it meanwhile: W2 at `idx` | |
//! | G2 | memory for indices up to `new = 2 lim` (the whole ring: `LATTE_RING_WHOLE`) committed within the region's budget, then `write_limit = new` (relaxed), then W2-W3 at `idx` | |
//! | G3 | no memory to be had: an early lap, A1-A4 by the owner for itself (`gen_base += idx`, `write_idx = 0`), then W2-W3 at index 0. The ring goes on at the size it has; a reader takes the lap for a new owner (R1, R4, R7) and counts what it did not read as lost | R1 |
//!
//! No reader reads an index at or past `write_idx`, which never passes
//! `write_limit`: no reader touches memory that is not committed. A ring
//! never laps before it is whole except by G3, so below `write_limit`
//! index `j` is at `samples[j]` whatever the ring's final size.
//!
//! | step | assignment: the registry, under its lock, gives a slot an owner | pairs with |
//! |---|---|---|
//! | A1 | `generation = 0` (relaxed): the slot is changing | |
//! | A2 | release fence: orders A1 before A3 | R4 |
//! | A3 | `gen_base += write_idx` (what the last owner wrote), then `write_idx = 0`, owner, token, `state = LIVE` (relaxed) | R1 |
//! | A4 | `generation = g`, g ≠ 0, with release: publishes A3 | R1, R7 |
//!
//! | step | reader, for a slot and its cursor (`generation`, `next`) | pairs with |
//! |---|---|---|
//! | R1 | `g1 = generation` (acquire). 0: being assigned, read nothing. Not the cursor's: a new owner: `b = gen_base` (relaxed, after the acquire); the earlier owners' samples the cursor never read, `b - (cursor's base + next)`, are lost (`lost_before`); restart the cursor at 0 with base `b` | A4 |
//! | R2 | `state` (acquire). CLOSED: no write can follow, the margin is 0 (else 1) | W4 |
//! | R3 | `w1 = write_idx` (acquire): every index below `w1` is published | W3 |
//! | R4 | `w1 < next`: load `generation` again (acquire). Changed: the slot is being reassigned, read nothing now. Same: corrupt | A2 |
//! | R5 | copy indices `[max(next, w1 + margin - cap), w1)` with an opaque bulk copy, in chunks | |
//! | R6 | after each chunk: an acquire fence, then `w = write_idx` (relaxed). The chunk's indices below `w + margin - cap` may have been overwritten while they were copied: drop them, and every index before them (the kept samples stay one run) | W2 |
//! | R7 | `g2 = generation` (relaxed, after R6's fence). Changed: discard the copy | A4 |
//! | R8 | dropped indices, and those between `next` and the first kept, are lost; `next = w1` | |
//!
//! Why R6 is enough: the writer stores each sample word with release (W2).
//! If a chunk's copy saw any word of a newer sample at index `j + cap`, the
//! acquire fence after the copy makes the `write_idx` store that preceded
//! that word's store (W3 of index `j + cap - 1`) visible to R6's load, so
//! `w > j + cap - 1` and `j` is dropped. A torn or stale sample is never
//! returned, and over a slot's life, returned + lost = written. Checking
//! per chunk rather than once after the whole copy keeps the oldest samples
//! of a full live ring, which the writer reaches only after the copy has
//! passed them.
//!
//! The steps are written here once, generic over the atomic word
//! (`Atomic`): the library runs them on `core` atomics, and the model
//! checker (`tests/loom_protocol.rs`) runs the same functions on loom's.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// An atomic word as the protocol uses it: `core`'s in the library, loom's
/// in the model checker.
pub trait Atomic {
    /// The value type.
    type V: Copy + PartialEq;
    /// An atomic load.
    fn load(&self, o: Ordering) -> Self::V;
    /// An atomic store.
    fn store(&self, v: Self::V, o: Ordering);
    /// A fence of the same memory model as the word.
    fn fence(o: Ordering);
}

impl Atomic for AtomicU64 {
    type V = u64;
    #[inline(always)]
    fn load(&self, o: Ordering) -> u64 {
        AtomicU64::load(self, o)
    }
    #[inline(always)]
    fn store(&self, v: u64, o: Ordering) {
        AtomicU64::store(self, v, o)
    }
    #[inline(always)]
    fn fence(o: Ordering) {
        core::sync::atomic::fence(o)
    }
}

impl Atomic for AtomicU32 {
    type V = u32;
    #[inline(always)]
    fn load(&self, o: Ordering) -> u32 {
        AtomicU32::load(self, o)
    }
    #[inline(always)]
    fn store(&self, v: u32, o: Ordering) {
        AtomicU32::store(self, v, o)
    }
    #[inline(always)]
    fn fence(o: Ordering) {
        core::sync::atomic::fence(o)
    }
}

/// W1: the writer's index. Relaxed: the owner thread is its only writer.
#[inline(always)]
pub fn writer_index<W: Atomic<V = u64>>(write_idx: &W) -> u64 {
    write_idx.load(Ordering::Relaxed)
}

/// W1 for a writer that keeps its own copy of the index (`own`, the index
/// after its own last write): `own` when the ring's index agrees, the
/// ring's otherwise (something else wrote the ring: another copy's owner on
/// the same thread, a signal handler). Taken from the copy, the sample's
/// address need not wait for the load of `write_idx`, which is compared in
/// the shadow of the writes. The copy is read once, before the load, and
/// the two are compared in an asm (the crate is x86-64 only:
/// [`crate::tsc`]), as `latte_inline.h` does: a plain compare would let the
/// compiler write at the loaded value instead (it knows the two are equal),
/// which arrives later; and a copy read again after the compare could be
/// another ring's, when a signal handler wrote a ring that shares the copy
/// (one copy per ring tag) in between.
#[inline(always)]
pub fn writer_index_own<W: Atomic<V = u64>>(write_idx: &W, own: &u64) -> u64 {
    let idx: u64;
    // SAFETY: reads the 8 bytes of `own`, a valid reference; no stack, no
    // flags, no writes.
    unsafe { core::arch::asm!("mov {0}, qword ptr [{1}]", out(reg) idx, in(reg) own as *const u64, options(nostack, preserves_flags, readonly)) };
    let w = write_idx.load(Ordering::Relaxed);
    // SAFETY: compares two registers and jumps to the label block when they
    // differ; no memory, no stack.
    unsafe {
        core::arch::asm!("cmp {0}, {1}", "jne {2}", in(reg) w, in(reg) idx, label { return w; }, options(nomem, nostack));
    }
    idx
}

/// W2 and W3: writes the sample (`start`, `packed`) into its two words and
/// publishes index `idx`, which must be the ring's `write_idx` (W1).
/// Returns the new `write_idx`.
#[inline(always)]
pub fn publish<W: Atomic<V = u64>>(write_idx: &W, start_word: &W, packed_word: &W, idx: u64, start: u64, packed: u64) -> u64 {
    // W2: release, so that a reader whose R6 fence follows a load of either
    // word also sees the W3 before it.
    start_word.store(start, Ordering::Release);
    packed_word.store(packed, Ordering::Release);
    // W3.
    write_idx.store(idx + 1, Ordering::Release);
    idx + 1
}

/// W2's precondition: index `idx` lies in the ring's committed memory
/// (below `write_limit`). Relaxed: the owner thread is the only writer of
/// `write_limit`. (The recorder's hot path makes the same relaxed load as
/// the memory operand of its compare: `recorder::hot::write_sample_at`.)
#[inline(always)]
pub fn committed<W: Atomic<V = u64>>(write_limit: &W, idx: u64) -> bool {
    idx < write_limit.load(Ordering::Relaxed)
}

/// G3: an early lap. The owner starts its ring over at index 0 as a new
/// generation (`next_generation`), its `gen_base` grown by the `idx`
/// samples this generation holds: A1-A4 by the owner for itself.
#[inline]
pub fn early_lap<G: Atomic<V = u32>, W: Atomic<V = u64>>(generation: &G, gen_base: &W, write_idx: &W, idx: u64) {
    let g = generation.load(Ordering::Relaxed);
    let next = if g.wrapping_add(1) == 0 { 1 } else { g.wrapping_add(1) };
    // Relaxed loads: the owner is the only writer of these words while it
    // lives (the registry reassigns a slot only after its owner exited).
    let base = gen_base.load(Ordering::Relaxed).wrapping_add(idx);
    assign(generation, next, || {
        gen_base.store(base, Ordering::Relaxed);
        write_idx.store(0, Ordering::Relaxed);
    });
}

/// A1 to A4: gives a slot a new owner. `metadata` stores the new owner's
/// fields (A3: `gen_base` grown by the last owner's `write_idx`, then
/// `write_idx = 0`, token, thread, state) with relaxed stores.
#[inline]
pub fn assign<G: Atomic<V = u32>>(generation: &G, new_generation: u32, metadata: impl FnOnce()) {
    debug_assert_ne!(new_generation, 0);
    generation.store(0, Ordering::Relaxed); // A1
    G::fence(Ordering::Release); // A2
    metadata(); // A3
    generation.store(new_generation, Ordering::Release); // A4
}

/// R1: the slot's generation. Acquire: pairs with A4, so the metadata of
/// the generation seen is visible.
#[inline]
pub fn generation<G: Atomic<V = u32>>(generation: &G) -> G::V {
    generation.load(Ordering::Acquire)
}

/// R2: whether the slot is closed (`state == closed`). Acquire: pairs with
/// W4, so every sample its owner wrote is visible.
#[inline]
pub fn is_closed<S: Atomic<V = u32>>(state: &S, closed: u32) -> bool {
    state.load(Ordering::Acquire) == closed
}

/// R3: the writer's index as published. Acquire: pairs with W3, so every
/// sample below it is visible.
#[inline]
pub fn published<W: Atomic<V = u64>>(write_idx: &W) -> u64 {
    write_idx.load(Ordering::Acquire)
}

/// R7: whether the generation is still `g1` after the copy. Relaxed: R6's
/// acquire fence after the last chunk comes first; if the copy saw a word a
/// new owner wrote (with release, after A4), that fence makes the new
/// generation visible here.
#[inline]
pub fn unchanged<G: Atomic<V = u32>>(generation: &G, g1: u32) -> bool {
    generation.load(Ordering::Relaxed) == g1
}

/// R4: `write_idx` went below the cursor's `next`. True when the slot is
/// being reassigned (read nothing now; the next read restarts the cursor),
/// false when the index went back within one generation (corrupt: only a
/// hostile writer does that). The acquire load, after R3's acquire load
/// that saw the reset index, sees A1's 0 or A4's new generation.
#[inline]
pub fn reassigned<G: Atomic<V = u32>>(generation: &G, g1: u32) -> bool {
    generation.load(Ordering::Acquire) != g1
}

/// The oldest index a ring can still hold unchanged once the writer's index
/// is `w` (`margin` 1 while a write may be in progress, 0 when the ring is
/// final).
#[inline]
pub fn oldest_safe(w: u64, margin: u64, cap: u64) -> u64 {
    (w + margin).saturating_sub(cap)
}

/// R5 and R6 over indices `[lo, end)`: copies them chunk by chunk and
/// returns the first index kept; the kept samples `[first, end)` are then
/// at the destination's positions `0..end - first`.
///
/// - `copy(j, n, k)` copies ring indices `j..j + n` (never across the
///   ring's end) to destination positions `k..k + n`, opaquely (R5);
/// - `shift(from, n)` moves destination positions `from..from + n` to `0..n`;
/// - `head()` loads `write_idx` with relaxed ordering (R6), or gives the
///   index a flushed image recorded; an error ends the read.
///
/// `W` names the memory model whose acquire fence R6 issues.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn copy_checked<W: Atomic, E>(
    lo: u64,
    end: u64,
    cap: u64,
    margin: u64,
    chunk: u64,
    mut copy: impl FnMut(u64, u64, usize),
    mut shift: impl FnMut(usize, usize),
    mut head: impl FnMut() -> Result<u64, E>,
) -> Result<u64, E> {
    let mask = cap - 1;
    let mut first_kept = lo;
    let mut j = lo;
    while j < end {
        let (chunk_start, chunk_end) = (j, end.min(j + chunk));
        // R5: the chunk as at most two contiguous runs of the ring. Index
        // j goes to position j - first_kept.
        while j < chunk_end {
            let pos = j & mask;
            let run = (cap - pos).min(chunk_end - j);
            copy(j, run, (j - first_kept) as usize);
            j += run;
        }
        // R6: the copies above happen before the load in `head`, and the
        // fence pairs with the writer's release stores of the words (W2).
        W::fence(Ordering::Acquire);
        let front = oldest_safe(head()?, margin, cap);
        if front > chunk_start {
            // The chunk's indices below `front` may have been overwritten
            // while it was copied. Those of earlier chunks were safe when
            // copied, but the kept samples are one run: they go too. The
            // chunk's survivors move to the front (only this chunk moves: a
            // full live ring loses a prefix of its first chunk on nearly
            // every read).
            let keep_from = front.min(chunk_end);
            shift((keep_from - first_kept) as usize, (chunk_end - keep_from) as usize);
            first_kept = keep_from;
        }
    }
    Ok(first_kept)
}
