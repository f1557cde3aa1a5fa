use super::*;
use crate::error::describe;
use core::ffi::{c_char, c_int};

/// The library's version, "MAJOR.MINOR.PATCH" (a static string; compare
/// with LATTE_VERSION_STRING, the version of the header compiled against).
#[no_mangle]
pub extern "C" fn latte_version() -> *const c_char {
    const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    guard(VERSION.as_ptr().cast(), || VERSION.as_ptr().cast())
}

/// Describes an error code (a static string; never NULL).
#[no_mangle]
pub extern "C" fn latte_error_string(code: c_int) -> *const c_char {
    describe(code).as_ptr()
}
