//! Calibration: cycles per ns, and the self-overhead of every (start mode,
//! stop mode) pair and of a pulse, measured on the path callers use.
//!
//! The overhead of a pair is the median duration of an empty span recorded
//! with that pair: exactly what the measurement adds to every span. The
//! loops record under the reserved ID `latte.calibrate`, into a ring of
//! their own outside the region (`recorder::calring`): they take no slot
//! and no ID of the program's and touch none of its counters. A caller that has its own inline path (the
//! C++ veneer) runs the loops itself between `begin` and `end`, so the
//! figures are those of its path; `run_native` runs them through Rust's.

use crate::error::Error;
use crate::layout::*;
use crate::recorder::{self, REGISTRY};

use core::ffi::c_char;
use core::sync::atomic::Ordering;

pub(crate) use crate::name::CALIBRATION_ID;

/// Empty spans per (start, stop) pair, and pulses, at most.
pub(crate) const CALIBRATION_ITERS: u32 = 5000;

/// Fewest empty spans per (start, stop) pair, and pulses, whose median is
/// kept as a self-offset: rings of fewer than `LATTE_OVERHEADS` times this,
/// plus one, samples (251: rings of 256 samples calibrate) leave the region
/// uncalibrated (-ENOBUFS, before any loop runs), rather than publish the
/// median of a few cold calls.
pub(crate) const CALIBRATION_MIN_ITERS: u32 = 25;

/// Empty spans per (start, stop) pair, and pulses: [`CALIBRATION_ITERS`], or
/// fewer so that the [`LATTE_OVERHEADS`] runs fit the calibration ring (the
/// region's ring size) whole and every pair keeps its own samples.
pub fn iterations() -> u32 {
    let cap = recorder::region_if_any().map(|r| r.geometry().samples_per_slot).unwrap_or(u32::MAX);
    CALIBRATION_ITERS.min((cap.saturating_sub(1)) / LATTE_OVERHEADS).max(1)
}

/// Milliseconds a measurement of cycles per ns runs over where the region
/// gives no anchor to divide by (what `LATTE_FREQ` of
/// `cpp_compat/Latte.hpp` measures over).
pub const LATTE_FREQ_WINDOW_MS: u32 = 120;

/// How old the region's anchor must be for the ratio of the anchor to a
/// (TSC, clock) pair taken now to be kept as the region's cycles per ns: the
/// window of a measurement ([`LATTE_FREQ_WINDOW_MS`]), so the kept figure is
/// at least as exact as that measurement (each pair is exact to a clock
/// read, tens of ns).
pub(crate) const ANCHOR_WINDOW_NS: u64 = LATTE_FREQ_WINDOW_MS as u64 * 1_000_000;

/// Cycles per ns from the region's anchor and a pair taken now, with the
/// time between them in ns; None without an anchor.
fn from_anchor(h: &latte_region_header) -> Option<(f64, u64)> {
    if h.anchor_monotonic_ns == 0 {
        return None;
    }
    let a = (h.anchor_tsc, h.anchor_monotonic_ns);
    let now = crate::tsc::anchor_pair();
    let f = crate::tsc::cycles_per_ns_between(a, now)?;
    Some((f, now.1 - a.1))
}

/// Cycles per ns without waiting, for calls a service makes while it
/// measures (the flush): the region's figure when known; else the ratio of
/// the region's anchor to a (TSC, clock) pair taken now, kept as the
/// region's figure once the anchor is `ANCHOR_WINDOW_NS` old (younger, it is
/// returned without being stored: exact to about 1e-4 after a millisecond). 0.0 when
/// neither exists. Three clock reads; no window, no sleep.
pub fn cycles_per_ns_now() -> f64 {
    let region = match REGISTRY.lock().region() {
        Ok(r) => r,
        Err(_) => return 0.0,
    };
    let h = region.header();
    let v = load_f64(&h.cycles_per_ns_bits);
    if v > 0.0 {
        return v;
    }
    match from_anchor(h) {
        Some((f, elapsed)) => {
            if elapsed >= ANCHOR_WINDOW_NS {
                store_f64(&h.cycles_per_ns_bits, f);
            }
            f
        }
        None => 0.0,
    }
}

/// The region's cycles per ns, kept once known. The first call within
/// `ANCHOR_WINDOW_NS` of the region's creation sleeps until the anchor is
/// that old (at most [`LATTE_FREQ_WINDOW_MS`], once per process); later calls take a (TSC,
/// clock) pair and divide. Used where a caller asks for exact figures and
/// is not measuring (the report, calibration, the trace, `latte_tsc_cycles_per_ns`);
/// the flush uses `cycles_per_ns_now`, which never waits.
pub fn cycles_per_ns() -> f64 {
    let region = match REGISTRY.lock().region() {
        Ok(r) => r,
        Err(_) => return crate::tsc::measure_cycles_per_ns(LATTE_FREQ_WINDOW_MS as u64),
    };
    let h = region.header();
    let v = load_f64(&h.cycles_per_ns_bits);
    if v > 0.0 {
        return v;
    }
    let f = match from_anchor(h) {
        Some((f, elapsed)) if elapsed >= ANCHOR_WINDOW_NS => f,
        Some((_, elapsed)) => {
            // Relaxed: a counter for tests, ordered with nothing.
            crate::tsc::STALLS.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_nanos(ANCHOR_WINDOW_NS - elapsed));
            match from_anchor(h) {
                Some((f, _)) => f,
                None => crate::tsc::measure_cycles_per_ns(LATTE_FREQ_WINDOW_MS as u64),
            }
        }
        None => crate::tsc::measure_cycles_per_ns(LATTE_FREQ_WINDOW_MS as u64),
    };
    store_f64(&h.cycles_per_ns_bits, f);
    f
}

/// Whether the region's rings are too small to calibrate
/// ([`CALIBRATION_MIN_ITERS`]).
fn too_small() -> bool {
    iterations() < CALIBRATION_MIN_ITERS
}

/// Starts calibration: true when the caller must now run the loops and
/// call `end`; false when calibration is done (if another thread is running
/// it, waits for it first) or cannot run (no region; rings too small).
pub fn begin() -> bool {
    let region = match REGISTRY.lock().region() {
        Ok(r) => r,
        Err(_) => return false,
    };
    if too_small() {
        return false;
    }
    let st = &region.header().calibration_state;
    loop {
        // AcqRel on success: we own the run; Acquire on failure: if done,
        // the published figures are visible.
        match st.compare_exchange(LATTE_CALIBRATION_NONE, LATTE_CALIBRATION_RUNNING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                recorder::calring::reset();
                return true;
            }
            Err(LATTE_CALIBRATION_DONE) => return false,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}

/// Ends calibration started by `begin` on this thread: computes the medians
/// of the calibration samples this thread recorded and publishes them. On
/// error nothing is published: the region stays uncalibrated (reports say
/// so), and a later `begin` may try again.
pub fn end() -> Result<(), Error> {
    let region = recorder::region_if_any().ok_or(Error::INVAL)?;
    let h = region.header();
    cycles_per_ns();
    let rc = compute();
    match rc {
        Ok(o) => {
            for (k, v) in o.iter().enumerate().take(LATTE_MODE_PAIRS as usize) {
                store_f64(&h.overhead_bits[k], *v);
            }
            store_f64(&h.pulse_overhead_bits, o[LATTE_MODE_PAIRS as usize]);
            // Release: the figures above are visible to whoever sees "done".
            h.calibration_state.store(LATTE_CALIBRATION_DONE, Ordering::Release);
            Ok(())
        }
        Err(e) => {
            // Release: pairs with begin's acquire (nothing was published).
            h.calibration_state.store(LATTE_CALIBRATION_NONE, Ordering::Release);
            Err(e)
        }
    }
}

fn compute() -> Result<[f64; LATTE_OVERHEADS as usize], Error> {
    let region = recorder::region_if_any().ok_or(Error::Os(libc::EINVAL))?;
    if too_small() {
        return Err(Error::Os(libc::ENOBUFS));
    }
    let raw = recorder::calring::samples(region.geometry().samples_per_slot);
    if raw.is_empty() {
        return Err(Error::Os(libc::EINVAL));
    }
    let mut by_pair: [Vec<f64>; LATTE_OVERHEADS as usize] = Default::default();
    for &(start_tsc, packed) in &raw {
        let s = crate::reader::latte_raw_sample { start_tsc, packed }.decode();
        by_pair[s.pair_index()].push(s.duration as f64);
    }
    let mut out = [0.0; LATTE_OVERHEADS as usize];
    for (k, v) in by_pair.iter_mut().enumerate() {
        v.sort_by(|a, b| a.total_cmp(b));
        out[k] = crate::stats::median(v);
    }
    Ok(out)
}

/// Calibrates through Rust's own recording path (the C ABI's `latte_start`/`latte_stop`).
pub fn run_native() -> Result<(), Error> {
    if !begin() {
        return if too_small() { Err(Error::Os(libc::ENOBUFS)) } else { Ok(()) };
    }
    let t = recorder::current();
    if !t.is_null() {
        // SAFETY: the calling thread's own state.
        let t = unsafe { &mut *t };
        let id: *const c_char = CALIBRATION_ID.as_ptr();
        let n = iterations();
        for s in 0..LATTE_TIMED_MODES {
            for e in 0..LATTE_TIMED_MODES {
                for _ in 0..n {
                    // SAFETY: a static NUL-terminated string.
                    unsafe { recorder::start(t, id, s) };
                    recorder::stop(t, e);
                }
            }
        }
        let mut site = latte_pulse_site::new();
        for _ in 0..=n {
            // SAFETY: a static NUL-terminated string.
            unsafe { recorder::pulse(t, &mut site, id) };
        }
    }
    end()
}

/// The calibration of the own region (zeros until calibrated).
pub fn current() -> crate::reader::Calibration {
    crate::extract::own_view().map(|v| v.calibration()).unwrap_or_default()
}
