//! Pausing the writers of memory that is being moved: while a private
//! region becomes a shared one where it stands (`region::share`), a thread
//! that stores into it (a Stop, a pulse, a counter) waits until the move is
//! over, then its store runs on the memory now mapped there. Nothing is
//! lost and no pointer changes.
//!
//! Two ways, the first the kernel allows:
//! - Write-protection by `userfaultfd` (Linux 6.4 and later, with
//!   `UFFD_USER_MODE_ONLY` for an unprivileged process; refused, for
//!   example, by container seccomp profiles that forbid the call): a store
//!   waits in the kernel, whatever the thread's signal mask.
//! - Read-only mappings and a SIGSEGV handler of latte's that waits: used
//!   only when no thread of the process blocks SIGSEGV (a fault while it is
//!   blocked kills the process) and the handler in place is latte's (a
//!   sanitizer may refuse it). Otherwise the move is refused (`EBUSY`).
//!
//! The protocol (`region::share` cites its steps):
//! - S1 `Pause::begin`: the mover blocks every signal but the faults on its
//!   own thread (no handler of the program's on it writes to what it
//!   moves), then write-protects every range; for the signal way, it
//!   registers the ranges and sets the pause word first.
//! - S2 A store into a protected range waits: in the kernel, or, for the
//!   signal way, in the handler (futex) while the pause word is set, after
//!   which it returns and the store runs again. Any other SIGSEGV goes to
//!   the action from before ours (`sigchain`).
//! - S3 `Pause` dropped: every range the mover did not map over
//!   (`replaced`) is writable again; the waiters are woken (the
//!   `userfaultfd` closed, or the pause word cleared); the mover's signal
//!   mask is restored.
//!
//! Between S1 and S3 the mover makes no allocation: a writer paused while
//! it held the allocator's lock would otherwise stop it for good.
//!
//! For the signal way, ranges stay registered after the move: a thread that
//! faulted just before S3 may run the handler after it, and must still find
//! its range (it then returns at once, and its store runs on the writable
//! page). A fork child forgets them (`forget_in_child`), since its copy of a
//! region may be made read-only for good. The handler runs with every
//! signal blocked: a handler of the program's that recorded while the
//! thread waited would fault again with SIGSEGV blocked, which kills.

use crate::error::Error;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `si_code` of a SIGSEGV for an access the page's protection refuses
/// (Linux `SEGV_ACCERR`, which the `libc` crate does not name).
const SEGV_ACCERR: libc::c_int = 2;

/// `userfaultfd(2)` flag: handle faults from user mode only (what an
/// unprivileged process may ask for).
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
/// The `userfaultfd` API version (`UFFD_API`).
const UFFD_API: u64 = 0xaa;
/// `uffdio_api.features`: write-protect faults, also on pages never
/// written (`UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_UNPOPULATED`).
const UFFD_FEATURES: u64 = 1 | 1 << 13;
/// `uffdio_register.mode`: write-protect (`UFFDIO_REGISTER_MODE_WP`).
const UFFDIO_REGISTER_MODE_WP: u64 = 2;
/// `uffdio_writeprotect.mode`: protect (`UFFDIO_WRITEPROTECT_MODE_WP`); 0
/// lifts the protection and wakes the waiters.
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1;
/// The ioctls (`_IOWR(0xAA, nr, struct)`): API, REGISTER, WRITEPROTECT.
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xc018_aa06;

/// `struct uffdio_api`.
#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

/// `struct uffdio_register`.
#[repr(C)]
struct UffdioRegister {
    start: u64,
    len: u64,
    mode: u64,
    ioctls: u64,
}

/// `struct uffdio_writeprotect`.
#[repr(C)]
struct UffdioWriteprotect {
    start: u64,
    len: u64,
    mode: u64,
}

/// Ranges the signal way's table holds: a region's header and each of its
/// chunks (a process moves its region at most once).
const RANGES: usize = 2 * crate::layout::LATTE_CHUNKS as usize + 1;

/// One registered range; `len` 0: free.
struct Range {
    base: AtomicUsize,
    len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Range = Range { base: AtomicUsize::new(0), len: AtomicUsize::new(0) };

static TABLE: [Range; RANGES] = [FREE; RANGES];

/// 1 while the signal way's ranges are read-only (S1 to S3); the futex
/// its waiters sleep on.
static PAUSED: AtomicU32 = AtomicU32::new(0);

/// Stores that waited in the SIGSEGV handler (S2), since the process started.
static WAITS: AtomicU64 = AtomicU64::new(0);

/// Our SIGSEGV handler and the action from before it.
static CHAIN: crate::sigchain::Chain = crate::sigchain::Chain::new(libc::SIGSEGV);

/// Stores that waited in the SIGSEGV handler while memory moved (S2),
/// process-wide, for the tests.
#[cfg(feature = "internals")]
pub fn waits() -> u64 {
    // Relaxed: a statistic.
    WAITS.load(Ordering::Relaxed)
}

/// Test hook: pause by the signal way even where `userfaultfd` works, so
/// that tests reach it. Never set outside tests.
#[doc(hidden)]
pub static SIGNAL_WAY_ONLY: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// How the writers wait.
enum How {
    /// In the kernel, on this `userfaultfd`.
    Uffd(OwnedFd),
    /// In latte's SIGSEGV handler.
    Signal,
}

/// Writers of the ranges wait until this is dropped (S3).
pub struct Pause {
    how: How,
    ranges: Vec<(usize, usize)>,
    /// Ranges the mover mapped over (their protection went with their old
    /// mapping).
    replaced: Vec<bool>,
    /// The mover's signal mask before S1.
    mask: libc::sigset_t,
}

impl Pause {
    /// S1 over `ranges` (base, length; page-aligned). `EBUSY` when neither
    /// way can pause the writers safely (nothing changed then).
    pub fn begin(ranges: Vec<(usize, usize)>) -> Result<Pause, Error> {
        let replaced = vec![false; ranges.len()];
        // Checked before anything is protected (it allocates).
        let signal_ok = no_thread_blocks_sigsegv();
        let mask = block_signals();
        // Relaxed: a test switch, read on its own.
        let uffd = if SIGNAL_WAY_ONLY.load(Ordering::Relaxed) { None } else { uffd_protect(&ranges) };
        let how = match uffd {
            Some(fd) => How::Uffd(fd),
            None if signal_ok && signal_protect(&ranges) => How::Signal,
            None => {
                // SAFETY: the mask saved above.
                unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &mask, core::ptr::null_mut()) };
                return Err(Error::BUSY);
            }
        };
        Ok(Pause { how, ranges, replaced, mask })
    }

    /// Whether writers wait in the kernel (`userfaultfd`), not in the
    /// SIGSEGV handler (for the tests).
    #[cfg(feature = "internals")]
    pub fn in_kernel(&self) -> bool {
        matches!(self.how, How::Uffd(_))
    }

    /// Notes that range `i` was mapped over (M4): it is left as it is at S3.
    pub fn replaced(&mut self, i: usize) {
        self.replaced[i] = true;
    }
}

impl Drop for Pause {
    /// S3.
    fn drop(&mut self) {
        let left = self.ranges.iter().zip(&self.replaced).filter(|(_, &r)| !r).map(|(&r, _)| r);
        match &self.how {
            How::Uffd(fd) => {
                for (base, len) in left {
                    // Lifting the protection wakes the range's waiters.
                    let _ = uffd_writeprotect(fd.as_raw_fd(), base, len, 0);
                }
                // Closing the descriptor (when `how` drops, below) wakes the
                // waiters on ranges mapped over: they fault again, on the
                // new mapping.
            }
            How::Signal => {
                for (base, len) in left {
                    // SAFETY: gives a range of the caller's its write access back.
                    unsafe { libc::mprotect(base as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE) };
                }
                // SeqCst: after every range's mapping or protection was restored.
                PAUSED.store(0, Ordering::SeqCst);
                // SAFETY: a futex wake on a static word; no memory is touched.
                unsafe { libc::syscall(libc::SYS_futex, PAUSED.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
            }
        }
        self.how = How::Signal; // drops (closes) a userfaultfd
                                // SAFETY: the mask saved by `begin`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.mask, core::ptr::null_mut()) };
    }
}

/// Blocks every signal but the faults on the calling thread (blocked, the
/// kernel would make a fault fatal); returns the mask before.
fn block_signals() -> libc::sigset_t {
    // SAFETY: all-zero sigsets are valid; fill, del and sigmask get valid pointers.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        for s in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE] {
            libc::sigdelset(&mut all, s);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    }
}

/// The write-protect ioctl over one range (`mode` 0 lifts it and wakes).
fn uffd_writeprotect(fd: i32, base: usize, len: usize, mode: u64) -> bool {
    let mut wp = UffdioWriteprotect { start: base as u64, len: len as u64, mode };
    // SAFETY: the ioctl reads and writes a struct of its own layout.
    unsafe { libc::ioctl(fd, UFFDIO_WRITEPROTECT, &mut wp) == 0 }
}

/// The `userfaultfd` way of S1: a descriptor with every range registered
/// and write-protected, or None (nothing protected) when the kernel does
/// not allow it.
fn uffd_protect(ranges: &[(usize, usize)]) -> Option<OwnedFd> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: the system call takes flags only; a privileged process may
    // also handle faults from the kernel, which latte's ranges never take.
    let fd = [flags | UFFD_USER_MODE_ONLY, flags].iter().map(|&f| unsafe { libc::syscall(libc::SYS_userfaultfd, f) }).find(|&fd| fd >= 0)?;
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut api = UffdioApi { api: UFFD_API, features: UFFD_FEATURES, ioctls: 0 };
    // SAFETY: the ioctl reads and writes a struct of its own layout.
    if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api) } != 0 || api.features & UFFD_FEATURES != UFFD_FEATURES {
        return None;
    }
    for &(base, len) in ranges {
        let mut reg = UffdioRegister { start: base as u64, len: len as u64, mode: UFFDIO_REGISTER_MODE_WP, ioctls: 0 };
        // SAFETY: as above.
        if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_REGISTER, &mut reg) } != 0 {
            return None; // closing the descriptor lifts what was registered
        }
    }
    for &(base, len) in ranges {
        if !uffd_writeprotect(fd.as_raw_fd(), base, len, UFFDIO_WRITEPROTECT_MODE_WP) {
            for &(b, l) in ranges {
                let _ = uffd_writeprotect(fd.as_raw_fd(), b, l, 0);
            }
            return None;
        }
    }
    Some(fd)
}

/// Whether no thread of the process blocks SIGSEGV now (`SigBlk` of each
/// task in `/proc/self/task`); false when that cannot be read.
fn no_thread_blocks_sigsegv() -> bool {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    let bit = 1u64 << (libc::SIGSEGV - 1);
    tasks.flatten().all(|t| {
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            return true; // the thread exited meanwhile
        };
        status.lines().find_map(|l| l.strip_prefix("SigBlk:")).and_then(|m| u64::from_str_radix(m.trim(), 16).ok()).is_some_and(|m| m & bit == 0)
    })
}

/// The signal way of S1: the handler installed (and in place), the ranges
/// registered, the pause word set, then every range read-only. False
/// (nothing protected) when it cannot be.
fn signal_protect(ranges: &[(usize, usize)]) -> bool {
    // Relaxed: the table is only written by the mover, under the registry
    // lock; the handler's acquire loads pair with the release stores below.
    if TABLE.iter().filter(|r| r.len.load(Ordering::Relaxed) == 0).count() < ranges.len() {
        return false;
    }
    CHAIN.install(on_sigsegv, true);
    if !CHAIN.is_installed(on_sigsegv) {
        return false;
    }
    let mut slots = TABLE.iter().filter(|r| r.len.load(Ordering::Relaxed) == 0);
    for &(base, len) in ranges {
        let Some(r) = slots.next() else { return false };
        r.base.store(base, Ordering::Relaxed);
        // Release: a handler that sees the length sees the base.
        r.len.store(len, Ordering::Release);
    }
    // SeqCst: the word is set before any range is made read-only, so a
    // writer that faults on one sees it set.
    PAUSED.store(1, Ordering::SeqCst);
    for (i, &(base, len)) in ranges.iter().enumerate() {
        // SAFETY: changes the protection of a range of the caller's.
        if unsafe { libc::mprotect(base as *mut libc::c_void, len, libc::PROT_READ) } != 0 {
            for &(b, l) in &ranges[..i] {
                // SAFETY: as above.
                unsafe { libc::mprotect(b as *mut libc::c_void, l, libc::PROT_READ | libc::PROT_WRITE) };
            }
            PAUSED.store(0, Ordering::SeqCst);
            // SAFETY: as in `Pause::drop`.
            unsafe { libc::syscall(libc::SYS_futex, PAUSED.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
            return false;
        }
    }
    true
}

/// In a fork child: forgets the registered ranges (no thread of the child
/// is paused, and its copy of a region may be made read-only for good,
/// where a store must fault as it would without latte).
pub fn forget_in_child() {
    for r in &TABLE {
        // Relaxed: the child has one thread.
        r.len.store(0, Ordering::Relaxed);
    }
}

/// Whether `addr` lies in a registered range.
fn registered(addr: usize) -> bool {
    TABLE.iter().any(|r| {
        // Acquire: pairs with the release store of the length in `signal_protect`.
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
