use super::*;
use crate::counters::latte_counters;
use crate::error::Error;
use crate::layout::LATTE_OVERHEADS;
use crate::reader::{latte_cursor, latte_raw_sample, latte_slot_info, Mapping, NameCursor, ReadMode, View, LATTE_READER_MIN_INTERVAL_NS};
use core::ffi::{c_char, c_int, CStr};
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A read-only view of a region opened by name or a flushed file.
#[allow(non_camel_case_types)]
pub struct latte_reader {
    /// The mapping (remapped when the region grew) and the names read so
    /// far; a reader may be used from several threads.
    state: Mutex<ReaderState>,
    /// Pacing of `latte_reader_read` (ns; 0 = off). Relaxed: a setting read
    /// on its own, ordering nothing else.
    min_interval_ns: AtomicU64,
}

struct ReaderState {
    map: Mapping,
    /// Where the names below end in the region's records.
    names_at: NameCursor,
    /// The names read so far, by token.
    names: Vec<Vec<u8>>,
}

impl ReaderState {
    /// Maps what the region grew by, and reads the names published since.
    fn catch_up(&mut self) -> Result<(), Error> {
        self.map.refresh()?;
        let mut new = Vec::new();
        self.map.view().ids_since(&mut self.names_at, &mut new)?;
        self.names.extend(new.into_iter().map(|i| i.name));
        Ok(())
    }
}

fn open_reader(r: Result<Mapping, Error>, out: *mut *mut latte_reader) -> c_int {
    match r {
        Ok(map) => {
            let state = ReaderState { map, names_at: NameCursor::default(), names: Vec::new() };
            // SAFETY: out was checked non-null by the caller.
            unsafe { *out = Box::into_raw(Box::new(latte_reader { state: Mutex::new(state), min_interval_ns: AtomicU64::new(LATTE_READER_MIN_INTERVAL_NS) })) };
            0
        }
        Err(e) => e.code(),
    }
}

impl latte_reader {
    fn state(&self) -> std::sync::MutexGuard<'_, ReaderState> {
        // A panic inside a call (caught at the boundary) leaves the state
        // usable: every field is valid on its own.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Opens the shared region `shm_name` read-only, validates it, and stores a
/// reader in `*out`. Errors: -ENOENT, -EACCES, LATTE_ERR_NOT_LATTE,
/// LATTE_ERR_VERSION, LATTE_ERR_TRUNCATED, LATTE_ERR_CORRUPT, -EINVAL;
/// -EMFILE when the process is out of descriptors (a reader holds one).
/// A process may hold any number of readers at once.
#[no_mangle]
pub extern "C" fn latte_reader_open(shm_name: *const c_char, out: *mut *mut latte_reader) -> c_int {
    guard(PANICKED, || {
        if shm_name.is_null() || out.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: checked non-null; NUL-terminated by contract.
        let n = unsafe { CStr::from_ptr(shm_name) }.to_bytes();
        open_reader(Mapping::open_shm(n), out)
    })
}

/// Opens a flushed image (a file) read-only, like `latte_reader_open`.
#[no_mangle]
pub extern "C" fn latte_reader_open_file(path: *const c_char, out: *mut *mut latte_reader) -> c_int {
    guard(PANICKED, || {
        if path.is_null() || out.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: checked non-null; NUL-terminated by contract.
        let p = unsafe { CStr::from_ptr(path) };
        use std::os::unix::ffi::OsStrExt;
        open_reader(Mapping::open_file(std::path::Path::new(std::ffi::OsStr::from_bytes(p.to_bytes()))), out)
    })
}

/// Closes a reader (NULL is ignored).
#[no_mangle]
pub extern "C" fn latte_reader_close(r: *mut latte_reader) {
    guard((), || {
        if !r.is_null() {
            // SAFETY: r came from Box::into_raw in latte_reader_open*.
            drop(unsafe { Box::from_raw(r) });
        }
    })
}

fn with_reader<R>(r: *const latte_reader, fallback: R, f: impl FnOnce(&View) -> R) -> R {
    with_reader_and(r, fallback, |rd| f(&rd.state().map.view()))
}

fn with_reader_and<R>(r: *const latte_reader, fallback: R, f: impl FnOnce(&latte_reader) -> R) -> R {
    if r.is_null() {
        return fallback;
    }
    // SAFETY: a reader from latte_reader_open*, not yet closed (contract).
    f(unsafe { &*r })
}

/// Sets how long (ns) `latte_reader_read` leaves a live slot alone after a
/// read through the same cursor returned every published sample
/// (LATTE_READER_MIN_INTERVAL_NS by default; 0 = look every time). Each
/// look at a slot's writer index takes its cache line from the recording
/// thread, which then waits for it at its next Stop; a reader polling back
/// to back would do that on nearly every sample. Returns 0 or -EINVAL.
#[no_mangle]
pub extern "C" fn latte_reader_set_min_interval(r: *mut latte_reader, ns: u64) -> c_int {
    guard(PANICKED, || {
        with_reader_and(r, -libc::EINVAL, |rd| {
            rd.min_interval_ns.store(ns, Ordering::Relaxed);
            0
        })
    })
}

/// Maps what the region grew by since the reader opened it or last caught
/// up (new chunks of slots and names), and reads the names published
/// since. `latte_reader_slots` and `latte_reader_id_count` do it too.
/// Returns 0 or a negative code.
#[no_mangle]
pub extern "C" fn latte_reader_refresh(r: *mut latte_reader) -> c_int {
    guard(PANICKED, || with_reader_and(r, -libc::EINVAL, |rd| rd.state().catch_up().map_or_else(|e| e.code(), |_| 0)))
}

/// Number of published IDs the reader can name (tokens are 0 .. count-1),
/// after catching up with the region (`latte_reader_refresh`); 0 for NULL.
#[no_mangle]
pub extern "C" fn latte_reader_id_count(r: *const latte_reader) -> u32 {
    guard(0, || {
        with_reader_and(r, 0, |rd| {
            let mut st = rd.state();
            let _ = st.catch_up();
            st.names.len() as u32
        })
    })
}

/// Writes the name of `token` into `buf` (NUL-terminated, cut to `len`
/// bytes); returns the name's whole length (so a caller whose buffer was
/// too small can ask again with a larger one) or a negative code. Names
/// are up to LATTE_MAX_NAME_LEN bytes.
#[no_mangle]
pub extern "C" fn latte_reader_id_name(r: *const latte_reader, token: u32, buf: *mut c_char, len: usize) -> c_int {
    guard(PANICKED, || {
        with_reader_and(r, -libc::EINVAL, |rd| {
            let mut st = rd.state();
            if token as usize >= st.names.len() {
                if let Err(e) = st.catch_up() {
                    return e.code();
                }
            }
            match st.names.get(token as usize) {
                // SAFETY: the caller gives a buffer of len bytes (or NULL).
                Some(n) => unsafe { fill_str(n, buf, len) },
                None => Error::Corrupt.code(),
            }
        })
    })
}

/// Whether ID `token` is reserved by latte itself (1) or a program's (0);
/// negative on error (-EINVAL for NULL or a token not below
/// `latte_reader_id_count`). Reserved IDs (`latte.calibrate`, the calibration's spans) are
/// left out of reports and traces; a raw reader sees their slots in
/// `latte_reader_slots` and tells them apart with this call.
#[no_mangle]
pub extern "C" fn latte_reader_id_is_reserved(r: *const latte_reader, token: u32) -> c_int {
    guard(PANICKED, || {
        with_reader_and(r, -libc::EINVAL, |rd| {
            let mut st = rd.state();
            if token as usize >= st.names.len() {
                let _ = st.catch_up();
            }
            match st.names.get(token as usize) {
                Some(n) => crate::name::is_reserved_name(n) as c_int,
                None => -libc::EINVAL,
            }
        })
    })
}

/// Lists the assigned slots into `out` (capacity `cap`), the count in
/// `*out_n`; -ERANGE when they do not fit.
#[no_mangle]
pub extern "C" fn latte_reader_slots(r: *const latte_reader, out: *mut latte_slot_info, cap: usize, out_n: *mut usize) -> c_int {
    guard(PANICKED, || {
        with_reader_and(r, -libc::EINVAL, |rd| {
            let mut st = rd.state();
            if let Err(e) = st.catch_up() {
                return e.code();
            }
            match st.map.view().slots() {
                // SAFETY: the caller gives a buffer of cap elements (or NULL).
                Ok(s) => unsafe { fill(&s, out, cap, out_n) },
                Err(e) => e.code(),
            }
        })
    })
}

/// Reads up to `cap` samples of slot `slot` newer than `*cursor` (start
/// with a zeroed cursor) into `out`, oldest first; `*out_n` gets the count.
/// The cursor advances and counts what was lost (overwritten before it
/// could be read). Never returns a torn or stale sample. Paced: after a
/// read that returned everything published in a live slot, reads through
/// that cursor within the reader's minimum interval return 0 samples
/// without looking (`latte_reader_set_min_interval`); a read cut short by
/// `cap` is followed at once.
#[no_mangle]
pub extern "C" fn latte_reader_read(
    r: *const latte_reader,
    slot: u32,
    cursor: *mut latte_cursor,
    out: *mut latte_raw_sample,
    cap: usize,
    out_n: *mut usize,
) -> c_int {
    guard(PANICKED, || {
        // Checked before the read: a read whose count cannot be told
        // moves no cursor.
        if cursor.is_null() || !outs_ok(out, cap, out_n) {
            return -libc::EINVAL;
        }
        with_reader_and(r, -libc::EINVAL, |rd| {
            let dst: &mut [core::mem::MaybeUninit<latte_raw_sample>] = if cap == 0 {
                &mut []
            } else {
                // SAFETY: out is writable for cap samples (contract; checked non-null).
                unsafe { core::slice::from_raw_parts_mut(out as *mut core::mem::MaybeUninit<latte_raw_sample>, cap) }
            };
            let pace = rd.min_interval_ns.load(Ordering::Relaxed);
            let mode = if pace == 0 { ReadMode::Live } else { ReadMode::Paced { min_interval_ns: pace } };
            // SAFETY: cursor checked non-null, owned by the caller.
            match rd.state().map.view().read_into(slot, unsafe { &mut *cursor }, dst, mode) {
                Ok(res) => {
                    // SAFETY: checked non-null.
                    unsafe { *out_n = res.read as usize };
                    0
                }
                Err(e) => e.code(),
            }
        })
    })
}

/// The producer's process-wide counters.
#[no_mangle]
pub extern "C" fn latte_reader_get_counters(r: *const latte_reader, out: *mut latte_counters) -> c_int {
    guard(PANICKED, || with_reader(r, -libc::EINVAL, |v| put_out(out, || Ok(v.counters()))))
}

/// What a region's header describes (geometry, producer, anchors, calibration).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct latte_region_info {
    pub producer_pid: u32,
    pub flags: u32,
    /// Most IDs the producer takes; 0 = no limit.
    pub id_capacity: u32,
    /// Slots the reader maps now (the region grows; `latte_reader_refresh`
    /// maps what it grew by).
    pub slot_capacity: u32,
    pub samples_per_slot: u32,
    pub display_unit: u32,
    /// Bytes of the region its producer has published.
    pub total_size: u64,
    pub anchor_tsc: u64,
    pub anchor_realtime_ns: u64,
    /// 0 until measured.
    pub cycles_per_ns: f64,
    /// 1 once calibrated.
    pub calibrated: u32,
    pub _pad: u32,
    /// Overhead in cycles per [start mode][stop mode], then the pulse.
    pub overhead: [f64; LATTE_OVERHEADS as usize],
}

/// Describes the region.
#[no_mangle]
pub extern "C" fn latte_reader_get_info(r: *const latte_reader, out: *mut latte_region_info) -> c_int {
    guard(PANICKED, || {
        with_reader(r, -libc::EINVAL, |v| {
            let c = v.calibration();
            let i = latte_region_info {
                producer_pid: v.producer_pid(),
                flags: v.flags(),
                id_capacity: v.id_limit(),
                slot_capacity: v.slot_capacity().min(u32::MAX as u64) as u32,
                samples_per_slot: v.geo().samples_per_slot,
                display_unit: v.display_unit(),
                total_size: v.published_size(),
                anchor_tsc: v.anchor_tsc(),
                anchor_realtime_ns: v.anchor_realtime_ns(),
                cycles_per_ns: c.cycles_per_ns,
                calibrated: c.calibrated as u32,
                _pad: 0,
                overhead: c.overhead,
            };
            put_out(out, || Ok(i))
        })
    })
}
