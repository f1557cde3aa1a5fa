//! Columns handed to Python: each vector becomes a one-dimensional numpy
//! array that owns the vector's memory (no copy), gathered in a dict with
//! the read's accounting.

use crate::columns::Columns;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `{"id": uint32[], "thread": uint32[], "start_tsc": uint64[], "start_ns":
/// int64[], "duration": uint64[], "duration_ns": float64[], "depth":
/// uint8[], "switched": bool[], "read": int, "lost": int}`.
pub fn to_dict(py: Python<'_>, c: Columns) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("read", c.read)?;
    d.set_item("lost", c.lost)?;
    d.set_item("id", c.id.into_pyarray(py))?;
    d.set_item("thread", c.thread.into_pyarray(py))?;
    d.set_item("start_tsc", c.start_tsc.into_pyarray(py))?;
    d.set_item("start_ns", c.start_ns.into_pyarray(py))?;
    d.set_item("duration", c.duration.into_pyarray(py))?;
    d.set_item("duration_ns", c.duration_ns.into_pyarray(py))?;
    d.set_item("depth", c.depth.into_pyarray(py))?;
    d.set_item("switched", c.switched.into_pyarray(py))?;
    Ok(d)
}
