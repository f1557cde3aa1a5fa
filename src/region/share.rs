//! A private region made shared where it stands: its memory moves into a
//! new shm object mapped at the same addresses, so every pointer into it
//! (ID caches, span stacks, pulse sites, a thread's second-level map) stays
//! valid and every sample recorded so far is kept. Threads that record
//! while it moves wait on their first store into it (`pause`).
//!
//! The steps, under the registry lock and the growth lock (no slot, ID or
//! chunk is handed out meanwhile), after a check that the name can be taken
//! (`liveness::available`):
//! - M1 The object: made under a name of its own (L1), sized to the whole
//!   region, and reserved (`posix_fallocate`) for the ranges the region
//!   uses: its header, its name chunks, and the ring memory committed so
//!   far (ring growth is held off meanwhile), so that a `/dev/shm` too
//!   small fails here, with nothing changed. The rest of its slot chunks
//!   stays a hole in the object, committed as rings are handed out and
//!   grow (`commit`).
//! - M2 Writers paused (S1 of `pause`): every mapping of the region
//!   write-protected.
//! - M3 The pages of the ranges in use that hold anything written into the
//!   object at their offset: present, or swapped out and held before M2
//!   (`/proc/self/pagemap`, read before and after; write-protection marks
//!   a page never written as swapped out), or swapped out and not all
//!   zeros; without the page map, the pages that are not all zeros. Of a
//!   ring, the pages past its written prefix (its samples after the one at
//!   `write_idx`, until it laps) hold nothing a reader reads, and are only
//!   copied when present. The header last, its magic last, its producer
//!   the calling process.
//! - M4 Each mapping replaced, at its address, by a shared mapping of the
//!   object (`MAP_FIXED`), the header last; then the writers go on (S3),
//!   their stores landing in the object.
//! - M5 The object published under the name (`rename`: L2, or L4 over a
//!   dead producer's region) and marked shared. Only a whole region is
//!   ever found under a name: a producer that dies during the move leaves
//!   the name as it was (and its temporary object, as a producer that dies
//!   while `create_shared` runs does).
//!
//! Between S1 and S3 nothing is allocated (`pause`): the buffers M3 needs
//! are made before. A failure before M4 lifts the protection: the region
//! stays private and whole, the object goes. A failure in M4 (no memory
//! for a mapping) leaves the mappings replaced so far on the object (same
//! content) and the others on their own memory; a failure in M5 (the name
//! taken during the move) leaves the region whole in the object. Either
//! way the region records on, in an object without a name, private for
//! good (`Backing::Unnamed`).

use super::pages::{copy_out, copy_ranges, write_at, Pagemap, Part};
use super::*;
use crate::pause::Pause;

/// How far `move_into` got.
#[derive(Debug)]
enum Moved {
    /// Nothing: the region is whole in its own memory.
    None(Error),
    /// Some mappings are on the object, the others on their own memory.
    Part(Error),
    /// Every mapping is on the object.
    All,
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
        crate::shm::c_name(name)?;
        let replace_stale = cfg.replace_stale()?;
        self.check_capacities(cfg)?;
        let mut g = self.growth();
        if !matches!(g.backing, Backing::Anonymous) {
            return Err(Error::BUSY);
        }
        // No ring grows while the region moves: M1 reserves what is committed.
        let _hold = self.hold_ring_growth();
        // A name M5 could not take, or a kernel that cannot pause writers,
        // fails now, before anything is made.
        crate::liveness::available(name, replace_stale)?;
        if !crate::pause::available() {
            return Err(Error::BUSY);
        }
        let mut parts = vec![Part { base: self.header_map.as_ptr(), len: HEADER_MAP_BYTES as usize, offset: 0, slots: false }];
        parts.extend(g.chunks.iter().map(|c| Part { base: c.map.as_ptr(), len: c.map.size(), offset: c.offset, slots: c.slots }));
        // The SIGBUS protection the shared mappings need, taken now (an
        // anonymous range in the table is harmless) so that running out of
        // memory for it fails before anything moves.
        let faults = parts.iter().map(|p| crate::fault::protect_range(p.base, p.len, true)).collect::<Result<Vec<_>, _>>()?;
        // M1.
        let (tmp, fd) = crate::liveness::new_object(cfg.resolved().mode)?;
        let mut unlink_tmp = UnlinkOnDrop(Some(&tmp));
        // Relaxed: only the grower (under the locks held here) stores it.
        let total = self.header().total_size.load(Ordering::Relaxed);
        // SAFETY: sizes the object this call made (a hole until reserved).
        if unsafe { libc::ftruncate(fd.as_raw_fd(), total as libc::off_t) } != 0 {
            return Err(Error::last_os());
        }
        let used = self.used_ranges(&g);
        for &(offset, len) in &used {
            commit(fd.as_fd(), offset, len)?;
        }
        // M2 to M4.
        let moved = self.move_into(fd.as_fd(), &parts, &used);
        if !matches!(moved, Moved::None(_)) {
            // The region lives (at least partly) in the object now: its
            // mappings there need the SIGBUS protection, its holes the
            // reservation of each slot.
            let mut faults = faults.into_iter();
            g.header_fault = faults.next();
            for (c, f) in g.chunks.iter_mut().zip(faults) {
                c._fault = Some(f);
            }
            // Ring growths reserve their pages in the object from now on
            // (the descriptor moves into the backing below, and stays open
            // as long as the region).
            self.set_object_fd(fd.as_raw_fd());
        }
        match moved {
            Moved::None(e) => return Err(e),
            Moved::Part(e) => {
                g.backing = Backing::Unnamed { fd };
                return Err(e);
            }
            Moved::All => {}
        }
        g.backing = Backing::Shared { name: tmp.clone(), fd };
        drop(g);
        // M5. Its temporary name goes either way: published, the object
        // has the name asked for; refused (the name was taken meanwhile),
        // the region stays in it, private and unnamed.
        let r = self.rename(name, cfg, lineage);
        let mut g = self.growth();
        if r.is_err() {
            if let Backing::Shared { fd, .. } = core::mem::take(&mut g.backing) {
                g.backing = Backing::Unnamed { fd };
            }
        } else {
            unlink_tmp.0 = None; // the link moved it
        }
        r
    }

    /// Gives this region in an object (the one `LATTE_REGION` named, already
    /// recorded into, or one `share` moved, M5) the name `name` in place of
    /// its own, marked shared, as publishing a new region would (L2, or L4
    /// over a dead producer's region), with the lineage of its new name;
    /// its samples and mappings stay. On failure the region, its name and
    /// its header are as they were. Capacities as for `share`. Called
    /// under the registry lock.
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
        // Relaxed (both): published with the name (a reader maps the object
        // after finding it under the name).
        let flags = self.flags_word().fetch_or(LATTE_REGION_SHARED, Ordering::Relaxed);
        if let Err(e) = self.publish(&old.clone(), name, replace_stale, lineage) {
            self.flags_word().fetch_and(!(LATTE_REGION_SHARED & !flags), Ordering::Relaxed);
            return Err(e);
        }
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
    /// the writers paused meanwhile; M3 copies what `used` (M1's ranges)
    /// holds.
    fn move_into(&self, fd: BorrowedFd<'_>, parts: &[Part], used: &[(u64, u64)]) -> Moved {
        // Made before S1: nothing is allocated while writers are paused.
        let ranges: Vec<(usize, usize)> = parts.iter().map(|p| (p.base as usize, p.len)).collect();
        let copies = copy_ranges(&parts[1..], used);
        let mut page = vec![0u8; HEADER_MAP_BYTES as usize];
        let mut pagemap = Pagemap::open(&copies);
        // M2.
        let mut pause = match Pause::begin(ranges) {
            Ok(p) => p,
            Err(e) => return Moved::None(e),
        };
        // M3: the chunks, then the header.
        let copied = copy_out(fd, &copies, pagemap.as_mut(), &self.geo).and_then(|_| self.copy_header_out(fd, &mut page));
        if let Err(e) = copied {
            return Moved::None(e); // the pause's end makes every part writable again
        }
        // M4: the chunks, then the header.
        for i in (1..parts.len()).chain([0]) {
            // Once more on failure: a kernel may have unmapped the old
            // memory before failing, and the object (whole after M3) then
            // fills the hole. Either way the region's data may now be in
            // the object only: it stays there (`Part`).
            if let Err(e) = map_over(fd, &parts[i]).or_else(|_| map_over(fd, &parts[i])) {
                return Moved::Part(e);
            }
            pause.replaced(i);
        }
        Moved::All // S3 as the pause drops: the writers go on, into the object
    }

    /// M1's reservations: the header's page, each name chunk whole, and the
    /// slots handed out so far (runs of consecutive slots as one range),
    /// as (offset, length) in the region.
    fn used_ranges(&self, g: &Growth) -> Vec<(u64, u64)> {
        let mut ranges = vec![(0, HEADER_MAP_BYTES)];
        ranges.extend(g.chunks.iter().filter(|c| !c.slots).map(|c| (c.offset, c.map.size() as u64)));
        // Relaxed: only the registry lock's holder (the caller) stores it.
        let used = self.header().slots_used.load(Ordering::Relaxed);
        let cap = self.geo.samples_per_slot as u64;
        for i in 0..used {
            let at = self.slot_offset(i);
            // SAFETY: i < slots_used: a slot header inside the region.
            // Relaxed: ring growth is held off (`hold_ring_growth`), and
            // its last store came before the hold (SeqCst).
            let lim = unsafe { &*self.slot(i) }.write_limit.load(Ordering::Relaxed).min(cap);
            let (from, to) =
                (at & !(LATTE_PAGE_SIZE - 1), (at + LATTE_SLOT_HEADER_SIZE as u64 + lim * LATTE_SAMPLE_SIZE as u64).next_multiple_of(LATTE_PAGE_SIZE));
            match ranges.last_mut() {
                Some((o, l)) if *o + *l >= from => *l = (*l).max(to - *o),
                _ => ranges.push((from, to - from)),
            }
        }
        ranges
    }

    /// M3 for the header: its page as it stands, made by this process
    /// (a fork child's region names the child), written with the magic
    /// last, through `page` (a page-sized buffer).
    fn copy_header_out(&self, fd: BorrowedFd<'_>, page: &mut [u8]) -> Result<(), Error> {
        // SAFETY: the header's page is mapped and write-protected now (M2):
        // no thread writes it while it is copied.
        unsafe { core::ptr::copy_nonoverlapping(self.header_map.as_ptr(), page.as_mut_ptr(), page.len()) };
        let at = core::mem::offset_of!(latte_region_header, producer_pid);
        // SAFETY: getpid has no memory effects.
        let pid = unsafe { libc::getpid() } as u32;
        page[at..at + 4].copy_from_slice(&pid.to_ne_bytes());
        let magic = core::mem::size_of_val(&LATTE_MAGIC);
        const _: () = assert!(core::mem::offset_of!(latte_region_header, magic) == 0);
        write_at(fd, &page[magic..], magic as u64)?;
        write_at(fd, &page[..magic], 0)
    }
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
