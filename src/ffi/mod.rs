//! The C ABI: a thin, safe boundary over the Rust core, declared in the
//! generated `include/latte.h`.
//!
//! Every function runs inside a panic boundary (`guard`: a panic becomes
//! `LATTE_ERR_INTERNAL` or a stated default, never an unwind into C),
//! checks its pointers, and puts outputs last. A failure is a negative
//! code (`Error::code`, the one conversion; `latte_error_string` describes
//! it); success is 0, or a value the call documents that is never negative
//! (a text's length, a state). Variable-size array outputs take `(out,
//! cap, out_n)`: `*out_n` is always the full count, and `-ERANGE` (nothing
//! copied) says `cap` was too small. A NULL out-parameter is -EINVAL (nothing done, no cursor
//! moved), but the buffer of a size query: `out` NULL with `cap` 0, or a
//! string buffer NULL with length 0.
//!
//! # Names
//! `latte_<object>_<verb>`: the object the call acts on (`thread`, `region`,
//! `reader`, `flush`, `calibration`, `samples`, `id`, `report`, `trace`,
//! `tsc`, `error`, `string`, `sched`), then what it does; a call that fills an
//! out-parameter says `get`, one that returns a value may name the value
//! (`latte_reader_id_count`). The design's entry points keep their names:
//! `latte_start`, `latte_stop`, `latte_pulse`, `latte_init_shared_region`
//! (and its `_with` form), `latte_intern_id`, `latte_flush_async`,
//! `latte_poll_flush`, and `latte_version`. Entry points that only
//! `include/latte_inline.h` calls are `latte_internal_<object>_<verb>_v<N>`,
//! N the generation of the layout they share with it
//! (`LATTE_THREAD_LAYOUT`): not part of the API, they change with the
//! inline path.
//!
//! One file per concern:
//!
//! | file | calls |
//! |---|---|
//! | `record.rs` | Start, Stop, pulse, prefault, IDs, counters |
//! | `inline.rs` | the slow paths of `latte_inline.h` |
//! | `extract.rs` | snapshot, extraction, the report, the trace, clean-up statistics |
//! | `calibrate.rs` | calibration and the TSC frequency |
//! | `region.rs` | the shared region: set-up and removal |
//! | `flush.rs` | writing the region to a file |
//! | `reader.rs` | reading a region from another process, and its types |
//! | `misc.rs` | version and error strings |
//! | `sched.rs` | switch tracking: enable, status, counters, points and their diff |

// The exports take raw pointers from C and are safe `extern "C"` functions,
// as a C prototype has no `unsafe`: each states its pointer contract in its
// doc (copied into latte.h), checks NULL, and is unreachable from safe Rust
// (this module is private; the test-only `internals` feature aside).
#![allow(clippy::not_unsafe_ptr_arg_deref, reason = "C ABI exports: the contract is the header's, see above")]

mod calibrate;
mod extract;
mod flush;
mod inline;
mod misc;
mod reader;
mod record;
mod region;
mod sched;

// The exports by their C names, for the integration tests (C callers link
// them by symbol).
#[cfg(feature = "internals")]
pub use {calibrate::*, extract::*, flush::*, inline::*, misc::*, reader::*, record::*, region::*, sched::*};

use crate::error::{Error, LATTE_ERR_INTERNAL};
use core::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`; a panic inside it returns `fallback` instead of unwinding into C.
#[inline(always)]
fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// What a panic caught by `guard` returns from a call that returns a code.
const PANICKED: c_int = LATTE_ERR_INTERNAL;

/// 0, or the error's code.
fn code(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.code(),
    }
}

/// Writes `v` to a caller's out-parameter and returns 0; -EINVAL when
/// `out` is NULL; the error's code when `v` is one.
fn put_out<T>(out: *mut T, v: impl FnOnce() -> Result<T, Error>) -> c_int {
    if out.is_null() {
        return Error::INVAL.code();
    }
    match v() {
        Ok(v) => {
            // SAFETY: checked non-null; the caller guarantees it is writable.
            unsafe { out.write(v) };
            0
        }
        Err(e) => e.code(),
    }
}

/// Copies `src` into a caller buffer of `cap` elements. Sets `*out_n` to
/// the full count; -ERANGE when it does not fit (nothing is copied then);
/// -EINVAL when `out_n` is NULL, or `out` is with `cap` over 0 (check them
/// with `outs_ok` before the work).
///
/// # Safety
/// `out` is NULL or writable for `cap` elements; `out_n` is NULL or writable.
unsafe fn fill<T: Copy>(src: &[T], out: *mut T, cap: usize, out_n: *mut usize) -> c_int {
    if !outs_ok(out, cap, out_n) {
        return Error::INVAL.code();
    }
    // SAFETY: checked non-null; the caller guarantees it is writable.
    unsafe { *out_n = src.len() };
    if src.len() > cap || (out.is_null() && !src.is_empty()) {
        return Error::RANGE.code();
    }
    if !src.is_empty() {
        // SAFETY: out is writable for cap >= src.len() elements.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), out, src.len()) };
    }
    0
}

/// The outputs of an `(out, cap, out_n)` call are usable: `out_n` is not
/// NULL, and `out` is not unless `cap` is 0 (a size query).
fn outs_ok<T>(out: *mut T, cap: usize, out_n: *mut usize) -> bool {
    !out_n.is_null() && (!out.is_null() || cap == 0)
}

/// Copies a string into a caller buffer, NUL-terminated; returns the string's
/// length (without NUL). Truncates when `len` is too small.
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
unsafe fn fill_str(s: &[u8], buf: *mut c_char, len: usize) -> c_int {
    if !buf.is_null() && len > 0 {
        let n = s.len().min(len - 1);
        // SAFETY: buf is writable for len > n bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
    }
    s.len().min(c_int::MAX as usize) as c_int
}
