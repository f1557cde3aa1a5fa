//! Slow paths of the hot path: cache misses (intern the ID, find or
//! allocate the slot), counted refusals, prefaulting, and the calls that
//! install a region or intern an ID.

use super::cache::{cache_insert, cache_probe};
use super::counters::{count_dropped, count_orphan_stop, count_overflow_start};
use super::registry::{region_if_any, unrecordable, Cold, COLD, REGISTRY};
use super::thread::{current, note_late_drop, note_unavailable};
use crate::error::Error;
use crate::intern::Unfit;
use crate::layout::*;
use crate::region::Region;
use core::ffi::c_char;
use core::sync::atomic::Ordering;

/// A Start beyond 64 open spans: ignored, counted.
#[cold]
#[inline(never)]
pub fn note_overflow(_t: &mut latte_thread) {
    count_overflow_start();
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

pub(super) fn count_orphan() {
    if super::thread::take_refused_start() {
        return; // the Stop of a refused Start, counted there
    }
    count_orphan_stop();
    if let Some(r) = region_if_any() {
        bump(&r.header().orphan_stops, 1);
    }
}

/// Cache miss: the ring for `id` on this thread, from `resolve_slot`; the
/// cache is filled on success. On failure (counted there) the span goes
/// to a sink, so the frame still holds a writable ring.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string that stays valid while the process records under it.
#[cold]
#[inline(never)]
pub unsafe fn resolve(t: &mut latte_thread, id: *const c_char) -> u64 {
    // SAFETY: forwarded (this function's contract on `id`).
    match unsafe { resolve_slot(t, id) } {
        Some(ring) => {
            cache_insert(t, id, ring);
            ring
        }
        // A sink has no token: tagged 0, whose `next_idx` then mostly
        // disagrees with the sink's index (W1 takes the ring's).
        None => tag_ring(unrecordable(t), 0),
    }
}

/// Interns the ID and finds or allocates this thread's slot for it, tagged
/// with the ID's token (`tag_ring`). None
/// (counted as a dropped span) when the ID or the slot does not fit, or
/// the thread is being torn down.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string that stays valid while the process records under it.
pub unsafe fn resolve_slot(_t: &mut latte_thread, id: *const c_char) -> Option<u64> {
    let Some(c) = COLD.try_with(|c| c.get()).ok().filter(|c| !c.is_null()) else {
        note_late_drop();
        return None;
    };
    // A slow path: where a thread opens its switch event once tracking is
    // on (a syscall, once per thread; see `sched`).
    crate::sched::attach_thread();
    if crate::sched::status() == crate::sched::LATTE_SCHED_ON {
        if let Some(r) = region_if_any() {
            r.mark_switches_tracked();
        }
    }
    // SAFETY: this thread's own cold state.
    let c = unsafe { &mut *c };
    if let Some(ring) = c.by_ptr.get(id as usize) {
        return Some(ring);
    }
    // SAFETY: forwarded (this function's contract on `id`).
    if unsafe { refused_again(c, id) } {
        return None;
    }
    let Some(mut reg) = REGISTRY.lock_unless_held() else {
        note_unavailable();
        return None;
    };
    // SAFETY: NULL or NUL-terminated (this function's contract).
    if unsafe { super::calring::is_calibration_id(id) } {
        // Calibration records in its own ring: no slot, no ID, no counter
        // of the region's (`calring`).
        return super::calring::ring(&mut reg).map(|r| tag_ring(r, 0));
    }
    let region = reg.region?;
    // SAFETY: IDs are NULL or NUL-terminated strings (the API contract).
    let token = match unsafe { reg.interner.intern_ptr(region, id) } {
        Ok(tok) => tok,
        Err(why) => {
            count_dropped();
            bump(&region.header().unfit_id_drops, 1);
            if why == Unfit::NoMemory {
                super::thread::say_no_memory_once();
            } else {
                // SAFETY: forwarded (this function's contract on `id`).
                unsafe { note_refused(c, region, id, REFUSED_NAME) };
            }
            return None;
        }
    };
    let slot = match c.slots_by_token.get(&token).copied() {
        Some((s, _)) => s,
        // Room for the new entry before a slot is taken for it: a full
        // memory must not abort the program, nor leave a slot unlisted.
        None if c.slots_by_token.try_reserve(1).is_err() => {
            count_dropped();
            bump(&region.header().no_slot_drops, 1);
            super::thread::say_no_memory_once();
            return None;
        }
        None => match reg.allocate_slot(c, token) {
            Some((s, i)) => {
                c.slots_by_token.insert(token, (s, i));
                s
            }
            None => {
                count_dropped();
                bump(&region.header().no_slot_drops, 1);
                // SAFETY: forwarded (this function's contract on `id`).
                unsafe { note_refused(c, region, id, REFUSED_RING) };
                return None;
            }
        },
    };
    let ring = tag_ring(slot, token);
    c.by_ptr.insert(id as usize, ring);
    Some(ring)
}

/// A refusal's kind in its mark's low bit: no ring for the ID.
const REFUSED_RING: u64 = 0;
/// A refusal's kind in its mark's low bit: no room for the ID's name.
const REFUSED_NAME: u64 = 1;

/// What `c.refused` keeps for an ID pointer: the hash of the text it
/// pointed to (so that a pointer now naming another ID does not match)
/// with the refusal's kind in the low bit. None for NULL.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string.
unsafe fn refusal_mark(id: *const c_char, kind: u64) -> Option<u64> {
    if id.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated (the contract).
    let text = unsafe { core::ffi::CStr::from_ptr(id) }.to_bytes();
    Some((crate::name::fnv1a(text) & !1) | kind)
}

/// Notes, under the registry lock, that this thread was refused a ring or
/// a name for `id` (a region that cannot grow): `refused_again` then
/// counts its next spans of `id` without the lock.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string.
unsafe fn note_refused(c: &mut Cold, region: &Region, id: *const c_char, kind: u64) {
    // SAFETY: forwarded.
    if let Some(mark) = unsafe { refusal_mark(id, kind) } {
        c.refused.insert(id as usize, mark);
        region.note_refusal();
    }
}

/// Counts a span of an ID this thread was refused a ring or a name for,
/// the same text at the same pointer, while the region still backs off
/// from the failure: as the registry would, but without its lock (which
/// many threads recording into a full region would queue on) and with no
/// system call. False when the registry must be asked.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string.
unsafe fn refused_again(c: &Cold, id: *const c_char) -> bool {
    let Some(mark) = c.refused.get(id as usize) else { return false };
    let Some(region) = region_if_any() else { return false };
    // The clock before the text: a long name's hash costs more.
    if !region.refusing(crate::tsc::clock_ns(libc::CLOCK_MONOTONIC)) {
        return false;
    }
    // SAFETY: forwarded.
    if unsafe { refusal_mark(id, mark & 1) } != Some(mark) {
        return false;
    }
    count_dropped();
    let counter = if mark & 1 == REFUSED_NAME { &region.header().unfit_id_drops } else { &region.header().no_slot_drops };
    bump(counter, 1);
    true
}

/// Resolves the calling thread's ring for `id` as a first Start would (and
/// caches it in the thread's active state), grows it whole (G2, as far as
/// the region's budget lets it), then touches the pages of that ring which
/// no sample has been written to yet. Returns the pages touched (0 for a
/// ring that has wrapped: all of them were written). A service calls it
/// before its hot loop, where it chooses to pay the ring's growth at once;
/// nothing records meanwhile.
///
/// Each page is touched by a locked add of 0 to the first word of its
/// first not-yet-written sample: a write fault that changes no value. Only
/// this thread writes the ring, and no reader looks at an index at or above
/// `write_idx`, so the touch races with nothing.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string that stays valid while the process records under it.
pub unsafe fn prefault(id: *const c_char) -> Result<u64, Error> {
    let t = current();
    if t.is_null() {
        return Err(Error::Os(libc::ESRCH));
    }
    // SAFETY: the calling thread's active state.
    let t = unsafe { &mut *t };
    let slot = ring_ptr(match cache_probe(t, id, cache_index(id)) {
        Some((r, _)) => r,
        None => {
            // SAFETY: forwarded (this function's contract on `id`).
            let r = unsafe { resolve_slot(t, id) }.ok_or(Error::NOSPC)?;
            cache_insert(t, id, r);
            r
        }
    });
    let cap = t.sample_mask + 1;
    // SAFETY: a slot of this thread inside the region.
    let sh = unsafe { &*slot };
    // The whole ring committed first (G2, as its writes would), as far as
    // the budget and memory allow. Relaxed: this thread is the only writer
    // of `write_limit`.
    let mut lim = sh.write_limit.load(Ordering::Relaxed);
    while lim != LATTE_RING_WHOLE {
        match region_if_any().map(|r| r.grow_ring(slot, lim)) {
            Some(Ok(n)) => {
                sh.write_limit.store(n, Ordering::Relaxed);
                lim = n;
            }
            _ => break,
        }
    }
    let cap = cap.min(lim);
    // Relaxed: this thread is the ring's only writer.
    let w = sh.write_idx.load(Ordering::Relaxed);
    if w >= cap {
        return Ok(0);
    }
    let samples = (slot as usize) + LATTE_SLOT_HEADER_SIZE as usize;
    let page = LATTE_PAGE_SIZE as usize;
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
    let Some(name) = (unsafe { crate::name::try_normalize(id) }) else {
        return LATTE_INVALID_ID;
    };
    reg.interner.intern_name(region, name).unwrap_or(LATTE_INVALID_ID)
}

/// The token of an ID name in this process, when it has one.
pub fn token_of_name(name: &[u8]) -> Option<u32> {
    REGISTRY.lock().interner.token_of(name)
}

/// The name of a token of this process, when it is one.
pub fn name_of_token(token: u32) -> Option<crate::name::Name> {
    REGISTRY.lock().interner.name_of(token).cloned()
}

/// Makes recording go into the shared region `name`: before any thread
/// recorded, a new region in place of the private one; after, the private
/// region moved into it where it stands, with everything recorded so far
/// (`Region::share`). -EALREADY when a shared region is already installed,
/// but for the one `LATTE_REGION` named: replaced (its name removed) before
/// recording began, renamed after (`Region::rename`).
pub fn install_shared(name: &[u8], cfg: &crate::region::latte_region_config) -> Result<(), Error> {
    crate::shm::validate_name(name)?;
    let mut reg = REGISTRY.lock();
    if let Some(r) = reg.region {
        if r.is_shared() && !super::env::installed() {
            return Err(Error::Os(libc::EALREADY));
        }
        if reg.recording_began && r.is_shared() {
            r.rename(name, cfg, &mut super::lineage::of)?;
            super::env::note_installed(false);
            return Ok(());
        }
        if reg.recording_began {
            return r.share(name, cfg, &mut super::lineage::of);
        }
    } else if reg.recording_began {
        return Err(Error::Os(libc::EBUSY));
    }
    let from_env = reg.region.filter(|_| super::env::installed());
    let new = Region::create_shared(name, cfg, &mut super::lineage::of)?;
    if let Some(old) = reg.region {
        if !crate::intern::Interner::copy_names(old, &new) {
            // The new region could not take the names interned so far.
            new.discard();
            return Err(Error::Os(libc::ENOSPC));
        }
    }
    reg.install(new).map_err(|(e, r)| {
        r.discard(); // a failed install leaves no name behind
        e
    })?;
    if let Some(old) = from_env {
        super::env::note_installed(false);
        // Nothing was recorded into it: its name goes, so that no empty
        // region is left behind (the mapping stays, leaked as installed
        // regions are).
        old.unlink_name();
    }
    Ok(())
}
