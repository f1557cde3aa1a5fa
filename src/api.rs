//! The Rust face: recording, reading back and reporting for Rust callers,
//! over the same engine, rings and report as the C and C++ faces (a span
//! recorded here is a span `latte stats` and `Latte::Snapshot` see).
//!
//! ```
//! use latte::{Mode, Span};
//!
//! fn work() -> u64 { (0..100u64).sum() }
//!
//! for _ in 0..1000 {
//!     let _span = Span::start(c"doc.work"); // recorded when dropped
//!     work();
//! }
//! let cycles = Span::start_with(c"doc.hard", Mode::Hard).stop();
//! assert!(cycles < 1 << 40);
//! for _ in 0..10 {
//!     latte::pulse!(c"doc.tick"); // cycles since this site's previous pulse
//! }
//! assert_eq!(latte::snapshot(c"doc.work").unwrap().len(), 1000);
//! assert_eq!(latte::snapshot(c"doc.tick").unwrap().len(), 9);
//! ```

use crate::error::Error;
use crate::layout::*;
use crate::reader::Calibration;
use crate::report::{render_classic, rows_of_view};
use core::cell::RefCell;
use core::ffi::CStr;
use core::marker::PhantomData;

/// Which timer instructions a span's ends use (the original Latte's Fast,
/// Mid and Hard).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// `rdtsc`: cheapest; the CPU may move work across it.
    #[default]
    Fast,
    /// `rdtscp`: waits for earlier instructions at the read.
    Mid,
    /// `lfence; rdtscp; lfence`: no instruction crosses the read.
    Hard,
}

impl Mode {
    fn raw(self) -> latte_mode {
        match self {
            Mode::Fast => LATTE_MODE_FAST,
            Mode::Mid => LATTE_MODE_MID,
            Mode::Hard => LATTE_MODE_HARD,
        }
    }
}

/// An open span on the calling thread, recorded under its ID when it is
/// dropped or `stop`ped.
///
/// Spans nest: a thread's open spans form a stack (at most 64 deep; a Start
/// beyond that is ignored and counted), and closing one closes the
/// innermost open span of the thread, as the C `latte_stop` does; drop
/// guards in the reverse order of their starts (the natural scope order).
/// A span belongs to its thread (it is neither `Send` nor `Sync`):
///
/// ```compile_fail
/// let span = latte::Span::start(c"x");
/// std::thread::spawn(move || drop(span)); // a span cannot change threads
/// ```
#[must_use = "a span is recorded when dropped: bind it (`let _span = ...`)"]
#[derive(Debug)]
pub struct Span {
    stop_mode: latte_mode,
    _thread: PhantomData<*const ()>,
}

impl Span {
    /// Opens a span under `id` timed with `Mode::Fast` at both ends.
    #[inline]
    pub fn start(id: &'static CStr) -> Span {
        Span::start_with(id, Mode::Fast)
    }

    /// Opens a span under `id`, its ends timed with `mode`.
    #[inline]
    pub fn start_with(id: &'static CStr, mode: Mode) -> Span {
        let t = crate::recorder::current();
        if t.is_null() {
            crate::recorder::note_refused_start();
        } else {
            // SAFETY: the calling thread's own state; `id` is a static
            // NUL-terminated string.
            unsafe { crate::recorder::start(&mut *t, id.as_ptr(), mode.raw()) };
        }
        Span { stop_mode: mode.raw(), _thread: PhantomData }
    }

    /// Closes the span now and returns its duration in cycles.
    #[inline]
    pub fn stop(self) -> u64 {
        let d = self.close();
        core::mem::forget(self);
        d
    }

    #[inline]
    fn close(&self) -> u64 {
        let now = crate::tsc::read_stop(self.stop_mode);
        let t = crate::recorder::current();
        if t.is_null() {
            crate::recorder::take_refused_start();
            return 0;
        }
        // SAFETY: the calling thread's own state (a Span never leaves its thread).
        crate::recorder::stop_at(unsafe { &mut *t }, self.stop_mode, now)
    }
}

impl Drop for Span {
    #[inline]
    fn drop(&mut self) {
        self.close();
    }
}

/// A pulse call site's state on one thread: what `pulse!` keeps in a
/// thread-local of each call site. Not used directly.
#[doc(hidden)]
pub struct PulseSite(RefCell<latte_pulse_site>);

impl PulseSite {
    #[doc(hidden)]
    pub const fn new() -> PulseSite {
        PulseSite(RefCell::new(latte_pulse_site::new()))
    }
}

impl Default for PulseSite {
    fn default() -> Self {
        PulseSite::new()
    }
}

/// Records a pulse from `site` (see `pulse!`). A pulse from a signal
/// handler that interrupted the same site's pulse on this thread is
/// dropped.
#[doc(hidden)]
#[inline]
pub fn pulse_at(site: &PulseSite, id: &'static CStr) {
    let Ok(mut s) = site.0.try_borrow_mut() else { return };
    let t = crate::recorder::current();
    if t.is_null() {
        crate::recorder::note_unavailable();
    } else {
        // SAFETY: the calling thread's own state and site; `id` is static.
        unsafe { crate::recorder::pulse(&mut *t, &mut s, id.as_ptr()) };
    }
}

/// A pulse: records, under the ID, the cycles since this call site's
/// previous pulse on this thread (the first call only primes the site), as
/// the original Latte's `LATTE_PULSE`.
#[macro_export]
macro_rules! pulse {
    ($id:expr) => {{
        ::std::thread_local! {
            static LATTE_PULSE_SITE: $crate::PulseSite = const { $crate::PulseSite::new() };
        }
        LATTE_PULSE_SITE.with(|site| $crate::pulse_at(site, $id));
    }};
}

/// The durations (cycles) recorded under `id` in this process, every
/// thread, at most a ring's capacity per thread (the newest), slot by slot.
/// Empty for an ID never recorded.
pub fn snapshot(id: &CStr) -> Result<Vec<u64>, Error> {
    let mut raw = Vec::new();
    // SAFETY: a NUL-terminated string.
    unsafe { crate::extract::snapshot_into(id.as_ptr(), &mut raw) }?;
    Ok(raw.iter().map(|r| r.decode().duration).collect())
}

/// Makes this process record into the POSIX shared-memory object `name`
/// (`/` and up to [`LATTE_MAX_REGION_NAME`](crate::shm::LATTE_MAX_REGION_NAME)
/// more bytes), which other processes can read live
/// (`Mapping::open_shm`, `latte stats`). `EEXIST` when the name belongs to
/// a live producer or to something that is not a latte region (a region
/// whose producer is gone is replaced). Called after spans were recorded,
/// it moves the private region into the object with everything in it
/// (threads recording meanwhile wait until it is in place; `EBUSY` for
/// capacities other than the region's, see `latte_init_shared_region`).
///
/// ```
/// let name = format!("/latte-doc-{}", std::process::id());
/// latte::init_shared_region(&name).unwrap();
/// latte::Span::start(c"doc.shared").stop();
/// let m = latte::Mapping::open_shm(name.as_bytes()).unwrap();
/// let v = m.view();
/// let ids = v.ids().unwrap();
/// assert!(ids.iter().any(|i| latte::name::name_bytes(&i.name) == b"doc.shared"));
/// latte::shm::unlink(name.as_bytes()).unwrap();
/// ```
pub fn init_shared_region(name: &str) -> Result<(), Error> {
    crate::recorder::install_shared(name.as_bytes(), &crate::region::latte_region_config::default())
}

/// A shared region's capacities, permissions and what to do when its name
/// is taken (`LATTE_IF_TAKEN_REPLACE_STALE`, the default, or
/// `LATTE_IF_TAKEN_FAIL`), for `init_shared_region_with`: the C
/// `latte_region_config`; a zero field takes its default.
pub use crate::region::latte_region_config as RegionConfig;
pub use crate::region::{LATTE_IF_TAKEN_FAIL, LATTE_IF_TAKEN_REPLACE_STALE};

/// `init_shared_region` with capacities, permissions and what to do when
/// the name is taken; `EINVAL` for a value out of range.
///
/// ```
/// use latte::{RegionConfig, LATTE_IF_TAKEN_FAIL};
/// let name = format!("/latte-doc-with-{}", std::process::id());
/// // 8 rings of 1,024 samples; a name taken by anything, even a region
/// // whose producer is gone, is refused (EEXIST).
/// let cfg = RegionConfig { slot_capacity: 8, samples_per_slot: 1024, if_taken: LATTE_IF_TAKEN_FAIL, ..Default::default() };
/// latte::init_shared_region_with(&name, &cfg).unwrap();
/// latte::Span::start(c"doc.with").stop();
/// let m = latte::Mapping::open_shm(name.as_bytes()).unwrap();
/// assert!(m.view().ids().unwrap().iter().any(|i| latte::name::name_bytes(&i.name) == b"doc.with"));
/// // One shared region per process: a second call is refused.
/// assert!(latte::init_shared_region_with(&name, &RegionConfig::default()).is_err());
/// latte::shm::unlink(name.as_bytes()).unwrap();
/// ```
pub fn init_shared_region_with(name: &str, config: &RegionConfig) -> Result<(), Error> {
    crate::recorder::install_shared(name.as_bytes(), config)
}

/// This process's report, the text of the original Latte's `DumpToStream`
/// without its colour escapes (plain text): one row per ID. Calibrates
/// first (a few milliseconds, on the calling thread) when times or
/// calibrated figures are asked. `own_report_with` gives the coloured bytes.
///
/// ```
/// latte::Span::start(c"doc.report").stop();
/// let text = latte::own_report(latte::layout::LATTE_UNIT_CYCLE, latte::layout::LATTE_DATA_RAW).unwrap();
/// assert!(text.contains("doc.report"));
/// ```
pub fn own_report(unit: latte_unit, data: latte_data) -> Result<String, Error> {
    own_report_with(unit, data, false)
}

/// `own_report`, with the original's gray borders (ANSI escapes) when
/// `color`: exactly the bytes of the original's `DumpToStream`.
pub fn own_report_with(unit: latte_unit, data: latte_data, color: bool) -> Result<String, Error> {
    if unit == LATTE_UNIT_TIME || data == LATTE_DATA_CALIBRATED {
        // A calibration that fails leaves the overheads at 0: the report
        // then shows the figures uncorrected.
        let _ = crate::calibrate::run_native();
    }
    let view = match crate::extract::own_view() {
        Some(v) => v,
        None => return Ok(render_classic(&[], unit, data, &Calibration::default(), color)),
    };
    let cal = view.calibration();
    Ok(render_classic(&rows_of_view(&view, data, &cal)?, unit, data, &cal, color))
}
