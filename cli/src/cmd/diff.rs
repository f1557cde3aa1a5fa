//! `latte diff A B`: per ID, the two sides' counts and percentiles, the
//! relative change of each, a bootstrap interval for the change of the
//! median and of p99, the Mann–Whitney U p-value and a verdict
//! (`crate::diffstats` holds the statistics).

use crate::diffstats::{self, Interval, UTest, MIN_SAMPLES};
use crate::exit::{fail, EXIT_SLOWER, EXIT_USAGE};
use crate::samples::{self, Source};
use crate::term::{emit, Style};
use std::process::ExitCode;

pub struct DiffOpts {
    pub a: std::ffi::OsString,
    pub b: std::ffi::OsString,
    /// Significance level of the U test (and 1 - the intervals' level).
    pub alpha: f64,
    /// Smallest relative change of the median that counts (0.05: 5 %).
    pub threshold: f64,
    /// Leave out switched samples on both sides.
    pub clean: bool,
    pub json: bool,
    /// Bootstrap replicates and seed.
    pub replicates: usize,
    pub seed: u64,
}

/// Percentiles shown, with their JSON keys and column titles.
const QUANTILES: [(f64, &str, &str); 5] = [(0.5, "p50", "P50"), (0.9, "p90", "P90"), (0.99, "p99", "P99"), (0.999, "p999", "P99.9"), (1.0, "max", "MAX")];

/// One side of one ID.
struct Side {
    count: usize,
    /// Samples of the ID the source knows were lost (not compared).
    lost: u64,
    /// QUANTILES' values in ns.
    values: [f64; 5],
}

/// The comparison of one ID.
struct IdDiff {
    name: String,
    a: Option<Side>,
    b: Option<Side>,
    test: Option<UTest>,
    median_ci: Option<Interval>,
    p99_ci: Option<Interval>,
    verdict: &'static str,
}

/// The common unit: raw cycles when both sides ran at one TSC frequency,
/// else picoseconds. `scale` turns a value into ns.
struct Unit {
    to_common: [f64; 2],
    scale: f64,
    same_frequency: bool,
}

fn unit_of(a: &Source, b: &Source) -> Unit {
    let same = (a.cycles_per_ns / b.cycles_per_ns - 1.0).abs() < 1e-3;
    if same {
        Unit { to_common: [1.0, 1.0], scale: 1.0 / a.cycles_per_ns, same_frequency: true }
    } else {
        Unit { to_common: [1000.0 / a.cycles_per_ns, 1000.0 / b.cycles_per_ns], scale: 1e-3, same_frequency: false }
    }
}

/// An ID's durations of one side in the common unit, sorted.
fn durations(s: &Source, name: &str, factor: f64, clean: bool) -> Vec<u64> {
    let Some(id) = s.id(name) else { return Vec::new() };
    let keep = |r: &&latte::reader::latte_raw_sample| !(clean && samples::switched(r));
    let mut v: Vec<u64> = if factor == 1.0 {
        id.samples.iter().filter(keep).map(samples::duration).collect()
    } else {
        id.samples.iter().filter(keep).map(|r| (samples::duration(r) as f64 * factor).round() as u64).collect()
    };
    v.sort_unstable();
    v
}

fn side(v: &[u64], lost: u64, scale: f64) -> Option<Side> {
    (!v.is_empty()).then(|| Side { count: v.len(), lost, values: QUANTILES.map(|(q, _, _)| diffstats::percentile(v, q) as f64 * scale) })
}

fn compare(name: &str, a: &Source, b: &Source, unit: &Unit, o: &DiffOpts) -> IdDiff {
    let (va, vb) = std::thread::scope(|s| {
        let ha = s.spawn(|| durations(a, name, unit.to_common[0], o.clean));
        let vb = durations(b, name, unit.to_common[1], o.clean);
        (ha.join().unwrap_or_default(), vb)
    });
    let mut d = IdDiff {
        name: name.to_string(),
        a: side(&va, lost(a, name), unit.scale),
        b: side(&vb, lost(b, name), unit.scale),
        test: None,
        median_ci: None,
        p99_ci: None,
        verdict: "",
    };
    d.verdict = match (va.len(), vb.len()) {
        (0, _) => "only in B",
        (_, 0) => "only in A",
        (x, y) if x < MIN_SAMPLES || y < MIN_SAMPLES => "too few samples",
        _ => {
            let t = diffstats::mann_whitney(&va, &vb);
            d.test = Some(t);
            let level = 1.0 - o.alpha;
            d.median_ci = diffstats::bootstrap_change(&va, &vb, 0.5, o.replicates, level, o.seed);
            d.p99_ci = diffstats::bootstrap_change(&va, &vb, 0.99, o.replicates, level, o.seed.wrapping_add(1));
            let change = change(d.a.as_ref(), d.b.as_ref(), 0);
            match change {
                Some(c) if t.p < o.alpha && c >= o.threshold => "slower",
                Some(c) if t.p < o.alpha && c <= -o.threshold => "faster",
                _ => "no change",
            }
        }
    };
    d
}

fn lost(s: &Source, name: &str) -> u64 {
    s.id(name).map(|i| i.lost).unwrap_or(0)
}

/// Relative change of QUANTILES[k] from A to B (None: a side missing or A's 0).
fn change(a: Option<&Side>, b: Option<&Side>, k: usize) -> Option<f64> {
    let (a, b) = (a?, b?);
    (a.values[k] > 0.0).then(|| b.values[k] / a.values[k] - 1.0)
}

fn pct(c: Option<f64>) -> String {
    c.map(|c| format!("{:+.1}%", c * 100.0)).unwrap_or_else(|| "-".into())
}

fn ci_text(i: Option<Interval>) -> String {
    i.map(|i| format!("[{:+.1}%, {:+.1}%]", i.low * 100.0, i.high * 100.0)).unwrap_or_else(|| "-".into())
}

fn p_text(t: Option<UTest>) -> String {
    match t {
        Some(t) if t.p < 1e-15 => "<1e-15".into(),
        Some(t) if t.p < 1e-4 => format!("{:.0e}", t.p),
        Some(t) => format!("{:.4}", t.p),
        None => "-".into(),
    }
}

fn ns(v: f64) -> String {
    latte::report::format_time(v)
}

pub fn run(o: &DiffOpts, style: Style) -> Result<(), ExitCode> {
    if !(o.alpha > 0.0 && o.alpha < 1.0) {
        return Err(fail("diff", "--alpha must lie between 0 and 1", EXIT_USAGE));
    }
    if !(o.threshold >= 0.0 && o.threshold.is_finite()) {
        return Err(fail("diff", "--threshold must be 0 or more", EXIT_USAGE));
    }
    let (a, b) = std::thread::scope(|s| {
        let ha = s.spawn(|| samples::load(&o.a));
        let b = samples::load(&o.b);
        (ha.join().unwrap_or(Err(ExitCode::from(1))), b)
    });
    let (a, b) = (a?, b?);
    for s in [&a, &b] {
        if !s.producer_frequency {
            eprintln!("latte: {}: the producer published no TSC frequency; using this machine's ({:.3} cycles/ns)", s.label, s.cycles_per_ns);
        }
    }
    let unit = unit_of(&a, &b);
    let mut names: Vec<String> = a.ids.iter().map(|i| i.name.clone()).collect();
    names.extend(b.ids.iter().map(|i| i.name.clone()).filter(|n| a.id(n).is_none()));
    let diffs: Vec<IdDiff> = names.iter().map(|n| compare(n, &a, &b, &unit, o)).collect();
    let slower = diffs.iter().filter(|d| d.verdict == "slower").count();
    let method = format!(
        "Mann-Whitney U two-sided (normal approximation, tie-corrected); {:.0}% bootstrap intervals ({} replicates, seed {}); alpha {}, threshold {}%{}",
        (1.0 - o.alpha) * 100.0,
        o.replicates,
        o.seed,
        o.alpha,
        o.threshold * 100.0,
        if o.clean { "; switched samples left out" } else { "" }
    );
    let text = if o.json { json(o, &a, &b, &unit, &diffs, &method) } else { table(&a, &b, &unit, &diffs, &method, style) };
    emit(&text)?;
    if slower > 0 {
        return Err(ExitCode::from(EXIT_SLOWER));
    }
    Ok(())
}

/// A side in JSON; `lost` is what its source knows it lost (also when it
/// has no samples of the ID).
fn side_json(s: &Option<Side>, lost: u64) -> serde_json::Value {
    match s {
        None => serde_json::json!({"count": 0, "lost": lost}),
        Some(s) => {
            let mut m = serde_json::Map::new();
            m.insert("count".into(), s.count.into());
            m.insert("lost".into(), s.lost.into());
            for (k, (_, key, _)) in QUANTILES.iter().enumerate() {
                m.insert((*key).into(), s.values[k].into());
            }
            serde_json::Value::Object(m)
        }
    }
}

fn json(o: &DiffOpts, a: &Source, b: &Source, unit: &Unit, diffs: &[IdDiff], method: &str) -> String {
    let ci = |i: Option<Interval>| i.map(|i| serde_json::json!([i.low, i.high])).unwrap_or(serde_json::Value::Null);
    let ids: Vec<_> = diffs
        .iter()
        .map(|d| {
            let mut ch = serde_json::Map::new();
            for (k, (_, key, _)) in QUANTILES.iter().enumerate() {
                ch.insert((*key).into(), change(d.a.as_ref(), d.b.as_ref(), k).map(Into::into).unwrap_or(serde_json::Value::Null));
            }
            serde_json::json!({
                "id": d.name, "verdict": d.verdict, "a": side_json(&d.a, lost(a, &d.name)), "b": side_json(&d.b, lost(b, &d.name)), "change": ch,
                "median_change_ci": ci(d.median_ci), "p99_change_ci": ci(d.p99_ci),
                "p_value": d.test.map(|t| t.p), "u_a": d.test.map(|t| t.u_a), "z": d.test.map(|t| t.z),
            })
        })
        .collect();
    let doc = serde_json::json!({
        "a": {"source": a.label, "cycles_per_ns": a.cycles_per_ns},
        "b": {"source": b.label, "cycles_per_ns": b.cycles_per_ns},
        "unit": "ns", "compared_in": if unit.same_frequency { "cycles" } else { "time" },
        "alpha": o.alpha, "threshold": o.threshold, "clean": o.clean,
        "test": "mann-whitney-u two-sided, normal approximation with tie correction and continuity correction",
        "bootstrap": {"replicates": o.replicates, "seed": o.seed, "level": 1.0 - o.alpha, "rng": "chacha8", "method": "exact order-statistic resampling"},
        "min_samples": MIN_SAMPLES,
        "method": method,
        "ids": ids,
        "slower": diffs.iter().filter(|d| d.verdict == "slower").count(),
        "faster": diffs.iter().filter(|d| d.verdict == "faster").count(),
    });
    format!("{doc}\n")
}

fn table(a: &Source, b: &Source, unit: &Unit, diffs: &[IdDiff], method: &str, style: Style) -> String {
    let both = |d: &IdDiff, k: usize| match (&d.a, &d.b) {
        (Some(x), Some(y)) => format!("{} -> {}", ns(x.values[k]), ns(y.values[k])),
        (Some(x), None) => format!("{} -> -", ns(x.values[k])),
        (None, Some(y)) => format!("- -> {}", ns(y.values[k])),
        (None, None) => "-".into(),
    };
    let count = |s: &Option<Side>| s.as_ref().map(|s| s.count.to_string()).unwrap_or_else(|| "0".into());
    let rows: Vec<Vec<String>> = diffs
        .iter()
        .map(|d| {
            vec![
                latte::report::terminal_text(&d.name).into_owned(),
                d.verdict.to_string(),
                both(d, 0),
                format!("{} {}", pct(change(d.a.as_ref(), d.b.as_ref(), 0)), ci_text(d.median_ci)),
                both(d, 2),
                format!("{} {}", pct(change(d.a.as_ref(), d.b.as_ref(), 2)), ci_text(d.p99_ci)),
                p_text(d.test),
                format!("{}/{}", count(&d.a), count(&d.b)),
                // Not compared, but said: what each source knows it lost.
                format!("{}/{}", lost(a, &d.name), lost(b, &d.name)),
                pct(change(d.a.as_ref(), d.b.as_ref(), 1)),
                pct(change(d.a.as_ref(), d.b.as_ref(), 3)),
                pct(change(d.a.as_ref(), d.b.as_ref(), 4)),
            ]
        })
        .collect();
    let mut t = format!(
        "latte diff  A: {}  B: {}  (times in ns{})\n",
        latte::report::terminal_text(&a.label),
        latte::report::terminal_text(&b.label),
        if unit.same_frequency {
            format!(", both at {:.3} cycles/ns", a.cycles_per_ns)
        } else {
            format!("; A at {:.3}, B at {:.3} cycles/ns: compared in time", a.cycles_per_ns, b.cycles_per_ns)
        }
    );
    t.push_str(&crate::term::table(
        &["ID", "VERDICT", "P50 A -> B", "P50 CHANGE [CI]", "P99 A -> B", "P99 CHANGE [CI]", "P-VALUE", "N A/B", "LOST A/B", "P90", "P99.9", "MAX"],
        "llrrrrrrrrrr",
        &rows,
        style.width,
    ));
    t.push_str(&format!("{method}\n"));
    t
}
