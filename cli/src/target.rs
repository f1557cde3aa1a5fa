//! What a command reads: a target named on the command line (a region or a
//! file), opened with one precise message for each way it can fail, and the
//! facts about it that several commands show.

use crate::exit::{fail, owner_text, strerror, EXIT_MISSING, EXIT_NOT_REGION, EXIT_OTHER, EXIT_PERMISSION};
use latte::error::Error;
use latte::reader::{Mapping, View};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

/// How a target is read: a shared-memory region (its name's bytes, with
/// the leading '/') or a file.
pub enum Target {
    Region(Vec<u8>),
    File(std::path::PathBuf),
}

/// How a target is read ([`latte::shm::target`]'s rule, on bytes: a name
/// need not be UTF-8), saying on standard error how to name the file when
/// a region and a file answer to the target both.
pub fn resolve(target: &OsStr) -> Target {
    match latte::shm::target(target.as_bytes()) {
        latte::shm::Target::Region { name, file_too } => {
            if file_too {
                let text = shown(target.as_bytes());
                let file = if text.starts_with('/') { format!("/.{text}") } else { format!("./{text}") };
                eprintln!("latte: {text}: reading the region {} (a file of that name exists too: write {file} for the file)", shown(&name));
            }
            Target::Region(name)
        }
        latte::shm::Target::File(p) => Target::File(p),
    }
}

/// The form of a target alone, whatever exists: a region name (`/name`,
/// or `name` for `/name`) or a file path (`latte rm` and `latte serve`,
/// which take region names only).
pub fn classify(target: &OsStr) -> Target {
    let b = target.as_bytes();
    if latte::shm::is_region_name(b) {
        Target::Region(if b[0] == b'/' { b.to_vec() } else { [b"/", b].concat() })
    } else {
        Target::File(std::path::PathBuf::from(target))
    }
}

/// A target, name or path as text: UTF-8 as is, any other byte as `\xNN`.
pub fn shown(b: &[u8]) -> String {
    crate::term::label_text(b)
}

/// Opens a region or file, or prints one precise message and gives the exit code.
pub fn open(raw: &OsStr) -> Result<Mapping, ExitCode> {
    open_target(raw).map(|(_, m)| m)
}

/// As `open`, with what the target was read as ([`resolve`]).
pub fn open_target(raw: &OsStr) -> Result<(Target, Mapping), ExitCode> {
    let kind = resolve(raw);
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
    let m = r.map_err(|e| {
        let (what, path) = match &kind {
            Target::Region(n) => (format!("region {}", shown(n)), std::path::PathBuf::from(OsStr::from_bytes(&[b"/dev/shm", &n[..]].concat()))),
            Target::File(p) => (p.display().to_string(), p.clone()),
        };
        match e {
            c if c == Error::Os(libc::ENOENT) => match &kind {
                Target::Region(n) if std::path::Path::new(raw).is_dir() => {
                    fail(target, &format!("is a directory, not a latte region or a flushed image (and there is no region {})", shown(n)), EXIT_NOT_REGION)
                }
                Target::Region(n) => fail(target, &format!("no such region (no /dev/shm{}; `latte ls` lists the regions)", shown(n)), EXIT_MISSING),
                Target::File(_) => fail(target, "no such file", EXIT_MISSING),
            },
            c if c == Error::Os(libc::EACCES) || c == Error::Os(libc::EPERM) => {
                fail(&what, &format!("permission denied{}", owner_text(&path)), EXIT_PERMISSION)
            }
            c if c == Error::Os(libc::EINVAL) && matches!(kind, Target::Region(_)) => fail(target, &invalid_name_text(region_of(&kind)), EXIT_MISSING),
            Error::NotLatte | Error::Version | Error::Truncated | Error::Corrupt => fail(&what, &strerror(e), EXIT_NOT_REGION),
            c if c == Error::Os(libc::ENODEV) || c == Error::Os(libc::EISDIR) => {
                fail(&what, "cannot be mapped: not a latte region or a flushed image", EXIT_NOT_REGION)
            }
            Error::Os(errno) => fail(&what, &format!("{} (errno {errno})", strerror(e)), EXIT_OTHER),
            _ => fail(&what, &strerror(e), EXIT_OTHER),
        }
    })?;
    Ok((kind, m))
}

/// Cycles per ns for display: the producer's figure, else measured here
/// (the TSC is invariant and shared by the machine's cores).
pub fn cycles_per_ns(v: &View) -> f64 {
    let c = v.calibration().cycles_per_ns;
    if c > 0.0 {
        c
    } else {
        latte::measure_cycles_per_ns(50)
    }
}

/// IDs a report would show (reserved ones left out).
pub fn program_ids(v: &View) -> usize {
    v.ids().map(|ids| ids.iter().filter(|i| !latte::name::is_reserved_name(latte::name::name_bytes(&i.name))).count()).unwrap_or(0)
}

/// The first line of /proc/PID/comm or /proc/PID/task/TID/comm.
pub fn comm(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim_end_matches('\n');
    (!s.is_empty()).then(|| s.to_string())
}

/// The region name a target was read as (empty for a file).
fn region_of(kind: &Target) -> &[u8] {
    match kind {
        Target::Region(n) => n,
        Target::File(_) => &[],
    }
}

/// Why a region name is refused, in words.
pub fn invalid_name_text(name: &[u8]) -> String {
    format!("not a valid region name: {}", latte::shm::name_problem(name).unwrap_or("refused"))
}
