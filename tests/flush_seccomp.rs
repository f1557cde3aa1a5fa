//! io_uring refused at run time (here by a seccomp filter, as a container
//! runtime would): latte_flush_async returns the error, nothing crashes.
#![cfg(feature = "uring")]

#[test]
fn io_uring_refused_gives_an_error() {
    // SAFETY: the child only installs a filter, calls latte and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // BPF: if nr == io_uring_setup return ERRNO(EPERM) else ALLOW.
        let filter = [
            libc::sock_filter { code: 0x20, jt: 0, jf: 0, k: 0 },                                // ld [nr]
            libc::sock_filter { code: 0x15, jt: 0, jf: 1, k: libc::SYS_io_uring_setup as u32 },  // jeq
            libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0x0005_0000 | libc::EPERM as u32 }, // ret ERRNO
            libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0x7fff_0000 },                      // ret ALLOW
        ];
        let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
        // SAFETY: standard seccomp installation on this (child) process.
        let ok = unsafe {
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && libc::prctl(libc::PR_SET_SECCOMP, 2, &prog as *const _ as libc::c_ulong, 0, 0) == 0
        };
        let file = std::ffi::CString::new(format!("/tmp/latte-seccomp-{}", std::process::id())).unwrap();
        // SAFETY: a valid path.
        let fd = unsafe { libc::open(file.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, 0o600) };
        let rc = latte::internals::ffi::latte_flush_async(fd, latte::layout::LATTE_UNIT_CYCLE);
        // SAFETY: cleanup in the child.
        unsafe { libc::unlink(file.as_ptr()) };
        // SAFETY: leave the child without running the harness.
        unsafe { libc::_exit(if ok && rc == -libc::EPERM { 0 } else { 10 }) };
    }
    let mut status = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
}
