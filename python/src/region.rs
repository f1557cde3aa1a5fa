//! `Region`: one opened region or flushed image (the library's `Mapping`,
//! read-only and validated when opened), what it describes (IDs, slots,
//! threads, counters, calibration) and its samples as numpy arrays.
//! Every read runs with the interpreter released (`Python::detach`), so
//! other Python threads run meanwhile.

use crate::columns::{read_view, Clock, Filter};
use crate::errors::to_py;
use latte::error::Error;
use latte::layout::{LATTE_MODE_FAST, LATTE_MODE_HARD, LATTE_MODE_MID, LATTE_REGION_FLUSHED, LATTE_SLOT_CLOSED};
use latte::reader::{Mapping, Recording, View};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::{Arc, Mutex, OnceLock};

/// One ID as `Region.ids` gives it: token, name as text, reserved, bytes.
type IdEntry = (u32, String, bool, Vec<u8>);

/// Window (ms) of the TSC rate measured here when the producer published
/// none (as the `latte` command does).
const MEASURE_WINDOW_MS: u64 = 50;

/// An opened region or flushed image.
#[pyclass(module = "latte._latte", frozen)]
pub struct Region {
    target: String,
    /// None once closed. Readers take a reference and read without the
    /// lock; the mapping goes away when the last of them is done.
    mapping: Mutex<Option<Arc<Mapping>>>,
    /// The producer's TSC rate, else one measured here once.
    cycles_per_ns: OnceLock<f64>,
    /// A recording's trailer (`latte record`'s file), read at open.
    recording: Option<Recording>,
}

impl Region {
    /// The mapping, or `latte.Error` once the region was closed. A live
    /// region that grew since it was mapped is mapped again first (cursors
    /// are per slot index, so they carry over).
    pub fn mapping(&self) -> PyResult<Arc<Mapping>> {
        let mut m = self.mapping.lock().unwrap_or_else(|p| p.into_inner());
        let cur = m.clone().ok_or_else(|| crate::errors::Error::new_err(format!("{}: the region was closed", self.target)))?;
        match cur.grown() {
            Ok(Some(next)) => {
                let next = Arc::new(next);
                *m = Some(next.clone());
                Ok(next)
            }
            Ok(None) => Ok(cur),
            Err(e) => Python::attach(|py| Err(crate::errors::to_py(py, e, &self.target))),
        }
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    /// Samples a recording's followed rings lost (overwritten before
    /// `latte record` could read them), of the IDs and thread `filter`
    /// wants: its file's slots hold only what was read. 0 for a region or
    /// an image.
    pub fn recording_lost(&self, view: &View, filter: &Filter) -> Result<u64, Error> {
        let Some(rec) = &self.recording else { return Ok(0) };
        let by_token = rec.lost_by_token(filter.thread);
        let mut lost = 0u64;
        for id in view.ids()? {
            let wanted = match &filter.tokens {
                Some(t) => t.contains(&id.token),
                None => !latte::name::is_reserved_name(latte::name::name_bytes(&id.name)),
            };
            if wanted {
                lost = lost.saturating_add(by_token.get(id.token as usize).copied().unwrap_or(0));
            }
        }
        Ok(lost)
    }

    /// Whether this is a recording (`latte record`'s file).
    pub fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    /// The clock of the samples' times (measures the TSC rate on first use
    /// when the producer published none: call without the interpreter).
    pub fn clock(&self, m: &Mapping) -> Clock {
        let v = m.view();
        let cycles_per_ns = *self.cycles_per_ns.get_or_init(|| {
            let c = v.calibration().cycles_per_ns;
            if c > 0.0 {
                c
            } else {
                latte::measure_cycles_per_ns(MEASURE_WINDOW_MS)
            }
        });
        Clock { cycles_per_ns, anchor_tsc: v.anchor_tsc(), anchor_realtime_ns: v.anchor_realtime_ns() }
    }
}

/// Opens a region (`/name`, or `name`) or a flushed image (a path), by the
/// rule of the `latte` command: a target with no '/' after its first
/// character is a region name.
#[pyfunction]
pub fn open_target(py: Python<'_>, target: String) -> PyResult<Region> {
    let t = target.clone();
    let m = py.detach(move || Mapping::open_any(&t)).map_err(|e| to_py(py, e, &target))?;
    let recording = py.detach(|| m.recording()).map_err(|e| to_py(py, e, &format!("{target}: its recording trailer")))?;
    Ok(Region { target, mapping: Mutex::new(Some(Arc::new(m))), cycles_per_ns: OnceLock::new(), recording })
}

#[pymethods]
impl Region {
    /// What was opened, as given.
    #[getter(target)]
    fn target_py(&self) -> &str {
        &self.target
    }

    /// "recording" for a `latte record` file, "image" for a flushed image,
    /// "region" for a shared-memory region.
    #[getter]
    fn kind(&self) -> PyResult<&'static str> {
        Ok(if self.recording.is_some() {
            "recording"
        } else if self.mapping()?.view().flags() & LATTE_REGION_FLUSHED != 0 {
            "image"
        } else {
            "region"
        })
    }

    /// A recording's trailer, its JSON document as the file holds it
    /// (docs/recording.md); None for a region or an image.
    #[getter]
    fn recording_json(&self) -> Option<&str> {
        self.recording.as_ref().map(|r| r.json.as_str())
    }

    /// The producer's pid, as the region's header says.
    #[getter]
    fn producer_pid(&self) -> PyResult<u32> {
        Ok(self.mapping()?.view().producer_pid())
    }

    /// Whether the producer still runs (it holds its region's liveness
    /// lock); False for a flushed image.
    #[getter]
    fn producer_alive(&self) -> PyResult<bool> {
        Ok(self.mapping()?.producer_alive())
    }

    /// Every published ID: (token, name, reserved, bytes) tuples (`IdEntry`), by
    /// token: the name as text (`latte::name::name_text`, which tells every
    /// name apart) and as its bytes. Reserved IDs (`latte.calibrate`) are
    /// latte's own.
    fn ids(&self, py: Python<'_>) -> PyResult<Vec<IdEntry>> {
        let m = self.mapping()?;
        let ids = py.detach(|| m.view().ids()).map_err(|e| to_py(py, e, &self.target))?;
        Ok(ids
            .iter()
            .map(|i| {
                let b = latte::name::name_bytes(&i.name);
                (i.token, latte::name::name_text(b), latte::name::is_reserved_name(b), b.to_vec())
            })
            .collect())
    }

    /// Every assigned slot ((thread, ID) ring): a dict of its index, ID
    /// token, OS thread id, the producer's thread index, state ("live" or
    /// "closed": its thread exited) and samples written to it so far.
    fn slots<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let m = self.mapping()?;
        let slots = py.detach(|| m.view().slots()).map_err(|e| to_py(py, e, &self.target))?;
        let out = PyList::empty(py);
        for s in slots {
            let d = PyDict::new(py);
            d.set_item("index", s.index)?;
            d.set_item("id", s.id_token)?;
            d.set_item("thread", s.os_tid)?;
            d.set_item("thread_index", s.thread_idx)?;
            d.set_item("state", if s.state == LATTE_SLOT_CLOSED { "closed" } else { "live" })?;
            d.set_item("written", s.write_idx)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// The producer's counters (spans dropped and why, slots, threads).
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.mapping()?.view().counters();
        let d = PyDict::new(py);
        d.set_item("overflow_starts", c.overflow_starts)?;
        d.set_item("orphan_stops", c.orphan_stops)?;
        d.set_item("unfit_id_drops", c.unfit_id_drops)?;
        d.set_item("no_slot_drops", c.no_slot_drops)?;
        d.set_item("slot_reuses", c.slot_reuses)?;
        d.set_item("reuse_discarded", c.reuse_discarded)?;
        d.set_item("late_drops", c.late_drops)?;
        d.set_item("threads_seen", c.threads_seen)?;
        d.set_item("ids_used", c.ids_used)?;
        d.set_item("slots_used", c.slots_used)?;
        Ok(d)
    }

    /// The calibration the producer published: its TSC rate (0.0 when it
    /// published none), whether it calibrated, and its overheads in cycles
    /// (`overheads[start mode][stop mode]`, modes fast, mid, hard; `pulse`).
    fn calibration<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.mapping()?.view().calibration();
        let d = PyDict::new(py);
        d.set_item("cycles_per_ns", c.cycles_per_ns)?;
        d.set_item("calibrated", c.calibrated)?;
        let modes = [LATTE_MODE_FAST, LATTE_MODE_MID, LATTE_MODE_HARD];
        let rows: Vec<Vec<f64>> = modes.iter().map(|&start| modes.iter().map(|&stop| c.pair(start, stop)).collect()).collect();
        d.set_item("overheads", rows)?;
        d.set_item("pulse", c.pulse())?;
        Ok(d)
    }

    /// The clock of the samples' times: `cycles_per_ns` (the producer's,
    /// else measured here over 50 ms) and the anchor (a TSC and the
    /// CLOCK_REALTIME ns of the same moment).
    fn clock_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.mapping()?;
        let c = py.detach(|| self.clock(&m));
        let d = PyDict::new(py);
        d.set_item("cycles_per_ns", c.cycles_per_ns)?;
        // Where the figure comes from: the producer published it, or it
        // was measured here (a producer that never calibrated).
        let published = m.view().calibration().cycles_per_ns > 0.0;
        d.set_item("source", if published { "producer" } else { "measured here" })?;
        d.set_item("anchor_tsc", c.anchor_tsc)?;
        d.set_item("anchor_realtime_ns", c.anchor_realtime_ns)?;
        Ok(d)
    }

    /// The region's geometry (capacities and size in bytes).
    fn geometry<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.mapping()?;
        let v = m.view();
        let d = PyDict::new(py);
        d.set_item("id_limit", v.id_limit())?;
        d.set_item("slot_capacity", v.slot_capacity())?;
        d.set_item("samples_per_slot", v.geo().samples_per_slot)?;
        d.set_item("size", v.published_size())?;
        Ok(d)
    }

    /// Every sample now in the rings of the IDs `tokens` (None: every ID
    /// but the reserved ones) and of OS thread `thread` (None: every
    /// thread), as a dict of numpy arrays and the read's accounting (see
    /// `arrays::to_dict`; a recording's `lost` adds what its followed
    /// rings lost).
    #[pyo3(signature = (tokens=None, thread=None))]
    fn samples<'py>(&self, py: Python<'py>, tokens: Option<Vec<u32>>, thread: Option<u32>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.mapping()?;
        let filter = Filter { tokens, thread };
        let cols = py
            .detach(|| -> Result<_, Error> {
                let clock = self.clock(&m);
                let v = m.view();
                let mut cols = read_view(&v, &filter, &mut Vec::new(), &clock)?;
                cols.lost = cols.lost.saturating_add(self.recording_lost(&v, &filter)?);
                Ok(cols)
            })
            .map_err(|e| to_py(py, e, &self.target))?;
        crate::arrays::to_dict(py, cols)
    }

    /// Unmaps the region now (reads in progress finish first); every later
    /// call raises `latte.Error`.
    fn close(&self) {
        self.mapping.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.mapping.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }
}
