//! `latte`: read a running service's region (or a flushed file) from outside.
//! Read-only by construction: every object is opened O_RDONLY and mapped
//! PROT_READ, through the same reader and report code as the library.
//!
//! Output follows the terminal: colour only on a terminal (`--color`,
//! `NO_COLOR`, `TERM=dumb`), tables fitted to its width (`--wide` keeps every
//! column), plain `key=value` lines when the output is not a terminal.

use clap::{Parser, Subcommand, ValueEnum};
use latte::error::Error;
use latte::layout::*;
use latte::reader::{latte_cursor, latte_raw_sample, Mapping, View};
use latte::report::{self, Options};
use latte::stats;
use std::ffi::{OsStr, OsString};
use std::io::{IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;
use std::time::{Duration, Instant};

mod cmd;
mod diffstats;
mod export;
mod recording;
mod samples;
mod serve;
mod shm_watch;

#[derive(Parser)]
#[command(name = "latte", version, about = "Read latte regions of running services (read-only)")]
struct Cli {
    /// When to colour the output: auto (only on a terminal, and not with
    /// NO_COLOR or TERM=dumb), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    color: ColorWhen,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ColorWhen {
    Auto,
    Always,
    Never,
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
        /// Keep every column even when the terminal is narrower.
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
        /// Keep watching after the producer has exited.
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
        /// How often the regions are read (a ring of 65,536 samples read
        /// every 100 ms keeps up with 655,360 samples a second).
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
    },
    /// Follow a live region and write every sample it records to a file
    /// (a recording: read by stats, trace, diff and plot like a flushed image).
    Record {
        /// A region name (`/name` or `name`).
        target: String,
        /// The recording to write.
        #[arg(short = 'o', long = "output")]
        output: std::path::PathBuf,
        /// Stop after this long (e.g. 10s, 500ms, 2m); without --for and
        /// --count: when the producer exits or on Ctrl-C.
        #[arg(long = "for", value_parser = parse_interval, value_name = "DURATION")]
        duration: Option<Duration>,
        /// Stop once this many samples were read (whole batches: at least this many).
        #[arg(long)]
        count: Option<u64>,
        /// Record only this ID (repeat for more).
        #[arg(long = "id", value_name = "NAME")]
        ids: Vec<String>,
        /// Begin with the samples the rings hold now (what they no longer
        /// hold counts as lost) instead of with the next one written.
        #[arg(long)]
        from_start: bool,
    },
    /// Compare two runs (regions, flushed images or recordings) per ID:
    /// percentiles, their change, a bootstrap interval, the Mann-Whitney U
    /// p-value and a verdict. Exit code 8 when an ID got significantly slower.
    Diff {
        /// The baseline.
        a: String,
        /// The run compared with it.
        b: String,
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
        /// Bootstrap replicates.
        #[arg(long, default_value_t = 2000)]
        replicates: usize,
        /// Seed of the bootstrap's random stream.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Keep every column even when the terminal is narrower.
        #[arg(long)]
        wide: bool,
    },
    /// Draw runs: per ID, the percentile spectrum of each run (one curve per
    /// run) and a heat map of one run's latency over time, as SVG or PNG.
    Plot {
        /// Regions, flushed images or recordings (one curve each).
        #[arg(required = true)]
        sources: Vec<String>,
        /// The picture: a name ending in .svg or .png.
        #[arg(short = 'o', long = "output")]
        output: std::path::PathBuf,
        /// Plot only this ID (repeat for more).
        #[arg(long = "id", value_name = "NAME")]
        ids: Vec<String>,
        /// Leave out switched samples from the spectra.
        #[arg(long)]
        clean: bool,
        /// Which run's heat map to draw (1 = the first given).
        #[arg(long, default_value_t = 1, value_name = "N")]
        heatmap_run: usize,
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

/// Exit codes: 0 success, 1 other failure, 2 usage, 3 no such region or
/// file, 4 not a latte region (or a directory, truncated, corrupt, another
/// layout version), 5 permission denied, 6 the output file cannot be written.
const EXIT_OTHER: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_MISSING: u8 = 3;
const EXIT_NOT_REGION: u8 = 4;
const EXIT_PERMISSION: u8 = 5;
const EXIT_OUTPUT: u8 = 6;

fn strerror(e: Error) -> String {
    e.to_string()
}

/// Prints `latte: {what}: {text}` and gives the exit code.
fn fail(what: &str, text: &str, code: u8) -> ExitCode {
    eprintln!("latte: {what}: {text}");
    ExitCode::from(code)
}

/// How a target is read: a shared-memory region (its name's bytes, with
/// the leading '/') or a file.
enum Target {
    Region(Vec<u8>),
    File(std::path::PathBuf),
}

/// The rule of `Mapping::open_any`, on bytes (a name need not be UTF-8): a
/// target with no '/' after its first byte is a region name (`/name`, or
/// `name` for `/name`), any other a file path.
fn classify(target: &OsStr) -> Target {
    let b = target.as_bytes();
    if !b.is_empty() && !b[1..].contains(&b'/') {
        Target::Region(if b[0] == b'/' { b.to_vec() } else { [b"/", b].concat() })
    } else {
        Target::File(std::path::PathBuf::from(target))
    }
}

/// A target, name or path as text: UTF-8 as is, any other byte as `\xNN`.
fn shown(b: &[u8]) -> String {
    export::label_text(b)
}

/// Owner and mode of a path, for a permission message.
fn owner_text(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => format!(" (owner uid {}, mode {:04o}; this is uid {})", m.uid(), m.mode() & 0o7777, current_uid()),
        Err(_) => String::new(),
    }
}

fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail and has no preconditions.
    unsafe { libc::getuid() }
}

/// Opens a region or file, or prints one precise message and gives the exit code.
fn open(raw: &OsStr) -> Result<Mapping, ExitCode> {
    let kind = classify(raw);
    let target = &shown(raw.as_bytes());
    let target = target.as_str();
    if raw.as_bytes() == b"/" {
        return Err(fail(target, "is a directory, not a latte region or a flushed image", EXIT_NOT_REGION));
    }
    if let Target::File(p) = &kind {
        if p.is_dir() {
            return Err(fail(target, "is a directory, not a latte region or a flushed image", EXIT_NOT_REGION));
        }
        if !p.exists() {
            return Err(fail(target, "no such file", EXIT_MISSING));
        }
    }
    let r = match &kind {
        Target::Region(n) => Mapping::open_shm(n),
        Target::File(p) => Mapping::open_file(p),
    };
    r.map_err(|e| {
        let (what, path) = match &kind {
            Target::Region(n) => (format!("region {}", shown(n)), std::path::PathBuf::from(OsStr::from_bytes(&[b"/dev/shm", &n[..]].concat()))),
            Target::File(p) => (p.display().to_string(), p.clone()),
        };
        match e {
            c if c == Error::Os(libc::ENOENT) => match kind {
                Target::Region(n) if std::path::Path::new(raw).is_dir() => {
                    fail(target, &format!("is a directory, not a latte region or a flushed image (and there is no region {})", shown(&n)), EXIT_NOT_REGION)
                }
                Target::Region(n) if std::path::Path::new(raw).exists() => {
                    let file = if target.starts_with('/') { format!("/.{target}") } else { format!("./{target}") };
                    fail(
                        target,
                        &format!("no such region {} (a name without '/' after its first character is a region; write {file} for the file)", shown(&n)),
                        EXIT_MISSING,
                    )
                }
                Target::Region(n) => fail(target, &format!("no such region (no /dev/shm{}; `latte ls` lists the regions)", shown(&n)), EXIT_MISSING),
                Target::File(_) => fail(target, "no such file", EXIT_MISSING),
            },
            c if c == Error::Os(libc::EACCES) || c == Error::Os(libc::EPERM) => {
                fail(&what, &format!("permission denied{}", owner_text(&path)), EXIT_PERMISSION)
            }
            c if c == Error::Os(libc::EINVAL) && matches!(kind, Target::Region(_)) => {
                fail(target, "not a valid region name (one leading '/', no other, at most 250 bytes after it)", EXIT_MISSING)
            }
            Error::NotLatte | Error::Version | Error::Truncated | Error::Corrupt => fail(&what, &strerror(e), EXIT_NOT_REGION),
            c if c == Error::Os(libc::ENODEV) || c == Error::Os(libc::EISDIR) => {
                fail(&what, "cannot be mapped: not a latte region or a flushed image", EXIT_NOT_REGION)
            }
            Error::Os(errno) => fail(&what, &format!("{} (errno {errno})", strerror(e)), EXIT_OTHER),
            _ => fail(&what, &strerror(e), EXIT_OTHER),
        }
    })
}

/// Cycles per ns for display: the producer's figure, else measured here
/// (the TSC is invariant and shared by the machine's cores).
fn cycles_per_ns(v: &View) -> f64 {
    let c = v.calibration().cycles_per_ns;
    if c > 0.0 {
        c
    } else {
        latte::measure_cycles_per_ns(50)
    }
}

/// What the output looks like.
#[derive(Clone, Copy)]
struct Style {
    color: bool,
    /// Lines no wider than this (None: no limit).
    width: Option<usize>,
    /// Standard output is a terminal that can take cursor escapes.
    tty: bool,
}

fn dumb_term() -> bool {
    std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

impl Style {
    fn detect(when: ColorWhen) -> Style {
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match when {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => tty && !no_color && !dumb_term(),
        };
        Style { color, width: terminal_width(tty), tty: tty && !dumb_term() }
    }
}

/// The terminal's width: the window size of standard output when it is a
/// terminal, else `COLUMNS` when set; None for a pipe without `COLUMNS`.
fn terminal_width(tty: bool) -> Option<usize> {
    if tty {
        // SAFETY: an all-zero winsize is valid; TIOCGWINSZ writes one on fd 1.
        let mut ws: libc::winsize = unsafe { core::mem::zeroed() };
        // SAFETY: fd 1 is open; ws is writable.
        if unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_col > 0 {
            return Some(ws.ws_col as usize);
        }
    }
    std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|&c| c > 0)
}

/// Writes to standard output; a failure (a full disk, a closed pipe) is
/// reported once, with exit code 1.
fn emit(text: &str) -> Result<(), ExitCode> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(ExitCode::SUCCESS),
        Err(e) => Err(fail("standard output", &format!("cannot write: {e}"), EXIT_OTHER)),
    }
}

fn done(r: Result<(), ExitCode>) -> ExitCode {
    r.err().unwrap_or(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let style = Style::detect(cli.color);
    match cli.cmd {
        Cmd::Ls { json } => done(ls(json, style)),
        Cmd::Stats { target, time, calibrated, json, wide, clean } => {
            done(stats_cmd(&target, time, calibrated, json, clean, if wide { Style { width: None, ..style } } else { style }))
        }
        Cmd::Watch { target, interval, count, plain, time, follow, clean } => {
            done(watch(&target, &WatchOpts { every: interval, count, plain: plain || !style.tty, time, follow, clean }, style))
        }
        Cmd::Trace { target, output, ids, threads, from, to } => {
            let ids: Vec<String> = ids.iter().map(|i| String::from_utf8_lossy(i.as_bytes()).into_owned()).collect();
            let filter = latte::trace::Filter {
                ids: (!ids.is_empty()).then_some(&ids[..]),
                threads: (!threads.is_empty()).then_some(&threads[..]),
                from_ns: from.map_or(0.0, |d| d.as_nanos() as f64),
                to_ns: to.map_or(f64::INFINITY, |d| d.as_nanos() as f64),
            };
            done(trace(&target, &output, &filter))
        }
        Cmd::Serve { regions, listen, per_thread, interval, keep_gone, split_switched } => {
            done(serve_cmd(regions, listen, export::Options { regions: Vec::new(), per_thread, keep_gone, split_switched }, interval))
        }
        Cmd::Record { target, output, duration, count, ids, from_start } => {
            done(cmd::record::run(&cmd::record::RecordOpts { target, output, duration, count, ids, from_start }))
        }
        Cmd::Diff { a, b, alpha, threshold, clean, json, replicates, seed, wide } => done(cmd::diff::run(
            &cmd::diff::DiffOpts { a, b, alpha, threshold, clean, json, replicates, seed },
            if wide { Style { width: None, ..style } } else { style },
        )),
        Cmd::Plot { sources, output, ids, clean, heatmap_run } => {
            done(cmd::plot::run(&cmd::plot::PlotOpts { sources, output, ids, clean, heatmap_run: heatmap_run.saturating_sub(1) }))
        }
    }
}

/// `latte serve`: checks the names, then serves until killed.
fn serve_cmd(regions: Vec<OsString>, listen: std::net::SocketAddr, export: export::Options, interval: Duration) -> Result<(), ExitCode> {
    let mut names = Vec::new();
    for r in regions {
        let text = shown(r.as_bytes());
        match classify(&r) {
            Target::Region(n) if n.len() <= 255 && !n.contains(&0) => names.push(n),
            Target::Region(_) => return Err(fail(&text, "not a valid region name (one leading '/', no other, at most 250 bytes after it)", EXIT_USAGE)),
            Target::File(_) => return Err(fail(&text, "serve reads shared-memory regions (`/name`), not files", EXIT_USAGE)),
        }
    }
    names.sort();
    names.dedup();
    serve::run(serve::ServeOpts { listen, interval, export: export::Options { regions: names, ..export } })
}

/// `1.5 KiB`, `128.0 MiB`.
fn size_text(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1024.0 {
        format!("{bytes} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} GiB", b / (1024.0 * 1024.0 * 1024.0))
    }
}

/// IDs a report would show (reserved ones left out).
fn program_ids(v: &View) -> usize {
    v.ids().map(|ids| ids.iter().filter(|i| !latte::name::is_reserved_name(latte::name::name_bytes(&i.name))).count()).unwrap_or(0)
}

/// A text table: column k left-aligned when `align[k]` is 'l', else
/// right-aligned; columns dropped from the right until the lines fit `width`.
fn table(head: &[&str], align: &str, rows: &[Vec<String>], width: Option<usize>) -> String {
    let align: Vec<char> = align.chars().collect();
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (k, c) in r.iter().enumerate() {
            widths[k] = widths[k].max(c.chars().count());
        }
    }
    let mut n = head.len();
    while n > 1 && width.is_some_and(|w| widths[..n].iter().sum::<usize>() + 2 * (n - 1) > w) {
        n -= 1;
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (k, c) in cells.iter().take(n).enumerate() {
            if k > 0 {
                s.push_str("  ");
            }
            let w = widths[k];
            if align.get(k) == Some(&'l') {
                s.push_str(&format!("{c:<w$}"));
            } else {
                s.push_str(&format!("{c:>w$}"));
            }
        }
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(head.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(|s| s.as_str()).collect()));
    }
    out
}

fn ls(json: bool, style: Style) -> Result<(), ExitCode> {
    let mut rows = Vec::new();
    let dir = match std::fs::read_dir("/dev/shm") {
        Ok(d) => d,
        Err(e) => return Err(fail("/dev/shm", &format!("cannot list: {e}"), EXIT_OTHER)),
    };
    for e in dir.flatten() {
        // Opened by its bytes (a name need not be UTF-8), shown with any
        // byte that is not UTF-8 as \xNN.
        let raw = [b"/", e.file_name().as_bytes()].concat();
        let name = shown(&raw);
        match Mapping::open_shm(&raw) {
            Ok(m) => {
                let v = m.view();
                let k = v.counters();
                rows.push(serde_json::json!({
                    "name": name,
                    "readable": true,
                    "pid": v.producer_pid(),
                    "alive": m.producer_alive(),
                    "ids": program_ids(&v),
                    "threads": k.threads_seen,
                    "slots": k.slots_used,
                    "bytes": v.published_size(),
                }));
            }
            // Objects that are not latte regions (bad magic, empty, not a
            // regular file, an invalid name) are not listed; those it cannot
            // read are, with why.
            Err(c) if c == Error::NotLatte || c == Error::Os(libc::EINVAL) || c == Error::Os(libc::EISDIR) => {}
            Err(c) => {
                use std::os::unix::fs::MetadataExt;
                let meta = e.metadata().ok();
                rows.push(serde_json::json!({
                    "name": name,
                    "readable": false,
                    "error": strerror(c),
                    "owner_uid": meta.as_ref().map(|m| m.uid()),
                    "bytes": meta.as_ref().map(|m| m.len()),
                }));
            }
        }
    }
    rows.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    if json {
        return emit(&format!("{}\n", serde_json::Value::Array(rows)));
    }
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap_or(0);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let name = report::terminal_text(r["name"].as_str().unwrap_or("")).into_owned();
            if r["readable"].as_bool() == Some(true) {
                vec![
                    name,
                    n(r, "pid").to_string(),
                    if r["alive"].as_bool() == Some(true) { "yes" } else { "no" }.into(),
                    n(r, "ids").to_string(),
                    n(r, "threads").to_string(),
                    n(r, "slots").to_string(),
                    size_text(n(r, "bytes")),
                    String::new(),
                ]
            } else {
                let owner = r["owner_uid"].as_u64().map(|u| format!(" (owner uid {u})")).unwrap_or_default();
                vec![
                    name,
                    "?".into(),
                    "?".into(),
                    "?".into(),
                    "?".into(),
                    "?".into(),
                    size_text(n(r, "bytes")),
                    format!("{}{owner}", r["error"].as_str().unwrap_or("")),
                ]
            }
        })
        .collect();
    let text = if cells.iter().all(|c| c[7].is_empty()) {
        let cells: Vec<Vec<String>> = cells.iter().map(|c| c[..7].to_vec()).collect();
        table(&["NAME", "PID", "ALIVE", "IDS", "THREADS", "SLOTS", "SIZE"], "lrrrrrr", &cells, style.width)
    } else {
        // The note (why a region cannot be read) right after the name, so
        // that a narrow terminal drops figures rather than the reason.
        let cells: Vec<Vec<String>> = cells.iter().map(|c| [&c[..1], &c[7..8], &c[1..7]].concat()).collect();
        table(&["NAME", "NOTE", "PID", "ALIVE", "IDS", "THREADS", "SLOTS", "SIZE"], "llrrrrrr", &cells, style.width)
    };
    emit(&text)
}

fn stats_cmd(raw: &OsStr, time: bool, calibrated: bool, json: bool, clean: bool, style: Style) -> Result<(), ExitCode> {
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
    recording::add_lost(target, &mut rows).map_err(|e| fail(target, &e, EXIT_NOT_REGION))?;
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
        },
    });
    emit(&format!("{out}\n"))
}

/// The first line of /proc/PID/comm or /proc/PID/task/TID/comm.
fn comm(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim_end_matches('\n');
    (!s.is_empty()).then(|| s.to_string())
}

/// Why an output file cannot be created, in words.
fn output_error(path: &std::path::Path, e: &std::io::Error) -> String {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    match e.raw_os_error() {
        Some(libc::ENOENT) if !parent.exists() => format!("cannot create the output file: no such directory {}", parent.display()),
        Some(libc::ENOTDIR) => format!("cannot create the output file: {} is not a directory", parent.display()),
        Some(libc::EISDIR) => "cannot write the output file: it is a directory".into(),
        Some(libc::EACCES) | Some(libc::EPERM) => {
            format!("cannot create the output file: permission denied{}", owner_text(if path.exists() { path } else { parent }))
        }
        Some(libc::ENOSPC) => "cannot write the output file: no space left on the device".into(),
        Some(libc::EROFS) => "cannot create the output file: read-only file system".into(),
        _ => format!("cannot write the output file: {e}"),
    }
}

fn trace(raw: &OsStr, output: &std::path::Path, filter: &latte::trace::Filter) -> Result<(), ExitCode> {
    let m = open(raw)?;
    let target = &shown(raw.as_bytes());
    let v = &m.view();
    let c = report::collect(v).map_err(|e| fail(target, &strerror(e), EXIT_NOT_REGION))?;
    let cpn = cycles_per_ns(v);
    let pid = v.producer_pid();
    // Names are read while the producer runs: a pid of an exited producer
    // may belong to another process by now.
    let alive = m.producer_alive();
    let process = if alive { comm(&format!("/proc/{pid}/comm")).map(|n| format!("{n} (pid {pid})")) } else { None }.unwrap_or_else(|| format!("pid {pid}"));
    let thread = |tid: u32| -> String {
        if alive {
            if let Some(n) = comm(&format!("/proc/{pid}/task/{tid}/comm")) {
                return format!("{n} (tid {tid})");
            }
        }
        format!("tid {tid}")
    };
    let names = latte::trace::Names { process: &process, thread: &thread };
    if output.as_os_str() == "-" {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
        return match latte::trace::write_annotated(&mut w, &c, pid, v.anchor_tsc(), cpn, &names, filter) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(ExitCode::SUCCESS),
            Err(e) => Err(fail("standard output", &format!("cannot write: {e}"), EXIT_OTHER)),
        };
    }
    let shown = output.display().to_string();
    let f = std::fs::File::create(output).map_err(|e| fail(&shown, &output_error(output, &e), EXIT_OUTPUT))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    if let Err(e) = latte::trace::write_annotated(&mut w, &c, pid, v.anchor_tsc(), cpn, &names, filter) {
        drop(w);
        let _ = std::fs::remove_file(output);
        return Err(fail(&shown, &output_error(output, &e), EXIT_OUTPUT));
    }
    Ok(())
}

/// `2026-01-31T12:34:56.789Z` (UTC) of a wall-clock time.
fn timestamp(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, d.subsec_millis())
}

/// A name as one `key=value` field: as is when it has no space, quote,
/// backslash, `=` or control character, else JSON-quoted.
fn field(name: &str) -> String {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\' || c == '=') {
        serde_json::to_string(name).unwrap_or_else(|_| "\"?\"".into())
    } else {
        name.to_string()
    }
}

struct WatchOpts {
    every: Duration,
    count: u64,
    plain: bool,
    time: bool,
    follow: bool,
    /// Percentiles without the switched samples.
    clean: bool,
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
fn watch_read(v: &View, cursors: &mut Vec<latte_cursor>, buf: &mut Vec<latte_raw_sample>, per: &mut Vec<Interval>, clean: bool) -> Result<(), Error> {
    let ids = v.ids()?;
    for i in ids.iter().skip(per.len()) {
        per.push(Interval { name: String::from_utf8_lossy(latte::name::name_bytes(&i.name)).into_owned(), ..Default::default() });
    }
    for s in &v.slots()? {
        buf.clear();
        if cursors.len() <= s.index as usize {
            cursors.resize(s.index as usize + 1, latte_cursor::default());
        }
        let c = &mut cursors[s.index as usize];
        // The reader counts what it returns and what was overwritten
        // before it could (returned + lost = what the write index moved).
        let got = v.read_slot(s.index, c, buf, latte::reader::ReadMode::Live)?;
        if let Some(p) = per.get_mut(s.id_token as usize) {
            p.read += buf.len() as u64;
            p.lost += got.lost;
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

fn watch(raw: &OsStr, o: &WatchOpts, style: Style) -> Result<(), ExitCode> {
    let mut m = open(raw)?;
    let target = &report::terminal_text(&shown(raw.as_bytes())).into_owned();
    let v = m.view();
    let pid = v.producer_pid();
    let cpn = if o.time { cycles_per_ns(&v) } else { 0.0 };
    let units = report::Units { unit: if o.time { LATTE_UNIT_TIME } else { LATTE_UNIT_CYCLE }, cycles_per_ns: cpn };
    // Table cells carry their unit; plain fields a number and its unit.
    let cell = |c: f64| if o.time { units.show(c) } else { format!("{} cycles", report::format_cycles(c)) };
    let plain_value = |c: f64| if o.time { format!("{:.1}ns", c / cpn) } else { format!("{c:.0}cycles") };
    // One cursor per slot handed out, grown as slots are (never as many as
    // the header says there could be: a hostile one claims 2^32 - 1).
    let mut cursors: Vec<latte_cursor> = Vec::new();
    let mut buf: Vec<latte_raw_sample> = Vec::new();
    // Start at "now": skip what is already there.
    if let Ok(slots) = v.slots() {
        for s in slots {
            if cursors.len() <= s.index as usize {
                cursors.resize(s.index as usize + 1, latte_cursor::default());
            }
            let _ = v.read_slot(s.index, &mut cursors[s.index as usize], &mut buf, latte::reader::ReadMode::Live);
        }
    }
    let fail_read = |e: Error| fail(target, &strerror(e), EXIT_NOT_REGION);
    let mut n = 0u64;
    let mut start = Instant::now();
    let mut next = start + o.every;
    loop {
        // Reads every WATCH_STEP until the interval ends, then once more.
        let mut per: Vec<Interval> = Vec::new();
        let alive = loop {
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
            m.refresh().map_err(fail_read)?;
            watch_read(&m.view(), &mut cursors, &mut buf, &mut per, o.clean).map_err(fail_read)?;
            if done {
                break alive;
            }
        };
        let end = Instant::now();
        let secs = end.duration_since(start).as_secs_f64().max(1e-9);
        start = end;
        next += o.every;
        n += 1;
        let tracked = m.view().switches_tracked();
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
            let (rec_rate, read_rate) = (p.recorded() as f64 / secs, p.read as f64 / secs);
            let share = if p.read == 0 { 0.0 } else { 100.0 * p.switched as f64 / p.read as f64 };
            // Percentiles of nothing (nothing read, or --clean and every
            // sample read switched out) say so instead of showing 0.
            let none = if p.read == 0 { "none-read" } else { "none-left" };
            if o.plain {
                let fig = |f: fn(&stats::Summary) -> f64| s.as_ref().map(|s| plain_value(f(s))).unwrap_or_else(|| none.into());
                let switched = if tracked { format!("switched={} switched_share={share:.1}%", p.switched) } else { "switched=not-tracked".into() };
                text.push_str(&format!(
                    "time={stamp} interval={n} id={} recorded_rate={rec_rate:.1}/s read_rate={read_rate:.1}/s recorded={} read={} lost={} p50={} p90={} p99={} p999={} max={} {switched}{}\n",
                    field(&p.name),
                    p.recorded(),
                    p.read,
                    p.lost,
                    fig(|s| s.p50),
                    fig(|s| s.p90),
                    fig(|s| s.p99),
                    fig(|s| s.p999),
                    fig(|s| s.max),
                    if o.clean { format!(" left={}", p.read - p.switched) } else { String::new() },
                ));
            } else {
                let fig = |f: fn(&stats::Summary) -> f64| s.as_ref().map(|s| cell(f(s))).unwrap_or_else(|| "-".into());
                table_rows.push(vec![
                    report::terminal_text(&p.name).into_owned(),
                    format!("{rec_rate:.1}/s"),
                    format!("{read_rate:.1}/s"),
                    p.lost.to_string(),
                    s.as_ref().map(|s| cell(s.p50)).unwrap_or_else(|| none.replace('-', " ")),
                    fig(|s| s.p99),
                    fig(|s| s.max),
                    if tracked { format!("{} ({share:.1}%)", p.switched) } else { "not tracked".into() },
                    fig(|s| s.p999),
                    fig(|s| s.p90),
                ]);
            }
        }
        if o.plain {
            if text.is_empty() {
                text = format!("time={stamp} interval={n} state=idle\n");
            }
        } else {
            text.push_str("\x1b[H\x1b[2J");
            text.push_str(&format!(
                "latte watch {target}  pid {pid} ({})  every {:.3} s  #{n}  {}{}\n",
                if alive { "alive" } else { "exited" },
                o.every.as_secs_f64(),
                if o.time { "times" } else { "cycles" },
                if o.clean { "  clean: percentiles without switched samples" } else { "" }
            ));
            // Loss is said on a line of its own too, so that no width hides it.
            if lost_all > 0 {
                text.push_str(&format!("LOST {lost_all} of {recorded_all} samples recorded this interval (overwritten before they were read)\n"));
            }
            text.push_str(&table(&["ID", "RECORDED", "READ", "LOST", "P50", "P99", "MAX", "SWITCHED", "P99.9", "P90"], "lrrrrrrrrr", &table_rows, style.width));
        }
        emit(&text)?;
        if !alive && !o.follow {
            eprintln!("latte: watch: producer {pid} has exited and every sample is read (--follow keeps watching)");
            return Ok(());
        }
        if o.count > 0 && n >= o.count {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_civil_dates() {
        let t = |s: u64, ms: u64| timestamp(std::time::UNIX_EPOCH + Duration::from_millis(s * 1000 + ms));
        assert_eq!(t(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(t(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(t(1_798_761_599, 999), "2026-12-31T23:59:59.999Z");
    }

    #[test]
    fn names_are_single_fields() {
        assert_eq!(field("svc.a"), "svc.a");
        assert_eq!(field("a b"), "\"a b\"");
        assert_eq!(field("k=v"), "\"k=v\"");
        assert_eq!(field(""), "\"\"");
    }

    #[test]
    fn tables_drop_columns_to_fit() {
        let rows = vec![vec!["name".to_string(), "12345".to_string(), "x".to_string()]];
        let t = table(&["NAME", "NUMBER", "X"], "lrr", &rows, Some(13));
        assert!(t.lines().all(|l| l.chars().count() <= 13), "{t}");
        assert!(t.contains("NUMBER") && !t.contains(" X"), "{t}");
        assert!(table(&["NAME", "NUMBER", "X"], "lrr", &rows, None).contains(" X"));
    }
}
