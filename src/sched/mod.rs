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

mod perf;

use crate::error::Error;

use core::cell::RefCell;
use core::sync::atomic::{compiler_fence, AtomicI32, AtomicU32, AtomicU64, Ordering};
use perf::{Ring, Window};
use std::sync::{Mutex, MutexGuard};

/// `latte_sched_status`: tracking is not enabled in this process.
pub const LATTE_SCHED_OFF: i32 = 0;
/// `latte_sched_status`: the calling thread is tracked.
pub const LATTE_SCHED_ON: i32 = 1;
/// `latte_sched_status`: tracking is enabled; the calling thread opens its
/// event at its next slow path (a first Start of an ID, or `latte_sched_snap`).
pub const LATTE_SCHED_PENDING: i32 = 2;

/// `latte_sched_status`: tracking is enabled; the calling thread released
/// its event (`latte_sched_release`) and is not asked again until it calls
/// `latte_sched_enable`.
pub const LATTE_SCHED_RELEASED: i32 = 3;

/// A point in a thread's run: where its switch ring stood, and when.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_sched_point {
    /// The thread's ring position (bytes of switch records ever written).
    pub head: u64,
    /// TSC (`rdtscp`), read after the head.
    pub tsc: u64,
    /// CLOCK_MONOTONIC in ns, read after the TSC: the clock of the records.
    pub mono_ns: u64,
    /// The CPU the thread ran on (from `rdtscp`).
    pub cpu: u32,
    /// Which ring `head` belongs to (unique in the process; never 0).
    pub ring: u32,
}

/// Where a thread's time went between two points.
///
/// `on_cpu_ns + preempted_ns + blocked_ns == wall_ns` when `lost` is 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_sched_delta {
    /// CLOCK_MONOTONIC ns from the first point to the second.
    pub wall_ns: u64,
    /// TSC cycles from the first point to the second.
    pub cycles: u64,
    /// Time the thread was running.
    pub on_cpu_ns: u64,
    /// Time it was switched out: `preempted_ns + blocked_ns`.
    pub off_cpu_ns: u64,
    /// Off-CPU while runnable: preempted by another thread.
    pub preempted_ns: u64,
    /// Off-CPU while not runnable: sleeping, waiting for I/O, a lock, a page.
    pub blocked_ns: u64,
    /// Times the thread was switched out.
    pub switch_outs: u32,
    /// Of those, preemptions.
    pub preemptions: u32,
    /// Times it resumed on another CPU than it last ran on (the CPUs at both
    /// points included).
    pub migrations: u32,
    /// Distinct CPUs it ran on.
    pub cpus: u32,
    /// The CPU at the first point and at the second.
    pub first_cpu: u32,
    pub last_cpu: u32,
    /// 1 when switch records of the interval were overwritten in the ring
    /// before they were read (more switches than it holds, or read too long
    /// after): only `wall_ns`, `cycles` and the CPUs are known then.
    pub lost: u32,
    pub _pad: u32,
}

/// Process-wide switch tracking counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_sched_counters {
    /// 1 when tracking is enabled in this process.
    pub enabled: u32,
    /// The errno of the last refusal (positive), 0 when none.
    pub last_refusal: i32,
    /// Threads tracked now (an open event).
    pub tracked: u64,
    /// Events ever opened in this process.
    pub opened: u64,
    /// Threads the kernel refused an event, in total and by errno.
    pub refused: u64,
    pub refused_eacces: u64,
    pub refused_eperm: u64,
    pub refused_enosys: u64,
    pub refused_emfile: u64,
    pub refused_enomem: u64,
    pub refused_other: u64,
}

// --------------------------------------------------------- process state ----

/// [`ENABLED_UNREAD`], [`ENABLED_OFF`] or [`ENABLED_ON`]. Relaxed
/// throughout: a switch read on its own, ordering no other data.
static ENABLED: AtomicU32 = AtomicU32::new(ENABLED_UNREAD);
/// [`ENABLED`]: `LATTE_SCHED` not read yet, and `enable` not called.
const ENABLED_UNREAD: u32 = 0;
/// [`ENABLED`]: tracking is off in this process.
const ENABLED_OFF: u32 = 1;
/// [`ENABLED`]: tracking is on in this process.
const ENABLED_ON: u32 = 2;
static TRACKED: AtomicU64 = AtomicU64::new(0);
static OPENED: AtomicU64 = AtomicU64::new(0);
/// Refusals, by errno ([`refusal_index`]).
static REFUSED: [AtomicU64; REFUSAL_KINDS] = [const { AtomicU64::new(0) }; REFUSAL_KINDS];
/// Entries of [`REFUSED`]: `EACCES`, `EPERM`, `ENOSYS`, `EMFILE`, `ENOMEM`,
/// then every other errno (`latte_sched_counters` has a field for each).
const REFUSED_EACCES: usize = 0;
const REFUSED_EPERM: usize = 1;
const REFUSED_ENOSYS: usize = 2;
const REFUSED_EMFILE: usize = 3;
const REFUSED_ENOMEM: usize = 4;
const REFUSED_OTHER: usize = 5;
/// Entries of [`REFUSED`].
const REFUSAL_KINDS: usize = REFUSED_OTHER + 1;

static LAST_REFUSAL: AtomicI32 = AtomicI32::new(0);
/// Ring ids; 0 is never one.
static NEXT_RING: AtomicU32 = AtomicU32::new(1);

/// Descriptors of every open event of this process, so that a fork child
/// can close the ones it inherits. Held across a fork (`atfork_prepare`).
static FDS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

thread_local! {
    /// The guard of `FDS` that the forking thread holds from the prepare
    /// handler to the parent's or the child's.
    static FORK_HOLD: RefCell<Option<MutexGuard<'static, Vec<i32>>>> = const { RefCell::new(None) };
}

fn fds() -> MutexGuard<'static, Vec<i32>> {
    // A panic under the lock leaves a list that is still a valid list.
    FDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether tracking is on: `enable` was called, or `LATTE_SCHED=1` was set
/// when first asked.
pub fn enabled() -> bool {
    match ENABLED.load(Ordering::Relaxed) {
        ENABLED_UNREAD => {
            let on = std::env::var_os("LATTE_SCHED").is_some_and(|v| v == "1");
            // Only the first reader's answer counts (enable may race: it wins).
            let _ = ENABLED.compare_exchange(ENABLED_UNREAD, if on { ENABLED_ON } else { ENABLED_OFF }, Ordering::Relaxed, Ordering::Relaxed);
            if ENABLED.load(Ordering::Relaxed) == ENABLED_ON {
                install_fork_handlers();
            }
            ENABLED.load(Ordering::Relaxed) == ENABLED_ON
        }
        v => v == ENABLED_ON,
    }
}

fn install_fork_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: three valid extern "C" functions without arguments.
        unsafe { libc::pthread_atfork(Some(atfork_prepare), Some(atfork_parent), Some(atfork_child)) };
    });
}

/// The entry of [`REFUSED`] that counts a refusal with `errno`.
fn refusal_index(errno: i32) -> usize {
    match errno {
        libc::EACCES => REFUSED_EACCES,
        libc::EPERM => REFUSED_EPERM,
        libc::ENOSYS => REFUSED_ENOSYS,
        libc::EMFILE => REFUSED_EMFILE,
        libc::ENOMEM => REFUSED_ENOMEM,
        _ => REFUSED_OTHER,
    }
}

fn count_refusal(errno: i32) {
    // Relaxed: statistics.
    REFUSED[refusal_index(errno)].fetch_add(1, Ordering::Relaxed);
    LAST_REFUSAL.store(errno, Ordering::Relaxed);
}

/// What `switch_head` points at while its thread is not tracked: a word
/// that is never written. With the base at 0 the hot path does not load it;
/// it keeps the pointer valid whatever reads it.
static UNTRACKED: AtomicU64 = AtomicU64::new(0);

/// What `latte_thread.switch_head` points at when its thread has no ring.
pub fn untracked_head() -> *const AtomicU64 {
    &UNTRACKED
}

/// The two fields of a hot state (`latte_thread.switch_head` and
/// `switch_base`) that say where its thread's switch count lives and the
/// base a pulse adds to it; this module repoints them when the thread's
/// ring opens or closes.
#[derive(Clone, Copy)]
pub struct Watch {
    pub head: *mut *const AtomicU64,
    pub base: *mut u64,
}

impl Watch {
    /// Points the fields at `head`, with `base` (0: the word that never moves).
    ///
    /// # Safety
    /// Both fields are valid and this thread's.
    unsafe fn point(self, head: *const AtomicU64, base: u64) {
        // The base 0 (untracked) first when it goes to 0, last when it
        // leaves it, with a compiler fence between (a signal handler that
        // records on this thread sees this thread's stores in program
        // order): a handler between the two stores sees base 0, and a base
        // of 0 loads no count, so it never pairs a base with another ring's
        // count, nor loads from a ring about to be unmapped.
        // SAFETY: the caller's guarantee (both fields valid, this thread's).
        unsafe {
            if base == 0 {
                *self.base = 0;
                compiler_fence(Ordering::SeqCst);
                *self.head = head;
            } else {
                *self.head = head;
                compiler_fence(Ordering::SeqCst);
                *self.base = base;
            }
        }
    }
}

thread_local! {
    /// The fields of the calling thread's active hot state, bound by the
    /// recorder when it activates a state and unbound when it detaches it:
    /// the ones this module repoints when the thread's ring opens or closes.
    /// No destructor, so it is there while other thread-local destructors
    /// run.
    static BOUND: core::cell::Cell<Option<Watch>> = const { core::cell::Cell::new(None) };
    /// The calling thread's open ring (its `data_head`, NULL without one)
    /// and its base: what a state bound now is pointed at. Kept apart from
    /// the thread's `ThreadSched` (a `RefCell`), so that a state a signal
    /// handler binds while that is borrowed still gets the ring.
    static CURRENT: core::cell::Cell<(*const AtomicU64, u64)> = const { core::cell::Cell::new((core::ptr::null(), 0)) };
    /// The open ring's count read in the fork's prepare step (`atfork_child`).
    static FORK_HEAD: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Makes `w` (the fields of the calling thread's active state) the ones
/// this thread's ring opening or closing repoints, and points them at the
/// current switch count now.
///
/// # Safety
/// `w`'s fields stay valid and are used only by the calling thread until
/// `unbind(w)` or the thread's exit.
pub unsafe fn bind(w: Watch) {
    let _ = BOUND.try_with(|b| b.set(Some(w)));
    let (head, base) = current_ring();
    // SAFETY: the caller's guarantee.
    unsafe { w.point(head, base) };
}

/// Forgets `w` if it is the bound one (its state lost the thread, or the
/// thread is retiring it); its fields are pointed at the word that never
/// moves.
///
/// # Safety
/// As `bind`.
pub unsafe fn unbind(w: Watch) {
    // SAFETY: the caller's guarantee.
    unsafe { w.point(untracked_head(), 0) };
    let _ = BOUND.try_with(|b| {
        if b.get().is_some_and(|x| x.head == w.head) {
            b.set(None);
        }
    });
}

/// Makes `head` (with `base`; 0: the word that never moves) the calling
/// thread's switch count and points the bound fields at it (before a ring
/// is unmapped: at the word that never moves, so that no load ever reaches
/// the unmapped page).
fn point_bound(head: *const AtomicU64, base: u64) {
    let _ = CURRENT.try_with(|c| c.set(if base == 0 { (core::ptr::null(), 0) } else { (head, base) }));
    point_watch(head, base);
}

/// Points the bound fields at `head`, with `base`, leaving `CURRENT` alone.
fn point_watch(head: *const AtomicU64, base: u64) {
    if let Some(w) = BOUND.try_with(|b| b.get()).ok().flatten() {
        // SAFETY: bound by `bind`, whose caller keeps the fields valid and
        // this thread's until `unbind`.
        unsafe { w.point(head, base) };
    }
}

/// The calling thread's switch count and its base: its ring's `data_head`
/// and that ring's base, or `untracked_head()` and 0.
fn current_ring() -> (*const AtomicU64, u64) {
    match CURRENT.try_with(|c| c.get()) {
        Ok((head, base)) if !head.is_null() => (head, base),
        _ => (untracked_head(), 0),
    }
}

// ---------------------------------------------------------- thread state ----

/// A thread's tracking state; its event is released when the thread exits.
struct ThreadSched {
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
                point_bound(r.head_ptr(), self.base);
                self.ring = Some(r);
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
            // Before the unmap: the hot path must never load from it again.
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
    static THREAD: RefCell<ThreadSched> = const { RefCell::new(ThreadSched { ring: None, id: 0, status: LATTE_SCHED_PENDING, base: 0, next_base: 1 }) };
}

/// Runs `f` on the calling thread's state; None while the thread is being
/// torn down or the state is in use further up this thread's stack (a
/// signal handler interrupted latte here).
fn with_thread<R>(f: impl FnOnce(&mut ThreadSched) -> R) -> Option<R> {
    THREAD.try_with(|t| t.try_borrow_mut().ok().map(|mut t| f(&mut t))).ok().flatten()
}

/// Turns tracking on for the process and opens the calling thread's event
/// (again, if it was refused before). 0, or the negative errno the kernel
/// gave for this thread.
pub fn enable() -> Result<(), Error> {
    ENABLED.store(ENABLED_ON, Ordering::Relaxed);
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
    latte_sched_counters {
        enabled: enabled() as u32,
        last_refusal: LAST_REFUSAL.load(Ordering::Relaxed),
        tracked: TRACKED.load(Ordering::Relaxed),
        opened: OPENED.load(Ordering::Relaxed),
        refused: (0..REFUSAL_KINDS).map(r).sum(),
        refused_eacces: r(REFUSED_EACCES),
        refused_eperm: r(REFUSED_EPERM),
        refused_enosys: r(REFUSED_ENOSYS),
        refused_emfile: r(REFUSED_EMFILE),
        refused_enomem: r(REFUSED_ENOMEM),
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

/// Where the calling thread's time went between two of its points. Err:
/// `-EINVAL` for points of another ring (another thread's, or this one's
/// before a fork) or out of order; `LATTE_ERR_SCHED_LOST` with the delta
/// (its `lost` set) when records were overwritten.
pub fn diff(a: &latte_sched_point, b: &latte_sched_point) -> Result<latte_sched_delta, (Error, latte_sched_delta)> {
    let bad = |e| Err((e, latte_sched_delta::default()));
    if a.ring == 0 || a.ring != b.ring || b.head < a.head || b.mono_ns < a.mono_ns {
        return bad(Error::INVAL);
    }
    let res = with_thread(|t| match t.ring.as_ref() {
        Some(r) if t.id == a.ring => Some(split(r, a, b)),
        _ => None,
    });
    match res {
        Some(Some(d)) if d.lost == 0 => Ok(d),
        Some(Some(d)) => Err((Error::SchedLost, d)),
        Some(None) => bad(Error::INVAL),
        None => bad(Error::BUSY),
    }
}

/// CPUs seen, as a bit set of the first [`CpuSet::CPUS`] (CPUs beyond it
/// are counted by their changes only).
struct CpuSet {
    words: [u64; CpuSet::WORDS],
    /// CPUs in the set.
    count: u32,
}

impl CpuSet {
    /// Words of the set.
    const WORDS: usize = 64;
    /// CPUs the set holds.
    const CPUS: u32 = CpuSet::WORDS as u32 * u64::BITS;

    fn new() -> CpuSet {
        CpuSet { words: [0; CpuSet::WORDS], count: 0 }
    }

    fn add(&mut self, cpu: u32) {
        if cpu >= CpuSet::CPUS {
            return;
        }
        let (w, b) = ((cpu / u64::BITS) as usize, cpu % u64::BITS);
        if self.words[w] & (1 << b) == 0 {
            self.words[w] |= 1 << b;
            self.count += 1;
        }
    }
}

/// Walks the switch records between two points of ring `r`.
fn split(r: &Ring, a: &latte_sched_point, b: &latte_sched_point) -> latte_sched_delta {
    let (t0, t1) = (a.mono_ns, b.mono_ns);
    let mut d = latte_sched_delta { wall_ns: t1 - t0, cycles: b.tsc.wrapping_sub(a.tsc), first_cpu: a.cpu, last_cpu: b.cpu, ..Default::default() };
    let mut cpus = CpuSet::new();
    cpus.add(a.cpu);
    let mut cpu = a.cpu;
    // Record times lie within the points' up to the order of the reads in
    // `snap`; clamping keeps the parts summing to the wall time.
    let mut running_since = Some(t0);
    let mut off_since: Option<(u64, bool)> = None;
    let window = r.read(a.head, b.head, |rec| {
        let t = rec.time.clamp(t0, t1);
        if rec.cpu != cpu {
            d.migrations += 1;
            cpu = rec.cpu;
        }
        cpus.add(rec.cpu);
        if rec.header.misc & perf::MISC_SWITCH_OUT != 0 {
            if let Some(s) = running_since.take() {
                d.on_cpu_ns += t - s;
            }
            let preempted = rec.header.misc & perf::MISC_SWITCH_OUT_PREEMPT != 0;
            d.switch_outs += 1;
            d.preemptions += preempted as u32;
            off_since = Some((t, preempted));
        } else {
            if let Some((s, preempted)) = off_since.take() {
                if preempted {
                    d.preempted_ns += t - s;
                } else {
                    d.blocked_ns += t - s;
                }
            }
            running_since.get_or_insert(t);
        }
    });
    if b.cpu != cpu {
        d.migrations += 1;
    }
    cpus.add(b.cpu);
    d.cpus = cpus.count;
    if window == Window::Lost {
        return latte_sched_delta { lost: 1, on_cpu_ns: 0, preempted_ns: 0, blocked_ns: 0, switch_outs: 0, preemptions: 0, migrations: 0, ..d };
    }
    if let Some(s) = running_since {
        d.on_cpu_ns += t1 - s;
    }
    if let Some((s, preempted)) = off_since {
        if preempted {
            d.preempted_ns += t1 - s;
        } else {
            d.blocked_ns += t1 - s;
        }
    }
    d.off_cpu_ns = d.preempted_ns + d.blocked_ns;
    d
}

// ------------------------------------------------------------------ fork ----

/// How far past the count read in the prepare step a fork child starts its
/// next ring's base: more than the records of every switch the forking
/// thread could have between that read and the fork itself.
const FORK_MARGIN: u64 = 1 << 32;

/// Before the fork: the forking thread's state stops loading its ring
/// (pointed at the word that never moves until `atfork_parent`), so that
/// fork callbacks registered by others that record in the child, before
/// latte's own child callback runs, never load a page the child lacks. A
/// sample of this thread that ends during the fork is not flagged.
extern "C" fn atfork_prepare() {
    let (head, base) = current_ring();
    if base != 0 {
        // SAFETY: the thread's open ring, mapped until it is released on
        // this thread (not now: this thread is forking). Relaxed: a count
        // read for the child's next base, which only needs a value at
        // least this recent.
        let h = unsafe { &*head }.load(Ordering::Relaxed);
        let _ = FORK_HEAD.try_with(|f| f.set(h));
    }
    point_watch(untracked_head(), 0);
    let g = fds();
    let _ = FORK_HOLD.try_with(|h| *h.borrow_mut() = Some(g));
}

extern "C" fn atfork_parent() {
    let _ = FORK_HOLD.try_with(|h| h.borrow_mut().take());
    let (head, base) = current_ring();
    point_watch(head, base);
}

/// The child: the forking thread's mapping does not exist here and the
/// other threads do not either; their descriptors are closed, and the
/// forking thread gets an event of its own when tracking is on.
extern "C" fn atfork_child() {
    // The parent's ring is not mapped here, whatever follows: no state
    // bound from now on is pointed at it (the bound one was in prepare).
    let _ = CURRENT.try_with(|c| c.set((core::ptr::null(), 0)));
    let mine = with_thread(|t| {
        let fd = t.ring.as_ref().map(|r| r.raw_fd());
        if let Some(r) = t.ring.take() {
            point_bound(untracked_head(), 0);
            r.forget_after_fork();
            // The ring is not mapped here: its last count is the one read
            // in the prepare step, plus what the margin covers.
            t.next_base = t.base.max(1) + FORK_HEAD.try_with(|f| f.get()).unwrap_or(0) + FORK_MARGIN;
            t.base = 0;
        }
        t.id = 0;
        t.status = LATTE_SCHED_PENDING;
        fd
    })
    .flatten();
    if let Ok(Some(mut g)) = FORK_HOLD.try_with(|h| h.borrow_mut().take()) {
        for &fd in g.iter().filter(|&&fd| Some(fd) != mine) {
            // SAFETY: an inherited descriptor of an event of a thread that
            // does not exist in this process; nothing here uses it.
            unsafe { libc::close(fd) };
        }
        g.clear();
    }
    // A new process: its own counts.
    TRACKED.store(0, Ordering::Relaxed);
    OPENED.store(0, Ordering::Relaxed);
    for r in &REFUSED {
        r.store(0, Ordering::Relaxed);
    }
    LAST_REFUSAL.store(0, Ordering::Relaxed);
    if ENABLED.load(Ordering::Relaxed) == ENABLED_ON {
        with_thread(|t| {
            let _ = t.open(); // a refusal is kept in the thread's status
        });
    }
}
