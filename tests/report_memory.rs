//! Building a report reads one component at a time and keeps 8 bytes a
//! sample of it: its peak memory stays below the rings it reads, and an
//! allocation that fails is an error (NULL from `latte_report_string`),
//! never an abort of the measured process (the failure is forced through a
//! test hook: with a limit on the address space, glibc serves the request
//! from space its thread arenas reserved earlier).

use latte::internals::ffi::*;
use latte::layout::*;

fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)).unwrap().parse().unwrap()
}

/// 64 threads fill a ring each of one component: 64 MiB of rings.
fn fill() -> u64 {
    std::thread::scope(|s| {
        for _ in 0..64 {
            s.spawn(|| {
                for _ in 0..65536 {
                    latte_start(c"mem.a".as_ptr(), LATTE_MODE_FAST);
                    latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                }
            });
        }
    });
    64 * 65536 * 16
}

#[test]
fn a_report_needs_less_memory_than_the_rings_it_reads_and_fails_cleanly() {
    let ring_bytes = fill();
    // The allocation for a component's durations fails: the call says so
    // (NULL), and the process goes on.
    latte::report::FAIL_REPORT_ALLOC.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(latte_report_string(LATTE_UNIT_CYCLE, LATTE_DATA_RAW).is_null());
    latte::report::FAIL_REPORT_ALLOC.store(false, std::sync::atomic::Ordering::Relaxed);
    // The peak above what is resident now, while a report is built.
    std::fs::write("/proc/self/clear_refs", "5").unwrap(); // resets VmHWM
    let before = status_kib("VmRSS:");
    let s = latte_report_string(LATTE_UNIT_CYCLE, LATTE_DATA_RAW);
    assert!(!s.is_null());
    latte_string_free(s);
    let peak = status_kib("VmHWM:").saturating_sub(before) * 1024;
    eprintln!("rings {} MiB, the report's peak {} MiB", ring_bytes >> 20, peak >> 20);
    assert!(peak < ring_bytes * 3 / 4, "the report took {} MiB for {} MiB of rings", peak >> 20, ring_bytes >> 20);
}
