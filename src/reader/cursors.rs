//! `Cursors`: a reader's cursor for each slot of one region, for every
//! reader of many slots (a report, an extraction, `latte watch`, the
//! exporter).

use super::{latte_cursor, latte_raw_sample, latte_slot_info, ReadMode, ReadOutcome, View};
use crate::error::Error;

/// A cursor per slot of one region, by slot index. It grows to the slots
/// read through it, each a slot the view lists as handed out, never to
/// what the header says there could be (a hostile one claims 2^32 - 1
/// slots). Cursors are per slot index, so they stay valid across
/// [`Mapping::refresh`](super::Mapping::refresh).
#[derive(Clone, Debug, Default)]
pub struct Cursors {
    by_slot: Vec<latte_cursor>,
}

impl Cursors {
    /// No cursor yet: every slot is read from its start.
    pub fn new() -> Cursors {
        Cursors::default()
    }

    /// The cursor of slot `index` (a slot the view listed), made fresh
    /// when that slot was not read through these cursors yet.
    pub fn get_mut(&mut self, index: u32) -> &mut latte_cursor {
        let i = index as usize;
        if self.by_slot.len() <= i {
            self.by_slot.resize(i + 1, latte_cursor::default());
        }
        &mut self.by_slot[i]
    }

    /// The cursor of slot `index`, when it was read through these cursors.
    pub fn get(&self, index: u32) -> Option<&latte_cursor> {
        self.by_slot.get(index as usize)
    }

    /// Reads the samples of slot `s` newer than its cursor
    /// (`View::read_slot`), appending them, oldest first, to `out`.
    pub fn read(&mut self, v: &View<'_>, s: &latte_slot_info, out: &mut Vec<latte_raw_sample>, mode: ReadMode) -> Result<ReadOutcome, Error> {
        v.read_slot(s.index, self.get_mut(s.index), out, mode)
    }
}
