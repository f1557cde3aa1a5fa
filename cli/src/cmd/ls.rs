//! `latte ls`: the latte regions in /dev/shm, and those it cannot read
//! with why.

use crate::exit::{fail, strerror, EXIT_OTHER};
use crate::target::{program_ids, shown};
use crate::term::{emit, size_text, table, Style};
use latte::error::Error;
use latte::reader::Mapping;
use latte::report;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

/// Lists the regions: a table, or JSON.
pub fn run(json: bool, style: Style) -> Result<(), ExitCode> {
    let rows = scan()?;
    if json {
        return emit(&format!("{}\n", serde_json::Value::Array(rows)));
    }
    emit(&render(&rows, style))
}

/// One JSON object per latte region in /dev/shm, by name.
fn scan() -> Result<Vec<serde_json::Value>, ExitCode> {
    let mut rows = Vec::new();
    let dir = match std::fs::read_dir("/dev/shm") {
        Ok(d) => d,
        Err(e) => return Err(fail("/dev/shm", &format!("cannot list: {e}"), EXIT_OTHER)),
    };
    for e in dir.flatten() {
        // Only regular files can be regions: sockets, FIFOs, directories
        // and symbolic links (which latte never follows) are not listed.
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
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
                    "ring_samples": v.geo().samples_per_slot,
                    "bytes": v.published_size(),
                }));
            }
            // Objects that are not latte regions (bad magic, empty, an
            // invalid name, replaced by something else since listed) are
            // not listed; those it cannot read are, with why.
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
    Ok(rows)
}

/// The regions as a table fitted to the terminal.
fn render(rows: &[serde_json::Value], style: Style) -> String {
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
    text
}
