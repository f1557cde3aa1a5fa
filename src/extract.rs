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

/// Reads each of `slots` from its start (the calling thread's own live
/// slots as final, `Finality`), appending its samples to `buf`, and hands
/// `f` the slot, `buf` and the slot's cursor after the read. `buf` is not
/// cleared between slots: `f` takes or clears what it keeps apart. The
/// loop of every reader of this process's samples.
pub fn read_slots(
    v: &View<'_>,
    fin: &Finality,
    slots: &[latte_slot_info],
    buf: &mut Vec<latte_raw_sample>,
    mut f: impl FnMut(&latte_slot_info, &mut Vec<latte_raw_sample>, &latte_cursor) -> Result<(), Error>,
) -> Result<(), Error> {
    for s in slots {
        // A cursor of its own per slot, fresh: each slot is read once, from
        // its start (a table of cursors by slot index would be as long as
        // the highest index, made again for every call).
        let mut cur = latte_cursor::default();
        v.read_slot(s.index, &mut cur, buf, fin.mode(s))?;
        f(s, buf, &cur)?;
    }
    Ok(())
}

/// Every sample of every slot (of `token` only, when given), per slot,
/// with the slot. In the own region, slots of the calling thread are read as
/// final; a flushed image's slots follow the flush's captured indices.
pub fn collect(v: &View<'_>, token: Option<u32>) -> Result<Vec<(latte_slot_info, Vec<latte_raw_sample>)>, Error> {
    let slots: Vec<latte_slot_info> = v.slots()?.into_iter().filter(|s| token.is_none_or(|t| t == s.id_token)).collect();
    let mut out = Vec::new();
    read_slots(v, &Finality::of(v), &slots, &mut Vec::new(), |s, buf, _| {
        out.push((*s, core::mem::take(buf)));
        Ok(())
    })?;
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
    let slots: Vec<latte_slot_info> = v.slots()?.into_iter().filter(|s| s.id_token == token).collect();
    read_slots(&v, &Finality::of(&v), &slots, out, |_, _, _| Ok(()))
}

/// Every sample of this process's region with its ID token, calibration
/// excluded, into `out` (cleared first): slot by slot in slot order, each
/// ring's samples in the order they sit in the ring (chronological until the
/// ring wraps), as the original Latte's `ExtractSamplesGlobal` gives them.
pub fn extract_all(out: &mut Vec<(u32, latte_raw_sample)>) -> Result<(), Error> {
    out.clear();
    let Some(v) = own_view() else { return Ok(()) };
    let hidden = crate::recorder::token_of_name(crate::name::CALIBRATION_ID.to_bytes());
    let cap = v.geo().samples_per_slot as u64;
    let slots: Vec<latte_slot_info> = v.slots()?.into_iter().filter(|s| hidden != Some(s.id_token)).collect();
    read_slots(&v, &Finality::of(&v), &slots, &mut Vec::new(), |s, buf, cur| {
        // buf holds indices cur.next - n .. cur.next; the ring position of
        // index i is i % cap, so the samples wrapped past the ring's end come
        // first in ring order.
        let n = buf.len() as u64;
        let first_pos = (cur.next - n) % cap;
        let split = if first_pos + n > cap { (cap - first_pos) as usize } else { 0 };
        let (older, newer) = buf.split_at(split);
        out.extend(newer.iter().chain(older).map(|r| (s.id_token, *r)));
        buf.clear();
        Ok(())
    })
}
