//! `latte rm`: removes latte regions from /dev/shm on purpose, by name or
//! every dead one (`--dead`), by the liveness rule of the take-over
//! (`latte::remove_region`: the old object's lock taken while its name is
//! unlinked). The one command that changes anything: it removes names in
//! /dev/shm, and never anything that is not a latte region.

use crate::exit::{fail, owner_text, EXIT_LIVE, EXIT_MISSING, EXIT_NOT_REGION, EXIT_OTHER, EXIT_PERMISSION, EXIT_USAGE};
use crate::target::{classify, invalid_name_text, shown, Target};
use latte::{Error, Mapping, Removal};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// What `latte rm` was asked.
pub struct RmOpts {
    /// Region names (`/name` or `name`); empty with `dead`.
    pub names: Vec<OsString>,
    /// Every region whose producer is gone.
    pub dead: bool,
    /// Only regions made at least this long ago.
    pub older_than: Option<Duration>,
    /// Remove a live producer's region too.
    pub force: bool,
    /// Only say what would be removed.
    pub dry_run: bool,
}

/// Removes what `o` names; the exit code of the first failure, if any.
pub fn run(o: &RmOpts) -> Result<(), ExitCode> {
    let mut first: Option<ExitCode> = None;
    if o.dead {
        dead(o, &mut first)?;
    } else {
        for raw in &o.names {
            if let Err(code) = one(raw, o) {
                first.get_or_insert(code);
            }
        }
    }
    first.map_or(Ok(()), Err)
}

/// What is known of a region before it is removed, for the line that says so.
struct Found {
    pid: Option<u32>,
    /// Since when the region exists: its header's wall-clock anchor, else
    /// the object's last change as the file system saw it.
    made: Option<SystemTime>,
}

/// Reads what `Found` shows of the region `name` (nothing of a region that
/// cannot be read: another layout version, a damaged header).
fn look(name: &[u8]) -> Found {
    let mtime = std::fs::metadata(shm_path(name)).and_then(|m| m.modified()).ok();
    match Mapping::open_shm(name) {
        Ok(m) => {
            let v = m.view();
            let anchor = v.anchor_realtime_ns();
            let made = if anchor > 0 { Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(anchor)) } else { mtime };
            Found { pid: Some(v.producer_pid()).filter(|&p| p > 0), made }
        }
        Err(_) => Found { pid: None, made: mtime },
    }
}

fn shm_path(name: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(&[b"/dev/shm", name].concat()))
}

/// `3 h 20 min`, `45 s`: an age for a line of output.
fn age_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} days", s / 86400),
    }
}

/// The line printed for a region removed (or that would be).
fn removed_line(name: &[u8], what: Removal, f: &Found, dry_run: bool) -> String {
    let verb = if dry_run { "would remove" } else { "removed" };
    let pid = f.pid.map(|p| format!("pid {p}")).unwrap_or_else(|| "pid unknown".into());
    let state = match what {
        Removal::Dead => format!("producer {pid} has exited"),
        Removal::Live => format!("producer {pid} is alive and records on, unseen"),
    };
    let age = f.made.and_then(|t| SystemTime::now().duration_since(t).ok()).map(|d| format!(", made {} ago", age_text(d))).unwrap_or_default();
    format!("{verb} {} ({state}{age})", shown(name))
}

/// `latte rm NAME`: one region.
fn one(raw: &OsString, o: &RmOpts) -> Result<(), ExitCode> {
    let text = shown(raw.as_bytes());
    let name = match classify(raw) {
        Target::Region(n) => n,
        Target::File(_) => return Err(fail(&text, "latte rm removes regions (`/name` or `name`), not files: remove a file with rm(1)", EXIT_USAGE)),
    };
    let f = look(&name);
    if let Some(min) = o.older_than {
        if f.made.and_then(|t| SystemTime::now().duration_since(t).ok()).is_some_and(|age| age < min) {
            println!("kept {}: made less than {} ago (--older-than)", shown(&name), age_text(min));
            return Ok(());
        }
    }
    match latte::remove_region(&name, o.force, o.dry_run) {
        Ok(what) => {
            println!("{}", removed_line(&name, what, &f, o.dry_run));
            Ok(())
        }
        Err(e) => Err(refused(raw, &name, e, &f)),
    }
}

/// Why a region named on the command line was not removed: one line, and
/// the exit code.
fn refused(raw: &OsString, name: &[u8], e: Error, f: &Found) -> ExitCode {
    let text = shown(raw.as_bytes());
    match e {
        Error::NotLatte => fail(&shown(name), "not a latte region: not removed (latte rm removes latte regions only)", EXIT_NOT_REGION),
        c if c == Error::BUSY => {
            let pid = f.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
            fail(
                &shown(name),
                &format!("its producer{pid} is alive: not removed (--force removes its name; the producer records on into an object no new reader can open)"),
                EXIT_LIVE,
            )
        }
        c if c == Error::Os(libc::ENOENT) => {
            let file = std::path::Path::new(raw);
            if file.exists() {
                fail(
                    &text,
                    &format!("no such region {} ({text} is a file: latte rm removes regions only; remove a file with rm(1))", shown(name)),
                    EXIT_MISSING,
                )
            } else {
                fail(&text, &format!("no such region (no /dev/shm{}; `latte ls` lists the regions)", shown(name)), EXIT_MISSING)
            }
        }
        c if c == Error::INVAL => fail(&text, &invalid_name_text(name), EXIT_MISSING),
        c if c == Error::Os(libc::EACCES) || c == Error::Os(libc::EPERM) => {
            fail(&shown(name), &format!("permission denied: not removed{}", owner_text(&shm_path(name))), EXIT_PERMISSION)
        }
        e => fail(&shown(name), &format!("not removed: {e}"), EXIT_OTHER),
    }
}

/// `latte rm --dead`: every latte region in /dev/shm whose producer is
/// gone (and, with `--older-than`, made long enough ago).
fn dead(o: &RmOpts, first: &mut Option<ExitCode>) -> Result<(), ExitCode> {
    let dir = std::fs::read_dir("/dev/shm").map_err(|e| fail("/dev/shm", &format!("cannot list: {e}"), EXIT_OTHER))?;
    let mut names: Vec<Vec<u8>> = dir
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| [b"/", e.file_name().as_bytes()].concat())
        .filter(|n| latte::shm::validate_name(n).is_ok())
        .collect();
    names.sort();
    let (mut removed, mut denied) = (0u64, Vec::new());
    for name in names {
        let f = look(&name);
        let age = f.made.and_then(|t| SystemTime::now().duration_since(t).ok());
        if o.older_than.is_some_and(|min| age.is_none_or(|a| a < min)) {
            continue;
        }
        match latte::remove_region(&name, false, o.dry_run) {
            Ok(what) => {
                println!("{}", removed_line(&name, what, &f, o.dry_run));
                removed += 1;
            }
            // Live, not a latte region, or gone meanwhile: not for --dead.
            Err(e) if e == Error::BUSY || e == Error::NotLatte || e == Error::Os(libc::ENOENT) => {}
            Err(e) if e == Error::Os(libc::EACCES) || e == Error::Os(libc::EPERM) => denied.push(name),
            Err(e) => {
                first.get_or_insert(fail(&shown(&name), &format!("not removed: {e}"), EXIT_OTHER));
            }
        }
    }
    if !denied.is_empty() {
        let list: Vec<String> = denied.iter().map(|n| shown(n)).collect();
        eprintln!("latte: rm: {} object(s) this user may not open for writing were not looked at: {}", denied.len(), list.join(" "));
    }
    if removed == 0 && denied.is_empty() {
        let narrowed = o.older_than.map(|d| format!(" made over {} ago", age_text(d))).unwrap_or_default();
        eprintln!("latte: rm: no dead region{narrowed} in /dev/shm");
    }
    Ok(())
}
