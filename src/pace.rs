//! Pacing a reader that follows live rings: when each slot is due for its
//! next look, from the rate its writer was seen to write.
//!
//! A ring of 65,536 samples written by a thread recording flat out (~36 M
//! spans/s) laps in under 2 ms; one read every 100 ms then keeps 2 % of
//! what was written. A slot is looked at again after the time its writer
//! needs, at the fastest rate seen lately, to fill `fill` of the ring (a
//! quarter by default: a writer may speed up four times between two looks
//! and still lose nothing), never sooner than `min_interval_ns` and never
//! later than `max_interval_ns`. Between looks the reader sleeps
//! ([`Pacing::wait_ns`] says how long), so a region whose writers are slow
//! costs one look per slot per `max_interval_ns`.
//!
//! The readers that follow rings on their own pace them with this: the
//! `Follower` (`latte record`), and `latte serve` and `latte watch` over
//! their own cursors.

/// How a reader paces its looks.
#[derive(Clone, Copy, Debug)]
pub struct PaceOptions {
    /// Shortest time between two looks at one slot (ns).
    pub min_interval_ns: u64,
    /// Longest time between two looks at one slot (ns), and between two
    /// looks for new slots: the look that notices a writer that was idle,
    /// or new, and starts (1 ms: a thread writing 36 M samples/s fills
    /// about 36,000, half a default ring, in that time).
    pub max_interval_ns: u64,
    /// Share of the ring the fastest writer seen lately may fill between
    /// two looks (0 < fill <= 1).
    pub fill: f64,
    /// Longest time between two looks at a slot whose writer wrote nothing
    /// since the look before (ns, at least `max_interval_ns`): such a slot
    /// is looked at half as often at each idle look, down to this. A reader
    /// of many rings whose writers mostly wait sets it higher than
    /// `max_interval_ns`, at the cost of a later first look at a writer
    /// that starts again.
    pub idle_interval_ns: u64,
}

impl Default for PaceOptions {
    fn default() -> Self {
        PaceOptions { min_interval_ns: 50_000, max_interval_ns: 1_000_000, fill: 0.25, idle_interval_ns: 1_000_000 }
    }
}

impl PaceOptions {
    /// The pacing of a reader that watches many regions at once (`latte
    /// serve`, `latte watch`): as the default, but a slot whose writer
    /// waits is looked at down to every `IDLE_INTERVAL_NS`.
    pub fn many() -> PaceOptions {
        PaceOptions { idle_interval_ns: IDLE_INTERVAL_NS, ..PaceOptions::default() }
    }
}

/// The longest interval between two looks at a waiting writer's slot, for
/// a reader of many regions (`PaceOptions::many`): 8 ms, so that a hundred
/// services whose threads wait cost about one look per region per 8 ms.
const IDLE_INTERVAL_NS: u64 = 8_000_000;

/// One slot's pace.
#[derive(Clone, Copy, Debug, Default)]
struct Pace {
    /// CLOCK_MONOTONIC (ns) of the last look, and the writer's index seen
    /// then.
    last_ns: u64,
    last_idx: u64,
    /// Samples per ns: the fastest rate seen lately (halved each look that
    /// sees a slower one). None: not known yet (the next look comes soon).
    rate: Option<f64>,
    /// When the next look is due (ns); 0: at once.
    due_ns: u64,
    /// No writer was seen at the last look (`idle`): the next look that
    /// finds one starts its rate afresh.
    idle: bool,
}

/// The pace of every slot of one region, by slot index (slots not looked
/// at yet are due at once).
#[derive(Clone, Debug, Default)]
pub struct Pacing {
    opts: PaceOptions,
    slots: Vec<Pace>,
    /// The region's slots handed out and slots reused, at the last
    /// `handed` (`wake_idle` when they move).
    handed: (u32, u64),
}

impl Pacing {
    /// No slot looked at yet.
    pub fn new(opts: PaceOptions) -> Pacing {
        Pacing { opts, slots: Vec::new(), handed: (0, 0) }
    }

    /// Slot `i` is due for a look at `now` (ns, CLOCK_MONOTONIC).
    pub fn is_due(&self, i: u32, now: u64) -> bool {
        self.slots.get(i as usize).is_none_or(|p| p.due_ns <= now)
    }

    fn get_mut(&mut self, i: u32) -> &mut Pace {
        let i = i as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, Pace::default());
        }
        &mut self.slots[i]
    }

    /// Slot `i` got a new writer, whose index was `idx` at `now`: its rate
    /// is not known, so it is looked at again soon.
    pub fn restart(&mut self, i: u32, now: u64, idx: u64) {
        let min = self.opts.min_interval_ns;
        *self.get_mut(i) = Pace { last_ns: now, last_idx: idx, rate: None, due_ns: now + min, idle: false };
    }

    /// Slot `i` has no writer (unassigned, or closed and read to its end):
    /// looked at again after the longest interval, the bound for finding
    /// its next writer.
    pub fn idle(&mut self, i: u32, now: u64) {
        let max = self.opts.max_interval_ns;
        let p = self.get_mut(i);
        p.rate = Some(0.0);
        p.due_ns = now + max;
        p.idle = true;
    }

    /// The region's slots handed out and slots reused, as seen at `now`
    /// (`latte_region_header::slots_used`, `slot_reuses`): when either
    /// moved since the last call, every slot that had no writer at its last
    /// look is due at once (`wake_idle`). Returns whether they moved.
    pub fn handed(&mut self, now: u64, slots_used: u32, slot_reuses: u64) -> bool {
        let moved = (slots_used, slot_reuses) != self.handed;
        if moved {
            self.handed = (slots_used, slot_reuses);
            self.wake_idle(now);
        }
        moved
    }

    /// Slot `i` (a ring of `cap` samples) was read at `now` up to index
    /// `next`, of a writer whose index was `write_idx` and whose ring was
    /// `closed`: read to its end, it has no writer any more (`idle`);
    /// otherwise `looked`.
    pub fn read_to(&mut self, i: u32, now: u64, next: u64, write_idx: u64, closed: bool, cap: u64) {
        if closed && next >= write_idx {
            self.idle(i, now);
        } else {
            self.looked(i, now, next, cap);
        }
    }

    /// Every slot that had no writer at its last look is due at `now`
    /// (the caller saw slots handed out or reused since).
    fn wake_idle(&mut self, now: u64) {
        for p in self.slots.iter_mut().filter(|p| p.idle) {
            p.due_ns = p.due_ns.min(now);
        }
    }

    /// Slot `i` (a ring of `cap` samples) was looked at `now`, its writer's
    /// index then `idx`: its rate is updated and its next look set.
    /// A slot looked at for the first time, or the first time since it had
    /// no writer, starts afresh (`restart`).
    pub fn looked(&mut self, i: u32, now: u64, idx: u64, cap: u64) {
        let p = *self.get_mut(i);
        if p.idle || p.last_ns == 0 {
            return self.restart(i, now, idx);
        }
        let mut rate = p.rate;
        let waiting = idx == p.last_idx;
        let dt = now.saturating_sub(p.last_ns);
        let (mut last_ns, mut last_idx) = (p.last_ns, p.last_idx);
        if idx < p.last_idx {
            // A new writer since (its index began again): unknown rate.
            rate = None;
            (last_ns, last_idx) = (now, idx);
        } else if dt > 0 {
            let inst = (idx - p.last_idx) as f64 / dt as f64;
            rate = Some(inst.max(p.rate.unwrap_or(0.0) * 0.5));
            (last_ns, last_idx) = (now, idx);
        }
        let longest = if waiting { self.opts.idle_interval_ns } else { self.opts.max_interval_ns };
        let due_ns = now + self.interval(rate, cap, longest);
        *self.get_mut(i) = Pace { last_ns, last_idx, rate, due_ns, idle: false };
    }

    /// How long (ns) from `now` until the first of slots `0..n` is due,
    /// at most the longest interval (when a new slot may be looked for).
    pub fn wait_ns(&self, now: u64, n: usize) -> u64 {
        self.wait_within(now, n, self.opts.max_interval_ns)
    }

    /// As `wait_ns`, at most `longest` (a reader that looks for new slots
    /// less often in a region whose writers all wait).
    pub fn wait_within(&self, now: u64, n: usize, longest: u64) -> u64 {
        let mut wait = longest;
        for i in 0..n {
            match self.slots.get(i) {
                Some(p) => wait = wait.min(p.due_ns.saturating_sub(now)),
                None => return 0,
            }
        }
        wait
    }

    /// The interval (ns) for a slot of `cap` samples written at `rate`
    /// (None: not known yet), at most `longest`.
    fn interval(&self, rate: Option<f64>, cap: u64, longest: u64) -> u64 {
        let o = &self.opts;
        let Some(rate) = rate else {
            return o.min_interval_ns;
        };
        let t = if rate > 0.0 { o.fill * cap as f64 / rate } else { f64::INFINITY };
        (t.min(u64::MAX as f64) as u64).clamp(o.min_interval_ns, longest.max(o.min_interval_ns))
    }
}

/// Makes the calling thread's sleeps end when asked, not up to the default
/// 50 us of timer slack later: a reader that paces rings sleeps fractions
/// of a millisecond, and a ring of a flat-out writer laps in under 2 ms.
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a value and touches no memory; it
    // applies to the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// CLOCK_MONOTONIC now, in ns: the clock paces are kept in.
pub fn now_ns() -> u64 {
    crate::tsc::clock_ns(libc::CLOCK_MONOTONIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_follow_the_rate_within_bounds() {
        let p = Pacing::new(PaceOptions::default());
        // 36 M/s on a ring of 65,536: a quarter of it in ~455 us.
        let m = 1_000_000;
        let iv = p.interval(Some(0.036), 65536, m);
        assert!((440_000..470_000).contains(&iv), "{iv}");
        assert_eq!(p.interval(None, 65536, m), 50_000, "unknown rate: look soon");
        assert_eq!(p.interval(Some(0.0), 65536, m), 1_000_000, "idle: the longest interval");
        assert_eq!(p.interval(Some(1e-9), 65536, m), 1_000_000);
        assert_eq!(p.interval(Some(10.0), 65536, m), 50_000, "never faster than the minimum");
    }

    #[test]
    fn a_slot_is_due_when_its_writer_fills_a_quarter() {
        let mut p = Pacing::new(PaceOptions::default());
        assert!(p.is_due(3, 0), "never looked at: due");
        assert_eq!(p.wait_ns(0, 4), 0);
        // A first look knows no rate yet: the next comes after the minimum.
        p.looked(5, 7_000_000, 123, 65_536);
        assert_eq!(p.wait_ns(7_000_000, 6), 0, "slots 0..5 never looked at are due");
        assert!(!p.is_due(5, 7_040_000) && p.is_due(5, 7_050_000));
        p.restart(0, 1_000, 0);
        assert!(!p.is_due(0, 1_000) && p.is_due(0, 51_000));
        // 36,000 samples in 1 ms: 36 M/s; a quarter of 65,536 in ~455 us.
        p.looked(0, 1_001_000, 36_000, 65_536);
        assert!(!p.is_due(0, 1_400_000) && p.is_due(0, 1_500_000));
        // A slower look halves the remembered rate, no more.
        p.looked(0, 2_001_000, 36_001, 65_536);
        let w = p.wait_ns(2_001_000, 1);
        assert!((900_000..=1_000_000).contains(&w), "{w}");
        // The index began again: a new writer, looked at soon.
        p.looked(0, 3_000_000, 5, 65_536);
        assert_eq!(p.wait_ns(3_000_000, 1), 50_000);
        p.idle(0, 4_000_000);
        assert_eq!(p.wait_ns(4_000_000, 1), 1_000_000);
        // Slots handed out or reused since: the idle ones are due at once.
        assert!(!p.is_due(0, 4_100_000));
        assert!(p.handed(4_100_000, 1, 0), "a slot handed out since");
        assert!(p.is_due(0, 4_100_000));
        assert!(!p.handed(4_100_000, 1, 0), "nothing moved since");
        // The first look after idling starts afresh: looked at again soon.
        p.looked(0, 4_100_000, 999_999, 65_536);
        assert_eq!(p.wait_ns(4_100_000, 1), 50_000);
        // A closed ring read to its end has no writer; one read short of
        // its end, or still open, is looked at again by its rate.
        p.read_to(0, 4_200_000, 999_999, 999_999, true, 65_536);
        assert_eq!(p.wait_ns(4_200_000, 1), 1_000_000);
        p.read_to(1, 4_200_000, 10, 20, true, 65_536);
        assert_eq!(p.wait_ns(4_200_000, 2), 50_000);
    }

    #[test]
    fn a_waiting_writer_is_looked_at_less_often_down_to_the_idle_interval() {
        let mut p = Pacing::new(PaceOptions::many());
        p.restart(0, 1_000, 0);
        p.looked(0, 1_001_000, 36_000, 65_536);
        let mut now = 1_001_000;
        let mut waits = Vec::new();
        for _ in 0..10 {
            now += p.wait_ns(now, 1).max(1);
            while !p.is_due(0, now) {
                now += 1_000_000;
            }
            p.looked(0, now, 36_000, 65_536);
            waits.push(p.slots[0].due_ns - now);
        }
        assert!(waits.windows(2).all(|w| w[1] >= w[0]), "{waits:?}");
        assert_eq!(*waits.last().unwrap(), IDLE_INTERVAL_NS, "{waits:?}");
        // Writing again: the longest interval is the ordinary one.
        now += IDLE_INTERVAL_NS;
        p.looked(0, now, 36_010, 65_536);
        assert!(p.slots[0].due_ns - now <= 1_000_000);
        // The wait between looks for new slots stays the ordinary longest.
        assert!(p.wait_ns(now, 1) <= 1_000_000);
    }
}
