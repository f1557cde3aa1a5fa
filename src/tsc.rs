//! Reading the time-stamp counter in the three modes, and the clocks it is
//! compared against.

#[cfg(not(target_arch = "x86_64"))]
compile_error!("latte reads the x86-64 time-stamp counter; other targets are not supported");

use crate::layout::{latte_mode, LATTE_MODE_HARD, LATTE_MODE_MID};
use core::arch::x86_64::{__rdtscp, _mm_lfence, _rdtsc};

/// `rdtsc`.
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no memory effects; every x86-64 CPU has it.
    unsafe { _rdtsc() }
}

/// `rdtscp` (waits for earlier instructions to finish).
#[inline(always)]
pub fn rdtscp() -> u64 {
    let mut aux = 0u32;
    // SAFETY: writes only `aux`, a valid local; rdtscp is checked at startup
    // by `cpu_supported` and present on every CPU this library targets.
    unsafe { __rdtscp(&mut aux) }
}

/// `lfence`.
#[inline(always)]
pub fn lfence() {
    // SAFETY: a serialising fence, no memory effects beyond ordering.
    unsafe { _mm_lfence() }
}

/// The TSC read at the start of a span in `mode`.
#[inline(always)]
pub fn read_start(mode: latte_mode) -> u64 {
    match mode {
        LATTE_MODE_MID => rdtscp(),
        LATTE_MODE_HARD => {
            lfence();
            rdtscp()
        }
        _ => rdtsc(),
    }
}

/// The TSC read at the stop of a span in `mode`.
#[inline(always)]
pub fn read_stop(mode: latte_mode) -> u64 {
    match mode {
        LATTE_MODE_MID => rdtscp(),
        LATTE_MODE_HARD => {
            let t = rdtscp();
            lfence();
            t
        }
        _ => rdtsc(),
    }
}

/// The mode as it is recorded: unknown values count as FAST.
#[inline(always)]
pub fn normalize_mode(mode: latte_mode) -> latte_mode {
    if mode == LATTE_MODE_MID || mode == LATTE_MODE_HARD {
        mode
    } else {
        0
    }
}

/// Reads a clock in nanoseconds.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A TSC reading and the CLOCK_MONOTONIC_RAW time (ns) it was taken at:
/// the clock is read before and after the TSC, and the pair whose two clock
/// readings lie closest together (of three tries) is kept, with the TSC
/// placed at their midpoint. Two such pairs taken far enough apart give
/// cycles per ns (`cycles_per_ns_between`) without spinning through a
/// window. Costs three clock reads (vDSO, no syscall on a TSC clocksource).
pub fn anchor_pair() -> (u64, u64) {
    let mut best = (0u64, 0u64, u64::MAX);
    for _ in 0..3 {
        let c0 = clock_ns(libc::CLOCK_MONOTONIC_RAW);
        let t = rdtscp();
        let c1 = clock_ns(libc::CLOCK_MONOTONIC_RAW);
        let gap = c1.saturating_sub(c0);
        if gap < best.2 {
            best = (t, c0 + gap / 2, gap);
        }
    }
    (best.0, best.1)
}

/// Cycles per ns between two `anchor_pair` readings; None when the clock
/// did not advance or the TSC went backwards.
pub fn cycles_per_ns_between(a: (u64, u64), b: (u64, u64)) -> Option<f64> {
    let cycles = b.0.checked_sub(a.0)?;
    let ns = b.1.checked_sub(a.1)?;
    if ns == 0 || cycles == 0 {
        return None;
    }
    Some(cycles as f64 / ns as f64)
}

/// Calls of `measure_cycles_per_ns` and waits in `calibrate::cycles_per_ns`
/// so far in this process: how a test sees that a call did not stall.
pub static STALLS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Measures TSC cycles per nanosecond against CLOCK_MONOTONIC_RAW over about
/// `window_ms` milliseconds (LATTE_FREQ uses 120 ms). Spins on the caller for
/// the whole window.
pub fn measure_cycles_per_ns(window_ms: u64) -> f64 {
    // Relaxed: a counter for tests, ordered with nothing.
    STALLS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    let window = window_ms.max(1) * 1_000_000;
    let t0 = clock_ns(libc::CLOCK_MONOTONIC_RAW);
    let c0 = rdtscp();
    let mut t1;
    loop {
        t1 = clock_ns(libc::CLOCK_MONOTONIC_RAW);
        if t1 - t0 >= window {
            break;
        }
        std::hint::spin_loop();
    }
    let c1 = rdtscp();
    (c1.wrapping_sub(c0)) as f64 / (t1 - t0) as f64
}

/// The OS thread id of the calling thread.
pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_a_monotonic_counter() {
        for m in 0..4 {
            let a = read_start(m);
            let b = read_stop(m);
            assert!(b >= a);
        }
        assert_eq!(normalize_mode(7), 0);
        assert_eq!(normalize_mode(2), 2);
    }

    #[test]
    fn anchors_agree_with_a_measurement() {
        let a = anchor_pair();
        let f = measure_cycles_per_ns(30);
        let g = cycles_per_ns_between(a, anchor_pair()).unwrap();
        assert!((g / f - 1.0).abs() < 0.01, "anchors {g} measured {f}");
        assert_eq!(cycles_per_ns_between(a, a), None);
    }

    #[test]
    fn frequency_is_plausible() {
        let f = measure_cycles_per_ns(20);
        assert!(f > 0.1 && f < 10.0, "cycles per ns {f}");
    }
}
