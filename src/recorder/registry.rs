//! Process-wide recorder state behind the registry lock: the region, the ID
//! interner, the pool of thread states, and slot allocation and retirement.

use super::fork::{atfork_child, atfork_parent, atfork_prepare};
use super::lock::Lock;
use super::ptr_map::PtrMap;
use crate::error::Error;
use crate::intern::Interner;
use crate::layout::*;
use crate::region::Region;
use crate::tsc;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::collections::{HashMap, VecDeque};

/// Rust-private per-thread state: identity, counters and the thread's
/// rings by token. Pooled when the thread exits.
pub struct Cold {
    pub(super) thread_idx: u32,
    pub(super) os_tid: u32,
    pub(super) alive: bool,
    /// The thread's ring of each ID it recorded, and the ring's slot index.
    pub(super) slots_by_token: HashMap<u32, (*mut latte_slot_header, u32)>,
    /// Second level behind the hot cache: ID pointer -> this thread's ring.
    /// The hot cache (open addressing with linear probing, [`cache_next`])
    /// is emptied when it would pass [`LATTE_CACHE_MAX_USED`] entries, so
    /// that a thread with more IDs finds the ones it lost here, with a
    /// probe, not the registry lock. Starts over when it fills up
    /// ([`PtrMap`]).
    pub(super) by_ptr: PtrMap,
    /// ID pointers this thread was refused a ring or a name for, each with
    /// its mark (`slow::refusal_mark`): while the region still refuses
    /// (`Region::refusing`), their spans are counted without the registry
    /// lock.
    pub(super) refused: PtrMap,
}

/// Process-wide recorder state, behind `REGISTRY`.
pub struct Registry {
    pub region: Option<&'static Region>,
    pub interner: Interner,
    /// Every cold state ever allocated (live, or pooled for reuse).
    pub(super) colds: Vec<*mut Cold>,
    /// Cold states of exited threads, ready for new threads.
    free_colds: Vec<*mut Cold>,
    /// Hot states Rust allocated for threads that no longer use them.
    pub(super) free_hots: Vec<*mut latte_thread>,
    /// Hot states ever allocated: `free_hots` keeps room for all of them.
    hots_made: usize,
    next_thread_idx: u32,
    /// Slots of exited threads, oldest first: reused when the region has no
    /// fresh slot and they hold half of it, or it cannot grow (`allocate_slot`).
    reusable: VecDeque<u32>,
    /// Set once a thread recorded: the region can no longer be replaced.
    pub recording_began: bool,
    atfork_installed: bool,
    /// Set once `LATTE_REGION` was looked at: a region it names that could
    /// not be made is not tried again (nor said again).
    env_tried: bool,
}

// SAFETY: the raw pointers are thread states and slots that live for the
// whole process; the registry is only touched under its lock.
unsafe impl Send for Registry {}

/// Bytes of address space the process may still map under its
/// `RLIMIT_AS` (its cap less its `VmSize`); None when it has no cap (or it
/// cannot be read).
fn address_space_free() -> Option<u64> {
    // SAFETY: an all-zero rlimit is a valid out-parameter.
    let mut lim: libc::rlimit = unsafe { core::mem::zeroed() };
    // SAFETY: a valid out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0 || lim.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status.lines().find_map(|l| l.strip_prefix("VmSize:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some((lim.rlim_cur as u64).saturating_sub(kib * 1024))
}

/// The errno of a process where no region could be made, 0
/// until then: read without the registry lock (`no_region`), so that a
/// signal handler asking for the counters never waits on its own thread.
static NO_REGION: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

/// Why this process has no region to record into: Some when none could be
/// made (not even a private one of one ring), None otherwise. Lock-free.
pub fn no_region() -> Option<Error> {
    // Relaxed: a value read on its own.
    match NO_REGION.load(Ordering::Relaxed) {
        0 => None,
        c => Some(Error::Os(c)),
    }
}

pub static REGISTRY: Lock<Registry> = Lock::new(Registry {
    region: None,
    interner: Interner::new(),
    colds: Vec::new(),
    free_colds: Vec::new(),
    free_hots: Vec::new(),
    hots_made: 0,
    next_thread_idx: 0,
    reusable: VecDeque::new(),
    recording_began: false,
    atfork_installed: false,
    env_tried: false,
});

thread_local! {
    /// The calling thread's cold state: its entry in `Registry::colds`
    /// (set by `thread` when the thread attaches; read by the fork child
    /// to tell its own state from those of threads it does not have).
    pub(super) static COLD: core::cell::Cell<*mut Cold> = const { core::cell::Cell::new(core::ptr::null_mut()) };
}

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

static SINK0: Sink0 = Sink0 { header: latte_slot_header::sink(), sample: latte_sample { start_tsc: AtomicU64::new(0), packed: AtomicU64::new(0) } };

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

/// The first chunk's slots of a private region of rings of `samples`
/// samples: the default, or, where the address space is capped (`ulimit
/// -v`), no more than a quarter of what the cap leaves free holds (the
/// program's own allocations keep the rest), halved down to one; None when
/// not even one ring fits that quarter.
fn private_slots(samples: u32) -> Option<u32> {
    let ring = LATTE_SLOT_HEADER_SIZE as u64 + samples as u64 * LATTE_SAMPLE_SIZE as u64;
    let mut slots = LATTE_DEFAULT_PRIVATE_SLOTS;
    if let Some(free) = address_space_free() {
        while slots as u64 * ring > free / 4 {
            if slots == 1 {
                return None;
            }
            slots /= 2;
        }
    }
    Some(slots)
}

impl Registry {
    /// The region, creating the default one on first need: the shared
    /// region `LATTE_REGION` names (`env`), else a private one.
    pub fn region(&mut self) -> Result<&'static Region, Error> {
        if let Some(r) = self.region {
            return Ok(r);
        }
        // No region at all could be made (not even a private one of one
        // ring): said once; every later call gets the reason at once, with
        // no system call.
        if let Some(e) = no_region() {
            return Err(e);
        }
        if !core::mem::replace(&mut self.env_tried, true) {
            if let Some((shared, name)) = super::env::shared_region() {
                match self.install(shared) {
                    Ok(()) => {
                        super::env::note_installed(true);
                        return Ok(self.region.unwrap());
                    }
                    Err((e, r)) => {
                        r.discard(); // no memory for the sink: private, as below
                        super::env::say_private(&name, 1, e);
                    }
                }
            }
        }
        if let Err(e) = self.install_private() {
            // Relaxed: a value read on its own (`no_region`).
            NO_REGION.store(if let Error::Os(c) = e { c } else { libc::ENOMEM }, Ordering::Relaxed);
            super::env::say_no_region(e);
            return Err(e);
        }
        Ok(self.region.unwrap())
    }

    /// Installs a private region of rings of `ring_samples` samples
    /// (`LATTE_RING_SAMPLES`). Rings no bigger than the default take a
    /// first chunk of fewer slots, down to one, where memory or the address
    /// space is short; bigger ones need a first chunk of the shared
    /// region's default slots, and where that does not fit, the region is
    /// made of default rings instead (said once: `fall_back_ring_samples`).
    fn install_private(&mut self) -> Result<(), Error> {
        let samples = crate::region::ring_samples();
        let least = if samples > LATTE_DEFAULT_SAMPLES { LATTE_DEFAULT_FIRST_SLOTS } else { 1 };
        let made = match private_slots(samples) {
            Some(slots) if slots >= least => self.install_private_of(samples, slots, least),
            None if least == 1 => self.install_private_of(samples, 1, 1),
            _ => Err(Error::NOMEM),
        };
        match made {
            Err(Error::Os(libc::ENOMEM)) if crate::region::fall_back_ring_samples("no memory or address space") => {
                let slots = private_slots(LATTE_DEFAULT_SAMPLES).unwrap_or(1);
                self.install_private_of(LATTE_DEFAULT_SAMPLES, slots, 1)
            }
            other => other,
        }
    }

    /// Installs a private region of rings of `samples` samples, its first
    /// chunk of `slots` slots, and fewer, halving down to `least`, while it
    /// does not fit; the region grows later as it can.
    fn install_private_of(&mut self, samples: u32, mut slots: u32, least: u32) -> Result<(), Error> {
        loop {
            let made = Region::create_private(slots, samples, 0).and_then(|r| self.install(r).map_err(|(e, _)| e));
            match made {
                Err(Error::Os(libc::ENOMEM)) if slots / 2 >= least => slots /= 2,
                other => return other,
            }
        }
    }

    /// Makes `r` the region everything records into and readers read.
    /// On failure (nothing changed) the region comes back to the caller,
    /// whose it is to release (a shared one: `Region::discard`).
    pub fn install(&mut self, r: Region) -> Result<(), (Error, Region)> {
        // `LATTE_QUIET` read now, under the lock, not first where a line
        // is said (memory gone, a signal handler's slow path).
        let _ = crate::region::quiet();
        let stride = r.geometry().slot_stride as usize;
        let sink = match crate::mmap::Mmap::anonymous(stride) {
            Ok(m) => m.leak(),
            Err(e) => return Err((e, r)),
        };
        // SAFETY: a fresh zero-filled mapping of a slot's size, 64-aligned
        // (page aligned): a slot header fits at its start. Nothing else
        // sees it before the swap below publishes it (release).
        unsafe { (sink as *mut latte_slot_header).write(latte_slot_header::sink()) };
        let old_sink = SINK.swap(sink as *mut latte_slot_header, Ordering::AcqRel);
        if !old_sink.is_null() {
            // Only replaced before any thread recorded, so no state holds it.
            let old_stride = self.region.map(|o| o.geometry().slot_stride as usize).unwrap_or(0);
            // SAFETY: the previous sink, leaked above with the previous
            // region's stride; nothing points into it.
            drop(unsafe { crate::mmap::Mmap::from_raw(old_sink as *mut u8, old_stride) });
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

    /// A cold state for the calling thread: a pooled one, or a new one.
    /// `Error::NOMEM` when memory for it cannot be had (never an abort:
    /// the thread's spans are then counted, `thread::note_unavailable`).
    pub(super) fn new_cold(&mut self) -> Result<*mut Cold, Error> {
        let region = self.region()?;
        self.recording_began = true;
        let c = match self.free_colds.pop() {
            Some(c) => c,
            None => {
                self.colds.try_reserve(1).map_err(|_| Error::NOMEM)?;
                // The pool keeps room to take every state back at thread
                // exit (it is empty here: the pop above found none).
                self.free_colds.try_reserve(self.colds.len() + 1).map_err(|_| Error::NOMEM)?;
                let cold = Cold { thread_idx: 0, os_tid: 0, alive: false, slots_by_token: HashMap::new(), by_ptr: PtrMap::new(), refused: PtrMap::new() };
                let p = try_leak(cold).ok_or(Error::NOMEM)?;
                self.colds.push(p);
                p
            }
        };
        // SAFETY: `c` is a pooled or fresh state no thread owns now.
        let s = unsafe { &mut *c };
        s.thread_idx = self.next_thread_idx;
        self.next_thread_idx = self.next_thread_idx.wrapping_add(1);
        s.slots_by_token.clear();
        s.by_ptr.reset();
        s.refused.reset();
        s.os_tid = tsc::gettid();
        s.alive = true;
        bump(&region.header().threads_seen, 1);
        Ok(c)
    }

    /// A hot state for a thread Rust keeps one for: a pooled one, or a new
    /// zeroed one. None when memory for it cannot be had.
    pub(super) fn new_hot(&mut self) -> Option<*mut latte_thread> {
        if let Some(h) = self.free_hots.pop() {
            return Some(h);
        }
        // Room to pool every hot state made, so that giving one back
        // allocates nothing (the pool is empty here: the pop found none).
        self.free_hots.try_reserve(self.hots_made + 1).ok()?;
        let layout = std::alloc::Layout::new::<latte_thread>();
        // SAFETY: the layout has a non-zero size. An all-zero latte_thread
        // is valid (integers and null pointers); the state is leaked into
        // the pool's care and never freed.
        let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut latte_thread;
        if p.is_null() {
            return None;
        }
        self.hots_made += 1;
        Some(p)
    }

    /// Hands a slot to (thread `c`, `token`): a fresh one while the
    /// region's chunks have any left; else the oldest slot of an exited
    /// thread once exited threads hold at least half the region (so that a
    /// service that starts threads all the time stays within about twice
    /// its live rings, and what exited threads recorded stays readable a
    /// while); else a fresh one in a new chunk (the region grows); else,
    /// when it cannot grow (or its memory cannot be had: a moved region's
    /// fresh slot is reserved in `/dev/shm` as it is handed out), any exited
    /// thread's slot. None when none of these can be had (the region could
    /// not grow: told once).
    pub(super) fn allocate_slot(&mut self, c: &Cold, token: u32) -> Option<(*mut latte_slot_header, u32)> {
        let region = self.region?;
        let h = region.header();
        // Relaxed, here and for the slot's old generation and index below:
        // the registry lock is held, and only its holder stores these (the
        // index: the slot's previous owner, which exited before the slot
        // became reusable, its last store ordered by the lock it took then).
        let used = h.slots_used.load(Ordering::Relaxed);
        let cap = region.slot_capacity();
        let (i, fresh) = if (used as u64) < cap {
            (used, true)
        } else if self.reusable.len() as u64 >= (cap / 2).max(1) {
            (self.reusable.pop_front()?, false)
        } else if used < u32::MAX && region.reserve_slots(used as u64 + 1).is_ok() {
            (used, true)
        } else {
            (self.reusable.pop_front()?, false)
        };
        // A full /dev/shm (told once, counted by the caller when no exited
        // thread's slot is left either).
        let (i, fresh) = if fresh && region.commit_slot(i).is_err() { (self.reusable.pop_front()?, false) } else { (i, fresh) };
        let slot = region.slot(i);
        // SAFETY: slot i is inside the region; we hold the registry lock, the
        // only place slots are (re)assigned, and its previous owner is gone.
        let sh = unsafe { &*slot };
        let old_gen = sh.generation.load(Ordering::Relaxed);
        // What every owner so far wrote (a fresh slot: zeros).
        let base = sh.gen_base.load(Ordering::Relaxed).saturating_add(sh.write_idx.load(Ordering::Relaxed));
        if !fresh {
            let written = sh.write_idx.load(Ordering::Relaxed);
            bump(&h.slot_reuses, 1);
            bump(&h.reuse_discarded, written.min(region.geometry().samples_per_slot as u64));
        }
        let mut g = old_gen.wrapping_add(1);
        if g == 0 {
            g = 1;
        }
        // A1-A4 of the ring protocol (`ring::assign`).
        crate::ring::assign(&sh.generation, g, || {
            sh.gen_base.store(base, Ordering::Relaxed);
            sh.write_idx.store(0, Ordering::Relaxed);
            sh.id_token.store(token, Ordering::Relaxed);
            sh.thread_idx.store(c.thread_idx, Ordering::Relaxed);
            sh.os_tid.store(c.os_tid, Ordering::Relaxed);
            sh.state.store(LATTE_SLOT_LIVE, Ordering::Relaxed);
        });
        if fresh {
            // Release: the slot's metadata is published before readers count it.
            h.slots_used.store(used + 1, Ordering::Release);
        }
        Some((slot, i))
    }

    /// Marks a thread's slots closed and reusable, and pools its cold state.
    pub(super) fn retire_cold(&mut self, c: *mut Cold) {
        // SAFETY: `c` is the exiting thread's own cold state (or, in a fork
        // child, one whose thread does not exist there).
        let s = unsafe { &mut *c };
        if !s.alive {
            return;
        }
        s.alive = false;
        if self.region.is_some() {
            // Room first, so that nothing below allocates; without it
            // (memory ran out) the slots are closed but not offered again.
            let listed = self.reusable.try_reserve(s.slots_by_token.len()).is_ok();
            let first = self.reusable.len();
            for (_, (p, i)) in s.slots_by_token.drain() {
                // SAFETY: a slot this thread owns, inside the region.
                let sh = unsafe { &*p };
                // W4. Release: every sample this thread wrote is visible to
                // a reader that sees CLOSED with acquire (R2); the ring is final.
                sh.state.store(LATTE_SLOT_CLOSED, Ordering::Release);
                if listed {
                    self.reusable.push_back(i);
                }
            }
            // In slot order: reused oldest first, as they were handed out
            // (an unstable sort allocates nothing; the indices are distinct).
            self.reusable.make_contiguous()[first..].sort_unstable();
            if let (Some(region), true) = (self.region, self.reusable.len() > first) {
                // Rings to hand out again: threads refused one must ask.
                region.forget_refusal();
            }
        }
        s.by_ptr.reset();
        s.refused.reset();
        // Within the room `new_cold` reserved: no allocation at thread exit.
        self.free_colds.push(c);
    }
}

/// `v` moved to the heap and leaked (into a pool's care), or None when the
/// memory cannot be had: `Box::new` would abort the measured program.
fn try_leak<T>(v: T) -> Option<*mut T> {
    const { assert!(core::mem::size_of::<T>() > 0, "a state type has a size") };
    let layout = std::alloc::Layout::new::<T>();
    // SAFETY: the layout's size is not zero (asserted above).
    let p = unsafe { std::alloc::alloc(layout) } as *mut T;
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is fresh memory of `T`'s layout.
    unsafe { p.write(v) };
    Some(p)
}

/// The installed region, without locking.
pub fn region_if_any() -> Option<&'static Region> {
    // Acquire pairs with the release in `install`.
    let p = REGION.load(Ordering::Acquire);
    if p.is_null() {
        None
    } else {
        // SAFETY: a non-null REGION points to a leaked, never-freed Region.
        Some(unsafe { &*p })
    }
}
