//! What a new shared region keeps of the one whose name it takes over
//! (`liveness`, L4): the predecessor's incarnation, and the samples it and
//! its own predecessors recorded (`latte_region_header::incarnation`,
//! `recorded_before`).

use crate::reader::Mapping;
use std::os::fd::BorrowedFd;

/// The lineage of the region open as `old`: its incarnation and the
/// samples it and its predecessors recorded; None when it cannot be read
/// or its own incarnation is not known. Read through the reader, which
/// validates what it maps: the object is anyone's who could write
/// `/dev/shm`.
pub(super) fn of(old: BorrowedFd<'_>) -> Option<(u64, u64)> {
    let m = Mapping::open_fd(old).ok()?;
    let v = m.view();
    let (incarnation, before) = v.lineage();
    if incarnation == 0 {
        return None;
    }
    Some((incarnation, before.saturating_add(v.recorded_total().ok()?)))
}
