//! Switch tracking: the diff of two points against the kernel's own counts,
//! sleeps, ring overruns, refusals (seccomp, an unprivileged user's perf
//! memory budget), thread exit and fork.

mod common;
use common::{flags_of, in_child, kernel_switches, sleep_switched};
use latte::error::LATTE_ERR_SCHED_LOST;
use latte::internals::ffi::*;
use latte::internals::sched::*;

fn snap() -> latte_sched_point {
    let mut p = latte_sched_point::default();
    assert_eq!(latte_sched_snap(&mut p), 0);
    p
}

fn diff(a: &latte_sched_point, b: &latte_sched_point) -> (i32, latte_sched_delta) {
    let mut d = latte_sched_delta::default();
    let rc = latte_sched_diff(a, b, &mut d);
    (rc, d)
}

fn counters() -> latte_sched_counters {
    let mut c = latte_sched_counters::default();
    assert_eq!(latte_sched_get_counters(&mut c), 0);
    c
}

#[test]
fn switch_outs_summed_over_diffs_match_the_kernels_count() {
    assert_eq!(latte_sched_enable(), 0);
    let k0 = kernel_switches();
    let mut a = snap();
    let (mut outs, mut diffs) = (0u64, 0);
    while outs < 150 {
        for _ in 0..10 {
            sleep_switched(50);
        }
        let b = snap();
        let (rc, d) = diff(&a, &b);
        assert_eq!(rc, 0, "{d:?}");
        assert_eq!(d.on_cpu_ns + d.preempted_ns + d.blocked_ns, d.wall_ns, "{d:?}");
        assert_eq!(d.off_cpu_ns, d.preempted_ns + d.blocked_ns);
        assert!(d.switch_outs >= 10, "10 sleeps, {} switch-outs", d.switch_outs);
        outs += d.switch_outs as u64;
        diffs += 1;
        a = b;
    }
    let k1 = kernel_switches();
    let kernel = k1 - k0;
    println!("{outs} switch-outs over {diffs} diffs; the kernel counted {kernel}");
    assert!(outs.abs_diff(kernel) <= 2, "diffs {outs}, kernel {kernel}");
}

#[test]
fn a_sleep_is_blocked_time() {
    assert_eq!(latte_sched_enable(), 0);
    let a = snap();
    sleep_switched(3000);
    let b = snap();
    let (rc, d) = diff(&a, &b);
    assert_eq!(rc, 0);
    println!("{}", latte::internals::ffi::delta_line(&d));
    assert!(d.wall_ns >= 3_000_000, "{d:?}");
    assert!(d.switch_outs >= 1 && d.blocked_ns >= 2_000_000, "{d:?}");
    assert_eq!(d.on_cpu_ns + d.off_cpu_ns, d.wall_ns);
    assert!(d.cpus >= 1 && d.lost == 0);
}

#[test]
fn a_ring_overrun_is_reported() {
    assert_eq!(latte_sched_enable(), 0);
    // More switches than the ring holds (256 records, two a switch).
    let a = snap();
    for _ in 0..400 {
        sleep_switched(1);
    }
    let b = snap();
    let (rc, d) = diff(&a, &b);
    assert_eq!(rc, LATTE_ERR_SCHED_LOST, "{d:?}");
    assert_eq!((d.lost, d.switch_outs, d.on_cpu_ns, d.blocked_ns), (1, 0, 0, 0));
    assert!(d.wall_ns > 0);
    assert!(latte::internals::ffi::delta_line(&d).contains("lost"));
    // A window that was whole when taken, read after the ring moved on.
    let a = snap();
    sleep_switched(10);
    let b = snap();
    for _ in 0..400 {
        sleep_switched(1);
    }
    assert_eq!(diff(&a, &b).0, LATTE_ERR_SCHED_LOST);
    // ... and one read at once is whole.
    let a = snap();
    sleep_switched(10);
    let b = snap();
    assert_eq!(diff(&a, &b).0, 0);
}

#[test]
fn points_of_another_thread_or_out_of_order_are_refused() {
    assert_eq!(latte_sched_enable(), 0);
    let mine = snap();
    let theirs = std::thread::spawn(|| {
        assert_eq!(latte_sched_enable(), 0);
        snap()
    })
    .join()
    .unwrap();
    assert_ne!(mine.ring, theirs.ring);
    let later = snap();
    assert_eq!(diff(&mine, &theirs).0, -libc::EINVAL);
    assert_eq!(diff(&theirs, &theirs).0, -libc::EINVAL, "that ring is gone with its thread");
    assert_eq!(diff(&later, &mine).0, -libc::EINVAL, "out of order");
    assert_eq!(diff(&mine, &later).0, 0);
    let mut d = latte_sched_delta::default();
    assert_eq!(latte_sched_diff(core::ptr::null(), &mine, &mut d), -libc::EINVAL);
    assert_eq!(latte_sched_diff(&mine, &mine, core::ptr::null_mut()), -libc::EINVAL);
}

#[test]
fn format_follows_the_buffer_rule() {
    let d = latte_sched_delta {
        wall_ns: 1_500_000,
        on_cpu_ns: 500_000,
        off_cpu_ns: 1_000_000,
        blocked_ns: 1_000_000,
        switch_outs: 1,
        cpus: 1,
        ..Default::default()
    };
    let mut n = 0usize;
    assert_eq!(latte_sched_format(&d, core::ptr::null_mut(), 0, &mut n), -libc::ERANGE);
    let text = latte::internals::ffi::delta_line(&d);
    assert_eq!(n, text.len());
    assert_eq!(text, "wall 1.50 ms = on-CPU 500.00 us + off-CPU 1.00 ms (preempted 0.00 ns, blocked 1.00 ms); 1 switch-out (0 preempted); 1 CPU, 0 migrations");
    let mut buf = vec![0x55u8; n];
    assert_eq!(latte_sched_format(&d, buf.as_mut_ptr().cast(), n, &mut n), -libc::ERANGE, "no room for the NUL");
    assert!(buf.iter().all(|&b| b == 0x55), "nothing written on -ERANGE");
    let mut buf = vec![0u8; n + 1];
    assert_eq!(latte_sched_format(&d, buf.as_mut_ptr().cast(), n + 1, core::ptr::null_mut()), -libc::EINVAL);
    assert_eq!(latte_sched_format(&d, buf.as_mut_ptr().cast(), n + 1, &mut n), 0);
    assert_eq!(&buf[..n], text.as_bytes());
    assert_eq!(buf[n], 0);
    assert_eq!(latte_sched_format(core::ptr::null(), buf.as_mut_ptr().cast(), n + 1, &mut n), -libc::EINVAL);
}

#[test]
fn an_exiting_thread_releases_its_event() {
    in_child(|| {
        if latte_sched_enable() != 0 {
            return false;
        }
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = (counters().tracked, fds());
        let during = std::thread::spawn(move || (latte_sched_enable(), counters().tracked, fds())).join().unwrap();
        let after = (counters().tracked, fds());
        during.0 == 0 && during.1 == before.0 + 1 && during.2 == before.1 + 1 && after == before && counters().opened == 2
    });
}

/// A thread whose first span comes from a pthread key destructor opens its
/// event after its thread-local destructors ran (so its event's own
/// destructor never runs): latte's retirement of the thread releases it.
#[test]
fn a_thread_first_recording_in_a_key_destructor_releases_its_event() {
    unsafe extern "C" fn records(_: *mut libc::c_void) {
        latte_start(c"sched.key.dtor".as_ptr(), latte::layout::LATTE_MODE_FAST);
        latte_stop(core::ptr::null(), latte::layout::LATTE_MODE_FAST);
    }
    in_child(|| {
        if latte_sched_enable() != 0 {
            return false;
        }
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: a valid out-pointer and a destructor of the right type.
        assert_eq!(unsafe { libc::pthread_key_create(&mut key, Some(records)) }, 0);
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = (counters().tracked, fds(), counters().opened);
        std::thread::spawn(move || {
            // SAFETY: the key made above; any non-null value arms it.
            assert_eq!(unsafe { libc::pthread_setspecific(key, core::ptr::dangling()) }, 0);
        })
        .join()
        .unwrap();
        let after = (counters().tracked, fds(), counters().opened);
        let recorded = common::snapshot(c"sched.key.dtor").len();
        after == (before.0, before.1, before.2 + 1) && recorded == 1
    });
}

#[test]
fn a_fork_child_gets_an_event_of_its_own() {
    assert_eq!(latte_sched_enable(), 0);
    let parent = snap();
    in_child(move || {
        let child = snap();
        let c = counters();
        let a = snap();
        sleep_switched(2000);
        let b = snap();
        let (rc, d) = diff(&a, &b);
        latte_sched_status() == LATTE_SCHED_ON
            && child.ring != parent.ring
            && diff(&parent, &child).0 == -libc::EINVAL
            && c.tracked == 1
            && c.opened == 1
            && rc == 0
            && d.switch_outs >= 1
    });
    // The parent's ring is unaffected.
    sleep_switched(100);
    let (rc, d) = diff(&parent, &snap());
    assert_eq!(rc, 0);
    assert!(d.switch_outs >= 1);
}

#[test]
fn spans_and_pulses_around_a_sleep_are_all_flagged() {
    std::thread::spawn(|| {
        assert_eq!(latte_sched_enable(), 0);
        let id = c"sched.sleep";
        for _ in 0..20 {
            latte::internals::ffi::latte_start(id.as_ptr(), 0);
            sleep_switched(100);
            latte::internals::ffi::latte_stop(id.as_ptr(), 0);
        }
        let flags = flags_of(id);
        assert_eq!(flags.len(), 20);
        assert!(flags.iter().all(|&f| f), "{flags:?}");
        let pid = c"sched.sleep.pulse";
        let mut site = latte::layout::latte_pulse_site::new();
        for _ in 0..21 {
            sleep_switched(100);
            latte::internals::ffi::latte_pulse(&mut site, pid.as_ptr());
        }
        let flags = flags_of(pid);
        assert_eq!(flags.len(), 20, "the first pulse primes its site");
        assert!(flags.iter().all(|&f| f), "{flags:?}");
    })
    .join()
    .unwrap();
}

/// Spins `n` iterations (a short span's body).
fn spin(n: u32) {
    let mut x = 0u32;
    for _ in 0..n {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

#[test]
fn flagged_spans_never_outnumber_the_kernels_switches() {
    std::thread::spawn(|| {
        assert_eq!(latte_sched_enable(), 0);
        let (id, pid) = (c"sched.spin", c"sched.spin.pulse");
        let mut site = latte::layout::latte_pulse_site::new();
        // Warm: ring resolved and pages committed before counting.
        latte::internals::ffi::latte_thread_prefault(id.as_ptr());
        latte::internals::ffi::latte_thread_prefault(pid.as_ptr());
        // The kernel's count first, then the priming pulse: the first
        // counted pulse compares with the switch count the priming one saw,
        // so a switch between the two must fall inside the kernel's window.
        let k0 = kernel_switches();
        latte::internals::ffi::latte_pulse(&mut site, pid.as_ptr());
        for i in 0..60_000u32 {
            latte::internals::ffi::latte_start(id.as_ptr(), 0);
            spin(200);
            latte::internals::ffi::latte_stop(id.as_ptr(), 0);
            latte::internals::ffi::latte_pulse(&mut site, pid.as_ptr());
            if i % 10_000 == 0 {
                sleep_switched(50); // between spans: counted by the kernel, flags no span
            }
        }
        let k1 = kernel_switches();
        let spans = flags_of(id);
        let pulses = flags_of(pid);
        let (fs, fp) = (spans.iter().filter(|&&f| f).count() as u64, pulses.iter().filter(|&&f| f).count() as u64);
        println!("{} spans, {fs} flagged; {} pulses, {fp} flagged; the kernel counted {} switch-outs", spans.len(), pulses.len(), k1 - k0);
        assert_eq!(spans.len(), 60_000);
        assert!(fs <= k1 - k0, "{fs} flagged spans, {} switches", k1 - k0);
        // Every sleep between spans falls inside a pulse interval.
        assert!(fp >= 6 && fp <= k1 - k0, "{fp} flagged pulses, {} switches", k1 - k0);
    })
    .join()
    .unwrap();
}

#[test]
fn a_thread_that_released_its_event_flags_nothing() {
    std::thread::spawn(|| {
        assert_eq!(latte_sched_enable(), 0);
        let id = c"sched.released";
        latte::internals::ffi::latte_start(id.as_ptr(), 0);
        sleep_switched(100);
        latte::internals::ffi::latte_stop(id.as_ptr(), 0);
        assert_eq!(latte_sched_release(), 0);
        assert_eq!(latte_sched_status(), LATTE_SCHED_RELEASED);
        let mut p = latte_sched_point::default();
        assert_eq!(latte_sched_snap(&mut p), latte::error::LATTE_ERR_SCHED_OFF);
        latte::internals::ffi::latte_start(id.as_ptr(), 0);
        sleep_switched(100);
        latte::internals::ffi::latte_stop(id.as_ptr(), 0);
        assert_eq!(latte_sched_enable(), 0, "enable opens it again");
        latte::internals::ffi::latte_start(id.as_ptr(), 0);
        sleep_switched(100);
        latte::internals::ffi::latte_stop(id.as_ptr(), 0);
        assert_eq!(flags_of(id), vec![true, false, true]);
    })
    .join()
    .unwrap();
}

#[test]
fn reports_count_switched_samples_and_leave_them_out_when_clean() {
    std::thread::spawn(|| {
        assert_eq!(latte_sched_enable(), 0);
        let id = c"sched.report";
        for i in 0..40 {
            latte::internals::ffi::latte_start(id.as_ptr(), 0);
            if i % 4 == 0 {
                sleep_switched(200);
            }
            latte::internals::ffi::latte_stop(id.as_ptr(), 0);
        }
        let flags = flags_of(id);
        let switched = flags.iter().filter(|&&f| f).count() as u64;
        assert!(switched >= 10, "{flags:?}");
        let view = latte::internals::extract::own_view().unwrap();
        let cal = view.calibration();
        let row = |clean| {
            latte::report::rows_of_view_with(&view, latte::layout::LATTE_DATA_RAW, &cal, clean).unwrap().into_iter().find(|r| r.name == "sched.report").unwrap()
        };
        let (all, clean) = (row(false), row(true));
        assert_eq!((all.switched, all.read()), (switched, 40));
        assert!((all.switched_share() - switched as f64 / 40.0).abs() < 1e-12);
        assert_eq!((clean.switched, clean.read(), clean.outliers, clean.summary.count as u64), (switched, 40, 0, 40 - switched));
        assert!(clean.summary.max < all.summary.max, "the sleeping spans are out of the clean figures");
    })
    .join()
    .unwrap();
}
