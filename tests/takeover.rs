//! Taking over the name of a region whose producer is gone: of two
//! producers starting together over one stale region, exactly one wins, and
//! the name then refers to the winner's region; a producer in another PID
//! namespace is never judged dead while it runs (liveness is a lock on the
//! object, not a pid).

use latte::internals::region::{LATTE_IF_TAKEN_FAIL, LATTE_IF_TAKEN_REPLACE_STALE};
use latte::reader::Mapping;

/// The tests fork and hand pipes to their children: one at a time, so that
/// no child of one test holds a pipe end of the other's open.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn wait_exit(pid: i32) -> i32 {
    let mut st = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st), "child killed by signal {}", libc::WTERMSIG(st));
    libc::WEXITSTATUS(st)
}

fn cfg(if_taken: u32) -> latte::internals::region::latte_region_config {
    latte::internals::region::latte_region_config { slot_capacity: 8, samples_per_slot: 4096, id_capacity: 0, mode: 0, if_taken, budget_mib: 0 }
}

fn pipe() -> [i32; 2] {
    let mut p = [0; 2];
    // SAFETY: room for two descriptors.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    p
}

/// A producer: waits on `go`, installs the region, reports 0 (installed),
/// 1 (-EEXIST) or 2 (other) on `report`, then waits on `done` before exiting.
fn producer(name: &str, go: [i32; 2], report: [i32; 2], done: [i32; 2]) -> i32 {
    // SAFETY: fork; the child installs, reports and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut b = [0u8; 1];
        // SAFETY: pipe ends of ours; the alarm ends this child should the
        // test fail before releasing it.
        unsafe {
            libc::alarm(20);
            libc::close(go[1]);
            libc::read(go[0], b.as_mut_ptr() as *mut libc::c_void, 1);
        }
        let r = match latte::internals::recorder::install_shared(name.as_bytes(), &cfg(LATTE_IF_TAKEN_REPLACE_STALE)) {
            Ok(()) => 0u8,
            Err(e) if e == latte::Error::Os(libc::EEXIST) => 1,
            Err(_) => 2,
        };
        // SAFETY: pipe ends of ours.
        unsafe {
            libc::write(report[1], [r].as_ptr() as *const libc::c_void, 1);
            libc::close(done[1]);
            libc::read(done[0], b.as_mut_ptr() as *mut libc::c_void, 1);
            libc::_exit(0);
        }
    }
    pid
}

#[test]
fn one_of_two_producers_takes_a_stale_region_over() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for trial in 0..60 {
        let name = format!("/latte-test-takeover-{}-{trial}", std::process::id());
        // A stale region: its producer installed it and exited.
        // SAFETY: fork; the child installs and _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = latte::internals::recorder::install_shared(name.as_bytes(), &cfg(LATTE_IF_TAKEN_REPLACE_STALE)).is_ok();
            // SAFETY: leave the child.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert_eq!(wait_exit(pid), 0);
        let (go, report, done) = (pipe(), pipe(), pipe());
        let a = producer(&name, go, report, done);
        let b = producer(&name, go, report, done);
        // SAFETY: our pipe ends: closing `go` releases both at once.
        unsafe {
            libc::close(go[0]);
            libc::close(go[1]);
        }
        let mut res = [0u8; 2];
        for r in res.iter_mut() {
            // SAFETY: our pipe end.
            assert_eq!(unsafe { libc::read(report[0], r as *mut u8 as *mut libc::c_void, 1) }, 1);
        }
        let winners = res.iter().filter(|&&r| r == 0).count();
        let m = Mapping::open_shm(name.as_bytes());
        let owner = m.as_ref().map(|m| m.view().producer_pid() as i32).unwrap_or(0);
        // SAFETY: our pipe ends: a byte each lets both exit.
        unsafe {
            libc::write(done[1], [1u8, 1u8].as_ptr() as *const libc::c_void, 2);
            libc::close(done[0]);
            libc::close(done[1]);
            libc::close(report[0]);
            libc::close(report[1]);
        }
        assert_eq!(wait_exit(a), 0);
        assert_eq!(wait_exit(b), 0);
        let _ = latte::shm::unlink(name.as_bytes());
        assert_eq!((winners, res.contains(&1)), (1, true), "trial {trial}: results {res:?} (0 installed, 1 EEXIST)");
        assert!(owner == a || owner == b, "trial {trial}: the name refers to pid {owner}, not to a producer of this trial");
    }
}

/// Runs `f` in a process of a new PID namespace whose pid there (and so in
/// its region's header) is 32001, a pid that names no process of ours.
/// Needs root (new PID and mount namespaces, a /proc of the new one).
fn in_other_pid_namespace(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: fork; the child sets up the namespaces, runs f, _exits.
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        return pid;
    }
    // SAFETY: plain system calls in the child; every path ends in _exit.
    unsafe {
        if libc::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWNS) != 0 {
            libc::_exit(10);
        }
        libc::mount(core::ptr::null(), c"/".as_ptr(), core::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, core::ptr::null());
        let init = libc::fork(); // pid 1 of the new namespace
        if init == 0 {
            if libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), 0, core::ptr::null()) != 0 {
                libc::_exit(11);
            }
            if std::fs::write("/proc/sys/kernel/ns_last_pid", "32000").is_err() {
                libc::_exit(12);
            }
            let p = libc::fork();
            if p == 0 {
                libc::_exit(f());
            }
            let mut st = 0;
            libc::waitpid(p, &mut st, 0);
            libc::_exit(if libc::WIFEXITED(st) { libc::WEXITSTATUS(st) } else { 13 });
        }
        let mut st = 0;
        libc::waitpid(init, &mut st, 0);
        libc::_exit(if libc::WIFEXITED(st) { libc::WEXITSTATUS(st) } else { 14 });
    }
}

#[test]
fn a_producer_in_another_pid_namespace_stays_alive() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: no memory effects.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root: it makes PID and mount namespaces");
    let name = format!("/latte-test-pidns-{}", std::process::id());
    let (report, done) = (pipe(), pipe());
    let nm = name.clone();
    let outer = in_other_pid_namespace(move || {
        // SAFETY: ends this process should the test fail before releasing it.
        unsafe { libc::alarm(20) };
        let ok = latte::internals::recorder::install_shared(nm.as_bytes(), &cfg(LATTE_IF_TAKEN_REPLACE_STALE)).is_ok();
        let mut b = [0u8; 1];
        // SAFETY: pipe ends of ours.
        unsafe {
            libc::write(report[1], [ok as u8].as_ptr() as *const libc::c_void, 1);
            libc::close(done[1]);
            libc::read(done[0], b.as_mut_ptr() as *mut libc::c_void, 1);
        }
        0
    });
    let mut b = [0u8; 1];
    // SAFETY: our pipe ends: without our copy of the write end, a child that
    // failed before reporting gives end of file, not a wait.
    unsafe { libc::close(report[1]) };
    // SAFETY: our pipe end.
    if unsafe { libc::read(report[0], b.as_mut_ptr() as *mut libc::c_void, 1) } != 1 {
        panic!("the namespace set-up failed: exit {}", wait_exit(outer));
    }
    assert_eq!(b[0], 1, "the producer in the new namespace could not install its region");
    let m = Mapping::open_shm(name.as_bytes()).unwrap();
    eprintln!("the producer's pid in its namespace: {}", m.view().producer_pid());
    assert!(m.producer_alive(), "a running producer judged dead");
    // Another producer asking to replace a stale region must not take it.
    // SAFETY: fork; the child tries and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let r = latte::internals::recorder::install_shared(name.as_bytes(), &cfg(LATTE_IF_TAKEN_REPLACE_STALE));
        // SAFETY: leave the child.
        unsafe { libc::_exit(if r == Err(latte::Error::Os(libc::EEXIST)) { 0 } else { 1 }) };
    }
    assert_eq!(wait_exit(pid), 0, "a live producer's region was replaced");
    // SAFETY: our pipe ends: a byte lets the producer exit (the processes
    // between it and us hold copies of the write end, so closing ours
    // would not).
    unsafe {
        libc::write(done[1], [1u8].as_ptr() as *const libc::c_void, 1);
        libc::close(done[0]);
        libc::close(done[1]);
    }
    assert_eq!(wait_exit(outer), 0);
    assert!(!m.producer_alive(), "an exited producer judged alive");
    drop(m);
    // Stale, but a producer asking for the name only if it is free is refused.
    // SAFETY: fork; the child tries and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let r = latte::internals::recorder::install_shared(name.as_bytes(), &cfg(LATTE_IF_TAKEN_FAIL));
        // SAFETY: leave the child.
        unsafe { libc::_exit(if r == Err(latte::Error::Os(libc::EEXIST)) { 0 } else { 1 }) };
    }
    assert_eq!(wait_exit(pid), 0, "LATTE_IF_TAKEN_FAIL replaced a stale region");
    // Now it is stale: a producer asking to replace it does.
    // SAFETY: fork; the child tries and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = latte::internals::recorder::install_shared(name.as_bytes(), &cfg(LATTE_IF_TAKEN_REPLACE_STALE)).is_ok();
        // SAFETY: leave the child.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    assert_eq!(wait_exit(pid), 0, "a stale region was not replaced");
    let _ = latte::shm::unlink(name.as_bytes());
}

/// Each region that takes a stale name over keeps its lineage: its
/// incarnation is one more than its predecessor's, and `recorded_before`
/// is what every predecessor under the name recorded (what a reader that
/// missed some of them counts as unseen, `latte serve`).
#[test]
fn a_region_that_takes_a_name_over_keeps_its_lineage() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let name = format!("/latte-test-lineage-{}", std::process::id());
    let _ = latte::shm::unlink(name.as_bytes());
    let mut before = 0u64;
    for k in 1..=3u64 {
        let spans = 100 * k;
        // SAFETY: fork; the child installs, records and _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = latte::internals::recorder::install_shared(name.as_bytes(), &cfg(LATTE_IF_TAKEN_REPLACE_STALE)).is_ok();
            for _ in 0..spans {
                latte::internals::ffi::latte_start(c"lineage.span".as_ptr(), latte::layout::LATTE_MODE_FAST);
                latte::internals::ffi::latte_stop(c"lineage.span".as_ptr(), latte::layout::LATTE_MODE_FAST);
            }
            // SAFETY: leave the child at once (its region stays, stale).
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert_eq!(wait_exit(pid), 0, "incarnation {k} installed its region");
        let m = Mapping::open_shm(name.as_bytes()).unwrap();
        let v = m.view();
        assert_eq!(v.lineage(), (k, before), "incarnation {k}: its number and what the ones before recorded");
        assert_eq!(v.recorded_total().unwrap(), spans, "incarnation {k} recorded {spans}");
        before += spans;
    }
    let _ = latte::shm::unlink(name.as_bytes());
}

/// A taker's claim on a dead region (L4: the byte past any object's end
/// that a producer's lock covers): readers see the region dead all the
/// while, and a second producer is refused until the claim is let go.
#[test]
fn a_region_being_taken_over_reads_as_dead() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let name = format!("/latte-test-claimed-{}", std::process::id());
    // A stale region, then a producer that installs over it in a child.
    let install = |name: &str| {
        // SAFETY: fork; the child installs and _exits with the result.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let r = match latte::internals::recorder::install_shared(name.as_bytes(), &cfg(LATTE_IF_TAKEN_REPLACE_STALE)) {
                Ok(()) => 0,
                Err(e) if e == latte::Error::Os(libc::EEXIST) => 1,
                Err(_) => 2,
            };
            // SAFETY: leave the child.
            unsafe { libc::_exit(r) };
        }
        wait_exit(pid)
    };
    assert_eq!(install(&name), 0);
    let m = Mapping::open_shm(name.as_bytes()).expect("the stale region");
    assert!(!m.producer_alive());
    // Claimed the way a taker does, on a descriptor of its own.
    let path = std::ffi::CString::new(format!("/dev/shm{name}")).unwrap();
    // SAFETY: a valid path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: an all-zero flock is valid; the fields are set below.
    let mut l: libc::flock = unsafe { core::mem::zeroed() };
    l.l_type = libc::F_WRLCK as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = libc::off_t::MAX - 1;
    l.l_len = 1;
    // SAFETY: a valid descriptor and flock (l_pid 0).
    assert_eq!(unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &l) }, 0, "{}", std::io::Error::last_os_error());
    assert!(!m.producer_alive(), "a claimed region reads as dead");
    assert!(!Mapping::open_shm(name.as_bytes()).unwrap().producer_alive());
    assert_eq!(install(&name), 1, "another taker is refused while the claim is held");
    // SAFETY: our descriptor; closing it lets go of the claim.
    unsafe { libc::close(fd) };
    assert_eq!(install(&name), 0);
    let _ = latte::shm::unlink(name.as_bytes());
}
