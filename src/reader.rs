//! Reading a region: the in-process region, another process's shared
//! region, or a flushed image. Every read goes through `View`, which
//! validates the object before trusting it and reads every field that may
//! change with an atomic load.
//!
//! Reading a slot follows the ring protocol's reader steps R1-R8
//! (`ring`, where the protocol is stated once); the code cites them.
//!
//! Pacing (`ReadMode::Paced`, what `latte_reader_read` does) sits in
//! front of the protocol: a cursor that caught up with a live slot less than
//! the minimum interval ago returns nothing without loading `write_idx`.

use crate::error::Error;
use crate::fault::Protected;
use crate::layout::*;
use crate::mmap::Mmap;
use crate::name::Name;
use core::marker::PhantomData;
use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

/// Copies `len` bytes of ring memory that the writer (another thread or
/// process) may be storing to at the same time, into `dst`, then waits for
/// every load of the copy to complete (`lfence`) before any later load.
///
/// The copy is `rep movsb` in inline asm: the compiler cannot see the loads,
/// so it can neither assume the bytes stable nor tear, merge or repeat them
/// as it may a plain Rust read, and the CPU copies with its widest moves
/// (the relaxed 8-byte atomic loads it replaces ran at 0.6-0.75 of memcpy).
/// It gives per-byte no atomicity, and needs none: the protocol never
/// trusts a sample because of its contents, only because the writer's index
/// loaded after the copy says no store to it could have overlapped. That
/// check needs every load of the copy done before the index is loaded; fast
/// string moves may reorder their own accesses, and the `lfence` puts all of
/// them before the index load (and the asm is a compiler barrier: it may
/// read and write memory). The reader's acquire fence after the chunk pairs
/// with the writer's release stores as before.
///
/// # Safety
/// `src..src+len` must be mapped and readable, `dst..dst+len` writable, not
/// overlapping, and `dst` not read or written by anyone else meanwhile.
#[inline]
pub(crate) unsafe fn copy_shared(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller's contract; the direction flag is clear on entry to
    // inline asm (Rust's asm! guarantees it), so rep movsb copies upwards;
    // rcx, rsi, rdi are declared clobbered, the flags are not touched.
    unsafe {
        core::arch::asm!(
            "rep movsb",
            "lfence",
            inout("rcx") len => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags)
        );
    }
}

/// Samples copied between two checks of the writer's index (16 KiB).
const READ_CHUNK: u64 = 1024;

/// A `write_idx` at or above this is impossible (146 years at one sample
/// per ns) and marks the slot corrupt.
pub const LATTE_MAX_WRITE_IDX: u64 = 1u64 << 62;

/// How a read may treat a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// Its owner may be writing: the whole protocol (module doc).
    Live,
    /// No write can be in progress: the caller is the slot's owner thread,
    /// or the image is a flushed file. The ring is read as it stands.
    Final,
    /// Live, for a reader that polls in a loop: once a read has returned
    /// every published sample of a live slot, the cursor's next reads
    /// within `min_interval_ns` return nothing (`deferred`) without loading
    /// the writer's index. That index shares its cache line with nothing,
    /// but the owner stores it after every sample: each look by another
    /// core takes the line from the owner, whose next store then waits for
    /// it. A reader polling back to back does that on nearly every sample
    /// (measured: the producer's p99.9 x1.5-2, its throughput -30%); once
    /// per 10 us it is not measurable, and a ring of 65,536 samples cannot
    /// be overrun in that time (a thread recording back to back needs at
    /// least ~8 ns a sample: a ring under ~2,048 samples may lap in 10 us;
    /// its reader lowers the interval). A read cut short by `out` being
    /// full, a closed slot, a flushed image and a slot with a new owner are
    /// never deferred. 0 is `Live`.
    Paced { min_interval_ns: u64 },
}

/// A validated view over a mapped region, borrowing the mapping (`'a`).
///
/// A view cannot outlive what it reads:
///
/// ```compile_fail,E0716
/// let v = latte::Mapping::open_file(std::path::Path::new("x.img")).unwrap().view();
/// v.ids(); // the Mapping was dropped at the end of the line above
/// ```
///
/// and what was validated cannot be changed afterwards:
///
/// ```compile_fail,E0616
/// let m = latte::Mapping::open_file(std::path::Path::new("x.img")).unwrap();
/// let mut v = m.view();
/// v.geo.first_slots = u32::MAX; // the geometry is private: `v.geo()` reads it
/// ```
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    base: *const u8,
    len: usize,
    _mapping: PhantomData<&'a [u8]>,
    // Private: every read trusts them (validated once, at `new`).
    geo: Geometry,
    chunks: Chunks,
    /// The `total_size` the chunks were validated against: a region that
    /// published more since has chunks this view does not read.
    validated_size: u64,
    producer_pid: u32,
    flags: u32,
    anchor_tsc: u64,
    anchor_realtime_ns: u64,
}

/// Where a view finds each chunk, and how much of it it may read: the
/// chunks the directory listed when the view was made, bounded by the
/// mapping (a chunk made later, or past the end of a shorter image, is
/// not there to read).
#[derive(Clone, Copy, Debug)]
struct Chunks {
    slot_base: [*const u8; LATTE_CHUNKS as usize],
    /// Slots of each slot chunk that lie whole inside the mapping.
    slot_avail: [u64; LATTE_CHUNKS as usize],
    name_base: [*const u8; LATTE_CHUNKS as usize],
    /// Bytes of each name chunk inside the mapping.
    name_avail: [u64; LATTE_CHUNKS as usize],
}

/// One ID of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdInfo {
    pub token: u32,
    pub name: Name,
}

/// A reader's place in the name records of a region, for reading the
/// names published since (`View::ids_since`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameCursor {
    /// The next token.
    pub token: u32,
    chunk: u32,
    pos: u64,
}

/// What a slot's header says now.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_slot_info {
    /// Index of the slot in the region.
    pub index: u32,
    /// Generation (changes when the slot gets a new owner).
    pub generation: u32,
    /// ID token.
    pub id_token: u32,
    /// Process-wide thread index of the owner.
    pub thread_idx: u32,
    /// OS thread id of the owner.
    pub os_tid: u32,
    /// LATTE_SLOT_LIVE or LATTE_SLOT_CLOSED.
    pub state: u32,
    /// Samples written to it so far (by this owner).
    pub write_idx: u64,
    /// Samples its earlier owners wrote: the slot's samples since it was
    /// made are `gen_base + write_idx`.
    pub gen_base: u64,
}

/// A reader's position in one slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_cursor {
    /// Generation the cursor belongs to (0: none yet).
    pub generation: u32,
    pub _pad: u32,
    /// Next index to read.
    pub next: u64,
    /// Samples of this generation lost so far (overwritten before they
    /// were read).
    pub lost: u64,
    /// Samples of this generation returned so far.
    pub read: u64,
    /// CLOCK_MONOTONIC time (ns) of the last paced read that returned every
    /// published sample of a live slot; 0 when the next read must look.
    pub caught_up_ns: u64,
    /// The slot's `gen_base` in this generation.
    pub base: u64,
    /// Samples of the slot's earlier owners this cursor never read (the
    /// rest of a generation it followed when the slot got a new owner, and
    /// every generation it did not see), over the cursor's life: with the
    /// `read` and `lost` of each generation it followed, it adds up to the
    /// slot's `gen_base + write_idx`.
    pub lost_before: u64,
}

/// Default minimum interval (ns) between two looks at a live slot's writer
/// index through one cursor of a `latte_reader` (`latte_reader_read`), once
/// the cursor has caught up (`latte_reader_set_min_interval`).
pub const LATTE_READER_MIN_INTERVAL_NS: u64 = 10_000;

/// A sample as copied out of a ring (both words as stored).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_raw_sample {
    pub start_tsc: u64,
    pub packed: u64,
}

// A ring's samples are copied into `latte_raw_sample`s byte for byte.
const _: () = assert!(core::mem::size_of::<latte_raw_sample>() == core::mem::size_of::<latte_sample>());
const _: () = assert!(core::mem::offset_of!(latte_raw_sample, packed) == core::mem::offset_of!(latte_sample, packed));

impl latte_raw_sample {
    pub fn decode(&self) -> Sample {
        Sample::unpack(self.start_tsc, self.packed)
    }
}

/// Outcome of one read of a slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Samples appended to the output.
    pub read: u64,
    /// Samples lost since the previous read.
    pub lost: u64,
    /// The slot got a new owner; the cursor was restarted.
    pub restarted: bool,
    /// Samples of the slot's earlier owners the cursor never read, found
    /// by this read (ring protocol R1): exactly what they wrote and this
    /// cursor did not return.
    pub lost_before: u64,
    /// A paced read did not look at the writer's index: the cursor had
    /// caught up less than the minimum interval ago.
    pub deferred: bool,
}

/// Calibration published in a region.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Calibration {
    pub cycles_per_ns: f64,
    pub calibrated: bool,
    /// Overhead in cycles of each (start mode, stop mode) pair, at
    /// [`Sample::pair_index`]: `start * LATTE_TIMED_MODES + stop`, then the
    /// pulse's at [`LATTE_MODE_PAIRS`].
    pub overhead: [f64; LATTE_OVERHEADS as usize],
}

impl Calibration {
    /// The overhead of spans started in `start` mode and stopped in `stop`
    /// mode (each [`LATTE_MODE_FAST`], [`LATTE_MODE_MID`] or
    /// [`LATTE_MODE_HARD`]; any other counts as FAST, as it records).
    pub fn pair(&self, start: latte_mode, stop: latte_mode) -> f64 {
        let timed = |m: latte_mode| if m == LATTE_MODE_MID || m == LATTE_MODE_HARD { m } else { LATTE_MODE_FAST };
        self.overhead[(timed(start) * LATTE_TIMED_MODES + timed(stop)) as usize]
    }

    /// The overhead of a pulse.
    pub fn pulse(&self) -> f64 {
        self.overhead[LATTE_MODE_PAIRS as usize]
    }
}

// SAFETY: a view only reads, through atomic loads and opaque copies, memory
// that stays mapped for 'a; any thread may do that.
unsafe impl Send for View<'_> {}
// SAFETY: as Send.
unsafe impl Sync for View<'_> {}

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
            // SAFETY: the magic's bytes of the `len` readable ones, page
            // aligned (the caller's contract).
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
        // Acquire: pairs with the producer's release store of each entry
        // (the chunk was whole before it).
        let ring_bytes = LATTE_SLOT_HEADER_SIZE as u64 + geo.samples_per_slot as u64 * LATTE_SAMPLE_SIZE as u64;
        let page_ok = |o: u64| o.is_multiple_of(LATTE_PAGE_SIZE) && o >= LATTE_PAGE_SIZE;
        for k in 0..LATTE_CHUNKS {
            let so = v.atomic_u64(off(o!(H, slot_chunks)) + (k as usize * size_of::<u64>()) as u64).load(Ordering::Acquire);
            if so != 0 {
                geo.slot_chunk_bytes(k).ok_or(Error::Corrupt)?;
                if !page_ok(so) {
                    return Err(Error::Corrupt);
                }
                let room = total.saturating_sub(so);
                let avail = if room >= ring_bytes { ((room - ring_bytes) / geo.slot_stride + 1).min(geo.chunk_slots(k)) } else { 0 };
                v.chunks.slot_avail[k as usize] = avail;
                if avail > 0 {
                    // SAFETY: so < total <= len: inside the mapping.
                    v.chunks.slot_base[k as usize] = unsafe { base.add(so as usize) };
                }
            }
            let no = v.atomic_u64(off(o!(H, name_chunks)) + (k as usize * size_of::<u64>()) as u64).load(Ordering::Acquire);
            if no != 0 {
                if !page_ok(no) {
                    return Err(Error::Corrupt);
                }
                let avail = total.saturating_sub(no).min(name_chunk_bytes(k));
                v.chunks.name_avail[k as usize] = avail;
                if avail > 0 {
                    // SAFETY: no < total <= len: inside the mapping.
                    v.chunks.name_base[k as usize] = unsafe { base.add(no as usize) };
                }
            }
        }
        if (slots_claimed as u64) > v.slot_capacity() {
            return Err(Error::Corrupt); // counted slots that are not there
        }
        v.producer_pid = v.u32_at(off(o!(H, producer_pid)));
        v.flags = v.u32_at(off(o!(H, flags)));
        v.anchor_tsc = v.u64_at(off(o!(H, anchor_tsc)));
        v.anchor_realtime_ns = v.u64_at(off(o!(H, anchor_realtime_ns)));
        // Names, and every assigned slot, against what the object holds.
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
        v.scan_names(&mut c, None, |_| {})?;
        check_whole(base)?;
        if c.token < ids_claimed {
            return Err(Error::Corrupt); // counted names that are not there
        }
        for i in 0..slots_claimed {
            if let Some(s) = v.slot_info_if_mapped(i)? {
                claimed = claimed.saturating_add(LATTE_SLOT_HEADER_SIZE as u64 + s.write_idx.min(geo.samples_per_slot as u64) * LATTE_SAMPLE_SIZE as u64);
            }
        }
        if claimed > held.saturating_add(slack) {
            return Err(Error::Corrupt); // more samples than the object holds
        }
        Ok(v)
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

    /// The name of token `t` (reads the records before it: for many
    /// names, read them all with `ids` or `ids_since`).
    pub fn id_name(&self, t: u32) -> Result<Name, Error> {
        if t >= self.ids_used() {
            return Err(Error::Corrupt);
        }
        let mut c = NameCursor::default();
        let mut found = None;
        self.scan_names(&mut c, Some(t), |i| found = Some(i.name))?;
        found.ok_or(Error::Corrupt)
    }

    /// Every published ID this view maps. `Error::Truncated` when the
    /// object shrank under the mapping (what was read may be zeros).
    pub fn ids(&self) -> Result<Vec<IdInfo>, Error> {
        let mut c = NameCursor::default();
        let mut v = Vec::new();
        self.ids_since(&mut c, &mut v)?;
        Ok(v)
    }

    /// Appends the IDs published after the cursor (the names this view
    /// maps) to `out`, and moves the cursor past them.
    pub fn ids_since(&self, c: &mut NameCursor, out: &mut Vec<IdInfo>) -> Result<(), Error> {
        let r = self.scan_names(c, None, |i| out.push(i));
        check_whole(self.base)?;
        r
    }

    /// Reads name records from `c` on, up to `ids_used` (or up to token
    /// `stop`, inclusive), handing each to `f`.
    fn scan_names(&self, c: &mut NameCursor, stop: Option<u32>, mut f: impl FnMut(IdInfo)) -> Result<(), Error> {
        let n = self.ids_used();
        while c.token < n && c.chunk < LATTE_CHUNKS {
            let k = c.chunk as usize;
            let (base, avail) = (self.chunks.name_base[k], self.chunks.name_avail[k]);
            if base.is_null() {
                return Ok(()); // a chunk this view does not map (yet)
            }
            let full = avail == name_chunk_bytes(c.chunk);
            if c.pos + LATTE_NAME_LEN_SIZE as u64 > avail {
                if !full {
                    return Ok(()); // the rest lies past the mapping
                }
                *c = NameCursor { token: c.token, chunk: c.chunk + 1, pos: 0 };
                continue;
            }
            // Relaxed: the record lies below the count loaded with acquire.
            // SAFETY: pos + 4 <= avail: inside the mapping, 4-aligned (records are).
            let word = unsafe { AtomicU32::from_ptr(base.add(c.pos as usize) as *mut u32) }.load(Ordering::Relaxed);
            if word == 0 {
                *c = NameCursor { token: c.token, chunk: c.chunk + 1, pos: 0 };
                continue;
            }
            let len = (word - 1) as u64;
            if len > LATTE_MAX_NAME_LEN as u64 {
                return Err(Error::Corrupt);
            }
            let rec = name_record_bytes(len);
            if c.pos + rec > avail {
                return if full { Err(Error::Corrupt) } else { Ok(()) };
            }
            let mut name = vec![0u8; len as usize];
            // SAFETY: the record's bytes lie inside the mapping (checked
            // above); `name` is ours, len bytes long.
            unsafe { copy_shared(name.as_mut_ptr(), base.add((c.pos + LATTE_NAME_LEN_SIZE as u64) as usize), len as usize) };
            let t = c.token;
            c.pos += rec;
            c.token += 1;
            if stop.is_none_or(|s| s == t) {
                f(IdInfo { token: t, name });
            }
            if stop == Some(t) {
                return Ok(());
            }
        }
        Ok(())
    }

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
    /// `EINVAL` when this view does not map it.
    pub fn slot_info(&self, i: u32) -> Result<latte_slot_info, Error> {
        self.slot_info_if_mapped(i)?.ok_or(Error::Os(libc::EINVAL))
    }

    fn slot_info_if_mapped(&self, i: u32) -> Result<Option<latte_slot_info>, Error> {
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
            return Err(Error::Corrupt);
        }
        Ok(Some(info))
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
        use core::mem::offset_of as f;
        type S = latte_slot_header;
        // SAFETY: the slot header lies inside the mapping (slot_ptr); its
        // fields are aligned atomics another process may write.
        let (gen_a, state_a, widx, flushed_end, gen_base_a) = unsafe {
            (
                AtomicU32::from_ptr(p.add(f!(S, generation)) as *mut u32),
                AtomicU32::from_ptr(p.add(f!(S, state)) as *mut u32),
                AtomicU64::from_ptr(p as *mut u64),
                AtomicU64::from_ptr(p.add(f!(S, flushed_end_idx)) as *mut u64),
                AtomicU64::from_ptr(p.add(f!(S, gen_base)) as *mut u64),
            )
        };
        let mut res = ReadOutcome::default();
        let g1 = crate::ring::generation(gen_a); // R1
        if g1 == 0 {
            return Ok(res);
        }
        if cur.generation != g1 {
            // R1, a new owner: what the earlier owners wrote past what this
            // cursor read of them is lost. Relaxed: gen_base is A3's,
            // published by the acquire load of the generation (A4).
            let base = gen_base_a.load(Ordering::Relaxed);
            let seen = if cur.generation == 0 { 0 } else { cur.base.saturating_add(cur.next) };
            res.lost_before = base.saturating_sub(seen);
            res.restarted = cur.generation != 0;
            *cur = latte_cursor { generation: g1, base, lost_before: cur.lost_before.saturating_add(res.lost_before), ..Default::default() };
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
        let mask = cap - 1;
        let margin = if closed { 0 } else { 1 };
        let lo = cur.next.max(crate::ring::oldest_safe(w1, margin, cap));
        let end = w1.min(lo.saturating_add(out.len() as u64));
        // SAFETY: the samples of slot i lie inside the validated mapping.
        let ring = unsafe { p.add(LATTE_SLOT_HEADER_SIZE as usize) } as *const latte_sample;
        // The writer's index as the check after a chunk sees it. A flushed
        // image's was taken by the flush after the samples were written out;
        // a fork child's copy carries its parent's, taken after the copy
        // (`flushed_end_idx`, 0 in a live region): the larger one counts.
        let head = || -> Result<u64, Error> {
            let end = flushed_end.load(Ordering::Relaxed);
            if flushed {
                if end < w1 || end >= LATTE_MAX_WRITE_IDX {
                    return Err(Error::Corrupt);
                }
                Ok(end)
            } else {
                Ok(widx.load(Ordering::Relaxed).max(end.min(LATTE_MAX_WRITE_IDX - 1)))
            }
        };
        // R5-R6 (`ring::copy_checked`): index j goes to out[j - first kept];
        // end - lo <= out.len() by construction of `end`.
        let dst = out.as_mut_ptr() as *mut latte_raw_sample;
        let first_kept = crate::ring::copy_checked::<AtomicU64, Error>(
            lo,
            end,
            cap,
            margin,
            READ_CHUNK,
            |j, n, k| {
                // SAFETY: j & mask + n <= cap keeps the source inside the
                // ring; k + n <= end - lo <= out.len() keeps the destination
                // inside `out` (latte_raw_sample is laid out as latte_sample,
                // checked at compile time); `out` is this caller's, the ring
                // is not.
                unsafe { copy_shared(dst.add(k) as *mut u8, ring.add((j & mask) as usize) as *const u8, n as usize * LATTE_SAMPLE_SIZE as usize) };
            },
            |from, n| out.copy_within(from..from + n, 0),
            head,
        )?;
        // R7.
        if !flushed && !crate::ring::unchanged(gen_a, g1) {
            return Ok(res);
        }
        let kept = (end - first_kept) as usize;
        res.lost = first_kept - cur.next;
        res.read = kept as u64;
        // Caught up (everything below w1 returned): the next paced read may
        // wait. Cut short by `out`: the next one looks at once.
        cur.caught_up_ns = if end == w1 { now_ns } else { 0 };
        cur.next = end;
        cur.lost += res.lost;
        cur.read += res.read;
        Ok(res)
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

// ------------------------------------------------------- opening by name ----

/// `Error::Truncated` once the mapping at `base` lost pages (the object
/// shrank under it, see `fault`): what it reads may be zeros, not data.
pub fn check_whole(base: *const u8) -> Result<(), Error> {
    if crate::fault::faults_at(base) != 0 {
        Err(Error::Truncated)
    } else {
        Ok(())
    }
}

/// Times `Mapping::from_fd` measures an object again that grew while it
/// was being mapped.
const MAP_RETRIES: u32 = 8;

/// Whether the object behind `fd` is now larger than `len` bytes.
fn grown_since(fd: &OwnedFd, len: usize) -> bool {
    // SAFETY: an all-zero stat is a valid out-parameter; fd is open.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::fstat(fd.as_raw_fd(), &mut st) == 0 && st.st_size as u64 > len as u64 }
}

/// A read-only mapping of a shm object or a file, validated. Its `view`
/// borrows it.
pub struct Mapping {
    /// Declared before `map`: the protection goes before the mapping.
    _fault: Protected,
    _map: Mmap,
    /// The object, kept open to ask whether its producer lives (`liveness`).
    fd: OwnedFd,
    /// Validated at open; handed out with the lifetime of `&self`.
    view: View<'static>,
}

impl Mapping {
    /// The validated view, borrowing the mapping.
    pub fn view(&self) -> View<'_> {
        self.view
    }

    /// Whether the region's producer is alive: it holds its object's
    /// liveness lock (`liveness`, L3). A flushed image has none.
    pub fn producer_alive(&self) -> bool {
        self.view.flags() & LATTE_REGION_FLUSHED == 0 && crate::liveness::held(self.fd.as_fd())
    }

    /// Maps the region again when it grew since it was mapped (its
    /// producer published chunks past the mapping): a view made afterwards
    /// reads them. Returns whether it remapped. Cursors are per slot index,
    /// so a reader's cursors stay valid across a refresh. On an error the
    /// mapping is left as it was.
    pub fn refresh(&mut self) -> Result<bool, Error> {
        match self.grown()? {
            Some(m) => {
                *self = m;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// A new mapping of the same object when the region grew past this one
    /// (`refresh` for a mapping that others share).
    pub fn grown(&self) -> Result<Option<Mapping>, Error> {
        // Against what the view validated, not the mapping's length: a
        // chunk reserved (the object grown) but not yet published when the
        // view was made lies inside the mapping and outside the view.
        if self.view.flags() & LATTE_REGION_FLUSHED != 0 || self.view.published_size() <= self.view.validated_size {
            return Ok(None);
        }
        let fd = self.fd.try_clone().map_err(|e| Error::Os(e.raw_os_error().unwrap_or(libc::EIO)))?;
        Mapping::from_fd(fd).map(Some)
    }

    /// Maps `fd` read-only (PROT_READ: a reader can never disturb the
    /// producer) and validates it. An object that grew between its size
    /// was taken and its header read (its producer made a chunk) is
    /// measured again, a few times at most: one that keeps growing under a
    /// header that claims more than it holds stays truncated.
    /// Maps the object open as `fd` (a duplicate of the descriptor is
    /// kept; `fd` stays the caller's).
    pub fn open_fd(fd: std::os::fd::BorrowedFd<'_>) -> Result<Mapping, Error> {
        Self::from_fd(fd.try_clone_to_owned().map_err(|e| Error::Os(e.raw_os_error().unwrap_or(libc::EBADF)))?)
    }

    fn from_fd(fd: OwnedFd) -> Result<Mapping, Error> {
        for _ in 0..MAP_RETRIES {
            if let Some((fault, map, view)) = Self::map_fd(&fd)? {
                return Ok(Mapping { _fault: fault, _map: map, fd, view });
            }
        }
        Err(Error::Truncated)
    }

    /// One mapping and validation of `fd`: the protection, the mapping and
    /// the view; None when the object grew while it was mapped (measure it
    /// again).
    #[allow(clippy::type_complexity)]
    fn map_fd(fd: &OwnedFd) -> Result<Option<(Protected, Mmap, View<'static>)>, Error> {
        // SAFETY: an all-zero stat is a valid out-parameter.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        // SAFETY: fd is open; st is writable.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::last_os());
        }
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            return Err(Error::Os(libc::EISDIR));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            // A FIFO, socket or device (anyone can make one in /dev/shm).
            return Err(Error::NotLatte);
        }
        let len = st.st_size as usize;
        if len < LATTE_MAGIC.len() {
            return Err(if len == 0 { Error::NotLatte } else { Error::Truncated });
        }
        // PROT_READ: a reader can never disturb the producer.
        let map = Mmap::shared(fd.as_fd(), len, false)?;
        // The object may shrink under us (see `fault`): from here on a
        // SIGBUS in this mapping reads zeros instead of killing the reader.
        // With no memory for the fault table to grow, the reader is
        // refused rather than left unprotected.
        let fault = crate::fault::protect(&map, false)?;
        // On tmpfs (shared memory) reading a hole allocates it: bound what
        // the header claims by the data the object holds. A producer's
        // object is allocated whole when made, so a live region passes.
        // SAFETY: an all-zero statfs is a valid out-parameter; fd is open.
        let held = unsafe {
            let mut fs: libc::statfs = core::mem::zeroed();
            if libc::fstatfs(fd.as_raw_fd(), &mut fs) == 0 && fs.f_type as i64 == libc::TMPFS_MAGIC {
                (st.st_blocks as u64).saturating_mul(512)
            } else {
                len as u64
            }
        };
        // SAFETY: the mapping is readable for len bytes and page aligned;
        // the view lives in the Mapping, which hands it out only borrowed
        // (`view`), and the mapping is unmapped only when the Mapping drops.
        let view = match unsafe { View::new_held(map.as_ptr(), len, held) } {
            // The producer grew the object after it was measured: say so,
            // for `from_fd` to measure again (a shrunk object stays
            // truncated: it did not grow).
            Err(Error::Truncated) if grown_since(fd, len) => return Ok(None),
            r => r?,
        };
        check_whole(map.as_ptr())?;
        Ok(Some((fault, map, view)))
    }

    /// Opens the shm object `name` read-only.
    pub fn open_shm(name: &[u8]) -> Result<Mapping, Error> {
        let c = crate::shm::c_name(name)?;
        // SAFETY: c is a valid C string.
        // O_NONBLOCK: opening a FIFO someone put in /dev/shm must not wait
        // for a writer (from_fd then refuses it).
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK, 0) };
        if fd < 0 {
            return Err(Error::last_os());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Self::from_fd(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Opens a flushed image (or any file holding a region) read-only.
    pub fn open_file(path: &std::path::Path) -> Result<Mapping, Error> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Os(libc::EINVAL))?;
        // SAFETY: c is a valid C string.
        // O_NONBLOCK: a FIFO must not block the open (from_fd refuses it).
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if fd < 0 {
            return Err(Error::last_os());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Self::from_fd(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// A region or a file, by one rule: a target with no '/' after its
    /// first character is a region name (`/name`, or `name` for `/name`:
    /// what `latte ls` prints always reaches its region, even where a file
    /// or directory of that name exists); any other (`./x.img`,
    /// `/tmp/x.img`, `dir/x.img`) is a file path.
    pub fn open_any(target: &str) -> Result<Mapping, Error> {
        if crate::shm::is_region_name(target) {
            let name = if target.starts_with('/') { target.to_string() } else { format!("/{target}") };
            Self::open_shm(name.as_bytes())
        } else {
            Self::open_file(std::path::Path::new(target))
        }
    }
}
