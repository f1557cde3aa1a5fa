//! The pages of a move (`share`, M3): the region's mappings (`Part`), the
//! ranges in use in them (`Copy`), and which of their pages hold anything,
//! written into the object at their offset. A page holds something when the
//! page map (`/proc/self/pagemap`) shows it present, or swapped out and held
//! before the pause; a page swapped out that was not held is a
//! write-protection marker or a page first written just before the pause,
//! and its content says which. Of a ring, only its written prefix is looked
//! at that way: past it a ring holds nothing a reader reads.

use super::*;

/// One mapping of the region: where it is, its length, its offset in the
/// region (and the object).
#[derive(Clone, Copy)]
pub(super) struct Part {
    pub base: *mut u8,
    pub len: usize,
    pub offset: u64,
    /// A slot chunk (its slots begin at `base`, one per stride).
    pub slots: bool,
}

/// A range of memory M3 copies: where it is mapped here, its length, its
/// offset in the object.
pub(super) struct Copy {
    addr: usize,
    len: usize,
    offset: u64,
    /// The base of the slot chunk the range lies in (None: a name chunk).
    slot_chunk: Option<usize>,
}

/// M1's `used` ranges (offsets in the region) where the chunk mappings
/// `parts` hold them: a range across two chunks is cut at their border.
pub(super) fn copy_ranges(parts: &[Part], used: &[(u64, u64)]) -> Vec<Copy> {
    let mut out = Vec::new();
    for p in parts {
        let (start, end) = (p.offset, p.offset + p.len as u64);
        for &(o, l) in used {
            let (a, b) = (o.max(start), (o + l).min(end));
            if a < b {
                out.push(Copy {
                    addr: p.base as usize + (a - start) as usize,
                    len: (b - a) as usize,
                    offset: a,
                    slot_chunk: p.slots.then_some(p.base as usize),
                });
            }
        }
    }
    out
}

/// Bits of a page map entry: the page is present; swapped out (or, under
/// `userfaultfd` write-protection, never written: a marker that reads the
/// same).
const PAGEMAP_PRESENT: u64 = 1 << 63;
const PAGEMAP_SWAPPED: u64 = 1 << 62;

/// This process's page map (`/proc/self/pagemap`), which says which pages
/// hold memory; a buffer for its entries; and, for each page of the copy
/// ranges, whether it held memory before S1 (so that a page the
/// write-protection marks, which then reads as swapped out, is told from
/// one that is). Made before the pause.
pub(super) struct Pagemap {
    fd: OwnedFd,
    entries: Vec<u64>,
    before: Vec<bool>,
}

impl Pagemap {
    /// The map, read once for every page of `copies`; None when it cannot
    /// be read (M3 then looks at the pages themselves).
    pub fn open(copies: &[Copy]) -> Option<Pagemap> {
        // SAFETY: a valid NUL-terminated path.
        let fd = unsafe { libc::open(c"/proc/self/pagemap".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        // SAFETY: a fresh descriptor nobody else owns.
        let mut m = (fd >= 0).then(|| Pagemap { fd: unsafe { OwnedFd::from_raw_fd(fd) }, entries: vec![0; 8192], before: Vec::new() })?;
        let page = crate::mmap::PAGE;
        for c in copies {
            let pages = c.len.div_ceil(page);
            let mut done = 0;
            while done < pages {
                let n = m.read(c.addr / page + done, pages - done)?;
                m.before.extend(m.entries[..n].iter().map(|e| e & (PAGEMAP_PRESENT | PAGEMAP_SWAPPED) != 0));
                done += n;
            }
        }
        Some(m)
    }

    /// Reads the entries of up to `entries.len()` pages from page number
    /// `page` into the buffer: how many, or None when the map cannot be read.
    fn read(&mut self, page: usize, n: usize) -> Option<usize> {
        let n = n.min(self.entries.len());
        // SAFETY: reads at most n entries into a buffer that holds them.
        let got = unsafe { libc::pread(self.fd.as_raw_fd(), self.entries.as_mut_ptr() as *mut libc::c_void, n * 8, (page * 8) as libc::off_t) };
        (got == (n * 8) as isize).then_some(n)
    }
}

/// M3 for the chunks: the pages of `copies` that hold memory, written into
/// the object at their offset (the object is zeros elsewhere), a block of
/// pages at a time. A page holds memory when it is present, or swapped out
/// and held memory before S1 or is not all zeros; without the page map,
/// when it is not all zeros.
pub(super) fn copy_out(fd: BorrowedFd<'_>, copies: &[Copy], mut pagemap: Option<&mut Pagemap>, geo: &Geometry) -> Result<(), Error> {
    let page = crate::mmap::PAGE;
    let mut seen = 0; // pages of earlier copy ranges, in `before`
    for c in copies {
        let pages = c.len.div_ceil(page);
        let mut done = 0;
        while done < pages {
            let block = match pagemap.as_deref_mut() {
                Some(m) => match m.read(c.addr / page + done, pages - done) {
                    Some(n) => Some((n, &m.entries[..n], &m.before[seen + done..seen + done + n])),
                    None => return Err(Error::Os(libc::EIO)),
                },
                None => None,
            };
            let n = block.map_or((pages - done).min(8192), |b| b.0);
            let nonzero = |k: usize| {
                // SAFETY: page `k` lies inside the mapping (copy ranges start
                // on a chunk's first page and end inside the chunk), which is
                // write-protected now (M2): nothing writes it while it is read.
                let words = unsafe { core::slice::from_raw_parts((c.addr + k * page) as *const u64, page / 8) };
                words.iter().any(|&w| w != 0)
            };
            // Whether the page may hold a sample: past every ring's written
            // prefix it holds none, and reading it (a marker) would fault.
            let live = |k: usize| c.slot_chunk.is_none_or(|base| in_written_prefix(base, c.addr + k * page, geo));
            let written = |i: usize| match block {
                // Swapped out (or migrating) and not held before M2 may be
                // a marker or a page first written just before M2: its
                // content says (reading a marker maps the zero page).
                Some((_, entries, before)) => {
                    entries[i] & PAGEMAP_PRESENT != 0 || (entries[i] & PAGEMAP_SWAPPED != 0 && (before[i] || (live(done + i) && nonzero(done + i))))
                }
                None => live(done + i) && nonzero(done + i),
            };
            let mut i = 0;
            while i < n {
                if !written(i) {
                    i += 1;
                    continue;
                }
                let start = i;
                while i < n && written(i) {
                    i += 1;
                }
                // SAFETY: these pages lie inside the write-protected mapping (as above).
                let run = unsafe { core::slice::from_raw_parts((c.addr + (done + start) * page) as *const u8, (i - start) * page) };
                write_at(fd, run, c.offset + ((done + start) * page) as u64)?;
            }
            done += n;
        }
        seen += pages;
    }
    Ok(())
}

/// Whether the page at `page_addr`, in the slot chunk whose slots begin at
/// `base`, meets a ring's written prefix: its header, and its samples up to
/// and including the one at its `write_idx` (the whole ring once it has
/// lapped). Writers are paused (M2), so each `write_idx` stands; a writer
/// held at W3 has stored the sample at `write_idx` (W2), which the prefix
/// holds. Past the prefix a ring holds no sample a reader would read.
fn in_written_prefix(base: usize, page_addr: usize, geo: &Geometry) -> bool {
    let stride = geo.slot_stride as usize;
    let (first, last) = ((page_addr - base) / stride, (page_addr + crate::mmap::PAGE - 1 - base) / stride);
    (first..=last).any(|j| {
        let slot = base + j * stride;
        // SAFETY: slot `j` begins at or before the page's last byte, which
        // lies inside the chunk's mapping, and a chunk holds whole slots:
        // its header is mapped. Atomic: the header is shared with the
        // writers.
        // Acquire: pairs with W3's release, as a reader's R3.
        let w = unsafe { &*(slot as *const latte_slot_header) }.write_idx.load(Ordering::Acquire);
        let samples = w.saturating_add(1).min(geo.samples_per_slot as u64);
        let end = slot as u64 + LATTE_SLOT_HEADER_SIZE as u64 + samples * LATTE_SAMPLE_SIZE as u64;
        (page_addr as u64) < end
    })
}

/// Writes all of `buf` at `offset` of the object.
pub(super) fn write_at(fd: BorrowedFd<'_>, mut buf: &[u8], mut offset: u64) -> Result<(), Error> {
    while !buf.is_empty() {
        // SAFETY: writes from a valid buffer to a valid descriptor.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), buf.as_ptr() as *const libc::c_void, buf.len(), offset as libc::off_t) };
        if n < 0 {
            let e = Error::last_os();
            if e == Error::Os(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(Error::Os(libc::EIO));
        }
        buf = &buf[n as usize..];
        offset += n as u64;
    }
    Ok(())
}
