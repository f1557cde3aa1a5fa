//! Helpers shared by the integration tests (each test file is its own process).
#![allow(dead_code)]

use latte::internals::ffi::*;
use latte::layout::*;
use std::ffi::CStr;

pub fn span(id: &CStr, start: latte_mode, stop: latte_mode) -> u64 {
    latte_start(id.as_ptr(), start);
    latte_stop(core::ptr::null(), stop)
}

pub fn snapshot(id: &CStr) -> Vec<u64> {
    // SAFETY: a valid C string.
    let mut raw = Vec::new();
    unsafe { latte::internals::extract::snapshot_into(id.as_ptr(), &mut raw) }.unwrap();
    raw.iter().map(|r| r.decode().duration).collect()
}

pub fn counters() -> latte::counters::latte_counters {
    let mut c = Default::default();
    assert_eq!(latte_region_get_counters(&mut c), 0);
    c
}

pub fn thread_counters() -> latte::internals::recorder::latte_thread_counters {
    let mut c = Default::default();
    assert_eq!(latte_thread_get_counters(&mut c), 0);
    c
}

/// Resident set size of this process in KiB.
pub fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)).unwrap().parse().unwrap()
}
