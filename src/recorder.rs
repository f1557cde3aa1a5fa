//! Recording: Start pushes onto the calling thread's span stack, Stop pops
//! the innermost span and appends a sample to the thread's ring for that ID.
//!
//! Hot path (`start`, `stop`, `pulse`): no lock, no atomic read-modify-write,
//! no allocation. Start finds the ring through a per-thread open-addressed
//! cache keyed by the ID pointer (at most half full: nearly always found at
//! its home entry or the next) and pushes it with the TSC; Stop pops it
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
//!
//! Span stack protocol (signal handlers). A signal handler that records on
//! the thread it interrupted runs a whole Start and Stop between two steps
//! of the interrupted one, and leaves `depth`, `top_slot` and every frame
//! at or above `depth` as it found them; so the interrupted call is correct
//! when each step below holds whatever the handler does before it. The
//! steps are kept in order by compiler fences (a thread sees its own
//! accesses in program order; no CPU fence is needed).
//! - Start at depth `d`: S1 `depth = d + 1` (frame `d` is now taken: a
//!   handler's Start uses `d + 1`); S2 save the outer ring (`top_slot`) and
//!   this span's depth and mode in `frame_word[d]`; S3 `top_slot` = this
//!   span's ring; then the TSC into `frame_tsc[d]`. A handler before S1
//!   uses frame `d` and is done with it before S2 writes it; between S1
//!   and S3 it saves and restores the outer ring in frame `d + 1`.
//! - Stop at depth `d`: P1 read `top_slot`, `frame_word[d - 1]` and
//!   `frame_tsc[d - 1]`; P2 `top_slot` = the outer ring; P3 `depth = d - 1`
//!   (frame `d - 1` is free again); then write the sample. A handler before
//!   P3 sees the span still open and uses frame `d`.
//! A handler's span shares a ring with the interrupted code only when both
//! use one ID; a sample written into that ring while the interrupted one is
//! between steps 1 and 3 of the ring writer is lost (overwritten). The slow
//! paths take the registry lock; one that interrupts the lock's holder on
//! its own thread is refused (`Lock::lock_unless_held`) and counted in
//! `reentrant_drops`, and its span goes to a sink.

use crate::layout::*;
use crate::region::{bump, Region};
use crate::{intern::Interner, tsc};
use core::cell::{Cell, UnsafeCell};
use core::ffi::c_char;
use core::sync::atomic::{compiler_fence, fence, AtomicPtr, AtomicU64, Ordering};
use std::collections::VecDeque;

// ---------------------------------------------------------------- lock ----

/// The registry's lock: a pthread mutex, taken only on slow paths.
///
/// A pthread mutex rather than a spin lock on an atomic: ThreadSanitizer
/// intercepts `pthread_mutex_lock`/`unlock` wherever they are called from,
/// so a program built with `-fsanitize=thread` sees the ordering this lock
/// gives (latte itself is not instrumented; an atomic spin lock would be
/// invisible, and the allocations made under it would be reported as
/// races). `acquire` and `release` are separate so that `pthread_atfork`'s
/// prepare and parent/child callbacks can hold it across a fork.
pub struct Lock<T> {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by `mutex`.
unsafe impl<T: Send> Sync for Lock<T> {}

pub struct Guard<'a, T> {
    lock: &'a Lock<T>,
}

thread_local! {
    /// Whether the calling thread holds the registry lock (the one `Lock`
    /// there is). A signal handler that records on a thread interrupted
    /// while holding it must not take it again: see `lock_unless_held`.
    static HOLDS_REGISTRY: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread holds the registry lock now.
pub fn registry_held_here() -> bool {
    HOLDS_REGISTRY.with(|h| h.get())
}

impl<T> Lock<T> {
    pub const fn new(v: T) -> Self {
        Lock { mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER), data: UnsafeCell::new(v) }
    }

    fn acquire(&self) {
        // SAFETY: a statically initialised mutex that is never moved (the
        // lock lives in a static) nor destroyed. A default mutex's lock
        // acquires: the holder's writes, released by unlock, are visible.
        let rc = unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
        debug_assert_eq!(rc, 0);
    }

    fn release(&self) {
        // SAFETY: as in `acquire`; called only by the holder (or, in a fork
        // child, by the thread that forked while holding it). Unlock
        // releases everything written under the lock.
        let rc = unsafe { libc::pthread_mutex_unlock(self.mutex.get()) };
        debug_assert_eq!(rc, 0);
    }

    pub fn lock(&self) -> Guard<'_, T> {
        // Set before acquiring and cleared after releasing, so that a
        // signal handler never finds the lock held by its own thread with
        // the flag down (it may find the flag up while the lock is only
        // being taken or has just been let go: it refuses then too).
        HOLDS_REGISTRY.with(|h| h.set(true));
        compiler_fence(Ordering::SeqCst);
        self.acquire();
        Guard { lock: self }
    }

    /// The lock, or None when the calling thread already holds it: a
    /// signal handler interrupted the holder on this thread, and waiting
    /// would wait for ever (the recording slow paths refuse instead).
    pub fn lock_unless_held(&self) -> Option<Guard<'_, T>> {
        if registry_held_here() {
            return None;
        }
        Some(self.lock())
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
        compiler_fence(Ordering::SeqCst);
        HOLDS_REGISTRY.with(|h| h.set(false));
    }
}

// ------------------------------------------------------------ registry ----

/// Rust-private per-thread state: identity, counters and the thread's
/// rings by token. Pooled when the thread exits.
pub struct Cold {
    thread_idx: u32,
    os_tid: u32,
    alive: bool,
    overflow_starts: u64,
    orphan_stops: u64,
    dropped: u64,
    slots_by_token: [*mut latte_slot_header; 256],
    /// Second level behind the hot cache: ID pointer -> this thread's ring,
    /// so that IDs whose pointers collide in the direct-mapped cache cost a
    /// probe here, not the registry lock. Cleared when it fills up.
    by_ptr: PtrMap,
}

/// An open-addressing map from ID pointers to rings, thread-private.
struct PtrMap {
    keys: Box<[usize; PTR_MAP_SIZE]>,
    slots: Box<[*mut latte_slot_header; PTR_MAP_SIZE]>,
    len: usize,
}

const PTR_MAP_SIZE: usize = 512;
/// Key of an empty entry (no string lives at address 0: NULL IDs are not cached).
const PTR_MAP_EMPTY: usize = 0;

impl PtrMap {
    fn new() -> PtrMap {
        PtrMap { keys: Box::new([PTR_MAP_EMPTY; PTR_MAP_SIZE]), slots: Box::new([core::ptr::null_mut(); PTR_MAP_SIZE]), len: 0 }
    }

    fn clear(&mut self) {
        self.keys.fill(PTR_MAP_EMPTY);
        self.len = 0;
    }

    fn home(key: usize) -> usize {
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55) as usize & (PTR_MAP_SIZE - 1)
    }

    fn get(&self, key: usize) -> Option<*mut latte_slot_header> {
        let mut i = Self::home(key);
        loop {
            match self.keys[i] {
                PTR_MAP_EMPTY => return None,
                k if k == key => return Some(self.slots[i]),
                _ => i = (i + 1) & (PTR_MAP_SIZE - 1),
            }
        }
    }

    fn insert(&mut self, key: usize, slot: *mut latte_slot_header) {
        if key == PTR_MAP_EMPTY {
            return;
        }
        // At most half full, so probes stay short and `get` always ends.
        if self.len >= PTR_MAP_SIZE / 2 {
            self.clear();
        }
        let mut i = Self::home(key);
        while self.keys[i] != PTR_MAP_EMPTY && self.keys[i] != key {
            i = (i + 1) & (PTR_MAP_SIZE - 1);
        }
        if self.keys[i] == PTR_MAP_EMPTY {
            self.len += 1;
        }
        self.keys[i] = key;
        self.slots[i] = slot;
    }
}

/// Process-wide recorder state, behind `REGISTRY`.
pub struct Registry {
    pub region: Option<&'static Region>,
    pub interner: Interner,
    /// Every cold state ever allocated (live, or pooled for reuse).
    colds: Vec<*mut Cold>,
    /// Cold states of exited threads, ready for new threads.
    free_colds: Vec<*mut Cold>,
    /// Hot states Rust allocated for threads that no longer use them.
    free_hots: Vec<*mut latte_thread>,
    next_thread_idx: u32,
    /// Slots of exited threads, oldest first: reused only when no fresh slot is left.
    reusable: VecDeque<u32>,
    /// Set once a thread recorded: the region can no longer be replaced.
    pub recording_began: bool,
    atfork_installed: bool,
}

// SAFETY: the raw pointers are thread states and slots that live for the
// whole process; the registry is only touched under its lock.
unsafe impl Send for Registry {}

pub static REGISTRY: Lock<Registry> = Lock::new(Registry {
    region: None,
    interner: Interner::new(),
    colds: Vec::new(),
    free_colds: Vec::new(),
    free_hots: Vec::new(),
    next_thread_idx: 0,
    reusable: VecDeque::new(),
    recording_began: false,
    atfork_installed: false,
});

/// The installed region, for lock-free readers in this process. Set once
/// under the registry lock (release), read with acquire; never unmapped.
pub static REGION: AtomicPtr<Region> = AtomicPtr::new(core::ptr::null_mut());

/// Where a span goes that cannot be recorded (its ID or slot did not fit,
/// or its thread is being torn down): a private ring as large as the
/// region's, never read. Frames always hold a writable ring, so Stop needs
/// no NULL test. Set with the region (release), read with acquire.
static SINK: AtomicPtr<latte_slot_header> = AtomicPtr::new(core::ptr::null_mut());

/// A one-sample sink for states that were never attached (mask 0).
#[repr(C, align(64))]
struct Sink0 {
    header: latte_slot_header,
    sample: latte_sample,
}

// SAFETY: all-zero atomics and integers are valid values of both types.
static SINK0: Sink0 = unsafe { core::mem::zeroed() };

/// The ring for a span that cannot be recorded: a sink that fits `t`'s mask.
pub fn unrecordable(t: &latte_thread) -> *mut latte_slot_header {
    // Acquire: pairs with the swap in `install`, which published the sink
    // mapping (zero-filled by mmap) before its address.
    let big = SINK.load(Ordering::Acquire);
    if t.sample_mask == 0 || big.is_null() {
        // Every write through it is an atomic store, so sharing it between
        // threads is sound (its contents are meaningless by design).
        &SINK0.header as *const latte_slot_header as *mut latte_slot_header
    } else {
        big
    }
}

impl Registry {
    /// The region, creating the default private one on first need.
    pub fn region(&mut self) -> Result<&'static Region, i32> {
        if let Some(r) = self.region {
            return Ok(r);
        }
        let r = Region::create_private(LATTE_MAX_IDS, LATTE_DEFAULT_PRIVATE_SLOTS, LATTE_DEFAULT_SAMPLES)?;
        self.install(r)?;
        Ok(self.region.unwrap())
    }

    /// Makes `r` the region everything records into and readers read.
    pub fn install(&mut self, r: Region) -> Result<(), i32> {
        let stride = r.geometry().slot_stride as usize;
        let sink = crate::region::map_anonymous(stride)?;
        let old_sink = SINK.swap(sink as *mut latte_slot_header, Ordering::AcqRel);
        if !old_sink.is_null() {
            // Only replaced before any thread recorded, so no state holds it.
            let old_stride = self.region.map(|o| o.geometry().slot_stride as usize).unwrap_or(0);
            // SAFETY: the previous sink mapping, of the previous region's stride.
            unsafe { libc::munmap(old_sink as *mut libc::c_void, old_stride) };
        }
        let leaked: &'static Region = Box::leak(Box::new(r));
        self.region = Some(leaked);
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
        Ok(())
    }

    fn new_cold(&mut self) -> Result<*mut Cold, i32> {
        let region = self.region()?;
        self.recording_began = true;
        let c = match self.free_colds.pop() {
            Some(c) => c,
            None => {
                let p = Box::into_raw(Box::new(Cold {
                    thread_idx: 0,
                    os_tid: 0,
                    alive: false,
                    overflow_starts: 0,
                    orphan_stops: 0,
                    dropped: 0,
                    slots_by_token: [core::ptr::null_mut(); 256],
                    by_ptr: PtrMap::new(),
                }));
                self.colds.push(p);
                p
            }
        };
        // SAFETY: `c` is a pooled or fresh state no thread owns now.
        let s = unsafe { &mut *c };
        s.thread_idx = self.next_thread_idx;
        self.next_thread_idx = self.next_thread_idx.wrapping_add(1);
        s.overflow_starts = 0;
        s.orphan_stops = 0;
        s.dropped = 0;
        s.slots_by_token = [core::ptr::null_mut(); 256];
        s.by_ptr.clear();
        s.os_tid = tsc::gettid();
        s.alive = true;
        bump(&region.header().threads_seen, 1);
        Ok(c)
    }

    fn new_hot(&mut self) -> *mut latte_thread {
        match self.free_hots.pop() {
            Some(h) => h,
            None => {
                // SAFETY: an all-zero latte_thread is valid (integers and
                // null pointers); the Box is leaked into the pool's care.
                let b: Box<latte_thread> = unsafe { Box::new(core::mem::zeroed()) };
                Box::into_raw(b)
            }
        }
    }

    /// Hands a slot to (thread `c`, `token`): a fresh one while any is left,
    /// else the oldest slot of an exited thread. None when neither exists.
    fn allocate_slot(&mut self, c: &Cold, token: u32) -> Option<*mut latte_slot_header> {
        let region = self.region?;
        let h = region.header();
        // Relaxed, here and for the slot's old generation and index below:
        // the registry lock is held, and only its holder stores these (the
        // index: the slot's previous owner, which exited before the slot
        // became reusable, its last store ordered by the lock it took then).
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
        sh.thread_idx.store(c.thread_idx, Ordering::Relaxed);
        sh.os_tid.store(c.os_tid, Ordering::Relaxed);
        sh.state.store(LATTE_SLOT_LIVE, Ordering::Relaxed);
        let mut g = old_gen.wrapping_add(1);
        if g == 0 {
            g = 1;
        }
        sh.generation.store(g, Ordering::Release);
        if fresh {
            // Release: the slot's metadata is published before readers count it.
            h.slots_used.store(used + 1, Ordering::Release);
        }
        Some(slot)
    }

    /// Marks a thread's slots closed and reusable, and pools its cold state.
    fn retire_cold(&mut self, c: *mut Cold) {
        // SAFETY: `c` is the exiting thread's own cold state (or, in a fork
        // child, one whose thread does not exist there).
        let s = unsafe { &mut *c };
        if !s.alive {
            return;
        }
        s.alive = false;
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
        s.by_ptr.clear();
        self.free_colds.push(c);
    }
}

// ------------------------------------------------------- thread states ----

thread_local! {
    /// The calling thread's active hot state (no destructor: fast access).
    static STATE: Cell<*mut latte_thread> = const { Cell::new(core::ptr::null_mut()) };
    /// The calling thread's cold state.
    static COLD: Cell<*mut Cold> = const { Cell::new(core::ptr::null_mut()) };
    /// The hot state Rust allocated for this thread, if any (pooled at exit
    /// or when a caller's own state takes over).
    static OWN_HOT: Cell<*mut latte_thread> = const { Cell::new(core::ptr::null_mut()) };
    /// Retires the thread at exit.
    static EXIT_GUARD: ExitGuard = const { ExitGuard };
}

struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        // The main thread's thread-local destructors run at exit, before
        // atexit handlers and static destructors, which programs use to
        // time their shutdown and report: its state stays attached (the
        // process is ending; its rings need not be handed to anyone).
        // SAFETY: getpid and gettid have no memory effects.
        if unsafe { libc::getpid() } as u32 == tsc::gettid() {
            return;
        }
        let hot = STATE.with(|c| c.replace(core::ptr::null_mut()));
        let cold = COLD.with(|c| c.replace(core::ptr::null_mut()));
        let own = OWN_HOT.with(|c| c.replace(core::ptr::null_mut()));
        if !hot.is_null() {
            // SAFETY: this thread's active state: Rust's or the caller's
            // thread-local, which stays valid while thread-local destructors run.
            detach(unsafe { &mut *hot });
        }
        let mut reg = REGISTRY.lock();
        if !cold.is_null() {
            reg.retire_cold(cold);
        }
        if !own.is_null() {
            reg.free_hots.push(own);
        }
    }
}

/// Empties a hot state's cache and stack, so that its next use (a late
/// Start or Stop, or a Start through it after it lost the thread to
/// another state) goes through a slow path. Keeps its mask.
fn detach(t: &mut latte_thread) {
    t.depth = 0;
    t.attached = 0;
    clear_cache(t);
}

/// Empties a hot state's ID cache.
fn clear_cache(t: &mut latte_thread) {
    for e in t.cache.iter_mut() {
        e.key = LATTE_CACHE_EMPTY as *const c_char;
        e.slot = core::ptr::null_mut();
    }
    t.cache_used = 0;
}

/// The cached ring of `id`, probing from `i` (its home entry); None at the
/// first empty entry. The
/// cache is never full, so the probe ends. NULL is never cached.
#[inline(always)]
pub fn cache_probe(t: &latte_thread, id: *const c_char, mut i: usize) -> Option<*mut latte_slot_header> {
    if id.is_null() {
        return None;
    }
    loop {
        let e = &t.cache[i];
        if e.key == id {
            return Some(e.slot);
        }
        if e.key as usize == LATTE_CACHE_EMPTY {
            return None;
        }
        i = cache_next(i);
    }
}

/// Adds `id` -> `slot` to the cache at the first empty entry of its probe
/// order, emptying the cache first when it is half full.
fn cache_insert(t: &mut latte_thread, id: *const c_char, slot: *mut latte_slot_header) {
    if id.is_null() {
        return;
    }
    if t.cache_used >= LATTE_CACHE_MAX_USED as u64 {
        clear_cache(t);
    }
    let mut i = cache_index(id);
    loop {
        let e = &mut t.cache[i];
        if e.key == id {
            e.slot = slot;
            return;
        }
        if e.key as usize == LATTE_CACHE_EMPTY {
            e.key = id;
            e.slot = slot;
            t.cache_used += 1;
            return;
        }
        i = cache_next(i);
    }
}

/// The calling thread's cold state, created on first use; None while the
/// thread is being torn down or the region cannot be made.
fn cold_or_create() -> Option<*mut Cold> {
    let c = COLD.with(|c| c.get());
    if !c.is_null() {
        return Some(c);
    }
    // Register the exit guard first; if this thread's TLS is being torn
    // down, refuse rather than leak a state nobody retires.
    if EXIT_GUARD.try_with(|_| ()).is_err() {
        return None;
    }
    let c = REGISTRY.lock_unless_held()?.new_cold().ok()?;
    COLD.with(|cell| cell.set(c));
    Some(c)
}

/// Makes `t` the calling thread's active state (attaching it on first use,
/// taking the open spans over from the previous active state). None while
/// the thread is being torn down or the region cannot be made.
///
/// # Safety
/// `t` is a state of the calling thread: its own thread-local, or Rust's.
pub unsafe fn activate(t: *mut latte_thread) -> Option<&'static mut latte_thread> {
    let cur = STATE.with(|c| c.get());
    if cur == t {
        // SAFETY: the caller's guarantee; the active state is valid.
        return if t.is_null() { None } else { Some(unsafe { &mut *t }) };
    }
    if t.is_null() {
        return None;
    }
    cold_or_create()?;
    // cold_or_create made the region if there was none.
    let mask = region_if_any().map(|r| r.geometry().samples_per_slot as u64 - 1).unwrap_or(0);
    // SAFETY: the caller's guarantee: `t` is this thread's, not aliased now.
    let nt = unsafe { &mut *t };
    detach(nt);
    if cur.is_null() {
        nt.sample_mask = mask;
        nt.top_slot = core::ptr::null_mut();
    } else {
        // SAFETY: the previous active state of this thread, distinct from `t`.
        let old = unsafe { &mut *cur };
        let d = old.depth as usize;
        nt.sample_mask = old.sample_mask;
        nt.top_slot = old.top_slot;
        nt.frame_tsc[..d].copy_from_slice(&old.frame_tsc[..d]);
        nt.frame_word[..d].copy_from_slice(&old.frame_word[..d]);
        nt.depth = old.depth;
        detach(old);
        if OWN_HOT.with(|c| c.get()) == cur {
            OWN_HOT.with(|c| c.set(core::ptr::null_mut()));
            // Pooled for reuse; kept by nobody (a small leak) when a signal
            // handler interrupted the lock's holder on this thread.
            if let Some(mut reg) = REGISTRY.lock_unless_held() {
                reg.free_hots.push(cur);
            }
        }
    }
    nt.attached = 1;
    STATE.with(|c| c.set(t));
    Some(nt)
}

/// The calling thread's active state, creating one (Rust's own) on first
/// use. NULL when it cannot be created (during thread teardown, or the
/// region could not be made).
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
    if registry_held_here() || cold_or_create().is_none() {
        note_unavailable();
        return core::ptr::null_mut();
    }
    let h = REGISTRY.lock().new_hot();
    OWN_HOT.with(|c| c.set(h));
    // SAFETY: a state Rust just took for this thread.
    match unsafe { activate(h) } {
        Some(t) => t,
        None => core::ptr::null_mut(),
    }
}

/// A span or pulse after the thread's recorder was torn down: counted.
pub fn note_late_drop() {
    if let Some(r) = region_if_any() {
        bump(&r.header().late_drops, 1);
    }
}

/// Spans refused because a signal handler interrupted latte's own slow
/// path on their thread (which held the registry lock). Process-local.
static REENTRANT_DROPS: AtomicU64 = AtomicU64::new(0);

/// A span or pulse whose thread state could not be had: refused inside a
/// signal handler that interrupted the registry lock's holder, or after
/// the thread's recorder was torn down. Counted as one or the other.
pub fn note_unavailable() {
    if registry_held_here() {
        // Relaxed: a statistic.
        REENTRANT_DROPS.fetch_add(1, Ordering::Relaxed);
    } else {
        note_late_drop();
    }
}

/// The calling thread's active state if it has one (never creates it).
pub fn current_if_any() -> *mut latte_thread {
    STATE.try_with(|c| c.get()).unwrap_or(core::ptr::null_mut())
}

fn with_cold<R>(f: impl FnOnce(&mut Cold) -> R) -> Option<R> {
    let c = COLD.try_with(|c| c.get()).unwrap_or(core::ptr::null_mut());
    // SAFETY: the calling thread's own cold state, touched only by this thread
    // (and by the registry once the thread has exited).
    if c.is_null() {
        None
    } else {
        Some(f(unsafe { &mut *c }))
    }
}

// ----------------------------------------------------------- hot path ----

/// Appends one sample to a ring (the writer protocol in the module doc).
///
/// # Safety
/// `slot` is a slot owned by the calling thread (or a sink), `mask` its
/// region's mask.
#[inline(always)]
pub unsafe fn write_sample(slot: *mut latte_slot_header, mask: u64, start_tsc: u64, packed: u64) {
    // SAFETY: the caller guarantees `slot` is a live slot header of ours.
    // Relaxed: this thread is the only writer of write_idx.
    let idx = unsafe { &*slot }.write_idx.load(Ordering::Relaxed);
    // SAFETY: forwarded; idx is the ring's own index.
    unsafe { write_sample_at(slot, mask, idx, start_tsc, packed) };
}

/// `write_sample` at index `idx`, which must be the ring's current
/// `write_idx`. Returns the new index.
///
/// # Safety
/// As `write_sample`, and `idx == write_idx` of the slot.
#[inline(always)]
pub unsafe fn write_sample_at(slot: *mut latte_slot_header, mask: u64, idx: u64, start_tsc: u64, packed: u64) -> u64 {
    // SAFETY: the caller guarantees `slot` is a live slot header of ours.
    let h = unsafe { &*slot };
    // SAFETY: (idx & mask) < samples_per_slot, so the sample is inside the slot.
    let s = unsafe { &*((slot as *mut u8).add(LATTE_SLOT_HEADER_SIZE as usize) as *const latte_sample).add((idx & mask) as usize) };
    // Release: every earlier publish happens-before these stores for a
    // reader whose acquire fence follows a load of them (module doc, step 2).
    s.start_tsc.store(start_tsc, Ordering::Release);
    s.packed.store(packed, Ordering::Release);
    // Release: publishes the sample's two stores.
    h.write_idx.store(idx + 1, Ordering::Release);
    idx + 1
}

/// Opens a span on the thread's stack, resolving its ring now (cache hit:
/// one compare). The TSC is read last, so the bookkeeping is outside the
/// measured interval.
#[inline(always)]
pub fn start(t: &mut latte_thread, id: *const c_char, mode: latte_mode) {
    let d = t.depth;
    if d >= LATTE_MAX_DEPTH {
        note_overflow(t);
        return;
    }
    let mode = tsc::normalize_mode(mode);
    let h = cache_index(id);
    let slot = if t.cache[h].key == id && !id.is_null() {
        t.cache[h].slot
    } else {
        match cache_probe(t, id, h) {
            Some(s) => s, // further along the probe order
            None => resolve(t, id),
        }
    };
    // (Unlike the C path, `t` here is already the active state, so the
    // slow path cannot have moved spans onto it: the depth still holds.)
    let d = d as usize;
    // Steps S1-S3 of the span stack protocol (module doc).
    t.depth = d as u32 + 1; // S1
    compiler_fence(Ordering::SeqCst);
    t.frame_word[d] = frame_word(t.top_slot, d as u32, mode); // S2
    compiler_fence(Ordering::SeqCst);
    t.top_slot = slot; // S3
    t.frame_tsc[d] = tsc::read_start(mode);
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
    let d = t.depth;
    if d == 0 {
        note_orphan(t);
        return 0;
    }
    // Steps P1-P3 of the span stack protocol (module doc).
    let slot = t.top_slot; // P1
    let d = d as usize - 1;
    let word = t.frame_word[d];
    let start_tsc = t.frame_tsc[d];
    compiler_fence(Ordering::SeqCst);
    t.top_slot = frame_ring(word); // P2
    compiler_fence(Ordering::SeqCst);
    t.depth = d as u32; // P3
    let dur = duration(start_tsc, now);
    let packed = dur | frame_bits(word) | ((tsc::normalize_mode(mode) as u64) << LATTE_STOP_MODE_SHIFT);
    // SAFETY: top_slot is a ring this thread owns or a sink (both fit its mask).
    unsafe { write_sample(slot, t.sample_mask, start_tsc, packed) };
    dur
}

/// A pulse from one call site: records the cycles since that site's
/// previous pulse on this thread (the first call only primes the site).
#[inline(always)]
pub fn pulse(t: &mut latte_thread, site: &mut latte_pulse_site, id: *const c_char) {
    let now = tsc::rdtsc();
    if site.id != id || id.is_null() {
        return pulse_slow(t, site, id, now);
    }
    let last = site.last_tsc;
    site.last_tsc = now;
    let packed = duration(last, now) | pulse_bits(t.depth);
    // SAFETY: the site's slot was resolved by this thread for `id`.
    let h = unsafe { &*site.slot };
    // Relaxed: this thread is the only writer of write_idx.
    site.next_idx = if h.write_idx.load(Ordering::Relaxed) == site.next_idx {
        // SAFETY: as above; next_idx is the ring's index (just compared).
        unsafe { write_sample_at(site.slot, t.sample_mask, site.next_idx, last, packed) }
    } else {
        // Something else wrote the ring (a span, or another site of this ID).
        // SAFETY: as above.
        unsafe { write_sample(site.slot, t.sample_mask, last, packed) };
        h.write_idx.load(Ordering::Relaxed)
    };
}

/// A pulse whose site is not resolved for `id` yet (first call, or a
/// different ID from the same site, or a NULL ID): resolves, primes, and
/// records the interval when the site was primed before.
#[cold]
#[inline(never)]
pub fn pulse_slow(t: &mut latte_thread, site: &mut latte_pulse_site, id: *const c_char, now: u64) {
    let last = site.last_tsc;
    site.last_tsc = now;
    let Some(slot) = resolve_slot(t, id) else {
        // Not cached: every pulse that cannot be recorded is counted.
        site.id = core::ptr::null();
        return;
    };
    site.id = id;
    site.slot = slot;
    // SAFETY: a slot (or sink) of this thread; relaxed: its only writer.
    site.next_idx = unsafe { &*slot }.write_idx.load(Ordering::Relaxed);
    if last == 0 {
        return;
    }
    let packed = duration(last, now) | pulse_bits(t.depth);
    // SAFETY: just resolved for this thread; next_idx was read just now.
    site.next_idx = unsafe { write_sample_at(slot, t.sample_mask, site.next_idx, last, packed) };
}

// ---------------------------------------------------------- slow paths ----

/// A Start beyond 64 open spans: ignored, counted.
#[cold]
#[inline(never)]
pub fn note_overflow(_t: &mut latte_thread) {
    with_cold(|c| c.overflow_starts += 1);
    if let Some(r) = region_if_any() {
        bump(&r.header().overflow_starts, 1);
    }
}

/// A Stop with nothing open: ignored, counted.
#[cold]
#[inline(never)]
pub fn note_orphan(_t: &mut latte_thread) {
    count_orphan();
}

fn count_orphan() {
    with_cold(|c| c.orphan_stops += 1);
    if let Some(r) = region_if_any() {
        bump(&r.header().orphan_stops, 1);
    }
}

/// The installed region, without locking.
pub fn region_if_any() -> Option<&'static Region> {
    // Acquire pairs with the release in `install`.
    let p = REGION.load(Ordering::Acquire);
    // SAFETY: a non-null REGION points to a leaked, never-freed Region.
    if p.is_null() {
        None
    } else {
        Some(unsafe { &*p })
    }
}

/// Cache miss: the ring for `id` on this thread, from `resolve_slot`; the
/// cache is filled on success. On failure (counted there) the span goes
/// to a sink, so the frame still holds a writable ring.
#[cold]
#[inline(never)]
pub fn resolve(t: &mut latte_thread, id: *const c_char) -> *mut latte_slot_header {
    match resolve_slot(t, id) {
        Some(slot) => {
            cache_insert(t, id, slot);
            slot
        }
        None => unrecordable(t),
    }
}

/// Interns the ID and finds or allocates this thread's slot for it. None
/// (counted as a dropped span) when the ID or the slot does not fit, or
/// the thread is being torn down.
pub fn resolve_slot(_t: &mut latte_thread, id: *const c_char) -> Option<*mut latte_slot_header> {
    let Some(c) = COLD.try_with(|c| c.get()).ok().filter(|c| !c.is_null()) else {
        note_late_drop();
        return None;
    };
    // SAFETY: this thread's own cold state.
    let c = unsafe { &mut *c };
    if let Some(slot) = c.by_ptr.get(id as usize) {
        return Some(slot);
    }
    let Some(mut reg) = REGISTRY.lock_unless_held() else {
        note_unavailable();
        return None;
    };
    let region = reg.region?;
    // SAFETY: IDs are NULL or NUL-terminated strings (the API contract).
    let token = match unsafe { reg.interner.intern_ptr(region, id) } {
        Some(tok) => tok,
        None => {
            c.dropped += 1;
            bump(&region.header().unfit_id_drops, 1);
            return None;
        }
    };
    let mut slot = c.slots_by_token[token as usize];
    if slot.is_null() {
        match reg.allocate_slot(c, token) {
            Some(s) => {
                slot = s;
                c.slots_by_token[token as usize] = s;
            }
            None => {
                c.dropped += 1;
                bump(&region.header().no_slot_drops, 1);
                return None;
            }
        }
    }
    c.by_ptr.insert(id as usize, slot);
    Some(slot)
}

/// Resolves the calling thread's ring for `id` as a first Start would (and
/// caches it in the thread's active state), then commits the pages of that
/// ring which no sample has been written to yet, so that its first samples
/// take no page fault. Returns the pages touched (0 for a ring that has
/// wrapped: all of them were written). A service calls it before its hot
/// loop, where it chooses to pay the faults (about a microsecond each, 256
/// for a ring of 65,536 samples); nothing records meanwhile.
///
/// Each page is touched by a locked add of 0 to the first word of its
/// first not-yet-written sample: a write fault that changes no value. Only
/// this thread writes the ring, and no reader looks at an index at or above
/// `write_idx`, so the touch races with nothing.
pub fn prefault(id: *const c_char) -> Result<u64, i32> {
    let t = current();
    if t.is_null() {
        return Err(-libc::ESRCH);
    }
    // SAFETY: the calling thread's active state.
    let t = unsafe { &mut *t };
    let slot = match cache_probe(t, id, cache_index(id)) {
        Some(s) => s,
        None => {
            let s = resolve_slot(t, id).ok_or(-libc::ENOSPC)?;
            cache_insert(t, id, s);
            s
        }
    };
    let cap = t.sample_mask + 1;
    // SAFETY: a slot of this thread inside the region.
    let sh = unsafe { &*slot };
    // Relaxed: this thread is the ring's only writer.
    let w = sh.write_idx.load(Ordering::Relaxed);
    if w >= cap {
        return Ok(0);
    }
    let samples = (slot as usize) + LATTE_SLOT_HEADER_SIZE as usize;
    let page = 4096usize;
    let mut touched = 0u64;
    let mut i = w;
    while i < cap {
        let addr = samples + (i as usize) * LATTE_SAMPLE_SIZE as usize;
        // SAFETY: index i < cap lies inside the ring, mapped read-write;
        // the sample's first word is 8-byte aligned (the ring is, and
        // samples are 16 bytes). `lock add $0` is an atomic read-modify-write
        // that stores the value it read: a write access (so the page is
        // committed writable, not mapped to the shared zero page as a load
        // would) that changes nothing. In asm because the compiler turns an
        // atomic add of 0 into a plain load.
        unsafe { core::arch::asm!("lock add qword ptr [{0}], 0", in(reg) addr, options(nostack)) };
        touched += 1;
        // The first sample of the next page.
        let next_page = (addr / page + 1) * page;
        i += ((next_page - addr) as u64).div_ceil(LATTE_SAMPLE_SIZE as u64);
    }
    Ok(touched)
}

/// Slow path of a Stop that found no open span on `t`: when `t` is the
/// thread's active state, an orphan Stop (counted, 0); otherwise `t` lost
/// the thread to another state, and the Stop closes that state's innermost
/// span.
pub fn stop_slow(t: *mut latte_thread, mode: latte_mode, now: u64) -> u64 {
    let cur = current_if_any();
    if cur.is_null() || cur == t {
        count_orphan();
        return 0;
    }
    // SAFETY: the calling thread's active state.
    stop_at(unsafe { &mut *cur }, mode, now)
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
    reg.install(new)
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
    let me = COLD.try_with(|c| c.get()).unwrap_or(core::ptr::null_mut());
    if let Some(r) = reg.region {
        let r = r as *const Region as *mut Region;
        // SAFETY: single-threaded child; the Region is leaked and only read
        // elsewhere through shared references that no other thread holds now.
        unsafe { (*r).privatize_after_fork() };
    }
    // Only the cold states: the other threads' hot states may be their own
    // thread-locals, which nothing here should touch.
    let others: Vec<*mut Cold> = reg.colds.iter().copied().filter(|&c| c != me).collect();
    for c in others {
        reg.retire_cold(c);
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

/// The calling thread's index, once it recorded.
pub fn current_thread_idx() -> Option<u32> {
    with_cold(|c| c.thread_idx)
}

/// The calling thread's ring for a token, if it has one.
pub fn own_slot_for(token: u32) -> Option<*mut latte_slot_header> {
    with_cold(|c| c.slots_by_token.get(token as usize).copied().unwrap_or(core::ptr::null_mut())).filter(|p| !p.is_null())
}

/// The calling thread's counters (zeros before it recorded anything).
pub fn thread_counters() -> latte_thread_counters {
    let t = current_if_any();
    // SAFETY: the calling thread's active state.
    let depth = if t.is_null() { 0 } else { unsafe { (*t).depth } };
    with_cold(|c| latte_thread_counters {
        thread_idx: c.thread_idx,
        depth,
        overflow_starts: c.overflow_starts,
        orphan_stops: c.orphan_stops,
        dropped: c.dropped,
    })
    .unwrap_or_default()
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
    /// Pages of latte's shared mappings replaced after the object shrank
    /// under this process (`fault`): what went to them is lost. Counted in
    /// this process, not in the region.
    pub mapping_faults: u64,
    /// Spans and pulses refused because a signal handler recorded while
    /// latte's slow path on the same thread held the registry lock (see the
    /// span stack protocol). Counted in this process, not in the region.
    pub reentrant_drops: u64,
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
        mapping_faults: crate::fault::faults(),
        reentrant_drops: REENTRANT_DROPS.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(n: usize) -> *mut latte_slot_header {
        (n * 128) as *mut latte_slot_header
    }

    #[test]
    fn id_cache_probes_on_and_empties_itself_when_half_full() {
        // SAFETY: an all-zero latte_thread is valid (integers, null pointers).
        let mut t: Box<latte_thread> = unsafe { Box::new(core::mem::zeroed()) };
        let key = |n: usize| (0x10_0000 + n * 24) as *const c_char;
        assert_eq!(cache_probe(&t, key(0), cache_index(key(0))), None);
        assert_eq!(cache_probe(&t, core::ptr::null(), 0), None, "NULL is never cached");
        // Keys sharing a home entry go to the following entries.
        let home = cache_index(key(0));
        let same: Vec<usize> = (1..200_000).filter(|&n| cache_index(key(n)) == home).take(3).collect();
        cache_insert(&mut t, key(0), slot(1));
        for (k, &n) in same.iter().enumerate() {
            cache_insert(&mut t, key(n), slot(k + 2));
        }
        assert_eq!(cache_probe(&t, key(0), home), Some(slot(1)));
        for (k, &n) in same.iter().enumerate() {
            assert_eq!(cache_probe(&t, key(n), home), Some(slot(k + 2)));
            assert_eq!(t.cache[(home + k + 1) % LATTE_CACHE_SIZE as usize].key, key(n));
        }
        // Never more than half full: the insert that would pass it empties it first.
        let mut n = 1_000_000;
        while t.cache_used < LATTE_CACHE_MAX_USED as u64 {
            cache_insert(&mut t, key(n), slot(7));
            n += 1;
        }
        cache_insert(&mut t, key(n), slot(8));
        assert_eq!(t.cache_used, 1);
        assert_eq!(cache_probe(&t, key(n), cache_index(key(n))), Some(slot(8)));
        assert_eq!(cache_probe(&t, key(0), home), None);
    }

    #[test]
    fn ptr_map_finds_what_it_holds_and_clears_when_half_full() {
        let mut m = PtrMap::new();
        assert_eq!(m.get(0x1000), None);
        // Keys that share a home entry probe onwards.
        for k in 1..=10usize {
            m.insert(k * 0x1000, slot(k));
        }
        for k in 1..=10usize {
            assert_eq!(m.get(k * 0x1000), Some(slot(k)));
        }
        m.insert(0x1000, slot(99)); // an update, not a new entry
        assert_eq!(m.get(0x1000), Some(slot(99)));
        assert_eq!(m.len, 10);
        m.insert(PTR_MAP_EMPTY, slot(1)); // NULL IDs are never cached
        assert_eq!(m.len, 10);
        for k in 11..=(PTR_MAP_SIZE / 2) {
            m.insert(k * 0x1000, slot(k));
        }
        assert_eq!(m.len, PTR_MAP_SIZE / 2);
        // Full to half: the next insert starts over, and lookups still end.
        m.insert(0xdead_0000, slot(7));
        assert_eq!(m.len, 1);
        assert_eq!(m.get(0xdead_0000), Some(slot(7)));
        assert_eq!(m.get(0x1000), None);
    }
}
