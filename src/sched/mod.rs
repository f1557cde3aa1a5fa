//! Switch tracking: which spans the OS interrupted, and where a slow
//! operation's wall time went.
//!
//! Opt-in per process (`enable`, or `LATTE_SCHED=1` read once). Each tracked
//! thread owns a perf switch event and its ring (`perf`): the kernel appends a
//! record there whenever the thread is switched out and back in, so a thread
//! whose ring head did not move over an interval was not switched out during
//! it. The calling thread of `enable` opens its event at once; every other
//! thread opens its own in the slow path where it attaches to latte (its
//! first Start, which allocates anyway), or in its first `snap`. That is one
//! `perf_event_open` and one `mmap` on that thread. A refusal (the kernel's
//! errno) is kept per thread and counted per process; the thread then
//! records exactly as without tracking, and is not asked again unless it
//! calls `enable` itself.
//!
//! A point (`snap`) is the thread's ring head, the TSC, CLOCK_MONOTONIC (the
//! clock the kernel stamps the records with) and the CPU; `diff` reads the
//! switch records between two points of the same thread and splits the wall
//! time into on-CPU, preempted (runnable) and blocked (sleeping or waiting).
//!
//! Lifetime: the event and mapping belong to the thread's state here and are
//! released when the thread exits. A fork child has no copy of its parent's
//! perf mappings (the kernel does not copy them): at the fork, the child
//! forgets them, closes the inherited descriptors and, when tracking is on,
//! opens an event of its own for the forking thread.

//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | the process's and each thread's tracking state: enable, release, snap, counters |
//! | `types.rs` | the C types and status values |
//! | `perf.rs` | a thread's perf switch event and its ring |
//! | `watch.rs` | the binding protocol: where a hot state finds its thread's switch count |
//! | `diff.rs` | where a thread's time went between two points |
//! | `fork.rs` | the fork handlers |

mod diff;
mod fork;
mod perf;
mod types;
mod watch;

pub use diff::diff;
pub use types::*;
pub use watch::{bind, unbind, untracked_head, Watch};

use crate::error::Error;
use core::cell::RefCell;
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use fork::install_fork_handlers;
use perf::Ring;
use std::sync::{Mutex, MutexGuard};
use watch::point_bound;

// --------------------------------------------------------- process state ----

/// `ENABLED` before the environment (`LATTE_SCHED`) was read.
const SCHED_UNREAD: u32 = 0;
/// `ENABLED` when tracking is off.
const SCHED_OFF: u32 = 1;
/// `ENABLED` when tracking is on.
pub(super) const SCHED_ON: u32 = 2;

/// `SCHED_UNREAD`, `SCHED_OFF` or `SCHED_ON`. Relaxed throughout: a switch
/// read on its own, ordering no other data.
pub(super) static ENABLED: AtomicU32 = AtomicU32::new(SCHED_UNREAD);
pub(super) static TRACKED: AtomicU64 = AtomicU64::new(0);
pub(super) static OPENED: AtomicU64 = AtomicU64::new(0);
/// The errnos refusals are counted by, in `latte_sched_counters`' order;
/// any other is counted at `REFUSED_OTHER`.
const REFUSAL_ERRNOS: [i32; 5] = [libc::EACCES, libc::EPERM, libc::ENOSYS, libc::EMFILE, libc::ENOMEM];
/// Index in `REFUSED` of the refusals with an errno not in `REFUSAL_ERRNOS`.
const REFUSED_OTHER: usize = REFUSAL_ERRNOS.len();
/// Refusals by errno: `REFUSAL_ERRNOS`, then the others.
pub(super) static REFUSED: [AtomicU64; REFUSED_OTHER + 1] = [const { AtomicU64::new(0) }; REFUSED_OTHER + 1];
pub(super) static LAST_REFUSAL: AtomicI32 = AtomicI32::new(0);
/// Ring ids; 0 is never one.
static NEXT_RING: AtomicU32 = AtomicU32::new(1);

/// Descriptors of every open event of this process, so that a fork child
/// can close the ones it inherits. Held across a fork (`atfork_prepare`).
static FDS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

pub(super) fn fds() -> MutexGuard<'static, Vec<i32>> {
    // A panic under the lock leaves a list that is still a valid list.
    FDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether tracking is on: `enable` was called, or `LATTE_SCHED=1` was set
/// when first asked.
pub fn enabled() -> bool {
    match ENABLED.load(Ordering::Relaxed) {
        SCHED_UNREAD => {
            let on = std::env::var_os("LATTE_SCHED").is_some_and(|v| v == "1");
            // Only the first reader's answer counts (enable may race: it wins).
            let _ = ENABLED.compare_exchange(SCHED_UNREAD, if on { SCHED_ON } else { SCHED_OFF }, Ordering::Relaxed, Ordering::Relaxed);
            if ENABLED.load(Ordering::Relaxed) == SCHED_ON {
                install_fork_handlers();
            }
            ENABLED.load(Ordering::Relaxed) == SCHED_ON
        }
        v => v == SCHED_ON,
    }
}

/// The entry of `REFUSED` that counts a refusal with `errno`.
fn refusal_index(errno: i32) -> usize {
    REFUSAL_ERRNOS.iter().position(|&e| e == errno).unwrap_or(REFUSED_OTHER)
}

fn count_refusal(errno: i32) {
    // Relaxed: statistics.
    REFUSED[refusal_index(errno)].fetch_add(1, Ordering::Relaxed);
    LAST_REFUSAL.store(errno, Ordering::Relaxed);
}

// ---------------------------------------------------------- thread state ----

/// A thread's tracking state; its event is released when the thread exits.
pub(super) struct ThreadSched {
    ring: Option<Ring>,
    /// The ring's id (0 without one).
    id: u32,
    /// LATTE_SCHED_ON, LATTE_SCHED_PENDING (not asked yet) or the refusal.
    status: i32,
    /// The open ring's base (`latte_thread.switch_base`; 0 without one).
    base: u64,
    /// The next ring's base: 1 at first, then past the last sum (count +
    /// base) the previous ring could show, read after the hot path stopped
    /// loading that ring's count. So the sums of a thread's successive rings
    /// never meet, and a pulse site's sum from an earlier ring is never
    /// taken for a current one.
    next_base: u64,
}

impl ThreadSched {
    /// Opens this thread's event (any previous one released first).
    fn open(&mut self) -> Result<(), Error> {
        self.release();
        match Ring::open() {
            Ok(r) => {
                fds().push(r.raw_fd());
                // Relaxed: ids need only be unique; counters are statistics.
                self.id = NEXT_RING.fetch_add(1, Ordering::Relaxed).max(1);
                self.base = self.next_base.max(1);
                point_bound(r.head_ptr(), self.base); // B3 (src/sched/watch.rs)
                self.ring = Some(r);
                let _ = OPENED_HERE.try_with(|o| o.set(true));
                self.status = LATTE_SCHED_ON;
                TRACKED.fetch_add(1, Ordering::Relaxed);
                OPENED.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                count_refusal(-e.code());
                self.status = e.code();
                Err(e)
            }
        }
    }

    fn release(&mut self) {
        if let Some(r) = self.ring.take() {
            // B4 (src/sched/watch.rs), before the unmap: the hot path must
            // never load from it again.
            point_bound(untracked_head(), 0);
            // After: no sum the hot path took from this ring exceeds it.
            self.next_base = self.base.max(1) + r.head() + 1;
            self.base = 0;
            let fd = r.raw_fd();
            fds().retain(|&f| f != fd);
            drop(r);
            // Relaxed: a statistic.
            TRACKED.fetch_sub(1, Ordering::Relaxed);
        }
        self.id = 0;
        self.status = LATTE_SCHED_PENDING;
    }
}

impl Drop for ThreadSched {
    fn drop(&mut self) {
        self.release();
    }
}

thread_local! {
    /// Set once the thread opened an event (`ThreadSched::open`); no
    /// destructor, so it can be read at any point of the thread's end.
    static OPENED_HERE: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

thread_local! {
    static THREAD: RefCell<ThreadSched> = const { RefCell::new(ThreadSched { ring: None, id: 0, status: LATTE_SCHED_PENDING, base: 0, next_base: 1 }) };
}

/// Runs `f` on the calling thread's state; None while the thread is being
/// torn down or the state is in use further up this thread's stack (a
/// signal handler interrupted latte here).
pub(super) fn with_thread<R>(f: impl FnOnce(&mut ThreadSched) -> R) -> Option<R> {
    THREAD.try_with(|t| t.try_borrow_mut().ok().map(|mut t| f(&mut t))).ok().flatten()
}

/// Turns tracking on for the process and opens the calling thread's event
/// (again, if it was refused before). 0, or the negative errno the kernel
/// gave for this thread.
pub fn enable() -> Result<(), Error> {
    ENABLED.store(SCHED_ON, Ordering::Relaxed);
    install_fork_handlers();
    with_thread(|t| if t.ring.is_some() { Ok(()) } else { t.open() }).unwrap_or(Err(Error::BUSY))
}

/// Stops tracking the calling thread: its event is released (its samples
/// are no longer flagged) and it is not asked again until it calls
/// `enable`. 0, or -EBUSY while its state is in use further up the stack.
pub fn release() -> Result<(), Error> {
    with_thread(|t| {
        t.release();
        t.status = LATTE_SCHED_RELEASED;
    })
    .ok_or(Error::BUSY)
}

/// Releases the calling thread's event as it ends, when its thread-local
/// destructor did not (it does not run for a thread that opened its event
/// after the thread-local destructors), and keeps the thread from asking
/// again. Touches the thread's state only when it opened an event: making
/// that state now would register a destructor that never runs.
pub fn release_ended_thread() {
    if OPENED_HERE.try_with(|o| o.get()).unwrap_or(false) {
        let _ = with_thread(|t| {
            t.release();
            t.status = LATTE_SCHED_RELEASED;
        });
    }
}

/// The slow path of a thread: opens its event when tracking is on and the
/// thread was never asked. A syscall; only ever once per thread.
pub fn attach_thread() {
    if !enabled() {
        return;
    }
    with_thread(|t| {
        if t.status == LATTE_SCHED_PENDING {
            let _ = t.open(); // a refusal is kept in the thread's status
        }
    });
}

/// The calling thread's state: LATTE_SCHED_OFF, _ON, _PENDING, or the
/// negative errno its event was refused with.
pub fn status() -> i32 {
    if !enabled() {
        return LATTE_SCHED_OFF;
    }
    with_thread(|t| t.status).unwrap_or(LATTE_SCHED_PENDING)
}

/// The process counters.
pub fn counters() -> latte_sched_counters {
    let r = |i: usize| REFUSED[i].load(Ordering::Relaxed);
    let of = |errno: i32| r(refusal_index(errno));
    latte_sched_counters {
        enabled: enabled() as u32,
        last_refusal: LAST_REFUSAL.load(Ordering::Relaxed),
        tracked: TRACKED.load(Ordering::Relaxed),
        opened: OPENED.load(Ordering::Relaxed),
        refused: (0..=REFUSED_OTHER).map(r).sum(),
        refused_eacces: of(libc::EACCES),
        refused_eperm: of(libc::EPERM),
        refused_enosys: of(libc::ENOSYS),
        refused_emfile: of(libc::EMFILE),
        refused_enomem: of(libc::ENOMEM),
        refused_other: r(REFUSED_OTHER),
    }
}

/// The bits of `rdtscp`'s processor id that hold the CPU number (Linux
/// puts the NUMA node above them).
const RDTSCP_CPU_MASK: u32 = (1 << 12) - 1;

/// The TSC and the CPU number, from one `rdtscp`.
fn rdtscp_cpu() -> (u64, u32) {
    let mut aux = 0u32;
    // SAFETY: writes only `aux`, a valid local.
    let t = unsafe { core::arch::x86_64::__rdtscp(&mut aux) };
    (t, aux & RDTSCP_CPU_MASK)
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes the valid local `ts`; served by the vDSO (no syscall)
    // where the clock source allows.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A point of the calling thread: no syscall once its event is open (the
/// first call on a thread that was never asked opens it). The thread's
/// refusal, `LATTE_ERR_SCHED_OFF` when tracking is not enabled, `-EBUSY`
/// while its state is in use (a signal handler inside latte) or torn down.
pub fn snap() -> Result<latte_sched_point, Error> {
    if !enabled() {
        return Err(Error::SchedOff);
    }
    with_thread(|t| {
        if t.status == LATTE_SCHED_PENDING {
            let _ = t.open(); // a refusal is kept in the thread's status
        }
        let Some(r) = t.ring.as_ref() else {
            return Err(if t.status < 0 { Error::from_code(t.status) } else { Error::SchedOff });
        };
        let head = r.head();
        let (tsc, cpu) = rdtscp_cpu();
        Ok(latte_sched_point { head, tsc, mono_ns: monotonic_ns(), cpu, ring: t.id })
    })
    .unwrap_or(Err(Error::BUSY))
}
