//! A private region made shared where it stands: its memory moves into a
//! new shm object mapped at the same addresses, so every pointer into it
//! (ID caches, span stacks, pulse sites, a thread's second-level map) stays
//! valid and every sample recorded so far is kept. Threads that record
//! while it moves wait on their first store into it (`pause`).
//!
//! The steps, under the registry lock and the growth lock (no slot, ID or
//! chunk is handed out meanwhile):
//! - M1 The object: made, locked and sized to the whole region (`reserve`,
//!   so a `/dev/shm` too small fails here, with nothing changed), and
//!   published under the name (L2, or L4 over a dead producer's region).
//!   Until M4 its header is zeros, which readers reject as not a region.
//! - M2 Writers paused (S1 of `pause`): every mapping of the region made
//!   read-only.
//! - M3 Each mapping's content written into the object at its offset, the
//!   header last with its magic last (so a reader that finds the magic
//!   finds everything before it), its flags saying shared and its producer
//!   the calling process.
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
        let h = self.header();
        let differs = |asked: u32, has: u32| asked != 0 && asked != has;
        if differs(cfg.slot_capacity, self.geo.first_slots) || differs(cfg.samples_per_slot, self.geo.samples_per_slot) || differs(cfg.id_capacity, h.id_limit) {
            return Err(Error::BUSY);
        }
        let mut g = self.growth();
        if !matches!(g.backing, Backing::Anonymous) {
            return Err(Error::BUSY);
        }
        let mode = cfg.resolved().mode;
        // M1.
        let (tmp, fd) = new_object(mode)?;
        let mut unlink_tmp = UnlinkOnDrop(Some(&tmp));
        // Relaxed: only the grower (under the locks held here) stores it.
        let total = h.total_size.load(Ordering::Relaxed);
        reserve(fd.as_fd(), 0, total)?;
        let mut parts = vec![Part { base: self.header_map.as_ptr(), len: HEADER_MAP_BYTES as usize, offset: 0 }];
        parts.extend(g.chunks.iter().map(|c| Part { base: c.map.as_ptr(), len: c.map.size(), offset: c.offset }));
        // The SIGBUS protection the shared mappings need, taken now (an
        // anonymous range in the table is harmless) so that running out of
        // memory for it fails before anything moves.
        let mut faults = Vec::with_capacity(parts.len());
        for p in &parts {
            faults.push(crate::fault::protect_range(p.base, p.len, true)?);
        }
        self.publish(&tmp, name, replace_stale, lineage)?;
        unlink_tmp.0 = None;
        let unpublish = || crate::shm::unlink(name).ok();
        let ranges: Vec<(usize, usize)> = parts.iter().map(|p| (p.base as usize, p.len)).collect();
        let pause = match Pause::begin(&ranges) {
            Ok(p) => p,
            Err(e) => {
                unpublish();
                return Err(e);
            }
        };
        // M2.
        let mut frozen = 0;
        let mut result = Ok(());
        for p in &parts {
            if let Err(e) = protect(p, libc::PROT_READ) {
                result = Err(e);
                break;
            }
            frozen += 1;
        }
        // M3: the chunks, then the header.
        if result.is_ok() {
            result = parts[1..].iter().try_for_each(|p| copy_out(fd.as_fd(), p)).and_then(|_| self.copy_header_out(fd.as_fd()));
        }
        if let Err(e) = result {
            for p in &parts[..frozen] {
                // The memory is unchanged: writable again, the region is whole.
                let _ = protect(p, libc::PROT_READ | libc::PROT_WRITE);
            }
            drop(pause);
            unpublish();
            return Err(e);
        }
        // M4: the chunks, then the header.
        let order = (1..parts.len()).chain([0]);
        let mut moved = vec![false; parts.len()];
        for i in order {
            match map_over(fd.as_fd(), &parts[i]) {
                Ok(()) => moved[i] = true,
                Err(e) => {
                    for (p, _) in parts.iter().zip(&moved).filter(|(_, &m)| !m) {
                        let _ = protect(p, libc::PROT_READ | libc::PROT_WRITE);
                    }
                    drop(pause);
                    unpublish();
                    return Err(e);
                }
            }
        }
        drop(pause); // S3: the writers go on, into the object
        let mut faults = faults.into_iter();
        g.header_fault = faults.next();
        for (c, f) in g.chunks.iter_mut().zip(faults) {
            c._fault = Some(f);
        }
        g.backing = Backing::Shared { name: cname, fd };
        Ok(())
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

/// M3 for a chunk: its pages that hold anything written into the object
/// at the chunk's offset (the object is zeros elsewhere). Untouched pages
/// read as the zero page and are skipped.
fn copy_out(fd: BorrowedFd<'_>, p: &Part) -> Result<(), Error> {
    let page = crate::mmap::PAGE;
    let written = |i: usize| {
        // SAFETY: page `i` lies inside the mapping, which is read-only now
        // (M2): nothing writes it while it is read.
        let words = unsafe { core::slice::from_raw_parts(p.base.add(i * page) as *const u64, page / 8) };
        words.iter().any(|&w| w != 0)
    };
    let pages = p.len / page;
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
    let q = unsafe { libc::mmap(p.base as *mut libc::c_void, p.len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_FIXED, fd.as_raw_fd(), p.offset as libc::off_t) };
    if q == libc::MAP_FAILED {
        return Err(Error::last_os());
    }
    Ok(())
}
