//! Writing the region to a file: a self-describing image in the region's own
//! format, which the reader and the `latte` command open exactly as they open
//! a live region.
//!
//! The image is the region at its own offsets (a private region's chunks at
//! the offsets its directory gives them), cut after the last slot handed
//! out, with the flag LATTE_REGION_FLUSHED and the preferred display unit.
//! It is written in three steps, so that an image cut short (a full disk, a
//! crash) never passes for a complete one:
//! 1. the name chunks, and the samples of every slot, straight from the
//!    region's memory (the producers keep recording meanwhile); each slot's
//!    `generation`, `state` and `write_idx` are captured *before* its
//!    samples are written, and the count of names before the names;
//! 2. once they are on disk, each slot's `write_idx` is read again and the
//!    slot headers are written: `write_idx` = the value before,
//!    `flushed_end_idx` = the value after. A reader applies the live rule
//!    to them: an index the producer may have overwritten while the flush
//!    ran is dropped and counted as lost. A slot reassigned meanwhile is
//!    written as unassigned;
//! 3. the file header (magic, geometry, counters, calibration, unit) last.
//!
//! `flush_sync` does this with `pwrite` on the calling thread. With the
//! `uring` feature, `flush_async` submits the writes as io_uring SQEs and
//! returns at once; `poll` reaps completions, resubmits short writes, moves
//! to the next step and reports progress. Built without the feature,
//! `flush_async` and `poll` return Error::NotSupported (and `flush_sync`
//! is the documented fallback).

use crate::error::Error;
use crate::layout::*;
use crate::region::Region;
use core::mem::offset_of;
use core::sync::atomic::{AtomicU64, Ordering};

/// What `latte_flush_get_status` reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct latte_flush_status {
    /// LATTE_FLUSH_IDLE, LATTE_FLUSH_PENDING, or a negative code (the last flush failed).
    pub state: i32,
    pub _pad: u32,
    /// Bytes written so far by the current or last flush.
    pub bytes_written: u64,
    /// Bytes the flush writes in all: `bytes_written` reaches it when the
    /// flush completes. (The image's size may be larger: the padding of
    /// rings and of the name chunks is never written and reads as zeros.)
    pub bytes_total: u64,
}

/// One write: `len` bytes from `src` at file offset `off`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Write {
    pub src: *const u8,
    pub len: u64,
    pub off: u64,
}

/// A slot as captured before its samples were written.
#[derive(Clone, Copy, Debug)]
struct Captured {
    index: u32,
    generation: u32,
    write_idx: u64,
    /// Samples of the ring's memory committed when it was captured (at
    /// least `write_idx`, or the whole ring once it lapped): only those are
    /// written out, the rest of the image's ring is a hole.
    committed: u64,
}

/// A flush in the making: the writes of step 1 and what steps 2 and 3 need.
pub(crate) struct Plan {
    region: &'static Region,
    unit: latte_unit,
    /// Cycles per ns written into the image (`calibrate::cycles_per_ns_now`:
    /// from the region's anchor, never a measurement on the caller).
    cycles_per_ns: f64,
    slots: Vec<Captured>,
    n_slots: u32,
    /// Names published when the plan was made: all of them lie in `names`.
    n_ids: u32,
    /// Each name chunk: its memory, offset and length.
    names: Vec<(*const u8, u64, u64)>,
    /// The image's size.
    pub total: u64,
    /// Bytes the three steps write (`bytes_total`).
    pub to_write: u64,
    /// Step 2 and 3 bytes, built by `headers` (kept alive while written).
    slot_headers: Vec<u8>,
    file_header: Vec<u8>,
}

// SAFETY: the raw pointers inside point into the leaked, never-unmapped
// region or into the plan's own buffers.
unsafe impl Send for Plan {}

/// Copies `len` bytes of live shared memory with relaxed atomic u64 loads
/// (`src` and `len` 8-byte aligned).
fn copy_atomic(src: *const u8, len: usize, out: &mut Vec<u8>) {
    for k in (0..len).step_by(8) {
        // SAFETY: the caller passes a range inside the region, 8-byte aligned.
        let w = unsafe { AtomicU64::from_ptr(src.add(k) as *mut u64) }.load(Ordering::Relaxed);
        out.extend_from_slice(&w.to_le_bytes());
    }
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + size_of::<u32>()].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + size_of::<u64>()].copy_from_slice(&v.to_le_bytes());
}

impl Plan {
    /// Captures the slots and lists the sample writes (step 1).
    pub fn new(region: &'static Region, unit: latte_unit) -> Plan {
        let g = *region.geometry();
        // Acquire: the metadata of every counted slot is visible.
        let n = (region.header().slots_used.load(Ordering::Acquire) as u64).min(region.slot_capacity()) as u32;
        let mut slots = Vec::with_capacity(n as usize);
        let mut total = LATTE_HEADER_SIZE as u64;
        for i in 0..n {
            // SAFETY: i < slots_used <= capacity: a slot header inside the region.
            let sh = unsafe { &*region.slot(i) };
            // Acquire (both): the metadata of this generation, and every
            // sample below write_idx, are visible before we copy them.
            let generation = sh.generation.load(Ordering::Acquire);
            let write_idx = sh.write_idx.load(Ordering::Acquire);
            // Relaxed: read after write_idx (acquire), which the owner
            // stored after the limit that covers it.
            let committed = sh.write_limit.load(Ordering::Relaxed).min(g.samples_per_slot as u64);
            slots.push(Captured { index: i, generation, write_idx, committed });
            total = total.max(region.slot_offset(i) + LATTE_SLOT_HEADER_SIZE as u64 + g.samples_per_slot as u64 * LATTE_SAMPLE_SIZE as u64);
        }
        // Acquire, after every slot was captured: the name of each captured
        // slot's token (interned before the slot was assigned) lies below it,
        // and every name below it lies in a chunk listed next.
        let n_ids = region.header().ids_used.load(Ordering::Acquire);
        let names = region.name_chunks();
        for &(_, off, len) in &names {
            total = total.max(off + len);
        }
        let cycles_per_ns = crate::calibrate::cycles_per_ns_now();
        // Step 1: the name chunks and a ring's samples per assigned slot;
        // step 2: a header per slot; step 3: the file header.
        let sample_bytes: u64 = slots.iter().filter(|c| c.generation != 0).map(|c| c.committed * LATTE_SAMPLE_SIZE as u64).sum();
        let name_bytes: u64 = names.iter().map(|&(_, _, len)| len).sum();
        let to_write = name_bytes + sample_bytes + n as u64 * LATTE_SLOT_HEADER_SIZE as u64 + LATTE_HEADER_SIZE as u64;
        Plan { region, unit, cycles_per_ns, slots, n_slots: n, n_ids, names, total, to_write, slot_headers: Vec::new(), file_header: Vec::new() }
    }

    /// Step 1: the name chunks, and the sample arrays of the assigned
    /// slots, from region memory.
    pub fn data_writes(&self) -> Vec<Write> {
        let names = self.names.iter().map(|&(src, off, len)| Write { src, len, off });
        let samples = self.slots.iter().filter(|c| c.generation != 0).map(|c| {
            let off = self.region.slot_offset(c.index) + LATTE_SLOT_HEADER_SIZE as u64;
            // SAFETY: the slot's samples lie inside the region.
            let src = unsafe { (self.region.slot(c.index) as *const u8).add(LATTE_SLOT_HEADER_SIZE as usize) };
            Write { src, len: c.committed * LATTE_SAMPLE_SIZE as u64, off }
        });
        names.chain(samples).collect()
    }

    /// Steps 2 and 3, built after step 1 is on disk: returns (slot header
    /// writes, file header write).
    pub fn headers(&mut self) -> (Vec<Write>, Write) {
        let h = self.region.header();
        let hs = LATTE_SLOT_HEADER_SIZE as usize;
        self.slot_headers = vec![0u8; self.slots.len() * hs];
        for (k, c) in self.slots.iter().enumerate() {
            // SAFETY: a captured slot index, inside the region.
            let sh = unsafe { &*self.region.slot(c.index) };
            slot_header(c, sh, &mut self.slot_headers[k * hs..(k + 1) * hs]);
        }
        let slot_writes = self
            .slots
            .iter()
            .enumerate()
            .map(|(k, c)| Write {
                // SAFETY: k * hs is inside slot_headers.
                src: unsafe { self.slot_headers.as_ptr().add(k * hs) },
                len: hs as u64,
                off: self.region.slot_offset(c.index),
            })
            .collect();
        // The file header, from live memory, then patched.
        let mut fh = Vec::with_capacity(LATTE_HEADER_SIZE as usize);
        copy_atomic(self.region.base(), LATTE_HEADER_SIZE as usize, &mut fh);
        type H = latte_region_header;
        // The flags as copied (atomically) above: the producer may OR
        // LATTE_REGION_SWITCHES_TRACKED into them at any time.
        let o = offset_of!(H, flags);
        let flags = u32::from_ne_bytes([fh[o], fh[o + 1], fh[o + 2], fh[o + 3]]);
        put_u32(&mut fh, o, LATTE_REGION_FLUSHED | (flags & (LATTE_REGION_SHARED | LATTE_REGION_SWITCHES_TRACKED)));
        put_u32(&mut fh, offset_of!(H, slots_used), self.n_slots);
        put_u32(&mut fh, offset_of!(H, ids_used), self.n_ids);
        put_u64(&mut fh, offset_of!(H, total_size), self.total);
        put_u32(&mut fh, offset_of!(H, display_unit), self.unit);
        // The chunks the image holds, and no other.
        for k in 0..LATTE_CHUNKS as usize {
            // Acquire: pairs with the release in `Region::grow`.
            let has_slots = self.region.geometry().slots_before(k as u32) < self.n_slots as u64;
            let slot_entry = if has_slots { h.slot_chunks[k].load(Ordering::Acquire) } else { 0 };
            put_u64(&mut fh, offset_of!(H, slot_chunks) + k * size_of::<u64>(), slot_entry);
            let name_entry = self.names.get(k).map(|&(_, off, _)| off).unwrap_or(0);
            put_u64(&mut fh, offset_of!(H, name_chunks) + k * size_of::<u64>(), name_entry);
        }
        if crate::layout::load_f64(&h.cycles_per_ns_bits) <= 0.0 {
            // Not yet kept for the region (younger than the anchor window):
            // the image carries the anchor-derived figure of this flush.
            put_u64(&mut fh, offset_of!(H, cycles_per_ns_bits), self.cycles_per_ns.to_bits());
        }
        self.file_header = fh;
        let fw = Write { src: self.file_header.as_ptr(), len: self.file_header.len() as u64, off: 0 };
        (slot_writes, fw)
    }
}

/// Step 2 for one captured slot: its header as the image holds it, in `b`
/// (zeros: unassigned).
fn slot_header(c: &Captured, sh: &latte_slot_header, b: &mut [u8]) {
    // Acquire: pairs with the release stores of a reassignment.
    let gen_now = sh.generation.load(Ordering::Acquire);
    let end = sh.write_idx.load(Ordering::Acquire);
    if c.generation == 0 || gen_now != c.generation {
        return; // unassigned, or given to a new owner meanwhile: written as unassigned
    }
    type S = latte_slot_header;
    // The metadata loads below may be relaxed: it was stored before
    // the release store of the generation we just loaded (acquire)
    // and compared; a new owner's, stored meanwhile, is caught by
    // the check after them. State: acquire, pairs with the owner's
    // release store of CLOSED.
    put_u64(b, offset_of!(S, write_idx), c.write_idx);
    put_u64(b, offset_of!(S, flushed_end_idx), end.max(c.write_idx));
    put_u32(b, offset_of!(S, generation), c.generation);
    put_u32(b, offset_of!(S, id_token), sh.id_token.load(Ordering::Relaxed));
    put_u32(b, offset_of!(S, thread_idx), sh.thread_idx.load(Ordering::Relaxed));
    put_u32(b, offset_of!(S, os_tid), sh.os_tid.load(Ordering::Relaxed));
    put_u32(b, offset_of!(S, state), sh.state.load(Ordering::Acquire));
    put_u64(b, offset_of!(S, gen_base), sh.gen_base.load(Ordering::Relaxed));
    // A reassignment (ring protocol A1-A4) may have begun after the
    // generation was loaded, and the loads above may have seen the
    // new owner's metadata (its token may be past the names this
    // image holds). Acquire fence: a value A3 stored, read above,
    // makes A1's store of 0 visible to the load that follows; then
    // the slot is written as unassigned, as a reassigned one is.
    core::sync::atomic::fence(Ordering::Acquire);
    if sh.generation.load(Ordering::Relaxed) != c.generation {
        b.fill(0);
    }
}

/// Takes the caller's descriptor as a flush target: a duplicate of it, so
/// that closing the caller's while the flush runs redirects nothing.
/// Refused: a descriptor not open for writing (-EBADF), one opened with
/// `O_APPEND` (pwrite there appends: the image would not be one; -EINVAL),
/// a pipe, FIFO or socket (a reader that does not read would keep the
/// flush pending for ever, a closed one would raise SIGPIPE; -ESPIPE), and
/// anything else that is not a regular file (-EINVAL).
pub(crate) fn own_target(fd: i32) -> Result<std::os::fd::OwnedFd, Error> {
    use std::os::fd::FromRawFd;
    // SAFETY: F_GETFL has no memory effects; a bad fd gives -1/EBADF.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 || (fl & libc::O_ACCMODE) == libc::O_RDONLY {
        return Err(Error::Os(libc::EBADF));
    }
    if fl & libc::O_APPEND != 0 {
        return Err(Error::Os(libc::EINVAL));
    }
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is writable; fd was just checked open.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(Error::last_os());
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => {}
        libc::S_IFIFO | libc::S_IFSOCK => return Err(Error::Os(libc::ESPIPE)),
        _ => return Err(Error::Os(libc::EINVAL)),
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor or -1.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(Error::last_os());
    }
    // SAFETY: dup is a fresh descriptor nobody else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(dup) })
}

fn pwrite_all(fd: i32, w: &Write) -> Result<u64, Error> {
    let mut done = 0u64;
    while done < w.len {
        // SAFETY: src..src+len is readable (region or plan buffer).
        let r = unsafe { libc::pwrite(fd, w.src.add(done as usize) as *const libc::c_void, (w.len - done) as usize, (w.off + done) as libc::off_t) };
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
            if e == libc::EINTR {
                continue;
            }
            return Err(Error::Os(e));
        }
        if r == 0 {
            return Err(Error::Os(libc::EIO));
        }
        done += r as u64;
    }
    Ok(done)
}

/// Sets the file's length to the image's (drops a stale tail); ignored for
/// descriptors that cannot be truncated (pipes are refused earlier by pwrite).
fn set_len(fd: i32, total: u64) {
    // SAFETY: fd is valid; failure is harmless here.
    unsafe { libc::ftruncate(fd, total as libc::off_t) };
}

/// -EINVAL for a display unit that is neither cycles nor time: the image
/// would carry a unit no reader knows.
fn check_unit(unit: latte_unit) -> Result<(), Error> {
    if unit == LATTE_UNIT_CYCLE || unit == LATTE_UNIT_TIME {
        Ok(())
    } else {
        Err(Error::INVAL)
    }
}

/// Writes the image with pwrite on the calling thread. Returns the bytes written.
pub fn flush_sync(fd: i32, unit: latte_unit) -> Result<u64, Error> {
    check_unit(unit)?;
    let target = own_target(fd)?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&target);
    let region = crate::recorder::REGISTRY.lock().region()?;
    let mut plan = Plan::new(region, unit);
    let mut bytes = 0;
    for w in plan.data_writes() {
        bytes += pwrite_all(fd, &w)?;
    }
    let (slot_writes, fw) = plan.headers();
    for w in &slot_writes {
        bytes += pwrite_all(fd, w)?;
    }
    bytes += pwrite_all(fd, &fw)?;
    set_len(fd, plan.total);
    debug_assert_eq!(bytes, plan.to_write);
    Ok(bytes)
}

#[cfg(feature = "uring")]
mod uring;
#[cfg(all(feature = "uring", feature = "internals"))]
pub use uring::withhold_completions;

/// Starts an asynchronous flush to `fd` (io_uring). 0, or an error code.
pub fn flush_async(fd: i32, unit: latte_unit) -> Result<(), Error> {
    check_unit(unit)?;
    #[cfg(feature = "uring")]
    {
        uring::flush_async(fd, unit)
    }
    #[cfg(not(feature = "uring"))]
    {
        let _ = (fd, unit);
        Err(Error::NotSupported)
    }
}

/// Cancels the pending asynchronous flush: 1 when one was pending, 0 when
/// none was.
pub fn cancel() -> Result<bool, Error> {
    #[cfg(feature = "uring")]
    {
        uring::cancel()
    }
    #[cfg(not(feature = "uring"))]
    {
        Err(Error::NotSupported)
    }
}

/// Progress of the asynchronous flush (never blocks).
pub fn poll() -> Result<i32, Error> {
    #[cfg(feature = "uring")]
    {
        uring::poll()
    }
    #[cfg(not(feature = "uring"))]
    {
        Err(Error::NotSupported)
    }
}

/// Details of the current or last asynchronous flush.
pub fn status() -> Result<latte_flush_status, Error> {
    #[cfg(feature = "uring")]
    {
        Ok(uring::status())
    }
    #[cfg(not(feature = "uring"))]
    {
        Err(Error::NotSupported)
    }
}

/// Whether this build has the asynchronous flush.
pub const fn supported() -> bool {
    cfg!(feature = "uring")
}
