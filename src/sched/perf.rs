//! The kernel's perf ring of one thread's context switches: the event, its
//! mapping, and the reader of its records.
//!
//! A software dummy event with `context_switch` makes the kernel append a
//! `PERF_RECORD_SWITCH` record to the event's ring every time the thread it
//! watches is switched out and back in. The ring is mapped read-only, which
//! puts it in overwrite mode: the kernel never waits for a reader, and
//! `data_head` (the byte count ever written) moves at every switch. Nobody
//! consumes; readers look at the last `data_size` bytes below the head.
//!
//! Reader protocol (`Ring::read`), for a window `[from, to)` of the ring's
//! byte positions (both taken from earlier loads of `data_head`):
//! 1. `head = data_head` with acquire. It pairs with the kernel's barrier
//!    between writing a record and publishing its end in `data_head` (the
//!    write side of `perf_output_put_handle`): every record below `head`
//!    is completely written.
//! 2. The window must lie below `head` and within the last `data_size`
//!    bytes of it (`head - from <= data_size`); otherwise the kernel has
//!    written over its oldest records (or the positions are not this
//!    ring's): reported as a loss, never guessed at.
//! 3. Each record is copied out with relaxed 8-byte atomic loads (an opaque
//!    copy: the kernel may write the ring at any time and never waits), then
//!    parsed from the copy only.
//! 4. Acquire fence, then `data_head` again (relaxed, ordered after the
//!    copy's loads by the fence). If `head - from > data_size` now, records
//!    of the window may have been overwritten while they were copied: loss.
//!
//! Step 4 is exact because the only reader is the ring's own thread
//! (`sched` refuses points of another thread's ring) and the kernel writes
//! this ring only while that thread is being switched out or in: between
//! two of the reader's instructions, never during one, and both records of
//! a switch are published before the thread runs again. A copy overwritten
//! under the reader therefore always shows as a head that moved past the
//! window.
//!
//! Sizes and offsets of the kernel's structures below are checked against
//! its ABI (`include/uapi/linux/perf_event.h`) at compile time.

use crate::error::Error;
use core::sync::atomic::{fence, AtomicU64, Ordering};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `PERF_TYPE_SOFTWARE`.
const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_DUMMY`: counts nothing; the event exists for its records.
const PERF_COUNT_SW_DUMMY: u64 = 9;
/// `PERF_SAMPLE_TID`.
const PERF_SAMPLE_TID: u64 = 1 << 1;
/// `PERF_SAMPLE_TIME`.
const PERF_SAMPLE_TIME: u64 = 1 << 2;
/// `PERF_SAMPLE_CPU`.
const PERF_SAMPLE_CPU: u64 = 1 << 7;
/// The fields of the `sample_id` trailer every record carries (with
/// `sample_id_all`): what `SwitchRecord` holds after its header.
const SAMPLE_TYPE: u64 = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
/// `PERF_ATTR_SIZE_VER8`: the attr layout below.
const PERF_ATTR_SIZE: u32 = 136;
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

// Bits of `perf_event_attr.flags` (the kernel's bitfield, from bit 0).
const ATTR_EXCLUDE_KERNEL: u64 = 1 << 5;
const ATTR_EXCLUDE_HV: u64 = 1 << 6;
const ATTR_SAMPLE_ID_ALL: u64 = 1 << 18;
const ATTR_USE_CLOCKID: u64 = 1 << 25;
const ATTR_CONTEXT_SWITCH: u64 = 1 << 26;

/// `PERF_RECORD_SWITCH`.
pub(crate) const PERF_RECORD_SWITCH: u32 = 14;
/// `PERF_RECORD_MISC_SWITCH_OUT`: the record is a switch-out (else a switch-in).
pub(crate) const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`: the thread was preempted while
/// runnable (else it blocked: slept or waited).
pub(crate) const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;

/// Data pages of a ring (a power of two): 8 KiB on x86-64's 4 KiB pages,
/// 256 switch records, so a window of up to 128 switches can be read back.
/// Each ring costs this plus the metadata page of the perf memory budget.
pub(crate) const DATA_PAGES: usize = 2;

/// `struct perf_event_attr` (`PERF_ATTR_SIZE_VER8`).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// The kernel's bitfield `disabled:1, inherit:1, ...`.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    reserved_3: u32,
    sig_data: u64,
    config3: u64,
}

/// The first page of the mapping, `struct perf_event_mmap_page`, as far as
/// latte reads it: the fields before `data_head` are the kernel's (self-
/// monitoring counters and time conversion, unused here).
#[repr(C)]
pub struct MmapPage {
    _kernel: [u8; 1024],
    /// Bytes ever written to the data area (written by the kernel).
    pub data_head: AtomicU64,
    /// Consumer position; ignored by the kernel in overwrite mode.
    pub data_tail: AtomicU64,
    /// Offset of the data area from the start of the mapping.
    pub data_offset: AtomicU64,
    /// Size of the data area.
    pub data_size: AtomicU64,
}

/// `struct perf_event_header`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordHeader {
    pub type_: u32,
    pub misc: u16,
    pub size: u16,
}

/// A `PERF_RECORD_SWITCH` record with the `sample_id` trailer of
/// `SAMPLE_TYPE`: `{ pid, tid }`, `time`, `{ cpu, res }`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SwitchRecord {
    pub header: RecordHeader,
    pub pid: u32,
    pub tid: u32,
    /// CLOCK_MONOTONIC ns (`use_clockid`).
    pub time: u64,
    pub cpu: u32,
    pub res: u32,
}

const _: () = {
    assert!(core::mem::size_of::<PerfEventAttr>() == PERF_ATTR_SIZE as usize);
    assert!(core::mem::offset_of!(PerfEventAttr, flags) == 40);
    assert!(core::mem::offset_of!(PerfEventAttr, clockid) == 92);
    assert!(core::mem::offset_of!(PerfEventAttr, config3) == 128);
    assert!(core::mem::offset_of!(MmapPage, data_head) == 1024);
    assert!(core::mem::offset_of!(MmapPage, data_size) == 1048);
    assert!(core::mem::size_of::<RecordHeader>() == 8);
    assert!(core::mem::size_of::<SwitchRecord>() == 32);
    assert!(DATA_PAGES.is_power_of_two());
};

/// Largest record the reader copies; anything larger is taken as a ring it
/// does not understand (reported, not parsed).
const MAX_RECORD: usize = 64;

/// A mapping of a perf event's ring: unmapped on drop.
struct RingMapping {
    base: *mut u8,
    len: usize,
}

impl Drop for RingMapping {
    fn drop(&mut self) {
        // SAFETY: a mapping this value made and alone owns.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// One thread's switch event and its read-only ring.
pub struct Ring {
    map: RingMapping,
    fd: OwnedFd,
    data_offset: usize,
    data_size: u64,
}

// SAFETY: the mapping is read-only memory shared with the kernel, read only
// through atomics; the fd is an owned descriptor.
unsafe impl Send for Ring {}

/// What a window of the ring says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// Every record of the window was read.
    Complete,
    /// Records of the window were overwritten (or the window is not within
    /// the ring): nothing is known about it but the bytes it spans.
    Lost,
}

impl Ring {
    /// Opens a switch event on the calling thread (`pid` 0, any CPU) and maps
    /// its ring read-only. The negative errno of `perf_event_open` or `mmap`
    /// on failure (`-EACCES` under a stricter `perf_event_paranoid`,
    /// `-ENOSYS`/`-EPERM` under seccomp, `-EMFILE`, `-EPERM` when the user's
    /// perf memory budget is spent).
    pub fn open() -> Result<Ring, Error> {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: PERF_ATTR_SIZE,
            config: PERF_COUNT_SW_DUMMY,
            sample_type: SAMPLE_TYPE,
            flags: ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV | ATTR_SAMPLE_ID_ALL | ATTR_USE_CLOCKID | ATTR_CONTEXT_SWITCH,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        // SAFETY: perf_event_open reads `attr` (valid, `size` bytes) and
        // returns a new descriptor or -1; pid 0 = this thread, cpu -1 = any.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0 as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(Error::last_os());
        }
        // SAFETY: a descriptor the kernel just gave us, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let page = page_size()?;
        let len = page * (1 + DATA_PAGES);
        // SAFETY: maps the event's ring (metadata page + data pages) read-only:
        // overwrite mode. Fails cleanly (MAP_FAILED) on any refusal.
        let p = unsafe { libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os());
        }
        let map = RingMapping { base: p as *mut u8, len };
        // SAFETY: the first page of the mapping is the kernel's metadata page.
        let meta = unsafe { &*(map.base as *const MmapPage) };
        // Relaxed: written by the kernel before mmap returned.
        let (off, size) = (meta.data_offset.load(Ordering::Relaxed), meta.data_size.load(Ordering::Relaxed));
        let want = (page * DATA_PAGES) as u64;
        // Kernels that do not fill these in put the data right after the page.
        let (off, size) = if size == 0 { (page as u64, want) } else { (off, size) };
        if size != want || off as usize + size as usize > len || !off.is_multiple_of(8) {
            return Err(Error::INVAL);
        }
        Ok(Ring { map, fd, data_offset: off as usize, data_size: size })
    }

    /// The ring's `data_head`: the word the hot path loads.
    pub fn head_ptr(&self) -> *const AtomicU64 {
        &self.meta().data_head
    }

    fn meta(&self) -> &MmapPage {
        // SAFETY: the mapping starts with the metadata page and lives as long as self.
        unsafe { &*(self.map.base as *const MmapPage) }
    }

    /// The head now, with acquire (step 1).
    pub fn head(&self) -> u64 {
        // Acquire: step 1 of the reader protocol.
        self.meta().data_head.load(Ordering::Acquire)
    }

    /// The event's descriptor (for the fork child's bookkeeping).
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// In a fork child: the child has no copy of the mapping (the kernel maps
    /// perf rings `VM_DONTCOPY`), so it must not be unmapped here (the
    /// addresses may be reused); only the inherited descriptor is closed.
    pub fn forget_after_fork(self) {
        let Ring { map, fd, .. } = self;
        core::mem::forget(map);
        drop(fd);
    }

    /// Reads the switch records of `[from, to)` (the reader protocol in the
    /// module doc), handing each to `f` in order. Records of other types are
    /// skipped.
    pub fn read(&self, from: u64, to: u64, mut f: impl FnMut(&SwitchRecord)) -> Window {
        let head = self.head(); // step 1
        if to < from || to > head || head - from > self.data_size {
            return Window::Lost; // step 2
        }
        let mut pos = from;
        let mut buf = [0u64; MAX_RECORD / 8];
        while pos < to {
            // Step 3: the header word, then the rest of the record.
            buf[0] = self.word(pos);
            let h = header_of(buf[0]);
            let size = h.size as usize;
            if size < 8 || !size.is_multiple_of(8) || size > MAX_RECORD || pos + size as u64 > to {
                return Window::Lost;
            }
            for (k, w) in buf.iter_mut().enumerate().take(size / 8).skip(1) {
                *w = self.word(pos + 8 * k as u64);
            }
            if h.type_ == PERF_RECORD_SWITCH && size >= core::mem::size_of::<SwitchRecord>() {
                let r =
                    SwitchRecord { header: h, pid: buf[1] as u32, tid: (buf[1] >> 32) as u32, time: buf[2], cpu: buf[3] as u32, res: (buf[3] >> 32) as u32 };
                f(&r);
            }
            pos += size as u64;
        }
        // Step 4. Acquire fence: the reload below comes after every load of
        // the copy (the kernel side is step 1's; see the module doc on why a
        // same-thread reload sees every write that could overwrite the copy).
        fence(Ordering::Acquire);
        let head2 = self.meta().data_head.load(Ordering::Relaxed);
        if head2 - from > self.data_size {
            return Window::Lost;
        }
        Window::Complete
    }

    /// The 8-byte word at ring position `pos` (a multiple of 8).
    fn word(&self, pos: u64) -> u64 {
        let off = self.data_offset + (pos & (self.data_size - 1)) as usize;
        // SAFETY: `off` lies inside the data area (masked by its size, a power
        // of two, checked at open) and is 8-byte aligned (records are).
        let w = unsafe { &*(self.map.base.add(off) as *const AtomicU64) };
        // Relaxed: step 3, an opaque copy validated by step 4.
        w.load(Ordering::Relaxed)
    }
}

/// The record header held in a ring's first word of a record (little endian:
/// type in the low 32 bits, then misc, then size).
fn header_of(w: u64) -> RecordHeader {
    RecordHeader { type_: w as u32, misc: (w >> 32) as u16, size: (w >> 48) as u16 }
}

/// The system's page size: the unit of the event's ring mapping; `EINVAL`
/// should the system not say.
pub fn page_size() -> Result<usize, Error> {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        Ok(p as usize)
    } else {
        Err(Error::INVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_word_decodes_type_misc_and_size() {
        let w = (32u64 << 48) | ((MISC_SWITCH_OUT as u64) << 32) | PERF_RECORD_SWITCH as u64;
        let h = header_of(w);
        assert_eq!((h.type_, h.misc, h.size), (PERF_RECORD_SWITCH, MISC_SWITCH_OUT, 32));
    }
}
