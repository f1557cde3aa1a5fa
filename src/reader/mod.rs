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
//!
//! This file holds the types a reader and its caller share (`View`, the
//! cursor, the slot and sample records) and the copy of shared memory;
//! the rest, one job a file:
//! - `figures.rs`: the figures read from a validated header (geometry,
//!   counts, counters, calibration, lineage);
//! - `header.rs`: a mapped header validated before anything is trusted
//!   (it reads the name records and slot headers to check them);
//! - `names.rs`: the name records, read past a cursor;
//! - `slots.rs`: a slot's header, and its samples read by the ring
//!   protocol's reader steps;
//! - `cursors.rs`: `Cursors`, a cursor per slot, for a reader of many slots;
//! - `mapping.rs`: `Mapping`, an object opened by shm name, path or
//!   descriptor, mapped read-only, remapped when its region grows, and
//!   whether its producer lives;
//! - `recording.rs`: a recording's trailer (what `latte record` followed,
//!   and what each followed ring lost), read through a `Mapping`'s file.
//!
//! The files call downwards: `header` uses `names`, `slots` and `figures`;
//! `slots` uses `names` and `figures`; `names` uses `figures`.

use crate::error::Error;
use crate::layout::*;
use crate::name::Name;
use core::marker::PhantomData;

mod cursors;
mod figures;
mod header;
mod mapping;
mod names;
mod recording;
mod slots;

pub use cursors::Cursors;
pub use mapping::Mapping;
pub use recording::{RecordedRing, Recording, RECORDING_FORMAT, RECORDING_MAGIC, RECORDING_VERSION};

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

/// `Error::Truncated` once the mapping at `base` lost pages (the object
/// shrank under it, see `fault`): what it reads may be zeros, not data.
pub fn check_whole(base: *const u8) -> Result<(), Error> {
    if crate::fault::faults_at(base) != 0 {
        Err(Error::Truncated)
    } else {
        Ok(())
    }
}
