//! `latte trace TARGET -o FILE`: the samples of a region or a file as a
//! Chrome trace, with process and thread names read from /proc while the
//! producer runs.

use crate::exit::{fail, output_error, strerror, EXIT_NOT_REGION, EXIT_OTHER, EXIT_OUTPUT};
use crate::target::{comm, cycles_per_ns, open, shown};
use latte::report;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

/// Writes the trace of `raw` to `output` (`-`: standard output).
pub fn run(raw: &OsStr, output: &std::path::Path, filter: &latte::trace::Filter) -> Result<(), ExitCode> {
    let m = open(raw)?;
    // A recording's trailer is checked as every reader of it checks it.
    m.recording().map_err(|e| crate::exit::fail(&crate::target::shown(raw.as_bytes()), &crate::recording::trailer_error(e), crate::exit::EXIT_NOT_REGION))?;
    let target = &shown(raw.as_bytes());
    let v = &m.view();
    let c = report::collect(v).map_err(|e| fail(target, &strerror(e), EXIT_NOT_REGION))?;
    // An --id that names no ID of the target is a mistake to say, not an
    // empty trace.
    for id in filter.ids.unwrap_or_default() {
        if !c.names.iter().zip(&c.hidden).any(|(n, &h)| !h && n == id) {
            return Err(fail(target, &format!("no ID named {}", crate::term::field(id)), crate::exit::EXIT_USAGE));
        }
    }
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
    let out = crate::output::Output::create(output).map_err(|e| fail(&shown, &output_error(output, &e), EXIT_OUTPUT))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, &out.file);
    let written = latte::trace::write_annotated(&mut w, &c, pid, v.anchor_tsc(), cpn, &names, filter).and_then(|_| std::io::Write::flush(&mut w));
    drop(w);
    if let Err(e) = written {
        out.discard();
        return Err(fail(&shown, &output_error(output, &e), EXIT_OUTPUT));
    }
    Ok(())
}
