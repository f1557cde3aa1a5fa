//! Opening a region as a `Mapping`: by shm name, file path or descriptor,
//! mapped read-only and validated; mapped again when its region grew;
//! whether its producer lives.

use super::{check_whole, View};
use crate::error::Error;
use crate::fault::Protected;
use crate::layout::*;
use crate::mmap::Mmap;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

/// Times `Mapping::from_fd` measures an object again that grew while it
/// was being mapped.
const MAP_RETRIES: u32 = 8;

/// Whether the object behind `fd` is now larger than `len` bytes.
fn grown_since(fd: &OwnedFd, len: usize) -> bool {
    // SAFETY: an all-zero stat is a valid out-parameter; fd is open.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::fstat(fd.as_raw_fd(), &mut st) == 0 && st.st_size as u64 > len as u64 }
}

/// A read-only mapping of a shm object or a file, validated. Its `view`
/// borrows it.
pub struct Mapping {
    /// Declared before `map`: the protection goes before the mapping.
    _fault: Protected,
    _map: Mmap,
    /// The object, kept open to ask whether its producer lives (`liveness`).
    fd: OwnedFd,
    /// Validated at open; handed out with the lifetime of `&self`.
    view: View<'static>,
}

impl Mapping {
    /// The validated view, borrowing the mapping.
    pub fn view(&self) -> View<'_> {
        self.view
    }

    /// Whether the region's producer is alive: it holds its object's
    /// liveness lock (`liveness`, L3). A flushed image has none.
    pub fn producer_alive(&self) -> bool {
        self.view.flags() & LATTE_REGION_FLUSHED == 0 && crate::liveness::held(self.fd.as_fd())
    }

    /// Whether a process holds a lock on any part of the file open as `fd`
    /// (a producer's liveness lock on its region, or any other `fcntl`
    /// lock): a writer that must not empty another program's file asks.
    pub fn file_is_locked(fd: std::os::fd::BorrowedFd<'_>) -> bool {
        crate::liveness::held(fd)
    }

    /// Whether `other` is open on this mapping's object (the same device
    /// and inode): a writer that must never write into what it reads asks.
    pub fn is_object_of(&self, other: std::os::fd::BorrowedFd<'_>) -> bool {
        // SAFETY: all-zero stats are valid out-parameters.
        let (mut a, mut b): (libc::stat, libc::stat) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
        // SAFETY: two open descriptors and valid out-parameters.
        unsafe { libc::fstat(self.fd.as_raw_fd(), &mut a) == 0 && libc::fstat(other.as_raw_fd(), &mut b) == 0 && (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) }
    }

    /// Whether `other` maps the same object as this mapping (a reader that
    /// follows a name asks whether a new producer took it over).
    pub fn is_same_object(&self, other: &Mapping) -> bool {
        self.is_object_of(other.fd.as_fd())
    }

    /// The trailer of a recording (`latte record`'s file): None for a
    /// region or a flushed image; an error when the file ends in a
    /// trailer that is damaged or of another version.
    pub fn recording(&self) -> Result<Option<super::Recording>, Error> {
        if self.view.flags() & LATTE_REGION_FLUSHED == 0 {
            return Ok(None);
        }
        super::recording::read_trailer(self.fd.as_fd(), &self.view)
    }

    /// Maps the region again when it grew since it was mapped (its
    /// producer published chunks past the mapping): a view made afterwards
    /// reads them. Returns whether it remapped. Cursors are per slot index,
    /// so a reader's cursors stay valid across a refresh. On an error the
    /// mapping is left as it was.
    pub fn refresh(&mut self) -> Result<bool, Error> {
        match self.grown()? {
            Some(m) => {
                *self = m;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// A new mapping of the same object when the region grew past this one
    /// (`refresh` for a mapping that others share).
    pub fn grown(&self) -> Result<Option<Mapping>, Error> {
        // Against what the view validated, not the mapping's length: a
        // chunk reserved (the object grown) but not yet published when the
        // view was made lies inside the mapping and outside the view.
        if self.view.flags() & LATTE_REGION_FLUSHED != 0 || self.view.published_size() <= self.view.validated_size {
            return Ok(None);
        }
        let fd = self.fd.try_clone().map_err(|e| Error::Os(e.raw_os_error().unwrap_or(libc::EIO)))?;
        Mapping::from_fd(fd).map(Some)
    }

    /// Maps the object open as `fd` (a duplicate of the descriptor is
    /// kept; `fd` stays the caller's).
    pub fn open_fd(fd: std::os::fd::BorrowedFd<'_>) -> Result<Mapping, Error> {
        Self::from_fd(fd.try_clone_to_owned().map_err(|e| Error::Os(e.raw_os_error().unwrap_or(libc::EBADF)))?)
    }

    /// Maps `fd` read-only (PROT_READ: a reader can never disturb the
    /// producer) and validates it. An object that grew between its size
    /// was taken and its header read (its producer made a chunk) is
    /// measured again, a few times at most: one that keeps growing under a
    /// header that claims more than it holds stays truncated.
    fn from_fd(fd: OwnedFd) -> Result<Mapping, Error> {
        for _ in 0..MAP_RETRIES {
            if let Some((fault, map, view)) = Self::map_fd(&fd)? {
                return Ok(Mapping { _fault: fault, _map: map, fd, view });
            }
        }
        Err(Error::Truncated)
    }

    /// One mapping and validation of `fd`: the protection, the mapping and
    /// the view; None when the object grew while it was mapped (measure it
    /// again).
    #[allow(clippy::type_complexity)]
    fn map_fd(fd: &OwnedFd) -> Result<Option<(Protected, Mmap, View<'static>)>, Error> {
        // SAFETY: an all-zero stat is a valid out-parameter.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        // SAFETY: fd is open; st is writable.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::last_os());
        }
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            return Err(Error::Os(libc::EISDIR));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            // A FIFO, socket or device (anyone can make one in /dev/shm).
            return Err(Error::NotLatte);
        }
        let len = st.st_size as usize;
        if len < LATTE_MAGIC.len() {
            // Truncated only when what is there is the start of the magic.
            let mut head = [0u8; LATTE_MAGIC.len()];
            // SAFETY: reads at most len (< head.len()) bytes into head.
            let n = unsafe { libc::pread(fd.as_raw_fd(), head.as_mut_ptr().cast(), len, 0) };
            let start = n == len as isize && len > 0 && head[..len] == LATTE_MAGIC[..len];
            return Err(if start { Error::Truncated } else { Error::NotLatte });
        }
        // PROT_READ: a reader can never disturb the producer.
        let map = Mmap::shared(fd.as_fd(), len, false)?;
        // The object may shrink under us (see `fault`): from here on a
        // SIGBUS in this mapping reads zeros instead of killing the reader.
        // With no memory for the fault table to grow, the reader is
        // refused rather than left unprotected.
        let fault = crate::fault::protect(&map, false)?;
        // On tmpfs (shared memory) reading a hole allocates it: bound what
        // the header claims by the data the object holds. A producer's
        // object is allocated whole when made, so a live region passes.
        // SAFETY: an all-zero statfs is a valid out-parameter; fd is open.
        let held = unsafe {
            let mut fs: libc::statfs = core::mem::zeroed();
            if libc::fstatfs(fd.as_raw_fd(), &mut fs) == 0 && fs.f_type as i64 == libc::TMPFS_MAGIC {
                (st.st_blocks as u64).saturating_mul(512)
            } else {
                len as u64
            }
        };
        // SAFETY: the mapping is readable for len bytes and page aligned;
        // the view lives in the Mapping, which hands it out only borrowed
        // (`view`), and the mapping is unmapped only when the Mapping drops.
        let view = match unsafe { View::new_held(map.as_ptr(), len, held) } {
            // The producer grew the object after it was measured: say so,
            // for `from_fd` to measure again (a shrunk object stays
            // truncated: it did not grow).
            Err(Error::Truncated) if grown_since(fd, len) => return Ok(None),
            r => r?,
        };
        check_whole(map.as_ptr())?;
        Ok(Some((fault, map, view)))
    }

    /// Opens the shm object `name` read-only.
    pub fn open_shm(name: &[u8]) -> Result<Mapping, Error> {
        let c = crate::shm::c_name(name)?;
        // SAFETY: c is a valid C string.
        // O_NONBLOCK: opening a FIFO someone put in /dev/shm must not wait
        // for a writer (from_fd then refuses it).
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK, 0) };
        if fd < 0 {
            return Err(Error::last_os());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Self::from_fd(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Opens a flushed image (or any file holding a region) read-only.
    pub fn open_file(path: &std::path::Path) -> Result<Mapping, Error> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Os(libc::EINVAL))?;
        // SAFETY: c is a valid C string.
        // O_NONBLOCK: a FIFO must not block the open (from_fd refuses it).
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if fd < 0 {
            return Err(Error::last_os());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Self::from_fd(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// A region or a file, by the rule of [`crate::shm::target`]: a target
    /// with no '/' after its first character is a region name (`/name`, or
    /// `name` for `/name`) unless no such region exists and a file of that
    /// path does; any other (`./x.img`, `/tmp/x.img`, `dir/x.img`) is a
    /// file path.
    pub fn open_any(target: &str) -> Result<Mapping, Error> {
        match crate::shm::target(target.as_bytes()) {
            crate::shm::Target::Region { name, .. } => Self::open_shm(&name),
            crate::shm::Target::File(p) => Self::open_file(&p),
        }
    }
}
