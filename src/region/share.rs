//! A private region made shared where it stands: its memory moves into a
//! new shm object mapped at the same addresses, so every pointer into it
//! (ID caches, span stacks, pulse sites, a thread's second-level map) stays
//! valid and every sample recorded so far is kept. Threads that record
//! while it moves wait on their first store into it (`pause`).
//!
//! The steps, under the registry lock and the growth lock (no slot, ID or
//! chunk is handed out meanwhile):
//! - M1 The object: made, locked, sized to the whole region, and reserved
//!   (`posix_fallocate`) for what the region uses: its header, its name
//!   chunks, and the slots handed out so far, so that a `/dev/shm` too
//!   small fails here, with nothing changed. The rest of its slot chunks
//!   stays a hole in the object, each slot reserved when it is first handed
//!   out (`Region::commit_slot`). Then it is published under the name (L2,
//!   or L4 over a dead producer's region). Until M4 its header is zeros,
//!   which readers reject as not a region.
//! - M2 Writers paused (S1 of `pause`): every mapping of the region made
//!   read-only.
//! - M3 Each mapping's pages that hold anything (present or swapped out,
//!   by `/proc/self/pagemap`; without it, the pages that are not all zeros)
//!   written into the object at their offset, the header last with its
//!   magic last (so a reader that finds the magic finds everything before
//!   it), its flags saying shared and its producer the calling process.
//! - M4 Each mapping replaced, at its address, by a shared mapping of the
//!   object (`MAP_FIXED`), the header last; then the writers go on (S3),
//!   their stores landing in the object.
//!
//! A failure in M2 or M3 gives every mapping its write access back, so the
//! region stays private and whole, and removes the name. A failure in M4
//! (no memory for a mapping) leaves the mappings already replaced on the
//! object (same content, private to the process once the name is gone) and
//! the others on their own memory, also whole.

use super::*;
use crate::pause::Pause;

/// One mapping of the region: where it is, its length, its offset in the
/// region (and the object).
#[derive(Clone, Copy)]
struct Part {
    base: *mut u8,
    len: usize,
    offset: u64,
}

impl Region {
    /// Moves this private region into a new shared-memory object `name`
    /// (see the module comment), published as `create_shared` publishes
    /// (`lineage`, `cfg.if_taken`, `cfg.mode`). The region keeps its
    /// geometry and ID limit: a capacity of `cfg` that is set and differs
    /// is -EBUSY. -EBUSY too for a region that is not private anonymous
    /// memory (a fork child's copy of a shared one). Called under the
    /// registry lock.
    pub fn share(&self, name: &[u8], cfg: &latte_region_config, lineage: &mut dyn FnMut(BorrowedFd<'_>) -> Option<(u64, u64)>) -> Result<(), Error> {
        let cname = crate::shm::c_name(name)?;
        let replace_stale = cfg.replace_stale()?;
        self.check_capacities(cfg)?;
        let mut g = self.growth();
        if !matches!(g.backing, Backing::Anonymous) {
            return Err(Error::BUSY);
        }
        let mut parts = vec![Part { base: self.header_map.as_ptr(), len: HEADER_MAP_BYTES as usize, offset: 0 }];
        parts.extend(g.chunks.iter().map(|c| Part { base: c.map.as_ptr(), len: c.map.size(), offset: c.offset }));
        // The SIGBUS protection the shared mappings need, taken now (an
        // anonymous range in the table is harmless) so that running out of
        // memory for it fails before anything moves.
        let faults = parts.iter().map(|p| crate::fault::protect_range(p.base, p.len, true)).collect::<Result<Vec<_>, _>>()?;
        // M1.
        let (tmp, fd) = new_object(cfg.resolved().mode)?;
        let mut unlink_tmp = UnlinkOnDrop(Some(&tmp));
        // Relaxed: only the grower (under the locks held here) stores it.
        let total = self.header().total_size.load(Ordering::Relaxed);
        // SAFETY: sizes the object this call made (a hole until reserved).
        if unsafe { libc::ftruncate(fd.as_raw_fd(), total as libc::off_t) } != 0 {
            return Err(Error::last_os());
        }
        for (offset, len) in self.used_ranges(&g) {
            commit(fd.as_fd(), offset, len)?;
        }
        self.publish(&tmp, name, replace_stale, lineage)?;
        unlink_tmp.0 = None;
        if let Err(e) = self.move_into(fd.as_fd(), &parts) {
            let _ = crate::shm::unlink(name);
            return Err(e);
        }
        let mut faults = faults.into_iter();
        g.header_fault = faults.next();
        for (c, f) in g.chunks.iter_mut().zip(faults) {
            c._fault = Some(f);
        }
        g.backing = Backing::Shared { name: cname, fd };
        g.sparse_end = total;
        Ok(())
    }

    /// Gives this shared region (the one `LATTE_REGION` named, already
    /// recorded into) the name `name` in place of its own, as publishing a
    /// new region would (L2, or L4 over a dead producer's region), with the
    /// lineage of its new name; its samples and mappings stay. Capacities
    /// as for `share`. Called under the registry lock.
    pub fn rename(&self, name: &[u8], cfg: &latte_region_config, lineage: &mut dyn FnMut(BorrowedFd<'_>) -> Option<(u64, u64)>) -> Result<(), Error> {
        let cname = crate::shm::c_name(name)?;
        let replace_stale = cfg.replace_stale()?;
        self.check_capacities(cfg)?;
        let mut g = self.growth();
        let Backing::Shared { name: old, fd } = &g.backing else {
            return Err(Error::BUSY);
        };
        if old.to_bytes() == name {
            return Ok(());
        }
        // Relaxed: published with the name (a reader maps the object after
        // finding it under the name); what came before the old name is not
        // the new name's.
        self.header().recorded_before.store(0, Ordering::Relaxed);
        self.publish(&old.clone(), name, replace_stale, lineage)?;
        // SAFETY: fd is the region's own descriptor.
        unsafe { libc::fchmod(fd.as_raw_fd(), cfg.resolved().mode as libc::mode_t) };
        if let Backing::Shared { name: n, .. } = &mut g.backing {
            *n = cname;
        }
        Ok(())
    }

    /// -EBUSY when `cfg` sets a capacity other than this region's (which a
    /// region that is in use keeps).
    fn check_capacities(&self, cfg: &latte_region_config) -> Result<(), Error> {
        let differs = |asked: u32, has: u32| asked != 0 && asked != has;
        let geo = &self.geo;
        if differs(cfg.slot_capacity, geo.first_slots)
            || differs(cfg.samples_per_slot, geo.samples_per_slot)
            || differs(cfg.id_capacity, self.header().id_limit)
        {
            return Err(Error::BUSY);
        }
        Ok(())
    }

    /// M2 to M4: `parts` (the header first) moved into the object `fd`,
    /// the writers paused meanwhile. On failure every part not moved has
    /// its memory writable again, unchanged.
    fn move_into(&self, fd: BorrowedFd<'_>, parts: &[Part]) -> Result<(), Error> {
        let ranges: Vec<(usize, usize)> = parts.iter().map(|p| (p.base as usize, p.len)).collect();
        let pause = Pause::begin(&ranges)?;
        let mut moved = vec![false; parts.len()];
        let undo = |moved: &[bool]| {
            for (p, _) in parts.iter().zip(moved).filter(|(_, &m)| !m) {
                // The memory is unchanged: writable again, the region is whole.
                let _ = protect(p, libc::PROT_READ | libc::PROT_WRITE);
            }
        };
        // M2, then M3: the chunks, then the header.
        let pagemap = Pagemap::open();
        let copied = parts
            .iter()
            .try_for_each(|p| protect(p, libc::PROT_READ))
            .and_then(|_| parts[1..].iter().try_for_each(|p| copy_out(fd, p, pagemap.as_ref())).and_then(|_| self.copy_header_out(fd)));
        if let Err(e) = copied {
            undo(&moved);
            return Err(e);
        }
        // M4: the chunks, then the header.
        for i in (1..parts.len()).chain([0]) {
            if let Err(e) = map_over(fd, &parts[i]) {
                undo(&moved);
                return Err(e);
            }
            moved[i] = true;
        }
        drop(pause); // S3: the writers go on, into the object
        Ok(())
    }

    /// M1's reservations: the header's page, each name chunk whole, and the
    /// slots handed out so far (runs of consecutive slots as one range),
    /// as (offset, length) in the region.
    fn used_ranges(&self, g: &Growth) -> Vec<(u64, u64)> {
        let mut ranges = vec![(0, HEADER_MAP_BYTES)];
        ranges.extend(g.chunks.iter().filter(|c| !c.slots).map(|c| (c.offset, c.map.size() as u64)));
        // Relaxed: only the registry lock's holder (the caller) stores it.
        let used = self.header().slots_used.load(Ordering::Relaxed);
        let stride = self.geo.slot_stride;
        for i in 0..used {
            let at = self.slot_offset(i);
            match ranges.last_mut() {
                Some((o, l)) if *o + *l == at => *l += stride,
                _ => ranges.push((at, stride)),
            }
        }
        ranges
    }

    /// Reserves slot `i`'s bytes in the object when it lies in a chunk that
    /// a move left a hole (M1), before the slot is first handed out; a
    /// region's other slots were reserved with their chunk. An error (a
    /// full `/dev/shm`, told once; for a second after one, at once) means
    /// the slot must not be used. Called under the registry lock.
    pub fn commit_slot(&self, i: u32) -> Result<(), Error> {
        let at = self.slot_offset(i);
        let mut g = self.growth();
        if at >= g.sparse_end {
            return Ok(());
        }
        let now = tsc::clock_ns(libc::CLOCK_MONOTONIC);
        if g.backing_off(now) {
            return Err(Error::NOMEM);
        }
        let r = match &g.backing {
            Backing::Shared { fd, .. } => commit(fd.as_fd(), at, self.geo.slot_stride),
            _ => Ok(()),
        };
        if let Err(e) = r {
            g.failed(e, true, now);
        }
        r
    }

    /// M3 for the header: its page as it stands, marked shared and made by
    /// this process, written with the magic last.
    fn copy_header_out(&self, fd: BorrowedFd<'_>) -> Result<(), Error> {
        let mut page = vec![0u8; HEADER_MAP_BYTES as usize];
        // SAFETY: the header's page is mapped and read-only now (M2): no
        // thread writes it while it is copied.
        unsafe { core::ptr::copy_nonoverlapping(self.header_map.as_ptr(), page.as_mut_ptr(), page.len()) };
        let at = |off: usize| off..off + 4;
        let flags = u32::from_ne_bytes(page[at(core::mem::offset_of!(latte_region_header, flags))].try_into().expect("4 bytes"));
        page[at(core::mem::offset_of!(latte_region_header, flags))].copy_from_slice(&(flags | LATTE_REGION_SHARED).to_ne_bytes());
        // SAFETY: getpid has no memory effects.
        let pid = unsafe { libc::getpid() } as u32;
        page[at(core::mem::offset_of!(latte_region_header, producer_pid))].copy_from_slice(&pid.to_ne_bytes());
        let magic = core::mem::size_of_val(&LATTE_MAGIC);
        const _: () = assert!(core::mem::offset_of!(latte_region_header, magic) == 0);
        write_at(fd, &page[magic..], magic as u64)?;
        write_at(fd, &page[..magic], 0)
    }
}

/// Sets the protection of one mapping.
fn protect(p: &Part, prot: libc::c_int) -> Result<(), Error> {
    // SAFETY: changes the protection of a mapping of this region only.
    if unsafe { libc::mprotect(p.base as *mut libc::c_void, p.len, prot) } != 0 {
        return Err(Error::last_os());
    }
    Ok(())
}

/// Reserves `len` bytes of the object from `offset`, inside its size (a
/// hole filled; unlike `grow`'s `reserve`, nothing past it is cut on
/// failure).
fn commit(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<(), Error> {
    // SAFETY: fd is a valid descriptor; offset and length fit off_t (the region's size does).
    match unsafe { libc::posix_fallocate(fd.as_raw_fd(), offset as libc::off_t, len as libc::off_t) } {
        0 => Ok(()),
        rc => Err(Error::Os(rc)),
    }
}

/// This process's page map (`/proc/self/pagemap`): which pages hold memory.
struct Pagemap(OwnedFd);

/// Bits of a page map entry: the page is present, or swapped out.
const PAGEMAP_HELD: u64 = 1 << 63 | 1 << 62;

impl Pagemap {
    fn open() -> Option<Pagemap> {
        // SAFETY: a valid NUL-terminated path.
        let fd = unsafe { libc::open(c"/proc/self/pagemap".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        // SAFETY: a fresh descriptor nobody else owns.
        (fd >= 0).then(|| Pagemap(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Whether each page of `[base, base + pages * PAGE)` holds memory;
    /// None when the map cannot be read.
    fn held(&self, base: *mut u8, pages: usize) -> Option<Vec<bool>> {
        let mut out = Vec::with_capacity(pages);
        let mut entries = vec![0u64; 8192];
        let first = base as usize / crate::mmap::PAGE;
        while out.len() < pages {
            let n = entries.len().min(pages - out.len());
            let at = ((first + out.len()) * 8) as libc::off_t;
            // SAFETY: reads at most n entries into a buffer that holds them.
            let got = unsafe { libc::pread(self.0.as_raw_fd(), entries.as_mut_ptr() as *mut libc::c_void, n * 8, at) };
            if got != (n * 8) as isize {
                return None;
            }
            out.extend(entries[..n].iter().map(|e| e & PAGEMAP_HELD != 0));
        }
        Some(out)
    }
}

/// M3 for a chunk: its pages that hold memory written into the object at
/// the chunk's offset (the object is zeros elsewhere).
fn copy_out(fd: BorrowedFd<'_>, p: &Part, pagemap: Option<&Pagemap>) -> Result<(), Error> {
    let page = crate::mmap::PAGE;
    let pages = p.len / page;
    let held = pagemap.and_then(|m| m.held(p.base, pages));
    let written = |i: usize| match &held {
        Some(h) => h[i],
        None => {
            // SAFETY: page `i` lies inside the mapping, which is read-only
            // now (M2): nothing writes it while it is read.
            let words = unsafe { core::slice::from_raw_parts(p.base.add(i * page) as *const u64, page / 8) };
            words.iter().any(|&w| w != 0)
        }
    };
    let mut i = 0;
    while i < pages {
        if !written(i) {
            i += 1;
            continue;
        }
        let first = i;
        while i < pages && written(i) {
            i += 1;
        }
        // SAFETY: pages first..i lie inside the read-only mapping (as above).
        let run = unsafe { core::slice::from_raw_parts(p.base.add(first * page), (i - first) * page) };
        write_at(fd, run, p.offset + (first * page) as u64)?;
    }
    Ok(())
}

/// Writes all of `buf` at `offset` of the object.
fn write_at(fd: BorrowedFd<'_>, mut buf: &[u8], mut offset: u64) -> Result<(), Error> {
    while !buf.is_empty() {
        // SAFETY: writes from a valid buffer to a valid descriptor.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), buf.as_ptr() as *const libc::c_void, buf.len(), offset as libc::off_t) };
        if n < 0 {
            let e = Error::last_os();
            if e == Error::Os(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(Error::Os(libc::EIO));
        }
        buf = &buf[n as usize..];
        offset += n as u64;
    }
    Ok(())
}

/// M4 for one mapping: the object's bytes at its offset mapped over it,
/// read-write, at the same address.
fn map_over(fd: BorrowedFd<'_>, p: &Part) -> Result<(), Error> {
    // SAFETY: replaces exactly one of this region's mappings (same address
    // and length) with the object's copy of the same bytes (M3).
    let q = unsafe {
        libc::mmap(
            p.base as *mut libc::c_void,
            p.len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd.as_raw_fd(),
            p.offset as libc::off_t,
        )
    };
    if q == libc::MAP_FAILED {
        return Err(Error::last_os());
    }
    Ok(())
}
