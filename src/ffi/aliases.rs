//! Old names of renamed calls, kept so that programs built against an
//! earlier header still link and run. Each forwards to the new name; new
//! code uses the new one. The inline path's internal entry points have no
//! old names on purpose: a program inlined against an earlier header lays
//! out its thread state differently, so it must fail to link, not run.

use super::calibrate::*;
use super::extract::*;
use super::misc::*;
use super::reader::*;
use super::record::*;
use super::region::*;
use crate::counters::latte_counters;
use core::ffi::{c_char, c_int};

/// Old name of `latte_region_get_counters`.
#[no_mangle]
pub extern "C" fn latte_get_counters(out: *mut latte_counters) -> c_int {
    latte_region_get_counters(out)
}

/// Old name of `latte_reader_get_counters`.
#[no_mangle]
pub extern "C" fn latte_reader_counters(r: *const latte_reader, out: *mut latte_counters) -> c_int {
    latte_reader_get_counters(r, out)
}

/// Old name of `latte_reader_get_info`.
#[no_mangle]
pub extern "C" fn latte_reader_info(r: *const latte_reader, out: *mut latte_region_info) -> c_int {
    latte_reader_get_info(r, out)
}

/// Old name of `latte_region_unlink`.
#[no_mangle]
pub extern "C" fn latte_shm_unlink(shm_name: *const c_char) -> c_int {
    latte_region_unlink(shm_name)
}

/// Old name of `latte_calibration_get_overheads`.
#[no_mangle]
pub extern "C" fn latte_calibration_overheads(out9: *mut f64, out_pulse: *mut f64) -> c_int {
    latte_calibration_get_overheads(out9, out_pulse)
}

/// Old name of `latte_thread_prefault`.
#[no_mangle]
pub extern "C" fn latte_prefault(id: *const c_char) -> i64 {
    latte_thread_prefault(id)
}

/// Old name of `latte_calibration_run`.
#[no_mangle]
pub extern "C" fn latte_calibrate() -> c_int {
    latte_calibration_run()
}

/// Old name of `latte_tsc_cycles_per_ns`.
#[no_mangle]
pub extern "C" fn latte_cycles_per_ns() -> f64 {
    latte_tsc_cycles_per_ns()
}

/// Old name of `latte_tsc_measure_cycles_per_ns`.
#[no_mangle]
pub extern "C" fn latte_measure_cycles_per_ns(window_ms: u32) -> f64 {
    latte_tsc_measure_cycles_per_ns(window_ms)
}

/// Old name of `latte_tsc_epoch`.
#[no_mangle]
pub extern "C" fn latte_epoch_tsc() -> u64 {
    latte_tsc_epoch()
}

/// Old name of `latte_time_format`.
#[no_mangle]
pub extern "C" fn latte_format_time(ns: f64, buf: *mut c_char, len: usize) -> c_int {
    latte_time_format(ns, buf, len)
}

/// Old name of `latte_samples_clean`.
#[no_mangle]
pub extern "C" fn latte_data_clean(
    values: *const f64,
    n: usize,
    out_values: *mut f64,
    out_kept: *mut usize,
    out_outliers: *mut usize,
    out_cutoff: *mut f64,
    out_has_cutoff: *mut c_int,
) -> c_int {
    latte_samples_clean(values, n, out_values, out_kept, out_outliers, out_cutoff, out_has_cutoff)
}

/// Old name of `latte_samples_snapshot`.
#[no_mangle]
pub extern "C" fn latte_snapshot(id: *const c_char, out: *mut u64, cap: usize, out_n: *mut usize) -> c_int {
    latte_samples_snapshot(id, out, cap, out_n)
}

/// Old name of `latte_error_string`.
#[no_mangle]
pub extern "C" fn latte_strerror(code: c_int) -> *const c_char {
    latte_error_string(code)
}
