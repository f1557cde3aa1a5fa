//! `latte stats TARGET`: the report table of a region or a file, with
//! percentiles and counters, or the same as JSON.

use crate::exit::{fail, strerror, EXIT_NOT_REGION};
use crate::recording;
use crate::target::{cycles_per_ns, open, shown};
use crate::term::{emit, Style};
use latte::layout::*;
use latte::report::{self, Options};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

/// Prints the report of `raw`.
pub fn run(raw: &OsStr, time: bool, calibrated: bool, json: bool, clean: bool, style: Style) -> Result<(), ExitCode> {
    let m = open(raw)?;
    let target = &shown(raw.as_bytes());
    let v = m.view();
    let mut cal = v.calibration();
    if time {
        cal.cycles_per_ns = cycles_per_ns(&v);
    }
    let data = if calibrated { LATTE_DATA_CALIBRATED } else { LATTE_DATA_RAW };
    let unit = if time { LATTE_UNIT_TIME } else { LATTE_UNIT_CYCLE };
    let mut rows = report::rows_of_view_with(&v, data, &cal, clean).map_err(|e| fail(target, &strerror(e), EXIT_NOT_REGION))?;
    recording::add_lost(&m, &mut rows).map_err(|e| fail(target, &e, EXIT_NOT_REGION))?;
    let counters = v.counters();
    if calibrated && !cal.calibrated {
        eprintln!("latte: {target}: the producer never calibrated; showing raw figures");
    }
    if !json {
        let opts = Options { unit, data, extended: true, color: style.color, max_width: style.width };
        return emit(&report::render(&rows, &opts, &cal, Some(&counters)));
    }
    // Values in the unit asked for: cycles, or ns with --time.
    let scale = if time { 1.0 / cal.cycles_per_ns } else { 1.0 };
    let comps: Vec<_> = rows
        .iter()
        .map(|r| {
            let s = &r.summary;
            // Figures of no sample are null, not 0 (--clean, every sample
            // switched out); so are the switched counts of a producer that
            // tracked no switches.
            let fig = |x: f64| if r.nothing_left() { serde_json::Value::Null } else { serde_json::json!(x) };
            let tracked = |x: serde_json::Value| if r.tracked { x } else { serde_json::Value::Null };
            serde_json::json!({
                "component": r.name, "read": r.read(), "samples": s.count, "threads": r.threads, "lost": r.lost,
                "switched": tracked(r.switched.into()), "switched_share": tracked(r.switched_share().into()),
                "avg": fig(s.mean * scale), "median": fig(s.median * scale), "std_dev": fig(s.std_dev * scale), "skew": fig(s.skew),
                "min": fig(s.min * scale), "max": fig(s.max * scale), "p50": fig(s.p50 * scale), "p90": fig(s.p90 * scale),
                "p99": fig(s.p99 * scale), "p999": fig(s.p999 * scale),
                "outliers": r.outliers,
            })
        })
        .collect();
    let out = serde_json::json!({
        "region": target,
        "producer_pid": v.producer_pid(),
        "producer_alive": m.producer_alive(),
        "unit": if time { "ns" } else { "cycles" },
        "calibrated": calibrated && cal.calibrated,
        "clean": clean,
        "switch_tracking": v.switches_tracked(),
        "cycles_per_ns": cal.cycles_per_ns,
        "components": comps,
        "counters": {
            "overflow_starts": counters.overflow_starts, "orphan_stops": counters.orphan_stops,
            "unfit_id_drops": counters.unfit_id_drops, "no_slot_drops": counters.no_slot_drops,
            "slot_reuses": counters.slot_reuses, "reuse_discarded": counters.reuse_discarded,
            "late_drops": counters.late_drops, "threads_seen": counters.threads_seen,
            "ids_used": counters.ids_used, "slots_used": counters.slots_used,
            "early_laps": counters.early_laps, "committed_bytes": counters.committed_bytes,
            "budget_bytes": (counters.budget_bytes != u64::MAX).then_some(counters.budget_bytes),
        },
    });
    emit(&format!("{out}\n"))
}
