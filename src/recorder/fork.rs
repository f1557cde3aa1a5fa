//! Fork handlers: the registry lock is held across `fork`; the child keeps
//! the forking thread's state, retires the others, and remaps a shared
//! region as a private copy.

use super::registry::{Cold, REGISTRY};
use super::thread::COLD;
use crate::region::Region;

pub(super) extern "C" fn atfork_prepare() {
    REGISTRY.acquire();
}

pub(super) extern "C" fn atfork_parent() {
    REGISTRY.release();
}

/// In the child: the forking thread keeps its state; every other thread's
/// state is retired (those threads do not exist here); a shared region is
/// remapped as a private copy-on-write view, so the child never writes into
/// the parent's rings.
pub(super) extern "C" fn atfork_child() {
    // SAFETY: the lock is held by this (the only) thread since prepare.
    let reg = unsafe { &mut *REGISTRY.data.get() };
    let me = COLD.try_with(|c| c.get()).unwrap_or(core::ptr::null_mut());
    if let Some(r) = reg.region {
        let r = r as *const Region as *mut Region;
        // SAFETY: single-threaded child; the Region is leaked and only read
        // elsewhere through shared references that no other thread holds now.
        unsafe { (*r).privatize_after_fork() };
    }
    // Only the cold states: the other threads' hot states may be their own
    // thread-locals, which nothing here should touch.
    let others: Vec<*mut Cold> = reg.colds.iter().copied().filter(|&c| c != me).collect();
    for c in others {
        reg.retire_cold(c);
    }
    REGISTRY.release();
}
