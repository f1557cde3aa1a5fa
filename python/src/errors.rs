//! The library's errors as Python exceptions, with the library's messages
//! (`latte::Error`'s text) after what was being read:
//!
//! - an operating-system error (`Error::Os`): `OSError(errno, message,
//!   target)`, which Python turns into its subclass for that errno
//!   (`FileNotFoundError`, `PermissionError`, `IsADirectoryError`, ...);
//!   `ENOMEM` is `MemoryError`;
//! - an object that is not a region or flushed image, or whose contents are
//!   out of range (`NotLatte`, `Version`, `Truncated`, `Corrupt`):
//!   `latte.FormatError`;
//! - anything else (`NotSupported`, a caught panic): `latte.Error`, the
//!   base of `FormatError`.
//!
//! Every exception raised from here carries the library's code (negative,
//! as the C ABI returns it) as its `code` attribute.

use latte::error::Error;
use pyo3::exceptions::{PyMemoryError, PyOSError};
use pyo3::prelude::*;

pyo3::create_exception!(_latte, LatteError, pyo3::exceptions::PyException, "An error of latte's reader.");
pyo3::create_exception!(_latte, FormatError, LatteError, "Not a latte region or flushed image, or one whose contents are out of range.");

/// The Python exception for `e`, met while reading `what` (a region name
/// or a path, as the caller gave it).
pub fn to_py(py: Python<'_>, e: Error, what: &str) -> PyErr {
    let text = format!("{what}: {e}");
    let err = match e {
        Error::Os(libc::ENOMEM) => PyMemoryError::new_err(text),
        Error::Os(errno) => PyOSError::new_err((errno, e.to_string(), what.to_string())),
        Error::NotLatte | Error::Version | Error::Truncated | Error::Corrupt => FormatError::new_err(text),
        _ => LatteError::new_err(text),
    };
    // An exception instance always takes a new attribute; were it ever
    // refused, the exception still says what happened.
    let _ = err.value(py).setattr("code", e.code());
    err
}
