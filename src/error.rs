//! Error codes of the C ABI: 0 for success, a negative errno value, or one of
//! the latte-specific codes below (all negative, outside the errno range).

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
/// Switch tracking is not enabled in this process (`latte_sched_enable`, or
/// `LATTE_SCHED=1` in the environment).
pub const LATTE_ERR_SCHED_OFF: i32 = -4005;
/// Switch records of the interval were overwritten in the thread's ring
/// before they were read: the split of the time is unknown.
pub const LATTE_ERR_SCHED_LOST: i32 = -4006;

/// A static description of an error code.
pub fn describe(code: i32) -> &'static core::ffi::CStr {
    match code {
        0 => c"success",
        LATTE_ERR_NOT_LATTE => c"not a latte region (bad magic)",
        LATTE_ERR_VERSION => c"latte region of an unsupported layout version",
        LATTE_ERR_TRUNCATED => c"latte region is truncated (smaller than its header says)",
        LATTE_ERR_CORRUPT => c"latte region is corrupt (a field is out of range)",
        LATTE_ERR_SCHED_OFF => c"switch tracking is off (latte_sched_enable or LATTE_SCHED=1 turns it on)",
        LATTE_ERR_SCHED_LOST => c"switch records were lost (overwritten in the thread's ring before they were read)",
        c if c == LATTE_ERR_NOT_SUPPORTED => c"not supported by this build of latte",
        c if c == -libc::EINVAL => c"invalid argument",
        c if c == -libc::EBUSY => c"busy (recording already began, or an operation is pending)",
        c if c == -libc::EALREADY => c"already done (a shared region is installed)",
        c if c == -libc::EEXIST => c"a shared-memory object of that name exists",
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
        c if c == -libc::EMFILE => c"too many open (files, or latte readers: at most 64)",
        c if c == -libc::ECANCELED => c"cancelled",
        c if c == -libc::EISDIR => c"is a directory",
        c if c == -libc::ENOTDIR => c"not a directory",
        c if c == -libc::ELOOP => c"too many levels of symbolic links",
        c if c == -libc::ENODEV => c"no such device (the object cannot be mapped)",
        c if c == -libc::ESPIPE => c"not seekable (a pipe, FIFO or socket)",
        c if c == -libc::ENXIO => c"no such device or address",
        c if c < 0 => system_error(-c),
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
fn system_error(e: i32) -> &'static core::ffi::CStr {
    // SAFETY: strerrordesc_np takes any int and returns NULL or a static,
    // NUL-terminated string that lives as long as the process.
    let p = unsafe { strerrordesc_np(e) };
    if p.is_null() {
        c"system error (unknown errno)"
    } else {
        // SAFETY: as above.
        unsafe { core::ffi::CStr::from_ptr(p) }
    }
}

/// An I/O error as a negative code (-EIO when it carries no errno).
pub fn io_code(e: &std::io::Error) -> i32 {
    -e.raw_os_error().unwrap_or(libc::EIO)
}

/// The calling thread's errno as a negative code (-EIO when there is none).
pub fn last_errno() -> i32 {
    io_code(&std::io::Error::last_os_error())
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
}
