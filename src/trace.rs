//! The Chrome trace: a JSON array of complete ("X") events, one per sample,
//! ordered by start time, that Perfetto and chrome://tracing load. Two
//! renderings:
//! - `write` (`DumpToJson`, `latte_trace_write`): the original Latte's text
//!   line for line (`"key": value` with a space, two-space indent, one event
//!   per line, the extra fields at the top level of each event);
//! - `write_annotated` (the `latte trace` command): process and thread name
//!   metadata ("M") events first, then one event per sample with the extra
//!   fields under `args`, where trace viewers show them.
//!
//! Names are JSON-escaped in both: `write` gives a name's bytes (those
//! not UTF-8 as U+FFFD) as the original does, `write_annotated` its
//! `name_text`, as every `latte` tool does.

use crate::error::Error;
use crate::report::Collected;
use std::io::Write;

/// One event as both renderings print it.
struct Timed {
    /// The component's name, JSON-quoted.
    name: usize,
    tid: u32,
    depth: u32,
    start_ns: f64,
    dur_ns: f64,
    /// Position in its (thread, ID) track, from 0, as the original numbers
    /// each thread's ring.
    index: u64,
}

/// The events of `c` in start order with their times (ns since the anchor
/// TSC) and track positions.
fn timed(c: &Collected, anchor_tsc: u64, cycles_per_ns: f64) -> impl Iterator<Item = Timed> + '_ {
    let cpn = if cycles_per_ns > 0.0 { cycles_per_ns } else { 1.0 };
    let mut index: std::collections::HashMap<(u32, u32), u64> = std::collections::HashMap::new();
    c.events.iter().map(move |e| {
        let slot = index.entry((e.token, e.os_tid)).or_insert(0);
        let n = *slot;
        *slot += 1;
        Timed {
            name: e.token as usize,
            tid: e.os_tid,
            depth: e.sample.depth,
            start_ns: e.sample.start_tsc.saturating_sub(anchor_tsc) as f64 / cpn,
            dur_ns: e.sample.duration as f64 / cpn,
            index: n,
        }
    })
}

/// The names of `c`, JSON-quoted: as the original shows them
/// (`classic`) or as every `latte` tool does (`name_text`).
fn quoted_names(c: &Collected, classic: bool) -> Vec<String> {
    let text = |n: &String| if classic { crate::name::classic_text(n) } else { n.clone() };
    c.names.iter().map(|n| serde_json::to_string(&text(n)).unwrap_or_else(|_| "\"?\"".into())).collect()
}

/// Writes the trace of `c` to `w`. Times are microseconds since the
/// region's anchor TSC (taken when the region was made, before any sample).
pub fn write(w: &mut dyn Write, c: &Collected, pid: u32, anchor_tsc: u64, cycles_per_ns: f64) -> std::io::Result<()> {
    let names = quoted_names(c, true);
    w.write_all(b"[\n")?;
    for (k, e) in timed(c, anchor_tsc, cycles_per_ns).enumerate() {
        if k > 0 {
            w.write_all(b",\n")?;
        }
        // The original's line, printf conversions and spacing included.
        write!(
            w,
            "  {{\"name\": {nm}, \"ph\": \"X\", \"pid\": {pid}, \"tid\": {tid}, \"ts\": {ts:.3}, \"dur\": {dur:.3}, \"component\": {nm}, \"sample_index\": {n}, \"depth\": {d}, \"start_ns\": {sn:.2}, \"duration_ns\": {dn:.2}}}",
            nm = names[e.name],
            tid = e.tid,
            ts = e.start_ns / 1000.0,
            dur = e.dur_ns / 1000.0,
            n = e.index,
            d = e.depth,
            sn = e.start_ns,
            dn = e.dur_ns,
        )?;
    }
    w.write_all(b"\n]\n")?;
    w.flush()
}

/// Which samples `write_annotated` writes: those of the IDs named (all when
/// None), of the threads listed (all when None), that start within
/// `[from_ns, to_ns)` ns of the anchor. A sample keeps its `sample_index`
/// (its position in its whole track).
pub struct Filter<'a> {
    pub ids: Option<&'a [String]>,
    pub threads: Option<&'a [u32]>,
    pub from_ns: f64,
    pub to_ns: f64,
}

impl Default for Filter<'_> {
    fn default() -> Self {
        Filter { ids: None, threads: None, from_ns: 0.0, to_ns: f64::INFINITY }
    }
}

impl Filter<'_> {
    fn keeps(&self, c: &Collected, e: &Timed) -> bool {
        self.ids.is_none_or(|ids| c.names.get(e.name).is_some_and(|n| ids.contains(n)))
            && self.threads.is_none_or(|t| t.contains(&e.tid))
            && e.start_ns >= self.from_ns
            && e.start_ns < self.to_ns
    }
}

/// Names of the process and of its threads, for `write_annotated`.
pub struct Names<'a> {
    pub process: &'a str,
    /// The name shown for an OS thread id.
    pub thread: &'a dyn Fn(u32) -> String,
}

/// The `latte trace` rendering: a JSON array holding a `process_name`
/// metadata event, a `thread_name` event per thread that recorded, then a
/// complete event per sample with `component`, `depth`, `start_ns`,
/// `duration_ns` and `sample_index` under `args`, for the samples `filter`
/// keeps (and the threads that recorded them). Times as in `write`.
pub fn write_annotated(w: &mut dyn Write, c: &Collected, pid: u32, anchor_tsc: u64, cycles_per_ns: f64, names: &Names, filter: &Filter) -> std::io::Result<()> {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into());
    let quoted = quoted_names(c, false);
    w.write_all(b"[\n")?;
    write!(w, "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":{}}}}}", q(names.process))?;
    let tids: std::collections::BTreeSet<u32> = timed(c, anchor_tsc, cycles_per_ns).filter(|e| filter.keeps(c, e)).map(|e| e.tid).collect();
    for tid in tids {
        write!(w, ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}}", q(&(names.thread)(tid)))?;
    }
    for e in timed(c, anchor_tsc, cycles_per_ns).filter(|e| filter.keeps(c, e)) {
        write!(
            w,
            ",\n{{\"name\":{nm},\"cat\":\"latte\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"ts\":{ts:.3},\"dur\":{dur:.3},\"args\":{{\"component\":{nm},\"depth\":{d},\"start_ns\":{sn:.2},\"duration_ns\":{dn:.2},\"sample_index\":{n}}}}}",
            nm = quoted[e.name],
            tid = e.tid,
            ts = e.start_ns / 1000.0,
            dur = e.dur_ns / 1000.0,
            d = e.depth,
            sn = e.start_ns,
            dn = e.dur_ns,
            n = e.index,
        )?;
    }
    w.write_all(b"\n]\n")?;
    w.flush()
}

/// Writes the trace of a view (an empty trace without one) to `path`, with
/// `pid` as every event's process id. Nothing is created when the path
/// cannot be opened.
pub fn write_file(path: &std::path::Path, view: Option<&crate::reader::View>, pid: u32, cycles_per_ns: f64) -> Result<(), Error> {
    let c = match view {
        Some(v) => crate::report::collect(v)?,
        None => crate::report::Collected::default(),
    };
    let f = std::fs::File::create(path).map_err(|e| Error::from_io(&e))?;
    let mut bw = std::io::BufWriter::with_capacity(1 << 20, f);
    let anchor = view.map(|v| v.anchor_tsc()).unwrap_or(0);
    write(&mut bw, &c, pid, anchor, cycles_per_ns).map_err(|e| Error::from_io(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Collected, Event};

    fn one_event() -> Collected {
        let mut c = Collected { names: vec!["a \"quoted\" name".into()], hidden: vec![false], ..Default::default() };
        let sample = crate::layout::Sample { start_tsc: 3000, duration: 2000, depth: 1, start_mode: 0, stop_mode: 0, switched: false };
        c.events = vec![Event { token: 0, os_tid: 77, sample }];
        c
    }

    #[test]
    fn annotated_trace_is_json_with_metadata_and_args() {
        let c = one_event();
        let mut out = Vec::new();
        let thread = |tid: u32| format!("worker ({tid})");
        write_annotated(&mut out, &c, 42, 1000, 2.0, &Names { process: "svc", thread: &thread }, &Filter::default()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let a = v.as_array().unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a[0]["ph"], "M");
        assert_eq!(a[0]["name"], "process_name");
        assert_eq!(a[0]["args"]["name"], "svc");
        assert_eq!(a[1]["name"], "thread_name");
        assert_eq!(a[1]["tid"], 77);
        assert_eq!(a[1]["args"]["name"], "worker (77)");
        let x = &a[2];
        assert_eq!(x["ph"], "X");
        assert_eq!(x["name"], "a \"quoted\" name");
        assert_eq!(x["pid"], 42);
        assert_eq!(x["ts"].as_f64(), Some(1.0));
        assert_eq!(x["dur"].as_f64(), Some(1.0));
        assert_eq!(x["args"]["component"], "a \"quoted\" name");
        assert_eq!(x["args"]["depth"], 1);
        assert_eq!(x["args"]["start_ns"].as_f64(), Some(1000.0));
        assert_eq!(x["args"]["duration_ns"].as_f64(), Some(1000.0));
        assert_eq!(x["args"]["sample_index"], 0);
        assert!(x.get("component").is_none());
    }

    #[test]
    fn classic_trace_keeps_the_fields_at_the_top_level() {
        let c = one_event();
        let mut out = Vec::new();
        write(&mut out, &c, 42, 1000, 2.0).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"ph\": \"X\""), "{text}");
        assert!(text.contains("\"component\": "), "{text}");
        assert!(!text.contains("\"args\""), "{text}");
    }

    #[test]
    fn the_classic_trace_gives_a_name_s_bytes_the_annotated_one_its_text() {
        // `a\b` then the byte 0xe8: name_text is `a\\b\xe8`.
        let mut c = one_event();
        c.names = vec![crate::name::name_text(b"a\\b\xe8")];
        let (mut classic, mut annotated) = (Vec::new(), Vec::new());
        write(&mut classic, &c, 42, 1000, 2.0).unwrap();
        let thread = |tid: u32| format!("{tid}");
        write_annotated(&mut annotated, &c, 42, 1000, 2.0, &Names { process: "p", thread: &thread }, &Filter::default()).unwrap();
        let classic: serde_json::Value = serde_json::from_slice(&classic).unwrap();
        let annotated: serde_json::Value = serde_json::from_slice(&annotated).unwrap();
        assert_eq!(classic[0]["name"], "a\\b\u{fffd}");
        assert_eq!(annotated[2]["name"], "a\\\\b\\xe8");
    }
}
