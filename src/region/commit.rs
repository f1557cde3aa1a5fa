//! Ring memory committed as it is written: a slot's header and first
//! samples when the slot is first handed out, then more each time its
//! writer reaches the end of what is committed (ring protocol, G2), within
//! the region's budget.
//!
//! Committing a range means, in an object, reserving its pages
//! (`posix_fallocate`: a full `/dev/shm` fails here, never as a SIGBUS
//! later) and, in any region, mapping them into this process's page tables
//! (`MADV_POPULATE_WRITE`, or a touch of each page where the kernel lacks
//! it): the writer then takes no page fault on them. A ring's growth runs on
//! its writer's thread, possibly in a signal handler, so nothing here takes
//! a lock or allocates: the budget is an atomic count, the object's
//! descriptor an atomic copy.
//!
//! A ring grows by doubling, so that a ring of `n` samples paid
//! log2(n / LATTE_RING_STEP) growths, the last of which commits
//! half the ring (512 KiB for the default 65,536 samples: what the original
//! Latte's `memset` of a new ID's 65,536-sample buffer touches at its first
//! use).

use super::*;
use core::sync::atomic::{AtomicBool, AtomicI32};

/// `MADV_POPULATE_WRITE` (Linux 5.14): faults the range in, writable.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// How long after a failure to commit ring memory the region tries again
/// (1 s): meanwhile rings at their committed end lap early at once, with no
/// system call.
const RING_RETRY_NS: u64 = 1_000_000_000;

/// What ring growths share, without a lock, in a region.
#[derive(Debug)]
pub(super) struct Shared {
    /// The object's descriptor growths reserve pages through; -1 for
    /// anonymous memory.
    object_fd: AtomicI32,
    /// Ring growths under way (`grow_ring`).
    ring_growths: AtomicU32,
    /// The region is moving into an object (`share`): ring growths wait.
    moving: AtomicBool,
    /// The thread moving it (its growths cannot wait for the move).
    mover_tid: AtomicI32,
    /// CLOCK_MONOTONIC (ns) of the last failure to commit a new slot's
    /// first pages (which also stops growths), and of a ring's growth
    /// (which does not stop a new slot's first pages, a smaller request);
    /// 0: none.
    slot_fail_ns: AtomicU64,
    grow_fail_ns: AtomicU64,
    /// The program was told that rings could not grow.
    told: AtomicBool,
}

impl Shared {
    /// The state of a region whose object is `fd` (-1: none).
    pub(super) fn new(fd: libc::c_int) -> Shared {
        Shared {
            object_fd: AtomicI32::new(fd),
            ring_growths: AtomicU32::new(0),
            moving: AtomicBool::new(false),
            mover_tid: AtomicI32::new(0),
            slot_fail_ns: AtomicU64::new(0),
            grow_fail_ns: AtomicU64::new(0),
            told: AtomicBool::new(false),
        }
    }
}

/// The end of the page that holds byte `a - 1`: `a` rounded up to a page.
fn page_up(a: u64) -> u64 {
    a.next_multiple_of(LATTE_PAGE_SIZE)
}

/// The start of the page that holds byte `a`.
fn page_down(a: u64) -> u64 {
    a & !(LATTE_PAGE_SIZE - 1)
}

/// A region's budget from the environment: `LATTE_BUDGET_MIB`, MiB in
/// decimal digits (0 or unset: None; anything else unusable: None, said
/// once by `settings`).
pub const LATTE_BUDGET_ENV: &str = "LATTE_BUDGET_MIB";

impl Region {
    /// The budget of a region with `budget_mib` asked (0: the default):
    /// that many MiB, else `LATTE_BUDGET_MIB`, else for a region in an
    /// object what its filesystem has free now less an eighth of its size
    /// (room left for the other users of `/dev/shm`), else none
    /// (`u64::MAX`).
    pub(super) fn budget_for(budget_mib: u32, fd: Option<BorrowedFd<'_>>) -> u64 {
        let mib = if budget_mib != 0 { Some(budget_mib as u64) } else { settings::budget_mib() };
        if let Some(m) = mib {
            return m.saturating_mul(1 << 20);
        }
        let Some(fd) = fd else { return u64::MAX };
        // SAFETY: an all-zero statvfs is a valid value to fill.
        let mut st: libc::statvfs = unsafe { core::mem::zeroed() };
        // SAFETY: a valid descriptor and a buffer of the right type.
        if unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) } != 0 {
            return u64::MAX;
        }
        let unit = st.f_frsize as u64;
        let free = (st.f_bavail as u64).saturating_mul(unit);
        let size = (st.f_blocks as u64).saturating_mul(unit);
        free.saturating_sub(size / 8)
    }

    /// Commits slot `i`'s header and its first `LATTE_RING_STEP` samples
    /// when the slot is first handed out, and sets its `write_limit` (the
    /// whole ring when that covers it). Outside the budget: a new (thread,
    /// ID) gets its first samples while any memory is left. An error (a
    /// full `/dev/shm`, no memory; told once) means the slot must not be
    /// used. Called under the registry lock.
    pub fn commit_slot(&self, i: u32) -> Result<(), Error> {
        let slot = self.slot(i);
        let start = slot as u64;
        let cap = self.geo.samples_per_slot as u64;
        let samples = start + LATTE_SLOT_HEADER_SIZE as u64;
        let limit = (LATTE_RING_STEP as u64).min(cap);
        let now = tsc::clock_ns(libc::CLOCK_MONOTONIC);
        if self.ring_backing_off(now, false) {
            return Err(Error::NOMEM);
        }
        let (from, to) = (page_down(start), page_up(samples + limit * LATTE_SAMPLE_SIZE as u64));
        if let Err(e) = self.commit_range(from, to, self.slot_offset(i) - (start - from)) {
            self.ring_failed(e, now, false);
            return Err(e);
        }
        self.charge(to - from);
        // SAFETY: slot i is inside the region, its header committed above.
        let sh = unsafe { &*slot };
        // Relaxed: the slot has no owner yet; its owner-to-be reads it
        // after the registry lock is released, which orders it.
        sh.write_limit.store(if limit >= cap { LATTE_RING_WHOLE } else { limit }, Ordering::Relaxed);
        Ok(())
    }

    /// G2 for the ring at `slot`, whose committed memory ends at index
    /// `lim` (a multiple of `LATTE_RING_STEP`): commits as much again (the
    /// rest of the ring when that reaches it) within the budget, and
    /// returns the new `write_limit` (`LATTE_RING_WHOLE` for the whole
    /// ring). An error
    /// when no memory can be had now (G3 follows), said once.
    pub fn grow_ring(&self, slot: *mut latte_slot_header, lim: u64) -> Result<u64, Error> {
        let now = tsc::clock_ns(libc::CLOCK_MONOTONIC);
        if self.ring_backing_off(now, true) {
            return Err(Error::NOSPC);
        }
        // The mover (`share`) waits for growths under way and makes new
        // ones wait while it moves the region (its M1 reserves what is
        // committed at that moment). SeqCst (both sides): each sees the
        // other's store, or the other sees its own.
        loop {
            self.commit.ring_growths.fetch_add(1, Ordering::SeqCst);
            if !self.commit.moving.load(Ordering::SeqCst) {
                break;
            }
            self.commit.ring_growths.fetch_sub(1, Ordering::SeqCst);
            // A move under way: its writers wait for it at their next store
            // anyway (`pause`); so does a growth, unless it interrupted the
            // mover itself (a signal handler), which cannot wait for it.
            // Relaxed: set by the mover before `moving`, read only to
            // compare with this thread's id.
            // SAFETY: gettid has no memory effects.
            if self.commit.mover_tid.load(Ordering::Relaxed) == unsafe { libc::gettid() } {
                return Err(Error::BUSY);
            }
            while self.commit.moving.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
        let r = self.grow_ring_now(slot, lim, now);
        // Release: the growth's work is done before a mover sees the count drop.
        self.commit.ring_growths.fetch_sub(1, Ordering::Release);
        r
    }

    fn grow_ring_now(&self, slot: *mut latte_slot_header, lim: u64, now: u64) -> Result<u64, Error> {
        let cap = self.geo.samples_per_slot as u64;
        let samples = slot as u64 + LATTE_SLOT_HEADER_SIZE as u64;
        // Twice the step multiple it was: a step multiple again.
        let want = lim.saturating_mul(2).min(cap);
        // The page that holds index `lim`'s first byte is committed already
        // when `lim` starts inside it (it holds index `lim - 1`).
        let (from, to) = (page_up(samples + lim * LATTE_SAMPLE_SIZE as u64), page_up(samples + want * LATTE_SAMPLE_SIZE as u64));
        // Relaxed: written once, before the region was published.
        let budget = self.header().budget_bytes.load(Ordering::Relaxed);
        // Relaxed: a count compared with a bound; no data depends on it.
        let before = self.header().committed_bytes.fetch_add(to - from, Ordering::Relaxed);
        if before.saturating_add(to - from) > budget {
            self.header().committed_bytes.fetch_sub(to - from, Ordering::Relaxed);
            // No back-off: the budget is asked without a system call, and a
            // new (thread, ID)'s first pages are outside it.
            self.tell_ring_failure(Error::NOSPC);
            return Err(Error::NOSPC);
        }
        let offset = self.offset_of(from).ok_or(Error::INVAL)?;
        if let Err(e) = self.commit_range(from, to, offset) {
            self.header().committed_bytes.fetch_sub(to - from, Ordering::Relaxed);
            self.ring_failed(e, now, true);
            return Err(e);
        }
        Ok(if want >= cap { LATTE_RING_WHOLE } else { want })
    }

    /// Adds `bytes` to what the region has committed (outside the budget:
    /// a slot's first pages).
    fn charge(&self, bytes: u64) {
        // Relaxed: a statistic, and a bound `grow_ring` compares with.
        self.header().committed_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Commits the pages `[from, to)` of this process's mapping of the
    /// region, at `offset` in its object when it has one: reserved there,
    /// then faulted in writable.
    fn commit_range(&self, from: u64, to: u64, offset: u64) -> Result<(), Error> {
        if to <= from {
            return Ok(());
        }
        // Acquire: pairs with the release store that set it, after the
        // descriptor was opened (`set_object_fd`).
        let fd = self.commit.object_fd.load(Ordering::Acquire);
        if fd >= 0 {
            // Within the object's size, which is never changed here: an
            // object someone shrank stays shrunk (its lost pages are
            // counted, `fault`), rather than growing back under a reader.
            // SAFETY: a descriptor the region owns for as long as it has
            // this value (`set_object_fd`); offset and length fit off_t.
            if unsafe { libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, offset as libc::off_t, (to - from) as libc::off_t) } != 0 {
                match Error::last_os() {
                    // A filesystem that cannot reserve: its pages come as written.
                    Error::Os(libc::EOPNOTSUPP) => {}
                    e => return Err(e),
                }
            }
        }
        // SAFETY: a page-aligned range of this region's mapping, writable.
        if unsafe { libc::madvise(from as *mut libc::c_void, (to - from) as usize, MADV_POPULATE_WRITE) } == 0 {
            return Ok(());
        }
        match Error::last_os() {
            // No MADV_POPULATE_WRITE: each page touched instead.
            Error::Os(libc::EINVAL) => {
                let mut p = from;
                while p < to {
                    // SAFETY: a word of a page of the range, mapped
                    // read-write; `lock add $0` stores what it read: a write
                    // fault that changes no value (a neighbour's word on a
                    // shared page included). In asm: the compiler turns an
                    // atomic add of 0 into a load.
                    unsafe { core::arch::asm!("lock add qword ptr [{0}], 0", in(reg) p, options(nostack)) };
                    p += LATTE_PAGE_SIZE;
                }
                Ok(())
            }
            // Reserved in the object: the pages fault in later instead.
            _ if fd >= 0 => Ok(()),
            e => Err(e),
        }
    }

    /// The offset in the region (its object) of address `a` of this
    /// process's mapping of a slot chunk.
    fn offset_of(&self, a: u64) -> Option<u64> {
        (0..LATTE_CHUNKS).find_map(|k| {
            // Acquire: pairs with the release in grow.
            let base = self.slot_bases[k as usize].load(Ordering::Acquire) as u64;
            let len = self.geo.slot_chunk_bytes(k)?;
            // Acquire: as above.
            (base != 0 && a >= base && a < base + len).then(|| self.header().slot_chunks[k as usize].load(Ordering::Acquire) + (a - base))
        })
    }

    /// Whether a commit for a growth (`growth`) or a new slot failed less
    /// than `RING_RETRY_NS` before `now`: a slot's failure holds both off,
    /// a growth's only growths.
    fn ring_backing_off(&self, now: u64, growth: bool) -> bool {
        let recent = |a: &AtomicU64| {
            // Relaxed: a hint; acting on a stale one costs one system call.
            let f = a.load(Ordering::Relaxed);
            f != 0 && now.wrapping_sub(f) < RING_RETRY_NS
        };
        recent(&self.commit.slot_fail_ns) || (growth && recent(&self.commit.grow_fail_ns))
    }

    /// Notes that ring memory could not be had (`e`) at `now`, for a growth
    /// (`growth`) or a new slot: for `RING_RETRY_NS`, rings at their
    /// committed end lap early without a system call (and, after a slot's
    /// failure, new slots are refused). Tells the program once.
    fn ring_failed(&self, e: Error, now: u64, growth: bool) {
        let at = if growth { &self.commit.grow_fail_ns } else { &self.commit.slot_fail_ns };
        // Relaxed: see `ring_backing_off`.
        at.store(now.max(1), Ordering::Relaxed);
        self.tell_ring_failure(e);
    }

    /// Tells the program once that rings could not grow (`e`).
    fn tell_ring_failure(&self, e: Error) {
        // Relaxed: only one caller wins the swap, whatever the order.
        if !self.commit.told.swap(true, Ordering::Relaxed) {
            let h = self.header();
            let what = "they go on at the size they have, and what they overwrite is counted lost (early laps)";
            // Relaxed: a statistic read for the message.
            let budget = h.budget_bytes.load(Ordering::Relaxed);
            if e == Error::NOSPC && budget != 0 && h.committed_bytes.load(Ordering::Relaxed).saturating_add(LATTE_PAGE_SIZE << 9) >= budget {
                say(format_args!("rings cannot grow past the region's budget of {} MiB: {what}", h.budget_bytes.load(Ordering::Relaxed) >> 20));
            } else {
                say(format_args!("rings cannot grow ({e}): {what}"));
            }
        }
    }

    /// Sets the descriptor ring growths reserve pages through (-1: none,
    /// anonymous memory). Called when the backing changes, before the new
    /// backing is used; a descriptor set here stays open as long as it is
    /// set.
    pub(super) fn set_object_fd(&self, fd: libc::c_int) {
        // Release: pairs with the acquire in `commit_range`.
        self.commit.object_fd.store(fd, Ordering::Release);
    }

    /// Makes ring growths wait while the region moves (`share`; one that
    /// interrupted the mover fails), once every growth under way is done;
    /// dropping the guard lets them grow again.
    pub(super) fn hold_ring_growth(&self) -> GrowthHold<'_> {
        // Relaxed: see `grow_ring`.
        // SAFETY: gettid has no memory effects.
        self.commit.mover_tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
        // SeqCst: see `grow_ring`.
        self.commit.moving.store(true, Ordering::SeqCst);
        while self.commit.ring_growths.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        GrowthHold(self)
    }
}

/// Ring growths held off while it lives (`Region::hold_ring_growth`).
pub(super) struct GrowthHold<'a>(&'a Region);

impl Drop for GrowthHold<'_> {
    fn drop(&mut self) {
        // SeqCst: see `grow_ring`.
        self.0.commit.moving.store(false, Ordering::SeqCst);
    }
}
