use super::*;
use core::ffi::{c_char, c_int};

/// Runs calibration once through the C ABI's own path (later calls return
/// at once). Returns 0 or a negative code: -ENOBUFS when the region's rings
/// hold fewer than 256 samples, too few for a median per mode pair (no
/// loop runs; the region stays uncalibrated, and reports say so).
#[no_mangle]
pub extern "C" fn latte_calibration_run() -> c_int {
    guard(PANICKED, || code(crate::calibrate::run_native()))
}

/// For callers with their own inline path: 1 when the caller must now run
/// the calibration loops (empty spans under `latte.calibrate` for each of
/// the 9 mode pairs, then pulses) and call `latte_calibration_end`; 0 when
/// calibration is done (waits while another thread runs it) or cannot run
/// (rings under 256 samples: `latte_calibration_run` says -ENOBUFS).
#[no_mangle]
pub extern "C" fn latte_calibration_begin() -> c_int {
    guard(0, || crate::calibrate::begin() as c_int)
}

/// Ends a calibration begun on this thread: publishes the medians. Returns
/// 0 or a negative code (-ENOBUFS as for `latte_calibration_run`; nothing
/// is published then).
#[no_mangle]
pub extern "C" fn latte_calibration_end() -> c_int {
    guard(PANICKED, || code(crate::calibrate::end()))
}

/// Iterations per mode pair the calibration loops run.
#[no_mangle]
pub extern "C" fn latte_calibration_iterations() -> u32 {
    crate::calibrate::iterations()
}

/// The ID calibration records under.
#[no_mangle]
pub extern "C" fn latte_calibration_id() -> *const c_char {
    crate::calibrate::CALIBRATION_ID.as_ptr()
}

/// The calibrated overheads in cycles: `out9` gets `[start][stop]` for the 9
/// mode pairs, `out_pulse` the pulse. Zeros before calibration. -EINVAL
/// (nothing written) when either is NULL.
#[no_mangle]
pub extern "C" fn latte_calibration_get_overheads(out9: *mut f64, out_pulse: *mut f64) -> c_int {
    guard(PANICKED, || {
        if out9.is_null() || out_pulse.is_null() {
            return -libc::EINVAL;
        }
        let c = crate::calibrate::current();
        // SAFETY: both checked non-null; writable by contract (out9 for 9 elements).
        unsafe {
            core::ptr::copy_nonoverlapping(c.overhead.as_ptr(), out9, crate::layout::LATTE_MODE_PAIRS as usize);
            *out_pulse = c.pulse();
        }
        0
    })
}

/// TSC cycles per ns, kept once known: the ratio of the region's anchor
/// (a TSC and CLOCK_MONOTONIC_RAW pair taken when the region was made) to a
/// pair taken now. Within 120 ms of the region's creation the first call
/// sleeps until the anchor is 120 ms old (not for a measuring thread).
#[no_mangle]
pub extern "C" fn latte_tsc_cycles_per_ns() -> f64 {
    guard(0.0, crate::calibrate::cycles_per_ns)
}

/// Measures TSC cycles per ns anew over `window_ms` milliseconds against
/// CLOCK_MONOTONIC_RAW (what `LATTE_FREQ` does, with `LATTE_FREQ_WINDOW_MS`).
#[no_mangle]
pub extern "C" fn latte_tsc_measure_cycles_per_ns(window_ms: u32) -> f64 {
    guard(0.0, || crate::tsc::measure_cycles_per_ns(window_ms as u64))
}
