//! How the command fails: its exit codes, and the one line it prints for
//! each failure (`latte: {what}: {text}` on standard error).

use latte::error::Error;
use std::process::ExitCode;

/// Exit codes: 0 success, 1 other failure, 2 usage, 3 no such region or
/// file, 4 not a latte region (or a directory, truncated, corrupt, another
/// layout version), 5 permission denied, 6 the output file cannot be
/// written, 7 (`rm`) a live producer's region, not removed.
pub const EXIT_OTHER: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_MISSING: u8 = 3;
pub const EXIT_NOT_REGION: u8 = 4;
pub const EXIT_PERMISSION: u8 = 5;
pub const EXIT_OUTPUT: u8 = 6;
/// `latte rm`: a live producer's region was refused (no `--force`).
pub const EXIT_LIVE: u8 = 7;
/// `latte diff`: at least one ID got significantly slower beyond the threshold.
pub const EXIT_SLOWER: u8 = 8;

pub fn strerror(e: Error) -> String {
    e.to_string()
}

/// Prints `latte: {what}: {text}` and gives the exit code.
pub fn fail(what: &str, text: &str, code: u8) -> ExitCode {
    eprintln!("latte: {what}: {text}");
    ExitCode::from(code)
}

/// Why an output file cannot be created, in words.
pub fn output_error(path: &std::path::Path, e: &std::io::Error) -> String {
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

/// Owner and mode of a path, for a permission message.
pub fn owner_text(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => format!(" (owner uid {}, mode {:04o}; this is uid {})", m.uid(), m.mode() & 0o7777, current_uid()),
        Err(_) => String::new(),
    }
}

pub fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail and has no preconditions.
    unsafe { libc::getuid() }
}

/// Prints `latte: {what}: {text}` on standard error, for a command that goes
/// on (`serve`'s reading thread).
pub fn say(what: &str, text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "latte: {what}: {text}");
}

/// The exit code of a command's result.
pub fn done(r: Result<(), ExitCode>) -> ExitCode {
    r.err().unwrap_or(ExitCode::SUCCESS)
}
