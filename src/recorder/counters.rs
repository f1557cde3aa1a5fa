//! The calling thread's counters (`latte_thread_counters`); the process's
//! are `crate::counters`.

use super::thread::{cold_thread_idx, current_if_any};
use core::cell::Cell;

std::thread_local! {
    /// Starts of this thread ignored beyond 64 open spans. Const-initialised
    /// and without a destructor (as the two below), so that a signal
    /// handler may count here: the thread's own counters, which no other
    /// thread touches; a handler's increment between the interrupted one's
    /// read and write of the same counter is lost, nothing else.
    static OVERFLOW_STARTS: Cell<u64> = const { Cell::new(0) };
    /// Stops of this thread ignored with nothing open.
    static ORPHAN_STOPS: Cell<u64> = const { Cell::new(0) };
    /// Spans of this thread not recorded for want of an ID or a ring.
    static DROPPED: Cell<u64> = const { Cell::new(0) };
}

/// Adds one to a counter of the calling thread.
fn add_one(counter: &'static std::thread::LocalKey<Cell<u64>>) {
    counter.with(|c| c.set(c.get().wrapping_add(1)));
}

/// A Start of this thread ignored beyond 64 open spans.
pub(super) fn count_overflow_start() {
    add_one(&OVERFLOW_STARTS);
}

/// A Stop of this thread ignored with nothing open.
pub(super) fn count_orphan_stop() {
    add_one(&ORPHAN_STOPS);
}

/// A span of this thread not recorded (an unfit ID, no ring to be had).
pub(super) fn count_dropped() {
    add_one(&DROPPED);
}

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
    cold_thread_idx()
}

/// The calling thread's counters (its index is 0 until it has recorded).
pub fn thread_counters() -> latte_thread_counters {
    let t = current_if_any();
    // SAFETY: the calling thread's active state.
    let depth = if t.is_null() { 0 } else { unsafe { (*t).depth } };
    latte_thread_counters {
        thread_idx: cold_thread_idx().unwrap_or(0),
        depth,
        overflow_starts: OVERFLOW_STARTS.with(Cell::get),
        orphan_stops: ORPHAN_STOPS.with(Cell::get),
        dropped: DROPPED.with(Cell::get),
    }
}
