//! Shared-memory names: what a region name may be, where its object lives,
//! and how a command-line target is told apart from a file path.

use crate::error::Error;
use std::ffi::CString;

/// Most bytes of a region name after its leading '/' (its file in
/// `/dev/shm` stays within `NAME_MAX`, 255).
pub const LATTE_MAX_REGION_NAME: u32 = 250;

/// The prefix of the names `liveness` gives the objects it is still making
/// (L1: `/.latte-new-PID-N`), as files in `/dev/shm`: refused as region
/// names, and not listed as regions.
pub const NEW_OBJECT_PREFIX: &str = ".latte-new-";

/// Validates a region name: one leading '/', no other '/', 1 to
/// [`LATTE_MAX_REGION_NAME`] bytes after it, no NUL; not `/.` or `/..`
/// (no file of `/dev/shm` can have them), and not a name of the form the
/// library gives the objects it is still making (`/.latte-new-`…), which
/// it removes once abandoned (`liveness`, L0).
pub fn validate_name(name: &[u8]) -> Result<(), Error> {
    match name_problem(name) {
        Some(_) => Err(Error::INVAL),
        None => Ok(()),
    }
}

/// Why `name` is not a valid region name ([`validate_name`]'s rule), in
/// words for a message; None when it is one.
pub fn name_problem(name: &[u8]) -> Option<&'static str> {
    const _: () = assert!(LATTE_MAX_REGION_NAME == 250, "the text below says 250");
    let rest = name.get(1..).unwrap_or_default();
    let why = if name.first() != Some(&b'/') {
        "a region name starts with '/'"
    } else if rest.is_empty() {
        "a region name has at least one byte after its '/'"
    } else if rest.contains(&b'/') {
        "a region name has no '/' after its first byte (it is one file in /dev/shm, not a path)"
    } else if name.contains(&0) {
        "a region name has no NUL byte"
    } else if rest.len() > LATTE_MAX_REGION_NAME as usize {
        "a region name has at most 250 bytes after its '/'"
    } else if rest == b"." || rest == b".." {
        "'.' and '..' are not file names"
    } else if rest.starts_with(NEW_OBJECT_PREFIX.as_bytes()) {
        "names that begin with '/.latte-new-' are latte's own, for the regions it is still making"
    } else {
        return None;
    };
    Some(why)
}

/// The name as a C string, validated.
pub fn c_name(name: &[u8]) -> Result<CString, Error> {
    validate_name(name)?;
    CString::new(name).map_err(|_| Error::INVAL)
}

/// The file a shm name stands for (`/dev/shm` + name: glibc's `shm_open`).
pub fn path(name: &[u8]) -> Result<CString, Error> {
    let mut p = b"/dev/shm".to_vec();
    p.extend_from_slice(name);
    CString::new(p).map_err(|_| Error::INVAL)
}

/// Removes the shm object `name`.
pub fn unlink(name: &[u8]) -> Result<(), Error> {
    let c = c_name(name)?;
    // SAFETY: c is a valid C string.
    if unsafe { libc::shm_unlink(c.as_ptr()) } != 0 {
        return Err(Error::last_os());
    }
    Ok(())
}

/// Whether `target` has the form of a region name rather than a file
/// path: no '/' after its first byte (`/name`, or `name` for `/name`); any
/// other (`./x.img`, `/tmp/x.img`, `dir/x.img`) is a path.
pub fn is_region_name(target: &[u8]) -> bool {
    !target.is_empty() && !target[1..].contains(&b'/')
}

/// What a reader reads for a target given by a person (a command line, a
/// Python call): see [`target`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The region of this name (its bytes, with the leading '/').
    /// `file_too`: a file (not a directory) of the target's path exists
    /// as well, which `./name` would name.
    Region { name: Vec<u8>, file_too: bool },
    /// The file at this path.
    File(std::path::PathBuf),
}

/// The one rule by which a target is told to be a region or a file: a
/// target of the form of a region name ([`is_region_name`]) is that region,
/// unless no such region exists and a file (not a directory) of that path
/// does: then it is the file, as any other tool reads it. Every other
/// target is a file path. When both exist, the region is read
/// (`Target::Region` with `file_too`: what `latte ls` shows always reaches
/// its region).
pub fn target(target: &[u8]) -> Target {
    use std::os::unix::ffi::OsStrExt;
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(target));
    if !is_region_name(target) {
        return Target::File(path.to_path_buf());
    }
    let name = if target[0] == b'/' { target.to_vec() } else { [b"/", target].concat() };
    let file_too = std::fs::metadata(path).is_ok_and(|m| !m.is_dir());
    // The object itself, not what a link there points to (latte never
    // follows one).
    let region = std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(&[b"/dev/shm", &name[..]].concat())).is_ok();
    if file_too && !region {
        return Target::File(path.to_path_buf());
    }
    Target::Region { name, file_too }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name(b"/a").is_ok());
        assert!(validate_name(b"/.a").is_ok() && validate_name(b"/...").is_ok() && validate_name(b"/.latte-new").is_ok());
        for bad in [&b""[..], b"/", b"a", b"/a/b", b"/a\0", b"/.", b"/..", b"/.latte-new-1-0", b"/.latte-new-"] {
            assert_eq!(validate_name(bad), Err(Error::INVAL));
        }
        assert_eq!(name_problem(b"foo/bar"), Some("a region name starts with '/'"));
        assert!(name_problem(b"/foo/bar").unwrap().contains("no '/' after its first byte"));
        assert!(name_problem(b"/").unwrap().contains("at least one byte"));
        assert!(name_problem(b"").is_some() && name_problem(b"x").is_some() && name_problem(b"/x").is_none());
        let name = |len: usize| [&b"/"[..], &vec![b'a'; len]].concat();
        assert!(validate_name(&name(LATTE_MAX_REGION_NAME as usize)).is_ok());
        assert_eq!(validate_name(&name(LATTE_MAX_REGION_NAME as usize + 1)), Err(Error::INVAL));
        assert!(name_problem(&name(LATTE_MAX_REGION_NAME as usize + 1)).unwrap().contains("at most 250"));
        assert!(is_region_name(b"x") && is_region_name(b"/x") && !is_region_name(b"./x") && !is_region_name(b"/tmp/x") && !is_region_name(b""));
    }
}
