//! Fork handlers: the registry lock is held across `fork`; the child keeps
//! the forking thread's state, retires the others, and remaps a shared
//! region as a private copy.

use super::registry::{Cold, COLD, REGISTRY};
use crate::region::{ForkCut, Region};

/// The region as at the fork: taken by `atfork_prepare`, used by
/// `atfork_child`. Touched only while the registry lock is held (prepare
/// to the parent or child step).
struct Cut(core::cell::UnsafeCell<Option<ForkCut>>);

// SAFETY: accessed only under the registry lock (see above).
unsafe impl Sync for Cut {}

static CUT: Cut = Cut(core::cell::UnsafeCell::new(None));

pub(super) extern "C" fn atfork_prepare() {
    REGISTRY.acquire();
    // SAFETY: the lock is held; nothing else touches the registry or CUT.
    let reg = unsafe { &*REGISTRY.data.get() };
    if let Some(r) = reg.region.filter(|r| r.in_object()) {
        // SAFETY: under the registry lock (CUT's rule).
        let cut = unsafe { &mut *CUT.0.get() }.get_or_insert_with(ForkCut::default);
        cut.take(r);
    }
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
        // SAFETY: under the registry lock, held since prepare (CUT's rule).
        let cut = unsafe { &*CUT.0.get() };
        let empty = ForkCut::default();
        // SAFETY: single-threaded child; the Region is leaked and only read
        // elsewhere through shared references that no other thread holds now.
        unsafe { (*r).privatize_after_fork(cut.as_ref().unwrap_or(&empty)) };
    }
    // Only the cold states: the other threads' hot states may be their own
    // thread-locals, which nothing here should touch.
    let others: Vec<*mut Cold> = reg.colds.iter().copied().filter(|&c| c != me).collect();
    for c in others {
        reg.retire_cold(c);
    }
    REGISTRY.release();
}
