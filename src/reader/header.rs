//! A mapped region's header, validated before anything in it is trusted
//! (`View::new_held`), and the figures read from it: geometry, counts,
//! counters, calibration.

use super::{check_whole, Calibration, Chunks, NameCursor, View};
use crate::error::Error;
use crate::layout::*;
use core::marker::PhantomData;
use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

// Atomic loads at a byte offset. Offsets are checked against `len` by the
// callers (validate, slot bounds); every one is naturally aligned because
// the mapping is page aligned and the layout aligns each field.
impl View<'_> {
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

    /// Samples the region's rings have recorded, outside reserved IDs:
    /// `gen_base + write_idx` of every slot handed out (what every owner of
    /// each ring wrote to it).
    pub fn recorded_total(&self) -> Result<u64, Error> {
        let mut total = 0u64;
        for s in self.slots()? {
            let reserved = self.id_name(s.id_token).is_ok_and(|n| crate::name::is_reserved_name(crate::name::name_bytes(&n)));
            if !reserved {
                total = total.saturating_add(s.gen_base.saturating_add(s.write_idx));
            }
        }
        Ok(total)
    }

    /// TSC of the producer's anchor (its region's creation).
    pub fn anchor_tsc(&self) -> u64 {
        self.anchor_tsc
    }

    /// CLOCK_REALTIME (ns) of the same anchor.
    pub fn anchor_realtime_ns(&self) -> u64 {
        self.anchor_realtime_ns
    }
}

impl<'a> View<'a> {
    fn u32_at(&self, off: u64) -> u32 {
        debug_assert!(off + 4 <= self.len as u64 && off.is_multiple_of(4));
        // SAFETY: in bounds and aligned (see above); an AtomicU32 view of
        // shared memory another process may write.
        unsafe { AtomicU32::from_ptr(self.base.add(off as usize) as *mut u32) }.load(Ordering::Relaxed)
    }

    fn u64_at(&self, off: u64) -> u64 {
        debug_assert!(off + 8 <= self.len as u64 && off.is_multiple_of(8));
        // SAFETY: as u32_at.
        unsafe { AtomicU64::from_ptr(self.base.add(off as usize) as *mut u64) }.load(Ordering::Relaxed)
    }

    fn atomic_u64(&self, off: u64) -> &AtomicU64 {
        // SAFETY: as u32_at; the reference lives no longer than the view's mapping.
        unsafe { AtomicU64::from_ptr(self.base.add(off as usize) as *mut u64) }
    }

    fn atomic_u32(&self, off: u64) -> &AtomicU32 {
        // SAFETY: as u32_at.
        unsafe { AtomicU32::from_ptr(self.base.add(off as usize) as *mut u32) }
    }

    /// Validates the mapping at `base` of `len` bytes.
    ///
    /// # Safety
    /// `base` is readable for `len` bytes, page aligned, and stays mapped
    /// for `'a`.
    pub unsafe fn new(base: *const u8, len: usize) -> Result<View<'a>, Error> {
        // SAFETY: forwarded.
        unsafe { Self::new_held(base, len, len as u64) }
    }

    /// A view of this process's own region, whose chunks are separate
    /// mappings of this process (`Region::chunk_bases`).
    pub(crate) fn of_region(r: &'a crate::region::Region) -> View<'a> {
        let (sb, nb) = r.chunk_bases();
        let geo = *r.geometry();
        let h = r.header();
        let mut chunks = Chunks { slot_base: sb, slot_avail: [0; LATTE_CHUNKS as usize], name_base: nb, name_avail: [0; LATTE_CHUNKS as usize] };
        for k in 0..LATTE_CHUNKS {
            if !sb[k as usize].is_null() {
                chunks.slot_avail[k as usize] = geo.chunk_slots(k);
            }
            if !nb[k as usize].is_null() {
                chunks.name_avail[k as usize] = name_chunk_bytes(k);
            }
        }
        View {
            base: r.base(),
            len: LATTE_HEADER_SIZE as usize,
            _mapping: PhantomData,
            geo,
            chunks,
            validated_size: u64::MAX,
            producer_pid: h.producer_pid,
            flags: h.flags,
            anchor_tsc: h.anchor_tsc,
            anchor_realtime_ns: h.anchor_realtime_ns,
        }
    }

    /// `new` for an object that holds only `held` bytes of data (a sparse
    /// object: the rest are holes). What the header claims is bounded by
    /// them: slots handed out (each slot's header was written) and samples
    /// written (each sample was written), so reading never walks through
    /// holes that are not data, which on tmpfs would allocate them and
    /// grow the object.
    ///
    /// # Safety
    /// As `new`.
    pub unsafe fn new_held(base: *const u8, len: usize, held: u64) -> Result<View<'a>, Error> {
        if len < LATTE_HEADER_SIZE as usize {
            // SAFETY: 8 of the `len` readable bytes, page aligned (the caller's contract).
            return Err(if len >= LATTE_MAGIC.len() { unsafe { magic_or(base, Error::Truncated) } } else { Error::NotLatte });
        }
        let none = [core::ptr::null(); LATTE_CHUNKS as usize];
        let zero = [0; LATTE_CHUNKS as usize];
        let mut v = View {
            base,
            len,
            _mapping: PhantomData,
            geo: Geometry::new(1, 2).unwrap(),
            chunks: Chunks { slot_base: none, slot_avail: zero, name_base: none, name_avail: zero },
            validated_size: 0,
            producer_pid: 0,
            flags: 0,
            anchor_tsc: 0,
            anchor_realtime_ns: 0,
        };
        let magic = v.u64_at(0).to_le_bytes();
        if magic != LATTE_MAGIC {
            return Err(Error::NotLatte);
        }
        // Acquire: the producer's header stores (fenced before its magic store) are visible.
        fence(Ordering::Acquire);
        let off = |f: usize| f as u64;
        use core::mem::offset_of as o;
        type H = latte_region_header;
        if v.u32_at(off(o!(H, version))) != LATTE_LAYOUT_VERSION {
            return Err(Error::Version);
        }
        if v.u32_at(off(o!(H, header_size))) != LATTE_HEADER_SIZE
            || v.u32_at(off(o!(H, slot_header_size))) != LATTE_SLOT_HEADER_SIZE
            || v.u32_at(off(o!(H, sample_size))) != LATTE_SAMPLE_SIZE
            || v.u32_at(off(o!(H, first_name_bytes))) != LATTE_FIRST_NAME_BYTES
        {
            return Err(Error::Corrupt);
        }
        let geo = Geometry::new(v.u32_at(off(o!(H, first_slots))), v.u32_at(off(o!(H, samples_per_slot)))).ok_or(Error::Corrupt)?;
        if v.u64_at(off(o!(H, slot_stride))) != geo.slot_stride {
            return Err(Error::Corrupt);
        }
        v.geo = geo;
        // The counts first, then the size, then the directories: a name or
        // slot counted here lies in a chunk published before it was
        // counted (release on the count after the chunk's release), so
        // every one of them must be there to read.
        let ids_claimed = v.ids_used_raw();
        let slots_claimed = v.slots_used_raw();
        // Acquire: pairs with the release after each chunk's entry.
        let total = v.atomic_u64(off(o!(H, total_size))).load(Ordering::Acquire);
        if total > len as u64 {
            return Err(Error::Truncated);
        }
        v.validated_size = total;
        // The chunks the directories list now, each bounded by the size.
        v.map_chunks(total)?;
        if (slots_claimed as u64) > v.slot_capacity() {
            return Err(Error::Corrupt); // counted slots that are not there
        }
        v.producer_pid = v.u32_at(off(o!(H, producer_pid)));
        v.flags = v.u32_at(off(o!(H, flags)));
        v.anchor_tsc = v.u64_at(off(o!(H, anchor_tsc)));
        v.anchor_realtime_ns = v.u64_at(off(o!(H, anchor_realtime_ns)));
        // Names, and every assigned slot, against what the object holds.
        v.check_held(ids_claimed, slots_claimed, held)?;
        Ok(v)
    }

    /// Reads the chunk directories: the chunks they list now, each
    /// bounded by `total` (the published size, at most the mapping's
    /// length), where each lies and how much of it this view may read.
    fn map_chunks(&mut self, total: u64) -> Result<(), Error> {
        let geo = self.geo;
        let off = |f: usize| f as u64;
        use core::mem::offset_of as o;
        type H = latte_region_header;
        // Acquire: pairs with the producer's release store of each entry
        // (the chunk was whole before it).
        let ring_bytes = LATTE_SLOT_HEADER_SIZE as u64 + geo.samples_per_slot as u64 * LATTE_SAMPLE_SIZE as u64;
        let page_ok = |o: u64| o.is_multiple_of(LATTE_PAGE_SIZE) && o >= LATTE_PAGE_SIZE;
        for k in 0..LATTE_CHUNKS {
            let so = self.atomic_u64(off(o!(H, slot_chunks)) + (k as usize * size_of::<u64>()) as u64).load(Ordering::Acquire);
            if so != 0 {
                geo.slot_chunk_bytes(k).ok_or(Error::Corrupt)?;
                if !page_ok(so) {
                    return Err(Error::Corrupt);
                }
                let room = total.saturating_sub(so);
                let avail = if room >= ring_bytes { ((room - ring_bytes) / geo.slot_stride + 1).min(geo.chunk_slots(k)) } else { 0 };
                self.chunks.slot_avail[k as usize] = avail;
                if avail > 0 {
                    // SAFETY: so < total <= len (new_held checked total): inside the mapping.
                    self.chunks.slot_base[k as usize] = unsafe { self.base.add(so as usize) };
                }
            }
            let no = self.atomic_u64(off(o!(H, name_chunks)) + (k as usize * size_of::<u64>()) as u64).load(Ordering::Acquire);
            if no != 0 {
                if !page_ok(no) {
                    return Err(Error::Corrupt);
                }
                let avail = total.saturating_sub(no).min(name_chunk_bytes(k));
                self.chunks.name_avail[k as usize] = avail;
                if avail > 0 {
                    // SAFETY: no < total <= len (new_held checked total): inside the mapping.
                    self.chunks.name_base[k as usize] = unsafe { self.base.add(no as usize) };
                }
            }
        }
        Ok(())
    }

    /// The names and every assigned slot against what the object holds
    /// (`held` bytes): the `ids_claimed` names counted are there, and the
    /// `slots_claimed` slots and the samples they claim fit in `held`.
    fn check_held(&self, ids_claimed: u32, slots_claimed: u32, held: u64) -> Result<(), Error> {
        let geo = self.geo;
        const PAGE: u64 = LATTE_PAGE_SIZE;
        let used = slots_claimed as u64;
        // Every byte a producer wrote lies in a page the object holds, so
        // what it claims to have written fits in `held` (one page of slack).
        let slack = PAGE;
        let mut claimed = LATTE_HEADER_SIZE as u64;
        if claimed.saturating_add(used.saturating_mul(geo.slot_stride.min(PAGE))) > held.saturating_add(slack) {
            return Err(Error::Corrupt); // more slots than the object holds
        }
        // Walked without storing a name: an object of many tiny names costs
        // no memory here.
        let mut c = NameCursor::default();
        self.scan_names(&mut c, None, |_| {})?;
        check_whole(self.base)?;
        if c.token < ids_claimed {
            return Err(Error::Corrupt); // counted names that are not there
        }
        for i in 0..slots_claimed {
            if let Some(s) = self.slot_info_if_mapped(i)? {
                claimed = claimed.saturating_add(LATTE_SLOT_HEADER_SIZE as u64 + s.write_idx.min(geo.samples_per_slot as u64) * LATTE_SAMPLE_SIZE as u64);
            }
        }
        if claimed > held.saturating_add(slack) {
            return Err(Error::Corrupt); // more samples than the object holds
        }
        Ok(())
    }

    fn ids_used_raw(&self) -> u32 {
        // Acquire pairs with the producer's release when it publishes a name.
        self.atomic_u32(core::mem::offset_of!(latte_region_header, ids_used) as u64).load(Ordering::Acquire)
    }

    fn slots_used_raw(&self) -> u32 {
        // Acquire pairs with the producer's release after a slot's metadata.
        self.atomic_u32(core::mem::offset_of!(latte_region_header, slots_used) as u64).load(Ordering::Acquire)
    }

    /// Published IDs, as the header counts them (names in chunks this view
    /// does not map yet are counted too).
    pub fn ids_used(&self) -> u32 {
        self.ids_used_raw()
    }

    /// Slots handed out so far, as the header counts them.
    pub fn slots_used(&self) -> u32 {
        self.slots_used_raw()
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

/// `e`, or Error::NotLatte when the first 8 bytes are not latte's magic.
///
/// # Safety
/// `base` is readable for 8 bytes and 8-aligned.
unsafe fn magic_or(base: *const u8, e: Error) -> Error {
    // Relaxed: the magic is compared on its own (the fields it vouches for
    // are validated one by one afterwards).
    // SAFETY: the caller checked that the magic's 8 bytes are readable
    // (LATTE_MAGIC is one u64).
    let m = unsafe { AtomicU64::from_ptr(base as *mut u64) }.load(Ordering::Relaxed).to_le_bytes();
    if m == LATTE_MAGIC {
        e
    } else {
        Error::NotLatte
    }
}
