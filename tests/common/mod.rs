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
    let mut raw = Vec::new();
    // SAFETY: a valid C string.
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

/// Runs `f` in a forked child and asserts it exits 0 (a child for what
/// changes the process for good: seccomp filters, credentials).
pub fn in_child(f: impl FnOnce() -> bool) {
    // SAFETY: the child runs `f` and leaves with _exit, without the harness.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(false);
        // SAFETY: leave the child at once.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
}

/// The `LATTE_SAMPLE_SWITCHED` bit of every sample recorded under `id` in
/// this process, in ring order.
pub fn flags_of(id: &std::ffi::CStr) -> Vec<bool> {
    use latte::internals::ffi::{latte_intern_id, latte_sample_record, latte_samples_extract};
    let token = latte_intern_id(id.as_ptr());
    // Other tests of this binary record meanwhile: ask again with the
    // count the last call gave until everything fits (-ERANGE until then).
    let mut n = 0usize;
    let _ = latte_samples_extract(core::ptr::null_mut(), 0, &mut n);
    let mut v = Vec::new();
    loop {
        v.resize(n + 4096, latte_sample_record::default());
        match latte_samples_extract(v.as_mut_ptr(), v.len(), &mut n) {
            0 => break,
            rc => assert_eq!(rc, -libc::ERANGE),
        }
    }
    v.truncate(n);
    v.iter().filter(|r| r.token == token).map(|r| r.switched != 0).collect()
}

/// A shared region's config: a first chunk of `first` rings of 64 samples
/// (small rings, so that many fit), defaults otherwise.
pub fn small_rings(first: u32) -> latte::internals::region::latte_region_config {
    latte::internals::region::latte_region_config { slot_capacity: first, samples_per_slot: 64, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 }
}

/// Starts an asynchronous flush into `fd` once a cancelled one's writes
/// have completed (-EBUSY until then: they must not land in the new
/// image), waiting for that at most 10 s.
pub fn start_flush_after_cancel(fd: i32) {
    let t0 = std::time::Instant::now();
    loop {
        match latte_flush_async(fd, LATTE_UNIT_CYCLE) {
            0 => break,
            rc => assert_eq!(rc, -libc::EBUSY),
        }
        assert!(t0.elapsed().as_secs() < 10, "the cancelled flush's writes never completed");
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// The calling thread's switch-outs as the kernel counts them: voluntary
/// + involuntary context switches (`getrusage(RUSAGE_THREAD)`).
pub fn kernel_switches() -> u64 {
    // SAFETY: all-zero is a valid `rusage`.
    let mut u: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: `u` is a valid out-pointer for the call's duration.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
    (u.ru_nvcsw + u.ru_nivcsw) as u64
}

/// Sleeps `us` microseconds, again until the kernel has counted a
/// switch-out of this thread. A sleep need not switch: when the vCPU stalls
/// between the kernel arming the timer and blocking, the timer has fired and
/// the thread returns without leaving the CPU. Tests that expect a sleep to
/// flag a sample or to show in a diff sleep with this.
pub fn sleep_switched(us: u32) {
    loop {
        let k = kernel_switches();
        // SAFETY: no memory effects.
        unsafe { libc::usleep(us) };
        if kernel_switches() > k {
            return;
        }
    }
}
