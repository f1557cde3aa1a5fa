//! `LATTE_RING_SAMPLES` in a process that has made no region yet (each
//! test in a forked child of a harness that makes none): the private
//! region's rings hold that many samples; rings bigger than the default
//! that the address space cannot hold fall back to the default, said once,
//! and smaller ones take fewer rings; rings too small for a median
//! per mode pair leave the region uncalibrated (-ENOBUFS), never a
//! published median of a few calls.

mod common;
use common::*;
use latte::internals::ffi::*;
use latte::layout::*;

/// Standard error of this (child) process into `path`.
fn stderr_to(path: &std::path::Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::create(path).unwrap();
    // SAFETY: both descriptors are open; fd 2 is replaced in this child only.
    unsafe { libc::dup2(f.as_raw_fd(), 2) };
}

/// Caps this process's address space at what it maps now plus `spare` bytes.
fn cap_address_space(spare: u64) {
    let vm = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = vm.lines().find_map(|l| l.strip_prefix("VmSize:")).unwrap().trim().trim_end_matches(" kB").trim().parse().unwrap();
    let cap = libc::rlimit { rlim_cur: kib * 1024 + spare, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) }, 0);
}

/// The ring size of the region this process records into.
fn ring_size() -> u32 {
    latte::internals::extract::own_view().unwrap().geo().samples_per_slot
}

#[test]
fn the_private_rings_hold_what_the_variable_asks() {
    in_child(|| {
        // The child's only thread: nothing reads the environment meanwhile.
        std::env::set_var("LATTE_RING_SAMPLES", "256");
        for _ in 0..1000 {
            span(c"rs.private", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        ring_size() == 256 && snapshot(c"rs.private").len() == 256
    });
}

#[test]
fn rings_the_address_space_cannot_hold_fall_back_to_the_default_said_once() {
    let err = std::env::temp_dir().join(format!("latte-ring-samples-{}.err", std::process::id()));
    in_child(|| {
        std::env::set_var("LATTE_RING_SAMPLES", "67108864"); // 1 GiB a ring
        stderr_to(&err);
        cap_address_space(512 << 20);
        for _ in 0..1000 {
            span(c"rs.big", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        ring_size() == LATTE_DEFAULT_SAMPLES && snapshot(c"rs.big").len() == 1000 && counters().no_slot_drops == 0
    });
    let said = std::fs::read_to_string(&err).unwrap();
    std::fs::remove_file(&err).unwrap();
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("LATTE_RING_SAMPLES=67108864") && said.contains("rings hold 65536 samples"), "{said}");
}

#[test]
fn smaller_rings_under_a_capped_address_space_stay_small() {
    let err = std::env::temp_dir().join(format!("latte-ring-samples-small-{}.err", std::process::id()));
    in_child(|| {
        std::env::set_var("LATTE_RING_SAMPLES", "4096");
        stderr_to(&err);
        cap_address_space(4 << 20);
        let ids: Vec<std::ffi::CString> = (0..4).map(|k| std::ffi::CString::new(format!("rs.small.{k}")).unwrap()).collect();
        for _ in 0..500 {
            for id in &ids {
                span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
            }
        }
        ring_size() == 4096 && ids.iter().all(|id| snapshot(id).len() == 500)
    });
    let said = std::fs::read_to_string(&err).unwrap();
    std::fs::remove_file(&err).unwrap();
    assert!(!said.contains("LATTE_RING_SAMPLES"), "default rings would need more: no fall back: {said}");
}

#[test]
fn rings_too_small_for_a_median_per_pair_leave_the_region_uncalibrated() {
    for (samples, calibrates) in [("16", false), ("128", false), ("256", true)] {
        in_child(|| {
            std::env::set_var("LATTE_RING_SAMPLES", samples);
            span(c"rs.cal", LATTE_MODE_FAST, LATTE_MODE_FAST);
            let rc = latte_calibration_run();
            let (mut o9, mut p) = ([0f64; 9], 0f64);
            assert_eq!(latte_calibration_get_overheads(o9.as_mut_ptr(), &mut p), 0);
            let published = p > 0.0 && o9.iter().all(|o| *o > 0.0);
            let calibrated = latte::internals::extract::own_view().unwrap().calibration().calibrated;
            if calibrates {
                rc == 0 && published && calibrated
            } else {
                // Said again at once by a later call, no loop run.
                let again = latte_calibration_run();
                rc == -libc::ENOBUFS && again == -libc::ENOBUFS && latte_calibration_begin() == 0 && !published && !calibrated
            }
        });
    }
}
