//! What `latte serve` exports, and how it reads it: the regions it watches
//! (those named, or every latte region in /dev/shm, re-scanned), a read pass
//! over them every interval through the reader's cursors, with each ring
//! read again between passes as its writer fills it (`State::follow`), and
//! the metrics those reads add up, encoded in the OpenMetrics text format
//! by prometheus-client on each scrape.
//!
//! # Counting: each sample once, no scrape at a producer
//! 1. A watched object keeps a cursor per slot (`Cursors`), as `latte watch`
//!    does; `View::read_slot` moves it past what it returns and counts what
//!    was overwritten first as lost (returned + lost = written).
//! 2. Only the reading thread moves cursors (`serve`), under the state's
//!    lock: a pass over every region once per interval (the IDs, the slots,
//!    the counters), and between passes a look at each ring whose writer
//!    may have filled a quarter of it since it was last read (`Pacing`), so
//!    that a thread recording flat out is followed whole while the reading
//!    thread gets its CPU within a quarter of a ring's lap. A scrape copies
//!    what the reads added up under the lock, encodes the copy after, and
//!    never looks at a region, so any number of scrapers cost the
//!    producers nothing, and a scrape and a read never see half of each
//!    other.
//! 3. Objects present at the first scan start at their current end: the
//!    exporter counts from when it started, and a restarted exporter does
//!    not count a ring's contents twice. Objects found (or first readable)
//!    later are read from their beginning: a service that starts after the
//!    exporter loses nothing. A slot with a new owner restarts at 0 (the
//!    reader protocol).
//! 4. When a region's name goes away or comes to refer to another object
//!    (its producer restarted), the old object gets a last pass (step 2)
//!    before its mapping is dropped, and the new object starts at 0 (step
//!    3). The names are looked at again at once when /dev/shm changes
//!    (`serve`, `shm_watch`), so that each incarnation of a quickly
//!    restarting service is seen. Series are keyed by region and ID names, not by object, so they
//!    go on across restarts.
//! 5. Series of a region whose name is gone (and, with `--per-thread`, of
//!    a thread that no open ring of the region holds any more: its ring
//!    closed and read to its end, or handed to another thread) stay
//!    exported for `--keep-gone`, so that scrapers see their last counts,
//!    then go.
//! 6. A region replaced before any pass found it (a producer restarting
//!    faster than the exporter is scheduled) is counted all the same: each
//!    region carries its incarnation under its name and what its
//!    predecessors recorded (`latte_region_header::incarnation`,
//!    `recorded_before`, set by the producer that takes the name over). When
//!    the exporter lets go of a region (step 4) it keeps where the chain
//!    stood (`lineage_end`: that incarnation, and its `recorded_before` plus
//!    what its rings recorded); a name absent at a scan starts a chain at
//!    (0, 0). When the next region it finds under the name is more than one
//!    incarnation further on, the difference of the recorded counts is what
//!    the regions in between recorded: `latte_samples_unseen_total`.
//! 7. A region renamed (`latte_init_shared_region` on a `LATTE_REGION`
//!    region: the same object under a new name) keeps its cursors: when a
//!    name goes away and its object is found under another name, the
//!    object moves there as it is, and only what it records after the move
//!    is counted under the new name. The old name's series keep what was
//!    read under it, as for any name gone (step 5). While both names refer
//!    to the object, the one that holds it keeps it.

use crate::term::label_text;
use latte::layout::{LATTE_MAX_DURATION, LATTE_SLOT_CLOSED};
use latte::pace::now_ns;
use latte::reader::{latte_raw_sample, ReadMode};
use latte::{Error, Mapping, View};
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

mod buckets;
mod encode;
mod object;
mod read;
mod scan;

/// Locks the state; a pass that panicked (caught by `serve`'s reading
/// thread) left it usable.
pub fn lock(s: &std::sync::Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

use buckets::Buckets;
pub use encode::Metrics;
use object::{Held, Object, Rings};
use read::{follow_object, read_object};

/// Finite buckets of the duration histogram (then +Inf).
pub const FINITE_BUCKETS: usize = 63;

/// Upper bound of finite bucket `k`, in nanoseconds: 4 ns * 2^(k/2), from
/// 4 ns to 2^33 ns (8.6 s). Each bucket's upper bound is sqrt(2) times its
/// lower one, so a quantile estimated inside a bucket is within a factor
/// sqrt(2) (-29% .. +41%) of the true one. The bounds are fixed, the same on
/// every host, so that Prometheus can add histograms across hosts.
pub fn bound_ns(k: usize) -> f64 {
    let octave = (4u64 << (k / 2)) as f64;
    if k.is_multiple_of(2) {
        octave
    } else {
        octave * std::f64::consts::SQRT_2
    }
}

/// The region's drop counters that are exported, with their `reason`
/// label and `latte_counters` field (C API names).
const DROP_REASONS: [&str; 5] = ["overflow_start", "orphan_stop", "unfit_id", "no_slot", "late"];

/// Index in `Counts` of the slot reuses (after the drops of `DROP_REASONS`).
const COUNT_REUSES: usize = DROP_REASONS.len();
/// Index in `Counts` of the samples discarded by slot reuses.
const COUNT_REUSE_DISCARDED: usize = COUNT_REUSES + 1;
/// Index in `Counts` of the rings' early laps (a ring that could not grow
/// started over at index 0).
const COUNT_EARLY_LAPS: usize = COUNT_REUSE_DISCARDED + 1;

/// Region counters as last read: the drops of `DROP_REASONS`, then slot
/// reuses (`COUNT_REUSES`), the samples discarded by them
/// (`COUNT_REUSE_DISCARDED`) and early laps (`COUNT_EARLY_LAPS`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct Counts([u64; COUNT_EARLY_LAPS + 1]);

impl Counts {
    fn of(v: &View<'_>) -> Counts {
        let k = v.counters();
        Counts([k.overflow_starts, k.orphan_stops, k.unfit_id_drops, k.no_slot_drops, k.late_drops, k.slot_reuses, k.reuse_discarded, k.early_laps])
    }

    /// Adds what grew from `old` to `new` (a region's counters only grow;
    /// a smaller value, from a hostile writer, adds nothing).
    fn add_growth(&mut self, old: &Counts, new: &Counts) {
        for k in 0..self.0.len() {
            self.0[k] += new.0[k].saturating_sub(old.0[k]);
        }
    }
}

/// One exported series set: the histogram and the sample counters of an ID
/// (and thread, with `--per-thread`) of a region.
#[derive(Clone, Debug)]
struct Series {
    /// Samples per bucket (not cumulative); the last is +Inf.
    buckets: [u64; FINITE_BUCKETS + 1],
    sum_seconds: f64,
    lost: u64,
    /// Samples read that carry `LATTE_SAMPLE_SWITCHED` (their thread was
    /// switched out during them).
    switched: u64,
    /// Of `buckets` and `sum_seconds`: the switched samples' share, for the
    /// histogram split by `switched` (`--split-switched`).
    switched_buckets: [u64; FINITE_BUCKETS + 1],
    switched_sum_seconds: f64,
    /// With `--per-thread`: when the thread was first found holding no open
    /// ring (step 5).
    ended: Option<Instant>,
}

impl Default for Series {
    fn default() -> Series {
        Series {
            buckets: [0; FINITE_BUCKETS + 1],
            sum_seconds: 0.0,
            lost: 0,
            switched: 0,
            switched_buckets: [0; FINITE_BUCKETS + 1],
            switched_sum_seconds: 0.0,
            ended: None,
        }
    }
}

impl Series {
    fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// A series: the ID's label, and the thread's OS id with `--per-thread`.
type SeriesKey = (String, Option<u32>);

/// Everything known about one region name.
#[derive(Clone, Default)]
struct Region {
    /// The object's current mapping, when the name refers to a readable one.
    object: Held,
    /// Why the object under the name cannot be opened (at the last scan).
    unreadable: Option<String>,
    series: BTreeMap<SeriesKey, Series>,
    /// Growth of the region counters since the exporter began watching.
    counts: Counts,
    pid: u32,
    alive: bool,
    /// The producer published its cycles per ns (else the exporter's own
    /// measurement converts cycles to seconds).
    calibrated: bool,
    slots_used: u32,
    slot_capacity: u32,
    /// Bytes of ring memory the producer has committed, and its budget
    /// (None: unlimited, not exported).
    ring_bytes: u64,
    ring_budget: Option<u64>,
    /// The producer tracks switches (`LATTE_REGION_SWITCHES_TRACKED`):
    /// without it no sample is flagged, and the switched figures are not
    /// exported (not tracked is not 0).
    switches_tracked: bool,
    read_errors: u64,
    /// Why the last pass could not read the object (None: it could).
    last_error: Option<String>,
    /// When the name was found gone (step 5).
    gone: Option<Instant>,
    /// Ever mapped: it has metrics to show.
    seen: bool,
    /// IDs past `max_ids` as of the last listing: their samples are in the
    /// `FOLDED` series.
    ids_folded: u64,
    /// Where the chain of regions under the name stood after the last one
    /// the exporter let go of: its incarnation and the samples it and its
    /// predecessors recorded (step 6); (0, 0) for a name whose chain began
    /// after the exporter started; None when not known.
    lineage_end: Option<(u64, u64)>,
    /// Samples recorded by regions of the name the exporter never saw, and
    /// how many regions those were (step 6).
    unseen_samples: u64,
    unseen_regions: u64,
}

/// What `latte serve` was asked for.
pub struct Options {
    /// Region names (`/name`); empty: every latte region in /dev/shm.
    pub regions: Vec<Vec<u8>>,
    pub per_thread: bool,
    pub keep_gone: Duration,
    /// The duration histogram in two series per (ID, thread): label
    /// `switched` "true" (samples whose thread was switched out) and "false".
    pub split_switched: bool,
    /// IDs per region with series of their own (0: all); the others'
    /// samples are folded into one series (`FOLDED`).
    pub max_ids: usize,
}

/// The ID of the series the samples of a region's IDs past `max_ids` are
/// folded into. A lone backslash before a letter other than `x` is never
/// in a name's text (`label_text`), so no ID's series is this one; it is
/// exported with `folded="true"` and no `id` label.
const FOLDED: &str = "\\folded";

/// The state the read passes build and the scrapes encode.
pub struct State {
    opts: Options,
    regions: BTreeMap<Vec<u8>, Region>,
    /// Objects in /dev/shm found not to be latte regions, by name, with
    /// their size then (skipped while the name refers to the same object
    /// of the same size: an object being written, a copy of a region, is
    /// looked at again when it has grown).
    foreign: HashMap<Vec<u8>, ((u64, u64), u64)>,
    /// Cycles per ns measured by the exporter, for regions whose producer
    /// has published none.
    own_cpn: f64,
    scanned: bool,
    last_scan: Option<Instant>,
    buf: Vec<latte_raw_sample>,
    /// Passes ended and rounds of looks that read a ring (`version`).
    version: u64,
    /// Time the reading thread was kept off its CPU, in stalls (`note_stall`, `stall`).
    stalled: Duration,
}

/// The directory shared-memory names live in (glibc's `shm_open`).
const SHM_DIR: &str = "/dev/shm";

/// Step 6 for a region found under a name: the regions of the chain the
/// exporter never saw between the last one it let go of and this one. A
/// name first found after the exporter started has a chain that began
/// after it did.
fn note_unseen(r: &mut Region, v: &View<'_>, from_start: bool) {
    let (incarnation, before) = v.lineage();
    if let Some((seen, end)) = r.lineage_end.or(from_start.then_some((0, 0))) {
        if (seen > 0 || end == 0) && incarnation > seen + 1 {
            r.unseen_regions += incarnation - seen - 1;
            r.unseen_samples += before.saturating_sub(end);
        }
    }
}

/// Step 6: where the chain of regions stands after the one `v` views:
/// its incarnation and what it and its predecessors recorded; None when
/// its incarnation is not known.
fn lineage_end(v: &View<'_>) -> Option<(u64, u64)> {
    let (incarnation, before) = v.lineage();
    if incarnation == 0 {
        return None;
    }
    Some((incarnation, before.saturating_add(v.recorded_total().ok()?)))
}

/// During a pass, how often the looks that came due are taken.
const LOOKS_WITHIN_PASS: Duration = Duration::from_micros(100);

/// How often the names are looked at again, at most.
const RESCAN: Duration = Duration::from_secs(1);

impl State {
    pub fn new(opts: Options, own_cpn: f64) -> State {
        State {
            opts,
            regions: BTreeMap::new(),
            foreign: HashMap::new(),
            own_cpn,
            scanned: false,
            last_scan: None,
            buf: Vec::new(),
            version: 0,
            stalled: Duration::ZERO,
        }
    }

    /// One read pass: looks at the names again when `RESCAN` has passed
    /// (every pass before the first scan), then reads every mapped object.
    pub fn pass(&mut self, now: Instant) {
        if self.last_scan.is_none_or(|t| now.duration_since(t) >= RESCAN) {
            self.last_scan = Some(now);
            self.scan(now);
        }
        let names: Vec<Vec<u8>> = self.regions.keys().cloned().collect();
        let mut looked = Instant::now();
        for name in names {
            let Some(r) = self.regions.get_mut(&name) else { continue };
            if let Some(mut o) = r.object.take() {
                let before = r.last_error.take();
                read_object(r, &mut o, self.opts.per_thread, self.own_cpn, &mut self.buf, now);
                *r.object = Some(o);
                // Said when it starts or changes (counted on every pass).
                if let Some(e) = r.last_error.as_ref().filter(|e| before.as_ref() != Some(*e)) {
                    crate::exit::say("serve", &format!("{}: {e}", label_text(&name)));
                }
            }
            // A pass over many regions lasts longer than a busy ring's lap:
            // the looks that come due meanwhile are taken between regions.
            if looked.elapsed() >= LOOKS_WITHIN_PASS {
                self.follow();
                looked = Instant::now();
            }
        }
        self.version += 1;
    }

    /// The looks due between two passes (`Pacing`): reads every ring whose
    /// writer may have filled a quarter of it since it was last read, so
    /// that a thread recording flat out is followed whole. Returns how long
    /// until the next look is due (None: no region is followed between
    /// passes).
    pub fn follow(&mut self) -> Option<Duration> {
        let now = now_ns();
        let (per_thread, own_cpn, buf) = (self.opts.per_thread, self.own_cpn, &mut self.buf);
        let mut wait = u64::MAX;
        for r in self.regions.values_mut() {
            if let Some(mut o) = r.object.take() {
                let (w, read) = follow_object(r, &mut o, per_thread, own_cpn, buf, now);
                wait = wait.min(w);
                self.version += read as u64;
                *r.object = Some(o);
            }
        }
        (wait != u64::MAX).then(|| Duration::from_nanos(wait))
    }

    /// The reading thread was kept off its CPU for `stall` (more than
    /// `stall::STALL`).
    pub fn note_stall(&mut self, stall: Duration) {
        self.stalled += stall;
    }

    /// The next pass looks at the names again (something changed in
    /// /dev/shm), whenever the last look was.
    pub fn scan_next_pass(&mut self) {
        self.last_scan = None;
    }

    /// Changes so far: passes ended, and rounds of looks that read a ring
    /// (a scrape's text is encoded again only when it moved).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// A name's state after a scan: None when not found, Some(None) when
    /// mapped, Some(Some(why)) when it cannot be opened.
    pub fn unreadable_reason(&self, name: &[u8]) -> Option<Option<&str>> {
        let r = self.regions.get(name)?;
        if r.object.is_some() {
            Some(None)
        } else {
            r.unreadable.as_deref().map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encode::Metrics;
    use super::*;

    #[test]
    fn bounds_double_every_two_buckets_from_4ns_to_8_6s() {
        assert_eq!(bound_ns(0), 4.0);
        assert_eq!(bound_ns(2), 8.0);
        assert!((bound_ns(1) / bound_ns(0) - std::f64::consts::SQRT_2).abs() < 1e-12);
        for k in 1..FINITE_BUCKETS {
            let r = bound_ns(k) / bound_ns(k - 1);
            assert!((r - std::f64::consts::SQRT_2).abs() < 1e-9, "bucket {k}: ratio {r}");
        }
        assert_eq!(bound_ns(FINITE_BUCKETS - 1), (1u64 << 33) as f64);
        // The printed bounds are the shortest decimal of the f64: 4e-9, not 4.000000000000001e-9.
        assert_eq!(format!("{:e}", bound_ns(0) / 1e9), "4e-9");
    }

    #[test]
    fn labels_show_bytes_that_are_not_utf8() {
        assert_eq!(label_text(b"svc.a"), "svc.a");
        assert_eq!(label_text("é \"q\"".as_bytes()), "é \"q\"");
        assert_eq!(label_text(b"a\xffb\xc3"), "a\\xffb\\xc3");
        // A backslash is doubled: the byte 0xFF and the text `\xff` differ.
        assert_eq!(label_text(b"a\\xff"), "a\\\\xff");
    }

    #[test]
    fn counters_add_growth_only() {
        let mut total = Counts::default();
        total.add_growth(&Counts([1, 0, 0, 0, 0, 0, 0, 0]), &Counts([3, 1, 0, 0, 0, 0, 0, 2]));
        total.add_growth(&Counts([3, 1, 0, 0, 0, 0, 0, 2]), &Counts([2, 1, 0, 0, 0, 0, 5, 3]));
        assert_eq!(total, Counts([2, 1, 0, 0, 0, 0, 5, 3]));
    }

    /// The text of a state, through prometheus-client, as a scrape gets it.
    fn text_of(st: State) -> String {
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register_collector(Box::new(Metrics::of(&st)));
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, &reg).unwrap();
        s
    }

    #[test]
    fn histogram_is_cumulative_in_seconds_with_escaped_labels() {
        let mut st = State::new(Options { regions: Vec::new(), per_thread: false, keep_gone: Duration::from_secs(1), split_switched: false, max_ids: 0 }, 1.0);
        let mut r = Region { seen: true, pid: 77, ..Default::default() };
        let mut s = Series::default();
        s.buckets[0] = 2;
        s.buckets[3] = 1;
        s.buckets[FINITE_BUCKETS] = 1;
        s.sum_seconds = 0.5;
        s.lost = 4;
        r.series.insert(("a \"b\"\n".into(), None), s);
        st.regions.insert(b"/svc".to_vec(), r);
        let t = text_of(st);
        assert!(t.contains("# TYPE latte_span_duration_seconds histogram\n"), "{t}");
        let id = "region=\"svc\",id=\"a \\\"b\\\"\\n\"";
        // Cumulative counts, bounds in seconds, the last +Inf.
        assert!(t.contains(&format!("latte_span_duration_seconds_bucket{{le=\"4e-9\",{id}}} 2\n")), "{t}");
        assert!(t.contains(&format!("latte_span_duration_seconds_bucket{{le=\"8e-9\",{id}}} 2\n")), "{t}");
        assert!(t.contains(&format!("latte_span_duration_seconds_bucket{{le=\"1.6e-8\",{id}}} 3\n")), "{t}");
        assert!(t.contains(&format!("latte_span_duration_seconds_bucket{{le=\"8.589934592\",{id}}} 3\n")), "{t}");
        assert!(t.contains(&format!("latte_span_duration_seconds_bucket{{le=\"+Inf\",{id}}} 4\n")), "{t}");
        assert!(t.contains("latte_span_duration_seconds_count{region=\"svc\",id=\"a \\\"b\\\"\\n\"} 4\n"), "{t}");
        assert!(t.contains("latte_samples_recorded_total{region=\"svc\",id=\"a \\\"b\\\"\\n\"} 8\n"), "{t}");
        assert!(t.contains("latte_samples_lost_total{region=\"svc\",id=\"a \\\"b\\\"\\n\"} 4\n"), "{t}");
        assert!(t.contains("latte_producer_info{pid=\"77\",region=\"svc\"} 1\n"), "{t}");
        assert!(t.contains("latte_spans_dropped_total{region=\"svc\",reason=\"no_slot\"} 0\n"), "{t}");
        assert!(t.ends_with("# EOF\n"), "{t}");
        assert_eq!(t.matches("_bucket{").count(), FINITE_BUCKETS + 1);
    }
}
