//! What a flush refuses to write to, and what it owns while it writes: an
//! `O_APPEND` descriptor (pwrite there appends, so the image would not be
//! one) and anything that is not a regular file (a pipe nobody reads would
//! keep a flush pending for ever, and a closed one would raise SIGPIPE) are
//! refused up front; the flush writes through its own duplicate of the
//! descriptor, so closing the caller's while it runs redirects nothing; an
//! asynchronous flush can be cancelled.

mod common;
use common::*;
use latte::internals::ffi::*;
use latte::layout::*;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The async flush state is process-wide: the tests take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("latte-flush-targets-{}-{name}", std::process::id()))
}

fn record() {
    let id = CString::new("targets.a").unwrap();
    for _ in 0..2000 {
        span(&id, LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both are fresh descriptors we own.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Each refused target, through the given flush call.
fn refuses(flush: fn(i32, latte_unit) -> i32) {
    record();
    let path = temp("append");
    let f = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
    assert_eq!(flush(f.as_raw_fd(), LATTE_UNIT_CYCLE), -libc::EINVAL, "O_APPEND");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "nothing written through O_APPEND");
    std::fs::remove_file(&path).unwrap();
    // A pipe whose reader is gone: refused, and no SIGPIPE kills us.
    let (r, w) = pipe();
    drop(r);
    assert_eq!(flush(w.as_raw_fd(), LATTE_UNIT_CYCLE), -libc::ESPIPE, "pipe");
    // A pipe nobody reads: refused rather than pending for ever.
    let (_r, w) = pipe();
    assert_eq!(flush(w.as_raw_fd(), LATTE_UNIT_CYCLE), -libc::ESPIPE, "unread pipe");
    // A character device.
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
    assert_eq!(flush(null.as_raw_fd(), LATTE_UNIT_CYCLE), -libc::EINVAL, "/dev/null");
    // A display unit no reader knows, into a good file: refused, nothing written.
    let path = temp("unit");
    let f = std::fs::File::create(&path).unwrap();
    assert_eq!(flush(f.as_raw_fd(), 77), -libc::EINVAL, "unit 77");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "nothing written for a bad unit");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn sync_flush_refuses_append_and_non_regular_targets() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    refuses(|fd, unit| latte_flush_sync(fd, unit).min(0));
}

#[cfg(feature = "uring")]
fn wait() -> i32 {
    let t0 = std::time::Instant::now();
    loop {
        let r = latte_poll_flush();
        if r != latte::layout::LATTE_FLUSH_PENDING {
            return r;
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(30), "flush never finished");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[cfg(feature = "uring")]
#[test]
fn async_flush_refuses_append_and_non_regular_targets() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    refuses(|fd, unit| latte_flush_async(fd, unit));
    assert_eq!(latte_poll_flush(), latte::layout::LATTE_FLUSH_IDLE, "nothing left pending");
}

#[cfg(feature = "uring")]
#[test]
fn async_flush_writes_through_its_own_descriptor() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    record();
    let (a, b) = (temp("own-a"), temp("own-b"));
    let fa = std::fs::File::create(&a).unwrap();
    let num = fa.as_raw_fd();
    assert_eq!(latte_flush_async(num, LATTE_UNIT_CYCLE), 0);
    drop(fa);
    // The next open gets the number the flush was given.
    let fb = std::fs::File::create(&b).unwrap();
    assert_eq!(fb.as_raw_fd(), num);
    std::fs::write(&b, b"not an image").unwrap();
    assert_eq!(wait(), latte::layout::LATTE_FLUSH_IDLE);
    assert_eq!(std::fs::read(&b).unwrap(), b"not an image", "the flush wrote into another file");
    let m = latte::reader::Mapping::open_file(&a).unwrap();
    assert!(m.view().flags() & LATTE_REGION_FLUSHED != 0);
    drop(fb);
    std::fs::remove_file(&a).unwrap();
    std::fs::remove_file(&b).unwrap();
}

#[cfg(feature = "uring")]
#[test]
fn async_flush_can_be_cancelled() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    record();
    let path = temp("cancel");
    let f = std::fs::File::create(&path).unwrap();
    assert_eq!(latte_flush_cancel(), 0, "nothing to cancel");
    assert_eq!(latte_flush_async(f.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    assert_eq!(latte_flush_cancel(), 1, "a pending flush was cancelled");
    assert_eq!(latte_poll_flush(), -libc::ECANCELED);
    // The cut image never passes for a complete one.
    assert!(latte::reader::Mapping::open_file(&path).is_err());
    // A new flush starts once the cancelled one's writes have completed
    // (-EBUSY until then: they must not land in the new image), and completes.
    start_flush_after_cancel(f.as_raw_fd());
    assert_eq!(wait(), latte::layout::LATTE_FLUSH_IDLE);
    assert!(latte::reader::Mapping::open_file(&path).is_ok());
    std::fs::remove_file(&path).unwrap();
}
