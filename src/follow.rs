//! Following live rings: a reader that keeps a cursor per slot and reads
//! each ring before its writer can lap it, each slot paced by the rate its
//! writer was seen to write ([`Pacing`], `pace.rs`). Between looks the
//! caller sleeps (`poll` says for how long).
//!
//! Every read goes through [`View::read_slot`] (the ring protocol's reader
//! steps). The accounting is per incarnation of a slot (one generation:
//! one owner thread and one ID) and exact: `read + lost == recorded()`,
//! from the writers' own indices. When a slot went to new owners between
//! two looks, R1 gives how much its earlier owners wrote that no look saw:
//! the rest of the incarnation followed and every owner in between, whose
//! IDs and threads no look saw either. Those samples are counted lost in
//! the incarnation the slot had before (`unseen`; in the new one when the
//! follower had none there), so that over all incarnations read + lost is
//! every sample the region's rings recorded while followed, however short
//! their threads lived; such an incarnation says that its own tail is
//! unknown (`tail_unknown`). `latte serve` counts them in the series of the
//! slot's last owner seen, the same attribution.

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
    /// Samples overwritten before they could be read, `unseen` included.
    pub lost: u64,
    /// Samples this slot's owners wrote that no look saw, counted lost
    /// here (module doc): past `end_idx` by this owner (its unread tail)
    /// and by the owners the slot had before the next look saw it, or,
    /// for the first incarnation the follower saw in a slot, by the owners
    /// before it since following began.
    pub unseen: u64,
    /// The slot was seen closed and read to its end: `end_idx` is all its
    /// owner wrote.
    pub closed: bool,
    /// The slot went to a new owner before it was seen closed: what the old
    /// owner wrote after `end_idx` is unknown.
    pub tail_unknown: bool,
}

impl Incarnation {
    /// Samples recorded over the followed span (read + lost): the owner's
    /// from `start_idx` to `end_idx`, and the `unseen` ones.
    pub fn recorded(&self) -> u64 {
        self.end_idx - self.start_idx + self.unseen
    }
}

/// Per-slot state of a follower.
#[derive(Clone, Copy, Debug, Default)]
struct Followed {
    cur: latte_cursor,
    inc: Incarnation,
    /// An incarnation is being followed (the slot had an owner when seen).
    active: bool,
    /// Samples the slot's owners wrote before following began that R1 will
    /// report as `lost_before` (a slot first seen being assigned).
    before: u64,
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
                // Begin at each owner's index now: what it (and the slot's
                // earlier owners, `base`) wrote before is not part of what
                // is followed.
                for i in 0..used {
                    let s = settled_slot_info(view, i as u32)?;
                    let f = &mut self.slots[i];
                    if s.generation != 0 {
                        f.cur = latte_cursor { generation: s.generation, next: s.write_idx, base: s.gen_base, ..Default::default() };
                    } else {
                        // Still being assigned: R1 will count every
                        // earlier owner's samples, these ones too.
                        f.before = s.gen_base.saturating_add(s.write_idx);
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
        // What earlier owners wrote that no look saw, less what was written
        // before following began.
        let unseen = r.lost_before.saturating_sub(core::mem::take(&mut f.before));
        let mut unseen_here = 0;
        if f.cur.generation != before || !f.active {
            if f.active {
                // The slot went to a new owner before it was seen closed.
                if !f.inc.closed {
                    f.inc.tail_unknown = true;
                }
                if unseen > 0 {
                    // Counted in the incarnation the slot had (module doc).
                    f.inc.unseen += unseen;
                    f.inc.lost += unseen;
                    let inc = f.inc;
                    sink(&inc, &[]);
                }
                self.ended.push(f.inc);
            } else {
                unseen_here = unseen;
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
                unseen: unseen_here,
                lost: unseen_here,
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
        debug_assert_eq!(f.inc.read + f.inc.lost, f.inc.recorded());
        if info.state == LATTE_SLOT_CLOSED && info.generation == f.cur.generation && f.cur.next >= info.write_idx {
            f.inc.closed = true;
        }
        if f.inc.closed {
            self.pacing.idle(i, now); // final: a new owner shows at a look
        } else {
            self.pacing.looked(i, now, f.cur.next, cap);
        }
        if r.read > 0 || r.lost > 0 || unseen_here > 0 {
            let inc = f.inc;
            sink(&inc, &self.buf);
        }
        Ok(())
    }
}

/// Looks at a slot being assigned (generation 0: A1 to A4 under the
/// registry lock, a few stores) again, a bounded number of times, so that
/// where following begins is read from a settled header.
fn settled_slot_info(view: &View, i: u32) -> Result<crate::reader::latte_slot_info, Error> {
    let mut s = view.slot_info(i)?;
    for _ in 0..SETTLE_TRIES {
        if s.generation != 0 {
            break;
        }
        std::thread::yield_now();
        s = view.slot_info(i)?;
    }
    Ok(s)
}

/// Looks `settled_slot_info` takes at most.
const SETTLE_TRIES: u32 = 64;
