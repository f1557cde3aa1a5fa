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
            // The sender may find `done` still false and send once more:
            // blocked now, so that no handler runs during the thread's
            // teardown, where latte has retired its state (its spans would
            // be counted as late drops, not recorded).
            // SAFETY: an all-zero sigset_t is valid before sigemptyset; plain calls on this thread's mask.
            unsafe {
                let mut set: libc::sigset_t = core::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, core::ptr::null_mut());
            }
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

/// Runs `scenario` in a forked child under an alarm of `alarm_s` seconds:
/// a crash, a hang, a panic or a false result fails the calling test (with
/// the child's signal, or `what`) and never ends the test binary.
fn in_child(alarm_s: u32, what: &str, scenario: impl FnOnce() -> bool) {
    // SAFETY: fork; the child runs the scenario and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: plain calls in the child.
        unsafe { libc::alarm(alarm_s) };
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(scenario)).unwrap_or(false);
        // SAFETY: leave the child.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut st = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st), "the child died of signal {} (14, SIGALRM: it hung)", libc::WTERMSIG(st));
    assert_eq!(libc::WEXITSTATUS(st), 0, "{what} (see the child's output)");
}

/// Says `msg` on standard error from a forked child (whose Rust-side
/// output capture is a copy the test harness never prints).
fn child_says(msg: &str) {
    // SAFETY: writes a valid buffer to fd 2.
    unsafe { libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len()) };
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
    in_child(8, "the scenario failed", || {
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
        child_says(&format!("handler spans {}, refused in a slow path {}\n", HANDLER_SPANS.load(Ordering::Relaxed), c.reentrant_drops));
        true
    });
}

/// Names of the round-robin below: more than the per-thread ID cache
/// keeps, so that every Start of it misses the cache and inserts its ID
/// (emptying the cache every 512 inserts).
const ROUND_IDS: usize = 2000;
static ROUND: Names = Names::new();
/// The index of the name the worker is starting, for the handler.
static CURRENT: AtomicU64 = AtomicU64::new(u64::MAX);
static HANDLER_BY_ID: [AtomicU64; ROUND_IDS] = [const { AtomicU64::new(0) }; ROUND_IDS];

/// Names `prefix.0`, `prefix.1`, ..., made once and kept for the process,
/// so that their addresses stay put; read by signal handlers once filled
/// (`OnceLock::get` is a load).
struct Names(std::sync::OnceLock<Vec<std::ffi::CString>>);

impl Names {
    const fn new() -> Names {
        Names(std::sync::OnceLock::new())
    }

    fn fill(&self, prefix: &str, n: usize) {
        self.0.get_or_init(|| (0..n).map(|i| std::ffi::CString::new(format!("{prefix}.{i}")).unwrap()).collect());
    }

    fn at(&self, i: usize) -> *const core::ffi::c_char {
        self.0.get().expect("names filled before use")[i].as_ptr()
    }

    /// One Fast span under each of the first `n` names, in order.
    fn span_each(&self, n: usize) {
        for i in 0..n {
            latte_start(self.at(i), LATTE_MODE_FAST);
            latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        }
    }
}

/// A span under the ID the worker is starting at that moment, often while
/// its Start is putting that ID in the cache.
extern "C" fn on_usr1_same_id(_: libc::c_int) {
    let i = CURRENT.load(Ordering::Relaxed) as usize;
    if i < ROUND_IDS {
        latte_start(ROUND.at(i), LATTE_MODE_FAST);
        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        HANDLER_BY_ID[i].fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_handler_using_the_id_being_cached_records_under_it() {
    ROUND.fill("sig.rr", ROUND_IDS);
    // In a child: a handler that took a ring from a half-written cache
    // entry writes through a stale or null ring, which must fail the test
    // with its signal rather than end the test binary.
    in_child(30, "samples recorded under another ID, lost, or too few handler spans", || {
        handle(libc::SIGUSR1, on_usr1_same_id);
        let mut mine = vec![0u64; ROUND_IDS];
        let warm = || {
            // Every name interned and given its ring on this thread first:
            // the Starts below find them in the thread's second level, with
            // no lock, and insert them in the cache.
            ROUND.span_each(ROUND_IDS);
        };
        let t0 = Instant::now();
        under_signals(libc::SIGUSR1, warm, || {
            while t0.elapsed() < Duration::from_secs(2) {
                for (i, n) in mine.iter_mut().enumerate() {
                    CURRENT.store(i as u64, Ordering::Relaxed);
                    latte_start(ROUND.at(i), LATTE_MODE_FAST);
                    CURRENT.store(u64::MAX, Ordering::Relaxed);
                    latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                    *n += 1;
                }
            }
        });
        let mut wrong = 0;
        let mut handler = 0;
        for (i, n) in mine.iter().enumerate() {
            let h = HANDLER_BY_ID[i].load(Ordering::Relaxed);
            handler += h;
            // SAFETY: a NUL-terminated name (`Names`).
            let got = samples(unsafe { core::ffi::CStr::from_ptr(ROUND.at(i)) }).len() as u64;
            if got != (1 + n + h).min(65536) {
                if wrong < 5 {
                    child_says(&format!("sig.rr.{i}: {got} samples, {} written\n", 1 + n + h));
                }
                wrong += 1;
            }
        }
        child_says(&format!("handler spans under the current ID {handler}; IDs with a wrong count {wrong}\n"));
        wrong == 0 && handler >= 100
    });
}

/// The pointer the worker is starting while it is new to the thread, for
/// the handler below.
static RESOLVING: std::sync::atomic::AtomicPtr<core::ffi::c_char> = std::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// A span under the pointer the worker is resolving at that moment, often
/// while the worker's slow path is entering it in the thread's second level.
extern "C" fn on_usr2_resolving(_: libc::c_int) {
    let p = RESOLVING.load(Ordering::Relaxed);
    if !p.is_null() {
        latte_start(p, LATTE_MODE_FAST);
        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        HANDLER_SPANS.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_handler_using_the_id_being_resolved_is_recorded_or_refused() {
    fill_names();
    // Six fresh children: each pointer is new to each child's thread. The
    // window (the second level's insert) is short; on the code before the
    // second level was guarded, one child in three died of SIGSEGV.
    for _ in 0..6 {
        resolving_in_a_child();
    }
}

fn resolving_in_a_child() {
    FRESH.store(0, Ordering::Relaxed);
    in_child(30, "a worker span refused, or too few handler spans", || {
        handle(libc::SIGUSR2, on_usr2_resolving);
        let mut n = 0u64;
        let t0 = Instant::now();
        under_signals(
            libc::SIGUSR2,
            || {},
            || {
                // Each pointer new to the thread: every Start enters it in
                // the thread's second level (the map grows as it fills).
                while t0.elapsed() < Duration::from_secs(2) && n < 190_000 {
                    let p = fresh_name();
                    RESOLVING.store(p as *mut _, Ordering::Relaxed);
                    latte_start(p, LATTE_MODE_FAST);
                    RESOLVING.store(core::ptr::null_mut(), Ordering::Relaxed);
                    latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                    n += 1;
                }
            },
        );
        let mut c = latte::counters::latte_counters::default();
        latte_region_get_counters(&mut c);
        let h = HANDLER_SPANS.load(Ordering::Relaxed);
        // Only a handler's span may be refused (it interrupted the slow path).
        let ok = c.reentrant_drops <= h && h >= 100;
        child_says(&format!("worker spans {n}, handler spans {h}, refused {}\n", c.reentrant_drops));
        ok
    });
}

/// IDs the worker below looks up in its thread's second level, round-robin:
/// more than the cache keeps, so that every Start of one misses the cache
/// and probes the second level.
const LOOKED_UP_IDS: usize = 3000;
static LOOKED_UP: Names = Names::new();

/// 100 spans, each under a pointer new to the thread: the handler's slow
/// paths enter them in the thread's second level, whose table grows.
extern "C" fn on_usr1_fresh_ids(_: libc::c_int) {
    for _ in 0..100 {
        latte_start(fresh_name(), LATTE_MODE_FAST);
        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
    }
    HANDLER_SPANS.fetch_add(100, Ordering::Relaxed);
}

#[test]
fn a_handler_growing_the_second_level_during_the_threads_lookup_leaves_it_whole() {
    fill_names();
    LOOKED_UP.fill("sig.look", LOOKED_UP_IDS);
    // The handler's fresh IDs would grow the table the interrupted lookup
    // is reading. With every table of 64 KiB or more given back to the
    // system when freed, a lookup that went on in a freed table would die
    // of SIGSEGV; one that went on in a reused one could return another
    // ID's ring, which the exact counts below would show. A child sees six
    // growths, each landing inside a lookup or not: ten children, so that a
    // map a handler changes inside the thread's lookup fails most runs.
    for _ in 0..10 {
        FRESH.store(0, Ordering::Relaxed);
        in_child(30, "samples recorded under another ID, or too few handler spans", || {
            // SAFETY: a plain call, before this child's threads start.
            unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 64 * 1024) };
            HANDLER_SPANS.store(0, Ordering::Relaxed);
            handle(libc::SIGUSR1, on_usr1_fresh_ids);
            let mut mine = vec![0u64; LOOKED_UP_IDS];
            let warm = || LOOKED_UP.span_each(LOOKED_UP_IDS);
            let t0 = Instant::now();
            under_signals(libc::SIGUSR1, warm, || {
                // Until the handlers have used most of the fresh names: the
                // table grows from 8,192 entries to 524,288 meanwhile.
                while t0.elapsed() < Duration::from_secs(3) && HANDLER_SPANS.load(Ordering::Relaxed) < 150_000 {
                    for (i, n) in mine.iter_mut().enumerate() {
                        latte_start(LOOKED_UP.at(i), LATTE_MODE_FAST);
                        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                        *n += 1;
                    }
                }
            });
            let mut wrong = 0;
            for (i, n) in mine.iter().enumerate() {
                // SAFETY: a NUL-terminated name (`Names`).
                let got = samples(unsafe { core::ffi::CStr::from_ptr(LOOKED_UP.at(i)) }).len() as u64;
                if got != 1 + n {
                    if wrong < 5 {
                        child_says(&format!("sig.look.{i}: {got} samples, {} written\n", 1 + n));
                    }
                    wrong += 1;
                }
            }
            let h = HANDLER_SPANS.load(Ordering::Relaxed);
            child_says(&format!("handler spans {h}; worker IDs with a wrong count {wrong}\n"));
            wrong == 0 && h >= 10_000
        });
    }
}

/// IDs the handler below records under: more than the cache keeps, so its
/// slow paths empty the cache and reuse entries the worker's IDs held.
const OTHER_IDS: usize = 1500;
static OTHER: Names = Names::new();
static OTHER_NEXT: AtomicU64 = AtomicU64::new(0);
static HANDLER_BY_OTHER: [AtomicU64; OTHER_IDS] = [const { AtomicU64::new(0) }; OTHER_IDS];

/// 600 spans, each under the next of the other IDs.
extern "C" fn on_usr1_many_ids(_: libc::c_int) {
    for _ in 0..600 {
        let i = OTHER_NEXT.fetch_add(1, Ordering::Relaxed) as usize % OTHER_IDS;
        latte_start(OTHER.at(i), LATTE_MODE_FAST);
        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        HANDLER_BY_OTHER[i].fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_start_interrupted_by_a_handler_that_reuses_its_cache_entry_keeps_its_id() {
    ROUND.fill("sig.rr", ROUND_IDS);
    OTHER.fill("sig.other", OTHER_IDS);
    // 256 of the round-robin's IDs, cached; the handler's 1,500 others
    // empty the cache and take its entries, at any instruction of a Start.
    const MINE: usize = 256;
    in_child(30, "spans recorded under another ID, or too few handler spans", || {
        handle(libc::SIGUSR1, on_usr1_many_ids);
        let mut mine = vec![0u64; MINE];
        let warm = || {
            for i in 0..MINE {
                latte_start(ROUND.at(i), LATTE_MODE_HARD);
                latte_stop(core::ptr::null(), LATTE_MODE_HARD);
            }
            OTHER.span_each(OTHER_IDS);
        };
        let t0 = Instant::now();
        under_signals(libc::SIGUSR1, warm, || {
            while t0.elapsed() < Duration::from_secs(2) {
                for (i, n) in mine.iter_mut().enumerate() {
                    latte_start(ROUND.at(i), LATTE_MODE_HARD);
                    latte_stop(core::ptr::null(), LATTE_MODE_HARD);
                    *n += 1;
                }
            }
        });
        let cname = |p: *const core::ffi::c_char| {
            // SAFETY: a NUL-terminated name (`Names`).
            unsafe { core::ffi::CStr::from_ptr(p) }
        };
        let mut wrong = 0;
        for (i, n) in mine.iter().enumerate() {
            let s = samples(cname(ROUND.at(i)));
            let fast = s.iter().filter(|x| x.start_mode != LATTE_MODE_HARD).count() as u64;
            // A handler's span in this ring would be FAST; the worker's are HARD.
            if s.len() as u64 != (1 + n).min(65536) || fast > 0 {
                if wrong < 5 {
                    child_says(&format!("sig.rr.{i}: {} samples ({fast} not the worker's), {} written\n", s.len(), 1 + n));
                }
                wrong += 1;
            }
        }
        let mut handler = 0;
        for (i, by) in HANDLER_BY_OTHER.iter().enumerate() {
            let h = by.load(Ordering::Relaxed);
            handler += h;
            let s = samples(cname(OTHER.at(i)));
            if s.len() as u64 != (1 + h).min(65536) {
                if wrong < 10 {
                    child_says(&format!("sig.other.{i}: {} samples, {} written\n", s.len(), 1 + h));
                }
                wrong += 1;
            }
        }
        let mut c = latte::counters::latte_counters::default();
        latte_region_get_counters(&mut c);
        child_says(&format!("handler spans {handler}; rings with a wrong sample {wrong}; {c:?}\n"));
        wrong == 0 && handler >= 6000
    });
}
