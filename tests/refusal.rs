//! A thread refused a ring because its region cannot grow counts its next
//! spans of that ID without the registry lock, so that many threads
//! recording into a full region do not queue on it; once the region's
//! back-off has passed, or an exited thread has handed a ring back, it
//! asks again and records.

mod common;
use common::*;
use latte::layout::*;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// The lock holder's states, in `HOLDER`: not yet running, running,
/// asked to take the lock, holding it, told the spans are done, or gave up
/// waiting for that.
const WAITING: u8 = 0;
const STARTED: u8 = 5;
const ASKED: u8 = 1;
const HELD: u8 = 2;
const DONE: u8 = 3;
const GAVE_UP: u8 = 4;

/// The address space capped at what the process has mapped now and
/// `spare` bytes more.
fn cap_address_space(spare: u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = s.lines().find(|l| l.starts_with("VmSize:")).and_then(|l| l.split_whitespace().nth(1)).unwrap().parse().unwrap();
    let cap = libc::rlimit { rlim_cur: (kib << 10) + spare, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: a valid rlimit; this process (a forked child) only.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) }, 0);
}

/// A thread, made before the address space is capped, that takes the
/// registry lock when asked and keeps it until told the spans are done,
/// or 10 s.
struct Holder(std::thread::JoinHandle<()>);

/// The holder's state (one holder per process: each test runs in a child).
static HOLDER: AtomicU8 = AtomicU8::new(WAITING);

impl Holder {
    fn start() -> Holder {
        let t = std::thread::spawn(|| {
            HOLDER.store(STARTED, Ordering::Release);
            while HOLDER.load(Ordering::Acquire) != ASKED {
                std::thread::sleep(Duration::from_millis(1));
            }
            let _held = latte::internals::recorder::REGISTRY.lock();
            HOLDER.store(HELD, Ordering::Release);
            let t0 = Instant::now();
            while HOLDER.load(Ordering::Acquire) != DONE {
                if t0.elapsed() > Duration::from_secs(10) {
                    HOLDER.store(GAVE_UP, Ordering::Release);
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        while HOLDER.load(Ordering::Acquire) != STARTED {
            std::thread::sleep(Duration::from_millis(1));
        }
        Holder(t)
    }

    /// Runs `f` while the registry lock is held on the holder's thread;
    /// whether `f` finished before the holder gave up (had `f`'s spans
    /// asked the registry, they would wait for the lock, here 10 s).
    fn while_held(self, f: impl FnOnce()) -> bool {
        HOLDER.store(ASKED, Ordering::Release);
        while HOLDER.load(Ordering::Acquire) != HELD {
            std::thread::sleep(Duration::from_millis(1));
        }
        f();
        let in_time = HOLDER.swap(DONE, Ordering::AcqRel) == HELD;
        self.0.join().unwrap();
        in_time
    }
}

fn lift_cap() {
    let none = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: a valid rlimit.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &none) };
}

/// Runs `f` in a child recording into a shared region of 4 rings named
/// after `what`, removed afterwards.
fn in_region_of_four_rings(what: &str, f: impl FnOnce() -> bool) {
    let name = format!("/latte-test-refusal-{what}-{}", std::process::id());
    in_child(|| {
        std::env::set_var("LATTE_QUIET", "1");
        latte::internals::recorder::install_shared(name.as_bytes(), &small_rings(4)).unwrap();
        f()
    });
    let _ = latte::shm::unlink(name.as_bytes());
}

#[test]
fn a_refused_id_is_counted_without_the_registry_lock_until_the_region_tries_again() {
    in_region_of_four_rings("lock", || {
        let fit: Vec<std::ffi::CString> = (0..4).map(|k| std::ffi::CString::new(format!("refusal.fit.{k}")).unwrap()).collect();
        for id in &fit {
            span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        assert_eq!((counters().slots_used, counters().no_slot_drops), (4, 0));
        let holder = Holder::start();
        // No room for a fifth ring: the region cannot map another chunk.
        cap_address_space(0);
        span(c"refusal.x", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let in_time = holder.while_held(|| {
            for _ in 0..1000 {
                span(c"refusal.x", LATTE_MODE_FAST, LATTE_MODE_FAST);
            }
        });
        let during = counters();
        // Past the back-off (1 s), with room again: the ID gets its ring.
        lift_cap();
        std::thread::sleep(Duration::from_millis(1100));
        span(c"refusal.x", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let kept = snapshot(c"refusal.x").len();
        eprintln!("counted while the lock was held: {in_time}; no-slot drops {}; kept after the back-off {kept}", during.no_slot_drops);
        in_time && during.no_slot_drops == 1001 && kept == 1 && counters().no_slot_drops == 1001
    });
}

#[test]
fn a_refused_id_takes_the_ring_an_exited_thread_hands_back() {
    in_region_of_four_rings("reuse", || {
        // A thread takes the first ring and waits to be told to exit; this
        // thread takes the other three.
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (ready, started) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            span(c"refusal.other", LATTE_MODE_FAST, LATTE_MODE_FAST);
            ready.send(()).unwrap();
            wait.recv().unwrap();
        });
        started.recv().unwrap();
        for id in [c"refusal.a", c"refusal.b", c"refusal.c"] {
            span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        cap_address_space(0);
        span(c"refusal.x", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let refused = counters().no_slot_drops;
        // The other thread exits: its ring is handed back, and the refused
        // ID, asked again at once (within the back-off), gets it.
        go.send(()).unwrap();
        other.join().unwrap();
        span(c"refusal.x", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let after = counters();
        lift_cap();
        let kept = snapshot(c"refusal.x").len();
        eprintln!("refused {refused}; then no-slot drops {}, reuses {}, kept {kept}", after.no_slot_drops, after.slot_reuses);
        refused == 1 && after.no_slot_drops == 1 && after.slot_reuses == 1 && kept == 1
    });
}

#[test]
fn a_name_refused_for_want_of_room_is_counted_without_the_registry_lock() {
    in_region_of_four_rings("name", || {
        // Names of 4,000 bytes: 480 of them fill the first five name chunks
        // (64 KiB to 1 MiB) most of the way, with the rings they need.
        let name = |k: usize| std::ffi::CString::new(format!("{k:06}{}", "n".repeat(3994))).unwrap();
        let names: Vec<std::ffi::CString> = (0..520).map(name).collect();
        for id in &names[..480] {
            span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        assert_eq!(counters().unfit_id_drops, 0);
        let holder = Holder::start();
        // Room for small allocations and another chunk of rings, not for
        // the next name chunk (2 MiB).
        cap_address_space(1 << 20);
        let refused = names[480..].iter().find(|id| {
            span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
            counters().unfit_id_drops > 0
        });
        let Some(refused) = refused else {
            lift_cap();
            eprintln!("no name was refused");
            return false;
        };
        let in_time = holder.while_held(|| {
            for _ in 0..1000 {
                span(refused, LATTE_MODE_FAST, LATTE_MODE_FAST);
            }
        });
        let c = counters();
        lift_cap();
        eprintln!("counted while the lock was held: {in_time}; unfit-id drops {}, no-slot drops {}", c.unfit_id_drops, c.no_slot_drops);
        in_time && c.unfit_id_drops == 1001 && c.no_slot_drops == 0
    });
}
