//! The report's tables: the box-drawn table of the original Latte (width
//! 136 between the border characters, borders in gray), its extended form
//! fitted to a terminal (`latte stats`), and the self-offset matrix.

use super::{Row, Units};
use crate::layout::*;
use crate::reader::Calibration;
use std::fmt::Write;

const WIDTH: usize = 136;
pub(super) const GRAY: &str = "\x1b[90m";
pub(super) const RESET: &str = "\x1b[0m";

/// Column titles and widths of the standard table.
const COLS: [(&str, usize); 10] =
    [("COMPONENT", 20), ("SAMPLES", 9), ("AVG", 10), ("MEDIAN", 10), ("STD DEV", 10), ("SKEW", 8), ("MIN", 10), ("MAX", 10), ("RANGE", 10), ("OUTLIER", 10)];

/// Extra columns of the extended table (`latte stats`).
const EXTRA_COLS: [(&str, usize); 5] = [("P90", 10), ("P99", 10), ("P99.9", 10), ("LOST", 9), ("SWITCHED", 14)];

/// Title of the self-offset matrix: rows are the start mode, columns the stop mode.
pub(super) const SELF_OFFSET_TITLE: &str = "SELF-OFFSET H[Start] x W[Stop]";

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
    // The original's report prints the name's own bytes; the extended one
    // (`latte stats`) its text (`name_text`), which tells every name apart.
    let name = if extended { r.name.clone() } else { crate::name::classic_text(&r.name) };
    if r.nothing_left() {
        // Every figure would be of no sample: MEDIAN says so (a note under
        // the table says why), the others are blank.
        let mut v = vec![name, "0".into(), "-".into(), "none left".into()];
        v.resize(COLS.len(), "-".into());
        if extended {
            v.extend(["-".into(), "-".into(), "-".into(), r.lost.to_string(), r.switched_text()]);
        }
        return v;
    }
    let mut v = vec![
        name,
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

/// The COMPONENT column's width in the extended table: the longest name
/// (at least the standard 20), and, fitted to a width, at most a third of
/// it. A longer name is cut there by `name_cell`.
fn name_width(rows: &[Row], max_width: Option<usize>) -> usize {
    let longest = rows.iter().map(|r| terminal_text(&r.name).chars().count()).max().unwrap_or(0);
    let w = longest.max(COLS[0].1);
    max_width.map_or(w, |m| w.min((m / 3).max(COLS[0].1)))
}

/// A name in a column `w` wide: whole when it fits, else its first
/// characters, `…` and a reference `[k]` to the line under the table that
/// gives it whole (pushed onto `whole`), so that no two names that differ
/// only past the cut look alike.
fn name_cell(name: &str, w: usize, whole: &mut Vec<String>) -> String {
    if name.chars().count() <= w {
        return name.to_string();
    }
    whole.push(name.to_string());
    let mark = format!("…[{}]", whole.len());
    let keep = w.saturating_sub(mark.chars().count());
    format!("{}{mark}", cut(name, keep))
}

/// The `latte` command's table: box-drawn, with percentile and loss
/// columns and the counters when `opts.extended`, fitted to
/// `opts.max_width`. In the extended table names are shown whole: the
/// COMPONENT column is as wide as the longest, or, fitted to a width, a
/// name too long for it is cut with a reference to a line under the table
/// that gives it whole.
pub fn render(rows: &[Row], opts: &Options, cal: &Calibration, counters: Option<&crate::counters::latte_counters>) -> String {
    let units = Units { unit: opts.unit, cycles_per_ns: cal.cycles_per_ns };
    let mut cols: Vec<(&str, usize)> = COLS.to_vec();
    if opts.extended {
        cols[0].1 = name_width(rows, opts.max_width);
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
    let mut whole = Vec::new();
    for r in rows {
        let mut v = row_cells(r, &units, opts.extended);
        v[0] = terminal_text(&v[0]).into_owned();
        if opts.extended {
            v[0] = name_cell(&v[0], widths[0], &mut whole);
        }
        cells(&mut out, c, &pick(v), &widths);
    }
    border(&mut out, c, '└', '┴', '┘', &widths);
    for (k, name) in whole.iter().enumerate() {
        let _ = writeln!(out, "[{}] {name}", k + 1);
    }
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
        out.push_str(&counter_lines(k, opts.max_width));
    }
    out
}

/// The ring memory a region committed, and its budget: `ring memory 3.2
/// of 56.0 MiB`, `ring memory 3.2 MiB (no budget)`, or, for an image of a
/// producer that kept no count, `ring memory not counted`.
fn ring_memory(k: &crate::counters::latte_counters) -> String {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    match k.budget_bytes {
        0 => "ring memory not counted".to_string(),
        u64::MAX => format!("ring memory {:.1} MiB (no budget)", mib(k.committed_bytes)),
        b => format!("ring memory {:.1} of {:.1} MiB", mib(k.committed_bytes), mib(b)),
    }
}

/// The region's counters under the command's table, in lines no wider
/// than `width`.
fn counter_lines(k: &crate::counters::latte_counters, width: Option<usize>) -> String {
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
        format!("early laps {}", k.early_laps),
        ring_memory(k),
    ];
    wrap(&items, width)
}
