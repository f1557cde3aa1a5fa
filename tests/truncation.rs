//! A shared object that shrinks under its mappings (someone else truncates
//! it) costs the pages, never the process: the producer keeps recording and
//! counts the lost pages, a reader gets LATTE_ERR_TRUNCATED.

mod common;
use common::*;
use latte::error::LATTE_ERR_TRUNCATED;
use latte::layout::*;
use latte::reader::{latte_cursor, Mapping};
use std::ffi::CString;

/// The two tests one at a time: one of them forks, which must not happen
/// while the other is inside latte (a child inherits no other thread).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn truncate(name: &str, len: i64) {
    let c = CString::new(name).unwrap();
    // SAFETY: a valid C string; the descriptor is closed below.
    let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDWR, 0) };
    assert!(fd >= 0);
    // SAFETY: fd is open for writing.
    assert_eq!(unsafe { libc::ftruncate(fd, len) }, 0);
    // SAFETY: ours.
    unsafe { libc::close(fd) };
}

#[test]
fn the_producer_survives_and_a_reader_gets_an_error() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("/latte-test-trunc-{}", std::process::id());
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 4, samples_per_slot: 1024, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
    for _ in 0..2000 {
        span(c"trunc", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    // A reader maps the object while it is whole.
    let m = Mapping::open_shm(name.as_bytes()).unwrap();
    let slot = (0..m.view().slot_capacity() as u32).find(|&i| m.view().slot_info(i).map(|s| s.state != 0).unwrap_or(false)).unwrap();
    let mut cur = latte_cursor::default();
    let mut out = Vec::new();
    assert!(m.view().read_slot(slot, &mut cur, &mut out, latte::ReadMode::Live).unwrap().read > 0);
    let before = counters().mapping_faults;

    // Someone shrinks it to its first page: the rings are gone.
    truncate(&name, 4096);
    for _ in 0..2000 {
        span(c"trunc", LATTE_MODE_FAST, LATTE_MODE_MID);
    }
    let after = counters().mapping_faults;
    assert!(after > before, "the producer's lost pages are counted");
    let mut cur = latte_cursor::default();
    assert_eq!(m.view().read_slot(slot, &mut cur, &mut out, latte::ReadMode::Live).unwrap_err().code(), LATTE_ERR_TRUNCATED);

    // Down to nothing: the header page too.
    truncate(&name, 0);
    span(c"trunc", LATTE_MODE_FAST, LATTE_MODE_FAST);
    let mut cur = latte_cursor::default();
    assert!(m.view().read_slot(slot, &mut cur, &mut out, latte::ReadMode::Live).is_err());
    assert!(Mapping::open_shm(name.as_bytes()).is_err());
    drop(m);
    let _ = latte::internals::ffi::latte_region_unlink(CString::new(name).unwrap().as_ptr());
}

/// A SIGBUS that is not latte's still does what it did before: here, the
/// default action kills a child process.
#[test]
fn other_sigbus_keeps_its_default() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // latte's handler is installed here, before the fork (the child only
    // makes system calls).
    latte::internals::fault::install();
    let name = format!("/latte-test-trunc-other-{}", std::process::id());
    let c = CString::new(name.clone()).unwrap();
    // SAFETY: the child maps a one-page object of its own, shrinks it and
    // touches the page (SIGBUS, not registered with latte), then _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: plain system calls on our own object and mapping.
        unsafe {
            let fd = libc::shm_open(c.as_ptr(), libc::O_RDWR | libc::O_CREAT, 0o600);
            libc::ftruncate(fd, 4096);
            let p = libc::mmap(core::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_SHARED, fd, 0) as *const u8;
            libc::ftruncate(fd, 0);
            libc::shm_unlink(c.as_ptr());
            let v = core::ptr::read_volatile(p);
            libc::_exit(v as i32 + 10);
        }
    }
    let mut status = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS, "status {status}");
}
