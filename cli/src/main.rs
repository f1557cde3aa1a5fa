//! `latte`: read a running service's region (or a flushed file) from outside.
//! Read-only by construction: every object is opened O_RDONLY and mapped
//! PROT_READ, through the same reader and report code as the library. The
//! one exception is `latte rm`, which removes regions' names from /dev/shm
//! when asked (`cmd::rm`).
//!
//! Output follows the terminal: colour only on a terminal (`--color`,
//! `NO_COLOR`, `TERM=dumb`), tables fitted to its width (`--wide` keeps every
//! column), plain `key=value` lines when the output is not a terminal.

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;
use std::time::Duration;
use term::{ColorWhen, Style};

mod cmd;
mod diffstats;
mod exit;
mod export;
mod output;
mod recording;
mod samples;
mod serve;
mod serve_read;
mod shm_watch;
mod stall;
mod target;
mod term;

#[derive(Parser)]
#[command(name = "latte", version, about = "Read latte regions of running services (read-only; `rm` removes regions)")]
struct Cli {
    /// When to colour the output: auto (only on a terminal, and not with
    /// NO_COLOR or TERM=dumb), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    color: ColorWhen,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the latte regions in /dev/shm (and those it cannot read, with why).
    Ls {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The report table of a region (`/name`) or a flushed file, with percentiles and counters.
    Stats {
        /// A region name (`/name` or `name`; any bytes but '/' and NUL) or a file path.
        target: OsString,
        /// Show times instead of cycles (also in --json).
        #[arg(long)]
        time: bool,
        /// Subtract the producer's calibrated overheads.
        #[arg(long)]
        calibrated: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Keep every column, and every name whole in its column, even when
        /// the terminal is narrower. Without it, a name too long for its
        /// column is cut with a reference (`…[1]`) to a line under the table
        /// that gives it whole.
        #[arg(long)]
        wide: bool,
        /// Leave out the samples whose thread was switched out (flagged by a
        /// producer with switch tracking on) instead of applying the outlier rule.
        #[arg(long)]
        clean: bool,
    },
    /// A live view, per ID and interval: the rate recorded (from the rings'
    /// write indices) and the rate read, samples lost (read + lost =
    /// recorded), percentiles of every sample read in the interval, and
    /// switched samples ("not tracked" when the producer tracked none).
    Watch {
        /// A region name (`/name` or `name`; any bytes but '/' and NUL) or a file path.
        target: OsString,
        /// Refresh interval (e.g. 1s, 250ms, 0.5).
        #[arg(long, default_value = "1s", value_parser = parse_interval)]
        interval: Duration,
        /// Stop after this many intervals (0 = no limit).
        #[arg(long, default_value_t = 0)]
        count: u64,
        /// One `key=value` line per ID per interval, even on a terminal.
        #[arg(long)]
        plain: bool,
        /// Show times instead of cycles.
        #[arg(long)]
        time: bool,
        /// Keep watching after the producer has exited, and follow the
        /// region's name to a new producer that takes it over (a restart).
        #[arg(long)]
        follow: bool,
        /// Percentiles of the samples whose thread was not switched out.
        #[arg(long)]
        clean: bool,
    },
    /// Serve the regions' metrics to Prometheus: OpenMetrics text at
    /// http://ADDR:PORT/metrics (docs/fleet.md).
    Serve {
        /// Region names (`/name` or `name`); none: every latte region in
        /// /dev/shm, looked for again every second (every --interval when
        /// longer) as services come and go.
        regions: Vec<OsString>,
        /// Address and port to listen on.
        #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
        listen: std::net::SocketAddr,
        /// Series per (ID, thread) instead of per ID (label `thread`: the OS
        /// thread id).
        #[arg(long)]
        per_thread: bool,
        /// How often each region is read whole: its IDs, slots and counters
        /// (between passes, each ring is read again as its writer fills a
        /// quarter of it: a thread recording flat out is followed whole while
        /// the reader gets its CPU within a quarter of a ring's lap).
        #[arg(long, default_value = "100ms", value_parser = parse_interval)]
        interval: Duration,
        /// How long the series of a region that went away (and, with
        /// --per-thread, of a thread that no longer holds a ring: it exited,
        /// or its ring went to another thread) stay exported.
        #[arg(long, default_value = "5m", value_parser = parse_interval, value_name = "DURATION")]
        keep_gone: Duration,
        /// The duration histogram in two series per ID (and thread), label
        /// `switched` "true" (samples whose thread was switched out during
        /// them, from producers with switch tracking on) and "false": twice
        /// the histogram series.
        #[arg(long)]
        split_switched: bool,
        /// Series of their own for the first N IDs of each region (in the
        /// order the region registered them); the samples of the others go
        /// to one series per region (and thread) with the label
        /// `folded="true"` and no `id`, and `latte_ids_folded` counts them.
        /// 0: no bound.
        #[arg(long, default_value_t = 1000, value_name = "N")]
        max_ids: usize,
    },
    /// Follow a live region and write every sample it records to a file
    /// (a recording: read by stats, trace, diff and plot like a flushed image).
    Record {
        /// A region name (`/name` or `name`).
        target: OsString,
        /// The recording to write.
        #[arg(short = 'o', long = "output")]
        output: std::path::PathBuf,
        /// Stop after this long (e.g. 10s, 500ms, 2m); without --for and
        /// --count: when the producer exits or on Ctrl-C.
        #[arg(long = "for", value_parser = parse_interval, value_name = "DURATION")]
        duration: Option<Duration>,
        /// Stop once this many samples were read (whole batches: at least this many).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// Record only this ID (repeat for more): its name as the tools
        /// show it (`caf\xe9`), or its bytes.
        #[arg(long = "id", value_name = "NAME")]
        ids: Vec<OsString>,
        /// Begin with the samples the rings hold now (what they no longer
        /// hold counts as lost) instead of with the next one written.
        #[arg(long)]
        from_start: bool,
        /// Wait for a live producer's region of this name to appear (start
        /// record before the program), then record from its first sample
        /// (implies --from-start). Ctrl-C ends the wait.
        #[arg(long)]
        wait: bool,
    },
    /// Compare two runs (regions, flushed images or recordings) per ID:
    /// percentiles, their change, a bootstrap interval, the Mann-Whitney U
    /// p-value and a verdict. Exit code 8 when an ID got significantly slower.
    Diff {
        /// The baseline.
        a: OsString,
        /// The run compared with it.
        b: OsString,
        /// Significance level of the U test; the intervals are at 1 - alpha.
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        /// Smallest change of the median that counts as slower or faster
        /// (percent: 5 or 5%).
        #[arg(long, default_value = "5%", value_parser = parse_percent)]
        threshold: f64,
        /// Leave out the samples whose thread was switched out, on both sides.
        #[arg(long)]
        clean: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Bootstrap replicates (100 to 1,000,000).
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
        replicates: u64,
        /// Seed of the bootstrap's random stream.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Keep every column even when the terminal is narrower.
        #[arg(long)]
        wide: bool,
    },
    /// Remove latte regions from /dev/shm: by name (a live producer's
    /// region only with --force), or every region whose producer is gone
    /// (--dead). Anything that is not a latte region is never removed.
    Rm {
        /// Region names (`/name` or `name`).
        #[arg(required_unless_present = "dead", conflicts_with = "dead")]
        names: Vec<OsString>,
        /// Every latte region whose producer is gone (it no longer holds
        /// the region's liveness lock; the test a new producer uses to take
        /// over a name).
        #[arg(long)]
        dead: bool,
        /// Only regions made at least this long ago (e.g. 30s, 10m, 2h, 7d):
        /// the time the region's header gives, else the object's last change.
        #[arg(long, value_parser = parse_age, value_name = "DURATION")]
        older_than: Option<Duration>,
        /// Remove a live producer's region too: the producer records on
        /// into an object no new reader can open by its name.
        #[arg(long, conflicts_with = "dead")]
        force: bool,
        /// Say what would be removed, and remove nothing.
        #[arg(short = 'n', long = "dry-run")]
        dry_run: bool,
    },
    /// Draw runs: per ID, the percentile spectrum of each run (one curve per
    /// run) and a heat map of one run's latency over time, as SVG or PNG.
    Plot {
        /// Regions, flushed images or recordings (one curve each).
        #[arg(required = true)]
        sources: Vec<OsString>,
        /// The picture: a name ending in .svg or .png.
        #[arg(short = 'o', long = "output")]
        output: std::path::PathBuf,
        /// Plot only this ID (repeat for more): its name as the tools show
        /// it (`caf\xe9`), or its bytes.
        #[arg(long = "id", value_name = "NAME")]
        ids: Vec<OsString>,
        /// Leave out switched samples from the spectra.
        #[arg(long)]
        clean: bool,
        /// Which run's heat map to draw (1 = the first given).
        #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        heatmap_run: u64,
    },
    /// Write a Chrome trace (Perfetto, chrome://tracing) of every sample
    /// (or of those the filters keep).
    Trace {
        /// A region name (`/name` or `name`; any bytes but '/' and NUL) or a file path.
        target: OsString,
        /// Output file; `-` is standard output.
        #[arg(short = 'o', long = "output")]
        output: std::path::PathBuf,
        /// Only the samples of this ID (repeatable).
        #[arg(long = "id", value_name = "NAME")]
        ids: Vec<OsString>,
        /// Only the samples of this OS thread id (repeatable).
        #[arg(long = "thread", value_name = "TID")]
        threads: Vec<u32>,
        /// Only the samples that start at or after this time since the
        /// region was made (e.g. 1.5s, 200ms; the trace's time axis).
        #[arg(long, value_parser = parse_offset, value_name = "T")]
        from: Option<Duration>,
        /// Only the samples that start before this time since the region
        /// was made.
        #[arg(long, value_parser = parse_offset, value_name = "T")]
        to: Option<Duration>,
    },
}
/// A time since the region was made: an interval, or 0.
fn parse_offset(s: &str) -> Result<Duration, String> {
    if s.trim_end_matches(['m', 's']).trim().parse::<f64>() == Ok(0.0) {
        return Ok(Duration::ZERO);
    }
    parse_interval(s)
}

/// An age: a number with `s`, `m`, `h` or `d` (seconds without one), 0 or more.
fn parse_age(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        Some((i, 'd')) => (&t[..i], 86400.0),
        _ => (t, 1.0),
    };
    let x: f64 = num.trim().parse().map_err(|_| format!("not a duration: {s} (e.g. 30s, 10m, 2h, 7d)"))?;
    // Not `x < 0.0` alone: NaN is refused too.
    if x.is_nan() || x < 0.0 || x * scale > 1e10 {
        return Err(format!("duration out of range: {s}"));
    }
    Ok(Duration::from_secs_f64(x * scale))
}

/// `5`, `5%` or `0.5%`: a share (0.05, 0.005).
fn parse_percent(s: &str) -> Result<f64, String> {
    let x: f64 = s.trim().trim_end_matches('%').trim().parse().map_err(|_| format!("not a percentage: {s}"))?;
    if !(0.0..=1000.0).contains(&x) {
        return Err(format!("percentage out of range: {s}"));
    }
    Ok(x / 100.0)
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('m') {
        (v, 60.0)
    } else {
        (s, 1.0)
    };
    let x: f64 = num.trim().parse().map_err(|_| format!("not an interval: {s}"))?;
    // Not `x <= 0.0`: NaN is refused too.
    if x.is_nan() || x <= 0.0 || x * scale > 86400.0 {
        return Err(format!("interval out of range: {s}"));
    }
    Ok(Duration::from_secs_f64(x * scale))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let style = Style::detect(cli.color);
    match cli.cmd {
        Cmd::Ls { json } => exit::done(cmd::ls::run(json, style)),
        Cmd::Stats { target, time, calibrated, json, wide, clean } => {
            exit::done(cmd::stats::run(&target, time, calibrated, json, clean, if wide { Style { width: None, ..style } } else { style }))
        }
        Cmd::Watch { target, interval, count, plain, time, follow, clean } => {
            exit::done(cmd::watch::run(&target, &cmd::watch::WatchOpts { every: interval, count, plain: plain || !style.tty, time, follow, clean }, style))
        }
        Cmd::Trace { target, output, ids, threads, from, to } => {
            let ids: Vec<String> = ids.iter().map(|i| term::id_text(i.as_bytes())).collect();
            let filter = latte::trace::Filter {
                ids: (!ids.is_empty()).then_some(&ids[..]),
                threads: (!threads.is_empty()).then_some(&threads[..]),
                from_ns: from.map_or(0.0, |d| d.as_nanos() as f64),
                to_ns: to.map_or(f64::INFINITY, |d| d.as_nanos() as f64),
            };
            exit::done(cmd::trace::run(&target, &output, &filter))
        }
        Cmd::Serve { regions, listen, per_thread, interval, keep_gone, split_switched, max_ids } => {
            exit::done(cmd::serve::run(regions, listen, export::Options { regions: Vec::new(), per_thread, keep_gone, split_switched, max_ids }, interval))
        }
        Cmd::Record { target, output, duration, count, ids, from_start, wait } => {
            let ids = ids.iter().map(|i| term::id_text(i.as_bytes())).collect();
            exit::done(cmd::record::run(&cmd::record::RecordOpts { target, output, duration, count, ids, from_start, wait }))
        }
        Cmd::Diff { a, b, alpha, threshold, clean, json, replicates, seed, wide } => exit::done(cmd::diff::run(
            &cmd::diff::DiffOpts { a, b, alpha, threshold, clean, json, replicates: replicates as usize, seed },
            if wide { Style { width: None, ..style } } else { style },
        )),
        Cmd::Rm { names, dead, older_than, force, dry_run } => exit::done(cmd::rm::run(&cmd::rm::RmOpts { names, dead, older_than, force, dry_run })),
        Cmd::Plot { sources, output, ids, clean, heatmap_run } => {
            let ids = ids.iter().map(|i| term::id_text(i.as_bytes())).collect();
            exit::done(cmd::plot::run(&cmd::plot::PlotOpts { sources, output, ids, clean, heatmap_run: (heatmap_run - 1) as usize }))
        }
    }
}
