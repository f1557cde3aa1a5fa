//! `latte watch TARGET`: live figures of a region, interval by interval,
//! of every sample read during the interval (`read + lost == recorded`).

use crate::exit::{fail, strerror, EXIT_NOT_REGION};
use crate::target::{cycles_per_ns, open, shown};
use crate::term::{emit, field, table, timestamp, Style};
use latte::error::Error;
use latte::layout::*;
use latte::reader::{latte_raw_sample, Cursors, View};
use latte::report;
use latte::stats;
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

/// How often `watch` reads the rings within an interval: its percentiles
/// are of every sample read during the interval, not of the last ring-full.
const WATCH_STEP: Duration = Duration::from_millis(10);

/// Durations kept per ID per interval for the percentiles; past it, every
/// other one is dropped and later ones are kept one in two (then one in
/// four, ...), so that the percentiles are of an evenly spread subset.
const WATCH_KEEP: usize = 1 << 22;

/// Per-ID figures of one interval: `read + lost == recorded`.
#[derive(Default)]
struct Interval {
    name: String,
    read: u64,
    lost: u64,
    /// Samples flagged `LATTE_SAMPLE_SWITCHED`.
    switched: u64,
    durations: Vec<f64>,
    /// One in `stride` durations is kept (see `WATCH_KEEP`).
    stride: u64,
    /// Durations offered since the last one kept.
    skipped: u64,
}

impl Interval {
    fn recorded(&self) -> u64 {
        self.read + self.lost
    }

    fn keep(&mut self, d: f64) {
        self.skipped += 1;
        if self.skipped < self.stride.max(1) {
            return;
        }
        self.skipped = 0;
        if self.durations.len() >= WATCH_KEEP {
            let mut k = 0;
            self.durations.retain(|_| {
                k += 1;
                k % 2 == 0
            });
            self.stride = self.stride.max(1) * 2;
        }
        self.durations.push(d);
    }
}

/// One read of every slot into the interval's figures.
fn watch_read(v: &View, cursors: &mut Cursors, buf: &mut Vec<latte_raw_sample>, per: &mut Vec<Interval>, clean: bool) -> Result<(), Error> {
    let ids = v.ids()?;
    for i in ids.iter().skip(per.len()) {
        per.push(Interval { name: String::from_utf8_lossy(latte::name::name_bytes(&i.name)).into_owned(), ..Default::default() });
    }
    for s in &v.slots()? {
        buf.clear();
        // The reader counts what it returns and what was overwritten
        // before it could (returned + lost = what the write index moved).
        let got = cursors.read(v, s, buf, latte::reader::ReadMode::Live)?;
        if let Some(p) = per.get_mut(s.id_token as usize) {
            p.read += buf.len() as u64;
            // Samples of earlier owners of the ring it never read count too (in
            // the row of the ID the ring holds now: their own ID is not kept).
            p.lost += got.lost + got.lost_before;
            for r in buf.iter() {
                let switched = r.packed & LATTE_SAMPLE_SWITCHED != 0;
                p.switched += switched as u64;
                if !(clean && switched) {
                    p.keep((r.packed & LATTE_MAX_DURATION) as f64);
                }
            }
        }
    }
    Ok(())
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
    let mut m = open(raw)?;
    let target = &report::terminal_text(&shown(raw.as_bytes())).into_owned();
    let v = m.view();
    let pid = v.producer_pid();
    let cpn = if o.time { cycles_per_ns(&v) } else { 0.0 };
    let units = report::Units { unit: if o.time { LATTE_UNIT_TIME } else { LATTE_UNIT_CYCLE }, cycles_per_ns: cpn };
    let shown = Shown { time: o.time, units, cycles_per_ns: cpn };
    // One cursor per slot handed out, grown as slots are (`Cursors`).
    let mut cursors = Cursors::new();
    let mut buf: Vec<latte_raw_sample> = Vec::new();
    skip_present(&v, &mut cursors, &mut buf);
    let fail_read = |e: Error| fail(target, &strerror(e), EXIT_NOT_REGION);
    let mut n = 0u64;
    let mut start = Instant::now();
    let mut next = start + o.every;
    loop {
        let (mut per, alive) = read_interval(&mut m, next, &mut cursors, &mut buf, o.clean).map_err(fail_read)?;
        let end = Instant::now();
        let secs = end.duration_since(start).as_secs_f64().max(1e-9);
        start = end;
        next += o.every;
        n += 1;
        let head = Head { target, pid, alive, n, secs, tracked: m.view().switches_tracked() };
        emit(&render(&head, &mut per, o, &shown, style))?;
        if !alive && !o.follow {
            eprintln!("latte: watch: producer {pid} has exited and every sample is read (--follow keeps watching)");
            return Ok(());
        }
        if o.count > 0 && n >= o.count {
            return Ok(());
        }
    }
}

/// Moves every cursor to the ring's end: watching starts at "now".
fn skip_present(v: &View, cursors: &mut Cursors, buf: &mut Vec<latte_raw_sample>) {
    if let Ok(slots) = v.slots() {
        for s in slots {
            let _ = cursors.read(v, &s, buf, latte::reader::ReadMode::Live);
        }
    }
}

/// Reads every `WATCH_STEP` until `next`, then once more; the interval's
/// figures per ID, and whether the producer was alive at its end.
fn read_interval(
    m: &mut latte::reader::Mapping,
    next: Instant,
    cursors: &mut Cursors,
    buf: &mut Vec<latte_raw_sample>,
    clean: bool,
) -> Result<(Vec<Interval>, bool), Error> {
    let mut per: Vec<Interval> = Vec::new();
    loop {
        let now = Instant::now();
        if next > now {
            std::thread::sleep((next - now).min(WATCH_STEP));
        }
        // Looked at before the interval's last read: when the producer
        // was gone already, that read takes the last samples there will
        // ever be.
        let done = Instant::now() >= next;
        let alive = done && m.producer_alive();
        // The region grows while it is watched: map what it grew by.
        m.refresh()?;
        watch_read(&m.view(), cursors, buf, &mut per, clean)?;
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
        p.durations.sort_by(|a, b| a.total_cmp(b));
        let s = stats::summarize(&p.durations);
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
fn plain_line(h: &Head, stamp: &str, p: &Interval, s: Option<&stats::Summary>, clean: bool, shown: &Shown) -> String {
    let fig = |f: fn(&stats::Summary) -> f64| s.map(|s| shown.plain(f(s))).unwrap_or_else(|| none_text(p).into());
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
fn table_row(h: &Head, p: &Interval, s: Option<&stats::Summary>, shown: &Shown) -> Vec<String> {
    let fig = |f: fn(&stats::Summary) -> f64| s.map(|s| shown.cell(f(s))).unwrap_or_else(|| "-".into());
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
