//! A fork child of a process with a shared region sees the samples as they
//! were at the fork: what the parent records afterwards (more samples of an
//! ID, a new ID) never shows in the child.

mod common;
use common::*;
use latte::layout::*;

#[test]
fn fork_child_sees_the_region_as_it_was_at_the_fork() {
    let name = format!("/latte-test-forksnap-{}", std::process::id());
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 8, samples_per_slot: 4096, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
    for _ in 0..1000 {
        span(c"snap.a", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    let (mut to_child, mut to_parent) = ([0i32; 2], [0i32; 2]);
    // SAFETY: two pipes for the handshake.
    unsafe {
        assert_eq!(libc::pipe(to_child.as_mut_ptr()), 0);
        assert_eq!(libc::pipe(to_parent.as_mut_ptr()), 0);
    }
    // SAFETY: the child records, reads and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut b = [0u8; 1];
        // SAFETY: our pipe ends; wait until the parent recorded more.
        unsafe {
            libc::write(to_parent[1], b.as_ptr() as *const libc::c_void, 1);
            libc::read(to_child[0], b.as_mut_ptr() as *mut libc::c_void, 1);
        }
        let a = snapshot(c"snap.a").len();
        let new_id = snapshot(c"snap.after").len();
        // The child's own recording goes into its copy.
        span(c"snap.a", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let mine = snapshot(c"snap.a").len();
        let code = if a == 1000 && new_id == 0 && mine == 1001 {
            0
        } else {
            eprintln!("child sees snap.a {a}, snap.after {new_id}, then {mine}");
            3
        };
        // SAFETY: leave the child.
        unsafe { libc::_exit(code) };
    }
    let mut b = [0u8; 1];
    // SAFETY: our pipe ends.
    unsafe { libc::read(to_parent[0], b.as_mut_ptr() as *mut libc::c_void, 1) };
    for _ in 0..2000 {
        span(c"snap.a", LATTE_MODE_FAST, LATTE_MODE_FAST);
        span(c"snap.after", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    // SAFETY: our pipe end.
    unsafe { libc::write(to_child[1], b.as_ptr() as *const libc::c_void, 1) };
    let mut st = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    let _ = latte::internals::ffi::latte_region_unlink(std::ffi::CString::new(name).unwrap().as_ptr());
    assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "child status {st}");
    assert_eq!(snapshot(c"snap.a").len(), 3000, "the child's span never reached the parent");
}
