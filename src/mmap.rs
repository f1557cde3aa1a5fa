//! `Mmap`: a memory mapping owned by a value, unmapped when it is dropped.
//!
//! Every mapping latte makes (a region, a reader's view of one, the sink
//! ring) is an `Mmap`. One that must outlive every owner (an installed
//! region, which thread states point into for the rest of the process) is
//! `leak`ed, explicitly.

use crate::error::Error;
use crate::layout::{LATTE_FRAME_RING_MASK, LATTE_PAGE_SIZE};
use std::os::fd::{AsRawFd, BorrowedFd};

/// [`LATTE_PAGE_SIZE`] as a length: the page latte's mappings are made of
/// (x86-64's base page).
pub(crate) const PAGE: usize = LATTE_PAGE_SIZE as usize;

/// A mapping of `len` bytes at `ptr`, unmapped on drop.
///
/// Safety contract: `ptr..ptr + len` is a mapping this value alone may
/// unmap; nothing derived from `as_ptr` may be used after the drop (the
/// types that hand out views of it borrow it, or leak it).
#[derive(Debug)]
pub struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a mapping is process-wide memory, not tied to a thread; what is
// stored in it is accessed through atomics or by its single writer (the
// users of `as_ptr` state how).
unsafe impl Send for Mmap {}
// SAFETY: as Send; `&Mmap` hands out only the address and length.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// A fresh private anonymous mapping, read-write, whose pages are
    /// committed only when first written (`MAP_NORESERVE`).
    pub fn anonymous(len: usize) -> Result<Mmap, Error> {
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
        };
        Self::accept(p, len)
    }

    /// A shared mapping of the first `len` bytes of `fd`, read-write or
    /// read-only.
    pub fn shared(fd: BorrowedFd<'_>, len: usize, writable: bool) -> Result<Mmap, Error> {
        Self::shared_at(fd, 0, len, writable)
    }

    /// A shared mapping of `len` bytes of `fd` from byte `offset` (a
    /// multiple of the page size), read-write or read-only.
    pub fn shared_at(fd: BorrowedFd<'_>, offset: u64, len: usize, writable: bool) -> Result<Mmap, Error> {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        let off = libc::off_t::try_from(offset).map_err(|_| Error::Os(libc::EINVAL))?;
        // SAFETY: a new mapping of an open descriptor; no existing memory is affected.
        let p = unsafe { libc::mmap(core::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), off) };
        Self::accept(p, len)
    }

    /// The result of an `mmap` of `len` bytes: its error, or `ENOMEM`
    /// (unmapped again) when it does not end below 2^48, where rings must
    /// lie (a ring's address is kept in the low 48 bits of a span-stack
    /// frame word, `layout::latte_thread`). On x86-64 Linux every mapping
    /// does unless a caller hints a higher address (5-level paging); latte
    /// never does, so this only guards the layout's assumption.
    fn accept(p: *mut libc::c_void, len: usize) -> Result<Mmap, Error> {
        if p == libc::MAP_FAILED {
            return Err(Error::last_os());
        }
        let m = Mmap { ptr: p as *mut u8, len };
        if !below_frame_limit(m.ptr, len) {
            return Err(Error::NOMEM); // `m` unmaps itself
        }
        Ok(m)
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The length in bytes.
    pub fn size(&self) -> usize {
        self.len
    }

    /// Gives up ownership: the mapping stays for the rest of the process.
    pub fn leak(self) -> *mut u8 {
        let p = self.ptr;
        core::mem::forget(self);
        p
    }

    /// Takes ownership of a mapping made by `leak`.
    ///
    /// # Safety
    /// `ptr` and `len` are a leaked `Mmap`'s, not owned by anything else,
    /// and nothing uses the memory after this value is dropped.
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Mmap {
        Mmap { ptr, len }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: our own mapping (the type's contract: nobody uses it after the drop).
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// Whether `[p, p + len)` ends below 2^48.
fn below_frame_limit(p: *mut u8, len: usize) -> bool {
    (p as u64).checked_add(len as u64).is_some_and(|end| end <= LATTE_FRAME_RING_MASK + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_must_end_below_2_pow_48() {
        let top = LATTE_FRAME_RING_MASK + 1;
        assert!(below_frame_limit((top - 8192) as *mut u8, 8192));
        assert!(!below_frame_limit((top - 4096) as *mut u8, 8192));
        assert!(!below_frame_limit(top as *mut u8, 4096));
        assert!(!below_frame_limit(u64::MAX as *mut u8, 2));
        // What the kernel gives us passes.
        let m = Mmap::anonymous(1 << 20).unwrap();
        assert!(below_frame_limit(m.as_ptr(), m.size()));
    }
}
