//! A mapped region's header, validated before anything in it is trusted
//! ([`View::new_held`]); the figures read from it once validated are in
//! [`figures`](super::figures).

use super::{check_whole, Chunks, NameCursor, View};
use crate::error::Error;
use crate::layout::*;
use core::marker::PhantomData;
use core::sync::atomic::{fence, AtomicU64, Ordering};

// Atomic loads at a byte offset. Offsets are checked against `len` by the
// callers (validate, slot bounds); every one is naturally aligned because
// the mapping is page aligned and the layout aligns each field.
impl<'a> View<'a> {
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
            // Relaxed: values read on their own (a fork child's move
            // replaces them, page and all).
            producer_pid: h.producer_pid.load(Ordering::Relaxed),
            flags: h.flags.load(Ordering::Relaxed),
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
