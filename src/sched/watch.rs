//! Binding a thread's hot state to its switch count: where the recorder's
//! hot path finds the count it flags switched samples with.
//!
//! A hot state (`latte_thread`, the recorder's) holds two fields for it:
//! `switch_head`, the address of the thread's switch count (the `data_head`
//! of its perf ring), and `switch_base`, added to that count to make a mark
//! (0: the thread is untracked, and the hot path loads no count at all).
//! This module points them; the recorder says which state's fields are the
//! thread's. Every step runs on the thread itself or in a signal handler
//! interrupting it, so program order, with compiler fences where a handler
//! could come between two stores, is the whole of the ordering.
//!
//! # Protocol
//!
//! | step | where | what | pairs with |
//! |---|---|---|---|
//! | B1 | [`bind`] (recorder: a state becomes the thread's) | the state's fields become `BOUND` and are pointed at `CURRENT` | B3, B4 |
//! | B2 | [`unbind`] (recorder: a state loses the thread, or the thread retires it) | the fields are pointed at the untracked word; `BOUND` forgets them if they are its | B1 |
//! | B3 | [`point_bound`] on a ring's opening ([`ThreadSched::open`](super::ThreadSched::open)) | `CURRENT` becomes the ring's count and base; `BOUND` is pointed at them | B1, P |
//! | B4 | [`point_bound`] before a ring is unmapped ([`ThreadSched::release`](super::ThreadSched::release), the fork child) | `CURRENT` is cleared and `BOUND` pointed at the untracked word first; the unmap comes after | H |
//! | B5 | [`point_watch`] in the fork's prepare and parent steps (`fork`) | `BOUND` is pointed at the untracked word across the fork, `CURRENT` kept; the parent points it back | H |
//! | P | [`Watch::point`] | closing: base 0 stored first, then the head; opening: the head first, then the base; a compiler fence between | H |
//! | H | the hot path ([`switch_mark`](crate::recorder::switch_mark), `latte__switch_mark`) | loads the base; 0 loads nothing more; else loads the count at the head | P |
//!
//! Because of P, a handler that records between P's two stores sees a base
//! of 0 and loads no count: it never pairs a base with another ring's
//! count, and never loads from a ring about to be unmapped (B4). `CURRENT`
//! is a plain cell apart from the thread's `ThreadSched` (a `RefCell`), so
//! that a state a handler binds (B1) while that is borrowed still gets the
//! ring.

use core::sync::atomic::{compiler_fence, AtomicU64, Ordering};

/// What `switch_head` points at while its thread is not tracked: a word
/// that is never written. With the base at 0 the hot path does not load it;
/// it keeps the pointer valid whatever reads it.
static UNTRACKED: AtomicU64 = AtomicU64::new(0);

/// What `latte_thread.switch_head` points at when its thread has no ring.
pub fn untracked_head() -> *const AtomicU64 {
    &UNTRACKED
}

/// The two fields of a hot state (`latte_thread.switch_head` and
/// `switch_base`) that say where its thread's switch count lives and the
/// base a pulse adds to it; this module repoints them when the thread's
/// ring opens or closes.
#[derive(Clone, Copy)]
pub struct Watch {
    pub head: *mut *const AtomicU64,
    pub base: *mut u64,
}

impl Watch {
    /// Points the fields at `head`, with `base` (0: the word that never moves).
    ///
    /// # Safety
    /// Both fields are valid and this thread's.
    unsafe fn point(self, head: *const AtomicU64, base: u64) {
        // Step P. The base 0 (untracked) first when it goes to 0, last when it
        // leaves it, with a compiler fence between (a signal handler that
        // records on this thread sees this thread's stores in program
        // order): a handler between the two stores sees base 0, and a base
        // of 0 loads no count, so it never pairs a base with another ring's
        // count, nor loads from a ring about to be unmapped.
        // SAFETY: the caller's guarantee (both fields valid, this thread's).
        unsafe {
            if base == 0 {
                *self.base = 0;
                compiler_fence(Ordering::SeqCst);
                *self.head = head;
            } else {
                *self.head = head;
                compiler_fence(Ordering::SeqCst);
                *self.base = base;
            }
        }
    }
}

thread_local! {
    /// The fields of the calling thread's active hot state, bound by the
    /// recorder when it activates a state and unbound when it detaches it:
    /// the ones this module repoints when the thread's ring opens or closes.
    /// No destructor, so it is there while other thread-local destructors
    /// run.
    static BOUND: core::cell::Cell<Option<Watch>> = const { core::cell::Cell::new(None) };
    /// The calling thread's open ring (its `data_head`, NULL without one)
    /// and its base: what a state bound now is pointed at. Kept apart from
    /// the thread's `ThreadSched` (a `RefCell`), so that a state a signal
    /// handler binds while that is borrowed still gets the ring.
    pub(super) static CURRENT: core::cell::Cell<(*const AtomicU64, u64)> = const { core::cell::Cell::new((core::ptr::null(), 0)) };
}

/// Makes `w` (the fields of the calling thread's active state) the ones
/// this thread's ring opening or closing repoints, and points them at the
/// current switch count now.
///
/// # Safety
/// `w`'s fields stay valid and are used only by the calling thread until
/// `unbind(w)` or the thread's exit.
pub unsafe fn bind(w: Watch) {
    // Step B1.
    let _ = BOUND.try_with(|b| b.set(Some(w)));
    let (head, base) = current_ring();
    // SAFETY: the caller's guarantee.
    unsafe { w.point(head, base) };
}

/// Forgets `w` if it is the bound one (its state lost the thread, or the
/// thread is retiring it); its fields are pointed at the word that never
/// moves.
///
/// # Safety
/// As `bind`.
pub unsafe fn unbind(w: Watch) {
    // Step B2.
    // SAFETY: the caller's guarantee.
    unsafe { w.point(untracked_head(), 0) };
    let _ = BOUND.try_with(|b| {
        if b.get().is_some_and(|x| x.head == w.head) {
            b.set(None);
        }
    });
}

/// Makes `head` (with `base`; 0: the word that never moves) the calling
/// thread's switch count and points the bound fields at it (before a ring
/// is unmapped: at the word that never moves, so that no load ever reaches
/// the unmapped page).
pub(super) fn point_bound(head: *const AtomicU64, base: u64) {
    // Step B3 (a ring opens) or B4 (base 0: before a ring is unmapped).
    let _ = CURRENT.try_with(|c| c.set(if base == 0 { (core::ptr::null(), 0) } else { (head, base) }));
    point_watch(head, base);
}

/// Points the bound fields at `head`, with `base`, leaving `CURRENT` alone.
pub(super) fn point_watch(head: *const AtomicU64, base: u64) {
    if let Some(w) = BOUND.try_with(|b| b.get()).ok().flatten() {
        // SAFETY: bound by `bind`, whose caller keeps the fields valid and
        // this thread's until `unbind`.
        unsafe { w.point(head, base) };
    }
}

/// The calling thread's switch count and its base: its ring's `data_head`
/// and that ring's base, or `untracked_head()` and 0.
pub(super) fn current_ring() -> (*const AtomicU64, u64) {
    match CURRENT.try_with(|c| c.get()) {
        Ok((head, base)) if !head.is_null() => (head, base),
        _ => (untracked_head(), 0),
    }
}
