//! A sample's write into a ring once its index is known (W1): W2-W3 below
//! the ring's committed end (`write_committed`, inlined into the hot path),
//! and out of line at or past it (ring protocol, G1-G3): the ring grows
//! (its memory committed in bulk, `region::commit`), or, when no memory can
//! be had, laps early; then the sample is written. Runs on the ring's owner
//! thread, possibly in a signal handler: no lock, no allocation.

use super::registry::region_if_any;
use crate::layout::*;
use core::sync::atomic::Ordering;

/// W2-W3 at index `idx`, the ring's `write_idx`, below its committed end.
/// Returns the new index.
///
/// # Safety
/// `slot` is a ring the calling thread owns (or a sink), `mask` its
/// region's mask, `idx` its `write_idx` and below its `write_limit`.
#[inline(always)]
pub unsafe fn write_committed(slot: *mut latte_slot_header, mask: u64, idx: u64, start_tsc: u64, packed: u64) -> u64 {
    // SAFETY: the caller guarantees `slot` is a live slot header of ours.
    let h = unsafe { &*slot };
    // SAFETY: (idx & mask) < samples_per_slot and idx < write_limit, so
    // the sample is inside the slot, in committed memory.
    let s = unsafe { &*((slot as *mut u8).add(LATTE_SLOT_HEADER_SIZE as usize) as *const latte_sample).add((idx & mask) as usize) };
    crate::ring::publish(&h.write_idx, &s.start_tsc, &s.packed, idx, start_tsc, packed)
}

/// Writes a sample at index `idx` (W1's) of the ring at `slot`, whose
/// committed memory ends at or before `idx`: G1-G3, then W2-W3. Returns
/// the ring's new `write_idx`.
///
/// # Safety
/// As `write_sample_at`: `slot` is a ring the calling thread owns, or a
/// sink (whose memory is whole), `mask` its region's mask, `idx` its
/// `write_idx`.
#[cold]
#[inline(never)]
pub unsafe fn write_at_limit(slot: *mut latte_slot_header, mask: u64, idx: u64, start_tsc: u64, packed: u64) -> u64 {
    // SAFETY: the caller guarantees a live slot header of ours.
    let sh = unsafe { &*slot };
    // G1.
    let at = if crate::ring::committed(&sh.write_limit, idx) {
        idx
    } else {
        // Relaxed: this thread is the only writer of `write_limit`.
        let lim = sh.write_limit.load(Ordering::Relaxed);
        match region_if_any().map(|r| (r, r.grow_ring(slot, lim))) {
            // G2. Relaxed: read only by this thread's writes (and by
            // readers as a statistic); the memory is committed already.
            Some((_, Ok(new))) => {
                sh.write_limit.store(new, Ordering::Relaxed);
                idx
            }
            // G3.
            Some((r, Err(_))) => {
                crate::ring::early_lap(&sh.generation, &sh.gen_base, &sh.write_idx, idx);
                bump(&r.header().early_laps, 1);
                0
            }
            // No region: no ring of one either (a contract violation); the
            // sample is not written.
            None => return idx,
        }
    };
    // Only a header page lost under the mapping (zeros where the object
    // shrank, `fault`) leaves `at` outside: the sample is not written.
    if !crate::ring::committed(&sh.write_limit, at) {
        return idx;
    }
    // SAFETY: forwarded; `at` is below the committed end, and the ring's
    // write_idx (G3 set it to 0).
    unsafe { write_committed(slot, mask, at, start_tsc, packed) }
}
