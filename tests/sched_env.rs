//! Switch tracking in processes where nothing turned it on before: off
//! until enabled, `LATTE_SCHED=1`, refusals (seccomp, an unprivileged
//! user's perf memory budget). No test here enables tracking in the test
//! process itself: each works in a forked child (or a child process), so
//! that none inherits another's event.

mod common;
use common::in_child;
use latte::error::LATTE_ERR_SCHED_OFF;
use latte::internals::ffi::*;
use latte::internals::sched::*;

/// How many samples under `id` carry `LATTE_SAMPLE_SWITCHED`.
fn flagged_under(id: &std::ffi::CStr) -> usize {
    common::flags_of(id).iter().filter(|&&f| f).count()
}

fn counters() -> latte_sched_counters {
    let mut c = latte_sched_counters::default();
    assert_eq!(latte_sched_get_counters(&mut c), 0);
    c
}

#[test]
fn off_until_enabled_then_on_for_the_calling_thread() {
    in_child(|| {
        let mut p = latte_sched_point::default();
        let off = latte_sched_status() == LATTE_SCHED_OFF && latte_sched_snap(&mut p) == LATTE_ERR_SCHED_OFF;
        let on = latte_sched_enable() == 0 && latte_sched_status() == LATTE_SCHED_ON;
        let c = counters();
        // Another thread: pending until its slow path (a snap here).
        let other = std::thread::spawn(|| {
            let before = latte_sched_status();
            let mut p = latte_sched_point::default();
            let rc = latte_sched_snap(&mut p);
            (before, rc, latte_sched_status(), counters().tracked)
        })
        .join()
        .unwrap();
        off && on && c.enabled == 1 && c.tracked == 1 && other == (LATTE_SCHED_PENDING, 0, LATTE_SCHED_ON, 2) && counters().tracked == 1
    });
}

#[test]
fn without_tracking_no_sample_is_flagged() {
    in_child(|| {
        let id = c"sched.untracked";
        for _ in 0..10 {
            latte::internals::ffi::latte_start(id.as_ptr(), 0);
            // SAFETY: no memory effects.
            unsafe { libc::usleep(50) };
            latte::internals::ffi::latte_stop(id.as_ptr(), 0);
        }
        latte_sched_status() == LATTE_SCHED_OFF && flagged_under(id) == 0
    });
}

#[test]
fn the_environment_turns_tracking_on() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_with_latte_sched_1", "--ignored", "--test-threads=1"])
        .env("LATTE_SCHED", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{text}{}", String::from_utf8_lossy(&out.stderr));
}

/// Run by `the_environment_turns_tracking_on` with LATTE_SCHED=1.
#[test]
#[ignore]
fn child_with_latte_sched_1() {
    assert_eq!(latte_sched_status(), LATTE_SCHED_PENDING, "enabled, nothing opened yet");
    assert_eq!(counters().tracked, 0);
    let id = c"sched.env";
    latte::internals::ffi::latte_start(id.as_ptr(), 0);
    assert_eq!(latte_sched_status(), LATTE_SCHED_ON, "the first Start opens the thread's event");
    assert_eq!(counters().tracked, 1);
    common::sleep_switched(100);
    latte::internals::ffi::latte_stop(id.as_ptr(), 0);
    assert_eq!(flagged_under(id), 1);
    // Another thread: its first Start opens its own.
    std::thread::spawn(|| {
        assert_eq!(latte_sched_status(), LATTE_SCHED_PENDING);
        latte::internals::ffi::latte_start(c"sched.env.2".as_ptr(), 0);
        latte::internals::ffi::latte_stop(core::ptr::null(), 0);
        assert_eq!(latte_sched_status(), LATTE_SCHED_ON);
        assert_eq!(counters().tracked, 2);
    })
    .join()
    .unwrap();
    assert_eq!(counters().tracked, 1);
    let mut p = latte_sched_point::default();
    assert_eq!(latte_sched_snap(&mut p), 0);
}

/// A seccomp filter that makes perf_event_open fail with `errno`.
fn refuse_perf(errno: i32) -> bool {
    let filter = [
        libc::sock_filter { code: 0x20, jt: 0, jf: 0, k: 0 },                                // ld [nr]
        libc::sock_filter { code: 0x15, jt: 0, jf: 1, k: libc::SYS_perf_event_open as u32 }, // jeq
        libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0x0005_0000 | errno as u32 },       // ret ERRNO
        libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0x7fff_0000 },                      // ret ALLOW
    ];
    let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
    // SAFETY: standard seccomp installation on this (child) process.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && libc::prctl(libc::PR_SET_SECCOMP, 2, &prog as *const _ as libc::c_ulong, 0, 0) == 0 }
}

#[test]
fn refused_by_seccomp_recording_still_works() {
    for errno in [libc::EPERM, libc::ENOSYS] {
        in_child(move || {
            if !refuse_perf(errno) {
                return false;
            }
            let rc = latte_sched_enable();
            let mut p = latte_sched_point::default();
            let snap_rc = latte_sched_snap(&mut p);
            let c = counters();
            let by_errno = if errno == libc::EPERM { c.refused_eperm } else { c.refused_enosys };
            let id = c"sched.refused";
            for _ in 0..10 {
                latte::internals::ffi::latte_start(id.as_ptr(), 0);
                // SAFETY: no memory effects.
                unsafe { libc::usleep(50) };
                latte::internals::ffi::latte_stop(id.as_ptr(), 0);
            }
            let flagged = flagged_under(id);
            let n = {
                let mut raw = Vec::new();
                // SAFETY: a valid C string.
                unsafe { latte::internals::extract::snapshot_into(id.as_ptr(), &mut raw) }.map(|_| raw.len()).unwrap_or(0)
            };
            rc == -errno
                && latte_sched_status() == -errno
                && snap_rc == -errno
                && c.refused == 1
                && by_errno == 1
                && c.last_refusal == errno
                && c.tracked == 0
                && n == 10
                && flagged == 0
        });
    }
}

/// An unprivileged user (nobody, no locked memory of its own) tracks
/// threads until its perf memory budget is spent; then the kernel refuses
/// with EPERM, and recording goes on.
#[test]
fn an_unprivileged_users_budget_is_counted_when_spent() {
    // SAFETY: getuid has no memory effects.
    if unsafe { libc::getuid() } != 0 {
        println!("skipped: needs root to become another user");
        return;
    }
    in_child(|| {
        let lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: plain calls on this child process.
        let ok = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) == 0 && libc::setgid(65534) == 0 && libc::setuid(65534) == 0 };
        if !ok {
            return false;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let go = std::sync::Arc::new(core::sync::atomic::AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut refusal = 0;
        // Each thread keeps its event until `go`; they stop at the first refusal.
        for _ in 0..4096 {
            let (tx, go) = (tx.clone(), go.clone());
            threads.push(std::thread::spawn(move || {
                tx.send(latte_sched_enable()).unwrap();
                while !go.load(core::sync::atomic::Ordering::Acquire) {
                    std::thread::park();
                }
            }));
            let rc = rx.recv().unwrap();
            if rc != 0 {
                refusal = rc;
                break;
            }
        }
        let c = counters();
        let id = c"sched.budget";
        latte::internals::ffi::latte_start(id.as_ptr(), 0);
        latte::internals::ffi::latte_stop(id.as_ptr(), 0);
        let n = {
            let mut raw = Vec::new();
            // SAFETY: a valid C string.
            unsafe { latte::internals::extract::snapshot_into(id.as_ptr(), &mut raw) }.map(|_| raw.len()).unwrap_or(0)
        };
        let mlock_kb: u64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb").unwrap().trim().parse().unwrap();
        println!(
            "unprivileged user, RLIMIT_MEMLOCK 0, perf_event_mlock_kb {mlock_kb}, {} CPUs: {} threads tracked, then {}",
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            c.tracked,
            refusal
        );
        go.store(true, core::sync::atomic::Ordering::Release);
        for t in threads {
            t.thread().unpark();
            t.join().unwrap();
        }
        refusal == -libc::EPERM && c.tracked > 0 && c.refused_eperm == 1 && n == 1
    });
}
