//! The registry's lock: a pthread mutex, taken only on slow paths, with a
//! per-thread flag so that a signal handler never waits for a lock its own
//! thread holds.

use core::cell::{Cell, UnsafeCell};
use core::sync::atomic::{compiler_fence, Ordering};

/// The registry's lock: a pthread mutex, taken only on slow paths.
///
/// A pthread mutex rather than a spin lock on an atomic: ThreadSanitizer
/// intercepts `pthread_mutex_lock`/`unlock` wherever they are called from,
/// so a program built with `-fsanitize=thread` sees the ordering this lock
/// gives (latte itself is not instrumented; an atomic spin lock would be
/// invisible, and the allocations made under it would be reported as
/// races). `acquire` and `release` are separate so that `pthread_atfork`'s
/// prepare and parent/child callbacks can hold it across a fork.
pub struct Lock<T> {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    pub(super) data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by `mutex`.
unsafe impl<T: Send> Sync for Lock<T> {}

pub struct Guard<'a, T> {
    lock: &'a Lock<T>,
}

thread_local! {
    /// Whether the calling thread holds the registry lock (the one `Lock`
    /// there is). A signal handler that records on a thread interrupted
    /// while holding it must not take it again: see `lock_unless_held`.
    static HOLDS_REGISTRY: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread holds the registry lock now.
pub fn registry_held_here() -> bool {
    HOLDS_REGISTRY.with(|h| h.get())
}

impl<T> Lock<T> {
    pub const fn new(v: T) -> Self {
        Lock { mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER), data: UnsafeCell::new(v) }
    }

    /// Takes the lock, the calling thread's flag up first (see `lock`).
    /// Apart from `lock`, for `pthread_atfork`'s prepare callback: with the
    /// flag up, fork callbacks registered by others that record on this
    /// thread while it forks are refused instead of waiting for ever.
    pub(super) fn acquire(&self) {
        // Set before acquiring and cleared after releasing, so that a
        // signal handler never finds the lock held by its own thread with
        // the flag down (it may find the flag up while the lock is only
        // being taken or has just been let go: it refuses then too).
        HOLDS_REGISTRY.with(|h| h.set(true));
        compiler_fence(Ordering::SeqCst);
        // SAFETY: a statically initialised mutex that is never moved (the
        // lock lives in a static) nor destroyed. A default mutex's lock
        // acquires: the holder's writes, released by unlock, are visible.
        let rc = unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
        debug_assert_eq!(rc, 0);
    }

    /// Lets the lock go, the flag down after (see `acquire`).
    pub(super) fn release(&self) {
        // SAFETY: as in `acquire`; called only by the holder (or, in a fork
        // child, by the thread that forked while holding it). Unlock
        // releases everything written under the lock.
        let rc = unsafe { libc::pthread_mutex_unlock(self.mutex.get()) };
        debug_assert_eq!(rc, 0);
        compiler_fence(Ordering::SeqCst);
        HOLDS_REGISTRY.with(|h| h.set(false));
    }

    pub fn lock(&self) -> Guard<'_, T> {
        self.acquire();
        Guard { lock: self }
    }

    /// The lock, or None when the calling thread already holds it: a
    /// signal handler interrupted the holder on this thread, and waiting
    /// would wait for ever (the recording slow paths refuse instead).
    pub fn lock_unless_held(&self) -> Option<Guard<'_, T>> {
        if registry_held_here() {
            return None;
        }
        Some(self.lock())
    }
}

impl<T> core::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> core::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.lock.release();
    }
}
