//! Changes in /dev/shm as they happen (inotify): `latte serve` looks at the
//! names again as soon as one is created, renamed into place or removed,
//! not only at its periodic rescan, so that a service that restarts
//! faster than the rescan has each of its objects opened (and read one
//! last time when replaced).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// An inotify watch on /dev/shm (closed on drop).
pub struct ShmWatch {
    fd: OwnedFd,
}

impl ShmWatch {
    /// None when inotify is not available (the periodic rescan remains).
    pub fn new() -> Option<ShmWatch> {
        // SAFETY: no pointers; returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mask = libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_DELETE | libc::IN_MOVED_FROM;
        // SAFETY: a valid descriptor and a NUL-terminated path.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c"/dev/shm".as_ptr(), mask) } < 0 {
            return None;
        }
        Some(ShmWatch { fd })
    }

    /// Waits up to `timeout` for a change; true when there was one (the
    /// events are read and dropped: the caller looks at the names again).
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // To the nanosecond: the reading thread waits a fraction of a
        // millisecond between looks at a busy ring.
        let t = libc::timespec { tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        if unsafe { libc::ppoll(&mut p, 1, &t, std::ptr::null()) } <= 0 {
            return false;
        }
        let mut buf = [0u8; 4096];
        let mut any = false;
        loop {
            // SAFETY: reads into a local buffer of its length.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if n <= 0 {
                return any;
            }
            any = true;
        }
    }
}
