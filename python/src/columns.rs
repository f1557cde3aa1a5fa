//! Samples as columns: a slot's samples read through the library's reader
//! (`View::read_into`, the ring protocol) a chunk at a time into one reused
//! buffer, and decoded from it into one vector per field. The vectors
//! become numpy arrays without another copy (`numpy::IntoPyArray` takes
//! the vector's memory), so a sample is copied once out of the mapping and
//! written once into each column.

use latte::error::Error;
use latte::layout::{LATTE_DEPTH_MASK, LATTE_DEPTH_SHIFT, LATTE_MAX_DURATION, LATTE_SAMPLE_SWITCHED};
use latte::reader::{latte_cursor, latte_raw_sample, latte_slot_info, ReadMode, View};
use std::mem::MaybeUninit;

/// Samples decoded per read (1 MiB of raw samples: the buffer stays in the
/// cache while its samples are decoded into the columns).
const CHUNK: usize = 65_536;

/// How a sample's TSC becomes time: the producer's anchor (a TSC and the
/// CLOCK_REALTIME of the same moment) and the TSC's rate.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub cycles_per_ns: f64,
    pub anchor_tsc: u64,
    pub anchor_realtime_ns: u64,
}

impl Clock {
    /// CLOCK_REALTIME (ns since the epoch) of a start TSC.
    fn realtime_ns(&self, tsc: u64) -> i64 {
        // Wrapping and saturating: the anchor is another process's word.
        let since = tsc.wrapping_sub(self.anchor_tsc) as i64;
        (self.anchor_realtime_ns as i64).saturating_add((since as f64 / self.cycles_per_ns) as i64)
    }
}

/// One vector per field, one element per sample, in reading order (slot
/// by slot, each ring oldest first).
#[derive(Default)]
pub struct Columns {
    /// The ID's token (`Region.ids` names it).
    pub id: Vec<u32>,
    /// The OS thread id of the recording thread.
    pub thread: Vec<u32>,
    pub start_tsc: Vec<u64>,
    /// CLOCK_REALTIME of the start, ns since the epoch.
    pub start_ns: Vec<i64>,
    /// Duration in cycles (48 bits).
    pub duration: Vec<u64>,
    pub duration_ns: Vec<f64>,
    /// Nesting depth (0: outermost).
    pub depth: Vec<u8>,
    /// The thread was switched out during the span (`LATTE_SAMPLE_SWITCHED`;
    /// only a thread with switch tracking on sets it).
    pub switched: Vec<bool>,
    /// Samples read (the columns' length).
    pub read: u64,
    /// Samples overwritten before they could be read.
    pub lost: u64,
}

impl Columns {
    /// Room for `n` samples in every column, taken at once; `ENOMEM` when
    /// it cannot be had (never an abort).
    pub fn reserve(&mut self, n: usize) -> Result<(), Error> {
        let nomem = |_| Error::NOMEM;
        self.id.try_reserve_exact(n).map_err(nomem)?;
        self.thread.try_reserve_exact(n).map_err(nomem)?;
        self.start_tsc.try_reserve_exact(n).map_err(nomem)?;
        self.start_ns.try_reserve_exact(n).map_err(nomem)?;
        self.duration.try_reserve_exact(n).map_err(nomem)?;
        self.duration_ns.try_reserve_exact(n).map_err(nomem)?;
        self.depth.try_reserve_exact(n).map_err(nomem)?;
        self.switched.try_reserve_exact(n).map_err(nomem)?;
        Ok(())
    }

    /// `reserve`, amortised (the vectors' own growth rule).
    fn grow(&mut self, n: usize) -> Result<(), Error> {
        let nomem = |_| Error::NOMEM;
        self.id.try_reserve(n).map_err(nomem)?;
        self.thread.try_reserve(n).map_err(nomem)?;
        self.start_tsc.try_reserve(n).map_err(nomem)?;
        self.start_ns.try_reserve(n).map_err(nomem)?;
        self.duration.try_reserve(n).map_err(nomem)?;
        self.duration_ns.try_reserve(n).map_err(nomem)?;
        self.depth.try_reserve(n).map_err(nomem)?;
        self.switched.try_reserve(n).map_err(nomem)?;
        Ok(())
    }

    /// Appends decoded samples recorded under `token` by thread `tid`.
    pub fn push(&mut self, raw: &[latte_raw_sample], token: u32, tid: u32, clock: &Clock) -> Result<(), Error> {
        if self.id.capacity() - self.id.len() < raw.len() {
            // A live slot written since the room was counted: grown by
            // doubling, as it may happen chunk after chunk.
            self.grow(raw.len())?;
        }
        let per_ns = 1.0 / clock.cycles_per_ns;
        self.id.extend(std::iter::repeat_n(token, raw.len()));
        self.thread.extend(std::iter::repeat_n(tid, raw.len()));
        self.start_tsc.extend(raw.iter().map(|r| r.start_tsc));
        self.start_ns.extend(raw.iter().map(|r| clock.realtime_ns(r.start_tsc)));
        self.duration.extend(raw.iter().map(|r| r.packed & LATTE_MAX_DURATION));
        self.duration_ns.extend(raw.iter().map(|r| (r.packed & LATTE_MAX_DURATION) as f64 * per_ns));
        self.depth.extend(raw.iter().map(|r| ((r.packed >> LATTE_DEPTH_SHIFT) & LATTE_DEPTH_MASK) as u8));
        self.switched.extend(raw.iter().map(|r| r.packed & LATTE_SAMPLE_SWITCHED != 0));
        self.read += raw.len() as u64;
        Ok(())
    }
}

/// A reusable buffer for `read_slot`.
pub struct Chunk(Vec<MaybeUninit<latte_raw_sample>>);

impl Chunk {
    pub fn new() -> Result<Chunk, Error> {
        let mut v = Vec::new();
        v.try_reserve_exact(CHUNK).map_err(|_| Error::NOMEM)?;
        v.resize(CHUNK, MaybeUninit::uninit());
        Ok(Chunk(v))
    }
}

/// Reads the samples of slot `info` newer than `cur` into `cols`, up to
/// the write index `info` saw (a writer as fast as the reader cannot keep
/// it reading: what it writes meanwhile waits for the next read). The labels (ID, thread) are those of the
/// generation the cursor is in after each read: a slot handed to a new
/// owner meanwhile restarts the cursor (the reader's rule), and its samples
/// are labelled with the new owner's header. `cols.lost` grows by what the
/// cursor counts as lost.
pub fn read_slot(view: &View, info: &latte_slot_info, cur: &mut latte_cursor, chunk: &mut Chunk, cols: &mut Columns, clock: &Clock) -> Result<(), Error> {
    let mut owner = *info;
    loop {
        let r = view.read_into(info.index, cur, &mut chunk.0, ReadMode::Live)?;
        cols.lost += r.lost;
        if cur.generation != owner.generation {
            owner = view.slot_info(info.index)?;
            if owner.generation != cur.generation {
                // Reassigned again since: these samples' owner is unknown.
                return Err(Error::Os(libc::EAGAIN));
            }
        }
        let n = r.read as usize;
        // SAFETY: read_into initialised the first r.read elements of the
        // buffer (its contract), and r.read <= the buffer's length.
        let raw = unsafe { std::slice::from_raw_parts(chunk.0.as_ptr() as *const latte_raw_sample, n) };
        cols.push(raw, owner.id_token, owner.os_tid, clock)?;
        if n < chunk.0.len() || cur.next >= info.write_idx || owner.generation != info.generation {
            return Ok(());
        }
    }
}

/// Which slots to read: those of the given ID tokens (every ID but the
/// reserved ones when None) and, when given, of one OS thread.
pub struct Filter {
    pub tokens: Option<Vec<u32>>,
    pub thread: Option<u32>,
}

impl Filter {
    fn wants(&self, s: &latte_slot_info, hidden: &[bool]) -> bool {
        self.wants_owner(s.id_token, s.os_tid, hidden)
    }

    /// Whether samples of ID `token` written by OS thread `tid` are wanted
    /// (`hidden`: per token, a reserved one).
    pub fn wants_owner(&self, token: u32, tid: u32, hidden: &[bool]) -> bool {
        let token_ok = match &self.tokens {
            Some(t) => t.contains(&token),
            None => !hidden.get(token as usize).copied().unwrap_or(true),
        };
        token_ok && self.thread.is_none_or(|t| t == tid)
    }
}

/// Reads every wanted slot of `view` from its cursor in `cursors` (indexed
/// by slot, grown as slots are handed out; a new cursor starts at the
/// ring's oldest sample) into fresh columns, with room for what the slots
/// hold taken first.
pub fn read_view(view: &View, filter: &Filter, cursors: &mut Vec<latte_cursor>, clock: &Clock) -> Result<Columns, Error> {
    let hidden: Vec<bool> = view.ids()?.iter().map(|i| latte::name::is_reserved_name(latte::name::name_bytes(&i.name))).collect();
    let slots: Vec<latte_slot_info> = view.slots()?.into_iter().filter(|s| filter.wants(s, &hidden)).collect();
    if let Some(last) = slots.last() {
        if cursors.len() <= last.index as usize {
            cursors.try_reserve(last.index as usize + 1 - cursors.len()).map_err(|_| Error::NOMEM)?;
            cursors.resize(last.index as usize + 1, latte_cursor::default());
        }
    }
    let cap = view.geo().samples_per_slot as u64;
    let holds: u64 = slots
        .iter()
        .map(|s| {
            let c = &cursors[s.index as usize];
            let next = if c.generation == s.generation { c.next } else { 0 };
            s.write_idx.saturating_sub(next).min(cap)
        })
        .sum();
    let mut cols = Columns::default();
    cols.reserve(usize::try_from(holds).map_err(|_| Error::NOMEM)?)?;
    let mut chunk = Chunk::new()?;
    for s in &slots {
        read_slot(view, s, &mut cursors[s.index as usize], &mut chunk, &mut cols, clock)?;
    }
    Ok(cols)
}
