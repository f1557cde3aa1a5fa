//! `latte._latte`: the Rust half of the Python package `latte` (the
//! package's `__init__.py` is the API people call). It reads regions and
//! flushed images through the library's own reader (`latte::Mapping`,
//! `latte::View`, the ring protocol's cursors): nothing here knows the
//! layout.
//!
//! - `region`: `Region`, an opened region or image, and `open_target`;
//! - `follow`: `Follower`, the new samples at each poll;
//! - `columns`: samples read into one vector per field;
//! - `arrays`: the vectors as numpy arrays;
//! - `errors`: the library's errors as Python exceptions.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod arrays;
mod columns;
mod errors;
mod follow;
mod region;

use pyo3::prelude::*;

#[pymodule]
fn _latte(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(region::open_target, m)?)?;
    m.add_class::<region::Region>()?;
    m.add_class::<follow::Follower>()?;
    m.add("Error", m.py().get_type::<errors::Error>())?;
    m.add("FormatError", errors::format_error(m.py())?)?;
    m.add("LIBRARY_VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
