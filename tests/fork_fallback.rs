//! A fork child of a process with a shared region whose private copy
//! cannot be made still never writes into the parent's rings: it gets a
//! private copy-on-write remap of the object at the same address, keeps
//! recording, and sees the parent's samples.

mod common;
use common::*;
use latte::layout::*;

#[test]
fn fork_child_without_a_copy_gets_a_private_remap() {
    let name = format!("/latte-test-forkfb-{}", std::process::id());
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 8, samples_per_slot: 1024, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
    for _ in 0..10 {
        span(c"fb", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    latte::internals::region::FAIL_FORK_COPY.store(true, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: the child only records, reads and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        for _ in 0..5 {
            span(c"fb", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        let ok = snapshot(c"fb").len() == 15;
        // SAFETY: ends the child without running the test harness's exit path.
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    let _ = latte::internals::ffi::latte_region_unlink(std::ffi::CString::new(name).unwrap().as_ptr());
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
    assert_eq!(snapshot(c"fb").len(), 10, "the parent's ring never saw the child's spans");
}
