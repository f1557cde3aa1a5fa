//! Whether a shared region's producer is alive, and taking over the name of
//! a region whose producer is gone.
//!
//! Liveness is a lock, not a pid: the producer holds an open-file-description
//! write lock (`F_OFD_SETLK`) on its whole object for as long as it runs, and
//! the kernel drops it when the process ends, however it ends. Anyone who can
//! open the object can ask (`F_OFD_GETLK`), from any PID namespace, with no
//! pid to be reused. The protocol (the code cites its steps):
//!
//! - L0 Before it makes an object, a producer removes the L1 names of
//!   producers that died before L2 (or before a move's M5): objects named
//!   `/.latte-new-*` whose lock nobody holds and that were last modified
//!   over `ABANDONED_AFTER_S` seconds ago (a maker between its `shm_open`
//!   and its lock is that young; once locked, the lock protects it). Nothing else ever refers to
//!   such an object, and it may hold the size of a whole region.
//! - L1 The producer creates its object under a name of its own
//!   (`/.latte-new-PID-N`), takes the lock, sizes and initialises it.
//! - L2 It publishes the object under the region's name with `link(2)`,
//!   which fails when the name exists, then removes its own name. A
//!   region's name therefore only ever refers to an object whose lock was
//!   taken before the name did.
//! - L3 A region is live while its object's lock is held: asked of the
//!   object's range below the claim byte (`CLAIM_AT`), so that a taker's
//!   claim (L4, L5) never reads as a live producer.
//! - L4 To take over a name whose producer is gone (the default,
//!   `LATTE_IF_TAKEN_REPLACE_STALE`; not with `LATTE_IF_TAKEN_FAIL`): open
//!   the object it refers to for writing and claim it: lock its claim byte,
//!   far past its end, which a producer's whole-object lock covers (so the
//!   claim fails while the producer lives: `-EEXIST`) and L3's question
//!   does not (so readers see the object dead all along); check that the name still
//!   refers to that object (else start over at L2); let the new object
//!   take what it keeps of the old one (its lineage: `incarnation`,
//!   `recorded_before`); `rename(2)` the new object over the name; let go
//!   of the old one. Only the holder of the
//!   old object's claim renames over it, so of two producers starting over
//!   one stale region, one wins and the other finds either the old
//!   object claimed or the name on the winner's object, whose lock is held.
//!
//! - L5 To remove a region on purpose (`latte rm`, [`remove_region`]):
//!   open the object its name refers to for writing; check that it is a
//!   regular file that starts with latte's magic (nothing else is ever
//!   removed); claim it as L4 does (that fails while the producer
//!   lives: the region is refused, unless the caller forces it, when the
//!   claim is not asked for); check that the name still refers to that
//!   object; unlink the name; let go of the claim. While the claim is held no
//!   take-over (L4) can rename a new object over the name, so what is
//!   unlinked is the object found dead. L4 and L5 decide "dead" by the
//!   same test, the claim taken, so they never disagree.
//!
//! Shared-memory names are files in `/dev/shm` (glibc's `shm_open`), which
//! is what `link` and `rename` act on.

use crate::error::Error;
use core::sync::atomic::{AtomicU64, Ordering};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// The byte of an object a taker locks (L4, L5): past the end of any
/// object, inside a producer's whole-object lock, outside the range L3
/// asks about. (`l_start + l_len` stays within `off_t`.)
const CLAIM_AT: libc::off_t = libc::off_t::MAX - 1;

/// A write-lock request (to take or to test) of `len` bytes from `start`;
/// a length of 0 runs to the end, however the object grows.
fn write_lock(start: libc::off_t, len: libc::off_t) -> libc::flock {
    // SAFETY: an all-zero flock is a valid value; the fields are set below.
    let mut l: libc::flock = unsafe { core::mem::zeroed() };
    l.l_type = libc::F_WRLCK as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = start;
    l.l_len = len;
    l
}

/// Takes the lock `l` on `fd` (open for writing). `-EEXIST` when another
/// open file description holds a lock that overlaps it.
fn take(fd: BorrowedFd<'_>, l: libc::flock) -> Result<(), Error> {
    // SAFETY: a valid flock for F_OFD_SETLK (l_pid 0, as it requires).
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_SETLK, &l) } == 0 {
        return Ok(());
    }
    match Error::last_os() {
        e if e == Error::Os(libc::EAGAIN) || e == Error::Os(libc::EACCES) => Err(Error::Os(libc::EEXIST)),
        e => Err(e),
    }
}

/// L1: takes the liveness lock on `fd` (open for writing), the whole
/// object. `-EEXIST` when another open file description holds it.
pub fn hold(fd: BorrowedFd<'_>) -> Result<(), Error> {
    take(fd, write_lock(0, 0))
}

/// L4, L5: claims the object open as `fd` (open for writing): its claim
/// byte. `-EEXIST` while its producer lives (its lock covers the byte) or
/// another taker holds the claim.
fn claim(fd: BorrowedFd<'_>) -> Result<(), Error> {
    take(fd, write_lock(CLAIM_AT, 1))
}

use crate::shm::NEW_OBJECT_PREFIX;

/// L1 names tried before giving up (`-EEXIST`).
const NEW_OBJECT_TRIES: u32 = 64;

/// Seconds after its last modification that an unlocked L1 object counts
/// as abandoned (L0).
const ABANDONED_AFTER_S: i64 = 60;

/// L0: removes every abandoned L1 object this process may open for
/// writing; how many. Errors skip an object (another user's, one gone
/// meanwhile).
pub fn sweep_abandoned() -> usize {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else { return 0 };
    let mut removed = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let name = name.as_encoded_bytes();
        if name.starts_with(NEW_OBJECT_PREFIX.as_bytes()) && remove_if_abandoned(name) {
            removed += 1;
        }
    }
    removed
}

/// L0 for the file `/dev/shm/<file>`: removed when nobody holds its lock,
/// it was last modified over `ABANDONED_AFTER_S` ago, and the name still
/// refers to the object looked at.
fn remove_if_abandoned(file: &[u8]) -> bool {
    let mut path = b"/dev/shm/".to_vec();
    path.extend_from_slice(file);
    let Ok(path) = std::ffi::CString::new(path) else { return false };
    // SAFETY: a valid path; O_NONBLOCK so that a FIFO does not block.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
    if fd < 0 {
        return false;
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: all-zero stats are valid out-parameters.
    let (mut a, mut b): (libc::stat, libc::stat) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
    // SAFETY: a valid descriptor and out-parameter.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut a) } != 0 || a.st_mode & libc::S_IFMT != libc::S_IFREG {
        return false;
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    if now - a.st_mtime <= ABANDONED_AFTER_S || hold(fd.as_fd()).is_err() {
        return false;
    }
    // Locked by this call now: its maker is gone, and no new one can take
    // it. The name must still be the object's.
    // SAFETY: a valid path and out-parameter.
    if unsafe { libc::stat(path.as_ptr(), &mut b) } != 0 || identity(&a) != identity(&b) {
        return false;
    }
    // SAFETY: a valid path.
    unsafe { libc::unlink(path.as_ptr()) == 0 }
}

/// L0 and L1: a new shm object under a name of its own
/// (`/.latte-new-PID-N`), with permissions `mode` exactly, its liveness
/// lock held, after the abandoned ones were removed. Nothing is left
/// behind on failure.
pub fn new_object(mode: u32) -> Result<(CString, OwnedFd), Error> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    sweep_abandoned();
    // A name another process holds (one in another PID namespace with the
    // same pid, or anyone who made it first) is passed over for the next.
    let (tmp, fd) = (|| {
        for _ in 0..NEW_OBJECT_TRIES {
            // Relaxed: only a distinct number is needed.
            let tmp = CString::new(format!("/{NEW_OBJECT_PREFIX}{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))).map_err(|_| Error::INVAL)?;
            // SAFETY: tmp is a valid NUL-terminated string.
            let fd = unsafe { libc::shm_open(tmp.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC, mode as libc::mode_t) };
            if fd >= 0 {
                return Ok((tmp, fd));
            }
            if Error::last_os() != Error::Os(libc::EEXIST) {
                return Err(Error::last_os());
            }
        }
        Err(Error::Os(libc::EEXIST))
    })()?;
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if let Err(e) = hold(fd.as_fd()) {
        // SAFETY: a valid C string naming the object made above.
        unsafe { libc::shm_unlink(tmp.as_ptr()) };
        return Err(e);
    }
    // shm_open applies the umask; make the permissions exactly what was asked.
    // SAFETY: fd is a valid descriptor we own.
    unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) };
    Ok((tmp, fd))
}

/// L3: whether a producer holds the liveness lock of the object open as `fd`
/// (read access is enough to ask).
pub fn held(fd: BorrowedFd<'_>) -> bool {
    // Below the claim byte: a producer's lock, never a taker's claim.
    let mut l = write_lock(0, CLAIM_AT);
    // SAFETY: a valid flock for F_OFD_GETLK, which the kernel overwrites.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_GETLK, &mut l) == 0 && l.l_type != libc::F_UNLCK as libc::c_short }
}

/// (device, inode) of an open object or of a path.
fn identity(st: &libc::stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

/// Whether the bytes at the start of `fd` are latte's magic
/// ([`LATTE_MAGIC`](crate::layout::LATTE_MAGIC); only latte regions are
/// ever taken over).
fn is_latte(fd: BorrowedFd<'_>) -> bool {
    let mut m = [0u8; crate::layout::LATTE_MAGIC.len()];
    // SAFETY: reads at most m.len() bytes into m.
    let n = unsafe { libc::pread(fd.as_raw_fd(), m.as_mut_ptr() as *mut libc::c_void, m.len(), 0) };
    n == m.len() as isize && m == crate::layout::LATTE_MAGIC
}

/// L2, and L4 when the name is taken and `replace_stale`: publishes the
/// object made as `tmp` (locked, initialised) under `name`. `inherit` is
/// called with the old object, locked and still under the name, just
/// before the new one replaces it. `-EEXIST` when the name belongs to a
/// live producer or to something that is not a latte region; `-EACCES`
/// (or `-EPERM`) when it belongs to an object this process may not open
/// for writing (another user's).
pub fn publish(tmp: &CStr, name: &[u8], replace_stale: bool, inherit: &mut dyn FnMut(BorrowedFd<'_>)) -> Result<(), Error> {
    let tmp_path = crate::shm::path(tmp.to_bytes())?;
    let target = crate::shm::path(name)?;
    for _ in 0..16 {
        // L2.
        // SAFETY: two valid paths.
        if unsafe { libc::link(tmp_path.as_ptr(), target.as_ptr()) } == 0 {
            // SAFETY: a valid path; our own second name of the object.
            unsafe { libc::unlink(tmp_path.as_ptr()) };
            return Ok(());
        }
        let e = Error::last_os();
        if e != Error::Os(libc::EEXIST) || !replace_stale {
            return Err(e);
        }
        // L4.
        // SAFETY: a valid path; O_NONBLOCK so that a FIFO does not block.
        let old = unsafe { libc::open(target.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
        if old < 0 {
            return match Error::last_os() {
                e if e == Error::Os(libc::ENOENT) => continue, // gone meanwhile: publish again
                // Another user's object: what stops the take-over is
                // permission, whether or not its producer lives.
                e if e == Error::Os(libc::EACCES) || e == Error::Os(libc::EPERM) => Err(e),
                _ => Err(Error::Os(libc::EEXIST)),
            };
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let old = unsafe { OwnedFd::from_raw_fd(old) };
        let outcome = take_over(old.as_fd(), &tmp_path, &target, inherit);
        // Dropping `old` closes it, which lets go of the old object's lock.
        drop(old);
        match outcome {
            Some(r) => return r,
            None => continue, // the name moved meanwhile
        }
    }
    Err(Error::Os(libc::EEXIST))
}

/// Whether `publish` could take `name` now: the name is free, or (with
/// `replace_stale`) it is a latte region whose producer is gone; `-EEXIST`
/// otherwise. A check before work that is costly to undo (`region::share`
/// moves a region before it publishes it); `publish` still decides.
pub fn available(name: &[u8], replace_stale: bool) -> Result<(), Error> {
    let target = crate::shm::path(name)?;
    // SAFETY: a valid path; O_NONBLOCK so that a FIFO does not block.
    let fd = unsafe { libc::open(target.as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
    if fd < 0 {
        return if Error::last_os() == Error::Os(libc::ENOENT) { Ok(()) } else { Err(Error::Os(libc::EEXIST)) };
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a valid descriptor and out-parameter.
    let regular = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG;
    if replace_stale && regular && is_latte(fd.as_fd()) && !held(fd.as_fd()) {
        Ok(())
    } else {
        Err(Error::Os(libc::EEXIST))
    }
}

/// L4 on the object open as `old`: Some(result), or None when the name no
/// longer refers to it.
fn take_over(old: BorrowedFd<'_>, tmp_path: &CStr, target: &CStr, inherit: &mut dyn FnMut(BorrowedFd<'_>)) -> Option<Result<(), Error>> {
    // SAFETY: all-zero stats are valid out-parameters.
    let (mut a, mut b): (libc::stat, libc::stat) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
    // SAFETY: a valid descriptor and out-parameter.
    if unsafe { libc::fstat(old.as_raw_fd(), &mut a) } != 0 || a.st_mode & libc::S_IFMT != libc::S_IFREG || !is_latte(old) {
        return Some(Err(Error::Os(libc::EEXIST)));
    }
    if let Err(e) = claim(old) {
        return Some(Err(e)); // its producer lives, or another taker claimed it (-EEXIST)
    }
    // SAFETY: a valid path and out-parameter.
    if unsafe { libc::stat(target.as_ptr(), &mut b) } != 0 || identity(&a) != identity(&b) {
        return None;
    }
    inherit(old);
    // SAFETY: two valid paths.
    if unsafe { libc::rename(tmp_path.as_ptr(), target.as_ptr()) } != 0 {
        return Some(Err(Error::last_os()));
    }
    Some(Ok(()))
}

/// What [`remove_region`] found under a name (and removed, unless asked
/// only to look).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// A latte region whose producer is gone (its lock was free).
    Dead,
    /// A latte region whose producer lives, removed because forced: the
    /// producer goes on recording into its object, which no new reader can
    /// open by the name.
    Live,
}

/// L5: removes the latte region `name` (`/name`): a dead one, or with
/// `force` a live one too; with `dry_run` it only says what it would do.
///
/// Errors: `-ENOENT` no such object; `-EINVAL` not a valid region name;
/// [`Error::NotLatte`] an object that is not a regular file starting with
/// latte's magic (never removed); `-EBUSY` a live producer's region (without
/// `force`); `-EACCES` or `-EPERM` this process may not open the object for
/// writing or remove its name (another user's region in `/dev/shm`, whose
/// sticky bit lets only the owner remove it).
pub fn remove_region(name: &[u8], force: bool, dry_run: bool) -> Result<Removal, Error> {
    crate::shm::validate_name(name)?;
    let target = crate::shm::path(name)?;
    // SAFETY: a valid path; O_NONBLOCK so that a FIFO does not block,
    // O_NOFOLLOW so that a symbolic link is never followed.
    let fd = unsafe { libc::open(target.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
    if fd < 0 {
        return Err(match Error::last_os() {
            // A symbolic link (O_NOFOLLOW) or a directory: not a region.
            e if e == Error::Os(libc::ELOOP) || e == Error::Os(libc::EISDIR) || e == Error::Os(libc::ENXIO) => Error::NotLatte,
            e => e,
        });
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: all-zero stats are valid out-parameters.
    let (mut a, mut b): (libc::stat, libc::stat) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
    // SAFETY: a valid descriptor and out-parameter.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut a) } != 0 || a.st_mode & libc::S_IFMT != libc::S_IFREG || !is_latte(fd.as_fd()) {
        return Err(Error::NotLatte);
    }
    // The test of L4: the claim can be taken only when its producer is gone.
    let found = match claim(fd.as_fd()) {
        Ok(()) => Removal::Dead,
        Err(e) if e == Error::Os(libc::EEXIST) && force => Removal::Live,
        Err(e) if e == Error::Os(libc::EEXIST) => return Err(Error::BUSY),
        Err(e) => return Err(e),
    };
    if dry_run {
        return Ok(found);
    }
    // SAFETY: a valid path and out-parameter.
    if unsafe { libc::stat(target.as_ptr(), &mut b) } != 0 || identity(&a) != identity(&b) {
        // Taken over or removed since it was opened: what the name refers
        // to now is not what was found dead.
        return Err(Error::Os(libc::ENOENT));
    }
    // SAFETY: a valid path.
    if unsafe { libc::unlink(target.as_ptr()) } != 0 {
        return Err(Error::last_os());
    }
    // Dropping `fd` lets go of the claim, after the name is gone.
    drop(fd);
    Ok(found)
}
