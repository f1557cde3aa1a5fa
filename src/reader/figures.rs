//! The figures read from a validated header: geometry, identity, counts,
//! counters, calibration, lineage.

use super::{Calibration, View};
use crate::layout::*;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

impl View<'_> {
    pub(super) fn u32_at(&self, off: u64) -> u32 {
        debug_assert!(off + 4 <= self.len as u64 && off.is_multiple_of(4));
        // SAFETY: in bounds and aligned (see above); an AtomicU32 view of
        // shared memory another process may write.
        unsafe { AtomicU32::from_ptr(self.base.add(off as usize) as *mut u32) }.load(Ordering::Relaxed)
    }

    pub(super) fn u64_at(&self, off: u64) -> u64 {
        debug_assert!(off + 8 <= self.len as u64 && off.is_multiple_of(8));
        // SAFETY: as u32_at.
        unsafe { AtomicU64::from_ptr(self.base.add(off as usize) as *mut u64) }.load(Ordering::Relaxed)
    }

    pub(super) fn atomic_u64(&self, off: u64) -> &AtomicU64 {
        // SAFETY: as u32_at; the reference lives no longer than the view's mapping.
        unsafe { AtomicU64::from_ptr(self.base.add(off as usize) as *mut u64) }
    }

    pub(super) fn atomic_u32(&self, off: u64) -> &AtomicU32 {
        // SAFETY: as u32_at.
        unsafe { AtomicU32::from_ptr(self.base.add(off as usize) as *mut u32) }
    }

    /// The region's geometry (validated against the mapping at `new`).
    pub fn geo(&self) -> Geometry {
        self.geo
    }

    /// Most IDs the producer takes (0: no limit).
    pub fn id_limit(&self) -> u32 {
        self.u32_at(core::mem::offset_of!(latte_region_header, id_limit) as u64)
    }

    /// The producer's pid, as its header says.
    pub fn producer_pid(&self) -> u32 {
        self.producer_pid
    }

    /// `LATTE_REGION_SHARED`, `LATTE_REGION_FLUSHED` (as at the view's
    /// creation).
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// Whether the producer tracked switches (`LATTE_REGION_SWITCHES_TRACKED`,
    /// read now: it may be set after the view was made).
    pub fn switches_tracked(&self) -> bool {
        self.u32_at(core::mem::offset_of!(latte_region_header, flags) as u64) & LATTE_REGION_SWITCHES_TRACKED != 0
    }

    /// Which region of its name this is and what its predecessors under
    /// the name recorded: `(incarnation, recorded_before)` of the header
    /// (`incarnation` 0: not known).
    pub fn lineage(&self) -> (u64, u64) {
        let h = |off: usize| self.u64_at(off as u64);
        (h(core::mem::offset_of!(latte_region_header, incarnation)), h(core::mem::offset_of!(latte_region_header, recorded_before)))
    }

    /// TSC of the producer's anchor (its region's creation).
    pub fn anchor_tsc(&self) -> u64 {
        self.anchor_tsc
    }

    /// CLOCK_REALTIME (ns) of the same anchor.
    pub fn anchor_realtime_ns(&self) -> u64 {
        self.anchor_realtime_ns
    }

    /// The header's `ids_used`, loaded now.
    pub(super) fn ids_used_raw(&self) -> u32 {
        // Acquire pairs with the producer's release when it publishes a name.
        self.atomic_u32(core::mem::offset_of!(latte_region_header, ids_used) as u64).load(Ordering::Acquire)
    }

    /// The header's `slots_used`, loaded now.
    pub(super) fn slots_used_raw(&self) -> u32 {
        // Acquire pairs with the producer's release after a slot's metadata.
        self.atomic_u32(core::mem::offset_of!(latte_region_header, slots_used) as u64).load(Ordering::Acquire)
    }

    /// Published IDs, as the header counts them (names in chunks this view
    /// does not map yet are counted too).
    pub fn ids_used(&self) -> u32 {
        self.ids_used_raw()
    }

    /// Slots handed out so far, as the header counts them (0 when the
    /// object shrank under the mapping: `whole` says whether it did).
    pub fn slots_used(&self) -> u32 {
        self.slots_used_raw()
    }

    /// `Error::Truncated` once the object shrank under this view's mapping
    /// (another process truncated it): what the view read since may be the
    /// zeros of lost pages (no slot handed out, every ring idle), not data.
    /// A reader that follows a region calls it after each look.
    pub fn whole(&self) -> Result<(), crate::error::Error> {
        super::check_whole(self.base)
    }

    /// Slots this view can read: those of the chunks it maps, in order,
    /// up to the first chunk it does not map whole.
    pub fn slot_capacity(&self) -> u64 {
        let mut n = 0;
        for k in 0..LATTE_CHUNKS {
            let a = self.chunks.slot_avail[k as usize];
            n += a;
            if a < self.geo.chunk_slots(k) {
                break;
            }
        }
        n
    }

    /// Bytes of the region the producer has published (`total_size`): more
    /// than this view maps when the region grew since it was made.
    pub fn published_size(&self) -> u64 {
        // Acquire: pairs with the producer's release after a new chunk.
        self.atomic_u64(core::mem::offset_of!(latte_region_header, total_size) as u64).load(Ordering::Acquire)
    }

    /// Process-wide counters.
    pub fn counters(&self) -> crate::counters::latte_counters {
        // SAFETY: the header lies inside the validated mapping; all fields
        // read by counters_of are atomics.
        crate::counters::counters_of(unsafe { &*(self.base as *const latte_region_header) })
    }

    /// Calibration published by the producer.
    pub fn calibration(&self) -> Calibration {
        // SAFETY: as in counters.
        let h = unsafe { &*(self.base as *const latte_region_header) };
        let mut c = Calibration {
            cycles_per_ns: crate::layout::load_f64(&h.cycles_per_ns_bits),
            // Acquire: pairs with the release store of
            // LATTE_CALIBRATION_DONE after the figures.
            calibrated: h.calibration_state.load(Ordering::Acquire) == LATTE_CALIBRATION_DONE,
            overhead: [0.0; LATTE_OVERHEADS as usize],
        };
        for k in 0..LATTE_MODE_PAIRS as usize {
            c.overhead[k] = crate::layout::load_f64(&h.overhead_bits[k]);
        }
        c.overhead[LATTE_MODE_PAIRS as usize] = crate::layout::load_f64(&h.pulse_overhead_bits);
        // Figures another process wrote: what is not finite or out of range
        // (0.001 to 1000 cycles per ns; overheads below 1e12 cycles) is
        // taken as not measured, never printed (a trace with "ts":inf is not
        // JSON).
        if !(c.cycles_per_ns.is_finite() && (1e-3..=1e3).contains(&c.cycles_per_ns)) {
            c.cycles_per_ns = 0.0;
            c.calibrated = false;
        }
        for o in c.overhead.iter_mut() {
            if !(o.is_finite() && (0.0..1e12).contains(o)) {
                *o = 0.0;
            }
        }
        c
    }

    /// Preferred display unit (set by a flush).
    pub fn display_unit(&self) -> u32 {
        // Relaxed: a value read on its own, guarding no other data.
        // SAFETY: as in counters.
        unsafe { &*(self.base as *const latte_region_header) }.display_unit.load(Ordering::Relaxed)
    }

    pub fn base(&self) -> *const u8 {
        self.base
    }
}
