//! `Follower`: the new samples of a region at each poll, through the
//! library's one follower of rings over time (`latte::follow::Follower`,
//! what `latte record` follows with): per ring and owner, samples returned
//! plus samples lost equal the samples its owners wrote while followed,
//! owners that came and went between two polls included (counted lost in
//! the ring's owner seen last).

use crate::columns::{Clock, Columns, Filter};
use crate::errors::to_py;
use crate::region::Region;
use latte::error::Error;
use latte::follow::{FollowOptions, Follower as Rings, Incarnation};
use latte::reader::{latte_raw_sample, View};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;

/// What a follower has done so far.
struct State {
    rings: Rings,
    /// Samples read at the follower's start (the first look of a follower
    /// that skips the past), returned by the first poll.
    early: Columns,
    /// A recording's loss is still to be counted (by the first poll of a
    /// follower from the start).
    recording_due: bool,
    /// What the recording's followed rings lost, counted by that poll.
    recording_lost: u64,
    /// The figures of the wanted incarnations at the last poll.
    read: u64,
    lost: u64,
    recorded: u64,
}

impl State {
    /// Sums the figures of the incarnations `filter` wants.
    fn figures(&mut self, v: &View, filter: &Filter) -> Result<(), Error> {
        let hidden = hidden_tokens(v)?;
        let (mut read, mut lost, mut recorded) = (0u64, self.recording_lost, self.recording_lost);
        for i in self.rings.incarnations().iter().filter(|i| filter.wants_owner(i.id_token, i.os_tid, &hidden)) {
            read += i.read;
            lost += i.lost;
            recorded += i.recorded();
        }
        (self.read, self.lost, self.recorded) = (read, lost, recorded);
        Ok(())
    }
}

/// Per ID token: a reserved one (calibration's), never returned unless asked for.
fn hidden_tokens(v: &View) -> Result<Vec<bool>, Error> {
    Ok(v.ids()?.iter().map(|i| latte::name::is_reserved_name(latte::name::name_bytes(&i.name))).collect())
}

/// Looks at every ring now, appending what the wanted owners wrote to
/// `cols` (the first error of a column kept).
fn look_all(rings: &mut Rings, v: &View, filter: &Filter, clock: &Clock, cols: &mut Columns) -> Result<(), Error> {
    let mut hidden = hidden_tokens(v)?;
    let mut failed = Ok(());
    let mut sink = |i: &Incarnation, raw: &[latte_raw_sample]| {
        if failed.is_err() || raw.is_empty() {
            return;
        }
        if i.id_token as usize >= hidden.len() {
            // An ID registered since they were listed.
            match hidden_tokens(v) {
                Ok(h) => hidden = h,
                Err(e) => failed = Err(e),
            }
        }
        if failed.is_ok() && filter.wants_owner(i.id_token, i.os_tid, &hidden) {
            failed = cols.push(raw, i.id_token, i.os_tid, clock);
        }
    };
    rings.drain(v, &mut sink)?;
    failed
}

/// Follows a region: `poll` returns the samples written since the
/// previous poll.
#[pyclass(module = "latte._latte", frozen)]
pub struct Follower {
    region: Py<Region>,
    filter: Filter,
    state: Mutex<State>,
}

#[pymethods]
impl Follower {
    /// A follower of `region`'s IDs `tokens` (None: all but the reserved
    /// ones) and OS thread `thread` (None: all). With `from_start` its first
    /// poll returns what the rings hold already; otherwise it starts where
    /// each ring's writer is now.
    #[new]
    #[pyo3(signature = (region, tokens=None, thread=None, from_start=true))]
    fn new(py: Python<'_>, region: Py<Region>, tokens: Option<Vec<u32>>, thread: Option<u32>, from_start: bool) -> PyResult<Follower> {
        let filter = Filter { tokens, thread };
        let mut rings = Rings::new(FollowOptions { from_start, ..FollowOptions::default() });
        let mut early = Columns::default();
        if !from_start {
            // Where each ring's writer is now: following begins here.
            let r = region.get();
            let m = r.mapping()?;
            let clock = r.clock(&m);
            py.detach(|| look_all(&mut rings, &m.view(), &filter, &clock, &mut early)).map_err(|e| to_py(py, e, r.target()))?;
        }
        let st = State { rings, early, recording_due: from_start, recording_lost: 0, read: 0, lost: 0, recorded: 0 };
        Ok(Follower { region, filter, state: Mutex::new(st) })
    }

    /// The samples written since the previous poll, as `Region.samples`
    /// returns them (`read` and `lost` of this poll).
    fn poll<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.region.get();
        let m = r.mapping()?;
        // The state is locked without the interpreter and released before
        // it is taken back: a thread waiting for the lock never holds the
        // interpreter that this one needs to return.
        let cols = py
            .detach(|| -> Result<_, Error> {
                let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                let st = &mut *st;
                let v = m.view();
                let clock = r.clock(&m);
                let (read0, lost0) = (st.read, st.lost);
                let mut cols = std::mem::take(&mut st.early);
                look_all(&mut st.rings, &v, &self.filter, &clock, &mut cols)?;
                if std::mem::take(&mut st.recording_due) {
                    // What the recording's followed rings lost: written
                    // before the file's samples, never in its slots.
                    st.recording_lost = r.recording_lost(&v, &self.filter)?;
                }
                st.figures(&v, &self.filter)?;
                // This poll's: what the figures grew by (the samples read
                // at the start are the first poll's).
                cols.lost = st.lost - lost0;
                debug_assert_eq!(cols.read, st.read - read0);
                Ok(cols)
            })
            .map_err(|e| to_py(py, e, r.target()))?;
        crate::arrays::to_dict(py, cols)
    }

    /// Samples returned by every poll so far.
    #[getter]
    fn read(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).read
    }

    /// Samples overwritten before a poll reached them, so far.
    #[getter]
    fn lost(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).lost
    }

    /// Samples the followed rings' owners wrote while followed (from the
    /// rings' start, or from when a follower that skips the past began), up
    /// to where the polls have reached, from the writers' own counts: what
    /// was read, and what was lost (overwritten before a poll reached it,
    /// or written by owners that came and went between two polls).
    #[getter]
    fn recorded(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).recorded
    }
}
