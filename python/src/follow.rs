//! `Follower`: the new samples of a region at each poll, from one reader
//! cursor per slot (the ring protocol's own: what `latte watch` keeps),
//! with the accounting of the `latte` command: per slot, samples returned
//! plus samples lost (overwritten before a poll reached them) equal the
//! samples the producer wrote up to where the polls reached.

use crate::columns::{read_view, Filter};
use crate::errors::to_py;
use crate::region::Region;
use latte::error::Error;
use latte::reader::latte_cursor;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;

/// What a follower has done so far.
#[derive(Default)]
struct State {
    /// One cursor per slot, by slot index.
    cursors: Vec<latte_cursor>,
    /// Per slot: the position its cursor started from (0, or where the
    /// ring's writer was when a follower that skips the past began), and
    /// the generation it belongs to.
    start: Vec<(u32, u64)>,
    /// Samples the cursors of slots since handed to a new owner reached
    /// (read + lost) in their previous owners' generations.
    earlier: u64,
    read: u64,
    lost: u64,
    /// A recording's loss is still to be counted (by the first poll of a
    /// follower from the start).
    recording_due: bool,
}

impl State {
    /// Samples the producer wrote that this follower accounts for: every
    /// cursor's position less where it started.
    fn recorded(&self) -> u64 {
        let now: u64 = self
            .cursors
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (g, s) = self.start.get(i).copied().unwrap_or_default();
                if c.generation == g {
                    c.next - s.min(c.next)
                } else {
                    c.next
                }
            })
            .sum();
        self.earlier + now
    }

    /// Before a poll: a cursor about to restart on a slot's new owner hands
    /// what it reached to `earlier`.
    fn carry(&mut self, slot: usize, generation: u32) {
        if let Some(c) = self.cursors.get(slot) {
            if c.generation != 0 && c.generation != generation {
                let (g, s) = self.start.get(slot).copied().unwrap_or_default();
                self.earlier += if c.generation == g { c.next - s.min(c.next) } else { c.next };
            }
        }
    }
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
        let mut st = State { recording_due: from_start, ..State::default() };
        if !from_start {
            let r = region.get();
            let m = r.mapping()?;
            let slots = py.detach(|| m.view().slots()).map_err(|e| to_py(py, e, r.target()))?;
            for s in slots {
                let i = s.index as usize;
                if st.cursors.len() <= i {
                    st.cursors.resize(i + 1, latte_cursor::default());
                    st.start.resize(i + 1, (0, 0));
                }
                // The cursor of a reader that has read (or lost) everything
                // written so far.
                st.cursors[i] = latte_cursor { generation: s.generation, next: s.write_idx, ..Default::default() };
                st.start[i] = (s.generation, s.write_idx);
            }
        }
        Ok(Follower { region, filter: Filter { tokens, thread }, state: Mutex::new(st) })
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
                for s in v.slots()? {
                    st.carry(s.index as usize, s.generation);
                }
                let clock = r.clock(&m);
                let mut cols = read_view(&v, &self.filter, &mut st.cursors, &clock)?;
                if std::mem::take(&mut st.recording_due) {
                    // What the recording's followed rings lost: written
                    // before the file's samples, never in its slots.
                    let lost = r.recording_lost(&v, &self.filter)?;
                    cols.lost += lost;
                    st.earlier += lost;
                }
                st.read += cols.read;
                st.lost += cols.lost;
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

    /// Samples written to the followed slots (from their start, or from
    /// when a follower that skips the past began) up to where the polls
    /// have reached, counted from the cursors' positions in the rings:
    /// always `read + lost`.
    #[getter]
    fn recorded(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).recorded()
    }
}
