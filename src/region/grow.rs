//! Growing a region by chunks: each reserved (a shared region's, in its
//! object), mapped and published in the header's directories, under the
//! growth lock; a failure counted and told once.

use super::*;

impl Region {
    pub(super) fn growth(&self) -> std::sync::MutexGuard<'_, Growth> {
        // A panic while growing leaves nothing half-published (the
        // directory entry is stored last): the state is usable.
        self.growth.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the next chunk of slots (`slots`) or names: reserves and maps
    /// it, then publishes it (directory entry, then `total_size`, both
    /// release). Called under the registry lock (and at creation). A
    /// failure (memory, address space or `/dev/shm` ran out) changes
    /// nothing and is told to the program once on standard error (unless
    /// `LATTE_QUIET=1`).
    pub(super) fn grow(&self, slots: bool) -> Result<(), Error> {
        let mut g = self.growth();
        // After a failure, the next attempts within GROW_RETRY_NS fail at
        // once: a thread whose new rings cannot be had pays no system call
        // per span (each is counted all the same).
        let now = tsc::clock_ns(libc::CLOCK_MONOTONIC);
        if g.backing_off(now) {
            return Err(Error::NOMEM);
        }
        let r = self.grow_locked(&mut g, slots);
        if let Err(e) = r {
            if g.slot_chunks > 0 {
                g.failed(e, slots, now);
            }
        }
        r
    }

    /// Arms the hint `refusing` reads: a thread was refused a ring or a
    /// name just now, under the registry lock (so no ring of an exited
    /// thread was left to give it), while the region backs off from the
    /// failure its growth noted last (none: nothing is armed).
    pub fn note_refusal(&self) {
        let failed = self.growth().failed_ns;
        // Relaxed: a hint, stored under the registry lock. A thread that
        // sees it late asks under that lock, which gives the same answer.
        self.refusal_ns.store(failed, Ordering::Relaxed);
    }

    /// Drops the hint `refusing` reads until the next failure: rings of
    /// exited threads can be handed out again, so a thread refused one must
    /// ask the registry. Called under the registry lock, which every
    /// refusal is noted under, so that no thread counts a span that the
    /// registry would have given one of those rings.
    pub fn forget_refusal(&self) {
        // Relaxed: ordered against the refusals by the registry lock.
        self.refusal_ns.store(0, Ordering::Relaxed);
    }

    /// Whether the region backs off at `now` (CLOCK_MONOTONIC, ns) from a
    /// failure to get room, as `grow` would, with no ring handed back since
    /// (`forget_refusal`): read without a lock, so that a thread refused a
    /// ring or a name can count its next spans of that ID without asking
    /// the registry again (`recorder::slow`).
    pub fn refusing(&self, now: u64) -> bool {
        // Relaxed: see `note_refusal`.
        let f = self.refusal_ns.load(Ordering::Relaxed);
        f != 0 && now.wrapping_sub(f) < GROW_RETRY_NS
    }

    fn grow_locked(&self, g: &mut Growth, slots: bool) -> Result<(), Error> {
        let k = if slots { g.slot_chunks } else { g.name_chunks };
        let len = if slots {
            self.geo.slot_chunk_bytes(k).ok_or(Error::NOMEM)?
        } else if k < LATTE_CHUNKS {
            name_chunk_bytes(k)
        } else {
            return Err(Error::NOMEM);
        };
        let h = self.header();
        // Relaxed: only this function (under the lock) stores it.
        let offset = h.total_size.load(Ordering::Relaxed);
        let (map, fault) = match &g.backing {
            Backing::Shared { fd, .. } | Backing::Unnamed { fd } => {
                // Mapped first (a range past the object's end may be
                // mapped; nothing touches it before it is reserved): a
                // process out of address space fails here, cheaply, before
                // it takes /dev/shm that others may need.
                let map = Mmap::shared_at(fd.as_fd(), offset, len as usize, true)?;
                // A name chunk is reserved whole; a slot chunk is a hole
                // in the object, its rings committed as they are handed out
                // and written (`commit`).
                if slots {
                    extend(fd.as_fd(), offset + len)?;
                } else {
                    reserve(fd.as_fd(), offset, len)?;
                }
                let fault = match crate::fault::protect(&map, true) {
                    Ok(f) => f,
                    Err(e) => {
                        drop(map);
                        unreserve(fd.as_fd(), offset);
                        return Err(e);
                    }
                };
                (map, Some(fault))
            }
            Backing::Anonymous | Backing::PrivateCopy => (Mmap::anonymous(len as usize)?, None),
        };
        let base = map.as_ptr();
        g.chunks.push(Chunk { _fault: fault, map, offset, slots });
        // Release: the chunk (zero-filled) is whole before anything that
        // finds it through its base or its directory entry uses it.
        if slots {
            self.slot_bases[k as usize].store(base, Ordering::Release);
            h.slot_chunks[k as usize].store(offset, Ordering::Release);
            g.slot_chunks += 1;
        } else {
            self.name_bases[k as usize].store(base, Ordering::Release);
            h.name_chunks[k as usize].store(offset, Ordering::Release);
            g.name_chunks += 1;
            g.name_pos = 0;
        }
        // Release: a reader that sees the new size sees the entry above.
        h.total_size.store(offset + len, Ordering::Release);
        Ok(())
    }
}

impl Growth {
    /// Whether a failure (to grow, or to reserve a slot) came less than
    /// `GROW_RETRY_NS` before `now`: the next attempts then fail at once,
    /// so that a thread whose new rings cannot be had pays no system call
    /// per span (each is counted all the same).
    pub(super) fn backing_off(&self, now: u64) -> bool {
        self.failed_ns != 0 && now.wrapping_sub(self.failed_ns) < GROW_RETRY_NS
    }

    /// Notes a failure at `now` to get room for rings (`slots`) or names,
    /// and tells the program once.
    pub(super) fn failed(&mut self, e: Error, slots: bool, now: u64) {
        self.failed_ns = now.max(1);
        if !self.told {
            self.told = true;
            tell_once(e, slots);
        }
    }
}

/// Reserves `len` bytes of the object from `offset` (the object grows to
/// hold them), so that a full `/dev/shm` fails here, never as a SIGBUS in
/// a measured thread later.
pub(super) fn reserve(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<(), Error> {
    // SAFETY: fd is a valid descriptor; offset and length fit off_t (chunk sizes are bounded by Geometry).
    let rc = unsafe { libc::posix_fallocate(fd.as_raw_fd(), offset as libc::off_t, len as libc::off_t) };
    if rc != 0 {
        unreserve(fd, offset);
        return Err(Error::Os(rc));
    }
    Ok(())
}

/// Makes the object `end` bytes long, the new bytes a hole (nothing is
/// reserved).
fn extend(fd: BorrowedFd<'_>, end: u64) -> Result<(), Error> {
    // SAFETY: fd is a valid descriptor; `end` fits off_t (chunk sizes are bounded by Geometry).
    if unsafe { libc::ftruncate(fd.as_raw_fd(), end as libc::off_t) } != 0 {
        return Err(Error::last_os());
    }
    Ok(())
}

/// Gives back what a failed `reserve` may have taken past `offset`.
fn unreserve(fd: BorrowedFd<'_>, offset: u64) {
    // SAFETY: fd is a valid descriptor we own; only our own unpublished tail is cut.
    unsafe { libc::ftruncate(fd.as_raw_fd(), offset as libc::off_t) };
}

/// Says once on standard error that the region could not grow (unless
/// `LATTE_QUIET=1`); the spans that cannot be recorded are counted in the
/// header (`no_slot_drops`, `unfit_id_drops`).
#[cold]
fn tell_once(e: Error, slots: bool) {
    let what = if slots { "rings" } else { "ID names" };
    super::say(format_args!("the region cannot grow to hold more {what} ({e}); spans that do not fit are counted, not recorded"));
}
