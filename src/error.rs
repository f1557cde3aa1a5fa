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

/// A static description of an error code.
pub fn describe(code: i32) -> &'static core::ffi::CStr {
    match code {
        0 => c"success",
        LATTE_ERR_NOT_LATTE => c"not a latte region (bad magic)",
        LATTE_ERR_VERSION => c"latte region of an unsupported layout version",
        LATTE_ERR_TRUNCATED => c"latte region is truncated (smaller than its header says)",
        LATTE_ERR_CORRUPT => c"latte region is corrupt (a field is out of range)",
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
        c if c < 0 => c"system error (negative errno)",
        _ => c"not an error code",
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
