//! The recorder's counters: per thread (`latte_thread_counters`) and per
//! process (`latte_counters`, from the region header).

use super::thread::{current_if_any, with_cold, REENTRANT_DROPS};
use crate::layout::*;
use core::sync::atomic::Ordering;

/// Per-thread counters of the calling thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct latte_thread_counters {
    /// Process-wide index of this thread.
    pub thread_idx: u32,
    /// Spans open now.
    pub depth: u32,
    /// Starts ignored beyond 64 open spans.
    pub overflow_starts: u64,
    /// Stops ignored with nothing open.
    pub orphan_stops: u64,
    /// Spans not recorded (ID table or slots full).
    pub dropped: u64,
}

/// The calling thread's index, once it recorded.
pub fn current_thread_idx() -> Option<u32> {
    with_cold(|c| c.thread_idx)
}

/// The calling thread's ring for a token, if it has one.
pub fn own_slot_for(token: u32) -> Option<*mut latte_slot_header> {
    with_cold(|c| c.slots_by_token.get(token as usize).copied().unwrap_or(core::ptr::null_mut())).filter(|p| !p.is_null())
}

/// The calling thread's counters (zeros before it recorded anything).
pub fn thread_counters() -> latte_thread_counters {
    let t = current_if_any();
    // SAFETY: the calling thread's active state.
    let depth = if t.is_null() { 0 } else { unsafe { (*t).depth } };
    with_cold(|c| latte_thread_counters {
        thread_idx: c.thread_idx,
        depth,
        overflow_starts: c.overflow_starts,
        orphan_stops: c.orphan_stops,
        dropped: c.dropped,
    })
    .unwrap_or_default()
}

/// Process-wide counters (from the region header).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct latte_counters {
    pub overflow_starts: u64,
    pub orphan_stops: u64,
    pub unfit_id_drops: u64,
    pub no_slot_drops: u64,
    pub slot_reuses: u64,
    pub reuse_discarded: u64,
    pub late_drops: u64,
    pub threads_seen: u64,
    pub ids_used: u32,
    pub slots_used: u32,
    /// Pages of latte's shared mappings replaced after the object shrank
    /// under this process (`fault`): what went to them is lost. Counted in
    /// this process, not in the region.
    pub mapping_faults: u64,
    /// Spans and pulses refused because a signal handler recorded while
    /// latte's slow path on the same thread held the registry lock (see the
    /// span stack protocol). Counted in this process, not in the region.
    pub reentrant_drops: u64,
}

/// Reads the process-wide counters of a region header.
pub fn counters_of(h: &latte_region_header) -> latte_counters {
    // Relaxed: statistics; no data is read on the strength of them.
    let l = |a: &core::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    latte_counters {
        overflow_starts: l(&h.overflow_starts),
        orphan_stops: l(&h.orphan_stops),
        unfit_id_drops: l(&h.unfit_id_drops),
        no_slot_drops: l(&h.no_slot_drops),
        slot_reuses: l(&h.slot_reuses),
        reuse_discarded: l(&h.reuse_discarded),
        late_drops: l(&h.late_drops),
        threads_seen: l(&h.threads_seen),
        ids_used: h.ids_used.load(Ordering::Relaxed),
        slots_used: h.slots_used.load(Ordering::Relaxed),
        mapping_faults: crate::fault::faults(),
        reentrant_drops: REENTRANT_DROPS.load(Ordering::Relaxed),
    }
}
