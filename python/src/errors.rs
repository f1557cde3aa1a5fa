//! The library's errors as Python exceptions, with the library's messages
//! (`latte::Error`'s text) after what was being read:
//!
//! - an operating-system error (`Error::Os`): `OSError(errno, message,
//!   target)`, which Python turns into its subclass for that errno
//!   (`FileNotFoundError`, `PermissionError`, `IsADirectoryError`, ...);
//!   `ENOMEM` is `MemoryError`;
//! - an object that is not a region or flushed image, or whose contents are
//!   out of range (`NotLatte`, `Version`, `Truncated`, `Corrupt`):
//!   `latte.FormatError`, a `latte.Error` and a `ValueError`;
//! - anything else (`NotSupported`, a caught panic): `latte.Error`.
//!
//! Every exception raised from here carries the library's code (negative,
//! as the C ABI returns it) as its `code` attribute.

use latte::error::Error as LibError;
use pyo3::exceptions::{PyException, PyMemoryError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

pyo3::create_exception!(latte, Error, PyException, "An error of latte's reader (the base of latte.FormatError).");

/// `latte.FormatError`: made at first use, as it has two bases.
static FORMAT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The class `latte.FormatError(latte.Error, ValueError)`.
pub fn format_error(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    let t = FORMAT_ERROR.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let ns = PyDict::new(py);
        ns.set_item("__module__", "latte")?;
        ns.set_item("__doc__", "Not a latte region or flushed image, or one whose contents are out of range.")?;
        let bases = (py.get_type::<Error>(), py.get_type::<PyValueError>());
        let t = py.get_type::<PyType>().call1(("FormatError", bases, ns))?;
        Ok(t.cast_into::<PyType>()?.unbind())
    })?;
    Ok(t.bind(py).clone())
}

/// The Python exception for `e`, met while reading `what` (a region name
/// or a path, as the caller gave it).
pub fn to_py(py: Python<'_>, e: LibError, what: &str) -> PyErr {
    let text = format!("{what}: {e}");
    let err = match e {
        LibError::Os(libc::ENOMEM) => PyMemoryError::new_err(text),
        LibError::Os(errno) => PyOSError::new_err((errno, e.to_string(), what.to_string())),
        LibError::NotLatte | LibError::Version | LibError::Truncated | LibError::Corrupt => match format_error(py) {
            Ok(t) => PyErr::from_type(t, text),
            Err(made) => made,
        },
        _ => Error::new_err(text),
    };
    // An exception instance always takes a new attribute; were it ever
    // refused, the exception still says what happened.
    let _ = err.value(py).setattr("code", e.code());
    err
}
