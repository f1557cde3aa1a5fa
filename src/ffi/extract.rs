use super::*;
use crate::error::Error;
use crate::layout::*;
use crate::reader::latte_raw_sample;
use crate::recorder;
use core::ffi::{c_char, c_int, CStr};

/// The durations (cycles) recorded under `id` on every thread: at most a
/// ring's capacity per thread, the newest. Writes them to `out` (capacity
/// `cap`) and their count to `*out_n`; -ERANGE (and the needed count) when
/// they do not fit. An unknown ID gives 0 samples.
#[no_mangle]
pub extern "C" fn latte_samples_snapshot(id: *const c_char, out: *mut u64, cap: usize, out_n: *mut usize) -> c_int {
    guard(PANICKED, || {
        thread_local! {
            // Reused across calls: no large allocation (and no munmap, whose
            // TLB shootdown would interrupt the recording threads) per call.
            static SCRATCH: core::cell::RefCell<Vec<latte_raw_sample>> = const { core::cell::RefCell::new(Vec::new()) };
        }
        // After the thread's thread-locals were destroyed (an atexit
        // handler, a static destructor) a local buffer serves.
        let mut local = Vec::new();
        if !outs_ok(out, cap, out_n) {
            return Error::INVAL.code();
        }
        let fill_out = |raw: &mut Vec<latte_raw_sample>| {
            // SAFETY: NULL or a NUL-terminated string (API contract).
            if let Err(e) = unsafe { crate::extract::snapshot_into(id, raw) } {
                return e.code();
            }
            // SAFETY: checked non-null; writable by contract.
            unsafe { *out_n = raw.len() };
            if raw.len() > cap || (out.is_null() && !raw.is_empty()) {
                return Error::RANGE.code();
            }
            for (k, r) in raw.iter().enumerate() {
                // SAFETY: out has room for cap >= raw.len() elements.
                unsafe { *out.add(k) = r.packed & LATTE_MAX_DURATION };
            }
            0
        };
        match SCRATCH.try_with(|sc| sc.try_borrow_mut().map(|mut raw| fill_out(&mut raw)).ok()) {
            Ok(Some(rc)) => rc,
            _ => fill_out(&mut local),
        }
    })
}

/// One sample of `latte_samples_extract`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_sample_record {
    /// Duration in cycles (stop TSC - start TSC).
    pub duration: u64,
    /// Raw TSC at the span's Start (a pulse: the previous pulse's TSC).
    pub start_tsc: u64,
    /// The ID's token (`latte_id_name`, `latte_id_key`).
    pub token: u32,
    /// Spans open around it (outermost 0).
    pub depth: u8,
    /// `latte_mode` of the Start and of the Stop (LATTE_MODE_PULSE for both
    /// halves of a pulse).
    pub start_mode: u8,
    pub stop_mode: u8,
    /// 1 when the thread was switched out during the span
    /// (`LATTE_SAMPLE_SWITCHED`; only tracked threads set it).
    pub switched: u8,
}

/// Every kept sample of every thread of this process, calibration excluded:
/// slot by slot, each ring's samples in ring order (chronological until the
/// ring wraps). Writes them to `out` (capacity `cap`) and their count to
/// `*out_n`; -ERANGE (and the needed count) when they do not fit: call
/// again with room for a little more (threads may record meanwhile).
#[no_mangle]
pub extern "C" fn latte_samples_extract(out: *mut latte_sample_record, cap: usize, out_n: *mut usize) -> c_int {
    guard(PANICKED, || {
        if !outs_ok(out, cap, out_n) {
            return Error::INVAL.code();
        }
        let mut all = Vec::new();
        if let Err(e) = crate::extract::extract_all(&mut all) {
            return e.code();
        }
        let recs: Vec<latte_sample_record> = all.iter().map(|(token, r)| record(*token, r)).collect();
        // SAFETY: out is NULL or writable for cap records, out_n NULL or writable (API contract).
        unsafe { fill(&recs, out, cap, out_n) }
    })
}

/// `latte_samples_extract` in one pass whatever the threads record
/// meanwhile: writes as many as fit in `out` (the first `cap`, in the same
/// order), their count to `*out_n`, and how many more there were to
/// `*out_missed` (0 when everything fit). -EINVAL when `out_n` or
/// `out_missed` is NULL, or `out` is with `cap` over 0.
#[no_mangle]
pub extern "C" fn latte_samples_extract_some(out: *mut latte_sample_record, cap: usize, out_n: *mut usize, out_missed: *mut usize) -> c_int {
    guard(PANICKED, || {
        if !outs_ok(out, cap, out_n) || out_missed.is_null() {
            return Error::INVAL.code();
        }
        let mut all = Vec::new();
        if let Err(e) = crate::extract::extract_all(&mut all) {
            return e.code();
        }
        let take = all.len().min(cap);
        for (k, (token, r)) in all[..take].iter().enumerate() {
            // SAFETY: out is writable for cap >= take records (contract; non-null when cap > 0).
            unsafe { out.add(k).write(record(*token, r)) };
        }
        // SAFETY: both checked non-null; writable by contract.
        unsafe {
            *out_n = take;
            *out_missed = all.len() - take;
        }
        0
    })
}

/// A sample as `latte_samples_extract` gives it.
fn record(token: u32, r: &latte_raw_sample) -> latte_sample_record {
    let s = r.decode();
    latte_sample_record {
        duration: s.duration,
        start_tsc: s.start_tsc,
        token,
        depth: s.depth as u8,
        start_mode: s.start_mode as u8,
        stop_mode: s.stop_mode as u8,
        switched: s.switched as u8,
    }
}

/// The first ID pointer a Start or pulse of this process passed for
/// `token` (the address the program used for that name); NULL when none
/// did. The C++ `Manager::ExtractSamplesGlobal` keys its map with it.
#[no_mangle]
pub extern "C" fn latte_id_key(token: u32) -> *const c_char {
    guard(core::ptr::null(), || recorder::REGISTRY.lock().interner.first_ptr(token).unwrap_or(0) as *const c_char)
}

/// The TSC at this process's start of recording (the region's anchor, taken
/// when it was made); trace times count from it. Makes the default region
/// on first need; 0 when it cannot be made.
#[no_mangle]
pub extern "C" fn latte_tsc_epoch() -> u64 {
    guard(0, || {
        if recorder::REGISTRY.lock().region().is_err() {
            return 0;
        }
        crate::extract::own_view().map(|v| v.anchor_tsc()).unwrap_or(0)
    })
}

/// The report table as a NUL-terminated string of plain text, no escape
/// sequences (free it with `latte_string_free`); NULL on error. Calibrates
/// first when `unit` is TIME or `data` is CALIBRATED.
/// `latte_report_string_color` gives the same table with the original's
/// gray borders.
#[no_mangle]
pub extern "C" fn latte_report_string(unit: latte_unit, data: latte_data) -> *mut c_char {
    guard(core::ptr::null_mut(), || report_string(unit, data, false))
}

/// `latte_report_string` with the original Latte's gray borders (ANSI
/// escapes): the bytes its `DumpToStream` printed, for a terminal.
#[no_mangle]
pub extern "C" fn latte_report_string_color(unit: latte_unit, data: latte_data) -> *mut c_char {
    guard(core::ptr::null_mut(), || report_string(unit, data, true))
}

fn report_string(unit: latte_unit, data: latte_data, color: bool) -> *mut c_char {
    match crate::api::own_report_with(unit, data, color) {
        Ok(s) => std::ffi::CString::new(s).map(|c| c.into_raw()).unwrap_or(core::ptr::null_mut()),
        Err(_) => core::ptr::null_mut(),
    }
}

/// Frees a string returned by latte. NULL is ignored.
#[no_mangle]
pub extern "C" fn latte_string_free(s: *mut c_char) {
    guard((), || {
        if !s.is_null() {
            // SAFETY: s came from CString::into_raw in this library.
            drop(unsafe { std::ffi::CString::from_raw(s) });
        }
    })
}

/// Writes every kept sample of every thread as a Chrome trace JSON array to
/// `path`. Nothing is written when the path cannot be opened.
#[no_mangle]
pub extern "C" fn latte_trace_write(path: *const c_char) -> c_int {
    guard(PANICKED, || {
        if path.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: checked non-null; a NUL-terminated string by contract.
        let p = unsafe { CStr::from_ptr(path) };
        use std::os::unix::ffi::OsStrExt;
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(p.to_bytes()));
        let cpn = crate::calibrate::cycles_per_ns();
        // This process's id (a fork child's region header still names its parent).
        code(crate::trace::write_file(p, crate::extract::own_view().as_ref(), std::process::id(), cpn))
    })
}

/// Formats nanoseconds the way reports do ("1.88 us"); writes at most `len`
/// bytes with a NUL; returns the full length.
#[no_mangle]
pub extern "C" fn latte_time_format(ns: f64, buf: *mut c_char, len: usize) -> c_int {
    // SAFETY: the caller gives a buffer of len bytes (or NULL).
    guard(PANICKED, || unsafe { fill_str(crate::report::format_time(ns).as_bytes(), buf, len) })
}

/// The outlier rule of reports on `n` values: writes the kept values sorted
/// into `out_values` (room for `n`), their count, the outlier count, and the
/// cutoff (`*out_has_cutoff` = 0 when there is none). -EINVAL (nothing
/// written) when an output is NULL (`out_values` may be NULL when `n` is 0).
#[no_mangle]
pub extern "C" fn latte_samples_clean(
    values: *const f64,
    n: usize,
    out_values: *mut f64,
    out_kept: *mut usize,
    out_outliers: *mut usize,
    out_cutoff: *mut f64,
    out_has_cutoff: *mut c_int,
) -> c_int {
    guard(PANICKED, || {
        if (values.is_null() || out_values.is_null()) && n > 0 {
            return -libc::EINVAL;
        }
        if out_kept.is_null() || out_outliers.is_null() || out_cutoff.is_null() || out_has_cutoff.is_null() {
            return -libc::EINVAL;
        }
        let input = if n == 0 {
            &[][..]
        } else {
            // SAFETY: values is readable for n elements by contract.
            unsafe { core::slice::from_raw_parts(values, n) }
        };
        let c = crate::stats::data_clean(input);
        // SAFETY: every output is NULL or writable (out_values for n >= kept elements).
        unsafe {
            if !out_values.is_null() {
                core::ptr::copy_nonoverlapping(c.values.as_ptr(), out_values, c.values.len());
            }
            if !out_kept.is_null() {
                *out_kept = c.values.len();
            }
            if !out_outliers.is_null() {
                *out_outliers = c.outliers;
            }
            if !out_cutoff.is_null() {
                *out_cutoff = c.cutoff.unwrap_or(0.0);
            }
            if !out_has_cutoff.is_null() {
                *out_has_cutoff = c.cutoff.is_some() as c_int;
            }
        }
        0
    })
}
