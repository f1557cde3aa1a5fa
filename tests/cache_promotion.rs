//! The Rust hot path's ID cache promotion (src/recorder/cache.rs, rule C4):
//! an ID that others had pushed off its home entry takes it back (about
//! one Start in 64 that finds it further on), the IDs moved stay cached,
//! and every span lands under its own ID, signal handlers recording on the
//! thread meanwhile included.

mod common;
use common::*;
use core::sync::atomic::{compiler_fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use latte::internals::ffi::{latte_start, latte_stop};
use latte::layout::*;
use std::ffi::CStr;

/// Three names whose pointers share a home entry of the thread's cache.
fn names_sharing_a_home() -> [&'static CStr; 3] {
    let pool: &'static mut [u8] = Box::leak(vec![0u8; 1 << 20].into_boxed_slice());
    let base = pool.as_ptr() as usize;
    let home = cache_index(pool.as_ptr().cast());
    let at: Vec<usize> = (0..pool.len() - 32).step_by(32).filter(|&o| cache_index((base + o) as *const _) == home).take(3).collect();
    assert_eq!(at.len(), 3);
    for (k, &o) in at.iter().enumerate() {
        let name = format!("promotion.{k}\0");
        pool[o..o + name.len()].copy_from_slice(name.as_bytes());
    }
    let pool: &'static [u8] = pool;
    [at[0], at[1], at[2]].map(|o| CStr::from_bytes_until_nul(&pool[o..]).unwrap())
}

#[test]
fn an_id_pushed_off_its_home_takes_it_back() {
    std::thread::spawn(|| {
        let [old_a, old_b, hot] = names_sharing_a_home();
        let home = cache_index(hot.as_ptr());
        span(old_a, LATTE_MODE_FAST, LATTE_MODE_FAST);
        span(old_b, LATTE_MODE_FAST, LATTE_MODE_FAST);
        span(hot, LATTE_MODE_FAST, LATTE_MODE_FAST);
        let me = latte::internals::recorder::current();
        // SAFETY: this thread's state, read between its own calls.
        let key = |k: usize| unsafe { (*me).cache[(home + k) % LATTE_CACHE_SIZE as usize].key };
        assert_eq!([key(0), key(1), key(2)], [old_a.as_ptr(), old_b.as_ptr(), hot.as_ptr()], "first come, first at home");
        let mut starts = 1;
        while key(0) != hot.as_ptr() {
            // (63/64)^4096 ~ 1e-28: never, unless promotion is broken.
            assert!(starts <= 4096, "promoted within 4,096 Starts that found it past its home");
            span(hot, LATTE_MODE_FAST, LATTE_MODE_FAST);
            starts += 1;
        }
        assert_eq!([key(1), key(2)], [old_b.as_ptr(), old_a.as_ptr()], "the home's ID took the promoted one's entry");
        span(old_a, LATTE_MODE_FAST, LATTE_MODE_FAST);
        span(old_b, LATTE_MODE_FAST, LATTE_MODE_FAST);
        assert_eq!((snapshot(hot).len(), snapshot(old_a).len(), snapshot(old_b).len()), (starts, 2, 2));
        assert_eq!(thread_counters().dropped, 0);
    })
    .join()
    .unwrap();
}

/// IDs of the loop below, three to a home entry (100 homes 8 entries
/// apart): fewer than the cache keeps, so that the loop takes no slow path
/// once warm, and two of each three past their home, so that it promotes.
const LOOP_IDS: usize = 300;
const _: () = assert!(LOOP_IDS / 3 * 8 <= LATTE_CACHE_SIZE as usize, "the loop's homes fit the cache");
static NAMES: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();

/// The loop's names, in a pool that stays for the process.
fn make_names() -> Vec<usize> {
    let pool: &'static mut [u8] = Box::leak(vec![0u8; 1 << 22].into_boxed_slice());
    let base = pool.as_ptr() as usize;
    let mut by_home = vec![Vec::new(); LATTE_CACHE_SIZE as usize];
    for o in (0..pool.len() - 32).step_by(32) {
        by_home[cache_index((base + o) as *const _)].push(o);
    }
    let mut names = Vec::new();
    for h in (0..LATTE_CACHE_SIZE as usize).step_by(8).take(LOOP_IDS / 3) {
        assert!(by_home[h].len() >= 3, "home {h}: {} pointers", by_home[h].len());
        for &o in &by_home[h][..3] {
            let text = format!("promotion.loop.{}\0", names.len());
            pool[o..o + text.len()].copy_from_slice(text.as_bytes());
            names.push(base + o);
        }
    }
    names
}
/// The index of the name the worker is starting (or promoting), for the handler.
static CURRENT: AtomicUsize = AtomicUsize::new(usize::MAX);
static BY_HANDLER: [AtomicU64; LOOP_IDS] = [const { AtomicU64::new(0) }; LOOP_IDS];

fn name(i: usize) -> *const core::ffi::c_char {
    NAMES.get().expect("names made before use")[i] as *const core::ffi::c_char
}

/// Spans under the ID the worker is starting at that moment (its Start may
/// be promoting it) and the two that share its home entry: each looks the
/// cache up while the interrupted code may be halfway through swapping
/// two of them.
extern "C" fn on_usr1(_: libc::c_int) {
    let i = CURRENT.load(Ordering::Relaxed);
    if i < LOOP_IDS {
        let trio = i / 3 * 3;
        for (j, count) in BY_HANDLER.iter().enumerate().skip(trio).take(3) {
            latte_start(name(j), LATTE_MODE_FAST);
            latte_stop(core::ptr::null(), LATTE_MODE_FAST);
            count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
fn handlers_recording_during_promotions_keep_every_span_under_its_id() {
    NAMES.get_or_init(make_names);
    // SAFETY: a valid handler for a plain signal.
    unsafe {
        let mut act: libc::sigaction = core::mem::zeroed();
        act.sa_sigaction = on_usr1 as *const () as usize;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGUSR1, &act, core::ptr::null_mut());
    }
    let done = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let done = &done;
        let worker = s.spawn(move || {
            for i in 0..LOOP_IDS {
                latte_start(name(i), LATTE_MODE_FAST);
                latte_stop(core::ptr::null(), LATTE_MODE_FAST);
            }
            let me = latte::internals::recorder::current();
            // SAFETY: this thread's state, read between its own calls.
            let past_home = (0..LOOP_IDS).filter(|&i| unsafe { (*me).cache[cache_index(name(i))].key } != name(i)).count();
            // SAFETY: the calling thread's own handle.
            tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
            // Each ID below 65,536 spans (its ring's size) with the
            // handler's: every one kept.
            let mut mine = vec![1u64; LOOP_IDS];
            for _ in 0..40_000 {
                for (i, n) in mine.iter_mut().enumerate() {
                    // Compiler fences: the Start stays between the two stores,
                    // as a handler on this thread sees them.
                    CURRENT.store(i, Ordering::Relaxed);
                    compiler_fence(Ordering::SeqCst);
                    latte_start(name(i), LATTE_MODE_FAST);
                    compiler_fence(Ordering::SeqCst);
                    CURRENT.store(usize::MAX, Ordering::Relaxed);
                    latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                    *n += 1;
                }
            }
            done.store(true, Ordering::Relaxed);
            // SAFETY: an all-zero sigset_t is valid before sigemptyset; this thread's own mask.
            unsafe {
                let mut set: libc::sigset_t = core::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGUSR1);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, core::ptr::null_mut());
            }
            (past_home, mine, thread_counters().dropped)
        });
        let target = rx.recv().unwrap() as libc::pthread_t;
        while !done.load(Ordering::Relaxed) {
            // SAFETY: the worker is alive until `done` (joined below).
            unsafe { libc::pthread_kill(target, libc::SIGUSR1) };
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
        let (past_home, mine, dropped) = worker.join().unwrap();
        assert_eq!(past_home, 2 * LOOP_IDS / 3, "IDs past their home entries after the first round");
        let handler: u64 = BY_HANDLER.iter().map(|h| h.load(Ordering::Relaxed)).sum();
        assert!(handler >= 100, "only {handler} handler spans");
        assert_eq!(dropped, 0);
        for (i, n) in mine.iter().enumerate() {
            // SAFETY: a NUL-terminated name.
            let got = snapshot(unsafe { core::ffi::CStr::from_ptr(name(i)) }).len() as u64;
            assert_eq!(got, n + BY_HANDLER[i].load(Ordering::Relaxed), "promotion.loop.{i}");
        }
    });
}
