//! A fork child's view of a shared region: the region as it stood at the
//! fork (`ForkCut`, taken by the parent's fork handler), copied into
//! private memory at the same addresses.

use super::*;

/// Each slot's generation and write index, and the header's `slots_used`
/// and `ids_used`, taken in the parent before a fork (its fork handler,
/// under the registry lock: no slot or ID is handed out, and the region
/// does not grow, meanwhile), for `privatize_after_fork` to cut the child's
/// copy there.
#[derive(Debug, Default)]
pub struct ForkCut {
    pub slots_used: u32,
    pub ids_used: u32,
    /// Per slot below `slots_used`: (generation, write index).
    pub slots: Vec<(u32, u64)>,
}

impl ForkCut {
    /// Takes the cut of `r` now (reusing this cut's memory).
    pub fn take(&mut self, r: &Region) {
        let h = r.header();
        // Acquire: every counted slot's and ID's metadata is visible.
        self.slots_used = (h.slots_used.load(Ordering::Acquire) as u64).min(r.slot_capacity()) as u32;
        self.ids_used = h.ids_used.load(Ordering::Acquire);
        self.slots.clear();
        for i in 0..self.slots_used {
            // SAFETY: i < slots_used <= capacity: a slot header inside the region.
            let sh = unsafe { &*r.slot(i) };
            // Acquire (both): the samples below this index, and this
            // generation's metadata, are visible to the child's copy.
            self.slots.push((sh.generation.load(Ordering::Acquire), sh.write_idx.load(Ordering::Acquire)));
        }
    }
}

impl Region {
    /// In a fork child: replace every shared mapping by a private copy of
    /// what it held at the fork (`cut`, taken before it), at the same
    /// address, so that nothing the child writes reaches the parent,
    /// nothing the parent writes afterwards shows in the child, and every
    /// cached pointer stays valid.
    ///
    /// The copy (`replace_with_anonymous_copy`) costs the child time in
    /// proportion to what was recorded. Should it fail (no memory), the
    /// child gets a private copy-on-write remap of the object instead: it
    /// still never writes into the parent's rings, but pages it has not
    /// touched keep following the object. Should that fail too, its view
    /// is made read-only.
    pub fn privatize_after_fork(&mut self, cut: &ForkCut) {
        let g = self.growth.get_mut().unwrap_or_else(|e| e.into_inner());
        let fd = match core::mem::take(&mut g.backing) {
            Backing::Shared { fd, .. } | Backing::Unnamed { fd } => fd,
            other => {
                g.backing = other;
                return; // anonymous private memory is already copy-on-write.
            }
        };
        // The child's rings grow in its own memory from now on.
        self.set_object_fd(-1);
        let g = self.growth.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut maps: Vec<(*mut u8, usize, u64, bool)> = vec![(self.header_map.as_ptr(), HEADER_MAP_BYTES as usize, 0, false)];
        maps.extend(g.chunks.iter().map(|c| (c.map.as_ptr(), c.map.size(), c.offset, c.slots)));
        // Relaxed: a test switch, read on its own.
        let copied =
            !FAIL_FORK_COPY.load(Ordering::Relaxed) && maps.iter().all(|&(base, len, _, slots)| self.replace_with_anonymous_copy(base, len, slots, cut));
        if !copied {
            for &(base, len, offset, _) in &maps {
                // SAFETY: remaps exactly one of our own mappings (same base
                // and length) with MAP_FIXED; the object is still sized as
                // before. A mapping already copied is remapped too: the
                // child's view then follows the object, as stated above.
                let p = unsafe {
                    libc::mmap(
                        base as *mut libc::c_void,
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_FIXED,
                        fd.as_raw_fd(),
                        offset as libc::off_t,
                    )
                };
                if p == libc::MAP_FAILED {
                    // SAFETY: our own mapping.
                    unsafe { libc::mprotect(base as *mut libc::c_void, len, libc::PROT_READ) };
                }
            }
        }
        // The descriptor closes here: the child holds no lock on the
        // parent's object and never unlinks its name.
        drop(fd);
        self.growth.get_mut().unwrap_or_else(|e| e.into_inner()).backing = Backing::PrivateCopy;
    }

    /// Copies what one mapping of the region held at the fork into fresh
    /// anonymous memory and moves that over it, at the same address: the
    /// header page (with the cut's `slots_used` and `ids_used`) or a name
    /// chunk whole; for a slot chunk, each slot handed out before the fork
    /// (`cut`): its header and the samples below its write index at the
    /// fork (a ring that wrapped: all of it). The parent records meanwhile,
    /// so words are read with atomic loads, the copy's write indices are the
    /// cut's, and each ring's `flushed_end_idx` is the parent's write index
    /// read after its samples were copied: a reader drops (counts lost) what
    /// the parent may have overwritten in the meantime, exactly as for a
    /// flushed image. A slot the parent gave to another owner meanwhile
    /// keeps nothing. Zero words are not written, so untouched pages stay
    /// uncommitted.
    fn replace_with_anonymous_copy(&self, base: *mut u8, len: usize, slots: bool, cut: &ForkCut) -> bool {
        let Ok(fresh) = Mmap::anonymous(len) else {
            return false;
        };
        let tmp = fresh.as_ptr();
        let copy = |off: usize, n: usize| {
            let src = base.wrapping_add(off) as *const AtomicU64;
            let dst = tmp.wrapping_add(off) as *mut u64;
            for i in 0..n / 8 {
                // SAFETY: callers pass ranges inside both mappings (each
                // `len` bytes, page aligned); the source is shared memory,
                // read atomically (relaxed: a moment's picture; the indices
                // that vouch for the samples are the cut's, taken with
                // acquire before the fork).
                unsafe {
                    let w = (*src.add(i)).load(Ordering::Relaxed);
                    if w != 0 {
                        dst.add(i).write(w);
                    }
                }
            }
        };
        if !slots {
            copy(0, len);
            if base == self.header_map.as_ptr() {
                type H = latte_region_header;
                // SAFETY: inside the fresh header page: the counts at the fork.
                unsafe {
                    (tmp.add(core::mem::offset_of!(H, slots_used)) as *mut u32).write(cut.slots_used);
                    (tmp.add(core::mem::offset_of!(H, ids_used)) as *mut u32).write(cut.ids_used);
                }
            }
        } else {
            let stride = self.geo.slot_stride as usize;
            let cap = self.geo.samples_per_slot as u64;
            let first =
                (0..LATTE_CHUNKS as usize).find(|&k| self.slot_bases[k].load(Ordering::Acquire) == base).map(|k| self.geo.slots_before(k as u32)).unwrap_or(0);
            for j in 0..len / stride {
                let Some(&(generation, w)) = cut.slots.get((first + j as u64) as usize) else { break };
                let off = j * stride;
                // SAFETY: slot j of this chunk, inside the mapping.
                let sh = unsafe { &*(base.add(off) as *const latte_slot_header) };
                copy(off, LATTE_SLOT_HEADER_SIZE as usize);
                copy(off + LATTE_SLOT_HEADER_SIZE as usize, w.min(cap) as usize * LATTE_SAMPLE_SIZE as usize);
                // Acquire (both): pairs with the owner's release stores; a
                // reassignment since the cut shows as another generation.
                let w_after = sh.write_idx.load(Ordering::Acquire);
                let same_owner = sh.generation.load(Ordering::Acquire) == generation;
                // The parent's index after the copy (a reader drops what lies
                // below it minus a ring); a new owner may have written over
                // anything: everything counts as lost.
                let end = if same_owner { w_after.max(w) } else { w.saturating_add(cap) };
                type S = latte_slot_header;
                // SAFETY: inside the fresh mapping: slot j's header words.
                unsafe {
                    (tmp.add(off + core::mem::offset_of!(S, write_idx)) as *mut u64).write(w);
                    (tmp.add(off + core::mem::offset_of!(S, flushed_end_idx)) as *mut u64).write(if end > w { end } else { 0 });
                    (tmp.add(off + core::mem::offset_of!(S, generation)) as *mut u32).write(generation);
                }
            }
        }
        // SAFETY: moves our fresh mapping over exactly one of our own mappings.
        let r = unsafe { libc::mremap(tmp as *mut libc::c_void, len, len, libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, base as *mut libc::c_void) };
        if r == libc::MAP_FAILED {
            return false; // `fresh` unmaps itself
        }
        // The pages moved to the mapping's address, which its owner owns.
        let _ = fresh.leak();
        true
    }
}
