//! Errors: inside Rust a typed `Error`; at the C boundary (`ffi`) one
//! number, 0 for success, a negative errno value, or one of the
//! latte-specific codes below (all negative, outside the errno range).
//! `Error::code` is the only conversion to a number and `Error::from_code`
//! the only one back.

use core::ffi::CStr;

/// The function exists but this build or this platform does not provide it.
pub const LATTE_ERR_NOT_SUPPORTED: i32 = -95;
const _: () = assert!(LATTE_ERR_NOT_SUPPORTED == -libc::ENOTSUP);
/// The object is not a latte region (bad magic).
pub const LATTE_ERR_NOT_LATTE: i32 = -4001;
/// A latte region of another layout version.
pub const LATTE_ERR_VERSION: i32 = -4002;
/// The object is smaller than its header says.
pub const LATTE_ERR_TRUNCATED: i32 = -4003;
/// A field is out of range (sizes, counts, offsets, indices, names).
pub const LATTE_ERR_CORRUPT: i32 = -4004;
/// latte failed inside (a panic, caught at the C boundary): a bug in latte,
/// never the caller's input. Nothing was changed by the call.
pub const LATTE_ERR_INTERNAL: i32 = -4005;
/// Switch tracking is not enabled in this process (`latte_sched_enable`, or
/// `LATTE_SCHED=1` in the environment), or the calling thread released its
/// event.
pub const LATTE_ERR_SCHED_OFF: i32 = -4006;
/// Switch records of the interval were overwritten in the thread's ring
/// before they were read: the split of the time is unknown.
pub const LATTE_ERR_SCHED_LOST: i32 = -4007;

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// An errno value (positive): from the operating system, or the one
    /// that names the condition (`EINVAL` for a bad argument, `ENOSPC` for
    /// a full table, ...).
    Os(i32),
    /// Not a latte region (bad magic).
    NotLatte,
    /// A latte region of another layout version.
    Version,
    /// The object is smaller than its header says.
    Truncated,
    /// A field is out of range.
    Corrupt,
    /// Not provided by this build or platform.
    NotSupported,
    /// A panic inside latte, caught at the C boundary.
    Internal,
    /// Switch tracking is off for the calling thread.
    SchedOff,
    /// Switch records were overwritten before they were read.
    SchedLost,
}

impl Error {
    /// A bad argument.
    pub const INVAL: Error = Error::Os(libc::EINVAL);
    /// A table, the disk or shared memory is full.
    pub const NOSPC: Error = Error::Os(libc::ENOSPC);
    /// Out of memory.
    pub const NOMEM: Error = Error::Os(libc::ENOMEM);
    /// A caller's buffer is too small.
    pub const RANGE: Error = Error::Os(libc::ERANGE);
    /// Busy (recording began, or an operation is pending).
    pub const BUSY: Error = Error::Os(libc::EBUSY);

    /// The C ABI's number for this error (negative).
    pub const fn code(self) -> i32 {
        match self {
            Error::Os(e) => e.wrapping_neg(),
            Error::NotLatte => LATTE_ERR_NOT_LATTE,
            Error::Version => LATTE_ERR_VERSION,
            Error::Truncated => LATTE_ERR_TRUNCATED,
            Error::Corrupt => LATTE_ERR_CORRUPT,
            Error::NotSupported => LATTE_ERR_NOT_SUPPORTED,
            Error::Internal => LATTE_ERR_INTERNAL,
            Error::SchedOff => LATTE_ERR_SCHED_OFF,
            Error::SchedLost => LATTE_ERR_SCHED_LOST,
        }
    }

    /// The error a negative C ABI number stands for (`Os(EIO)` for a
    /// number that is not negative).
    pub const fn from_code(code: i32) -> Error {
        match code {
            LATTE_ERR_NOT_LATTE => Error::NotLatte,
            LATTE_ERR_VERSION => Error::Version,
            LATTE_ERR_TRUNCATED => Error::Truncated,
            LATTE_ERR_CORRUPT => Error::Corrupt,
            LATTE_ERR_NOT_SUPPORTED => Error::NotSupported,
            LATTE_ERR_INTERNAL => Error::Internal,
            LATTE_ERR_SCHED_OFF => Error::SchedOff,
            LATTE_ERR_SCHED_LOST => Error::SchedLost,
            c if c < 0 => Error::Os(c.wrapping_neg()),
            _ => Error::Os(libc::EIO),
        }
    }

    /// An I/O error (`Os(EIO)` when it carries no errno).
    pub fn from_io(e: &std::io::Error) -> Error {
        Error::Os(e.raw_os_error().unwrap_or(libc::EIO))
    }

    /// The calling thread's errno (`Os(EIO)` when there is none).
    pub fn last_os() -> Error {
        Error::from_io(&std::io::Error::last_os_error())
    }

    /// A static description.
    pub fn describe(self) -> &'static CStr {
        describe(self.code())
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.describe().to_string_lossy())
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::from_io(&e)
    }
}

/// A static description of an error code.
pub fn describe(code: i32) -> &'static CStr {
    match code {
        0 => c"success",
        LATTE_ERR_NOT_LATTE => c"not a latte region (bad magic)",
        LATTE_ERR_VERSION => c"latte region of an unsupported layout version",
        LATTE_ERR_TRUNCATED => c"latte region is truncated (smaller than its header says)",
        LATTE_ERR_CORRUPT => c"latte region is corrupt (a field is out of range)",
        LATTE_ERR_INTERNAL => c"internal error in latte (a bug: please report it)",
        LATTE_ERR_SCHED_OFF => c"switch tracking is off (latte_sched_enable or LATTE_SCHED=1 turns it on)",
        LATTE_ERR_SCHED_LOST => c"switch records were lost (overwritten in the thread's ring before they were read)",
        c if c == LATTE_ERR_NOT_SUPPORTED => c"not supported by this build of latte",
        c if c == -libc::EINVAL => c"invalid argument",
        c if c == -libc::EBUSY => c"busy (recording already began, or an operation is pending)",
        c if c == -libc::EALREADY => c"already done (a shared region is installed)",
        c if c == -libc::EEXIST => {
            c"the name is taken (a live producer holds it, an object there is not a latte region, or LATTE_IF_TAKEN_FAIL keeps a dead one's)"
        }
        c if c == -libc::ENOENT => c"no such region or file",
        c if c == -libc::EACCES => c"permission denied",
        c if c == -libc::ENOSPC => c"no space left (shm, disk, or a table is full)",
        c if c == -libc::ENOMEM => c"out of memory",
        c if c == -libc::ERANGE => c"buffer too small",
        c if c == -libc::EBADF => c"bad file descriptor",
        c if c == -libc::ENOSYS => c"not available in this kernel",
        c if c == -libc::EPERM => c"operation not permitted",
        c if c == -libc::EIO => c"input/output error",
        c if c == -libc::EAGAIN => c"pending, try again",
        c if c == -libc::EMFILE => c"too many open files",
        c if c == -libc::ECANCELED => c"cancelled",
        c if c == -libc::EISDIR => c"is a directory",
        c if c == -libc::ENOTDIR => c"not a directory",
        c if c == -libc::ELOOP => c"too many levels of symbolic links",
        c if c == -libc::ENODEV => c"no such device (the object cannot be mapped)",
        c if c == -libc::ESPIPE => c"not seekable (a pipe, FIFO or socket)",
        c if c == -libc::ENXIO => c"no such device or address",
        c if c < 0 => system_error(c.wrapping_neg()),
        _ => c"not an error code",
    }
}

extern "C" {
    /// glibc (2.32 and later): the description of an errno value, a static
    /// string, or NULL when the value is not an errno. Thread-safe, unlike
    /// `strerror`.
    fn strerrordesc_np(errnum: core::ffi::c_int) -> *const core::ffi::c_char;
}

/// The C library's description of errno value `e`.
fn system_error(e: i32) -> &'static CStr {
    // SAFETY: strerrordesc_np takes any int and returns NULL or a static,
    // NUL-terminated string that lives as long as the process.
    let p = unsafe { strerrordesc_np(e) };
    if p.is_null() {
        c"system error (unknown errno)"
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_errno_has_its_own_message() {
        let mut seen = std::collections::HashSet::new();
        for e in [libc::ELOOP, libc::ENODEV, libc::ESPIPE, libc::ENXIO, libc::EROFS, libc::ETXTBSY, libc::EFBIG, libc::EMFILE] {
            let m = describe(-e).to_str().unwrap();
            assert!(!m.contains("negative errno") && !m.contains("unknown"), "{e}: {m}");
            assert!(seen.insert(m), "{e}: {m} twice");
        }
        assert_eq!(describe(-99_999).to_str().unwrap(), "system error (unknown errno)");
    }

    #[test]
    fn codes_convert_both_ways() {
        for e in [
            Error::INVAL,
            Error::Os(libc::EMFILE),
            Error::NotLatte,
            Error::Version,
            Error::Truncated,
            Error::Corrupt,
            Error::NotSupported,
            Error::Internal,
            Error::SchedOff,
            Error::SchedLost,
        ] {
            assert!(e.code() < 0);
            assert_eq!(Error::from_code(e.code()), e);
        }
        assert_ne!(Error::Internal.code(), Error::Os(libc::EIO).code(), "a caught panic is not an I/O error");
        assert_ne!(describe(Error::Internal.code()), describe(-libc::EIO));
        // No number makes a conversion or a description panic.
        assert_eq!(Error::from_code(i32::MIN).code(), i32::MIN);
        assert!(!describe(i32::MIN).to_bytes().is_empty());
    }
}
