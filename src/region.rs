//! The region that holds the ID table and the slot rings: either process
//! private (anonymous memory, pages committed as they are first written) or
//! a POSIX shared-memory object that other processes can read.
//!
//! The producer side lives here: creating, mapping, initialising the header,
//! handing out slot pointers. Reading with validation is `reader`'s job.

use crate::layout::*;
use crate::tsc;
use core::sync::atomic::{AtomicU64, Ordering};
use std::ffi::CString;

/// Capacities and permissions of a shared region.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
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
    /// Nonzero: if an object of that name exists and its producer is dead
    /// (or it is not a latte region), replace it. Zero: fail with -EEXIST
    /// when the name is taken by anything.
    pub replace_stale: u32,
}

/// Default slot capacity of a shared region (128 rings of 1 MiB).
pub const LATTE_DEFAULT_SHARED_SLOTS: u32 = 128;

impl latte_region_config {
    /// The config with every 0 replaced by its default.
    pub fn resolved(&self) -> latte_region_config {
        latte_region_config {
            slot_capacity: if self.slot_capacity == 0 { LATTE_DEFAULT_SHARED_SLOTS } else { self.slot_capacity },
            samples_per_slot: if self.samples_per_slot == 0 { LATTE_DEFAULT_SAMPLES } else { self.samples_per_slot },
            id_capacity: if self.id_capacity == 0 { LATTE_MAX_IDS } else { self.id_capacity },
            mode: if self.mode == 0 { 0o600 } else { self.mode & 0o777 },
            replace_stale: self.replace_stale,
        }
    }
}

/// Test hook: makes the fork child's private remap fail, so that tests can
/// exercise its fallback. Never set outside tests.
#[doc(hidden)]
pub static FAIL_PRIVATE_REMAP: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// A mapped region owned by this process.
pub struct Region {
    base: *mut u8,
    geo: Geometry,
    /// The shm object's descriptor, kept for the fork child's private remap;
    /// -1 for a private region.
    fd: i32,
    /// The shm name, for a shared region.
    name: Option<CString>,
}

// SAFETY: the mapping is never unmapped while the process uses it (regions
// are leaked once installed), and every mutable field inside it is accessed
// through atomics or by the single thread that owns a slot.
unsafe impl Send for Region {}
// SAFETY: see Send.
unsafe impl Sync for Region {}

impl Region {
    /// A private region backed by anonymous memory. Nothing is committed
    /// until written: memory grows with the slots actually used.
    pub fn create_private(id_capacity: u32, slot_capacity: u32, samples_per_slot: u32) -> Result<Region, i32> {
        let geo = Geometry::new(id_capacity, slot_capacity, samples_per_slot).ok_or(-libc::EINVAL)?;
        let p = map_anonymous(geo.total_size as usize)?;
        let r = Region { base: p as *mut u8, geo, fd: -1, name: None };
        r.init_header(0);
        Ok(r)
    }

    /// Validates a shm name: one leading '/', no other '/', 1..=250 bytes after it.
    pub fn validate_name(name: &[u8]) -> Result<(), i32> {
        if name.len() < 2 || name.len() > 251 || name[0] != b'/' || name[1..].contains(&b'/') || name.contains(&0) {
            return Err(-libc::EINVAL);
        }
        Ok(())
    }

    /// Creates the shm object `name`, reserves its memory and maps it shared.
    pub fn create_shared(name: &[u8], cfg: &latte_region_config) -> Result<Region, i32> {
        Self::validate_name(name)?;
        let cfg = cfg.resolved();
        let geo = Geometry::new(cfg.id_capacity, cfg.slot_capacity, cfg.samples_per_slot).ok_or(-libc::EINVAL)?;
        let cname = CString::new(name).map_err(|_| -libc::EINVAL)?;
        let open = || {
            // SAFETY: cname is a valid NUL-terminated string.
            unsafe { libc::shm_open(cname.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC, cfg.mode as libc::mode_t) }
        };
        let mut fd = open();
        if fd < 0 {
            let e = crate::error::last_errno();
            if e != -libc::EEXIST || cfg.replace_stale == 0 || !crate::reader::is_stale(name) {
                return Err(e);
            }
            // SAFETY: cname is valid; removing a stale object of ours (dead producer) or a non-latte one as asked.
            unsafe { libc::shm_unlink(cname.as_ptr()) };
            fd = open();
            if fd < 0 {
                return Err(crate::error::last_errno());
            }
        }
        // shm_open applies the umask; make the permissions exactly what was asked.
        // SAFETY: fd is a valid descriptor we own.
        unsafe { libc::fchmod(fd, cfg.mode as libc::mode_t) };
        let fail = |e: i32| {
            // SAFETY: fd and cname are valid; undo the creation on failure.
            unsafe {
                libc::close(fd);
                libc::shm_unlink(cname.as_ptr());
            }
            Err(e)
        };
        // Reserve every page now so a full /dev/shm fails here, not as a
        // SIGBUS inside a measured thread later.
        // SAFETY: fd is a valid descriptor; the length fits off_t (checked by Geometry).
        let rc = unsafe { libc::posix_fallocate(fd, 0, geo.total_size as libc::off_t) };
        if rc != 0 {
            return fail(-rc);
        }
        // SAFETY: maps the object we just sized; a new mapping.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                geo.total_size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        let p = match accept_mapping(p, geo.total_size as usize) {
            Ok(p) => p as *mut libc::c_void,
            Err(e) => return fail(e),
        };
        // A later truncation of the object by someone else must not SIGBUS
        // the measured threads: see `fault`. Refused when the fault table is full.
        if !crate::fault::register(p as *mut u8, geo.total_size as usize, true) {
            // SAFETY: unmapping the mapping just made, which nothing uses yet.
            unsafe { libc::munmap(p, geo.total_size as usize) };
            return fail(-libc::EMFILE);
        }
        let r = Region { base: p as *mut u8, geo, fd, name: Some(cname) };
        r.init_header(LATTE_REGION_SHARED);
        Ok(r)
    }

    fn init_header(&self, flags: u32) {
        let h = self.base as *mut latte_region_header;
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
            (*h).anchor_tsc = tsc::rdtsc();
            // Release: everything above is visible to a reader that sees the magic.
            core::sync::atomic::fence(Ordering::Release);
            (*h).magic = LATTE_MAGIC;
        }
    }

    /// The header.
    pub fn header(&self) -> &latte_region_header {
        // SAFETY: base points to an initialised header that lives as long as
        // self; its non-atomic fields are never written after init_header.
        unsafe { &*(self.base as *const latte_region_header) }
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Base address of the mapping.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Whether this is a shared-memory region.
    pub fn is_shared(&self) -> bool {
        self.fd >= 0
    }

    /// The shm name, if shared.
    pub fn name(&self) -> Option<&CString> {
        self.name.as_ref()
    }

    /// Slot `i`'s header. `i` must be below the slot capacity.
    pub fn slot(&self, i: u32) -> *mut latte_slot_header {
        debug_assert!(i < self.geo.slot_capacity);
        // SAFETY: i < slot_capacity, so the offset is inside the mapping.
        unsafe { self.base.add((self.geo.slots_offset + i as u64 * self.geo.slot_stride) as usize) as *mut latte_slot_header }
    }

    /// ID table entry `token`. `token` must be below the ID capacity.
    pub fn id_entry(&self, token: u32) -> *mut latte_id_entry {
        debug_assert!(token < self.geo.id_capacity);
        // SAFETY: token < id_capacity, so the entry is inside the mapping.
        unsafe { self.base.add((self.geo.id_table_offset + token as u64 * LATTE_ID_NAME_SIZE as u64) as usize) as *mut latte_id_entry }
    }

    /// In a fork child: replace the shared mapping by a private copy-on-write
    /// view of the same object at the same address, so that nothing the
    /// child writes reaches the parent, while every cached pointer stays valid.
    pub fn privatize_after_fork(&mut self) {
        if self.fd < 0 {
            return; // anonymous private memory is already copy-on-write.
        }
        let len = self.geo.total_size as usize;
        // Relaxed: a test switch, read on its own.
        let p = if FAIL_PRIVATE_REMAP.load(Ordering::Relaxed) {
            libc::MAP_FAILED
        } else {
            // SAFETY: remaps exactly our own mapping (same base and length)
            // with MAP_FIXED; the object is still sized as before.
            unsafe {
                libc::mmap(
                    self.base as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_FIXED,
                    self.fd,
                    0,
                )
            }
        };
        if p == libc::MAP_FAILED && !self.replace_with_anonymous_copy() {
            // Neither worked (no memory at all): make the child's view
            // read-only rather than let it write into the parent's rings.
            // SAFETY: our own mapping.
            unsafe { libc::mprotect(self.base as *mut libc::c_void, len, libc::PROT_READ) };
        }
        // SAFETY: fd is ours; the child no longer needs it.
        unsafe { libc::close(self.fd) };
        self.fd = -2; // "was shared": still reported as shared, never unlinked by the child.
        self.name = None;
    }

    /// The fallback of `privatize_after_fork`: copies the region into fresh
    /// anonymous memory and moves that over the shared mapping, at the same
    /// address. The parent may be writing meanwhile, so words are read with
    /// atomic loads; the copy is a moment's picture (a ring the parent wraps
    /// during the copy may show a newer sample in an older place). Zero
    /// words are not written, so untouched pages stay uncommitted.
    fn replace_with_anonymous_copy(&self) -> bool {
        let len = self.geo.total_size as usize;
        let Ok(tmp) = map_anonymous(len) else {
            return false;
        };
        let src = self.base as *const AtomicU64;
        let dst = tmp as *mut u64;
        for i in 0..len / 8 {
            // SAFETY: both mappings are `len` bytes long and 8-aligned (page
            // aligned); the source is shared memory, read atomically
            // (relaxed: a moment's picture, as said above; no word is
            // read on the strength of another).
            unsafe {
                let w = (*src.add(i)).load(Ordering::Relaxed);
                if w != 0 {
                    dst.add(i).write(w);
                }
            }
        }
        // SAFETY: moves our fresh mapping over exactly our own region mapping.
        let r = unsafe { libc::mremap(tmp as *mut libc::c_void, len, len, libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, self.base as *mut libc::c_void) };
        if r == libc::MAP_FAILED {
            // SAFETY: the fresh mapping, still ours.
            unsafe { libc::munmap(tmp as *mut libc::c_void, len) };
            return false;
        }
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

/// Adds `n` to a counter of the region header. Relaxed: counters are
/// statistics with no ordering relation to other data.
#[inline]
/// A fresh private anonymous mapping of `len` bytes, read-write, whose pages
/// are committed only when first written (MAP_NORESERVE).
pub fn map_anonymous(len: usize) -> Result<*mut u8, i32> {
    // SAFETY: a fresh anonymous mapping; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    accept_mapping(p, len)
}

/// The result of an `mmap` of `len` bytes that rings will live in: its
/// error, or -ENOMEM (unmapped again) when it does not end below 2^48.
fn accept_mapping(p: *mut libc::c_void, len: usize) -> Result<*mut u8, i32> {
    if p == libc::MAP_FAILED {
        return Err(crate::error::last_errno());
    }
    if !below_frame_limit(p as *mut u8, len) {
        // SAFETY: the caller's fresh mapping of `len` bytes, unused.
        unsafe { libc::munmap(p, len) };
        return Err(-libc::ENOMEM);
    }
    Ok(p as *mut u8)
}

/// Rings are kept in the low 48 bits of a frame word (layout.rs,
/// `latte_thread`): a mapping must end below 2^48. On x86-64 Linux every
/// user-space mapping does unless the caller hints a higher address (5-level
/// paging); we never do, so this only guards the layout's assumption.
fn below_frame_limit(p: *mut u8, len: usize) -> bool {
    (p as u64).checked_add(len as u64).is_some_and(|end| end <= LATTE_FRAME_RING_MASK + 1)
}

pub fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Reads an f64 stored as bits in an atomic.
pub fn load_f64(a: &AtomicU64) -> f64 {
    // Acquire pairs with the release in store_f64 (calibration published after its inputs).
    f64::from_bits(a.load(Ordering::Acquire))
}

/// Stores an f64 as bits in an atomic.
pub fn store_f64(a: &AtomicU64, v: f64) {
    // Release: pairs with the acquire in load_f64.
    a.store(v.to_bits(), Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_must_end_below_2_pow_48() {
        let top = LATTE_FRAME_RING_MASK + 1;
        assert!(below_frame_limit((top - 8192) as *mut u8, 8192));
        assert!(!below_frame_limit((top - 4096) as *mut u8, 8192));
        assert!(!below_frame_limit(top as *mut u8, 4096));
        assert!(!below_frame_limit(u64::MAX as *mut u8, 2));
        // What the kernel gives us passes.
        let p = map_anonymous(1 << 20).unwrap();
        assert!(below_frame_limit(p, 1 << 20));
        // SAFETY: the mapping just made, unused.
        unsafe { libc::munmap(p as *mut libc::c_void, 1 << 20) };
    }
}
