//! The calling thread's counters (`latte_thread_counters`); the process's
//! are `crate::counters`.

use super::thread::{current_if_any, with_cold};

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
    /// Spans not recorded (an ID past the region's limit or whose name could not be stored, or no ring to be had).
    pub dropped: u64,
}

/// The calling thread's index, once it recorded.
pub fn current_thread_idx() -> Option<u32> {
    with_cold(|c| c.thread_idx)
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
