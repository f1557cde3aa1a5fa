//! Pausing the writers of memory that is being moved: while a private
//! region becomes a shared one where it stands (`region::share`), a thread
//! that stores into it (a Stop, a pulse, a counter) waits in the kernel
//! until the move is over, whatever its signal mask, then its store runs on
//! the memory now mapped there. Nothing is lost and no pointer changes.
//!
//! The pause is `userfaultfd` write-protection (Linux 6.4 and later, with
//! `UFFD_USER_MODE_ONLY` for an unprivileged process). Where the kernel
//! refuses it (an older kernel, a seccomp profile that forbids the call, as
//! container runtimes' default profiles do for unprivileged containers),
//! there is no pause, and the move is refused (`EBUSY`): the other way to
//! stop writers, read-only memory and a SIGSEGV handler, would kill a
//! thread that blocks SIGSEGV, which latte cannot rule out.
//!
//! The protocol (`region::share` cites its steps):
//! - S1 `Pause::begin`: the mover blocks every signal but the faults on its
//!   own thread (no handler of the program's on it writes to what it
//!   moves), then registers and write-protects every range.
//! - S2 A store into a protected range waits in the kernel.
//! - S3 `Pause` dropped: every range the mover did not map over
//!   (`replaced`) has its protection lifted; the waiters on every range are
//!   woken (those on ranges mapped over fault again, on the new mapping);
//!   the descriptor is closed; the mover's signal mask is restored.
//!
//! Between S1 and S3 the mover makes no allocation: a writer paused while
//! it held the allocator's lock would otherwise stop it for good.

use crate::error::Error;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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
/// `_IOR(0xAA, 0x02, struct uffdio_range)`: wakes the waiters on a range,
/// registered or not.
const UFFDIO_WAKE: libc::c_ulong = 0x8010_aa02;

/// `struct uffdio_range`.
#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}

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

/// Writers of the ranges wait until this is dropped (S3).
pub struct Pause {
    /// The `userfaultfd` the ranges are registered with.
    fd: OwnedFd,
    ranges: Vec<(usize, usize)>,
    /// Ranges the mover mapped over (their protection went with their old
    /// mapping).
    replaced: Vec<bool>,
    /// The mover's signal mask before S1.
    mask: libc::sigset_t,
}

impl Pause {
    /// S1 over `ranges` (base, length; page-aligned). `EBUSY` when the
    /// kernel refuses the write-protection (nothing changed then).
    pub fn begin(ranges: Vec<(usize, usize)>) -> Result<Pause, Error> {
        let replaced = vec![false; ranges.len()];
        let mask = block_signals();
        match uffd_protect(&ranges) {
            Some(fd) => Ok(Pause { fd, ranges, replaced, mask }),
            None => {
                // SAFETY: the mask saved above.
                unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &mask, core::ptr::null_mut()) };
                Err(Error::BUSY)
            }
        }
    }

    /// Notes that range `i` was mapped over (M4): it is left as it is at S3.
    pub fn replaced(&mut self, i: usize) {
        self.replaced[i] = true;
    }
}

impl Drop for Pause {
    /// S3 (the descriptor closes as the value goes, after this).
    fn drop(&mut self) {
        for ((base, len), _) in self.ranges.iter().zip(&self.replaced).filter(|(_, &r)| !r) {
            // Lifting the protection wakes the range's waiters.
            let _ = uffd_writeprotect(self.fd.as_raw_fd(), *base, *len, 0);
        }
        for &(base, len) in &self.ranges {
            // Every range's waiters, those on ranges mapped over too: closing
            // the descriptor wakes them only when no other process holds it
            // (a child forked without the fork handlers would).
            let mut r = UffdioRange { start: base as u64, len: len as u64 };
            // SAFETY: the ioctl reads a struct of its own layout.
            unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_WAKE, &mut r) };
        }
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

/// A `userfaultfd` with write-protection, also of pages never written;
/// None when the kernel refuses it.
fn uffd_open() -> Option<OwnedFd> {
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
    Some(fd)
}

/// Whether this process can pause writers (the kernel grants the
/// `userfaultfd` S1 needs): asked before work that is only worth doing
/// if it can.
pub fn available() -> bool {
    uffd_open().is_some()
}

/// The `userfaultfd` way of S1: a descriptor with every range registered
/// and write-protected, or None (nothing protected) when the kernel does
/// not allow it.
fn uffd_protect(ranges: &[(usize, usize)]) -> Option<OwnedFd> {
    let fd = uffd_open()?;
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
