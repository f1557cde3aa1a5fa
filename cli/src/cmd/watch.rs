//! `latte watch TARGET`: live figures of a region, interval by interval,
//! of every sample read during the interval (`read + lost == recorded`).

use crate::exit::{fail, strerror, EXIT_NOT_REGION};
use crate::target::{cycles_per_ns, open_target, shown, Target};
use crate::term::{emit, field, table, timestamp, Style};
use hdrhistogram::Histogram;
use latte::error::Error;
use latte::layout::*;
use latte::pace::{now_ns, PaceOptions, Pacing};
use latte::reader::{latte_raw_sample, Cursors, View};
use latte::report;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// What `latte watch` was asked for.
pub struct WatchOpts {
    /// The interval.
    pub every: Duration,
    /// Intervals to show (0: until the producer exits, or forever with `follow`).
    pub count: u64,
    /// `key=value` lines instead of a redrawn table.
    pub plain: bool,
    /// Times instead of cycles.
    pub time: bool,
    /// Keep watching after the producer exited.
    pub follow: bool,
    /// Percentiles without the switched samples.
    pub clean: bool,
}

/// Significant decimal digits the percentiles keep: every duration under
/// 2,048 cycles exactly, longer ones within 0.1 % (HdrHistogram's
/// buckets; memory per ID grows with the longest duration, not with the
/// number of samples). The maximum is kept exactly.
const WATCH_DIGITS: u8 = 3;

/// Per-ID figures of one interval: `read + lost == recorded`.
#[derive(Default)]
struct Interval {
    name: String,
    read: u64,
    lost: u64,
    /// Samples flagged `LATTE_SAMPLE_SWITCHED`.
    switched: u64,
    /// Durations read in the interval (without the switched ones with
    /// `--clean`); None until the first.
    durations: Option<Histogram<u64>>,
    /// The longest of them, as recorded (the histogram keeps it to 3
    /// digits).
    max: u64,
}

impl Interval {
    fn recorded(&self) -> u64 {
        self.read + self.lost
    }

    fn keep(&mut self, d: u64) {
        let h = self.durations.get_or_insert_with(|| Histogram::new(WATCH_DIGITS).expect("3 significant digits are within HdrHistogram's 0..=5"));
        // An auto-resizing histogram takes any u64; a failure would be a
        // bug in it, and the duration is then left out of the percentiles.
        let _ = h.record(d);
        self.max = self.max.max(d);
    }

    /// The interval's percentiles; None when no duration was kept.
    fn figures(&self) -> Option<Figures> {
        let h = self.durations.as_ref().filter(|h| !h.is_empty())?;
        // A percentile is the top of its bucket: never above the longest
        // duration recorded.
        let q = |q: f64| h.value_at_quantile(q).min(self.max) as f64;
        Some(Figures { p50: q(0.50), p90: q(0.90), p99: q(0.99), p999: q(0.999), max: self.max as f64 })
    }
}

/// The percentiles shown of one ID in one interval, in cycles.
struct Figures {
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

/// A watch's cursors, one per slot handed out (grown as slots are), and
/// when each slot is due for its next look: each ring is read again when
/// its writer may have filled a quarter of it (`Pacing`), so that the
/// interval's figures are of every sample recorded, even from a thread
/// recording flat out.
struct Follow {
    cursors: Cursors,
    pacing: Pacing,
    buf: Vec<latte_raw_sample>,
}

/// One look at every slot that is due (`all`: at every slot) into the
/// interval's figures; how long (ns) until the next look is due.
fn watch_read(v: &View, f: &mut Follow, per: &mut Vec<Interval>, clean: bool, all: bool) -> Result<u64, Error> {
    let r = watch_look(v, f, per, clean, all);
    // A region truncated under the mapping reads as zeros: no slot handed
    // out, which would pass for an idle region.
    v.whole()?;
    r
}

/// `watch_read`'s look at the slots.
fn watch_look(v: &View, f: &mut Follow, per: &mut Vec<Interval>, clean: bool, all: bool) -> Result<u64, Error> {
    let now = now_ns();
    f.pacing.handed(now, v.slots_used(), v.counters().slot_reuses);
    let used = (v.slots_used() as u64).min(v.slot_capacity()) as u32;
    let cap = v.geo().samples_per_slot as u64;
    for i in 0..used {
        if !all && !f.pacing.is_due(i, now) {
            continue;
        }
        let s = v.slot_info(i)?;
        if s.generation == 0 {
            f.pacing.idle(i, now);
            continue;
        }
        if s.id_token as usize >= per.len() {
            // IDs registered since they were last listed.
            for i in v.ids()?.iter().skip(per.len()) {
                per.push(Interval { name: latte::name::name_text(latte::name::name_bytes(&i.name)), ..Default::default() });
            }
        }
        f.buf.clear();
        // The reader counts what it returns and what was overwritten
        // before it could (returned + lost = what the write index moved).
        let got = f.cursors.read(v, &s, &mut f.buf, latte::reader::ReadMode::Live)?;
        let next = f.cursors.get(i).map_or(0, |c| c.next);
        f.pacing.read_to(i, now, next, s.write_idx, s.state == LATTE_SLOT_CLOSED, cap);
        if let Some(p) = per.get_mut(s.id_token as usize) {
            p.read += f.buf.len() as u64;
            // Samples of earlier owners of the ring it never read count too (in
            // the row of the ID the ring holds now: their own ID is not kept).
            p.lost += got.lost + got.lost_before;
            for r in f.buf.iter() {
                let switched = r.packed & LATTE_SAMPLE_SWITCHED != 0;
                p.switched += switched as u64;
                if !(clean && switched) {
                    p.keep(r.packed & LATTE_MAX_DURATION);
                }
            }
        }
    }
    Ok(f.pacing.wait_ns(now, used as usize))
}

/// How one figure is shown: a table cell carries its unit, a plain field a
/// number and its unit.
struct Shown {
    time: bool,
    units: report::Units,
    cycles_per_ns: f64,
}

impl Shown {
    fn cell(&self, c: f64) -> String {
        if self.time {
            self.units.show(c)
        } else {
            format!("{} cycles", report::format_cycles(c))
        }
    }

    fn plain(&self, c: f64) -> String {
        if self.time {
            format!("{:.1}ns", c / self.cycles_per_ns)
        } else {
            format!("{c:.0}cycles")
        }
    }
}

/// Watches `raw` until the producer exits (or `o.count` intervals, or
/// forever with `o.follow`).
pub fn run(raw: &OsStr, o: &WatchOpts, style: Style) -> Result<(), ExitCode> {
    let (kind, mut m) = open_target(raw)?;
    let target = &report::terminal_text(&shown(raw.as_bytes())).into_owned();
    let v = m.view();
    let mut pid = v.producer_pid();
    let cpn = if o.time { cycles_per_ns(&v) } else { 0.0 };
    let units = report::Units { unit: if o.time { LATTE_UNIT_TIME } else { LATTE_UNIT_CYCLE }, cycles_per_ns: cpn };
    let shown = Shown { time: o.time, units, cycles_per_ns: cpn };
    let mut f = Follow { cursors: Cursors::new(), pacing: Pacing::new(PaceOptions::many()), buf: Vec::new() };
    skip_present(&v, &mut f.cursors, &mut f.buf);
    // The rings are read on a thread of their own, so that no interval's
    // rendering keeps them unread.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Read, Error>>(2);
    let (every, clean) = (o.every, o.clean);
    // With --follow, a region whose producer exited is followed to the
    // producer that takes its name over (a restart).
    let rename = match kind {
        Target::Region(n) if o.follow => Some(n),
        _ => None,
    };
    let reading = std::thread::spawn(move || follow_intervals(&mut m, &mut f, every, clean, rename.as_deref(), &tx));
    let mut n = 0u64;
    // The reading thread ends after an error, sent first, or a panic (a
    // bug), which ends the loop below without one.
    while let Ok(got) = rx.recv() {
        let Read { mut per, alive, secs, tracked, new_pid } = got.map_err(|e| fail(target, &strerror(e), EXIT_NOT_REGION))?;
        n += 1;
        // The interval is the old producer's; the next ones the new one's.
        let head = Head { target, pid, alive, n, secs, tracked };
        emit(&render(&head, &mut per, o, &shown, style))?;
        if let Some(p) = new_pid {
            eprintln!("latte: watch: {target} was taken over by a new producer (pid {p}): following it from its first sample");
            pid = p;
        }
        if !alive && !o.follow {
            eprintln!("latte: watch: producer {pid} has exited and every sample is read (--follow keeps watching)");
            return Ok(());
        }
        if o.count > 0 && n >= o.count {
            return Ok(());
        }
    }
    let why = match reading.join() {
        Err(_) => "the reading thread failed",
        Ok(()) => "the reading thread ended",
    };
    Err(fail(target, why, crate::exit::EXIT_OTHER))
}

/// One interval as read.
struct Read {
    per: Vec<Interval>,
    /// The producer was alive at the interval's end.
    alive: bool,
    /// The interval's length in seconds.
    secs: f64,
    /// The producer tracks switches.
    tracked: bool,
    /// Set when, after this interval, the region's name was found taken
    /// over by a new producer (its pid), which the next intervals follow.
    new_pid: Option<u32>,
}

/// The reading thread: reads interval after interval and sends each, until
/// an error (sent) or the receiver is gone. With `rename` (a region name,
/// --follow), once the producer is gone it looks whether a new producer
/// took the name over, and follows that one from its first sample.
fn follow_intervals(
    m: &mut latte::reader::Mapping,
    f: &mut Follow,
    every: Duration,
    clean: bool,
    rename: Option<&[u8]>,
    tx: &std::sync::mpsc::SyncSender<Result<Read, Error>>,
) {
    latte::pace::tight_timer_slack();
    let mut start = Instant::now();
    let mut next = start + every;
    // After a takeover: when the new producer made its region (CLOCK_REALTIME
    // ns). The first interval then holds every sample it recorded since, so
    // its rates are over that span when it is the longer.
    let mut new_since: Option<u64> = None;
    loop {
        let got = read_interval(m, next, f, clean).map(|(per, alive)| {
            let end = Instant::now();
            let mut secs = end.duration_since(start).as_secs_f64().max(1e-9);
            if let Some(born) = new_since.take() {
                secs = secs.max(realtime_ns().saturating_sub(born) as f64 / 1e9);
            }
            start = end;
            let tracked = m.view().switches_tracked();
            let new_pid = match rename {
                Some(name) if !alive => taken_over(m, name).map(|new| {
                    *m = new;
                    *f = Follow { cursors: Cursors::new(), pacing: Pacing::new(PaceOptions::many()), buf: Vec::new() };
                    new_since = Some(m.view().anchor_realtime_ns());
                    m.view().producer_pid()
                }),
                _ => None,
            };
            Read { per, alive, secs, tracked, new_pid }
        });
        next += every;
        let failed = got.is_err();
        if tx.send(got).is_err() || failed {
            return;
        }
    }
}

/// CLOCK_REALTIME now, in ns (the clock of a region's `anchor_realtime_ns`).
fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The region now under `name` when it is another object than `m`'s: the
/// name was taken over (its producer may have exited already; what it
/// recorded is read all the same).
fn taken_over(m: &latte::reader::Mapping, name: &[u8]) -> Option<latte::reader::Mapping> {
    let new = latte::reader::Mapping::open_shm(name).ok()?;
    (!new.is_same_object(m)).then_some(new)
}

/// Moves every cursor to the ring's end: watching starts at "now".
fn skip_present(v: &View, cursors: &mut Cursors, buf: &mut Vec<latte_raw_sample>) {
    if let Ok(slots) = v.slots() {
        for s in slots {
            let _ = cursors.read(v, &s, buf, latte::reader::ReadMode::Live);
        }
    }
}

/// Reads each ring as it comes due until `next`, then every ring once
/// more; the interval's figures per ID, and whether the producer was alive
/// at its end.
fn read_interval(m: &mut latte::reader::Mapping, next: Instant, f: &mut Follow, clean: bool) -> Result<(Vec<Interval>, bool), Error> {
    let mut per: Vec<Interval> = Vec::new();
    let mut wait = Duration::ZERO;
    loop {
        let now = Instant::now();
        if next > now {
            std::thread::sleep((next - now).min(wait));
        }
        // Looked at before the interval's last read: when the producer
        // was gone already, that read takes the last samples there will
        // ever be.
        let done = Instant::now() >= next;
        let alive = done && m.producer_alive();
        // The region grows while it is watched: map what it grew by.
        m.refresh()?;
        wait = Duration::from_nanos(watch_read(&m.view(), f, &mut per, clean, done)?);
        if done {
            return Ok((per, alive));
        }
    }
}

/// What the first line of an interval says.
struct Head<'a> {
    target: &'a str,
    pid: u32,
    alive: bool,
    /// The interval's number, from 1.
    n: u64,
    /// Its length in seconds.
    secs: f64,
    /// The producer tracks switches.
    tracked: bool,
}

/// The text of one interval: plain lines, or the table redrawn.
fn render(h: &Head, per: &mut [Interval], o: &WatchOpts, shown: &Shown, style: Style) -> String {
    let stamp = timestamp(std::time::SystemTime::now());
    let mut text = String::new();
    let mut table_rows = Vec::new();
    let (mut lost_all, mut recorded_all) = (0u64, 0u64);
    for p in per.iter_mut() {
        if latte::name::is_reserved_name(p.name.as_bytes()) || p.recorded() == 0 {
            continue;
        }
        lost_all += p.lost;
        recorded_all += p.recorded();
        let s = p.figures();
        if o.plain {
            text.push_str(&plain_line(h, &stamp, p, s.as_ref(), o.clean, shown));
        } else {
            table_rows.push(table_row(h, p, s.as_ref(), shown));
        }
    }
    if o.plain {
        if text.is_empty() {
            text = format!("time={stamp} interval={} state=idle\n", h.n);
        }
        return text;
    }
    text.push_str("\x1b[H\x1b[2J");
    text.push_str(&format!(
        "latte watch {}  pid {} ({})  every {:.3} s  #{}  {}{}\n",
        h.target,
        h.pid,
        if h.alive { "alive" } else { "exited" },
        o.every.as_secs_f64(),
        h.n,
        if o.time { "times" } else { "cycles" },
        if o.clean { "  clean: percentiles without switched samples" } else { "" }
    ));
    // Loss is said on a line of its own too, so that no width hides it.
    if lost_all > 0 {
        text.push_str(&format!("LOST {lost_all} of {recorded_all} samples recorded this interval (overwritten before they were read)\n"));
    }
    text.push_str(&table(&["ID", "RECORDED", "READ", "LOST", "P50", "P99", "MAX", "SWITCHED", "P99.9", "P90"], "lrrrrrrrrr", &table_rows, style.width));
    text
}

/// Percentiles of nothing (nothing read, or --clean and every sample read
/// switched out) say so instead of showing 0.
fn none_text(p: &Interval) -> &'static str {
    if p.read == 0 {
        "none-read"
    } else {
        "none-left"
    }
}

/// Share of the samples read that are switched, in percent.
fn switched_share(p: &Interval) -> f64 {
    if p.read == 0 {
        0.0
    } else {
        100.0 * p.switched as f64 / p.read as f64
    }
}

/// One ID's `key=value` line.
fn plain_line(h: &Head, stamp: &str, p: &Interval, s: Option<&Figures>, clean: bool, shown: &Shown) -> String {
    let fig = |f: fn(&Figures) -> f64| s.map(|s| shown.plain(f(s))).unwrap_or_else(|| none_text(p).into());
    let switched = if h.tracked { format!("switched={} switched_share={:.1}%", p.switched, switched_share(p)) } else { "switched=not-tracked".into() };
    format!(
        "time={stamp} interval={} id={} recorded_rate={:.1}/s read_rate={:.1}/s recorded={} read={} lost={} p50={} p90={} p99={} p999={} max={} {switched}{}\n",
        h.n,
        field(&p.name),
        p.recorded() as f64 / h.secs,
        p.read as f64 / h.secs,
        p.recorded(),
        p.read,
        p.lost,
        fig(|s| s.p50),
        fig(|s| s.p90),
        fig(|s| s.p99),
        fig(|s| s.p999),
        fig(|s| s.max),
        if clean { format!(" left={}", p.read - p.switched) } else { String::new() },
    )
}

/// One ID's table row.
fn table_row(h: &Head, p: &Interval, s: Option<&Figures>, shown: &Shown) -> Vec<String> {
    let fig = |f: fn(&Figures) -> f64| s.map(|s| shown.cell(f(s))).unwrap_or_else(|| "-".into());
    vec![
        report::terminal_text(&p.name).into_owned(),
        format!("{:.1}/s", p.recorded() as f64 / h.secs),
        format!("{:.1}/s", p.read as f64 / h.secs),
        p.lost.to_string(),
        s.map(|s| shown.cell(s.p50)).unwrap_or_else(|| none_text(p).replace('-', " ")),
        fig(|s| s.p99),
        fig(|s| s.max),
        if h.tracked { format!("{} ({:.1}%)", p.switched, switched_share(p)) } else { "not tracked".into() },
        fig(|s| s.p999),
        fig(|s| s.p90),
    ]
}
