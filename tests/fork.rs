//! After fork the child records into its own copy: the parent's rings never
//! see the child's samples.

mod common;
use common::*;
use latte::layout::*;

#[test]
fn fork_child_writes_its_own_copy() {
    for _ in 0..10 {
        span(c"forky", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    // A second thread exists at fork time: the child retires it.
    let h = std::thread::spawn(|| span(c"forky-other", LATTE_MODE_FAST, LATTE_MODE_FAST));
    h.join().unwrap();
    // SAFETY: the child only records, reads and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        for _ in 0..5 {
            span(c"forky", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        let ok = snapshot(c"forky").len() == 15;
        // SAFETY: ends the child without running the test harness's exit path.
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
    assert_eq!(snapshot(c"forky").len(), 10);
}
