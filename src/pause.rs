//! Pausing the writers of memory that is being moved: while a private
//! region becomes a shared one where it stands (`region::share`), its
//! mappings are read-only, and a thread that writes to one of them (a Stop,
//! a pulse, a counter) takes a SIGSEGV that latte's handler holds until the
//! move is over; on return the store runs again, on the memory now mapped
//! there. Nothing is lost and no pointer changes.
//!
//! The protocol (`region::share` cites its steps):
//! - S1 The mover registers the ranges it will move (`Pause::begin`) and
//!   sets the pause word, before it makes any of them read-only.
//! - S2 A fault in a registered range that is a write to a read-only page
//!   (`SEGV_ACCERR`) waits (futex) while the pause word is set, then
//!   returns. Any other SIGSEGV goes to the action from before ours
//!   (`sigchain`).
//! - S3 The mover makes every range writable again (mapped anew, or its
//!   old memory given its protection back) before it clears the pause word
//!   and wakes the waiters (`Pause` dropped).
//!
//! Ranges stay registered after the move: a thread that faulted just before
//! S3 may run the handler after it, and must still find its range (it then
//! returns at once, and its store runs on the writable page). Registered
//! ranges are never made read-only again, so no store loops on them. A
//! process moves its region at most once, so the table is fixed.
//!
//! The handler runs with every signal blocked: a handler of the program's
//! that recorded while the thread waited would fault again with SIGSEGV
//! blocked, which the kernel turns into the default action. The mover's own
//! thread blocks every signal but the faults while it moves
//! (`Pause::begin`), so no handler on it writes to what it moves.

use crate::error::Error;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// `si_code` of a SIGSEGV for an access the page's protection refuses
/// (Linux `SEGV_ACCERR`, which the `libc` crate does not name).
const SEGV_ACCERR: libc::c_int = 2;

/// Ranges the table holds: a region's header and each of its chunks.
const RANGES: usize = 2 * crate::layout::LATTE_CHUNKS as usize + 1;

/// One registered range; `len` 0: free.
struct Range {
    base: AtomicUsize,
    len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Range = Range { base: AtomicUsize::new(0), len: AtomicUsize::new(0) };

static TABLE: [Range; RANGES] = [FREE; RANGES];

/// 1 while ranges are being moved (S1 to S3); the futex waiters sleep on.
static PAUSED: AtomicU32 = AtomicU32::new(0);

/// Stores that waited for a move (S2), since the process started.
static WAITS: AtomicU64 = AtomicU64::new(0);

/// Stores that waited while memory moved (S2), process-wide, for the tests.
#[cfg(feature = "internals")]
pub fn waits() -> u64 {
    // Relaxed: a statistic.
    WAITS.load(Ordering::Relaxed)
}

/// Our SIGSEGV handler and the action from before it.
static CHAIN: crate::sigchain::Chain = crate::sigchain::Chain::new(libc::SIGSEGV);

/// Writers of the registered ranges wait until this is dropped (S3), which
/// also gives the mover's thread its signal mask back.
pub struct Pause {
    mask: libc::sigset_t,
}

impl Pause {
    /// S1: registers `ranges` (base, length), sets the pause word, and
    /// blocks every signal but the faults on the calling thread. `ENOSPC` when the table
    /// cannot hold them (nothing changed then).
    pub fn begin(ranges: &[(usize, usize)]) -> Result<Pause, Error> {
        // Relaxed: the table is only written by the mover, under the
        // registry lock; the handler's acquire loads pair with the release
        // stores below.
        let free = TABLE.iter().filter(|r| r.len.load(Ordering::Relaxed) == 0).count();
        if free < ranges.len() {
            return Err(Error::Os(libc::ENOSPC));
        }
        CHAIN.install(on_sigsegv, true);
        let mut slots = TABLE.iter().filter(|r| r.len.load(Ordering::Relaxed) == 0);
        for &(base, len) in ranges {
            let r = slots.next().expect("counted above");
            r.base.store(base, Ordering::Relaxed);
            // Release: a handler that sees the length sees the base.
            r.len.store(len, Ordering::Release);
        }
        // SAFETY: all-zero sigsets are valid; fill and sigmask get valid pointers.
        let mask = unsafe {
            let mut all: libc::sigset_t = core::mem::zeroed();
            let mut old: libc::sigset_t = core::mem::zeroed();
            libc::sigfillset(&mut all);
            // Faults stay deliverable: blocked, the kernel would make them fatal.
            for s in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE] {
                libc::sigdelset(&mut all, s);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            old
        };
        // SeqCst: the word is set before any range is made read-only (the
        // mover's mprotect calls follow this store), so a writer that
        // faults on one sees it set.
        PAUSED.store(1, Ordering::SeqCst);
        Ok(Pause { mask })
    }
}

impl Drop for Pause {
    /// S3 (the caller has made every range writable): clears the pause word
    /// and wakes every waiter; gives the thread its signal mask back.
    fn drop(&mut self) {
        // SeqCst: after every range's mapping or protection was restored.
        PAUSED.store(0, Ordering::SeqCst);
        // SAFETY: a futex wake on a static word; no memory is touched.
        unsafe { libc::syscall(libc::SYS_futex, PAUSED.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
        // SAFETY: the mask saved by `begin`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.mask, core::ptr::null_mut()) };
    }
}

/// Whether `addr` lies in a registered range.
fn registered(addr: usize) -> bool {
    TABLE.iter().any(|r| {
        // Acquire: pairs with the release store of the length in `begin`.
        let len = r.len.load(Ordering::Acquire);
        let base = r.base.load(Ordering::Relaxed);
        len != 0 && addr >= base && addr - base < len
    })
}

extern "C" fn on_sigsegv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == SEGV_ACCERR && registered(addr) {
        // Relaxed: a statistic.
        WAITS.fetch_add(1, Ordering::Relaxed);
        // S2. Acquire: pairs with the SeqCst store of S3, after which the
        // range is writable.
        while PAUSED.load(Ordering::Acquire) != 0 {
            // SAFETY: a futex wait on a static word while it holds 1; no
            // memory is touched. A spurious or interrupted wake loops.
            unsafe { libc::syscall(libc::SYS_futex, PAUSED.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, 1u32, core::ptr::null::<libc::timespec>()) };
        }
        return; // the store runs again, on writable memory
    }
    CHAIN.forward(sig, info, ctx);
}

/// Puts the SIGSEGV action from before ours back, if ours is installed.
/// Runs when the library is unloaded (`dlclose`) or the process exits.
extern "C" fn restore_previous_on_unload() {
    CHAIN.restore(on_sigsegv);
}

/// `restore_previous_on_unload` as a finaliser of this shared object.
#[used]
#[link_section = ".fini_array"]
static RESTORE_ON_UNLOAD: extern "C" fn() = restore_previous_on_unload;
