//! The Chrome trace (`DumpToJson`, `latte trace`): a JSON array of complete
//! ("X") events, one per sample, ordered by start time, that Perfetto and
//! chrome://tracing load. The text is the original Latte's line for line
//! (`"key": value` with a space, two-space indent, one event per line);
//! names are JSON-escaped.

use crate::report::Collected;
use std::io::Write;

/// Writes the trace of `c` to `w`. Times are microseconds since the
/// region's anchor TSC (taken when the region was made, before any sample).
pub fn write(w: &mut dyn Write, c: &Collected, pid: u32, anchor_tsc: u64, cycles_per_ns: f64) -> std::io::Result<()> {
    let cpn = if cycles_per_ns > 0.0 { cycles_per_ns } else { 1.0 };
    let names: Vec<String> = c.names.iter().map(|n| serde_json::to_string(n).unwrap_or_else(|_| "\"?\"".into())).collect();
    // sample_index counts each (thread, ID) track on its own, as the
    // original numbers each thread's ring.
    let mut index: std::collections::HashMap<(u32, u32), u64> = std::collections::HashMap::new();
    w.write_all(b"[\n")?;
    let mut first = true;
    for e in &c.events {
        let t = e.token as usize;
        let start_ns = e.sample.start_tsc.saturating_sub(anchor_tsc) as f64 / cpn;
        let dur_ns = e.sample.duration as f64 / cpn;
        let slot = index.entry((e.token, e.os_tid)).or_insert(0);
        let n = *slot;
        *slot += 1;
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        // The original's line, printf conversions and spacing included.
        write!(
            w,
            "  {{\"name\": {nm}, \"ph\": \"X\", \"pid\": {pid}, \"tid\": {tid}, \"ts\": {ts:.3}, \"dur\": {dur:.3}, \"component\": {nm}, \"sample_index\": {n}, \"depth\": {d}, \"start_ns\": {sn:.2}, \"duration_ns\": {dn:.2}}}",
            nm = names[t],
            tid = e.os_tid,
            ts = start_ns / 1000.0,
            dur = dur_ns / 1000.0,
            d = e.sample.depth,
            sn = start_ns,
            dn = dur_ns,
        )?;
    }
    w.write_all(b"\n]\n")?;
    w.flush()
}

/// Writes the trace of a view (an empty trace without one) to `path`, with
/// `pid` as every event's process id. Nothing is created when the path
/// cannot be opened.
pub fn write_file(path: &std::path::Path, view: Option<&crate::reader::View>, pid: u32, cycles_per_ns: f64) -> Result<(), i32> {
    let c = match view {
        Some(v) => crate::report::collect(v)?,
        None => crate::report::Collected::default(),
    };
    let f = std::fs::File::create(path).map_err(|e| crate::error::io_code(&e))?;
    let mut bw = std::io::BufWriter::with_capacity(1 << 20, f);
    let anchor = view.map(|v| v.anchor_tsc).unwrap_or(0);
    write(&mut bw, &c, pid, anchor, cycles_per_ns).map_err(|e| crate::error::io_code(&e))
}
