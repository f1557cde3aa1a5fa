use super::*;
use crate::error::Error;
use crate::layout::*;
use core::ffi::c_int;

/// Starts writing the region to `fd` (a regular file open for writing,
/// without O_APPEND; the flush writes through its own duplicate, so the
/// caller may close `fd` at once) as a self-describing image,
/// asynchronously through io_uring, and returns at once; `unit` is recorded
/// as the preferred display unit. 0, or -EBADF (bad fd, or not open for
/// writing), -EINVAL (O_APPEND, not a regular file, or `unit` neither
/// LATTE_UNIT_CYCLE nor LATTE_UNIT_TIME), -ESPIPE (a pipe,
/// FIFO or socket), -EBUSY (a flush is pending, or writes of an earlier
/// one into the same file are still with the kernel), -ENOSYS/-EPERM
/// (io_uring unavailable), LATTE_ERR_NOT_SUPPORTED (built without the
/// `uring` feature: use `latte_flush_sync`).
#[no_mangle]
pub extern "C" fn latte_flush_async(fd: c_int, unit: latte_unit) -> c_int {
    guard(PANICKED, || code(crate::flush::flush_async(fd, unit)))
}

/// Progress of the asynchronous flush, without blocking: LATTE_FLUSH_PENDING
/// while in flight, LATTE_FLUSH_IDLE when the last one finished (or none was
/// started), or the negative code it failed with (e.g. -ENOSPC;
/// -ETIMEDOUT when the kernel completed none of its writes for the stall
/// limit, 10 s or `LATTE_FLUSH_STALL_MS`: its writes are then cancelled in
/// the kernel). Each call also moves the flush along (reaps completions,
/// submits the next writes).
#[no_mangle]
pub extern "C" fn latte_poll_flush() -> c_int {
    guard(PANICKED, || crate::flush::poll().unwrap_or_else(Error::code))
}

/// Cancels the pending asynchronous flush without waiting: 1 when one was
/// pending (nothing more is submitted; `latte_poll_flush` then returns
/// -ECANCELED and the file holds no valid image; the writes already with
/// the kernel are cancelled there and reaped by later calls, and
/// `latte_flush_async` into the same file returns -EBUSY until they are;
/// into another file it starts at once), 0 when none was; LATTE_ERR_NOT_SUPPORTED
/// without the `uring` feature. A fork child's flush state is its own: it
/// starts idle, and nothing it calls touches its parent's flush.
#[no_mangle]
pub extern "C" fn latte_flush_cancel() -> c_int {
    guard(PANICKED, || crate::flush::cancel().map(c_int::from).unwrap_or_else(Error::code))
}

/// State, bytes written and bytes to write of the current or last
/// asynchronous flush (`bytes_written` equals `bytes_total` once it
/// completed). -EINVAL when `out` is NULL.
#[no_mangle]
pub extern "C" fn latte_flush_get_status(out: *mut crate::flush::latte_flush_status) -> c_int {
    guard(PANICKED, || put_out(out, crate::flush::status))
}

/// Writes the same image as `latte_flush_async`, synchronously, with pwrite
/// on the calling thread (the fallback without io_uring). 0 or a code, as
/// `latte_flush_async`'s.
#[no_mangle]
pub extern "C" fn latte_flush_sync(fd: c_int, unit: latte_unit) -> c_int {
    guard(PANICKED, || code(crate::flush::flush_sync(fd, unit).map(|_| ())))
}

/// 1 when this build has the asynchronous (io_uring) flush, else 0.
#[no_mangle]
pub extern "C" fn latte_flush_supported() -> c_int {
    crate::flush::supported() as c_int
}
