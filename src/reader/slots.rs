//! A slot's header, and its samples read past a cursor by the ring
//! protocol's reader steps R1-R8 (`ring`): the reading half of `View`.

use super::{check_whole, copy_shared, latte_cursor, latte_raw_sample, latte_slot_info, ReadMode, ReadOutcome, View, LATTE_MAX_WRITE_IDX};
use crate::error::Error;
use crate::layout::*;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Samples copied between two checks of the writer's index (16 KiB).
const READ_CHUNK: u64 = 1024;

impl View<'_> {
    /// Slot `i`'s header, when this view maps it.
    fn slot_ptr(&self, i: u32) -> Option<*const u8> {
        let (k, j) = self.geo.slot_place(i);
        if k >= LATTE_CHUNKS || j >= self.chunks.slot_avail[k as usize] {
            return None;
        }
        // SAFETY: slot j of chunk k lies whole inside the mapping (slot_avail).
        Some(unsafe { self.chunks.slot_base[k as usize].add((j * self.geo.slot_stride) as usize) })
    }

    /// Slot `i`'s header, checked: token published, write index plausible.
    /// `EINVAL` when this view does not map it, `Error::Truncated` when the
    /// object lost pages under the mapping.
    pub fn slot_info(&self, i: u32) -> Result<latte_slot_info, Error> {
        let s = self.slot_info_if_mapped(i)?.ok_or(Error::Os(libc::EINVAL))?;
        // What was read may be the zeros of a page the object lost.
        check_whole(self.base)?;
        Ok(s)
    }

    pub(super) fn slot_info_if_mapped(&self, i: u32) -> Result<Option<latte_slot_info>, Error> {
        let Some(p) = self.slot_ptr(i) else { return Ok(None) };
        use core::mem::offset_of as f;
        type S = latte_slot_header;
        // SAFETY: the slot header lies inside the mapping (slot_ptr); its
        // fields are aligned; another process may write them.
        let a32 = |o: usize| unsafe { AtomicU32::from_ptr(p.add(o) as *mut u32) };
        // Acquire pairs with the release store of a new generation: the
        // metadata below belongs to it (re-checked by readers that need it exact).
        let generation = a32(f!(S, generation)).load(Ordering::Acquire);
        let info = latte_slot_info {
            index: i,
            generation,
            id_token: a32(f!(S, id_token)).load(Ordering::Relaxed),
            thread_idx: a32(f!(S, thread_idx)).load(Ordering::Relaxed),
            os_tid: a32(f!(S, os_tid)).load(Ordering::Relaxed),
            state: a32(f!(S, state)).load(Ordering::Relaxed),
            // Acquire: samples below it are published.
            // SAFETY: as a32.
            write_idx: unsafe { AtomicU64::from_ptr(p as *mut u64) }.load(Ordering::Acquire),
            // Relaxed: stored with the generation's metadata (A3), seen
            // through the acquire load of the generation above.
            // SAFETY: as a32 (8-aligned).
            gen_base: unsafe { AtomicU64::from_ptr(p.add(f!(S, gen_base)) as *mut u64) }.load(Ordering::Relaxed),
        };
        if generation != 0 && (info.id_token >= self.ids_used() || info.write_idx >= LATTE_MAX_WRITE_IDX) {
            // A reassignment (ring protocol A1-A4) may have begun after the
            // generation was loaded: its new metadata is not this
            // generation's. Acquire fence: a value A3 stored, read above,
            // makes A1's store of 0 (ordered before A3 by A2) visible to the
            // load that follows.
            core::sync::atomic::fence(Ordering::Acquire);
            if a32(f!(S, generation)).load(Ordering::Relaxed) != generation {
                return Ok(Some(latte_slot_info { generation: 0, ..info }));
            }
            return Err(Error::Corrupt);
        }
        Ok(Some(info))
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

    /// Every handed-out slot that is currently assigned.
    /// `Error::Truncated` when the object shrank under the mapping (its
    /// slots would read as zeros: unassigned, and a watcher would see an
    /// idle region).
    pub fn slots(&self) -> Result<Vec<latte_slot_info>, Error> {
        let mut v = Vec::new();
        for i in 0..self.slots_used() {
            match self.slot_info_if_mapped(i)? {
                Some(s) if s.generation != 0 => v.push(s),
                _ => {}
            }
        }
        check_whole(self.base)?;
        Ok(v)
    }

    /// Reads the samples of slot `i` newer than the cursor (the protocol in
    /// the module doc), appending them, oldest first, to `out`.
    pub fn read_slot(&self, i: u32, cur: &mut latte_cursor, out: &mut Vec<latte_raw_sample>, mode: ReadMode) -> Result<ReadOutcome, Error> {
        self.read_slot_max(i, cur, out, mode, usize::MAX)
    }

    /// `read_slot` appending at most `max` samples.
    pub fn read_slot_max(&self, i: u32, cur: &mut latte_cursor, out: &mut Vec<latte_raw_sample>, mode: ReadMode, max: usize) -> Result<ReadOutcome, Error> {
        // Room for what the slot holds now, never for what the header says
        // a ring could hold (a hostile header claims 2^31 samples); samples
        // written after this look wait for the next read.
        let info = self.slot_info(i)?;
        let next = if info.generation == cur.generation { cur.next } else { 0 }; // a new owner restarts the cursor
        let holds = info.write_idx.saturating_sub(next);
        let room = max.min(self.geo.samples_per_slot as usize).min(holds.min(usize::MAX as u64) as usize);
        out.try_reserve(room).map_err(|_| Error::NOMEM)?;
        let len = out.len();
        let r = self.read_into(i, cur, &mut out.spare_capacity_mut()[..room], mode)?;
        // SAFETY: read_into initialised the first r.read elements of the spare capacity.
        unsafe { out.set_len(len + r.read as usize) };
        Ok(r)
    }

    /// The read protocol into caller memory: the samples newer than the
    /// cursor, at most `out.len()`, land in `out[..read]`, oldest first.
    /// When the object shrank under the reader during the call (a page read
    /// as zeros), the result is `Error::Truncated`, whatever was read, and
    /// the cursor is left as it was.
    pub fn read_into(
        &self,
        i: u32,
        cur: &mut latte_cursor,
        out: &mut [core::mem::MaybeUninit<latte_raw_sample>],
        mode: ReadMode,
    ) -> Result<ReadOutcome, Error> {
        let mut c = *cur;
        let r = self.read_protocol(i, &mut c, out, mode);
        check_whole(self.base)?;
        *cur = c;
        r
    }

    fn read_protocol(
        &self,
        i: u32,
        cur: &mut latte_cursor,
        out: &mut [core::mem::MaybeUninit<latte_raw_sample>],
        mode: ReadMode,
    ) -> Result<ReadOutcome, Error> {
        let (assume_final, pace_ns) = match mode {
            ReadMode::Live => (false, 0),
            ReadMode::Final => (true, 0),
            ReadMode::Paced { min_interval_ns } => (false, min_interval_ns),
        };
        let p = self.slot_ptr(i).ok_or(Error::Os(libc::EINVAL))?;
        // SAFETY: the slot header lies inside the mapping (slot_ptr).
        let SlotWords { generation: gen_a, state: state_a, write_idx: widx, flushed_end, gen_base } = unsafe { SlotWords::of(p) };
        let mut res = ReadOutcome::default();
        let g1 = crate::ring::generation(gen_a); // R1
        if g1 == 0 {
            return Ok(res);
        }
        if cur.generation != g1 {
            // R1, a new owner. Relaxed: gen_base is A3's, published by the
            // acquire load of the generation (A4).
            take_new_owner(cur, &mut res, g1, gen_base.load(Ordering::Relaxed));
        }
        let closed = assume_final || crate::ring::is_closed(state_a, LATTE_SLOT_CLOSED); // R2
        let flushed = self.flags & LATTE_REGION_FLUSHED != 0;
        // Pacing (`ReadMode::Paced`): generation and state sit on the header's
        // second line, which the owner does not write while recording, so
        // looking at them costs it nothing; write_idx is the line to spare.
        let mut now_ns = 0;
        if pace_ns > 0 && !closed && !flushed {
            now_ns = crate::tsc::clock_ns(libc::CLOCK_MONOTONIC);
            if cur.caught_up_ns != 0 && now_ns.wrapping_sub(cur.caught_up_ns) < pace_ns {
                res.deferred = true;
                return Ok(res);
            }
        }
        let w1 = crate::ring::published(widx); // R3
        if w1 >= LATTE_MAX_WRITE_IDX {
            return Err(Error::Corrupt);
        }
        if w1 < cur.next {
            // R4: an index going back.
            if crate::ring::reassigned(gen_a, g1) {
                return Ok(res);
            }
            return Err(Error::Corrupt);
        }
        let cap = self.geo.samples_per_slot as u64;
        let margin = if closed { 0 } else { 1 };
        let lo = cur.next.max(crate::ring::oldest_safe(w1, margin, cap));
        let end = w1.min(lo.saturating_add(out.len() as u64));
        // SAFETY: p is slot i's header, inside the validated mapping with
        // its samples; end - lo <= out.len() by construction of `end`.
        let first_kept = unsafe { copy_range(p, out, lo..end, cap, margin, || writer_head(widx, flushed_end, flushed, w1)) }?;
        // R7.
        if !flushed && !crate::ring::unchanged(gen_a, g1) {
            return Ok(res);
        }
        res.lost = first_kept - cur.next;
        res.read = end - first_kept;
        // Caught up (everything below w1 returned): the next paced read may
        // wait. Cut short by `out`: the next one looks at once.
        cur.caught_up_ns = if end == w1 { now_ns } else { 0 };
        cur.next = end;
        cur.lost += res.lost;
        cur.read += res.read;
        Ok(res)
    }
}

/// The words of a slot header the read protocol loads: aligned atomics
/// another process may write.
struct SlotWords<'s> {
    generation: &'s AtomicU32,
    state: &'s AtomicU32,
    write_idx: &'s AtomicU64,
    flushed_end: &'s AtomicU64,
    gen_base: &'s AtomicU64,
}

impl SlotWords<'_> {
    /// # Safety
    /// `p` is a slot header inside a mapping that outlives the result.
    unsafe fn of<'s>(p: *const u8) -> SlotWords<'s> {
        use core::mem::offset_of as f;
        type S = latte_slot_header;
        // SAFETY: the caller's guarantee; every field is aligned in the
        // header (layout.rs) and is read only atomically.
        unsafe {
            SlotWords {
                generation: AtomicU32::from_ptr(p.add(f!(S, generation)) as *mut u32),
                state: AtomicU32::from_ptr(p.add(f!(S, state)) as *mut u32),
                write_idx: AtomicU64::from_ptr(p.add(f!(S, write_idx)) as *mut u64),
                flushed_end: AtomicU64::from_ptr(p.add(f!(S, flushed_end_idx)) as *mut u64),
                gen_base: AtomicU64::from_ptr(p.add(f!(S, gen_base)) as *mut u64),
            }
        }
    }
}

/// R5-R6 (`ring::copy_checked`) over `range` of the ring at slot header
/// `p` (`cap` samples): index j goes to out[j - first kept]; the first
/// index kept.
///
/// # Safety
/// `p` is a slot header followed by its `cap` samples inside a mapping;
/// `range.end - range.start <= out.len()`.
unsafe fn copy_range(
    p: *const u8,
    out: &mut [core::mem::MaybeUninit<latte_raw_sample>],
    range: core::ops::Range<u64>,
    cap: u64,
    margin: u64,
    head: impl FnMut() -> Result<u64, Error>,
) -> Result<u64, Error> {
    let mask = cap - 1;
    // SAFETY: the samples follow the header (the caller's guarantee).
    let ring = unsafe { p.add(LATTE_SLOT_HEADER_SIZE as usize) } as *const latte_sample;
    let dst = out.as_mut_ptr() as *mut latte_raw_sample;
    crate::ring::copy_checked::<AtomicU64, Error>(
        range.start,
        range.end,
        cap,
        margin,
        READ_CHUNK,
        |j, n, k| {
            // SAFETY: j & mask + n <= cap keeps the source inside the ring;
            // k + n <= end - start <= out.len() keeps the destination inside
            // `out` (latte_raw_sample is laid out as latte_sample, checked
            // at compile time); `out` is this caller's, the ring is not.
            unsafe { copy_shared(dst.add(k) as *mut u8, ring.add((j & mask) as usize) as *const u8, n as usize * LATTE_SAMPLE_SIZE as usize) };
        },
        |from, n| out.copy_within(from..from + n, 0),
        head,
    )
}

/// R1 on a slot with a new owner (generation `g`, whose earlier owners wrote
/// `base` samples in all): what they wrote past what this cursor read of
/// them is lost; the cursor starts over on the new owner.
fn take_new_owner(cur: &mut latte_cursor, res: &mut ReadOutcome, g: u32, base: u64) {
    let seen = if cur.generation == 0 { 0 } else { cur.base.saturating_add(cur.next) };
    res.lost_before = base.saturating_sub(seen);
    res.restarted = cur.generation != 0;
    *cur = latte_cursor { generation: g, base, lost_before: cur.lost_before.saturating_add(res.lost_before), ..Default::default() };
}

/// The writer's index as the check after a chunk (R6) sees it. A flushed
/// image's was taken by the flush after the samples were written out; a
/// fork child's copy carries its parent's, taken after the copy
/// (`flushed_end_idx`, 0 in a live region): the larger one counts.
fn writer_head(widx: &AtomicU64, flushed_end: &AtomicU64, flushed: bool, w1: u64) -> Result<u64, Error> {
    let end = flushed_end.load(Ordering::Relaxed);
    if flushed {
        if end < w1 || end >= LATTE_MAX_WRITE_IDX {
            return Err(Error::Corrupt);
        }
        Ok(end)
    } else {
        Ok(widx.load(Ordering::Relaxed).max(end.min(LATTE_MAX_WRITE_IDX - 1)))
    }
}
