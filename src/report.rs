//! The report: per component (ID), the samples of every thread, optionally
//! minus the calibrated overhead, through the outlier rule, summarised, and
//! rendered as the box-drawn table of the original Latte (width 136 between
//! the border characters, borders in gray). The C++ `DumpToStream`, the C
//! ABI and the `latte stats` command all print this.

use crate::error::Error;
use crate::layout::*;
use crate::name::is_reserved_name;
use crate::name::name_bytes;
use crate::reader::{latte_raw_sample, latte_slot_info, Calibration, IdInfo, View};
use crate::stats::{summarize, Summary};
use std::fmt::Write;

/// `"512.00 ns"`, `"1.88 us"`, `"3.20 ms"`, `"1.50 s"`, `"2.00 min"`.
pub fn format_time(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.2} ns")
    } else if a < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else if a < 60e9 {
        format!("{:.2} s", ns / 1e9)
    } else {
        format!("{:.2} min", ns / 60e9)
    }
}

/// Cycles: an integer below 1000, else two decimals and K, M, B or T.
pub fn format_cycles(c: f64) -> String {
    let a = c.abs();
    if a < 1e3 {
        format!("{c:.0}")
    } else if a < 1e6 {
        format!("{:.2} K", c / 1e3)
    } else if a < 1e9 {
        format!("{:.2} M", c / 1e6)
    } else if a < 1e12 {
        format!("{:.2} B", c / 1e9)
    } else {
        format!("{:.2} T", c / 1e12)
    }
}

/// How values are shown.
#[derive(Clone, Copy, Debug)]
pub struct Units {
    pub unit: latte_unit,
    pub cycles_per_ns: f64,
}

impl Units {
    pub fn show(&self, cycles: f64) -> String {
        if self.unit == LATTE_UNIT_TIME && self.cycles_per_ns > 0.0 {
            format_time(cycles / self.cycles_per_ns)
        } else {
            format_cycles(cycles)
        }
    }
}

/// One component's figures (all values in cycles).
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub token: u32,
    pub summary: Summary,
    pub outliers: usize,
    /// Samples lost (overwritten before this read) across the component's slots.
    pub lost: u64,
    /// Threads that recorded it.
    pub threads: usize,
    /// Samples read that carry `LATTE_SAMPLE_SWITCHED` (their thread was
    /// switched out during them; only tracked threads flag any).
    pub switched: u64,
    /// The figures leave the switched samples out instead of applying the
    /// outlier rule (`outliers` is then 0). With every sample read switched
    /// out, `summary.count` is 0 and the row says that nothing is left.
    pub clean: bool,
    /// The producer tracked switches (`LATTE_REGION_SWITCHES_TRACKED`);
    /// else `switched` is 0 because nothing was tracked, and shows as such.
    pub tracked: bool,
}

impl Row {
    /// Samples read for this row: the summarised ones and those left out.
    pub fn read(&self) -> u64 {
        (self.summary.count + self.outliers) as u64 + if self.clean { self.switched } else { 0 }
    }

    /// Nothing is left to summarise: `clean`, and every sample read was
    /// switched out.
    pub fn nothing_left(&self) -> bool {
        self.clean && self.summary.count == 0
    }

    /// The SWITCHED cell: `N (x%)`, or `not tracked`.
    pub fn switched_text(&self) -> String {
        if self.tracked {
            format!("{} ({:.1}%)", self.switched, 100.0 * self.switched_share())
        } else {
            "not tracked".into()
        }
    }

    /// The share of the samples read that were switched out (0 when none read).
    pub fn switched_share(&self) -> f64 {
        let n = self.read();
        if n == 0 {
            0.0
        } else {
            self.switched as f64 / n as f64
        }
    }
}

/// A sample with the thread that recorded it (for the trace).
#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub token: u32,
    pub os_tid: u32,
    pub sample: Sample,
}

/// Every sample of every slot, per token (slot by slot, each ring oldest
/// first: the order `Snapshot` returns, so that the report's outlier rule
/// sees what `DataClean(Snapshot(id))` sees), calibration excluded; and
/// every sample as an event, in start order, for the trace. Names indexed
/// by token.
#[derive(Default)]
pub struct Collected {
    pub names: Vec<String>,
    pub hidden: Vec<bool>,
    pub per_token: Vec<Vec<Sample>>,
    pub threads: Vec<std::collections::BTreeSet<u32>>,
    /// Per token: samples recorded but no longer in the rings (overwritten).
    pub lost: Vec<u64>,
    pub events: Vec<Event>,
}

/// Reads everything in a view.
pub fn collect(view: &View) -> Result<Collected, Error> {
    let ids = view.ids()?;
    let n = ids.len();
    let mut c = Collected {
        names: ids.iter().map(|i| String::from_utf8_lossy(name_bytes(&i.name)).into_owned()).collect(),
        hidden: ids.iter().map(|i| is_reserved_name(name_bytes(&i.name))).collect(),
        per_token: vec![Vec::new(); n],
        threads: vec![Default::default(); n],
        lost: vec![0; n],
        events: Vec::new(),
    };
    for (info, raw) in crate::extract::collect(view, None)? {
        let t = info.id_token as usize;
        if t >= n || c.hidden[t] {
            continue;
        }
        c.threads[t].insert(info.thread_idx);
        c.lost[t] += info.write_idx.saturating_sub(raw.len() as u64);
        for r in raw {
            let s = r.decode();
            c.per_token[t].push(s);
            c.events.push(Event { token: info.id_token, os_tid: info.os_tid, sample: s });
        }
    }
    c.events.sort_by_key(|e| (e.sample.start_tsc, e.sample.depth));
    Ok(c)
}

/// Test hook: makes the report's allocation for a component's durations
/// fail, as it would without memory. Exists only with the test-only
/// `internals` feature.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub static FAIL_REPORT_ALLOC: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Rows of every component that has samples, read straight from a view one
/// component at a time: a component's durations (8 bytes a sample) are the
/// only large allocation, and its failure is `-ENOMEM`, never an abort. The
/// samples go through the outlier rule in the order `collect` keeps them
/// (slot by slot, each ring oldest first).
pub fn rows_of_view(view: &View, data: latte_data, cal: &Calibration) -> Result<Vec<Row>, Error> {
    rows_of_view_with(view, data, cal, false)
}

/// `rows_of_view`, or with `clean` the figures of the samples that were not
/// switched out (`LATTE_SAMPLE_SWITCHED`), with no outlier rule: the
/// samples the OS interrupted are known, not guessed.
pub fn rows_of_view_with(view: &View, data: latte_data, cal: &Calibration, clean: bool) -> Result<Vec<Row>, Error> {
    let ids = view.ids()?;
    let slots = view.slots()?;
    let tracked = view.switches_tracked();
    let fin = crate::extract::final_slots(view);
    let mut out = Vec::new();
    let mut raw = Vec::new();
    for id in &ids {
        if is_reserved_name(name_bytes(&id.name)) {
            continue;
        }
        let mine: Vec<latte_slot_info> = slots.iter().filter(|s| s.id_token == id.token).copied().collect();
        if mine.is_empty() {
            continue;
        }
        let c = read_component(view, &fin, &mine, &mut raw, clean)?;
        if let Some(row) = row_of(id, c, data, cal, clean, tracked)? {
            out.push(row);
        }
    }
    Ok(out)
}

/// What the slots of one component held, as `read_component` read them.
struct Component {
    /// Durations of the samples kept (every one read, or with `clean`
    /// those not switched out), in cycles, in the order read.
    durations: Vec<f64>,
    /// The (start mode, stop mode) pair of every sample read; `Some(None)`
    /// for mixed pairs, `None` when none was read.
    pair: Option<Option<usize>>,
    lost: u64,
    switched: u64,
    threads: std::collections::BTreeSet<u32>,
}

/// Reads one component's slots (`mine`) through `extract::read_slots`:
/// its durations, with room for what its rings hold taken at once (no
/// doubling on the way; without memory, `-ENOMEM`).
fn read_component(
    view: &View,
    fin: &crate::extract::Finality,
    mine: &[latte_slot_info],
    raw: &mut Vec<latte_raw_sample>,
    clean: bool,
) -> Result<Component, Error> {
    let holds: u64 = mine.iter().map(|s| s.write_idx.min(view.geo().samples_per_slot as u64)).sum();
    let mut c = Component { durations: Vec::new(), pair: None, lost: 0, switched: 0, threads: Default::default() };
    // Relaxed: a test switch, read on its own.
    #[cfg(feature = "internals")]
    if FAIL_REPORT_ALLOC.load(core::sync::atomic::Ordering::Relaxed) {
        return Err(Error::Os(libc::ENOMEM));
    }
    c.durations.try_reserve_exact(holds as usize).map_err(|_| Error::Os(libc::ENOMEM))?;
    raw.clear();
    crate::extract::read_slots(view, fin, mine, raw, |s, raw, _| {
        c.threads.insert(s.thread_idx);
        c.lost += s.write_idx.saturating_sub(raw.len() as u64);
        c.durations.try_reserve(raw.len()).map_err(|_| Error::Os(libc::ENOMEM))?;
        for r in raw.iter() {
            let smp = r.decode();
            let p = smp.pair_index();
            c.pair = Some(match c.pair {
                None => Some(p),
                Some(Some(q)) if q == p => Some(p),
                _ => None,
            });
            c.switched += smp.switched as u64;
            if !(clean && smp.switched) {
                c.durations.push(smp.duration as f64);
            }
        }
        raw.clear();
        Ok(())
    })?;
    Ok(c)
}

/// One component's row from what its slots held: the calibrated overhead
/// taken off (when every sample has the same pair), then the outlier rule
/// (or with `clean`, none) and the summary. None when nothing is left to
/// show.
fn row_of(id: &IdInfo, mut c: Component, data: latte_data, cal: &Calibration, clean: bool, tracked: bool) -> Result<Option<Row>, Error> {
    let sub = match c.pair {
        Some(Some(p)) if data == LATTE_DATA_CALIBRATED => cal.overhead[p],
        _ => 0.0,
    };
    if sub != 0.0 {
        for d in c.durations.iter_mut() {
            *d = (*d - sub).max(0.0);
        }
    }
    let outliers = if clean {
        c.durations.sort_unstable_by(|a, b| a.total_cmp(b));
        0
    } else {
        crate::stats::data_clean_in_place(&mut c.durations)?.0
    };
    // With `clean`, a component whose every sample read was switched
    // out keeps its row (which says so).
    let summary = match summarize(&c.durations) {
        Some(s) => s,
        None if clean && c.switched > 0 => Summary::default(),
        None => return Ok(None),
    };
    Ok(Some(Row {
        name: String::from_utf8_lossy(name_bytes(&id.name)).into_owned(),
        token: id.token,
        summary,
        outliers,
        lost: c.lost,
        threads: c.threads.len(),
        switched: c.switched,
        clean,
        tracked,
    }))
}

const WIDTH: usize = 136;
const GRAY: &str = "\x1b[90m";
const RESET: &str = "\x1b[0m";

/// Column titles and widths of the standard table.
const COLS: [(&str, usize); 10] =
    [("COMPONENT", 20), ("SAMPLES", 9), ("AVG", 10), ("MEDIAN", 10), ("STD DEV", 10), ("SKEW", 8), ("MIN", 10), ("MAX", 10), ("RANGE", 10), ("OUTLIER", 10)];

/// Extra columns of the extended table (`latte stats`).
const EXTRA_COLS: [(&str, usize); 5] = [("P90", 10), ("P99", 10), ("P99.9", 10), ("LOST", 9), ("SWITCHED", 14)];

/// Title of the self-offset matrix: rows are the start mode, columns the stop mode.
const SELF_OFFSET_TITLE: &str = "SELF-OFFSET H[Start] x W[Stop]";

fn cut(s: &str, w: usize) -> String {
    s.chars().take(w).collect()
}

/// `s` left-aligned (`left`) or right-aligned in `w` characters, cut to `w`.
fn pad(s: &str, w: usize, left: bool) -> String {
    let c = cut(s, w);
    if left {
        format!("{c:<w$}")
    } else {
        format!("{c:>w$}")
    }
}

/// `s` safe to print on a terminal: every control character (an escape
/// sequence's ESC, a newline, C1 controls) written as a visible `\xNN` or
/// `\u{NNNN}`, so that a name someone put in a region cannot move the
/// cursor, recolour or forge lines. The `latte` command prints names
/// through it; the C++ report keeps the original's raw text.
pub fn terminal_text(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if (c as u32) < 0x80 && c.is_control() => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:04X}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The cells of a component's row, in column order.
fn row_cells(r: &Row, units: &Units, extended: bool) -> Vec<String> {
    let s = &r.summary;
    if r.nothing_left() {
        // Every figure would be of no sample: MEDIAN says so (a note under
        // the table says why), the others are blank.
        let mut v = vec![r.name.clone(), "0".into(), "-".into(), "none left".into()];
        v.resize(COLS.len(), "-".into());
        if extended {
            v.extend(["-".into(), "-".into(), "-".into(), r.lost.to_string(), r.switched_text()]);
        }
        return v;
    }
    let mut v = vec![
        r.name.clone(),
        s.count.to_string(),
        units.show(s.mean),
        units.show(s.median),
        units.show(s.std_dev),
        format!("{:.2}", s.skew),
        units.show(s.min),
        units.show(s.max),
        units.show(s.max - s.min),
        r.outliers.to_string(),
    ];
    if extended {
        v.extend([units.show(s.p90), units.show(s.p99), units.show(s.p999), r.lost.to_string(), r.switched_text()]);
    }
    v
}

/// The self-offset matrix's lines (without borders), each `width` wide:
/// a label in 10, three values right-aligned in 14, then padding.
fn self_offset_lines(units: &Units, cal: &Calibration, width: usize) -> Vec<String> {
    if !cal.calibrated {
        // No figures to show: not a matrix of zeros that reads as measured.
        return vec![pad("NOT CALIBRATED: no overhead was measured; nothing is subtracted (the figures are raw)", width, true)];
    }
    let line = |label: &str, vals: [String; 3]| {
        let body = format!("{}{}{}{}", pad(label, 10, true), pad(&vals[0], 14, false), pad(&vals[1], 14, false), pad(&vals[2], 14, false));
        pad(&body, width, true)
    };
    let mut out = vec![pad(SELF_OFFSET_TITLE, width, true), line("", ["F".into(), "M".into(), "H".into()])];
    let modes = [LATTE_MODE_FAST, LATTE_MODE_MID, LATTE_MODE_HARD];
    for (start, label) in modes.into_iter().zip(["F", "M", "H"]) {
        out.push(line(label, modes.map(|stop| units.show(cal.pair(start, stop)))));
    }
    out.push(line("PULSE", [units.show(cal.pulse()), String::new(), String::new()]));
    out
}

/// Options of a rendering.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub unit: latte_unit,
    pub data: latte_data,
    /// Add percentile and loss columns and the counters (the command's view).
    pub extended: bool,
    /// Gray borders (ANSI escapes); off for pipes and `NO_COLOR`.
    pub color: bool,
    /// The widest line allowed: columns are dropped, least useful first,
    /// until the table fits (and the dropped ones are named under it).
    /// None: every column.
    pub max_width: Option<usize>,
}

fn title(opts: &Options) -> String {
    format!(
        "LATTE TELEMETRY [{}][{}]",
        if opts.unit == LATTE_UNIT_TIME { "TIME" } else { "CYCLES" },
        if opts.data == LATTE_DATA_CALIBRATED { "CAL" } else { "RAW" }
    )
}

/// The original Latte's table, as `DumpToStream` prints it: ASCII borders
/// (`#`/`=` around the title and at the end, `|`/`-` elsewhere; in gray
/// with `color`, the original's bytes), a leading line feed, cells joined
/// by ` | `, width 136 between the border characters. Only the standard
/// columns.
pub fn render_classic(rows: &[Row], unit: latte_unit, data: latte_data, cal: &Calibration, color: bool) -> String {
    let opts = Options { unit, data, extended: false, color, max_width: None };
    let units = Units { unit, cycles_per_ns: cal.cycles_per_ns };
    let (gray, reset) = paint(color);
    let g = |s: &str| format!("{gray}{s}{reset}");
    let rule = |c: char| format!("{}{}{}\n", g(if c == '=' { "#" } else { "|" }), g(&c.to_string().repeat(WIDTH)), g(if c == '=' { "#" } else { "|" }));
    let row = |cells: &[String]| {
        let joined = cells.join(&g(" | "));
        format!("{} {} {}\n", g("|"), joined, g("|"))
    };
    let mut out = String::from("\n");
    out.push_str(&rule('='));
    out.push_str(&row(&[pad(&title(&opts), WIDTH - 2, true)]));
    out.push_str(&rule('='));
    if data == LATTE_DATA_CALIBRATED {
        for l in self_offset_lines(&units, cal, WIDTH - 2) {
            out.push_str(&row(&[l]));
        }
        out.push_str(&rule('-'));
    }
    let head: Vec<String> = COLS.iter().enumerate().map(|(k, (t, w))| pad(t, *w, k == 0)).collect();
    out.push_str(&row(&head));
    out.push_str(&rule('-'));
    for r in rows {
        let cells: Vec<String> = row_cells(r, &units, false).iter().zip(COLS.iter()).enumerate().map(|(k, (c, (_, w)))| pad(c, *w, k == 0)).collect();
        out.push_str(&row(&cells));
    }
    out.push_str(&rule('='));
    out
}

/// Gray and reset escapes, or nothing.
fn paint(color: bool) -> (&'static str, &'static str) {
    if color {
        (GRAY, RESET)
    } else {
        ("", "")
    }
}

fn border(out: &mut String, color: bool, left: char, mid: char, right: char, widths: &[usize]) {
    let (g, r) = paint(color);
    out.push_str(g);
    out.push(left);
    for (k, w) in widths.iter().enumerate() {
        if k > 0 {
            out.push(mid);
        }
        out.extend(std::iter::repeat_n('─', w + 2));
    }
    out.push(right);
    out.push_str(r);
    out.push('\n');
}

fn full_line(out: &mut String, color: bool, text: &str, width: usize, center: bool) {
    let (g, r) = paint(color);
    let t = cut(text, width - 2);
    let pad = width - 2 - t.chars().count();
    let (l, rt) = if center { (pad / 2, pad - pad / 2) } else { (0, pad) };
    let _ = writeln!(out, "{g}│{r} {}{}{} {g}│{r}", " ".repeat(l), t, " ".repeat(rt));
}

fn cells(out: &mut String, color: bool, cells: &[String], widths: &[usize]) {
    let (g, r) = paint(color);
    out.push_str(g);
    out.push('│');
    out.push_str(r);
    for (k, (c, &w)) in cells.iter().zip(widths).enumerate() {
        let _ = write!(out, " {} ", pad(c, w, k == 0));
        out.push_str(g);
        out.push('│');
        out.push_str(r);
    }
    out.push('\n');
}

/// The order in which columns are dropped to fit a width (first dropped
/// first); COMPONENT is always kept.
const DROP_ORDER: [&str; 14] = ["SKEW", "RANGE", "OUTLIER", "STD DEV", "P90", "MIN", "AVG", "LOST", "SWITCHED", "P99.9", "MAX", "P99", "MEDIAN", "SAMPLES"];

/// Width of a box-drawn table's lines with these column widths.
fn table_width(widths: &[usize]) -> usize {
    widths.iter().map(|w| w + 3).sum::<usize>() + 1
}

/// `items` joined by two spaces, in lines no wider than `width` (when given).
fn wrap(items: &[String], width: Option<usize>) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for it in items {
        if !line.is_empty() && width.is_some_and(|w| line.chars().count() + 2 + it.chars().count() > w) {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push_str("  ");
        }
        line.push_str(it);
    }
    if !line.is_empty() {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The `latte` command's table: box-drawn, with percentile and loss
/// columns and the counters when `opts.extended`, fitted to
/// `opts.max_width`.
pub fn render(rows: &[Row], opts: &Options, cal: &Calibration, counters: Option<&crate::counters::latte_counters>) -> String {
    let units = Units { unit: opts.unit, cycles_per_ns: cal.cycles_per_ns };
    let mut cols: Vec<(&str, usize)> = COLS.to_vec();
    if opts.extended {
        cols.extend_from_slice(&EXTRA_COLS);
    }
    let mut keep = vec![true; cols.len()];
    let mut dropped = Vec::new();
    if let Some(max) = opts.max_width {
        for name in DROP_ORDER {
            let widths: Vec<usize> = cols.iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| c.1).collect();
            if table_width(&widths) <= max {
                break;
            }
            if let Some(i) = cols.iter().position(|c| c.0 == name) {
                keep[i] = false;
                dropped.push(name);
            }
        }
    }
    let pick = |v: Vec<String>| -> Vec<String> { v.into_iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| c).collect() };
    let shown: Vec<(&str, usize)> = cols.iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| *c).collect();
    let widths: Vec<usize> = shown.iter().map(|c| c.1).collect();
    let inner = table_width(&widths) - 2;
    debug_assert!(opts.extended || opts.max_width.is_some() || inner == WIDTH);
    let c = opts.color;
    let mut out = String::new();
    border(&mut out, c, '┌', '─', '┐', &[inner - 2]);
    full_line(&mut out, c, &title(opts), inner, true);
    if opts.data == LATTE_DATA_CALIBRATED {
        border(&mut out, c, '├', '─', '┤', &[inner - 2]);
        for l in self_offset_lines(&units, cal, inner - 2) {
            full_line(&mut out, c, &l, inner, false);
        }
    }
    border(&mut out, c, '├', '┬', '┤', &widths);
    cells(&mut out, c, &shown.iter().map(|c| c.0.to_string()).collect::<Vec<_>>(), &widths);
    border(&mut out, c, '├', '┼', '┤', &widths);
    for r in rows {
        let mut v = row_cells(r, &units, opts.extended);
        v[0] = terminal_text(&v[0]).into_owned();
        cells(&mut out, c, &pick(v), &widths);
    }
    border(&mut out, c, '└', '┴', '┘', &widths);
    if opts.extended && rows.iter().any(|r| r.clean) {
        out.push_str(&wrap(&["clean: samples switched out (SWITCHED) are left out of the figures; no outlier rule".to_string()], opts.max_width));
        for r in rows.iter().filter(|r| r.nothing_left()) {
            let note = format!("{}: every sample read ({}) was switched out: none left", terminal_text(&r.name), r.switched);
            out.push_str(&wrap(&[note], opts.max_width));
        }
    }
    if !dropped.is_empty() {
        dropped.reverse();
        let mut items = vec!["columns left out to fit the terminal:".to_string()];
        items.extend(dropped.iter().map(|d| d.to_string()));
        items.push("(--wide shows them)".into());
        out.push_str(&wrap(&items, opts.max_width));
    }
    if let Some(k) = counters {
        let items = [
            format!("threads {}", k.threads_seen),
            format!("ids {}", k.ids_used),
            format!("slots {}", k.slots_used),
            format!("overflow starts {}", k.overflow_starts),
            format!("orphan stops {}", k.orphan_stops),
            format!("unfit-id drops {}", k.unfit_id_drops),
            format!("no-slot drops {}", k.no_slot_drops),
            format!("slot reuses {} (discarded {})", k.slot_reuses, k.reuse_discarded),
            format!("late drops {}", k.late_drops),
        ];
        out.push_str(&wrap(&items, opts.max_width));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_strings() {
        assert_eq!(format_time(512.0), "512.00 ns");
        assert_eq!(format_time(1880.0), "1.88 us");
        assert_eq!(format_time(3.2e6), "3.20 ms");
        assert_eq!(format_time(1.5e9), "1.50 s");
        assert_eq!(format_time(120e9), "2.00 min");
    }

    #[test]
    fn cycle_strings() {
        assert_eq!(format_cycles(999.0), "999");
        assert_eq!(format_cycles(13490.0), "13.49 K");
        assert_eq!(format_cycles(2.5e6), "2.50 M");
        assert_eq!(format_cycles(7.0e9), "7.00 B");
        assert_eq!(format_cycles(3.0e12), "3.00 T");
    }

    #[test]
    fn tables_are_136_wide() {
        let s = summarize(&[1.0, 2.0, 3.0]).unwrap();
        let rows = vec![Row {
            name: "a_very_long_component_name_indeed".into(),
            token: 0,
            summary: s,
            outliers: 0,
            lost: 0,
            threads: 1,
            switched: 0,
            clean: false,
            tracked: false,
        }];
        // Calibrated (zero overheads): the self-offset matrix is shown.
        let cal = Calibration { calibrated: true, ..Calibration::default() };
        for data in [LATTE_DATA_RAW, LATTE_DATA_CALIBRATED] {
            let boxed = render(&rows, &Options { unit: LATTE_UNIT_CYCLE, data, extended: false, color: true, max_width: None }, &cal, None);
            let classic = render_classic(&rows, LATTE_UNIT_CYCLE, data, &cal, true);
            let plain_classic = render_classic(&rows, LATTE_UNIT_CYCLE, data, &cal, false);
            assert_eq!(plain_classic, classic.replace(GRAY, "").replace(RESET, ""), "without colour: the same text, no escape");
            assert!(!plain_classic.contains('\x1b'));
            assert!(classic.starts_with('\n') && classic.is_ascii());
            for (t, name_cell) in [(&boxed, "│ a_very_long_componen │"), (&classic, "| a_very_long_componen | ")] {
                for line in t.lines().filter(|l| !l.is_empty()) {
                    let plain = line.replace(GRAY, "").replace(RESET, "");
                    assert_eq!(plain.chars().count(), 138, "{plain}");
                }
                let plain = t.replace(GRAY, "").replace(RESET, "");
                assert!(plain.contains(name_cell), "{plain}");
                assert!(t.contains(GRAY) && t.contains(RESET));
                assert_eq!(plain.contains(SELF_OFFSET_TITLE), data == LATTE_DATA_CALIBRATED);
            }
        }
    }

    #[test]
    fn command_table_fits_a_width_and_can_go_without_color() {
        let s = summarize(&[1.0, 2.0, 3.0]).unwrap();
        let rows = vec![Row { name: "svc.a".into(), token: 0, summary: s, outliers: 0, lost: 0, threads: 1, switched: 0, clean: false, tracked: false }];
        let counters = crate::counters::latte_counters::default();
        let opts = |max_width| Options { unit: LATTE_UNIT_CYCLE, data: LATTE_DATA_RAW, extended: true, color: false, max_width };
        let wide = render(&rows, &opts(None), &Calibration::default(), Some(&counters));
        assert!(!wide.contains('\x1b'));
        assert!(wide.lines().any(|l| l.chars().count() > 180), "{wide}");
        assert!(!wide.contains("left out"));
        for width in [40, 60, 80, 100, 120] {
            let t = render(&rows, &opts(Some(width)), &Calibration::default(), Some(&counters));
            for l in t.lines() {
                assert!(l.chars().count() <= width.max(24), "{width}: {l}");
            }
            assert!(t.contains("COMPONENT") && t.contains("svc.a") && t.contains("--wide"), "{t}");
        }
        let t80 = render(&rows, &opts(Some(80)), &Calibration::default(), None);
        let head = t80.lines().find(|l| l.contains("COMPONENT")).unwrap();
        assert!(head.contains("SAMPLES") && head.contains("MEDIAN") && head.contains("P99 ") && !head.contains("SKEW"), "{t80}");
        assert!(t80.contains("left out to fit the terminal:") && t80.contains("SKEW"), "{t80}");
    }
}
