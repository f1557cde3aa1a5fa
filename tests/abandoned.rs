//! L0 of the liveness protocol: a producer about to make its object removes
//! the temporary objects (`/.latte-new-*`) that producers killed before
//! publishing left behind: unlocked and last modified over a minute ago.
//! An object whose lock is held, a young one (a maker between `shm_open`
//! and its lock) and any other name stay.

mod common;
use common::*;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Makes `/dev/shm/<file>` (one page), last modified `age_s` seconds ago.
fn make(file: &str, age_s: i64) -> OwnedFd {
    let path = CString::new(format!("/dev/shm/{file}")).unwrap();
    // SAFETY: a valid path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_CREAT | libc::O_RDWR | libc::O_CLOEXEC, 0o600) };
    assert!(fd >= 0, "{file}: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a valid descriptor.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) }, 0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let t = libc::timespec { tv_sec: now - age_s, tv_nsec: 0 };
    // SAFETY: a valid descriptor and two timespecs.
    assert_eq!(unsafe { libc::futimens(fd.as_raw_fd(), [t, t].as_ptr()) }, 0);
    fd
}

/// Removes its files from /dev/shm when dropped, whatever the test found.
struct Cleanup(Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(format!("/dev/shm/{f}"));
        }
    }
}

fn exists(file: &str) -> bool {
    std::path::Path::new(&format!("/dev/shm/{file}")).exists()
}

#[test]
fn a_new_region_removes_the_temporary_objects_of_dead_producers_only() {
    let pid = std::process::id();
    let old = format!(".latte-new-{pid}-abandoned");
    let young = format!(".latte-new-{pid}-young");
    let held = format!(".latte-new-{pid}-held");
    let other = format!("latte-abandoned-other-{pid}");
    let name = format!("latte-abandoned-{pid}");
    let _cleanup = Cleanup(vec![old.clone(), young.clone(), held.clone(), other.clone(), name.clone()]);
    drop(make(&old, 120));
    drop(make(&young, 5));
    drop(make(&other, 120));
    let lock = make(&held, 120);
    // The lock a live maker holds (liveness L1), on another open file
    // description than the one L0 opens.
    latte::internals::liveness::hold(std::os::fd::AsFd::as_fd(&lock)).unwrap();
    in_child(|| {
        let n = CString::new(format!("/{name}")).unwrap();
        let rc = latte::internals::ffi::latte_init_shared_region(n.as_ptr());
        eprintln!("init: {rc}; abandoned {} young {} held {} other {}", exists(&old), exists(&young), exists(&held), exists(&other));
        rc == 0 && !exists(&old) && exists(&young) && exists(&held) && exists(&other)
    });
}
