//! Following live rings: a reader that keeps a cursor per slot and reads
//! each ring before its writer can lap it, each slot paced by the rate its
//! writer was seen to write ([`Pacing`], `pace.rs`). Between looks the
//! caller sleeps (`poll` says for how long).
//!
//! Every read goes through [`View::read_slot`] (the ring protocol's reader
//! steps). The accounting is per incarnation of a slot (one generation:
//! one owner thread and one ID) and exact: `read + lost == end_idx -
//! start_idx`, from the writer's own index. What a slot's owner wrote after
//! the last look, when the slot went to a new owner before it was seen
//! closed, cannot be known: that incarnation says so (`tail_unknown`).

use crate::error::Error;
use crate::layout::LATTE_SLOT_CLOSED;
use crate::pace::{now_ns, PaceOptions, Pacing};
use crate::reader::{latte_cursor, latte_raw_sample, ReadMode, View};

/// How a `Follower` follows.
#[derive(Clone, Copy, Debug, Default)]
pub struct FollowOptions {
    /// How each slot's looks are paced.
    pub pace: PaceOptions,
    /// Begin every slot at its oldest sample still in the ring (what was
    /// overwritten before counts as lost); otherwise at its writer's index
    /// when it is first seen (slots that appear later begin at 0).
    pub from_start: bool,
}

/// One incarnation of a slot (one generation: one owner thread and one ID),
/// as followed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Incarnation {
    /// Slot index in the region.
    pub slot: u32,
    /// The slot's generation for this owner.
    pub generation: u32,
    /// ID token.
    pub id_token: u32,
    /// Process-wide thread index of the owner.
    pub thread_idx: u32,
    /// OS thread id of the owner.
    pub os_tid: u32,
    /// The writer's index where following began (0: from its first sample).
    pub start_idx: u64,
    /// Every sample below this index was read or counted lost.
    pub end_idx: u64,
    /// Samples handed to the sink.
    pub read: u64,
    /// Samples overwritten before they could be read.
    pub lost: u64,
    /// The slot was seen closed and read to its end: `end_idx` is all its
    /// owner wrote.
    pub closed: bool,
    /// The slot went to a new owner before it was seen closed: what the old
    /// owner wrote after `end_idx` is unknown.
    pub tail_unknown: bool,
}

impl Incarnation {
    /// Samples written by the owner over the followed span (read + lost).
    pub fn recorded(&self) -> u64 {
        self.end_idx - self.start_idx
    }
}

/// Per-slot state of a follower.
#[derive(Clone, Copy, Debug, Default)]
struct Followed {
    cur: latte_cursor,
    inc: Incarnation,
    /// An incarnation is being followed (the slot had an owner when seen).
    active: bool,
}

/// A reader following every slot of a live region (module doc).
pub struct Follower {
    opts: FollowOptions,
    slots: Vec<Followed>,
    pacing: Pacing,
    /// Incarnations that ended (closed and read, or replaced by a new owner).
    ended: Vec<Incarnation>,
    buf: Vec<latte_raw_sample>,
    /// The first `poll` has placed the cursors.
    started: bool,
}

/// What a sink receives: the incarnation (its figures up to and including
/// this batch) and the samples read, oldest first.
pub type Sink<'s> = dyn FnMut(&Incarnation, &[latte_raw_sample]) + 's;

impl Follower {
    /// A follower that has looked at nothing yet.
    pub fn new(opts: FollowOptions) -> Follower {
        Follower { opts, slots: Vec::new(), pacing: Pacing::new(opts.pace), ended: Vec::new(), buf: Vec::new(), started: false }
    }

    /// Looks at every slot whose look is due, hands what it reads to
    /// `sink`, and returns how long (ns) the caller may wait before the
    /// next look is due.
    pub fn poll(&mut self, view: &View, sink: &mut Sink) -> Result<u64, Error> {
        self.pass(view, sink, false)
    }

    /// Looks at every slot now, due or not (the last pass before stopping:
    /// each incarnation's figures then end at the writer's index seen by it).
    pub fn drain(&mut self, view: &View, sink: &mut Sink) -> Result<(), Error> {
        self.pass(view, sink, true).map(|_| ())
    }

    /// Every incarnation followed: those that ended, then those still being
    /// followed.
    pub fn incarnations(&self) -> Vec<Incarnation> {
        let mut v = self.ended.clone();
        v.extend(self.slots.iter().filter(|f| f.active).map(|f| f.inc));
        v
    }

    fn pass(&mut self, view: &View, sink: &mut Sink, all: bool) -> Result<u64, Error> {
        let now = now_ns();
        // The slots handed out that this view maps (a region that grew
        // since: the caller refreshes its mapping, `Mapping::refresh`, and
        // the cursors carry over, being per slot index).
        let used = (view.slots_used() as u64).min(view.slot_capacity()) as usize;
        let first = !self.started;
        if self.slots.len() < used {
            self.slots.resize(used, Followed::default());
        }
        if first {
            self.started = true;
            if !self.opts.from_start {
                // Begin at each owner's index now: what it wrote before is
                // not part of what is followed.
                for i in 0..used {
                    let s = view.slot_info(i as u32)?;
                    if s.generation != 0 {
                        self.slots[i].cur = latte_cursor { generation: s.generation, next: s.write_idx, ..Default::default() };
                    }
                }
            }
        }
        let cap = view.geo().samples_per_slot as u64;
        for i in 0..used as u32 {
            if all || self.pacing.is_due(i, now) {
                self.look(view, i, now, cap, sink)?;
            }
        }
        Ok(self.pacing.wait_ns(now, used))
    }

    /// One look at slot `i`: reads what is new, keeps the accounting.
    fn look(&mut self, view: &View, i: u32, now: u64, cap: u64, sink: &mut Sink) -> Result<(), Error> {
        let info = view.slot_info(i)?;
        let f = &mut self.slots[i as usize];
        if info.generation == 0 {
            // Unassigned or being reassigned: looked at again after the
            // longest interval, the bound for finding any new owner.
            self.pacing.idle(i, now);
            return Ok(());
        }
        let before = f.cur.generation;
        // The cursor of a generation this slot had at the first pass starts
        // at that owner's index; any other starts at 0 (read_slot restarts it).
        let start_idx = if f.cur.generation == info.generation && !f.active { f.cur.next } else { 0 };
        self.buf.clear();
        let r = view.read_slot(i, &mut f.cur, &mut self.buf, ReadMode::Live)?;
        if f.cur.generation == 0 {
            self.pacing.idle(i, now);
            return Ok(()); // being reassigned: a later look sees its new owner
        }
        if f.cur.generation != before || !f.active {
            if f.active {
                // The slot went to a new owner before it was seen closed.
                if !f.inc.closed {
                    f.inc.tail_unknown = true;
                }
                self.ended.push(f.inc);
            }
            let start = if f.cur.generation == before { start_idx } else { 0 };
            f.inc = Incarnation {
                slot: i,
                generation: f.cur.generation,
                id_token: info.id_token,
                thread_idx: info.thread_idx,
                os_tid: info.os_tid,
                start_idx: start,
                end_idx: start,
                ..Default::default()
            };
            f.active = true;
            self.pacing.restart(i, now, start);
        }
        // A read that found the slot reassigned mid-copy returns nothing
        // and leaves the cursor for the next look.
        f.inc.read += r.read;
        f.inc.lost += r.lost;
        f.inc.end_idx = f.cur.next;
        debug_assert_eq!(f.inc.read + f.inc.lost, f.inc.end_idx - f.inc.start_idx);
        if info.state == LATTE_SLOT_CLOSED && info.generation == f.cur.generation && f.cur.next >= info.write_idx {
            f.inc.closed = true;
        }
        if f.inc.closed {
            self.pacing.idle(i, now); // final: a new owner shows at a look
        } else {
            self.pacing.looked(i, now, f.cur.next, cap);
        }
        if r.read > 0 || r.lost > 0 {
            let inc = f.inc;
            sink(&inc, &self.buf);
        }
        Ok(())
    }
}
