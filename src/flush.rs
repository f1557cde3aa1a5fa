//! Writing the region to disk without blocking: io_uring write SQEs whose
//! source is the region's own memory (issue: flush). Not implemented yet:
//! both entry points return LATTE_ERR_NOT_SUPPORTED.

use crate::error::LATTE_ERR_NOT_SUPPORTED;
use crate::layout::latte_unit;

/// Starts a flush of the whole region to `fd`.
pub fn flush_async(fd: i32, unit: latte_unit) -> i32 {
    let _ = (fd, unit);
    LATTE_ERR_NOT_SUPPORTED
}

/// Progress of the flush.
pub fn poll() -> i32 {
    LATTE_ERR_NOT_SUPPORTED
}
