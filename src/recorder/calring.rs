//! The calibration's own ring: the spans calibration records (under the
//! reserved ID `latte.calibrate`) go to a private ring of the region's
//! geometry, outside the region. They take no slot and no ID name
//! and count in none of the region's counters, so calibrating a region
//! whose rings or IDs are all taken drops nothing of the program's and
//! raises none of its drop counters.
//!
//! Written by the calibrating thread only (`calibrate::begin` lets one
//! thread at a time run the loops): its hot path finds this ring through
//! its ID cache like any other, and `calibrate::end` reads it.

use super::registry::Registry;
use crate::layout::*;
use core::ffi::{c_char, CStr};
use core::sync::atomic::{AtomicPtr, Ordering};

static RING: AtomicPtr<latte_slot_header> = AtomicPtr::new(core::ptr::null_mut());

/// Whether `id` names the calibration's reserved ID.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string.
pub(super) unsafe fn is_calibration_id(id: *const c_char) -> bool {
    // SAFETY: non-null, NUL-terminated (the caller's contract).
    !id.is_null() && unsafe { CStr::from_ptr(id) } == crate::name::CALIBRATION_ID
}

/// The calibration ring, made on first use with the region's geometry
/// (zero-filled; generation 1, live). Called under the registry lock.
pub(super) fn ring(reg: &mut Registry) -> Option<*mut latte_slot_header> {
    // Acquire: pairs with the release store below (the header set before).
    let p = RING.load(Ordering::Acquire);
    if !p.is_null() {
        return Some(p);
    }
    let region = reg.region().ok()?;
    let stride = region.geometry().slot_stride as usize;
    let p = crate::mmap::Mmap::anonymous(stride).ok()?.leak() as *mut latte_slot_header;
    // SAFETY: a fresh, zero-filled mapping of a whole slot; nobody else sees it yet.
    let h = unsafe { &*p };
    // Relaxed: published by the release store of RING below.
    h.generation.store(1, Ordering::Relaxed);
    h.state.store(LATTE_SLOT_LIVE, Ordering::Relaxed);
    // Its memory is the mapping's, whole: no growth steps (ring protocol G).
    h.write_limit.store(LATTE_RING_WHOLE, Ordering::Relaxed);
    // Release: the header above is visible to whoever loads the pointer.
    RING.store(p, Ordering::Release);
    Some(p)
}

/// Empties the calibration ring before a run (its previous samples are
/// never read again).
pub fn reset() {
    // Acquire: pairs with the release store in `ring`.
    let p = RING.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: a leaked, never-unmapped slot header.
        // Relaxed: only the calibrating thread writes this ring; it is the caller.
        unsafe { &*p }.write_idx.store(0, Ordering::Relaxed);
    }
}

/// The samples the calibration ring holds as (start TSC, packed word),
/// oldest first (empty when it was never made).
pub fn samples(samples_per_slot: u32) -> Vec<(u64, u64)> {
    // Acquire: pairs with the release store in `ring`.
    let p = RING.load(Ordering::Acquire);
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: a leaked slot header; its samples follow it.
    let h = unsafe { &*p };
    // Acquire: every sample below the index is visible.
    let w = h.write_idx.load(Ordering::Acquire);
    let cap = samples_per_slot as u64;
    let mut out = Vec::with_capacity(w.min(cap) as usize);
    // SAFETY: the samples of the ring lie right after its header.
    let ring = unsafe { (p as *const u8).add(LATTE_SLOT_HEADER_SIZE as usize) } as *const latte_sample;
    for i in w.saturating_sub(cap)..w {
        // SAFETY: i & (cap - 1) < cap: inside the ring.
        let s = unsafe { &*ring.add((i & (cap - 1)) as usize) };
        // Atomic loads: another thread recording the reserved ID by mistake
        // may write here.
        out.push((s.start_tsc.load(Ordering::Relaxed), s.packed.load(Ordering::Relaxed)));
    }
    out
}
