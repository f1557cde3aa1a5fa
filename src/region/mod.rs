//! The region that holds the ID names and the slot rings: either process
//! private (anonymous memory, pages committed as they are first written) or
//! a POSIX shared-memory object that other processes can read.
//!
//! The producer side lives here: creating, mapping, initialising the header,
//! handing out slot pointers. Reading with validation is `reader`'s job.

use crate::error::Error;
use crate::fault::Protected;
use crate::layout::*;
use crate::mmap::Mmap;
use crate::tsc;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

mod commit;
mod fork;
mod grow;
mod pages;
mod settings;
mod share;

pub use fork::ForkCut;
use grow::reserve;
pub use settings::{fall_back as fall_back_ring_samples, quiet, ring_samples, say};

/// Sizes and permissions of a shared region, and what to do when its
/// name is taken. All zeros (`{0}` in C) is the default for every field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct latte_region_config {
    /// Slots ((thread, ID) rings) reserved when the region is made (its
    /// first chunk; 0 = the default, 16). The region grows past them, a
    /// chunk of twice as many slots at a time, as threads and IDs need more.
    pub slot_capacity: u32,
    /// Samples per slot, a power of two; 0 = the default (65536, or what
    /// `LATTE_RING_SAMPLES` sets).
    pub samples_per_slot: u32,
    /// Most distinct IDs the region takes; 0 = no limit. Spans of IDs past
    /// the limit are counted (`unfit_id_drops`), not recorded.
    pub id_capacity: u32,
    /// Permission bits of the shm object, at most 0o777 (other bits:
    /// -EINVAL); 0 = the default (0600).
    pub mode: u32,
    /// When the name is taken: `LATTE_IF_TAKEN_REPLACE_STALE` (0, the
    /// default) or `LATTE_IF_TAKEN_FAIL`; any other value is -EINVAL.
    pub if_taken: u32,
    /// MiB of ring memory the region may commit (0 = the default:
    /// `LATTE_BUDGET_MIB`, else what its filesystem has free when it is made
    /// less an eighth of its size). Rings grow within it as they are
    /// written; past it they go on at the size they reached, and a new
    /// (thread, ID) still gets its first samples while memory is left.
    pub budget_mib: u32,
}

/// Slots of a shared region's first chunk by default.
pub const LATTE_DEFAULT_SHARED_SLOTS: u32 = LATTE_DEFAULT_FIRST_SLOTS;

/// `latte_region_config.if_taken`, the default: a latte region of that name
/// whose producer is gone (it no longer holds the region's liveness lock,
/// however it ended) is replaced by the new one, by exactly one of the
/// producers asking; a live producer's region, or an object that is not a
/// latte region, keeps the name (-EEXIST). Until it is replaced, a dead
/// producer's region stays readable.
pub const LATTE_IF_TAKEN_REPLACE_STALE: u32 = 0;
/// `latte_region_config.if_taken`: -EEXIST whenever the name exists, even
/// when its producer is gone (its region is kept for post-mortem reading).
pub const LATTE_IF_TAKEN_FAIL: u32 = 1;

impl latte_region_config {
    /// Whether a dead producer's region under the name is replaced
    /// (`if_taken`), once the config is checked: -EINVAL for an `if_taken`
    /// that is neither value, or a `mode` with bits past 0o777 (a mistaken
    /// value must not make a region that others may write).
    fn replace_stale(&self) -> Result<bool, Error> {
        if self.mode & !0o777 != 0 {
            return Err(Error::INVAL);
        }
        match self.if_taken {
            LATTE_IF_TAKEN_REPLACE_STALE => Ok(true),
            LATTE_IF_TAKEN_FAIL => Ok(false),
            _ => Err(Error::INVAL),
        }
    }

    /// The config with every 0 replaced by its default.
    pub fn resolved(&self) -> latte_region_config {
        latte_region_config {
            slot_capacity: if self.slot_capacity == 0 { LATTE_DEFAULT_SHARED_SLOTS } else { self.slot_capacity },
            samples_per_slot: if self.samples_per_slot == 0 { ring_samples() } else { self.samples_per_slot },
            id_capacity: self.id_capacity,
            mode: if self.mode == 0 { 0o600 } else { self.mode },
            if_taken: self.if_taken,
            budget_mib: self.budget_mib,
        }
    }
}

/// Test hook: makes the fork child's copy of a shared region fail, so that
/// tests can exercise its fallback. Never set outside tests.
#[doc(hidden)]
pub static FAIL_FORK_COPY: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// How a region's memory is backed, and what that backing owns.
#[derive(Debug, Default)]
pub enum Backing {
    /// Anonymous private memory.
    #[default]
    Anonymous,
    /// A POSIX shared-memory object: its name, and the descriptor that
    /// holds its liveness lock (`liveness`, L1-L3) for as long as it is
    /// open, through which the region grows.
    Shared { name: CString, fd: OwnedFd },
    /// A fork child's private copy of what was a shared region
    /// (`privatize_after_fork`).
    PrivateCopy,
    /// A region moved into an object (`share`) that has no name: its
    /// publishing (M5) was refused, or its move stopped half way (M4).
    /// Private for good; it grows in the object, as a shared region does.
    Unnamed { fd: OwnedFd },
}

/// One chunk of a region as this process maps it.
#[derive(Debug)]
struct Chunk {
    /// Declared before `map`: the protection goes before the mapping.
    _fault: Option<Protected>,
    map: Mmap,
    /// Its offset in the region (in the object, for a shared region).
    offset: u64,
    /// `true` for a slot chunk, `false` for a name chunk.
    slots: bool,
}

/// What grows or changes under the registry lock: the chunks, where the
/// next name record goes, and the backing (which `share` changes).
#[derive(Debug, Default)]
struct Growth {
    chunks: Vec<Chunk>,
    /// The header's page's protection, for a shared region (declared before
    /// the backing, and dropped with the growth, before the header's mapping).
    header_fault: Option<Protected>,
    backing: Backing,
    /// Slot chunks made so far.
    slot_chunks: u32,
    /// Name chunks made so far.
    name_chunks: u32,
    /// Byte offset of the next name record in the last name chunk.
    name_pos: u64,
    /// The program was told that the region could not grow.
    told: bool,
    /// CLOCK_MONOTONIC (ns) of the last failed growth; 0: none.
    failed_ns: u64,
}

/// How long after a failed growth the region tries again (1 s).
const GROW_RETRY_NS: u64 = 1_000_000_000;

/// A mapped region owned by this process. Dropping it releases everything
/// it took (chunks and their protection, descriptor and lock, header
/// mapping); an installed region is leaked instead (`recorder`), since
/// thread states point into it for the rest of the process.
///
/// Each chunk is a mapping of its own, so that a slot's address never
/// changes while the region grows.
#[derive(Debug)]
pub struct Region {
    growth: Box<Mutex<Growth>>,
    /// Where each slot chunk is mapped here (null until made); release after
    /// the chunk is whole, acquire to use it.
    slot_bases: Box<[AtomicPtr<u8>; LATTE_CHUNKS as usize]>,
    /// Where each name chunk is mapped here (null until made); as `slot_bases`.
    name_bases: Box<[AtomicPtr<u8>; LATTE_CHUNKS as usize]>,
    /// The header's page (field order: dropped after the growth, which
    /// holds its protection and the chunks).
    header_map: Mmap,
    geo: Geometry,
    /// The growth's `failed_ns` when a thread was last refused a ring or a
    /// name, for threads that ask without a lock whether the region still
    /// refuses (`refusing`); 0: none, or a ring was handed back since.
    refusal_ns: AtomicU64,
    /// What ring growths share without a lock (`commit`).
    commit: commit::Shared,
}

/// Bytes of the mapping that holds the header (the header's page).
const HEADER_MAP_BYTES: u64 = LATTE_PAGE_SIZE;
const _: () = assert!(LATTE_HEADER_SIZE as u64 <= HEADER_MAP_BYTES);

/// Removes a shm name when dropped, unless disarmed: the temporary name
/// of an object being made, on every failure path.
struct UnlinkOnDrop<'a>(Option<&'a CStr>);

impl Drop for UnlinkOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.0 {
            // SAFETY: a valid C string naming an object this process made.
            unsafe { libc::shm_unlink(n.as_ptr()) };
        }
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());

impl Region {
    fn with_header(backing: Backing, header_map: Mmap, header_fault: Option<Protected>, geo: Geometry) -> Region {
        let fd = match &backing {
            Backing::Shared { fd, .. } | Backing::Unnamed { fd } => fd.as_raw_fd(),
            _ => -1,
        };
        Region {
            commit: commit::Shared::new(fd),
            growth: Box::new(Mutex::new(Growth { backing, header_fault, ..Growth::default() })),
            slot_bases: Box::new([NO_BASE; LATTE_CHUNKS as usize]),
            name_bases: Box::new([NO_BASE; LATTE_CHUNKS as usize]),
            header_map,
            geo,
            refusal_ns: AtomicU64::new(0),
        }
    }

    /// A private region backed by anonymous memory. Nothing is committed
    /// until written: memory grows with the slots actually used, and the
    /// region grows by chunks as more are needed.
    pub fn create_private(first_slots: u32, samples_per_slot: u32, id_limit: u32) -> Result<Region, Error> {
        let geo = Geometry::new(first_slots, samples_per_slot).ok_or(Error::INVAL)?;
        let map = Mmap::anonymous(HEADER_MAP_BYTES as usize)?;
        let r = Region::with_header(Backing::Anonymous, map, None, geo);
        r.init_header(0, id_limit, Region::budget_for(0, None));
        r.grow(false)?;
        r.grow(true)?;
        Ok(r)
    }

    /// Creates the shm object `name`, reserves its first chunks and maps it
    /// shared. On any error nothing is left behind: no name, descriptor,
    /// mapping or fault-table entry.
    ///
    /// When it takes over the name of a region whose producer is gone,
    /// `lineage` reads that region (open read-write, locked): its
    /// incarnation and the samples it and its predecessors recorded
    /// (`latte_region_header::incarnation`, `recorded_before`), or None
    /// when it cannot be read, and the new region's incarnation is then
    /// unknown (0).
    pub fn create_shared(name: &[u8], cfg: &latte_region_config, lineage: &mut dyn FnMut(BorrowedFd<'_>) -> Option<(u64, u64)>) -> Result<Region, Error> {
        let cname = crate::shm::c_name(name)?;
        let cfg = cfg.resolved();
        let replace_stale = cfg.replace_stale()?;
        let geo = Geometry::new(cfg.slot_capacity, cfg.samples_per_slot).ok_or(Error::INVAL)?;
        let (tmp, fd) = crate::liveness::new_object(cfg.mode)?;
        let mut unlink_tmp = UnlinkOnDrop(Some(&tmp));
        reserve(fd.as_fd(), 0, HEADER_MAP_BYTES)?;
        let map = Mmap::shared(fd.as_fd(), HEADER_MAP_BYTES as usize, true)?;
        // A later truncation of the object by someone else must not SIGBUS
        // the measured threads: see `fault`. Refused when no memory is
        // left for its table to grow.
        let fault = crate::fault::protect(&map, true)?;
        let budget = Region::budget_for(cfg.budget_mib, Some(fd.as_fd()));
        let r = Region::with_header(Backing::Shared { name: cname, fd }, map, Some(fault), geo);
        r.init_header(LATTE_REGION_SHARED, cfg.id_capacity, budget);
        // The first chunks are reserved now, so a /dev/shm too small for
        // them fails here; later chunks are reserved as the region grows.
        r.grow(false)?;
        r.grow(true)?;
        r.publish(&tmp, name, replace_stale, lineage)?;
        unlink_tmp.0 = None; // published: the temporary name is gone
        Ok(r)
    }

    /// L2 (and L4): publishes the object named `tmp` (this region's) under
    /// `name`, with the first incarnation of that name, or the one after
    /// the predecessor's it takes over (its lineage, as `create_shared`);
    /// on failure the header keeps the lineage it had.
    fn publish(&self, tmp: &CStr, name: &[u8], replace_stale: bool, lineage: &mut dyn FnMut(BorrowedFd<'_>) -> Option<(u64, u64)>) -> Result<(), Error> {
        let header = self.header();
        // Relaxed (all): published to readers by the link or rename that
        // follows (a reader maps the object after finding it under the name).
        let was = (header.incarnation.load(Ordering::Relaxed), header.recorded_before.load(Ordering::Relaxed));
        header.incarnation.store(1, Ordering::Relaxed);
        header.recorded_before.store(0, Ordering::Relaxed);
        let r = crate::liveness::publish(tmp, name, replace_stale, &mut |old| match lineage(old) {
            Some((incarnation, recorded)) if incarnation > 0 => {
                header.incarnation.store(incarnation + 1, Ordering::Relaxed);
                header.recorded_before.store(recorded, Ordering::Relaxed);
            }
            _ => header.incarnation.store(0, Ordering::Relaxed),
        });
        if r.is_err() {
            // Not published: the lineage of the name it has stays.
            header.incarnation.store(was.0, Ordering::Relaxed);
            header.recorded_before.store(was.1, Ordering::Relaxed);
        }
        r
    }

    /// Drops a region that was never installed, removing its shm name.
    pub fn discard(self) {
        if let Backing::Shared { name, .. } = &self.growth().backing {
            // SAFETY: a valid C string naming the object this region made.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        }
    }

    /// Removes the shm name of a shared region this process made (nothing
    /// for any other); the mapping and the liveness lock stay.
    pub fn unlink_name(&self) {
        if let Backing::Shared { name, .. } = &self.growth().backing {
            // SAFETY: a valid C string naming the object this region made.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        }
    }

    fn init_header(&self, flags: u32, id_limit: u32, budget: u64) {
        let h = self.header_map.as_ptr() as *mut latte_region_header;
        // SAFETY: the mapping is a page, page aligned, zero-filled and not
        // yet visible to any reader of ours (readers validate the magic,
        // written last with a release fence).
        unsafe {
            (*h).version = LATTE_LAYOUT_VERSION;
            (*h).header_size = LATTE_HEADER_SIZE;
            (*h).slot_header_size = LATTE_SLOT_HEADER_SIZE;
            (*h).sample_size = LATTE_SAMPLE_SIZE;
            (*h).first_slots = self.geo.first_slots;
            (*h).samples_per_slot = self.geo.samples_per_slot;
            (*h).first_name_bytes = LATTE_FIRST_NAME_BYTES;
            (*h).id_limit = id_limit;
            (*h).budget_bytes.store(budget, Ordering::Relaxed);
            (*h).slot_stride = self.geo.slot_stride;
            (*h).total_size.store(HEADER_MAP_BYTES, Ordering::Relaxed);
            (*h).producer_pid = AtomicU32::new(libc::getpid() as u32);
            (*h).flags = AtomicU32::new(flags);
            (*h).anchor_realtime_ns = tsc::clock_ns(libc::CLOCK_REALTIME);
            let (anchor_tsc, anchor_ns) = tsc::anchor_pair();
            (*h).anchor_tsc = anchor_tsc;
            (*h).anchor_monotonic_ns = anchor_ns;
            // Release: everything above is visible to a reader that sees the magic.
            core::sync::atomic::fence(Ordering::Release);
            (*h).magic = LATTE_MAGIC;
        }
    }

    /// Sets `LATTE_REGION_SWITCHES_TRACKED` in the header's flags (once a
    /// thread with switch tracking on records).
    pub fn mark_switches_tracked(&self) {
        let flags = self.flags_word();
        // Relaxed: a flag read on its own; nothing else is published with it.
        if flags.load(Ordering::Relaxed) & LATTE_REGION_SWITCHES_TRACKED == 0 {
            flags.fetch_or(LATTE_REGION_SWITCHES_TRACKED, Ordering::Relaxed);
        }
    }

    /// The header's flags word. Every write to it after `init_header` is an
    /// atomic OR (`mark_switches_tracked`, `share`), and readers load it
    /// atomically (reader `u32_at`, flush's atomic copy).
    fn flags_word(&self) -> &AtomicU32 {
        &self.header().flags
    }

    /// The header.
    pub fn header(&self) -> &latte_region_header {
        // SAFETY: the header page is mapped as long as self lives; its
        // non-atomic fields are never written after init_header (the
        // fields that change are atomics: `flags`, OR-ed by
        // `mark_switches_tracked`, and `producer_pid` and `flags` of a fork
        // child's region that `share` moves, whose page is then replaced
        // whole, at once, by a copy that holds every other field as it was).
        unsafe { &*(self.header_map.as_ptr() as *const latte_region_header) }
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Base address of the header's mapping (what identifies the region in
    /// this process).
    pub fn base(&self) -> *mut u8 {
        self.header_map.as_ptr()
    }

    /// Whether this is a shared-memory region, or a fork child's copy of one.
    pub fn is_shared(&self) -> bool {
        // Relaxed: a flag read on its own.
        self.flags_word().load(Ordering::Relaxed) & LATTE_REGION_SHARED != 0
    }

    /// Whether the region lives in a shm object (shared, or moved into one
    /// that has no name), which a fork child must copy out of.
    pub fn in_object(&self) -> bool {
        matches!(self.growth().backing, Backing::Shared { .. } | Backing::Unnamed { .. })
    }

    /// Slots the region's chunks hold now.
    pub fn slot_capacity(&self) -> u64 {
        let n = self.slot_bases.iter().take_while(|b| !b.load(Ordering::Acquire).is_null()).count() as u32;
        self.geo.slots_before(n)
    }

    /// Makes room for at least `n` slots, growing by chunks; an error when
    /// the region cannot grow (told once, see `grow`).
    pub fn reserve_slots(&self, n: u64) -> Result<(), Error> {
        while self.slot_capacity() < n {
            self.grow(true)?;
        }
        Ok(())
    }

    /// Slot `i`'s header. `i` must be below `slot_capacity`.
    pub fn slot(&self, i: u32) -> *mut latte_slot_header {
        let (k, j) = self.geo.slot_place(i);
        // Acquire: pairs with the release in grow (the chunk is whole).
        let base = self.slot_bases[k as usize].load(Ordering::Acquire);
        debug_assert!(!base.is_null());
        // SAFETY: slot j of chunk k lies inside that chunk's mapping.
        unsafe { base.add((j * self.geo.slot_stride) as usize) as *mut latte_slot_header }
    }

    /// Slot `i`'s offset in the region (in its object, or in an image of it).
    pub fn slot_offset(&self, i: u32) -> u64 {
        let (k, j) = self.geo.slot_place(i);
        // Acquire: pairs with the release in grow.
        self.header().slot_chunks[k as usize].load(Ordering::Acquire) + j * self.geo.slot_stride
    }

    /// Each name chunk made so far: its memory, its offset in the region
    /// and its length.
    pub fn name_chunks(&self) -> Vec<(*const u8, u64, u64)> {
        let h = self.header();
        (0..LATTE_CHUNKS)
            .map_while(|k| {
                // Acquire: pairs with the release in grow.
                let base = self.name_bases[k as usize].load(Ordering::Acquire);
                (!base.is_null()).then(|| (base as *const u8, h.name_chunks[k as usize].load(Ordering::Acquire), name_chunk_bytes(k)))
            })
            .collect()
    }

    /// The mapped base of every slot chunk and name chunk made so far (null
    /// past them), for a view of this process's own region.
    pub fn chunk_bases(&self) -> ([*const u8; LATTE_CHUNKS as usize], [*const u8; LATTE_CHUNKS as usize]) {
        // Acquire: pairs with the release in grow.
        let s = core::array::from_fn(|k| self.slot_bases[k].load(Ordering::Acquire) as *const u8);
        let n = core::array::from_fn(|k| self.name_bases[k].load(Ordering::Acquire) as *const u8);
        (s, n)
    }

    /// Appends a name record and publishes it as the next token (release on
    /// `ids_used`). Called under the registry lock. None when the region's
    /// ID limit is reached or no chunk for the name can be had.
    pub fn append_name(&self, name: &[u8]) -> Option<u32> {
        debug_assert!(name.len() <= LATTE_MAX_NAME_LEN as usize);
        let h = self.header();
        // Relaxed: only the registry (under its lock) stores it.
        let n = h.ids_used.load(Ordering::Relaxed);
        if (h.id_limit != 0 && n >= h.id_limit) || n == u32::MAX {
            return None;
        }
        let rec = name_record_bytes(name.len() as u64);
        let mut g = self.growth();
        if g.name_chunks == 0 || g.name_pos + rec > name_chunk_bytes(g.name_chunks - 1) {
            // The rest of the chunk stays zero: "no more records here".
            drop(g);
            self.grow(false).ok()?;
            g = self.growth();
        }
        let k = g.name_chunks - 1;
        // Acquire: pairs with the release in grow.
        let base = self.name_bases[k as usize].load(Ordering::Acquire);
        let at = g.name_pos;
        // SAFETY: at + rec <= the chunk's length (checked above); the bytes
        // are unpublished (past every record a reader may look at) until
        // the release store of ids_used below.
        unsafe {
            let p = base.add(at as usize);
            (p as *mut u32).write(name.len() as u32 + 1);
            core::ptr::copy_nonoverlapping(name.as_ptr(), p.add(LATTE_NAME_LEN_SIZE as usize), name.len());
        }
        g.name_pos = at + rec;
        // Release: publishes the record written above to any reader that
        // loads ids_used with acquire.
        h.ids_used.store(n + 1, Ordering::Release);
        Some(n)
    }
}
