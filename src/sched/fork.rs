//! Switch tracking across `fork`: the forking thread's state stops loading
//! its ring from the prepare step (step B5 of `watch`), and the child, which
//! has no copy of the parent's perf mappings, forgets them, closes the
//! inherited descriptors and, when tracking is on, opens an event of its
//! own for the forking thread.

use super::watch::{current_ring, point_bound, point_watch, untracked_head, CURRENT};
use super::{fds, with_thread, ENABLED, LAST_REFUSAL, LATTE_SCHED_OFF, LATTE_SCHED_PENDING, OPENED, REFUSED, SCHED_ON, TRACKED};
use core::cell::RefCell;
use core::sync::atomic::Ordering;
use std::sync::MutexGuard;

thread_local! {
    /// The guard of `FDS` that the forking thread holds from the prepare
    /// handler to the parent's or the child's.
    static FORK_HOLD: RefCell<Option<MutexGuard<'static, Vec<i32>>>> = const { RefCell::new(None) };
}

thread_local! {
    /// The open ring's count read in the fork's prepare step (`atfork_child`).
    static FORK_HEAD: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Installs the three handlers below, once per process.
pub(super) fn install_fork_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: three valid extern "C" functions without arguments.
        unsafe { libc::pthread_atfork(Some(atfork_prepare), Some(atfork_parent), Some(atfork_child)) };
    });
}

/// How far past the count read in the prepare step a fork child starts its
/// next ring's base: more than the records of every switch the forking
/// thread could have between that read and the fork itself.
const FORK_MARGIN: u64 = 1 << 32;

/// Before the fork: the forking thread's state stops loading its ring
/// (pointed at the word that never moves until `atfork_parent`), so that
/// fork callbacks registered by others that record in the child, before
/// latte's own child callback runs, never load a page the child lacks. A
/// sample of this thread that ends during the fork is not flagged.
extern "C" fn atfork_prepare() {
    let (head, base) = current_ring();
    if base != 0 {
        // SAFETY: the thread's open ring, mapped until it is released on
        // this thread (not now: this thread is forking). Relaxed: a count
        // read for the child's next base, which only needs a value at
        // least this recent.
        let h = unsafe { &*head }.load(Ordering::Relaxed);
        let _ = FORK_HEAD.try_with(|f| f.set(h));
    }
    // Step B5.
    point_watch(untracked_head(), 0);
    let g = fds();
    let _ = FORK_HOLD.try_with(|h| *h.borrow_mut() = Some(g));
}

extern "C" fn atfork_parent() {
    let _ = FORK_HOLD.try_with(|h| h.borrow_mut().take());
    // Step B5, undone.
    let (head, base) = current_ring();
    point_watch(head, base);
}

/// The child: the forking thread's mapping does not exist here and the
/// other threads do not either; their descriptors are closed, and the
/// forking thread gets an event of its own when tracking is on.
extern "C" fn atfork_child() {
    // The parent's ring is not mapped here, whatever follows: no state
    // bound from now on is pointed at it (the bound one was in prepare).
    let _ = CURRENT.try_with(|c| c.set((core::ptr::null(), 0)));
    let mine = with_thread(|t| {
        let fd = t.ring.as_ref().map(|r| r.raw_fd());
        if let Some(r) = t.ring.take() {
            // Step B4 (the ring is not mapped here at all).
            point_bound(untracked_head(), 0);
            r.forget_after_fork();
            // The ring is not mapped here: its last count is the one read
            // in the prepare step, plus what the margin covers.
            t.next_base = t.base.max(1) + FORK_HEAD.try_with(|f| f.get()).unwrap_or(0) + FORK_MARGIN;
            t.base = 0;
        }
        t.id = 0;
        // Not PENDING yet: a signal handler's slow path on this thread
        // would open an event, and wait for the descriptor list this
        // thread still holds (below) for ever.
        t.status = LATTE_SCHED_OFF;
        fd
    })
    .flatten();
    if let Ok(Some(mut g)) = FORK_HOLD.try_with(|h| h.borrow_mut().take()) {
        for &fd in g.iter().filter(|&&fd| Some(fd) != mine) {
            // SAFETY: an inherited descriptor of an event of a thread that
            // does not exist in this process; nothing here uses it.
            unsafe { libc::close(fd) };
        }
        g.clear();
    }
    // The list is let go: the thread may be asked again.
    let _ = with_thread(|t| t.status = LATTE_SCHED_PENDING);
    // A new process: its own counts.
    TRACKED.store(0, Ordering::Relaxed);
    OPENED.store(0, Ordering::Relaxed);
    for r in &REFUSED {
        r.store(0, Ordering::Relaxed);
    }
    LAST_REFUSAL.store(0, Ordering::Relaxed);
    if ENABLED.load(Ordering::Relaxed) == SCHED_ON {
        with_thread(|t| {
            // Unless a signal handler's slow path opened it meanwhile.
            if t.status == LATTE_SCHED_PENDING {
                let _ = t.open(); // a refusal is kept in the thread's status
            }
        });
    }
}
