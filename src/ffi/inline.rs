use super::*;
use crate::layout::*;
use crate::recorder;
use core::ffi::c_char;

// The slow paths of the inline fast path (`latte_inline.h`). `t` is the
// caller's own per-thread state (its thread-local `latte_thread`); passing
// anything else is a contract violation the library cannot detect, except
// NULL, which is refused.

/// Slow path of the inline Start: a cache miss. Attaches `t` to the calling
/// thread if needed, interns the ID, finds or allocates this thread's ring
/// for it, fills `t`'s cache and returns the ring, tagged with its token
/// (`latte_cache_entry.ring`). When the span cannot be recorded (an ID
/// that cannot be stored, no ring to be had, the thread being torn down;
/// counted) it returns a sink ring,
/// never 0 for a non-NULL `t`.
#[no_mangle]
pub extern "C" fn latte_internal_thread_resolve_v3(t: *mut latte_thread, id: *const c_char) -> u64 {
    if t.is_null() {
        return 0;
    }
    let ring = guard(0, || {
        // SAFETY: `t` is the calling thread's own state (the contract above).
        match unsafe { recorder::activate(t) } {
            // SAFETY: the C API takes NULL or a NUL-terminated string as an ID.
            Some(t) => unsafe { recorder::resolve(t, id) },
            None => {
                recorder::note_unavailable();
                0
            }
        }
    });
    if ring == 0 {
        // SAFETY: as above; only its mask is read.
        tag_ring(recorder::unrecordable(unsafe { &*t }), 0)
    } else {
        ring
    }
}

/// Out-of-line path of the inline Start: `id` was found at entry `at` of
/// `t`'s cache, past its home entry. At about one call in 64 on the
/// thread (drawn at random) it moves `id` to its home entry and the ID there to
/// `at`, so that later Starts find it at the first look (`cache_promote`,
/// rule C4 of the ID cache). `t` must be the calling thread's own state; a
/// state that is not attached (not the thread's active one) is left alone,
/// and so is an entry `at` that no longer holds `id`.
#[no_mangle]
pub extern "C" fn latte_internal_thread_promote_v3(t: *mut latte_thread, id: *const c_char, at: usize) {
    guard((), || {
        if !t.is_null() {
            // SAFETY: the calling thread's own state (the contract above).
            recorder::cache_promote(unsafe { &mut *t }, id, at)
        }
    })
}

/// Slow path of the inline Start: 64 spans are open; counts the ignored Start.
#[no_mangle]
pub extern "C" fn latte_internal_thread_note_overflow_v3(t: *mut latte_thread) {
    guard((), || {
        if !t.is_null() {
            // SAFETY: the calling thread's own state.
            recorder::note_overflow(unsafe { &mut *t })
        }
    })
}

/// Slow path of the inline Stop: `t` has no open span. Counts an orphan
/// Stop (returns 0), or, when another state of this thread is the active
/// one, closes that state's innermost span and returns its duration.
/// `now` is the TSC the caller read in `mode`.
#[no_mangle]
pub extern "C" fn latte_internal_thread_stop_slow_v3(t: *mut latte_thread, mode: latte_mode, now: u64) -> u64 {
    guard(0, || recorder::stop_slow(t, mode, now))
}

/// Slow path of the inline pulse: the site is not resolved for `id` (first
/// call, another ID, or NULL). Attaches `t`, resolves and primes the site,
/// and records the interval when the site was primed before. `now` is the
/// TSC the caller read.
#[no_mangle]
pub extern "C" fn latte_internal_thread_pulse_slow_v3(t: *mut latte_thread, site: *mut latte_pulse_site, id: *const c_char, now: u64) {
    guard((), || {
        if t.is_null() || site.is_null() {
            return;
        }
        // SAFETY: `t` is the calling thread's own state (the contract above).
        match unsafe { recorder::activate(t) } {
            // SAFETY: site checked non-null; the caller's per-thread
            // call-site state; the C API takes NULL or a NUL-terminated ID.
            Some(t) => unsafe { recorder::pulse_slow(t, &mut *site, id, now) },
            None => recorder::note_unavailable(),
        }
    })
}

/// Slow path of the inline fast path's write (`latte__write_at`): index
/// `idx` of the ring `s` (the ring's `write_idx`, for the calling thread,
/// its owner) lies at or past the ring's committed end
/// (`latte_slot_header.write_limit`). Grows the ring, or laps it early
/// when no memory can be had (ring protocol, G1-G3), writes the sample
/// (`tsc`, `packed`) and returns the ring's new `write_idx`. `mask` is the
/// thread's `sample_mask`. A NULL `s` writes nothing and returns 0.
#[no_mangle]
pub extern "C" fn latte_internal_ring_write_at_limit_v3(s: *mut latte_slot_header, mask: u64, idx: u64, tsc: u64, packed: u64) -> u64 {
    if s.is_null() {
        return 0;
    }
    // SAFETY: `s` is a ring of the calling thread's at its write index
    // (the contract above, which the inline path keeps).
    guard(idx, || unsafe { recorder::write_at_limit(s, mask, idx, tsc, packed) })
}
