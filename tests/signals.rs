//! Recording from a signal handler. A handler's spans, interleaved at any
//! instruction with the interrupted thread's Start and Stop, leave that
//! thread's span stack intact (every sample keeps its ring, depth and
//! modes); a handler that interrupts latte's own slow path on its thread
//! (which holds the registry lock) is refused and counted, never deadlocks.

use latte::internals::ffi::*;
use latte::layout::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

static HANDLER_SPANS: AtomicU64 = AtomicU64::new(0);
static FRESH: AtomicU64 = AtomicU64::new(0);

/// 200,000 copies of one name at distinct addresses: each pointer is new
/// to latte, so its first Start takes the slow path (the registry lock).
static mut NAMES: [[u8; 16]; 200_000] = [[0; 16]; 200_000];

fn fresh_name() -> *const core::ffi::c_char {
    let i = FRESH.fetch_add(1, Ordering::Relaxed) as usize % 200_000;
    // SAFETY: filled before any use (`fill_names`), never written after.
    unsafe { core::ptr::addr_of!(NAMES[i]) as *const core::ffi::c_char }
}

fn fill_names() {
    // SAFETY: single-threaded set-up, before the threads start: no other
    // reference to NAMES exists.
    let names = unsafe { &mut *core::ptr::addr_of_mut!(NAMES) };
    for n in names.iter_mut() {
        n[..9].copy_from_slice(c"sig.slow".to_bytes_with_nul());
    }
}

extern "C" fn on_usr1(_: libc::c_int) {
    latte_start(c"sig.handler".as_ptr(), LATTE_MODE_FAST);
    latte_stop(core::ptr::null(), LATTE_MODE_FAST);
    HANDLER_SPANS.fetch_add(1, Ordering::Relaxed);
}

extern "C" fn on_usr2(_: libc::c_int) {
    latte_start(fresh_name(), LATTE_MODE_FAST);
    latte_stop(core::ptr::null(), LATTE_MODE_FAST);
    HANDLER_SPANS.fetch_add(1, Ordering::Relaxed);
}

fn handle(sig: libc::c_int, f: extern "C" fn(libc::c_int)) {
    // SAFETY: a valid handler for a plain signal.
    unsafe {
        let mut act: libc::sigaction = core::mem::zeroed();
        act.sa_sigaction = f as *const () as usize;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(sig, &act, core::ptr::null_mut());
    }
}

/// Runs `warm` then `work` on a thread that another thread sends `sig` to,
/// back to back, from the end of `warm` until `work` returns.
fn under_signals(sig: libc::c_int, warm: impl FnOnce() + Send, work: impl FnOnce() + Send) {
    let done = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let done = &done;
        let w = s.spawn(move || {
            warm();
            // SAFETY: the calling thread's own handle.
            tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
            work();
            done.store(true, Ordering::Relaxed);
        });
        let target = rx.recv().unwrap() as libc::pthread_t;
        while !done.load(Ordering::Relaxed) {
            // SAFETY: the worker is alive until `done` (joined after this loop).
            unsafe { libc::pthread_kill(target, sig) };
            std::thread::sleep(Duration::from_micros(20));
        }
        w.join().unwrap();
    });
}

fn samples(id: &core::ffi::CStr) -> Vec<Sample> {
    let mut raw = Vec::new();
    // SAFETY: a valid C string.
    unsafe { latte::internals::extract::snapshot_into(id.as_ptr(), &mut raw) }.unwrap();
    raw.iter().map(|r| r.decode()).collect()
}

#[test]
fn handler_spans_leave_the_interrupted_stack_intact() {
    handle(libc::SIGUSR1, on_usr1);
    let warm = || {
        // Every ID resolved on this thread before the signals: the spans
        // below and the handler's take the fast path only.
        on_usr1(0);
        latte_start(c"sig.outer".as_ptr(), LATTE_MODE_HARD);
        latte_start(c"sig.inner".as_ptr(), LATTE_MODE_MID);
        latte_stop(core::ptr::null(), LATTE_MODE_MID);
        latte_stop(core::ptr::null(), LATTE_MODE_HARD);
    };
    let mut n = 0u64;
    under_signals(libc::SIGUSR1, warm, || {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(1) || HANDLER_SPANS.load(Ordering::Relaxed) < 2000 {
            for _ in 0..100 {
                latte_start(c"sig.outer".as_ptr(), LATTE_MODE_HARD);
                latte_start(c"sig.inner".as_ptr(), LATTE_MODE_MID);
                latte_stop(core::ptr::null(), LATTE_MODE_MID);
                latte_stop(core::ptr::null(), LATTE_MODE_HARD);
            }
            n += 100;
            assert!(t0.elapsed() < Duration::from_secs(8), "too few signals arrived");
        }
    });
    let (outer, inner, handler) = (samples(c"sig.outer"), samples(c"sig.inner"), samples(c"sig.handler"));
    eprintln!("handler spans {}", HANDLER_SPANS.load(Ordering::Relaxed));
    let kept = (n as usize + 1).min(65536);
    assert_eq!(outer.len(), kept);
    assert_eq!(inner.len(), kept);
    let bad_outer = outer.iter().filter(|s| (s.depth, s.start_mode, s.stop_mode) != (0, LATTE_MODE_HARD, LATTE_MODE_HARD)).count();
    let bad_inner = inner.iter().filter(|s| (s.depth, s.start_mode, s.stop_mode) != (1, LATTE_MODE_MID, LATTE_MODE_MID)).count();
    let bad_handler = handler.iter().filter(|s| s.depth > 2 || (s.start_mode, s.stop_mode) != (LATTE_MODE_FAST, LATTE_MODE_FAST)).count();
    assert_eq!((bad_outer, bad_inner, bad_handler), (0, 0, 0), "samples with wrong depth or modes (outer, inner, handler)");
}

#[test]
fn a_handler_interrupting_a_slow_path_is_refused_not_deadlocked() {
    fill_names();
    // In a child, under an alarm: a deadlock must fail the test, not hang it.
    // SAFETY: fork; the child runs the scenario and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: plain calls in the child.
        unsafe { libc::alarm(8) };
        handle(libc::SIGUSR2, on_usr2);
        let t0 = Instant::now();
        under_signals(
            libc::SIGUSR2,
            || {},
            || {
                while t0.elapsed() < Duration::from_secs(2) {
                    for _ in 0..1000 {
                        latte_start(fresh_name(), LATTE_MODE_FAST);
                        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                    }
                }
            },
        );
        let mut c = latte::counters::latte_counters::default();
        latte_region_get_counters(&mut c);
        eprintln!("handler spans {}, refused in a slow path {}", HANDLER_SPANS.load(Ordering::Relaxed), c.reentrant_drops);
        // SAFETY: leave the child.
        unsafe { libc::_exit(0) };
    }
    let mut st = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st), "the child hung (killed by signal {})", libc::WTERMSIG(st));
    assert_eq!(libc::WEXITSTATUS(st), 0);
}
