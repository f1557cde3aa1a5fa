//! The report: per component (ID), the samples of every thread, optionally
//! minus the calibrated overhead, through the outlier rule, summarised
//! (this file), and rendered as the box-drawn table of the original Latte
//! (`render`). The C++ `DumpToStream`, the C ABI and the `latte stats`
//! command all print this.

use crate::error::Error;
use crate::layout::*;
use crate::name::is_reserved_name;
use crate::name::name_bytes;
use crate::reader::{latte_raw_sample, latte_slot_info, Calibration, IdInfo, View};
use crate::stats::{summarize, Summary};

mod render;

pub use render::{render, render_classic, terminal_text, Options};

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
        names: ids.iter().map(|i| crate::name::name_text(name_bytes(&i.name))).collect(),
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
    let mut slots = view.slots()?;
    // Grouped by ID once (a stable sort keeps each ID's slots in slot
    // order), so that a report over many IDs costs no pass over every slot
    // per ID.
    slots.sort_by_key(|s| s.id_token);
    let tracked = view.switches_tracked();
    let fin = crate::extract::final_slots(view);
    let mut out = Vec::new();
    let mut raw = Vec::new();
    for id in &ids {
        if is_reserved_name(name_bytes(&id.name)) {
            continue;
        }
        let from = slots.partition_point(|s| s.id_token < id.token);
        let to = from + slots[from..].partition_point(|s| s.id_token == id.token);
        let mine = &slots[from..to];
        if mine.is_empty() {
            continue;
        }
        let c = read_component(view, &fin, mine, &mut raw, clean)?;
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
        name: crate::name::name_text(name_bytes(&id.name)),
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

#[cfg(test)]
mod tests {
    use super::render::{GRAY, RESET, SELF_OFFSET_TITLE};
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

    #[test]
    fn command_table_shows_every_name_whole() {
        let s = summarize(&[1.0, 2.0, 3.0]).unwrap();
        let row = |name: &str| Row { name: name.into(), token: 0, summary: s, outliers: 0, lost: 0, threads: 1, switched: 0, clean: false, tracked: false };
        let long = "x".repeat(300);
        let names = ["same.prefix.longer.than.the.column.1", "same.prefix.longer.than.the.column.2", "short", long.as_str()];
        let rows: Vec<Row> = names.iter().map(|n| row(n)).collect();
        let opts = |max_width| Options { unit: LATTE_UNIT_CYCLE, data: LATTE_DATA_RAW, extended: true, color: false, max_width };
        // No width: the column is as wide as the longest name, nothing is cut.
        let wide = render(&rows, &opts(None), &Calibration::default(), None);
        for n in names {
            assert!(wide.lines().any(|l| l.starts_with(&format!("│ {n} "))), "{n}: {wide}");
        }
        assert!(!wide.contains('…'), "{wide}");
        // Fitted to 80: names past the column are cut with a reference to
        // a line under the table that gives them whole, and the two that
        // differ only at the end no longer look alike.
        let t = render(&rows, &opts(Some(80)), &Calibration::default(), None);
        let table: Vec<&str> = t.lines().filter(|l| l.starts_with('│')).collect();
        for l in &table {
            assert!(l.chars().count() <= 80, "{l}");
        }
        let cells: Vec<&str> = table.iter().filter_map(|l| l.split('│').nth(1)).map(str::trim).collect();
        assert!(cells.contains(&"short"), "{t}");
        let cut: Vec<&&str> = cells.iter().filter(|c| c.contains('…')).collect();
        assert_eq!(cut.len(), 3, "{t}");
        assert!(cut[0] != cut[1], "{t}");
        for (k, n) in [names[0], names[1], names[3]].iter().enumerate() {
            assert!(cut[k].ends_with(&format!("…[{}]", k + 1)), "{t}");
            assert!(t.lines().any(|l| l == format!("[{}] {n}", k + 1)), "{n}: {t}");
        }
    }
}
