//! Process-wide counters: what the region header counts (spans dropped and
//! why, slots reused, threads seen) and what this process counts on its own
//! (mapping faults, reentrant refusals).

use crate::layout::latte_region_header;
use core::sync::atomic::{AtomicU64, Ordering};

/// Spans refused because a signal handler interrupted latte's own slow
/// path on their thread (which held the registry lock). Process-local.
pub(crate) static REENTRANT_DROPS: AtomicU64 = AtomicU64::new(0);

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
    /// latte's slow path on the same thread held the registry lock or was
    /// changing the thread's states (see the span stack protocol). Counted
    /// in this process, not in the region.
    pub reentrant_drops: u64,
    /// Bytes of ring memory the region may commit (`u64::MAX`: no budget;
    /// 0: an image of a producer that kept none).
    pub budget_bytes: u64,
    /// Bytes of ring memory committed so far (whole pages): growth stops
    /// at `budget_bytes`, and each new ring's first pages (two at most)
    /// are taken outside it.
    pub committed_bytes: u64,
    /// Laps rings made before reaching their size because their memory
    /// could not grow (the budget was reached, or memory ran out); what
    /// they overwrote is counted lost by readers.
    pub early_laps: u64,
}

/// Reads the process-wide counters of a region header.
pub fn counters_of(h: &latte_region_header) -> latte_counters {
    // Relaxed: statistics; no data is read on the strength of them.
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
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
        budget_bytes: l(&h.budget_bytes),
        committed_bytes: l(&h.committed_bytes),
        early_laps: l(&h.early_laps),
    }
}
