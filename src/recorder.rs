//! Recording: Start pushes onto the calling thread's span stack, Stop pops
//! the innermost span and appends a sample to the thread's ring for that ID.
//!
//! Hot path (`start`, `stop`, `pulse`): no lock, no atomic read-modify-write,
//! no allocation. Start finds the ring through a per-thread direct-mapped
//! cache keyed by the ID pointer and pushes it with the TSC; Stop pops it
//! and writes the sample. A cache miss goes to `resolve`, which interns the
//! ID, finds or allocates the (thread, ID) slot under the registry lock and
//! fills the cache. A pulse keeps its ring in its call-site state.
//! `include/latte_inline.h` is the same hot path in C.
//!
//! Writer protocol for a ring (single writer: the owning thread):
//! 1. `idx = write_idx` (relaxed: only this thread stores it);
//! 2. store both words of `samples[idx & mask]` with release: a reader
//!    whose relaxed load sees either word, followed by its acquire fence,
//!    then also sees every earlier publish, so its second load of
//!    `write_idx` is at least `idx` and tells it the slot was being
//!    overwritten (the seqlock writer rule; plain moves on x86);
//! 3. `write_idx = idx + 1` with release (publishes the sample).

use crate::layout::*;
use crate::region::{bump, Region};
use crate::{intern::Interner, tsc};
use core::cell::{Cell, UnsafeCell};
use core::ffi::c_char;
use core::sync::atomic::{fence, AtomicBool, AtomicPtr, Ordering};
use std::collections::VecDeque;

// ---------------------------------------------------------------- lock ----

/// A spin lock usable around fork (pthread_atfork needs lock and unlock in
/// separate callbacks, which a std MutexGuard cannot span).
pub struct SpinLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by `locked`.
unsafe impl<T: Send> Sync for SpinLock<T> {}

pub struct Guard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    pub const fn new(v: T) -> Self {
        SpinLock { locked: AtomicBool::new(false), data: UnsafeCell::new(v) }
    }

    fn acquire(&self) {
        let mut spins = 0u32;
        // Acquire on success: the holder's writes (released in `release`) are visible.
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            spins += 1;
            if spins < 64 {
                core::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    fn release(&self) {
        // Release: publishes everything written under the lock.
        self.locked.store(false, Ordering::Release);
    }

    pub fn lock(&self) -> Guard<'_, T> {
        self.acquire();
        Guard { lock: self }
    }
}

impl<T> core::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> core::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock exclusively.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.lock.release();
    }
}

// ------------------------------------------------------------ registry ----

/// Process-wide recorder state, behind `REGISTRY`.
pub struct Registry {
    pub region: Option<&'static Region>,
    pub interner: Interner,
    /// Every thread state ever allocated (live, or pooled for reuse).
    threads: Vec<*mut latte_thread>,
    /// States of exited threads, ready for new threads.
    free_threads: Vec<*mut latte_thread>,
    next_thread_idx: u32,
    /// Owner state of each handed-out slot.
    slot_owner: Vec<*mut latte_thread>,
    /// Slots of exited threads, oldest first: reused only when no fresh slot is left.
    reusable: VecDeque<u32>,
    /// Set once a thread recorded: the region can no longer be replaced.
    pub recording_began: bool,
    atfork_installed: bool,
}

// SAFETY: the raw pointers are thread states and slots that live for the
// whole process; the registry is only touched under its lock.
unsafe impl Send for Registry {}

pub static REGISTRY: SpinLock<Registry> = SpinLock::new(Registry {
    region: None,
    interner: Interner::new(),
    threads: Vec::new(),
    free_threads: Vec::new(),
    next_thread_idx: 0,
    slot_owner: Vec::new(),
    reusable: VecDeque::new(),
    recording_began: false,
    atfork_installed: false,
});

/// The installed region, for lock-free readers in this process. Set once
/// under the registry lock (release), read with acquire; never unmapped.
pub static REGION: AtomicPtr<Region> = AtomicPtr::new(core::ptr::null_mut());

impl Registry {
    /// The region, creating the default private one on first need.
    pub fn region(&mut self) -> Result<&'static Region, i32> {
        if let Some(r) = self.region {
            return Ok(r);
        }
        let r = Region::create_private(LATTE_MAX_IDS, LATTE_DEFAULT_PRIVATE_SLOTS, LATTE_DEFAULT_SAMPLES)?;
        self.install(r);
        Ok(self.region.unwrap())
    }

    /// Makes `r` the region everything records into and readers read.
    pub fn install(&mut self, r: Region) {
        let leaked: &'static Region = Box::leak(Box::new(r));
        self.region = Some(leaked);
        self.slot_owner.clear();
        self.reusable.clear();
        self.interner.reload(leaked);
        // Release: the region's initialised header is visible to any reader
        // that loads the pointer with acquire.
        REGION.store(leaked as *const Region as *mut Region, Ordering::Release);
        if !self.atfork_installed {
            // SAFETY: the three handlers are valid extern "C" functions with no arguments.
            unsafe { libc::pthread_atfork(Some(atfork_prepare), Some(atfork_parent), Some(atfork_child)) };
            self.atfork_installed = true;
        }
    }

    fn new_thread(&mut self) -> Result<*mut latte_thread, i32> {
        let region = self.region()?;
        self.recording_began = true;
        let t = match self.free_threads.pop() {
            Some(t) => t,
            None => {
                // SAFETY: an all-zero latte_thread is valid (integers, null
                // pointers, arrays of them); the Box is leaked into `threads`.
                let b: Box<latte_thread> = unsafe { Box::new(core::mem::zeroed()) };
                let p = Box::into_raw(b);
                self.threads.push(p);
                p
            }
        };
        // SAFETY: `t` is a pooled or fresh state no thread owns now.
        let s = unsafe { &mut *t };
        s.depth = 0;
        s.thread_idx = self.next_thread_idx;
        self.next_thread_idx = self.next_thread_idx.wrapping_add(1);
        s.sample_mask = region.geometry().samples_per_slot as u64 - 1;
        s.overflow_starts = 0;
        s.orphan_stops = 0;
        s.dropped = 0;
        for e in s.cache.iter_mut() {
            e.key = LATTE_CACHE_EMPTY as *const c_char;
            e.slot = core::ptr::null_mut();
        }
        s.slots_by_token = [core::ptr::null_mut(); 256];
        s.os_tid = tsc::gettid();
        s.alive = 1;
        bump(&region.header().threads_seen, 1);
        Ok(t)
    }

    /// Hands a slot to (thread `t`, `token`): a fresh one while any is left,
    /// else the oldest slot of an exited thread. None when neither exists.
    fn allocate_slot(&mut self, t: &latte_thread, token: u32) -> Option<*mut latte_slot_header> {
        let region = self.region?;
        let h = region.header();
        let used = h.slots_used.load(Ordering::Relaxed);
        let (i, fresh) = if used < region.geometry().slot_capacity {
            (used, true)
        } else if let Some(i) = self.reusable.pop_front() {
            (i, false)
        } else {
            return None;
        };
        let slot = region.slot(i);
        // SAFETY: slot i is inside the region; we hold the registry lock, the
        // only place slots are (re)assigned, and its previous owner is gone.
        let sh = unsafe { &*slot };
        let old_gen = sh.generation.load(Ordering::Relaxed);
        if !fresh {
            let written = sh.write_idx.load(Ordering::Relaxed);
            bump(&h.slot_reuses, 1);
            bump(&h.reuse_discarded, written.min(region.geometry().samples_per_slot as u64));
        }
        // Seqlock-style reassignment: generation 0 marks "changing"; the
        // release fence orders that store before the metadata stores, and
        // the final release store publishes the new metadata.
        sh.generation.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        sh.write_idx.store(0, Ordering::Relaxed);
        sh.id_token.store(token, Ordering::Relaxed);
        sh.thread_idx.store(t.thread_idx, Ordering::Relaxed);
        sh.os_tid.store(t.os_tid, Ordering::Relaxed);
        sh.state.store(LATTE_SLOT_LIVE, Ordering::Relaxed);
        let mut g = old_gen.wrapping_add(1);
        if g == 0 {
            g = 1;
        }
        sh.generation.store(g, Ordering::Release);
        let owner = t as *const latte_thread as *mut latte_thread;
        if fresh {
            self.slot_owner.push(owner);
            // Release: the slot's metadata is published before readers count it.
            h.slots_used.store(used + 1, Ordering::Release);
        } else {
            self.slot_owner[i as usize] = owner;
        }
        Some(slot)
    }

    /// Marks a thread's slots closed and reusable, and pools its state.
    fn retire_thread(&mut self, t: *mut latte_thread) {
        // SAFETY: `t` is the exiting thread's own state (or, in a fork child,
        // a state whose thread does not exist there).
        let s = unsafe { &mut *t };
        if s.alive == 0 {
            return;
        }
        s.alive = 0;
        if let Some(region) = self.region {
            let base = region.slot(0) as usize;
            let stride = region.geometry().slot_stride as usize;
            for p in s.slots_by_token.iter_mut() {
                if p.is_null() {
                    continue;
                }
                // SAFETY: a slot this thread owns, inside the region.
                let sh = unsafe { &**p };
                // Release: every sample this thread wrote is visible to a
                // reader that sees CLOSED with acquire; the ring is final.
                sh.state.store(LATTE_SLOT_CLOSED, Ordering::Release);
                self.reusable.push_back(((*p as usize - base) / stride) as u32);
                *p = core::ptr::null_mut();
            }
        }
        self.free_threads.push(t);
    }
}

// ------------------------------------------------------- thread states ----

thread_local! {
    /// The calling thread's state (no destructor: fast access).
    static STATE: Cell<*mut latte_thread> = const { Cell::new(core::ptr::null_mut()) };
    /// Retires the state at thread exit.
    static EXIT_GUARD: ExitGuard = const { ExitGuard };
}

struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let t = STATE.with(|c| c.replace(core::ptr::null_mut()));
        if !t.is_null() {
            REGISTRY.lock().retire_thread(t);
        }
    }
}

/// The calling thread's state, created on first use. NULL when it cannot be
/// created (during thread teardown, or the region could not be made).
#[inline(always)]
pub fn current() -> *mut latte_thread {
    let t = STATE.with(|c| c.get());
    if !t.is_null() {
        return t;
    }
    current_slow()
}

#[cold]
#[inline(never)]
fn current_slow() -> *mut latte_thread {
    // Register the exit guard first; if this thread's TLS is being torn
    // down, refuse rather than leak a state nobody retires.
    if EXIT_GUARD.try_with(|_| ()).is_err() {
        note_late_drop();
        return core::ptr::null_mut();
    }
    let t = match REGISTRY.lock().new_thread() {
        Ok(t) => t,
        Err(_) => return core::ptr::null_mut(),
    };
    STATE.with(|c| c.set(t));
    t
}

fn note_late_drop() {
    if let Some(r) = REGISTRY.lock().region {
        bump(&r.header().late_drops, 1);
    }
}

/// The calling thread's state if it has one (never creates it).
pub fn current_if_any() -> *mut latte_thread {
    STATE.try_with(|c| c.get()).unwrap_or(core::ptr::null_mut())
}

// ----------------------------------------------------------- hot path ----

/// Appends one sample to a ring (the writer protocol in the module doc).
///
/// # Safety
/// `slot` is a slot owned by the calling thread, `mask` its region's mask.
#[inline(always)]
pub unsafe fn write_sample(slot: *mut latte_slot_header, mask: u64, start_tsc: u64, packed: u64) {
    // SAFETY: the caller guarantees `slot` is a live slot header of ours.
    let h = unsafe { &*slot };
    // Relaxed: this thread is the only writer of write_idx.
    let idx = h.write_idx.load(Ordering::Relaxed);
    // SAFETY: (idx & mask) < samples_per_slot, so the sample is inside the slot.
    let s = unsafe { &*((slot as *mut u8).add(LATTE_SLOT_HEADER_SIZE as usize) as *const latte_sample).add((idx & mask) as usize) };
    // Release: every earlier publish happens-before these stores for a
    // reader whose acquire fence follows a load of them (module doc, step 2).
    s.start_tsc.store(start_tsc, Ordering::Release);
    s.packed.store(packed, Ordering::Release);
    // Release: publishes the sample's two stores.
    h.write_idx.store(idx + 1, Ordering::Release);
}

/// Opens a span on the thread's stack, resolving its ring now (cache hit:
/// one compare). The TSC is read last, so the bookkeeping is outside the
/// measured interval.
#[inline(always)]
pub fn start(t: &mut latte_thread, id: *const c_char, mode: latte_mode) {
    let d = t.depth as usize;
    if d >= LATTE_MAX_DEPTH as usize {
        note_overflow(t);
        return;
    }
    let mode = tsc::normalize_mode(mode);
    let e = &t.cache[cache_index(id)];
    let slot = if e.key == id { e.slot } else { resolve(t, id) };
    t.frames[d].slot = slot;
    t.depth = d as u32 + 1;
    t.frames[d].tsc_mode = (tsc::read_start(mode) & LATTE_FRAME_TSC_MASK) | ((mode as u64) << LATTE_FRAME_MODE_SHIFT);
}

/// Closes the innermost open span and records it; returns its duration in
/// cycles, 0 when nothing was open. The TSC is read first.
#[inline(always)]
pub fn stop(t: &mut latte_thread, mode: latte_mode) -> u64 {
    stop_at(t, mode, tsc::read_stop(mode))
}

/// `stop` with the TSC already read (callers read it before looking up
/// their thread state, so that lookup stays outside the measured span).
#[inline(always)]
pub fn stop_at(t: &mut latte_thread, mode: latte_mode, now: u64) -> u64 {
    let d = t.depth as usize;
    if d == 0 {
        note_orphan(t);
        return 0;
    }
    let d = d - 1;
    t.depth = d as u32;
    let f = &t.frames[d];
    let start_tsc = f.tsc_mode & LATTE_FRAME_TSC_MASK;
    let dur = (now & LATTE_FRAME_TSC_MASK).saturating_sub(start_tsc);
    if !f.slot.is_null() {
        let packed = pack(dur, d as u32, (f.tsc_mode >> LATTE_FRAME_MODE_SHIFT) as u32, tsc::normalize_mode(mode));
        // SAFETY: frames only ever hold NULL or slots this thread owns.
        unsafe { write_sample(f.slot, t.sample_mask, start_tsc, packed) };
    }
    dur
}

/// A pulse from one call site: records the cycles since that site's
/// previous pulse on this thread (the first call only primes the site).
#[inline(always)]
pub fn pulse(t: &mut latte_thread, site: &mut latte_pulse_site, id: *const c_char) {
    let now = tsc::rdtsc();
    let last = site.last_tsc;
    site.last_tsc = now;
    if site.id != id || site.slot.is_null() {
        site.slot = resolve(t, id);
        site.id = id;
        if site.slot.is_null() {
            return;
        }
    }
    if last == 0 {
        return;
    }
    let packed = pack(now.saturating_sub(last), t.depth, LATTE_MODE_PULSE, LATTE_MODE_PULSE);
    // SAFETY: the site's slot was resolved by this thread for `id`.
    unsafe { write_sample(site.slot, t.sample_mask, last, packed) };
}

// ---------------------------------------------------------- slow paths ----

/// A Start beyond 64 open spans: ignored, counted.
#[cold]
#[inline(never)]
pub fn note_overflow(t: &mut latte_thread) {
    t.overflow_starts += 1;
    if let Some(r) = region_if_any() {
        bump(&r.header().overflow_starts, 1);
    }
}

/// A Stop with nothing open: ignored, counted.
#[cold]
#[inline(never)]
pub fn note_orphan(t: &mut latte_thread) {
    t.orphan_stops += 1;
    if let Some(r) = region_if_any() {
        bump(&r.header().orphan_stops, 1);
    }
}

/// The installed region, without locking.
pub fn region_if_any() -> Option<&'static Region> {
    // Acquire pairs with the release in `install`.
    let p = REGION.load(Ordering::Acquire);
    // SAFETY: a non-null REGION points to a leaked, never-freed Region.
    if p.is_null() { None } else { Some(unsafe { &*p }) }
}

/// Cache miss: intern the ID, find or allocate this thread's slot for it,
/// fill the cache, and return the slot. NULL (counted as a dropped span)
/// when the ID or the slot does not fit.
#[cold]
#[inline(never)]
pub fn resolve(t: &mut latte_thread, id: *const c_char) -> *mut latte_slot_header {
    let slot = {
        let mut reg = REGISTRY.lock();
        let region = match reg.region {
            Some(r) => r,
            None => return core::ptr::null_mut(),
        };
        // SAFETY: IDs are NULL or NUL-terminated strings (the API contract).
        let token = match unsafe { reg.interner.intern_ptr(region, id) } {
            Some(tok) => tok,
            None => {
                t.dropped += 1;
                bump(&region.header().unfit_id_drops, 1);
                return core::ptr::null_mut();
            }
        };
        let mut slot = t.slots_by_token[token as usize];
        if slot.is_null() {
            match reg.allocate_slot(t, token) {
                Some(s) => {
                    slot = s;
                    t.slots_by_token[token as usize] = s;
                }
                None => {
                    t.dropped += 1;
                    bump(&region.header().no_slot_drops, 1);
                    return core::ptr::null_mut();
                }
            }
        }
        slot
    };
    let e = &mut t.cache[cache_index(id)];
    e.key = id;
    e.slot = slot;
    slot
}

/// Token of an ID by content (interning it), without recording anything.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string.
pub unsafe fn intern_id(id: *const c_char) -> u32 {
    let mut reg = REGISTRY.lock();
    let region = match reg.region() {
        Ok(r) => r,
        Err(_) => return LATTE_INVALID_ID,
    };
    // SAFETY: forwarded from the caller.
    let name = unsafe { crate::intern::normalize(id) };
    reg.interner.intern_name(region, &name).unwrap_or(LATTE_INVALID_ID)
}

/// Installs a shared region before recording began. -EBUSY once any thread
/// recorded; -EALREADY when a shared region is already installed.
pub fn install_shared(name: &[u8], cfg: &crate::region::latte_region_config) -> Result<(), i32> {
    Region::validate_name(name)?;
    let mut reg = REGISTRY.lock();
    if let Some(r) = reg.region {
        if r.is_shared() {
            return Err(-libc::EALREADY);
        }
    }
    if reg.recording_began {
        return Err(-libc::EBUSY);
    }
    let new = Region::create_shared(name, cfg)?;
    if let Some(old) = reg.region {
        if !new.copy_ids_from(old) {
            // More IDs interned than the new table holds.
            new_unlink(new);
            return Err(-libc::ENOSPC);
        }
    }
    reg.install(new);
    Ok(())
}

fn new_unlink(r: Region) {
    if let Some(n) = r.name() {
        // SAFETY: a valid C string naming the object we just created.
        unsafe { libc::shm_unlink(n.as_ptr()) };
    }
    // SAFETY: r's mapping was never published; unmap it.
    unsafe { libc::munmap(r.base() as *mut libc::c_void, r.geometry().total_size as usize) };
}

// ---------------------------------------------------------------- fork ----

extern "C" fn atfork_prepare() {
    REGISTRY.acquire();
}

extern "C" fn atfork_parent() {
    REGISTRY.release();
}

/// In the child: the forking thread keeps its state; every other thread's
/// state is retired (those threads do not exist here); a shared region is
/// remapped as a private copy-on-write view, so the child never writes into
/// the parent's rings.
extern "C" fn atfork_child() {
    // SAFETY: the lock is held by this (the only) thread since prepare.
    let reg = unsafe { &mut *REGISTRY.data.get() };
    let me = STATE.try_with(|c| c.get()).unwrap_or(core::ptr::null_mut());
    if let Some(r) = reg.region {
        let r = r as *const Region as *mut Region;
        // SAFETY: single-threaded child; the Region is leaked and only read
        // elsewhere through shared references that no other thread holds now.
        unsafe { (*r).privatize_after_fork() };
    }
    let others: Vec<*mut latte_thread> = reg.threads.iter().copied().filter(|&t| t != me).collect();
    for t in others {
        reg.retire_thread(t);
    }
    REGISTRY.release();
}

// ------------------------------------------------------------ counters ----

/// Per-thread counters of the calling thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct latte_thread_counters {
    /// Process-wide index of this thread.
    pub thread_idx: u32,
    /// Spans open now.
    pub depth: u32,
    /// Starts ignored beyond 64 open spans.
    pub overflow_starts: u64,
    /// Stops ignored with nothing open.
    pub orphan_stops: u64,
    /// Spans not recorded (ID table or slots full).
    pub dropped: u64,
}

/// Process-wide counters (from the region header).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct latte_counters {
    pub overflow_starts: u64,
    pub orphan_stops: u64,
    pub unfit_id_drops: u64,
    pub no_slot_drops: u64,
    pub slot_reuses: u64,
    pub reuse_discarded: u64,
    pub late_drops: u64,
    pub threads_seen: u64,
    pub ids_used: u32,
    pub slots_used: u32,
}

/// Reads the process-wide counters of a region header.
pub fn counters_of(h: &latte_region_header) -> latte_counters {
    // Relaxed: statistics; no data is read on the strength of them.
    let l = |a: &core::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    latte_counters {
        overflow_starts: l(&h.overflow_starts),
        orphan_stops: l(&h.orphan_stops),
        unfit_id_drops: l(&h.unfit_id_drops),
        no_slot_drops: l(&h.no_slot_drops),
        slot_reuses: l(&h.slot_reuses),
        reuse_discarded: l(&h.reuse_discarded),
        late_drops: l(&h.late_drops),
        threads_seen: l(&h.threads_seen),
        ids_used: h.ids_used.load(Ordering::Relaxed),
        slots_used: h.slots_used.load(Ordering::Relaxed),
    }
}
