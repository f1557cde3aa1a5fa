//! The C ABI: a thin, safe boundary over the Rust core. Every function runs
//! inside a panic boundary (a panic becomes an error code or a default,
//! never an unwind into C), checks its pointers, and puts outputs last.
//! Errors are 0 or a negative code; `latte_strerror` describes them.

use crate::error::*;
use crate::layout::*;
use crate::reader::{latte_cursor, latte_raw_sample, latte_slot_info, Mapping, View, LATTE_READER_MIN_INTERVAL_NS};
use crate::recorder::{self, latte_counters, latte_thread_counters};
use crate::region::latte_region_config;
use core::ffi::{c_char, c_int, CStr};
use core::sync::atomic::{AtomicU64, Ordering};

use std::panic::{catch_unwind, AssertUnwindSafe};

#[inline(always)]
pub(crate) fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

fn code(r: Result<(), i32>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// Writes `v` to a caller's out-parameter and returns 0; -EINVAL when
/// `out` is NULL; the error when `v` is one.
pub(crate) fn put_out<T>(out: *mut T, v: impl FnOnce() -> Result<T, i32>) -> c_int {
    if out.is_null() {
        return -libc::EINVAL;
    }
    match v() {
        Ok(v) => {
            // SAFETY: checked non-null; the caller guarantees it is writable.
            unsafe { out.write(v) };
            0
        }
        Err(e) => e,
    }
}

/// Copies `src` into a caller buffer of `cap` elements. Sets `*out_n` to
/// the full count; -ERANGE when it does not fit (nothing is copied then).
///
/// # Safety
/// `out` is NULL or writable for `cap` elements; `out_n` is NULL or writable.
unsafe fn fill<T: Copy>(src: &[T], out: *mut T, cap: usize, out_n: *mut usize) -> c_int {
    if !out_n.is_null() {
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { *out_n = src.len() };
    }
    if src.len() > cap || (out.is_null() && !src.is_empty()) {
        return -libc::ERANGE;
    }
    if !src.is_empty() {
        // SAFETY: out is writable for cap >= src.len() elements.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), out, src.len()) };
    }
    0
}

/// Copies a string into a caller buffer, NUL-terminated; returns the string's
/// length (without NUL). Truncates when `len` is too small.
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
unsafe fn fill_str(s: &[u8], buf: *mut c_char, len: usize) -> c_int {
    if !buf.is_null() && len > 0 {
        let n = s.len().min(len - 1);
        // SAFETY: buf is writable for len > n bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
    }
    s.len().min(c_int::MAX as usize) as c_int
}

// ------------------------------------------------------------ recording ----

/// Opens a span on the calling thread's stack under `id` (interned by
/// content; NULL records as `<null-id>`). Beyond 64 open spans the call is
/// ignored and counted.
#[no_mangle]
pub extern "C" fn latte_start(id: *const c_char, mode: latte_mode) {
    guard((), || {
        let t = recorder::current();
        if !t.is_null() {
            // SAFETY: the calling thread's own state.
            recorder::start(unsafe { &mut *t }, id, mode)
        }
    })
}

/// Gives the calling thread its ring for `id` now (as its first Start
/// would) and commits the ring's pages not written yet, so that the first
/// samples under `id` on this thread take no page fault. Call it before a
/// hot loop, where the cost (about a microsecond a page, 256 pages for a ring
/// of 65,536 samples) is welcome. Returns the pages touched (0 when the ring
/// has wrapped already), or -ENOSPC when the ID or a slot does not fit.
#[no_mangle]
pub extern "C" fn latte_prefault(id: *const c_char) -> i64 {
    guard(-libc::EIO as i64, || match recorder::prefault(id) {
        Ok(n) => n as i64,
        Err(e) => e as i64,
    })
}

/// Closes the innermost open span of the calling thread, whatever `id` is
/// (it may be NULL), records it, and returns its duration in cycles; 0 when
/// nothing was open (ignored and counted).
#[no_mangle]
pub extern "C" fn latte_stop(id: *const c_char, mode: latte_mode) -> u64 {
    let _ = id;
    guard(0, || {
        let now = crate::tsc::read_stop(mode);
        let t = recorder::current();
        if t.is_null() {
            return 0;
        }
        // SAFETY: the calling thread's own state.
        recorder::stop_at(unsafe { &mut *t }, mode, now)
    })
}

/// A pulse from the call site whose state is `site` (one per call site and
/// thread, zero-initialised): records the cycles since that site's previous
/// pulse; the first call only primes it.
#[no_mangle]
pub extern "C" fn latte_pulse(site: *mut latte_pulse_site, id: *const c_char) {
    guard((), || {
        let t = recorder::current();
        if t.is_null() || site.is_null() {
            return;
        }
        // SAFETY: own state; site checked non-null and owned by the caller's thread.
        recorder::pulse(unsafe { &mut *t }, unsafe { &mut *site }, id)
    })
}

// The slow paths of the inline fast path (`latte_inline.h`). `t` is the
// caller's own per-thread state (its thread-local `latte_thread`); passing
// anything else is a contract violation the library cannot detect, except
// NULL, which is refused.

/// Slow path of the inline Start: a cache miss. Attaches `t` to the calling
/// thread if needed, interns the ID, finds or allocates this thread's ring
/// for it, fills `t`'s cache and returns the ring. When the span cannot be
/// recorded (ID table or slots full, thread being torn down; counted) it
/// returns a sink ring, never NULL for a non-NULL `t`.
#[no_mangle]
pub extern "C" fn latte_thread_resolve(t: *mut latte_thread, id: *const c_char) -> *mut latte_slot_header {
    if t.is_null() {
        return core::ptr::null_mut();
    }
    let slot = guard(core::ptr::null_mut(), || {
        // SAFETY: `t` is the calling thread's own state (the contract above).
        match unsafe { recorder::activate(t) } {
            Some(t) => recorder::resolve(t, id),
            None => {
                recorder::note_unavailable();
                core::ptr::null_mut()
            }
        }
    });
    if slot.is_null() {
        // SAFETY: as above; only its mask is read.
        recorder::unrecordable(unsafe { &*t })
    } else {
        slot
    }
}

/// Slow path of the inline Start: 64 spans are open; counts the ignored Start.
#[no_mangle]
pub extern "C" fn latte_thread_note_overflow(t: *mut latte_thread) {
    guard((), || {
        if !t.is_null() {
            // SAFETY: the calling thread's own state.
            recorder::note_overflow(unsafe { &mut *t })
        }
    })
}

/// Slow path of the inline Stop: `t` has no open span. Counts an orphan
/// Stop (returns 0), or, when another state of this thread is the active
/// one, closes that state's innermost span and returns its duration.
/// `now` is the TSC the caller read in `mode`.
#[no_mangle]
pub extern "C" fn latte_thread_stop_slow(t: *mut latte_thread, mode: latte_mode, now: u64) -> u64 {
    guard(0, || recorder::stop_slow(t, mode, now))
}

/// Slow path of the inline pulse: the site is not resolved for `id` (first
/// call, another ID, or NULL). Attaches `t`, resolves and primes the site,
/// and records the interval when the site was primed before. `now` is the
/// TSC the caller read.
#[no_mangle]
pub extern "C" fn latte_thread_pulse_slow(t: *mut latte_thread, site: *mut latte_pulse_site, id: *const c_char, now: u64) {
    guard((), || {
        if t.is_null() || site.is_null() {
            return;
        }
        // SAFETY: `t` is the calling thread's own state (the contract above).
        match unsafe { recorder::activate(t) } {
            // SAFETY: site checked non-null; the caller's per-thread call-site state.
            Some(t) => recorder::pulse_slow(t, unsafe { &mut *site }, id, now),
            None => recorder::note_unavailable(),
        }
    })
}

/// The calling thread's counters. -EINVAL on NULL.
#[no_mangle]
pub extern "C" fn latte_thread_get_counters(out: *mut latte_thread_counters) -> c_int {
    guard(-libc::EIO, || put_out(out, || Ok(recorder::thread_counters())))
}

/// Process-wide counters of this process's region. -EINVAL on NULL.
#[no_mangle]
pub extern "C" fn latte_get_counters(out: *mut latte_counters) -> c_int {
    guard(-libc::EIO, || put_out(out, || Ok(recorder::region_if_any().map(|r| recorder::counters_of(r.header())).unwrap_or_default())))
}

/// Interns `id` by content and returns its stable token; LATTE_INVALID_ID
/// when the table is full (NULL interns `<null-id>`).
#[no_mangle]
pub extern "C" fn latte_intern_id(id: *const c_char) -> u32 {
    // SAFETY: the API takes NULL or a NUL-terminated string.
    guard(LATTE_INVALID_ID, || unsafe { recorder::intern_id(id) })
}

/// Writes the name of `token` into `buf` (NUL-terminated, truncated to
/// `len`); returns the name's length, or a negative code for an unknown token.
#[no_mangle]
pub extern "C" fn latte_id_name(token: u32, buf: *mut c_char, len: usize) -> c_int {
    guard(-libc::EIO, || {
        let v = match crate::reader::own_view() {
            Some(v) => v,
            None => return -libc::ENOENT,
        };
        match v.id_name(token) {
            // SAFETY: the caller gives a buffer of len bytes (or NULL).
            Ok(n) => unsafe { fill_str(crate::intern::name_bytes(&n), buf, len) },
            Err(_) => -libc::ENOENT,
        }
    })
}

// ----------------------------------------------------------- extraction ----

/// The durations (cycles) recorded under `id` on every thread: at most a
/// ring's capacity per thread, the newest. Writes them to `out` (capacity
/// `cap`) and their count to `*out_n`; -ERANGE (and the needed count) when
/// they do not fit. An unknown ID gives 0 samples.
#[no_mangle]
pub extern "C" fn latte_snapshot(id: *const c_char, out: *mut u64, cap: usize, out_n: *mut usize) -> c_int {
    guard(-libc::EIO, || {
        thread_local! {
            // Reused across calls: no large allocation (and no munmap, whose
            // TLB shootdown would interrupt the recording threads) per call.
            static SCRATCH: core::cell::RefCell<Vec<latte_raw_sample>> = const { core::cell::RefCell::new(Vec::new()) };
        }
        // After the thread's thread-locals were destroyed (an atexit
        // handler, a static destructor) a local buffer serves.
        let mut local = Vec::new();
        let fill_out = |raw: &mut Vec<latte_raw_sample>| {
            // SAFETY: NULL or a NUL-terminated string (API contract).
            if let Err(e) = unsafe { crate::reader::snapshot_into(id, raw) } {
                return e;
            }
            if !out_n.is_null() {
                // SAFETY: checked non-null; writable by contract.
                unsafe { *out_n = raw.len() };
            }
            if raw.len() > cap || (out.is_null() && !raw.is_empty()) {
                return -libc::ERANGE;
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
    guard(-libc::EIO, || {
        let mut all = Vec::new();
        if let Err(e) = crate::reader::extract_all(&mut all) {
            return e;
        }
        let recs: Vec<latte_sample_record> = all
            .iter()
            .map(|(token, r)| {
                let s = r.decode();
                latte_sample_record {
                    duration: s.duration,
                    start_tsc: s.start_tsc,
                    token: *token,
                    depth: s.depth as u8,
                    start_mode: s.start_mode as u8,
                    stop_mode: s.stop_mode as u8,
                    switched: s.switched as u8,
                }
            })
            .collect();
        // SAFETY: out is NULL or writable for cap records, out_n NULL or writable (API contract).
        unsafe { fill(&recs, out, cap, out_n) }
    })
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
pub extern "C" fn latte_epoch_tsc() -> u64 {
    guard(0, || {
        if recorder::REGISTRY.lock().region().is_err() {
            return 0;
        }
        crate::reader::own_view().map(|v| v.anchor_tsc).unwrap_or(0)
    })
}

/// The report table as a NUL-terminated string (free it with
/// `latte_string_free`); NULL on error. Calibrates first when `unit` is
/// TIME or `data` is CALIBRATED.
#[no_mangle]
pub extern "C" fn latte_report_string(unit: latte_unit, data: latte_data) -> *mut c_char {
    guard(core::ptr::null_mut(), || match crate::report::own_report(unit, data) {
        Ok(s) => std::ffi::CString::new(s).map(|c| c.into_raw()).unwrap_or(core::ptr::null_mut()),
        Err(_) => core::ptr::null_mut(),
    })
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
    guard(-libc::EIO, || {
        if path.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: checked non-null; a NUL-terminated string by contract.
        let p = unsafe { CStr::from_ptr(path) };
        use std::os::unix::ffi::OsStrExt;
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(p.to_bytes()));
        let cpn = crate::calibrate::cycles_per_ns();
        // This process's id (a fork child's region header still names its parent).
        code(crate::trace::write_file(p, crate::reader::own_view().as_ref(), std::process::id(), cpn))
    })
}

/// Formats nanoseconds the way reports do ("1.88 us"); writes at most `len`
/// bytes with a NUL; returns the full length.
#[no_mangle]
pub extern "C" fn latte_format_time(ns: f64, buf: *mut c_char, len: usize) -> c_int {
    // SAFETY: the caller gives a buffer of len bytes (or NULL).
    guard(-libc::EIO, || unsafe { fill_str(crate::report::format_time(ns).as_bytes(), buf, len) })
}

/// The outlier rule of reports on `n` values: writes the kept values sorted
/// into `out_values` (room for `n`), their count, the outlier count, and the
/// cutoff (`*out_has_cutoff` = 0 when there is none). NULL outputs are skipped.
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
    guard(-libc::EIO, || {
        if values.is_null() && n > 0 {
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

// ---------------------------------------------------------- calibration ----

/// Runs calibration once through the C ABI's own path (later calls return
/// at once). Returns 0 or a negative code.
#[no_mangle]
pub extern "C" fn latte_calibrate() -> c_int {
    guard(-libc::EIO, crate::calibrate::run_native)
}

/// For callers with their own inline path: 1 when the caller must now run
/// the calibration loops (empty spans under `latte.calibrate` for each of
/// the 9 mode pairs, then pulses) and call `latte_calibration_end`; 0 when
/// calibration is done (waits while another thread runs it).
#[no_mangle]
pub extern "C" fn latte_calibration_begin() -> c_int {
    guard(0, || crate::calibrate::begin() as c_int)
}

/// Ends a calibration begun on this thread: publishes the medians.
#[no_mangle]
pub extern "C" fn latte_calibration_end() -> c_int {
    guard(-libc::EIO, crate::calibrate::end)
}

/// Iterations per mode pair the calibration loops run.
#[no_mangle]
pub extern "C" fn latte_calibration_iterations() -> u32 {
    crate::calibrate::CALIBRATION_ITERS
}

/// The ID calibration records under.
#[no_mangle]
pub extern "C" fn latte_calibration_id() -> *const c_char {
    crate::calibrate::CALIBRATION_ID.as_ptr()
}

/// The calibrated overheads in cycles: `out9` gets [start][stop] for the 9
/// mode pairs, `out_pulse` the pulse. Zeros before calibration.
#[no_mangle]
pub extern "C" fn latte_calibration_overheads(out9: *mut f64, out_pulse: *mut f64) -> c_int {
    guard(-libc::EIO, || {
        let c = crate::calibrate::current();
        // SAFETY: outputs are NULL or writable (out9 for 9 elements).
        unsafe {
            if !out9.is_null() {
                core::ptr::copy_nonoverlapping(c.overhead.as_ptr(), out9, 9);
            }
            if !out_pulse.is_null() {
                *out_pulse = c.overhead[9];
            }
        }
        0
    })
}

/// TSC cycles per ns, kept once known: the ratio of the region's anchor
/// (a TSC and CLOCK_MONOTONIC_RAW pair taken when the region was made) to a
/// pair taken now. Within 120 ms of the region's creation the first call
/// sleeps until the anchor is 120 ms old (not for a measuring thread).
#[no_mangle]
pub extern "C" fn latte_cycles_per_ns() -> f64 {
    guard(0.0, crate::calibrate::cycles_per_ns)
}

/// Measures TSC cycles per ns anew over `window_ms` milliseconds against
/// CLOCK_MONOTONIC_RAW (what `LATTE_FREQ` does, with 120).
#[no_mangle]
pub extern "C" fn latte_measure_cycles_per_ns(window_ms: u32) -> f64 {
    guard(0.0, || crate::tsc::measure_cycles_per_ns(window_ms as u64))
}

/// The library's version, "MAJOR.MINOR.PATCH" (a static string; compare
/// with LATTE_VERSION_STRING, the version of the header compiled against).
#[no_mangle]
pub extern "C" fn latte_version() -> *const c_char {
    const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    guard(VERSION.as_ptr().cast(), || VERSION.as_ptr().cast())
}

/// Describes an error code (a static string; never NULL).
#[no_mangle]
pub extern "C" fn latte_strerror(code: c_int) -> *const c_char {
    describe(code).as_ptr()
}

// ----------------------------------------------------------- the region ----

/// Moves recording into a new POSIX shared-memory object `shm_name` (one
/// leading '/', no other) with the default capacities (128 slots of 65,536
/// samples, 256 IDs, mode 0600). Must precede the first recording: -EBUSY
/// after it, -EALREADY when a shared region is installed, -EEXIST when the
/// name is taken, -ENOSPC when /dev/shm cannot hold it.
#[no_mangle]
pub extern "C" fn latte_init_shared_region(shm_name: *const c_char) -> c_int {
    latte_init_shared_region_with(shm_name, core::ptr::null())
}

/// `latte_init_shared_region` with capacities and permissions (NULL or
/// zero fields take the defaults).
#[no_mangle]
pub extern "C" fn latte_init_shared_region_with(shm_name: *const c_char, config: *const latte_region_config) -> c_int {
    guard(-libc::EIO, || {
        if shm_name.is_null() {
            return -libc::EINVAL;
        }
        let cfg = if config.is_null() {
            latte_region_config { slot_capacity: 0, samples_per_slot: 0, id_capacity: 0, mode: 0, replace_stale: 0 }
        } else {
            // SAFETY: checked non-null; a valid config by contract.
            unsafe { *config }
        };
        // SAFETY: checked non-null; NUL-terminated by contract.
        let name = unsafe { CStr::from_ptr(shm_name) }.to_bytes();
        code(recorder::install_shared(name, &cfg))
    })
}

/// Starts writing the region to `fd` (a regular file open for writing,
/// without O_APPEND; the flush writes through its own duplicate, so the
/// caller may close `fd` at once) as a self-describing image,
/// asynchronously through io_uring, and returns at once; `unit` is recorded
/// as the preferred display unit. 0, or -EBADF (bad fd, or not open for
/// writing), -EINVAL (O_APPEND, or not a regular file), -ESPIPE (a pipe,
/// FIFO or socket), -EBUSY (a flush is pending), -ENOSYS/-EPERM
/// (io_uring unavailable), LATTE_ERR_NOT_SUPPORTED (built without the
/// `uring` feature: use `latte_flush_sync`).
#[no_mangle]
pub extern "C" fn latte_flush_async(fd: c_int, unit: latte_unit) -> c_int {
    guard(-libc::EIO, || crate::flush::flush_async(fd, unit))
}

/// Progress of the asynchronous flush, without blocking: LATTE_FLUSH_PENDING
/// while in flight, LATTE_FLUSH_IDLE when the last one finished (or none was
/// started), or the negative code it failed with (e.g. -ENOSPC). Each call
/// also moves the flush along (reaps completions, submits the next writes).
#[no_mangle]
pub extern "C" fn latte_poll_flush() -> c_int {
    guard(-libc::EIO, crate::flush::poll)
}

/// Cancels the pending asynchronous flush: 1 when one was pending (it
/// stops after the writes already in flight; `latte_poll_flush` then
/// returns -ECANCELED and the file holds no valid image), 0 when none was;
/// LATTE_ERR_NOT_SUPPORTED without the `uring` feature.
#[no_mangle]
pub extern "C" fn latte_flush_cancel() -> c_int {
    guard(-libc::EIO, crate::flush::cancel)
}

/// Bytes written and total of the current or last asynchronous flush.
#[no_mangle]
pub extern "C" fn latte_flush_get_status(out: *mut crate::flush::latte_flush_status) -> c_int {
    guard(-libc::EIO, || put_out(out, crate::flush::status))
}

/// Writes the same image as `latte_flush_async`, synchronously, with pwrite
/// on the calling thread (the fallback without io_uring). 0 or a code.
#[no_mangle]
pub extern "C" fn latte_flush_sync(fd: c_int, unit: latte_unit) -> c_int {
    guard(-libc::EIO, || code(crate::flush::flush_sync(fd, unit).map(|_| ())))
}

/// 1 when this build has the asynchronous (io_uring) flush, else 0.
#[no_mangle]
pub extern "C" fn latte_flush_supported() -> c_int {
    crate::flush::supported() as c_int
}

// ------------------------------------------------------------ the reader ----

/// A read-only view of a region opened by name or a flushed file.
#[allow(non_camel_case_types)]
pub struct latte_reader {
    map: Mapping,
    /// Pacing of `latte_reader_read` (ns; 0 = off). Relaxed: a setting read
    /// on its own, ordering nothing else.
    min_interval_ns: AtomicU64,
}

fn open_reader(r: Result<Mapping, i32>, out: *mut *mut latte_reader) -> c_int {
    match r {
        Ok(map) => {
            // SAFETY: out was checked non-null by the caller.
            unsafe { *out = Box::into_raw(Box::new(latte_reader { map, min_interval_ns: AtomicU64::new(LATTE_READER_MIN_INTERVAL_NS) })) };
            0
        }
        Err(e) => e,
    }
}

/// Opens the shared region `shm_name` read-only, validates it, and stores a
/// reader in `*out`. Errors: -ENOENT, -EACCES, LATTE_ERR_NOT_LATTE,
/// LATTE_ERR_VERSION, LATTE_ERR_TRUNCATED, LATTE_ERR_CORRUPT, -EINVAL.
#[no_mangle]
pub extern "C" fn latte_reader_open(shm_name: *const c_char, out: *mut *mut latte_reader) -> c_int {
    guard(-libc::EIO, || {
        if shm_name.is_null() || out.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: checked non-null; NUL-terminated by contract.
        let n = unsafe { CStr::from_ptr(shm_name) }.to_bytes();
        open_reader(Mapping::open_shm(n), out)
    })
}

/// Opens a flushed image (a file) read-only, like `latte_reader_open`.
#[no_mangle]
pub extern "C" fn latte_reader_open_file(path: *const c_char, out: *mut *mut latte_reader) -> c_int {
    guard(-libc::EIO, || {
        if path.is_null() || out.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: checked non-null; NUL-terminated by contract.
        let p = unsafe { CStr::from_ptr(path) };
        use std::os::unix::ffi::OsStrExt;
        open_reader(Mapping::open_file(std::path::Path::new(std::ffi::OsStr::from_bytes(p.to_bytes()))), out)
    })
}

/// Closes a reader (NULL is ignored).
#[no_mangle]
pub extern "C" fn latte_reader_close(r: *mut latte_reader) {
    guard((), || {
        if !r.is_null() {
            // SAFETY: r came from Box::into_raw in latte_reader_open*.
            drop(unsafe { Box::from_raw(r) });
        }
    })
}

fn with_reader<R>(r: *const latte_reader, fallback: R, f: impl FnOnce(&View) -> R) -> R {
    with_reader_and(r, fallback, |rd| f(&rd.map.view))
}

fn with_reader_and<R>(r: *const latte_reader, fallback: R, f: impl FnOnce(&latte_reader) -> R) -> R {
    if r.is_null() {
        return fallback;
    }
    // SAFETY: a reader from latte_reader_open*, not yet closed (contract).
    f(unsafe { &*r })
}

/// Sets how long (ns) `latte_reader_read` leaves a live slot alone after a
/// read through the same cursor returned every published sample
/// (LATTE_READER_MIN_INTERVAL_NS by default; 0 = look every time). Each
/// look at a slot's writer index takes its cache line from the recording
/// thread, which then waits for it at its next Stop; a reader polling back
/// to back would do that on nearly every sample. Returns 0 or -EINVAL.
#[no_mangle]
pub extern "C" fn latte_reader_set_min_interval(r: *mut latte_reader, ns: u64) -> c_int {
    guard(-libc::EIO, || {
        with_reader_and(r, -libc::EINVAL, |rd| {
            rd.min_interval_ns.store(ns, Ordering::Relaxed);
            0
        })
    })
}

/// Number of published IDs (tokens are 0 .. count-1); 0 for NULL.
#[no_mangle]
pub extern "C" fn latte_reader_id_count(r: *const latte_reader) -> u32 {
    guard(0, || with_reader(r, 0, |v| v.ids_used()))
}

/// Writes the name of `token` into `buf`; returns its length or a negative code.
#[no_mangle]
pub extern "C" fn latte_reader_id_name(r: *const latte_reader, token: u32, buf: *mut c_char, len: usize) -> c_int {
    guard(-libc::EIO, || {
        with_reader(r, -libc::EINVAL, |v| match v.id_name(token) {
            // SAFETY: the caller gives a buffer of len bytes (or NULL).
            Ok(n) => unsafe { fill_str(crate::intern::name_bytes(&n), buf, len) },
            Err(e) => e,
        })
    })
}

/// Whether ID `token` is reserved by latte itself (1) or a program's (0);
/// negative on error (-EINVAL for NULL or a token not below
/// `latte_reader_id_count`). Reserved IDs (`latte.calibrate`, the calibration's spans) are
/// left out of reports and traces; a raw reader sees their slots in
/// `latte_reader_slots` and tells them apart with this call.
#[no_mangle]
pub extern "C" fn latte_reader_id_is_reserved(r: *const latte_reader, token: u32) -> c_int {
    guard(-libc::EIO, || {
        with_reader(r, -libc::EINVAL, |v| match v.id_name(token) {
            _ if token >= v.ids_used() => -libc::EINVAL,
            Ok(n) => crate::calibrate::is_calibration_name(crate::intern::name_bytes(&n)) as c_int,
            Err(e) => e,
        })
    })
}

/// Lists the assigned slots into `out` (capacity `cap`), the count in
/// `*out_n`; -ERANGE when they do not fit.
#[no_mangle]
pub extern "C" fn latte_reader_slots(r: *const latte_reader, out: *mut latte_slot_info, cap: usize, out_n: *mut usize) -> c_int {
    guard(-libc::EIO, || {
        with_reader(r, -libc::EINVAL, |v| match v.slots() {
            // SAFETY: the caller gives a buffer of cap elements (or NULL).
            Ok(s) => unsafe { fill(&s, out, cap, out_n) },
            Err(e) => e,
        })
    })
}

/// Reads up to `cap` samples of slot `slot` newer than `*cursor` (start
/// with a zeroed cursor) into `out`, oldest first; `*out_n` gets the count.
/// The cursor advances and counts what was lost (overwritten before it
/// could be read). Never returns a torn or stale sample. Paced: after a
/// read that returned everything published in a live slot, reads through
/// that cursor within the reader's minimum interval return 0 samples
/// without looking (`latte_reader_set_min_interval`); a read cut short by
/// `cap` is followed at once.
#[no_mangle]
pub extern "C" fn latte_reader_read(
    r: *const latte_reader,
    slot: u32,
    cursor: *mut latte_cursor,
    out: *mut latte_raw_sample,
    cap: usize,
    out_n: *mut usize,
) -> c_int {
    guard(-libc::EIO, || {
        if cursor.is_null() || (out.is_null() && cap > 0) {
            return -libc::EINVAL;
        }
        with_reader_and(r, -libc::EINVAL, |rd| {
            let dst: &mut [core::mem::MaybeUninit<latte_raw_sample>] = if cap == 0 {
                &mut []
            } else {
                // SAFETY: out is writable for cap samples (contract; checked non-null).
                unsafe { core::slice::from_raw_parts_mut(out as *mut core::mem::MaybeUninit<latte_raw_sample>, cap) }
            };
            // SAFETY: cursor checked non-null, owned by the caller.
            let pace = rd.min_interval_ns.load(Ordering::Relaxed);
            match rd.map.view.read_into_paced(slot, unsafe { &mut *cursor }, dst, pace) {
                Ok(res) => {
                    if !out_n.is_null() {
                        // SAFETY: checked non-null.
                        unsafe { *out_n = res.read as usize };
                    }
                    0
                }
                Err(e) => e,
            }
        })
    })
}

/// The producer's process-wide counters.
#[no_mangle]
pub extern "C" fn latte_reader_counters(r: *const latte_reader, out: *mut latte_counters) -> c_int {
    guard(-libc::EIO, || with_reader(r, -libc::EINVAL, |v| put_out(out, || Ok(v.counters()))))
}

/// What a region's header describes (geometry, producer, anchors, calibration).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct latte_region_info {
    pub producer_pid: u32,
    pub flags: u32,
    pub id_capacity: u32,
    pub slot_capacity: u32,
    pub samples_per_slot: u32,
    pub display_unit: u32,
    pub total_size: u64,
    pub anchor_tsc: u64,
    pub anchor_realtime_ns: u64,
    /// 0 until measured.
    pub cycles_per_ns: f64,
    /// 1 once calibrated.
    pub calibrated: u32,
    pub _pad: u32,
    /// Overhead in cycles per [start mode][stop mode], then the pulse.
    pub overhead: [f64; 10],
}

/// Describes the region.
#[no_mangle]
pub extern "C" fn latte_reader_info(r: *const latte_reader, out: *mut latte_region_info) -> c_int {
    guard(-libc::EIO, || {
        with_reader(r, -libc::EINVAL, |v| {
            let c = v.calibration();
            let i = latte_region_info {
                producer_pid: v.producer_pid,
                flags: v.flags,
                id_capacity: v.geo.id_capacity,
                slot_capacity: v.geo.slot_capacity,
                samples_per_slot: v.geo.samples_per_slot,
                display_unit: v.display_unit(),
                total_size: v.geo.total_size,
                anchor_tsc: v.anchor_tsc,
                anchor_realtime_ns: v.anchor_realtime_ns,
                cycles_per_ns: c.cycles_per_ns,
                calibrated: c.calibrated as u32,
                _pad: 0,
                overhead: c.overhead,
            };
            put_out(out, || Ok(i))
        })
    })
}

/// Removes the shared-memory object `shm_name` (readers that have it open
/// keep their mapping).
#[no_mangle]
pub extern "C" fn latte_shm_unlink(shm_name: *const c_char) -> c_int {
    guard(-libc::EIO, || {
        if shm_name.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: checked non-null; NUL-terminated by contract.
        code(crate::reader::unlink_shm(unsafe { CStr::from_ptr(shm_name) }.to_bytes()))
    })
}
