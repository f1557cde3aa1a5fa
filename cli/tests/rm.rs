//! `latte rm` and the file rule of every command, in a private /dev/shm:
//! a live producer's region refused (and removed with --force), a dead
//! one removed, objects that are not latte regions never removed, `--dead`
//! over a mix, `--older-than`, `-n`; a target of the form of a region name
//! read as the file when no such region exists, and the region when both
//! exist, with a line that says how to name the file.

use latte::layout::*;
use std::ffi::CStr;
use std::os::fd::AsRawFd;
use std::path::Path;

mod common;
use common::{in_private_shm, latte, latte_in, Checks};

/// A region of 4 rings under `name`, 100 spans of `id` recorded into it.
fn record_into(name: &str, id: &CStr) {
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 4, samples_per_slot: 256, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(name.as_bytes(), &cfg).expect("install the region");
    for _ in 0..100 {
        latte::internals::ffi::latte_start(id.as_ptr(), LATTE_MODE_FAST);
        latte::internals::ffi::latte_stop(core::ptr::null(), LATTE_MODE_FAST);
    }
}

/// Runs `body` in a child process and waits for it; panics unless it exited 0.
fn in_child(body: impl FnOnce()) -> i32 {
    // SAFETY: fork from the scenario's single-threaded process; the child
    // runs `body` and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).is_ok();
        // SAFETY: leave the child.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut st = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "child failed");
    pid
}

/// A region whose producer recorded and exited.
fn dead_region(name: &str) {
    in_child(|| record_into(name, c"rm.dead"));
}

/// A producer that made `name`, recorded, and lives until dropped.
struct Live {
    pid: i32,
    /// Closing it lets the producer exit.
    hold: std::io::PipeWriter,
}

impl Live {
    fn start(name: &str) -> Live {
        let (mut ready_r, ready_w) = std::io::pipe().unwrap();
        let (hold_r, hold_w) = std::io::pipe().unwrap();
        // SAFETY: fork from the scenario's single-threaded process; the
        // child records, says so, waits for its pipe to close and _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            drop(hold_w);
            drop(ready_r);
            record_into(name, c"rm.live");
            use std::io::{Read, Write};
            let _ = (&ready_w).write_all(b"r");
            drop(ready_w);
            let mut b = [0u8; 1];
            let _ = (&hold_r).read(&mut b);
            // SAFETY: leave the child.
            unsafe { libc::_exit(0) };
        }
        drop(ready_w);
        drop(hold_r);
        use std::io::Read;
        let mut b = [0u8; 1];
        assert_eq!(ready_r.read(&mut b).unwrap(), 1, "the live producer did not start");
        Live { pid, hold: hold_w }
    }

    /// Lets the producer exit and waits for it: whether it exited 0.
    fn stop(self) -> bool {
        drop(self.hold);
        let mut st = 0;
        // SAFETY: our child.
        unsafe { libc::waitpid(self.pid, &mut st, 0) == self.pid && libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 }
    }
}

fn exists(name: &str) -> bool {
    Path::new(&format!("/dev/shm{name}")).symlink_metadata().is_ok()
}

fn by_name(c: &mut Checks) {
    dead_region("/dead1");
    let r = latte(&["rm", "-n", "dead1"]);
    c.check(
        r.code == 0 && r.stdout.contains("would remove /dead1 (producer pid") && exists("/dead1"),
        format!("rm -n dead: {} {} {}", r.code, r.stdout, r.stderr),
    );
    let r = latte(&["rm", "dead1"]);
    c.check(
        r.code == 0 && r.stdout.contains("removed /dead1 (producer pid") && r.stdout.contains("has exited") && !exists("/dead1"),
        format!("rm dead: {} {} {}", r.code, r.stdout, r.stderr),
    );

    let live = Live::start("/live1");
    let r = latte(&["rm", "/live1"]);
    c.check(
        r.code == 7 && r.stderr.contains("is alive: not removed") && r.stderr.contains(&format!("pid {}", live.pid)) && exists("/live1"),
        format!("rm live: {} {}", r.code, r.stderr),
    );
    let r = latte(&["rm", "--force", "-n", "/live1"]);
    c.check(
        r.code == 0 && r.stdout.contains("would remove /live1") && r.stdout.contains("is alive") && exists("/live1"),
        format!("rm --force -n live: {} {} {}", r.code, r.stdout, r.stderr),
    );
    let r = latte(&["rm", "--force", "/live1"]);
    c.check(r.code == 0 && r.stdout.contains("removed /live1") && !exists("/live1"), format!("rm --force live: {} {} {}", r.code, r.stdout, r.stderr));
    c.check(live.stop(), "the producer whose region was removed under it did not exit 0");

    // Objects that are not latte regions: never removed.
    std::fs::write("/dev/shm/foreign", b"not a latte region, whatever its name").unwrap();
    let r = latte(&["rm", "foreign"]);
    c.check(r.code == 4 && r.stderr.contains("not a latte region") && exists("/foreign"), format!("rm foreign: {} {}", r.code, r.stderr));
    let r = latte(&["rm", "--force", "foreign"]);
    c.check(r.code == 4 && exists("/foreign"), format!("rm --force foreign: {} {}", r.code, r.stderr));
    dead_region("/pointed");
    std::os::unix::fs::symlink("/dev/shm/pointed", "/dev/shm/link").unwrap();
    let r = latte(&["rm", "link"]);
    c.check(r.code == 4 && exists("/link") && exists("/pointed"), format!("rm of a symbolic link: {} {}", r.code, r.stderr));
    std::fs::remove_file("/dev/shm/link").unwrap();
    std::fs::create_dir("/dev/shm/dir").unwrap();
    let r = latte(&["rm", "dir"]);
    c.check(r.code == 4 && exists("/dir"), format!("rm of a directory: {} {}", r.code, r.stderr));
    std::fs::remove_dir("/dev/shm/dir").unwrap();

    let r = latte(&["rm", "nothing-here"]);
    c.check(r.code == 3 && r.stderr.contains("no such region"), format!("rm missing: {} {}", r.code, r.stderr));
    let r = latte(&["rm", "./pointed"]);
    c.check(r.code == 2 && r.stderr.contains("not files") && exists("/pointed"), format!("rm of a path: {} {}", r.code, r.stderr));
    // Several names: each is done, the exit code is the first failure's.
    let r = latte(&["rm", "foreign", "pointed"]);
    c.check(r.code == 4 && !exists("/pointed") && exists("/foreign"), format!("rm of two: {} {} {}", r.code, r.stdout, r.stderr));

    // Another user's region: refused for permission, kept.
    dead_region("/roots");
    let nobody =
        std::process::Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", common::LATTE, "rm", "roots"]).output().unwrap();
    let err = String::from_utf8_lossy(&nobody.stderr);
    c.check(
        nobody.status.code() == Some(5) && err.contains("permission denied") && exists("/roots"),
        format!("rm as another user: {:?} {err}", nobody.status.code()),
    );
    std::fs::remove_file("/dev/shm/roots").unwrap();
    std::fs::remove_file("/dev/shm/foreign").unwrap();
}

fn dead_over_a_mix(c: &mut Checks) {
    dead_region("/d2");
    dead_region("/d3");
    let live = Live::start("/l2");
    std::fs::write("/dev/shm/junk", vec![0u8; 4096]).unwrap();
    let r = latte(&["rm", "--dead", "-n"]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    c.check(
        r.code == 0 && lines.len() == 2 && lines[0].starts_with("would remove /d2") && lines[1].starts_with("would remove /d3"),
        format!("rm --dead -n: {} {:?} {}", r.code, lines, r.stderr),
    );
    c.check(exists("/d2") && exists("/d3") && exists("/l2") && exists("/junk"), "rm --dead -n removed something");
    let r = latte(&["rm", "--dead", "--older-than", "1h"]);
    c.check(
        r.code == 0 && r.stdout.is_empty() && r.stderr.contains("no dead region made over") && exists("/d2"),
        format!("--older-than 1h: {} {} {}", r.code, r.stdout, r.stderr),
    );
    let r = latte(&["rm", "--dead", "--older-than", "0s"]);
    c.check(r.code == 0 && r.stdout.lines().count() == 2 && !exists("/d2") && !exists("/d3"), format!("rm --dead: {} {} {}", r.code, r.stdout, r.stderr));
    c.check(exists("/l2") && exists("/junk"), "rm --dead removed a live region or a foreign object");
    let r = latte(&["rm", "--dead"]);
    c.check(
        r.code == 0 && r.stdout.is_empty() && r.stderr.contains("no dead region"),
        format!("rm --dead, nothing dead: {} {} {}", r.code, r.stdout, r.stderr),
    );
    // Once its producer exits, it is dead.
    c.check(live.stop(), "the live producer did not exit 0");
    let r = latte(&["rm", "--dead"]);
    c.check(
        r.code == 0 && r.stdout.starts_with("removed /l2") && !exists("/l2") && exists("/junk"),
        format!("rm --dead after exit: {} {} {}", r.code, r.stdout, r.stderr),
    );
    let r = latte(&["rm", "--dead", "names"]);
    c.check(r.code == 2, format!("--dead with names is a usage error: {}", r.code));
    std::fs::remove_file("/dev/shm/junk").unwrap();
}

/// A flushed image of 100 spans of `id`, written by a producer that ran
/// in a private region, at `path`.
fn flushed_image(path: &Path, id: &'static CStr) {
    let path = path.to_path_buf();
    in_child(move || {
        for _ in 0..100 {
            latte::internals::ffi::latte_start(id.as_ptr(), LATTE_MODE_FAST);
            latte::internals::ffi::latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        }
        let f = std::fs::File::create(&path).unwrap();
        assert_eq!(latte::internals::ffi::latte_flush_sync(f.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    });
}

fn file_targets(c: &mut Checks) {
    let dir = std::env::temp_dir().join(format!("latte-rm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    flushed_image(&dir.join("before.rec"), c"from.the.file");
    // No region of that name: the file, in every command that reads one.
    for args in [&["stats", "before.rec", "--json"][..], &["trace", "before.rec", "-o", "-"]] {
        let r = latte_in(Some(&dir), args);
        c.check(
            r.code == 0 && r.stdout.contains("from.the.file") && r.stderr.is_empty(),
            format!("latte {args:?} of a file named like a region: {} {}", r.code, r.stderr),
        );
    }
    // watch shows what is recorded from now on: of an image, nothing, and
    // that every sample is read.
    let r = latte_in(Some(&dir), &["watch", "before.rec", "--plain", "--count", "1"]);
    c.check(
        r.code == 0 && r.stdout.contains("state=idle") && r.stderr.contains("every sample is read"),
        format!("watch of a file named like a region: {} {}", r.code, r.stderr),
    );
    let r = latte_in(Some(&dir), &["diff", "before.rec", "before.rec"]);
    c.check(r.code == 0 && r.stdout.contains("from.the.file"), format!("diff of files named like regions: {} {}", r.code, r.stderr));
    // Both exist: the region, and a line on how to name the file.
    in_child(|| record_into("/before.rec", c"from.the.region"));
    let r = latte_in(Some(&dir), &["stats", "before.rec", "--json"]);
    c.check(
        r.code == 0 && r.stdout.contains("from.the.region") && r.stderr.contains("write ./before.rec for the file"),
        format!("both a region and a file: {} {} {}", r.code, r.stdout, r.stderr),
    );
    let r = latte_in(Some(&dir), &["stats", "./before.rec", "--json"]);
    c.check(r.code == 0 && r.stdout.contains("from.the.file") && r.stderr.is_empty(), format!("./ names the file: {} {}", r.code, r.stderr));
    // latte rm never removes the file.
    let r = latte_in(Some(&dir), &["rm", "before.rec"]);
    c.check(r.code == 0 && !exists("/before.rec") && dir.join("before.rec").exists(), format!("rm with a file of that name: {} {}", r.code, r.stderr));
    let r = latte_in(Some(&dir), &["rm", "before.rec"]);
    c.check(r.code == 3 && r.stderr.contains("is a file") && dir.join("before.rec").exists(), format!("rm of a file's name: {} {}", r.code, r.stderr));
    // A directory named like a region is not read as a file.
    std::fs::create_dir(dir.join("adir")).unwrap();
    let r = latte_in(Some(&dir), &["stats", "adir"]);
    c.check(r.code == 4 && r.stderr.contains("is a directory"), format!("a directory named like a region: {} {}", r.code, r.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn scenario() {
    let mut c = Checks::default();
    by_name(&mut c);
    dead_over_a_mix(&mut c);
    file_targets(&mut c);
    c.finish("latte rm cases");
}

#[test]
fn rm_and_file_targets_in_a_private_dev_shm() {
    in_private_shm(scenario);
}
