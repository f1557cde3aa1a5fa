//! Switch tracking (`crate::sched`): enable, release, status, counters,
//! points, their diff and its one-line form.

// Entry points for C: their pointers are the caller's by the contract each
// states, checked for NULL, not `unsafe fn`s a C caller could not tell apart.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::*;
use crate::sched::{self, latte_sched_counters, latte_sched_delta, latte_sched_point};
use core::ffi::{c_char, c_int};

/// Turns switch tracking on for this process and opens the calling thread's
/// perf switch event now (again, if it was refused before). Every other
/// thread opens its own in its next slow path (its first Start of an ID, or
/// `latte_sched_snap`): one `perf_event_open` and one `mmap` on that
/// thread. Returns 0, or the negative errno the kernel gave for the calling
/// thread (-EACCES: `perf_event_paranoid` too strict; -ENOSYS or -EPERM:
/// seccomp or the user's perf memory budget; -EMFILE): recording goes on
/// exactly as without tracking. `LATTE_SCHED=1` in the environment turns
/// tracking on without opening anything until a thread's slow path.
#[no_mangle]
pub extern "C" fn latte_sched_enable() -> c_int {
    guard(PANICKED, || {
        let r = sched::enable();
        if r.is_ok() {
            if let Some(region) = crate::recorder::region_if_any() {
                region.mark_switches_tracked();
            }
        }
        code(r)
    })
}

/// Stops tracking the calling thread: releases its perf event and mapping
/// (its samples are no longer flagged; a span open across the call may be
/// flagged) and leaves it alone until it calls `latte_sched_enable` again.
/// Other threads keep theirs. 0, or -EBUSY (called from a signal handler
/// that interrupted latte on this thread).
#[no_mangle]
pub extern "C" fn latte_sched_release() -> c_int {
    guard(PANICKED, || code(sched::release()))
}

/// The calling thread's tracking: LATTE_SCHED_ON (1), LATTE_SCHED_OFF (0:
/// not enabled in this process), LATTE_SCHED_PENDING (2: enabled, this
/// thread has not opened its event yet), LATTE_SCHED_RELEASED (3: it called
/// `latte_sched_release`), or the negative errno its event was refused with.
#[no_mangle]
pub extern "C" fn latte_sched_status() -> c_int {
    guard(PANICKED, sched::status)
}

/// The process's tracking counters: threads tracked now, events opened,
/// refusals by errno. -EINVAL on NULL.
#[no_mangle]
pub extern "C" fn latte_sched_get_counters(out: *mut latte_sched_counters) -> c_int {
    guard(PANICKED, || put_out(out, || Ok(sched::counters())))
}

/// A point of the calling thread: its switch ring's head, the TSC,
/// CLOCK_MONOTONIC and the CPU. No syscall once the thread's event is open
/// (about as costly as two clock reads). Errors: LATTE_ERR_SCHED_OFF, the
/// thread's refusal (negative errno), -EINVAL on NULL.
#[no_mangle]
pub extern "C" fn latte_sched_snap(out: *mut latte_sched_point) -> c_int {
    guard(PANICKED, || put_out(out, sched::snap))
}

/// Where the calling thread's time went between two of its points
/// (`before` first): wall, on-CPU and off-CPU time, the off-CPU time split
/// into preempted (runnable) and blocked (sleeping, waiting), switch-outs,
/// CPUs and migrations. Reads the thread's switch records, no syscall.
/// Returns 0; LATTE_ERR_SCHED_LOST when records of the interval were
/// overwritten in the ring (more switches than it holds): `*out` then has
/// `lost` = 1 and only the wall time, cycles and CPUs; -EINVAL for NULL,
/// points out of order, or points of another thread's ring.
#[no_mangle]
pub extern "C" fn latte_sched_diff(before: *const latte_sched_point, after: *const latte_sched_point, out: *mut latte_sched_delta) -> c_int {
    guard(PANICKED, || {
        if before.is_null() || after.is_null() || out.is_null() {
            return Error::INVAL.code();
        }
        // SAFETY: checked non-null; valid points by contract (plain data).
        let (a, b) = unsafe { (*before, *after) };
        let (rc, d) = match sched::diff(&a, &b) {
            Ok(d) => (0, d),
            Err((e, d)) => (e.code(), d),
        };
        if rc == 0 || rc == Error::SchedLost.code() {
            // SAFETY: checked non-null; writable by contract.
            unsafe { out.write(d) };
        }
        rc
    })
}

/// A delta on one line ("wall 1.20 ms = on-CPU 150.00 us + off-CPU 1.05 ms
/// (preempted 0.00 ns, blocked 1.05 ms); 1 switch-out (0 preempted); 1 CPU,
/// 0 migrations"), NUL-terminated in `buf`. `*out_n` gets its length
/// without the NUL; -ERANGE (nothing written) when `cap` is not more than
/// that; -EINVAL when `d` or `out_n` is NULL, or `buf` is with `cap` over 0.
#[no_mangle]
pub extern "C" fn latte_sched_format(d: *const latte_sched_delta, buf: *mut c_char, cap: usize, out_n: *mut usize) -> c_int {
    guard(PANICKED, || {
        if d.is_null() || out_n.is_null() || (buf.is_null() && cap > 0) {
            return Error::INVAL.code();
        }
        // SAFETY: checked non-null; a delta by contract (plain data).
        let s = delta_line(unsafe { &*d });
        // SAFETY: checked non-null; writable by contract.
        unsafe { *out_n = s.len() };
        if buf.is_null() || cap <= s.len() {
            return Error::RANGE.code();
        }
        // SAFETY: buf is writable for cap > s.len() bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, s.len());
            *buf.add(s.len()) = 0;
        }
        0
    })
}

/// A delta on one line (what `latte_sched_format` writes).
pub fn delta_line(d: &latte_sched_delta) -> String {
    use crate::report::format_time as t;
    let plural = |n: u32, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    if d.lost != 0 {
        return format!(
            "wall {}: switch records lost (more switches than the ring holds, or read too late): no split; CPU {} -> {}",
            t(d.wall_ns as f64),
            d.first_cpu,
            d.last_cpu
        );
    }
    format!(
        "wall {} = on-CPU {} + off-CPU {} (preempted {}, blocked {}); {} ({} preempted); {}, {}",
        t(d.wall_ns as f64),
        t(d.on_cpu_ns as f64),
        t(d.off_cpu_ns as f64),
        t(d.preempted_ns as f64),
        t(d.blocked_ns as f64),
        plural(d.switch_outs, "switch-out", "switch-outs"),
        d.preemptions,
        plural(d.cpus, "CPU", "CPUs"),
        plural(d.migrations, "migration", "migrations"),
    )
}
