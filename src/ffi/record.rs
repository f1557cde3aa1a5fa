use super::*;
use crate::counters::{counters_of, latte_counters};
use crate::layout::*;
use crate::recorder::{self, latte_thread_counters};
use core::ffi::{c_char, c_int};

/// Opens a span on the calling thread's stack under `id` (interned by
/// content; NULL records as `<null-id>`). Beyond 64 open spans the call is
/// ignored and counted. A signal handler may call it (and `latte_stop`)
/// under an ID pointer its thread already used; a pointer new to the
/// thread allocates (docs/limits.md, "signal handlers").
#[no_mangle]
pub extern "C" fn latte_start(id: *const c_char, mode: latte_mode) {
    guard((), || {
        let t = recorder::current();
        if t.is_null() {
            recorder::note_refused_start();
            return;
        }
        // SAFETY: the calling thread's own state; the C API takes NULL or a
        // NUL-terminated string as an ID.
        unsafe { recorder::start(&mut *t, id, mode) }
    })
}

/// Gives the calling thread its ring for `id` now (as its first Start
/// would) and commits the whole ring's memory at once (as far as the
/// region's budget lets it), so that recording under `id` on this thread
/// pays no growth later: a ring's writes otherwise commit it in steps, in
/// slow paths of the writing thread, the largest half the ring. Call it
/// before a hot loop, where the cost (a few hundred microseconds for a
/// ring of 65,536 samples) is welcome. Returns the pages touched that no
/// sample had reached yet (0 when the ring has wrapped already), or
/// -ENOSPC when the ID or a slot does not fit.
#[no_mangle]
pub extern "C" fn latte_thread_prefault(id: *const c_char) -> i64 {
    // SAFETY: the C API takes NULL or a NUL-terminated string as an ID.
    guard(PANICKED as i64, || match unsafe { recorder::prefault(id) } {
        Ok(n) => n as i64,
        Err(e) => e.code() as i64,
    })
}

/// Closes the innermost open span of the calling thread, whatever `id` is
/// (it may be NULL), records it, and returns its duration in cycles; 0 when
/// nothing was open (ignored and counted).
#[no_mangle]
pub extern "C" fn latte_stop(id: *const c_char, mode: latte_mode) -> u64 {
    let _ = id;
    guard(0, || {
        let now = crate::tsc::read_stop(mode);
        let t = recorder::current();
        if t.is_null() {
            recorder::take_refused_start();
            return 0; // its Start was refused, and counted there
        }
        // SAFETY: the calling thread's own state.
        recorder::stop_at(unsafe { &mut *t }, mode, now)
    })
}

/// A pulse from the call site whose state is `site` (one per call site and
/// thread, zero-initialised): records the cycles since that site's previous
/// pulse; the first call only primes it.
#[no_mangle]
pub extern "C" fn latte_pulse(site: *mut latte_pulse_site, id: *const c_char) {
    guard((), || {
        if site.is_null() {
            return;
        }
        let t = recorder::current();
        if t.is_null() {
            recorder::note_unavailable();
            return;
        }
        // SAFETY: own state; site checked non-null and owned by the
        // caller's thread; the C API takes NULL or a NUL-terminated ID.
        unsafe { recorder::pulse(&mut *t, &mut *site, id) }
    })
}

/// The calling thread's counters. -EINVAL on NULL.
#[no_mangle]
pub extern "C" fn latte_thread_get_counters(out: *mut latte_thread_counters) -> c_int {
    guard(PANICKED, || put_out(out, || Ok(recorder::thread_counters())))
}

/// Process-wide counters of this process's region (all 0 before it has
/// one). -EINVAL on NULL; -ENOMEM (or the reason) when no region could be
/// made at all, so that nothing was counted (said once on standard error).
#[no_mangle]
pub extern "C" fn latte_region_get_counters(out: *mut latte_counters) -> c_int {
    guard(PANICKED, || {
        put_out(out, || match recorder::region_if_any() {
            Some(r) => Ok(counters_of(r.header())),
            // Before any region: nothing counted yet. Where none could be
            // made, the counts were never kept: the reason, not zeros.
            None => recorder::no_region().map_or(Ok(latte_counters::default()), Err),
        })
    })
}

/// Interns `id` by content and returns its stable token; LATTE_INVALID_ID
/// when the ID cannot be stored (the region's ID limit, or no memory for
/// its name; NULL interns `<null-id>`).
#[no_mangle]
pub extern "C" fn latte_intern_id(id: *const c_char) -> u32 {
    // SAFETY: the API takes NULL or a NUL-terminated string.
    guard(LATTE_INVALID_ID, || unsafe { recorder::intern_id(id) })
}

/// Writes the name of `token` into `buf` (NUL-terminated, cut to `len`
/// bytes); returns the name's whole length (a caller whose buffer was too
/// small asks again with a larger one), or -ENOENT for an unknown token.
/// Names are up to LATTE_MAX_NAME_LEN bytes.
#[no_mangle]
pub extern "C" fn latte_id_name(token: u32, buf: *mut c_char, len: usize) -> c_int {
    guard(PANICKED, || {
        match recorder::name_of_token(token) {
            // SAFETY: the caller gives a buffer of len bytes (or NULL).
            Some(n) => unsafe { fill_str(&n, buf, len) },
            None => -libc::ENOENT,
        }
    })
}
