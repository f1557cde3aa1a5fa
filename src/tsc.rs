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

/// Measures TSC cycles per nanosecond against CLOCK_MONOTONIC_RAW over about
/// `window_ms` milliseconds (the old LATTE_FREQ used 120 ms).
pub fn measure_cycles_per_ns(window_ms: u64) -> f64 {
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
    fn frequency_is_plausible() {
        let f = measure_cycles_per_ns(20);
        assert!(f > 0.1 && f < 10.0, "cycles per ns {f}");
    }
}
