//! The region that holds the ID table and the slot rings: either process
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
use core::sync::atomic::{AtomicU64, Ordering};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

/// Capacities and permissions of a shared region, and what to do when its
/// name is taken. All zeros (`{0}` in C) is the default for every field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct latte_region_config {
    /// Slots ((thread, ID) rings) in the region; 0 = the default (128).
    pub slot_capacity: u32,
    /// Samples per slot, a power of two; 0 = the default (65536).
    pub samples_per_slot: u32,
    /// Entries of the ID table, at most 256; 0 = the default (256).
    pub id_capacity: u32,
    /// Permission bits of the shm object; 0 = the default (0600).
    pub mode: u32,
    /// When the name is taken: `LATTE_IF_TAKEN_REPLACE_STALE` (0, the
    /// default) or `LATTE_IF_TAKEN_FAIL`; any other value is -EINVAL.
    pub if_taken: u32,
}

/// Default slot capacity of a shared region (128 rings of 1 MiB).
pub const LATTE_DEFAULT_SHARED_SLOTS: u32 = 128;

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
    /// The config with every 0 replaced by its default.
    pub fn resolved(&self) -> latte_region_config {
        latte_region_config {
            slot_capacity: if self.slot_capacity == 0 { LATTE_DEFAULT_SHARED_SLOTS } else { self.slot_capacity },
            samples_per_slot: if self.samples_per_slot == 0 { LATTE_DEFAULT_SAMPLES } else { self.samples_per_slot },
            id_capacity: if self.id_capacity == 0 { LATTE_MAX_IDS } else { self.id_capacity },
            mode: if self.mode == 0 { 0o600 } else { self.mode & 0o777 },
            if_taken: self.if_taken,
        }
    }
}

/// Test hook: makes the fork child's copy of a shared region fail, so that
/// tests can exercise its fallback. Never set outside tests.
#[doc(hidden)]
pub static FAIL_FORK_COPY: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// How a region's memory is backed, and what that backing owns.
#[derive(Debug)]
pub enum Backing {
    /// Anonymous private memory.
    Anonymous,
    /// A POSIX shared-memory object: its name, the descriptor that holds
    /// its liveness lock (`liveness`, L1-L3) for as long as it is open, and
    /// the mapping's SIGBUS protection (`fault`).
    Shared { name: CString, fd: OwnedFd, _fault: Protected },
    /// In a fork child: what was a shared region, now a private copy
    /// (`privatize_after_fork`); still protected, for the fallback that
    /// remaps the object privately.
    ForkedCopy { _fault: Protected },
}

/// A mapped region owned by this process. Dropping it releases everything
/// it took (protection, descriptor and lock, mapping, in that order); an
/// installed region is leaked instead (`recorder`), since thread states
/// point into it for the rest of the process.
#[derive(Debug)]
pub struct Region {
    backing: Backing,
    map: Mmap,
    geo: Geometry,
}

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

impl Region {
    /// A private region backed by anonymous memory. Nothing is committed
    /// until written: memory grows with the slots actually used.
    pub fn create_private(id_capacity: u32, slot_capacity: u32, samples_per_slot: u32) -> Result<Region, Error> {
        let geo = Geometry::new(id_capacity, slot_capacity, samples_per_slot).ok_or(Error::INVAL)?;
        let map = Mmap::anonymous(geo.total_size as usize)?;
        let r = Region { backing: Backing::Anonymous, map, geo };
        r.init_header(0);
        Ok(r)
    }

    /// Creates the shm object `name`, reserves its memory and maps it
    /// shared. On any error nothing is left behind: no name, descriptor,
    /// mapping or fault-table entry.
    pub fn create_shared(name: &[u8], cfg: &latte_region_config) -> Result<Region, Error> {
        let cname = crate::shm::c_name(name)?;
        let cfg = cfg.resolved();
        let replace_stale = match cfg.if_taken {
            LATTE_IF_TAKEN_REPLACE_STALE => true,
            LATTE_IF_TAKEN_FAIL => false,
            _ => return Err(Error::INVAL),
        };
        let geo = Geometry::new(cfg.id_capacity, cfg.slot_capacity, cfg.samples_per_slot).ok_or(Error::INVAL)?;
        // L1 (`liveness`): made under a name of its own, locked and
        // initialised there, then published under `name` (L2).
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // Relaxed: only a distinct number is needed.
        let tmp = CString::new(format!("/.latte-new-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))).map_err(|_| Error::INVAL)?;
        // SAFETY: tmp is a valid NUL-terminated string.
        let fd = unsafe { libc::shm_open(tmp.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC, cfg.mode as libc::mode_t) };
        if fd < 0 {
            return Err(Error::last_os());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut unlink_tmp = UnlinkOnDrop(Some(&tmp));
        crate::liveness::hold(fd.as_fd())?;
        // shm_open applies the umask; make the permissions exactly what was asked.
        // SAFETY: fd is a valid descriptor we own.
        unsafe { libc::fchmod(fd.as_raw_fd(), cfg.mode as libc::mode_t) };
        // Reserve every page now so a full /dev/shm fails here, not as a
        // SIGBUS inside a measured thread later.
        // SAFETY: fd is a valid descriptor; the length fits off_t (checked by Geometry).
        let rc = unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, geo.total_size as libc::off_t) };
        if rc != 0 {
            return Err(Error::Os(rc));
        }
        let map = Mmap::shared(fd.as_fd(), geo.total_size as usize, true)?;
        // A later truncation of the object by someone else must not SIGBUS
        // the measured threads: see `fault`. Refused when no memory is
        // left for its table to grow.
        let fault = crate::fault::protect(&map, true)?;
        let r = Region { backing: Backing::Shared { name: cname, fd, _fault: fault }, map, geo };
        r.init_header(LATTE_REGION_SHARED);
        crate::liveness::publish(&tmp, name, replace_stale)?;
        unlink_tmp.0 = None; // published: the temporary name is gone
        Ok(r)
    }

    /// Drops a region that was never installed, removing its shm name.
    pub fn discard(self) {
        if let Backing::Shared { name, .. } = &self.backing {
            // SAFETY: a valid C string naming the object this region made.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        }
    }

    /// Removes the shm name of a shared region this process made (nothing
    /// for any other); the mapping and the liveness lock stay.
    pub fn unlink_name(&self) {
        if let Backing::Shared { name, .. } = &self.backing {
            // SAFETY: a valid C string naming the object this region made.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        }
    }

    fn init_header(&self, flags: u32) {
        let h = self.map.as_ptr() as *mut latte_region_header;
        // SAFETY: the mapping is at least LATTE_HEADER_SIZE bytes, page
        // aligned, zero-filled and not yet visible to any reader of ours
        // (readers validate the magic, written last with a release fence).
        unsafe {
            (*h).version = LATTE_LAYOUT_VERSION;
            (*h).header_size = LATTE_HEADER_SIZE;
            (*h).slot_header_size = LATTE_SLOT_HEADER_SIZE;
            (*h).sample_size = LATTE_SAMPLE_SIZE;
            (*h).id_capacity = self.geo.id_capacity;
            (*h).id_entry_size = LATTE_ID_NAME_SIZE;
            (*h).slot_capacity = self.geo.slot_capacity;
            (*h).samples_per_slot = self.geo.samples_per_slot;
            (*h).id_table_offset = self.geo.id_table_offset;
            (*h).slots_offset = self.geo.slots_offset;
            (*h).slot_stride = self.geo.slot_stride;
            (*h).total_size = self.geo.total_size;
            (*h).producer_pid = libc::getpid() as u32;
            (*h).flags = flags;
            (*h).anchor_realtime_ns = tsc::clock_ns(libc::CLOCK_REALTIME);
            let (anchor_tsc, anchor_ns) = tsc::anchor_pair();
            (*h).anchor_tsc = anchor_tsc;
            (*h).anchor_monotonic_ns = anchor_ns;
            // Release: everything above is visible to a reader that sees the magic.
            core::sync::atomic::fence(Ordering::Release);
            (*h).magic = LATTE_MAGIC;
        }
    }

    /// The header.
    pub fn header(&self) -> &latte_region_header {
        // SAFETY: base points to an initialised header that lives as long as
        // self; its non-atomic fields are never written after init_header.
        unsafe { &*(self.map.as_ptr() as *const latte_region_header) }
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Base address of the mapping.
    pub fn base(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// Whether this is a shared-memory region, or a fork child's copy of one.
    pub fn is_shared(&self) -> bool {
        !matches!(self.backing, Backing::Anonymous)
    }

    /// Slot `i`'s header. `i` must be below the slot capacity.
    pub fn slot(&self, i: u32) -> *mut latte_slot_header {
        debug_assert!(i < self.geo.slot_capacity);
        // SAFETY: i < slot_capacity, so the offset is inside the mapping.
        unsafe { self.base().add((self.geo.slots_offset + i as u64 * self.geo.slot_stride) as usize) as *mut latte_slot_header }
    }

    /// ID table entry `token`. `token` must be below the ID capacity.
    pub fn id_entry(&self, token: u32) -> *mut latte_id_entry {
        debug_assert!(token < self.geo.id_capacity);
        // SAFETY: token < id_capacity, so the entry is inside the mapping.
        unsafe { self.base().add((self.geo.id_table_offset + token as u64 * LATTE_ID_NAME_SIZE as u64) as usize) as *mut latte_id_entry }
    }

    /// In a fork child: replace the shared mapping by a private copy of what
    /// it held at the fork, at the same address, so that nothing the child
    /// writes reaches the parent, nothing the parent writes afterwards shows
    /// in the child, and every cached pointer stays valid.
    ///
    /// The copy (`replace_with_anonymous_copy`) costs the child time in
    /// proportion to what was recorded. Should it fail (no memory), the
    /// child gets a private copy-on-write remap of the object instead: it
    /// still never writes into the parent's rings, but pages it has not
    /// touched keep following the object. Should that fail too, its view
    /// is made read-only.
    pub fn privatize_after_fork(&mut self) {
        let Backing::Shared { fd, _fault: fault, .. } = core::mem::replace(&mut self.backing, Backing::Anonymous) else {
            return; // anonymous private memory is already copy-on-write.
        };
        let len = self.geo.total_size as usize;
        let base = self.base() as *mut libc::c_void;
        if !self.replace_with_anonymous_copy() {
            // SAFETY: remaps exactly our own mapping (same base and length)
            // with MAP_FIXED; the object is still sized as before.
            let p = unsafe { libc::mmap(base, len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_FIXED, fd.as_raw_fd(), 0) };
            if p == libc::MAP_FAILED {
                // SAFETY: our own mapping.
                unsafe { libc::mprotect(base, len, libc::PROT_READ) };
            }
        }
        // The descriptor closes here: the child holds no lock on the
        // parent's object and never unlinks its name.
        drop(fd);
        self.backing = Backing::ForkedCopy { _fault: fault };
    }

    /// Copies what the region holds into fresh anonymous memory and moves
    /// that over the shared mapping, at the same address: the header and ID
    /// table, and for each slot handed out its header and the samples
    /// written so far (a ring that wrapped: all of it). The parent's other
    /// threads may be writing meanwhile, so words are read with atomic
    /// loads; a slot's header is copied before its samples, so a sample the
    /// parent writes meanwhile lies above the copied index (invisible), and
    /// only a ring the parent wraps during the copy may show a newer sample
    /// in an older place. Zero words are not written, so untouched pages
    /// stay uncommitted.
    fn replace_with_anonymous_copy(&self) -> bool {
        // Relaxed: a test switch, read on its own.
        if FAIL_FORK_COPY.load(Ordering::Relaxed) {
            return false;
        }
        let len = self.geo.total_size as usize;
        let Ok(fresh) = Mmap::anonymous(len) else {
            return false;
        };
        let tmp = fresh.as_ptr();
        let copy = |off: usize, n: usize| {
            let src = self.base().wrapping_add(off) as *const AtomicU64;
            let dst = tmp.wrapping_add(off) as *mut u64;
            for i in 0..n / 8 {
                // SAFETY: callers pass ranges inside both mappings (each
                // `len` bytes, page aligned); the source is shared memory,
                // read atomically (relaxed: a moment's picture; no word is
                // read on the strength of another but the slot's index,
                // loaded with acquire below).
                unsafe {
                    let w = (*src.add(i)).load(Ordering::Relaxed);
                    if w != 0 {
                        dst.add(i).write(w);
                    }
                }
            }
        };
        let g = self.geo;
        copy(0, g.slots_offset as usize);
        // Acquire: every counted slot's metadata is visible.
        let used = self.header().slots_used.load(Ordering::Acquire).min(g.slot_capacity);
        for i in 0..used {
            // SAFETY: i < slots_used <= capacity: a slot header inside the region.
            let sh = unsafe { &*self.slot(i) };
            // Acquire: the samples below this index are visible to the copy.
            let w = sh.write_idx.load(Ordering::Acquire);
            let off = (g.slots_offset + i as u64 * g.slot_stride) as usize;
            copy(off, LATTE_SLOT_HEADER_SIZE as usize);
            // The header's copied index may be older than `w` (copied after):
            // store `w` itself, the index whose samples are copied below.
            // SAFETY: inside the fresh mapping; the write_idx word of slot i.
            unsafe { (tmp.add(off) as *mut u64).write(w) };
            let samples = w.min(g.samples_per_slot as u64) as usize * LATTE_SAMPLE_SIZE as usize;
            copy(off + LATTE_SLOT_HEADER_SIZE as usize, samples);
        }
        // SAFETY: moves our fresh mapping over exactly our own region mapping.
        let r = unsafe { libc::mremap(tmp as *mut libc::c_void, len, len, libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, self.base() as *mut libc::c_void) };
        if r == libc::MAP_FAILED {
            return false; // `fresh` unmaps itself
        }
        // The pages moved to the region's address, which `self.map` owns.
        let _ = fresh.leak();
        true
    }

    /// Copies the ID table of another region (used when a shared region
    /// replaces the private one before any recording).
    pub fn copy_ids_from(&self, other: &Region) -> bool {
        // Acquire: pairs with the release store that counted the last name
        // in, so the names below it are complete.
        let n = other.header().ids_used.load(Ordering::Acquire);
        if n > self.geo.id_capacity {
            return false;
        }
        for t in 0..n {
            // SAFETY: both entries are inside their mappings (t < both capacities).
            unsafe { core::ptr::copy_nonoverlapping(other.id_entry(t), self.id_entry(t), 1) };
        }
        // Release: the names above are visible to whoever sees the count.
        self.header().ids_used.store(n, Ordering::Release);
        true
    }
}
