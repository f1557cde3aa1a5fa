//! The shared region an unchanged program records into when its
//! environment names one: `LATTE_REGION=/name` (or `name`), or an empty
//! value or `auto` for `/latte-PROGRAM-PID` (with `-2`, `-3`, ... after it
//! while that is a live producer's or not a region's). Read once, where the process
//! would otherwise make its private region (its first span, or the first
//! call that needs a region); never on the recording path.
//!
//! When the region cannot be made (a bad name, a live producer holding the
//! name, a full `/dev/shm`), the process records into private memory as
//! without the variable, and says so once on standard error, unless
//! `LATTE_QUIET=1`; the variable is not looked at again.
//!
//! A program's own `latte_init_shared_region` before its first span takes
//! precedence: it replaces the region made here (whose name it removes),
//! as it replaces the private region.

use crate::error::Error;
use crate::region::{latte_region_config, Region};
use core::sync::atomic::{AtomicBool, Ordering};

/// The variable naming the region.
pub const LATTE_REGION_ENV: &str = "LATTE_REGION";
/// The value (besides an empty one) that asks for the default name.
const AUTO: &[u8] = b"auto";
/// Bytes of the program name kept in the default name.
const PROGRAM_NAME_MAX: usize = 64;
/// Names tried for the default: `/latte-PROGRAM-PID`, then with `-2` ...
/// `-16` after it, while each is held by a live producer or is not a region.
const AUTO_TRIES: u32 = 16;

/// Whether the installed region is the one `LATTE_REGION` named. Set and
/// read under the registry lock, which orders it (hence relaxed).
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Notes that the region `shared_region` made is the installed one.
pub(super) fn note_installed(yes: bool) {
    INSTALLED.store(yes, Ordering::Relaxed);
}

/// Whether the installed region is the one `LATTE_REGION` named: a
/// program's own `latte_init_shared_region` before its first span replaces
/// it, as it replaces the private region.
pub(super) fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// The region `LATTE_REGION` names, made now with the default capacities
/// (rings of `LATTE_RING_SAMPLES`, or of the default when those are bigger
/// and `/dev/shm` or memory cannot hold them), and its name; None when the
/// variable is not set, or when the region cannot be made (said on
/// standard error, unless `LATTE_QUIET=1`).
pub(super) fn shared_region() -> Option<(Region, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt;
    let value = std::env::var_os(LATTE_REGION_ENV)?;
    if let Some(why) = unusable(value.as_bytes()) {
        if !crate::region::quiet() {
            crate::region::say(format_args!(
                "{LATTE_REGION_ENV}={:?}: {why}; recording into private memory instead",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        return None;
    }
    let name = region_name(value.as_bytes(), std::env::args_os().next().as_deref().map(|a| a.as_bytes()), std::process::id());
    // A default name held by a live producer or by an object that is not a
    // region (the same program and pid in another PID namespace that
    // shares this /dev/shm) moves on to the next suffix; a dead producer's
    // region is taken over (a restart), as under any name.
    let tries = if is_default(value.as_bytes()) { AUTO_TRIES } else { 1 };
    let mut last = Error::INVAL;
    let mut tried = 0;
    for k in 1..=tries {
        tried = k;
        let candidate = if k == 1 { name.clone() } else { [&name[..], format!("-{k}").as_bytes()].concat() };
        let cfg = latte_region_config::default();
        // Rings bigger than the default (LATTE_RING_SAMPLES) that /dev/shm
        // or memory cannot hold: the region is made of default rings
        // instead (said once), so that it is still seen.
        let made = match Region::create_shared(&candidate, &cfg, &mut super::lineage::of) {
            Err(e) if short_of_room(e).is_some_and(crate::region::fall_back_ring_samples) => Region::create_shared(&candidate, &cfg, &mut super::lineage::of),
            other => other,
        };
        match made {
            Ok(r) => return Some((r, candidate)),
            // The default name moves on past another user's object too.
            Err(e) if e == Error::Os(libc::EEXIST) || (tries > 1 && (e == Error::Os(libc::EACCES) || e == Error::Os(libc::EPERM))) => last = e,
            Err(e) => {
                last = e;
                break;
            }
        }
    }
    say_private(&name, tried, last);
    None
}

/// What ran short when a region could not be made for want of room, as
/// `fall_back_ring_samples` says it; None for any other error.
fn short_of_room(e: Error) -> Option<&'static str> {
    match e {
        Error::NOMEM => Some("no memory or address space"),
        e if e == Error::Os(libc::ENOSPC) => Some("no room in /dev/shm"),
        _ => None,
    }
}

/// Why a `LATTE_REGION` value is refused before any name is made from it:
/// it has white space at either end (nothing is trimmed), or it is `auto`
/// in other letter cases (only `auto` asks for the default name; a region
/// of that name is `/AUTO`).
fn unusable(value: &[u8]) -> Option<&'static str> {
    if value.first().is_some_and(u8::is_ascii_whitespace) || value.last().is_some_and(u8::is_ascii_whitespace) {
        return Some("white space at its start or end (nothing is trimmed: write the name alone)");
    }
    if value != AUTO && value.eq_ignore_ascii_case(AUTO) {
        return Some("the default name is asked for with `auto`, in lower case (a region named so: a leading '/')");
    }
    None
}

/// Whether a `LATTE_REGION` value asks for the default name.
fn is_default(value: &[u8]) -> bool {
    value.is_empty() || value == AUTO
}

/// The region name for a `LATTE_REGION` value: the value itself, with a
/// leading '/' added when it has none; for an empty value or `auto`,
/// `/latte-PROGRAM-PID`, PROGRAM being the last path component of `argv0`
/// (`program` without one) with every byte but `[A-Za-z0-9._-]` made '_',
/// at most `PROGRAM_NAME_MAX` bytes of it.
pub fn region_name(value: &[u8], argv0: Option<&[u8]>, pid: u32) -> Vec<u8> {
    if !is_default(value) {
        let mut n = Vec::with_capacity(value.len() + 1);
        if value[0] != b'/' {
            n.push(b'/');
        }
        n.extend_from_slice(value);
        return n;
    }
    let base = argv0.and_then(|a| a.rsplit(|&b| b == b'/').next()).filter(|b| !b.is_empty()).unwrap_or(b"program");
    let prog: Vec<u8> =
        base.iter().take(PROGRAM_NAME_MAX).map(|&b| if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-' { b } else { b'_' }).collect();
    let mut n = b"/latte-".to_vec();
    n.extend_from_slice(&prog);
    n.extend_from_slice(format!("-{pid}").as_bytes());
    n
}

/// The one line on standard error when the region cannot be made (or
/// installed): under `name`, and under its suffixes `-2` ... `-tried`
/// when the default name moved on to them (`AUTO_TRIES`).
pub(super) fn say_private(name: &[u8], tried: u32, e: Error) {
    if crate::region::quiet() {
        return; // nor is the holder looked up
    }
    let also = match tried {
        0 | 1 => String::new(),
        2 => " nor its -2".to_string(),
        k => format!(" nor its -2 ... -{k}"),
    };
    let why = match e {
        Error::Os(libc::EEXIST) | Error::Os(libc::EACCES) | Error::Os(libc::EPERM) => holder(name, e),
        Error::Os(libc::EINVAL) => crate::shm::name_problem(name).map(|w| format!(" ({w})")).unwrap_or_default(),
        _ => String::new(),
    };
    crate::region::say(format_args!(
        "{LATTE_REGION_ENV}: cannot make the shared region {}{also}: {e}{why}; recording into private memory instead",
        String::from_utf8_lossy(name),
    ));
}

/// Who holds a name that could not be taken: a live producer (its pid),
/// an object that is not a latte region, or (refused for permission,
/// `e`) another user's object.
fn holder(name: &[u8], e: Error) -> String {
    if e != Error::Os(libc::EEXIST) {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;
        let path = [&b"/dev/shm"[..], name].concat();
        // SAFETY: getuid has no preconditions and cannot fail.
        let me = unsafe { libc::getuid() };
        return match std::fs::metadata(std::ffi::OsStr::from_bytes(&path)) {
            Ok(m) => format!(
                " (the dead producer's region is owned by uid {}, mode {:04o}; this process is uid {me} and may not take it over)",
                m.uid(),
                m.mode() & 0o7777
            ),
            Err(_) => String::new(),
        };
    }
    match crate::reader::Mapping::open_shm(name) {
        Ok(m) if m.producer_alive() => format!(" (a live producer's region, pid {})", m.view().producer_pid()),
        Ok(_) => String::new(),
        Err(Error::NotLatte) => " (not a latte region)".to_string(),
        Err(_) => String::new(),
    }
}

/// The one line on standard error when no region at all can be made (not
/// even a private one of one ring): nothing is recorded from then on.
pub(super) fn say_no_region(e: Error) {
    crate::region::say(format_args!("no memory for a region to record into ({e}): nothing is recorded in this process"));
}

#[cfg(test)]
mod tests {
    use super::region_name;

    #[test]
    fn names() {
        assert_eq!(region_name(b"/svc", None, 7), b"/svc");
        assert_eq!(region_name(b"svc", None, 7), b"/svc");
        assert_eq!(region_name(b"", Some(b"/usr/bin/my app"), 42), b"/latte-my_app-42");
        assert_eq!(region_name(b"auto", Some(b"./srv"), 42), b"/latte-srv-42");
        assert_eq!(region_name(b"auto", None, 1), b"/latte-program-1");
        assert_eq!(region_name(b"", Some(b"dir/"), 1), b"/latte-program-1");
        assert_eq!(region_name(b"", Some(&[b'x'; 300]), 1).len(), "/latte-".len() + 64 + 2);
    }
}
