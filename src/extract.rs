//! Extraction: this process's own samples, read back through the reader
//! over its own region, with the recorder's knowledge of which slots the
//! calling thread owns (those it may read as final). Above both the
//! recorder and the reader; neither knows of it.

use crate::error::Error;
use crate::layout::*;
use crate::reader::{latte_cursor, latte_raw_sample, latte_slot_info, ReadMode, View};

/// The view of this process's own region, if there is one.
pub fn own_view() -> Option<View<'static>> {
    Some(View::of_region(crate::recorder::region_if_any()?))
}

/// Which slots of `v` a caller in this process may read as final.
pub fn final_slots(v: &View<'_>) -> Finality {
    Finality::of(v)
}

/// Which slots a caller in this process may read as final: in the own live
/// region, the calling thread's own live slots (no write to them can be in
/// progress while it reads).
pub struct Finality {
    own_region: bool,
    my_idx: Option<u32>,
}

impl Finality {
    fn of(v: &View<'_>) -> Finality {
        Finality {
            own_region: v.flags() & LATTE_REGION_FLUSHED == 0 && crate::recorder::region_if_any().map(|r| r.base() as *const u8) == Some(v.base()),
            my_idx: crate::recorder::current_thread_idx(),
        }
    }

    pub fn is_final(&self, s: &latte_slot_info) -> bool {
        self.own_region && Some(s.thread_idx) == self.my_idx && s.state == LATTE_SLOT_LIVE
    }

    /// How to read slot `s`.
    pub fn mode(&self, s: &latte_slot_info) -> ReadMode {
        if self.is_final(s) {
            ReadMode::Final
        } else {
            ReadMode::Live
        }
    }
}

/// Every sample of every slot (of `token` only, when given), per slot,
/// with the slot. In the own region, slots of the calling thread are read as
/// final; a flushed image's slots follow the flush's captured indices.
pub fn collect(v: &View<'_>, token: Option<u32>) -> Result<Vec<(latte_slot_info, Vec<latte_raw_sample>)>, Error> {
    let fin = Finality::of(v);
    let mut out = Vec::new();
    for s in v.slots()? {
        if token.is_some_and(|t| t != s.id_token) {
            continue;
        }
        let mut cur = latte_cursor::default();
        let mut buf = Vec::new();
        v.read_slot(s.index, &mut cur, &mut buf, fin.mode(&s))?;
        out.push((s, buf));
    }
    Ok(out)
}

/// Every sample recorded under `id` in this process, every thread, at most
/// a ring's capacity per thread (the newest), slot by slot in recording
/// order, into `out` (cleared first; its capacity is reused). Nothing for an
/// unknown ID.
///
/// # Safety
/// `id` is NULL or a NUL-terminated string.
pub unsafe fn snapshot_into(id: *const core::ffi::c_char, out: &mut Vec<latte_raw_sample>) -> Result<(), Error> {
    out.clear();
    let v = match own_view() {
        Some(v) => v,
        None => return Ok(()),
    };
    // SAFETY: forwarded from the caller.
    let name = unsafe { crate::name::normalize(id) };
    let Some(token) = crate::recorder::token_of_name(&name) else { return Ok(()) };
    let fin = Finality::of(&v);
    for s in v.slots()? {
        if s.id_token == token {
            let mut cur = latte_cursor::default();
            v.read_slot(s.index, &mut cur, out, fin.mode(&s))?;
        }
    }
    Ok(())
}

/// Every sample of this process's region with its ID token, calibration
/// excluded, into `out` (cleared first): slot by slot in slot order, each
/// ring's samples in the order they sit in the ring (chronological until the
/// ring wraps), as the original Latte's `ExtractSamplesGlobal` gives them.
pub fn extract_all(out: &mut Vec<(u32, latte_raw_sample)>) -> Result<(), Error> {
    out.clear();
    let Some(v) = own_view() else { return Ok(()) };
    let hidden = crate::recorder::token_of_name(crate::name::CALIBRATION_ID.to_bytes());
    let fin = Finality::of(&v);
    let cap = v.geo().samples_per_slot as u64;
    let mut buf = Vec::new();
    for s in v.slots()? {
        if hidden == Some(s.id_token) {
            continue;
        }
        let mut cur = latte_cursor::default();
        buf.clear();
        v.read_slot(s.index, &mut cur, &mut buf, fin.mode(&s))?;
        // buf holds indices cur.next - n .. cur.next; the ring position of
        // index i is i % cap, so the samples wrapped past the ring's end come
        // first in ring order.
        let n = buf.len() as u64;
        let first_pos = (cur.next - n) % cap;
        let split = if first_pos + n > cap { (cap - first_pos) as usize } else { 0 };
        let (older, newer) = buf.split_at(split);
        out.extend(newer.iter().chain(older).map(|r| (s.id_token, *r)));
    }
    Ok(())
}
