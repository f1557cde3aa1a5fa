//! `latte`: read a running service's region (or a flushed file) from outside.
//! Read-only by construction: every object is opened O_RDONLY and mapped
//! PROT_READ, through the same reader and report code as the library.

use clap::{Parser, Subcommand};
use latte::layout::*;
use latte::reader::{latte_cursor, latte_raw_sample, Mapping, View};
use latte::report::{self, Options};
use latte::stats;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "latte", version, about = "Read latte regions of running services (read-only)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the latte regions in /dev/shm.
    Ls {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The report table of a region (`/name`) or a flushed file, with percentiles and counters.
    Stats {
        /// A region name (`/name` or `name`) or a file path.
        target: String,
        /// Show times instead of cycles.
        #[arg(long)]
        time: bool,
        /// Subtract the producer's calibrated overheads.
        #[arg(long)]
        calibrated: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A live view: per ID, rate and percentiles over each interval.
    Watch {
        /// A region name.
        target: String,
        /// Refresh interval (e.g. 1s, 250ms, 0.5).
        #[arg(long, default_value = "1s", value_parser = parse_interval)]
        interval: Duration,
        /// Stop after this many intervals (0 = until interrupted).
        #[arg(long, default_value_t = 0)]
        count: u64,
        /// One line per ID per interval even on a terminal.
        #[arg(long)]
        plain: bool,
        /// Show times instead of cycles.
        #[arg(long)]
        time: bool,
    },
    /// Write a Chrome trace (Perfetto, chrome://tracing) of every sample.
    Trace {
        /// A region name or a file path.
        target: String,
        /// Output file.
        #[arg(short = 'o', long = "output")]
        output: std::path::PathBuf,
    },
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else {
        (s, 1.0)
    };
    let x: f64 = num.trim().parse().map_err(|_| format!("not an interval: {s}"))?;
    if !(x > 0.0) || x * scale > 86400.0 {
        return Err(format!("interval out of range: {s}"));
    }
    Ok(Duration::from_secs_f64(x * scale))
}

/// Exit codes: 0 success, 1 other failure, 2 usage, 3 no such region or
/// file, 4 not a latte region / corrupt / other version, 5 permission denied.
fn fail(target: &str, code: i32) -> ExitCode {
    // SAFETY: latte_strerror returns a static C string.
    let text = unsafe { std::ffi::CStr::from_ptr(latte::ffi::latte_strerror(code)) }.to_string_lossy();
    eprintln!("latte: {target}: {text}");
    ExitCode::from(match code {
        c if c == -libc::ENOENT => 3,
        c if c == -libc::EACCES || c == -libc::EPERM => 5,
        latte::error::LATTE_ERR_NOT_LATTE | latte::error::LATTE_ERR_VERSION | latte::error::LATTE_ERR_TRUNCATED | latte::error::LATTE_ERR_CORRUPT => 4,
        c if c == -libc::EINVAL => 3,
        _ => 1,
    })
}

/// Cycles per ns for display: the producer's figure, else measured here
/// (the TSC is invariant and shared by the machine's cores).
fn cycles_per_ns(v: &View) -> f64 {
    let c = v.calibration().cycles_per_ns;
    if c > 0.0 { c } else { latte::tsc::measure_cycles_per_ns(50) }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Ls { json } => ls(json),
        Cmd::Stats { target, time, calibrated, json } => stats_cmd(&target, time, calibrated, json),
        Cmd::Watch { target, interval, count, plain, time } => watch(&target, interval, count, plain || !std::io::stdout().is_terminal(), time),
        Cmd::Trace { target, output } => trace(&target, &output),
    }
}

fn ls(json: bool) -> ExitCode {
    let mut rows = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/dev/shm") {
        for e in dir.flatten() {
            let name = format!("/{}", e.file_name().to_string_lossy());
            // Only objects that validate as latte regions are listed.
            if let Ok(m) = Mapping::open_shm(name.as_bytes()) {
                let v = m.view;
                let k = v.counters();
                rows.push(serde_json::json!({
                    "name": name,
                    "pid": v.producer_pid,
                    "alive": m.producer_alive(),
                    "ids": v.ids_used(),
                    "threads": k.threads_seen,
                    "slots": k.slots_used,
                    "bytes": v.geo.total_size,
                }));
            }
        }
    }
    rows.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    if json {
        println!("{}", serde_json::Value::Array(rows));
    } else {
        println!("{:<32} {:>8} {:>6} {:>5} {:>8} {:>6} {:>12}", "NAME", "PID", "ALIVE", "IDS", "THREADS", "SLOTS", "BYTES");
        let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap_or(0);
        for r in rows {
            println!(
                "{:<32} {:>8} {:>6} {:>5} {:>8} {:>6} {:>12}",
                r["name"].as_str().unwrap_or(""),
                n(&r, "pid"),
                if r["alive"].as_bool() == Some(true) { "yes" } else { "no" },
                n(&r, "ids"),
                n(&r, "threads"),
                n(&r, "slots"),
                n(&r, "bytes")
            );
        }
    }
    ExitCode::SUCCESS
}

fn stats_cmd(target: &str, time: bool, calibrated: bool, json: bool) -> ExitCode {
    let m = match Mapping::open_any(target) {
        Ok(m) => m,
        Err(e) => return fail(target, e),
    };
    let v = m.view;
    let c = match report::collect(&v) {
        Ok(c) => c,
        Err(e) => return fail(target, e),
    };
    let mut cal = v.calibration();
    if time {
        cal.cycles_per_ns = cycles_per_ns(&v);
    }
    let data = if calibrated { LATTE_DATA_CALIBRATED } else { LATTE_DATA_RAW };
    let unit = if time { LATTE_UNIT_TIME } else { LATTE_UNIT_CYCLE };
    let rows = report::rows(&c, data, &cal);
    let counters = v.counters();
    if json {
        let comps: Vec<_> = rows
            .iter()
            .map(|r| {
                let s = &r.summary;
                serde_json::json!({
                    "component": r.name, "read": s.count + r.outliers, "samples": s.count, "threads": r.threads, "lost": r.lost,
                    "avg": s.mean, "median": s.median, "std_dev": s.std_dev, "skew": s.skew,
                    "min": s.min, "max": s.max, "p50": s.p50, "p90": s.p90, "p99": s.p99, "p999": s.p999,
                    "outliers": r.outliers,
                })
            })
            .collect();
        let out = serde_json::json!({
            "region": target,
            "producer_pid": v.producer_pid,
            "producer_alive": m.producer_alive(),
            "unit": "cycles",
            "calibrated": calibrated && cal.calibrated,
            "cycles_per_ns": cal.cycles_per_ns,
            "components": comps,
            "counters": {
                "overflow_starts": counters.overflow_starts, "orphan_stops": counters.orphan_stops,
                "unfit_id_drops": counters.unfit_id_drops, "no_slot_drops": counters.no_slot_drops,
                "slot_reuses": counters.slot_reuses, "reuse_discarded": counters.reuse_discarded,
                "late_drops": counters.late_drops, "threads_seen": counters.threads_seen,
                "ids_used": counters.ids_used, "slots_used": counters.slots_used,
            },
        });
        println!("{out}");
    } else {
        if calibrated && !cal.calibrated {
            eprintln!("latte: {target}: the producer never calibrated; showing raw figures");
        }
        print!("{}", report::render(&rows, &Options { unit, data, extended: true }, &cal, Some(&counters)));
    }
    ExitCode::SUCCESS
}

fn trace(target: &str, output: &std::path::Path) -> ExitCode {
    let m = match Mapping::open_any(target) {
        Ok(m) => m,
        Err(e) => return fail(target, e),
    };
    let cpn = cycles_per_ns(&m.view);
    match latte::trace::write_file(output, Some(&m.view), m.view.producer_pid, cpn) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&output.to_string_lossy(), e),
    }
}

/// Per-ID figures of one interval.
struct Interval {
    name: String,
    count: usize,
    lost: u64,
    durations: Vec<f64>,
}

fn watch(target: &str, every: Duration, count: u64, plain: bool, time: bool) -> ExitCode {
    let m = match Mapping::open_any(target) {
        Ok(m) => m,
        Err(e) => return fail(target, e),
    };
    let v = m.view;
    let units = report::Units { unit: if time { LATTE_UNIT_TIME } else { LATTE_UNIT_CYCLE }, cycles_per_ns: if time { cycles_per_ns(&v) } else { 0.0 } };
    let mut cursors = vec![latte_cursor::default(); v.geo.slot_capacity as usize];
    let mut buf: Vec<latte_raw_sample> = Vec::new();
    // Start at "now": skip what is already there.
    if let Ok(slots) = v.slots() {
        for s in slots {
            let _ = v.read_slot(s.index, &mut cursors[s.index as usize], &mut buf, false);
        }
    }
    let mut n = 0u64;
    let mut next = Instant::now() + every;
    let out = std::io::stdout();
    loop {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next += every;
        n += 1;
        let (ids, slots) = match (v.ids(), v.slots()) {
            (Ok(i), Ok(s)) => (i, s),
            (Err(e), _) | (_, Err(e)) => return fail(target, e),
        };
        let mut per: Vec<Interval> = ids
            .iter()
            .map(|i| Interval { name: String::from_utf8_lossy(latte::intern::name_bytes(&i.name)).into_owned(), count: 0, lost: 0, durations: Vec::new() })
            .collect();
        for s in &slots {
            buf.clear();
            let c = &mut cursors[s.index as usize];
            let lost_before = if c.generation == s.generation { c.lost } else { 0 };
            if let Err(e) = v.read_slot(s.index, c, &mut buf, false) {
                return fail(target, e);
            }
            if let Some(p) = per.get_mut(s.id_token as usize) {
                p.count += buf.len();
                p.lost += c.lost - lost_before;
                p.durations.extend(buf.iter().map(|r| (r.packed & LATTE_MAX_DURATION) as f64));
            }
        }
        let secs = every.as_secs_f64();
        let mut text = String::new();
        if !plain {
            text.push_str("\x1b[H\x1b[2J");
            text.push_str(&format!("latte watch {target}  pid {} ({})  interval {:.3}s  #{n}\n", v.producer_pid, if m.producer_alive() { "alive" } else { "exited" }, secs));
            text.push_str(&format!("{:<24} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>8}\n", "ID", "RATE/S", "P50", "P90", "P99", "P99.9", "MAX", "LOST"));
        }
        for p in per.iter_mut() {
            if latte::calibrate::is_calibration_name(p.name.as_bytes()) || (p.count == 0 && p.lost == 0) {
                continue;
            }
            p.durations.sort_by(|a, b| a.total_cmp(b));
            let s = stats::summarize(&p.durations).unwrap_or_default();
            let rate = p.count as f64 / secs;
            if plain {
                text.push_str(&format!(
                    "interval={n} id={} rate={:.1} count={} p50={} p90={} p99={} p999={} max={} lost={}\n",
                    p.name, rate, p.count, units.show(s.p50), units.show(s.p90), units.show(s.p99), units.show(s.p999), units.show(s.max), p.lost
                ));
            } else {
                text.push_str(&format!(
                    "{:<24} {:>12.1} {:>12} {:>12} {:>12} {:>12} {:>12} {:>8}\n",
                    p.name.chars().take(24).collect::<String>(), rate, units.show(s.p50), units.show(s.p90), units.show(s.p99), units.show(s.p999), units.show(s.max), p.lost
                ));
            }
        }
        if plain && text.is_empty() {
            text = format!("interval={n} idle\n");
        }
        let mut o = out.lock();
        if o.write_all(text.as_bytes()).and_then(|_| o.flush()).is_err() {
            return ExitCode::SUCCESS; // the reader of our output went away
        }
        if count > 0 && n >= count {
            return ExitCode::SUCCESS;
        }
    }
}
