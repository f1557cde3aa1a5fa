//! What the `latte` command's integration tests share: running the command
//! with a time limit, and a scenario run in a private mount namespace with
//! a tmpfs of its own on /dev/shm (never the machine's).

// Each test binary uses a part of it.
#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const LATTE: &str = env!("CARGO_BIN_EXE_latte");

/// What a run of `latte` gave.
pub struct Run {
    /// The exit code, or minus the signal that ended it.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub secs: f64,
}

/// Runs `latte args` in `dir` (None: this process's folder), killed after
/// 10 s.
pub fn latte_in(dir: Option<&std::path::Path>, args: &[&str]) -> Run {
    let t0 = Instant::now();
    let mut cmd = Command::new(LATTE);
    cmd.args(args).env("NO_COLOR", "1").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn().unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    let code = out.status.code().unwrap_or_else(|| -out.status.signal().unwrap_or(0));
    Run {
        code,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        secs: t0.elapsed().as_secs_f64(),
    }
}

/// Runs `latte args` in this process's folder, killed after 10 s.
pub fn latte(args: &[&str]) -> Run {
    latte_in(None, args)
}

/// Runs `scenario` in a child process inside a mount namespace of its own
/// with a 64 MiB tmpfs on /dev/shm, and asserts that it passed. Needs root.
pub fn in_private_shm(scenario: fn()) {
    // SAFETY: no memory effects.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root: it mounts a tmpfs of its own on /dev/shm in a private mount namespace");
    // SAFETY: fork: the child is single-threaded, so it may enter a mount
    // namespace of its own; it runs the scenario there and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: plain system calls in the child.
        let code = unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(core::ptr::null(), c"/".as_ptr(), core::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, core::ptr::null()) != 0
                || libc::mount(c"tmpfs".as_ptr(), c"/dev/shm".as_ptr(), c"tmpfs".as_ptr(), 0, c"size=64m".as_ptr() as *const libc::c_void) != 0
            {
                10
            } else {
                std::panic::catch_unwind(scenario).map(|_| 0).unwrap_or(1)
            }
        };
        // SAFETY: leave the child.
        unsafe { libc::_exit(code) };
    }
    let mut st = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st), "killed by signal {}", libc::WTERMSIG(st));
    assert_ne!(libc::WEXITSTATUS(st), 10, "could not make a private /dev/shm");
    assert_eq!(libc::WEXITSTATUS(st), 0, "see FAILED lines above");
}

/// Collects the failed checks of a scenario, to report them all at once.
#[derive(Default)]
pub struct Checks(Vec<String>);

impl Checks {
    pub fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.0.push(what.into());
        }
    }

    /// Prints every failed check and fails when there is one.
    pub fn finish(self, what: &str) {
        for f in &self.0 {
            eprintln!("FAILED: {f}");
        }
        assert!(self.0.is_empty(), "{} {what} failed", self.0.len());
    }
}
