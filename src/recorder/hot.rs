//! The hot path: Start pushes onto the calling thread's span stack, Stop pops
//! the innermost span and appends a sample to the thread's ring for that ID.
//!
//! Hot path (`start`, `stop`, `pulse`): no lock, no atomic read-modify-write,
//! no allocation. Start finds the ring through a per-thread open-addressed
//! cache keyed by the ID pointer (at most half full: nearly always found at
//! its home entry or the next) and pushes it with the TSC; Stop pops it
//! and writes the sample. A cache miss goes to `resolve`, which interns the
//! ID, finds or allocates the (thread, ID) slot under the registry lock and
//! fills the cache. A pulse keeps its ring in its call-site state.
//! `include/latte_inline.h` is the same hot path in C.
//!
//! A sample is written by the ring protocol's writer steps W1-W3 (`ring`);
//! one at the ring's committed end first takes the growth steps G1-G3, out
//! of line (`ring_write`).
//!
//! Switched samples. `t.switch_head` points at the thread's switch count:
//! the `data_head` of its perf switch ring, which the kernel advances at
//! every switch of the thread (`sched`), or a static word that never moves
//! when the thread is not tracked; `t.switch_base` is 0 when it is not
//! tracked, else the ring's base. Every call branches on the base (a load
//! and a test; the branch always goes the same way on a thread): an
//! untracked thread's Start, Stop and pulse load no count at all. A tracked
//! one's Start saves its mark, count + base (`switch_mark`; before its TSC
//! read), its Stop takes the mark again (after its TSC read) and sets
//! `LATTE_SAMPLE_SWITCHED` when it moved (`switched_since`); a pulse
//! compares with the mark its site saw at its previous pulse. The loads are
//! relaxed: nothing is read on the strength of the value, it is only
//! compared with an earlier load of the same word by the same thread, and
//! the kernel stores it only while this thread is switched out (the switch
//! itself orders those stores before the thread runs again), so every
//! switch between the two loads shows as a different value. The count
//! covers a little more than the timed interval (the loads sit outside the
//! TSC reads): a flagged sample was switched out around its span at least
//! once; an unflagged one whose interval lay within one ring's life on its
//! thread's active state was not, exactly. Across the thread's ring opening
//! or closing (docs/sched.md has the list): an interval from a mark of 0
//! (taken untracked) is flagged when the ring open at its end counted a
//! switch since it opened; one that ends untracked is not flagged; one
//! from a mark of a ring that has closed since is flagged, switch or not
//! (marks of two rings never meet).
//!
//! Span stack protocol (signal handlers). A signal handler that records on
//! the thread it interrupted runs a whole Start and Stop between two steps
//! of the interrupted one, and leaves `depth`, `top_ring` and every frame
//! at or above `depth` as it found them; so the interrupted call is correct
//! when each step below holds whatever the handler does before it. The
//! steps are kept in order by compiler fences (a thread sees its own
//! accesses in program order; no CPU fence is needed).
//! - Start at depth `d`: S1 `depth = d + 1` (frame `d` is now taken: a
//!   handler's Start uses `d + 1`); S2 save the outer ring (`top_ring`) and
//!   this span's depth and mode in `frame_word[d]`, the switch mark in
//!   `frame_head[d]`; S3 `top_ring` = this
//!   span's ring; then the TSC into `frame_tsc[d]`. A handler before S1
//!   uses frame `d` and is done with it before S2 writes it; between S1
//!   and S3 it saves and restores the outer ring in frame `d + 1`.
//! - Stop at depth `d`: P1 read `top_ring`, `frame_word[d - 1]`,
//!   `frame_tsc[d - 1]` and `frame_head[d - 1]`; P2 `top_ring` = the outer
//!   ring; P3 `depth = d - 1` (frame `d - 1` is free again); then write the
//!   sample. A handler before
//!   P3 sees the span still open and uses frame `d`.
//!
//! A handler's span shares a ring with the interrupted code only when both
//! use one ID; a sample written into that ring while the interrupted one is
//! between steps W1 and W3 of the ring writer is lost (overwritten). The slow
//! paths take the registry lock; one that interrupts the lock's holder on
//! its own thread is refused ([`Lock::lock_unless_held`](super::lock::Lock::lock_unless_held)) and counted in
//! `reentrant_drops`, and its span goes to a sink; so is one that
//! interrupts its thread's change of states (`thread::switching`).

use super::cache::{cache_entry, cache_probe, cache_promote};
use super::ring_write::{write_at_limit, write_committed};
use super::slow::{count_orphan, note_orphan, note_overflow, resolve, resolve_slot};
use super::thread::current_if_any;
use crate::layout::*;
use crate::tsc;
use core::ffi::c_char;
use core::sync::atomic::{compiler_fence, Ordering};

/// The thread's switch count now (see "Switched samples" in the module doc).
#[inline(always)]
pub fn switch_count(t: &latte_thread) -> u64 {
    // SAFETY: an attached state's `switch_head` points at its thread's
    // mapped ring head or at the static word that never moves (`sched`).
    // Relaxed: the value is only compared with another load of the same
    // word by the same thread, never used to read data; see the module doc.
    unsafe { &*t.switch_head }.load(Ordering::Relaxed)
}

/// The thread's switch mark: 0 while it is not tracked (`switch_base` 0,
/// and then nothing is loaded), else its switch count plus the ring's base,
/// never 0. Start saves it; Stop and a pulse compare (`switched_since`).
/// Step H of the binding protocol (src/sched/watch.rs).
#[inline(always)]
pub fn switch_mark(t: &latte_thread) -> u64 {
    if t.switch_base == 0 {
        0
    } else {
        switch_count(t).wrapping_add(t.switch_base)
    }
}

/// Whether the thread was switched out since it showed `mark`, as the
/// `LATTE_SAMPLE_SWITCHED` bit, and its mark now. Never flagged while the
/// thread is untracked. Since a mark of 0 (taken untracked), flagged when
/// the count moved from 0, where a new ring starts: exact for what the ring
/// saw. A mark from an earlier ring never equals a current one (`sched`:
/// bases), so an interval across a ring's closing and another's opening is
/// flagged, switch or not.
#[inline(always)]
pub fn switched_since(t: &latte_thread, mark: u64) -> (u64, u64) {
    if t.switch_base == 0 {
        return (0, 0);
    }
    let now = switch_count(t).wrapping_add(t.switch_base);
    // From a mark of 0 the count is compared with 0: `now` with the base.
    let switched = now != if mark != 0 { mark } else { t.switch_base };
    ((switched as u64) << LATTE_SAMPLE_SWITCHED_SHIFT, now)
}

/// Appends one sample to a ring (the ring protocol's writer, W1-W3).
///
/// # Safety
/// `slot` is a slot owned by the calling thread (or a sink), `mask` its
/// region's mask.
#[inline(always)]
pub unsafe fn write_sample(slot: *mut latte_slot_header, mask: u64, start_tsc: u64, packed: u64) {
    // W1.
    // SAFETY: the caller guarantees `slot` is a live slot header of ours.
    let idx = crate::ring::writer_index(unsafe { &(*slot).write_idx });
    // SAFETY: forwarded; idx is the ring's own index.
    unsafe { write_sample_at(slot, mask, idx, start_tsc, packed) };
}

/// `write_sample` at index `idx`, which must be the ring's current
/// `write_idx`: W2-W3 below the ring's committed end, the growth steps
/// first, out of line, at or past it (`ring_write`). Returns the new index.
///
/// The compare takes `write_limit` as a memory operand (`ring::committed`'s
/// relaxed load, folded in: an asm, since the compiler loads it into a
/// register first): measured in one run of speedtest/hot.cpp against the
/// same code with no check, Fast Start+Stop 1.02 x and the pulse 1.00 x,
/// where a separate load and compare cost Fast 1.06 x.
///
/// # Safety
/// As `write_sample`, and `idx == write_idx` of the slot.
#[inline(always)]
pub unsafe fn write_sample_at(slot: *mut latte_slot_header, mask: u64, idx: u64, start_tsc: u64, packed: u64) -> u64 {
    // W2 only below the committed end (ring protocol, G1-G3).
    // SAFETY: compares `idx` with the 8 bytes of the slot header's
    // `write_limit` (a live header: the caller's contract; an aligned
    // atomic word, loaded once, as a relaxed load) and jumps to the label
    // block at or past it; no stack, no other memory.
    unsafe {
        core::arch::asm!(
            "cmp {idx}, qword ptr [{slot} + {off}]",
            "jae {at_limit}",
            idx = in(reg) idx,
            slot = in(reg) slot,
            off = const core::mem::offset_of!(latte_slot_header, write_limit),
            at_limit = label {
                // SAFETY: forwarded.
                return unsafe { write_at_limit(slot, mask, idx, start_tsc, packed) };
            },
            options(nostack, readonly),
        );
    }
    // SAFETY: forwarded; idx is below the committed end.
    unsafe { write_committed(slot, mask, idx, start_tsc, packed) }
}

/// Opens a span on the thread's stack, resolving its ring now (cache hit:
/// one compare). The TSC is read last, so the bookkeeping is outside the
/// measured interval.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string that stays valid while the process records under it.
#[inline(always)]
pub unsafe fn start(t: &mut latte_thread, id: *const c_char, mode: latte_mode) {
    let d = t.depth;
    if d >= LATTE_MAX_DEPTH {
        note_overflow(t);
        return;
    }
    let mode = tsc::normalize_mode(mode);
    let h = cache_index(id);
    let ring = match cache_entry(t, id, h) {
        Some(r) => r,
        None => match cache_probe(t, id, h) {
            // Further along the probe order: now and then it takes its
            // home entry (`cache_promote`).
            Some((s, at)) => {
                cache_promote(t, id, at);
                s
            }
            // SAFETY: forwarded (this function's contract on `id`).
            None => unsafe { resolve(t, id) },
        },
    };
    // (Unlike the C path, `t` here is already the active state, so the
    // slow path cannot have moved spans onto it: the depth still holds.)
    let d = d as usize;
    // Steps S1-S3 of the span stack protocol (module doc).
    t.depth = d as u32 + 1; // S1
    compiler_fence(Ordering::SeqCst);
    t.frame_word[d] = frame_word(t.top_ring, d as u32, mode); // S2
    t.frame_head[d] = switch_mark(t);
    compiler_fence(Ordering::SeqCst);
    t.top_ring = ring; // S3
    t.frame_tsc[d] = tsc::read_start(mode);
}

/// Closes the innermost open span and records it; returns its duration in
/// cycles, 0 when nothing was open. The TSC is read first.
#[inline(always)]
pub fn stop(t: &mut latte_thread, mode: latte_mode) -> u64 {
    stop_at(t, mode, tsc::read_stop(mode))
}

/// `stop` with the TSC already read (callers read it before looking up
/// their thread state, so that lookup stays outside the measured span).
#[inline(always)]
pub fn stop_at(t: &mut latte_thread, mode: latte_mode, now: u64) -> u64 {
    let d = t.depth;
    if d == 0 {
        note_orphan(t);
        return 0;
    }
    // Steps P1-P3 of the span stack protocol (module doc).
    let ring = t.top_ring; // P1
    let d = d as usize - 1;
    let word = t.frame_word[d];
    let start_tsc = t.frame_tsc[d];
    let start_mark = t.frame_head[d];
    compiler_fence(Ordering::SeqCst);
    t.top_ring = frame_ring(word); // P2
    compiler_fence(Ordering::SeqCst);
    t.depth = d as u32; // P3
    let dur = duration(start_tsc, now);
    let switched = switched_since(t, start_mark).0;
    let packed = dur | frame_bits(word) | ((tsc::normalize_mode(mode) as u64) << LATTE_STOP_MODE_SHIFT) | switched;
    // SAFETY: top_ring is a ring this thread owns or a sink (both fit its mask).
    unsafe { write_own(t, ring, start_tsc, packed) };
    dur
}

/// Appends a sample to the tagged ring `ring` at the thread's own copy of
/// its index when the ring's index agrees (W1 with `next_idx`, the ring
/// protocol's `writer_index_own`), then keeps the new index.
///
/// # Safety
/// `ring` is a ring this thread owns, or a sink, tagged (`tag_ring`), and
/// fits `t.sample_mask`.
#[inline(always)]
pub unsafe fn write_own(t: &mut latte_thread, ring: u64, start_tsc: u64, packed: u64) {
    let slot = ring_ptr(ring);
    let own = &mut t.next_idx[ring_token(ring)];
    // W1.
    // SAFETY: the caller guarantees a live slot header of this thread's (or a sink).
    let idx = crate::ring::writer_index_own(unsafe { &(*slot).write_idx }, own);
    // SAFETY: as above; idx is the ring's own index (W1).
    *own = unsafe { write_sample_at(slot, t.sample_mask, idx, start_tsc, packed) };
}

/// A pulse from one call site: records the cycles since that site's
/// previous pulse on this thread (the first call only primes the site).
///
/// # Safety
/// `id` is NULL or a NUL-terminated string that stays valid while the process records under it.
#[inline(always)]
pub unsafe fn pulse(t: &mut latte_thread, site: &mut latte_pulse_site, id: *const c_char) {
    let now = tsc::rdtsc();
    if site.id != id || id.is_null() {
        // SAFETY: forwarded (this function's contract on `id`).
        return unsafe { pulse_slow(t, site, id, now) };
    }
    let last = site.last_tsc;
    site.last_tsc = now;
    let packed = duration(last, now) | pulse_bits(t.depth);
    // The site's ring and its copy of the ring's index, each read once
    // (volatile: a plain read may be repeated): the write goes to the ring
    // compared, at the index compared (as in `latte_inline.h`).
    // SAFETY: two fields of `site`, a valid reference.
    let (slot, next) = unsafe { (core::ptr::read_volatile(&site.slot), core::ptr::read_volatile(&site.next_idx)) };
    // SAFETY: the site's slot was resolved by this thread for `id`.
    let h = unsafe { &*slot };
    // The rare path for both rare cases: something else wrote the ring (a
    // span, another site of this ID), or the thread is tracked and its
    // switch count plus base moved since this site's previous pulse. An
    // untracked thread's pulse does not load its switch count. Relaxed:
    // this thread is the only writer of write_idx.
    let quiet = h.write_idx.load(Ordering::Relaxed) == next && (t.switch_base == 0 || switch_mark(t) == site.last_head);
    site.next_idx = if quiet {
        // SAFETY: as above; next is the ring's index (just compared).
        unsafe { write_sample_at(slot, t.sample_mask, next, last, packed) }
    } else {
        let packed = packed | pulse_switched(t, site);
        // SAFETY: as above.
        unsafe { write_sample(slot, t.sample_mask, last, packed) };
        h.write_idx.load(Ordering::Relaxed)
    };
}

/// Whether a pulse's interval saw a switch (`switched_since` the mark its
/// site saw last), as its `LATTE_SAMPLE_SWITCHED` bit, and the site's mark
/// brought up to date.
#[inline(always)]
pub fn pulse_switched(t: &latte_thread, site: &mut latte_pulse_site) -> u64 {
    let (switched, mark) = switched_since(t, site.last_head);
    site.last_head = mark;
    switched
}

/// A pulse whose site is not resolved for `id` yet (first call, or a
/// different ID from the same site, or a NULL ID): resolves, primes, and
/// records the interval when the site was primed before.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string that stays valid while the process records under it.
#[cold]
#[inline(never)]
pub unsafe fn pulse_slow(t: &mut latte_thread, site: &mut latte_pulse_site, id: *const c_char, now: u64) {
    let last = site.last_tsc;
    site.last_tsc = now;
    // SAFETY: forwarded (this function's contract on `id`).
    let Some(slot) = (unsafe { resolve_slot(t, id) }).map(ring_ptr) else {
        // Not cached: every pulse that cannot be recorded is counted.
        site.id = core::ptr::null();
        return;
    };
    // The site is changed with its ID cleared, and given its ID last,
    // after the write: a signal handler pulsing here meanwhile takes this
    // slow path too, never the fast one with a ring or an index this call
    // is still changing. Volatile, between compiler fences: the stores
    // stay, in this order, as a handler on the thread sees them.
    // SAFETY: a field of `site`, a valid reference.
    unsafe { core::ptr::write_volatile(&mut site.id, core::ptr::null()) };
    compiler_fence(Ordering::SeqCst);
    site.slot = slot;
    // After resolve_slot, which may have opened the thread's switch ring.
    let switched = pulse_switched(t, site);
    if last != 0 {
        let packed = duration(last, now) | pulse_bits(t.depth) | switched;
        // At the ring's own index (W1), which a handler may have moved.
        // SAFETY: just resolved for this thread.
        unsafe { write_sample(slot, t.sample_mask, last, packed) };
    }
    // SAFETY: a slot (or sink) of this thread; relaxed: its only writer.
    site.next_idx = unsafe { &*slot }.write_idx.load(Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { core::ptr::write_volatile(&mut site.id, id) };
}

/// Slow path of a Stop that found no open span on `t`: when `t` is the
/// thread's active state, an orphan Stop (counted, 0); otherwise `t` lost
/// the thread to another state, and the Stop closes that state's innermost
/// span.
pub fn stop_slow(t: *mut latte_thread, mode: latte_mode, now: u64) -> u64 {
    let cur = current_if_any();
    if cur.is_null() || cur == t {
        count_orphan();
        return 0;
    }
    // SAFETY: the calling thread's active state.
    stop_at(unsafe { &mut *cur }, mode, now)
}
