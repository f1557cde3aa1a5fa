//! A recording's trailer (docs/recording.md): `latte record` writes a
//! flushed image, then a JSON document of what it followed, its length as
//! 8 bytes little-endian, then the 8 bytes [`RECORDING_MAGIC`]. Every reader
//! of an image reads the image part as it is; the trailer adds what the
//! image cannot hold: the samples each followed ring lost before they could
//! be read (the file's slots hold only what was read, so they count none).
//!
//! The file is another party's: the trailer is read with `pread` through
//! the mapping's own descriptor, bounded by [`MAX_TRAILER`], and checked
//! (magic, length, format, version) before it is trusted.

use crate::error::Error;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Magic of the trailer, in a recording's last 8 bytes.
pub const RECORDING_MAGIC: [u8; 8] = *b"LATTEREC";
/// Version of the trailer's JSON document.
pub const RECORDING_VERSION: u64 = 1;
/// The trailer's `format` field.
pub const RECORDING_FORMAT: &str = "latte-recording";
/// A trailer above this many bytes is refused (a hostile file).
const MAX_TRAILER: u64 = 256 << 20;
/// Bytes after the trailer's JSON: its length (a little-endian u64), then
/// [`RECORDING_MAGIC`].
const TRAILER_FOOTER: u64 = (size_of::<u64>() + RECORDING_MAGIC.len()) as u64;

/// What `latte record` counted for one followed ring and owner (one
/// incarnation): `read + lost == recorded`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRing {
    /// The ID's name (as the trailer spells it: UTF-8, lossy).
    pub id: String,
    /// The producer's index of the thread that owned the ring.
    pub thread_idx: u32,
    /// The OS thread id of that thread.
    pub os_tid: u32,
    /// Samples the thread wrote while it was followed.
    pub recorded: u64,
    /// Samples in the file.
    pub read: u64,
    /// Samples overwritten before they could be read.
    pub lost: u64,
}

/// A recording's trailer: the JSON document as written, and the figures
/// of every followed ring.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The trailer's JSON document, as the file holds it.
    pub json: String,
    /// Per followed ring and owner, in the trailer's order.
    pub rings: Vec<RecordedRing>,
}

impl Recording {
    /// Samples lost of the ID named `id` (by its name bytes), of the OS
    /// thread `os_tid` (None: every thread).
    pub fn lost(&self, id: &[u8], os_tid: Option<u32>) -> u64 {
        let name = String::from_utf8_lossy(id);
        self.rings.iter().filter(|r| r.id == name && os_tid.is_none_or(|t| t == r.os_tid)).fold(0u64, |n, r| n.saturating_add(r.lost))
    }
}

/// Reads `buf.len()` bytes at `off` of the file behind `fd`.
fn pread_exact(fd: BorrowedFd<'_>, buf: &mut [u8], off: u64) -> Result<(), Error> {
    let mut done = 0;
    while done < buf.len() {
        let at = off.checked_add(done as u64).and_then(|o| i64::try_from(o).ok()).ok_or(Error::Corrupt)?;
        // SAFETY: the destination is the unfilled part of `buf`, valid for
        // writes of its length; fd is open for the borrow.
        let n = unsafe { libc::pread(fd.as_raw_fd(), buf[done..].as_mut_ptr().cast(), buf.len() - done, at) };
        match n {
            n if n > 0 => done += n as usize,
            0 => return Err(Error::Truncated),
            _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
            _ => return Err(Error::last_os()),
        }
    }
    Ok(())
}

/// The trailer of the file behind `fd` when it is a recording: None when
/// it ends in no trailer (a flushed image); `Error::Corrupt` when the
/// trailer's length or JSON is damaged; `Error::Version` for another
/// version of the format.
pub(super) fn read_trailer(fd: BorrowedFd<'_>) -> Result<Option<Recording>, Error> {
    // SAFETY: an all-zero stat is a valid out-parameter; fd is open.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(Error::last_os());
    }
    let len = st.st_size as u64;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || len < TRAILER_FOOTER {
        return Ok(None);
    }
    let mut end = [0u8; TRAILER_FOOTER as usize];
    pread_exact(fd, &mut end, len - TRAILER_FOOTER)?;
    let (n, magic) = end.split_at(size_of::<u64>());
    if magic != RECORDING_MAGIC {
        return Ok(None);
    }
    let n = u64::from_le_bytes(n.try_into().map_err(|_| Error::Corrupt)?);
    if n > MAX_TRAILER || n > len - TRAILER_FOOTER {
        return Err(Error::Corrupt);
    }
    let mut json = vec![0u8; n as usize];
    pread_exact(fd, &mut json, len - TRAILER_FOOTER - n)?;
    parse(json)
}

/// The trailer's document checked and its rings' figures taken.
fn parse(json: Vec<u8>) -> Result<Option<Recording>, Error> {
    let json = String::from_utf8(json).map_err(|_| Error::Corrupt)?;
    let doc: serde_json::Value = serde_json::from_str(&json).map_err(|_| Error::Corrupt)?;
    if doc["format"] != RECORDING_FORMAT {
        return Err(Error::Corrupt);
    }
    if doc["version"].as_u64() != Some(RECORDING_VERSION) {
        return Err(Error::Version);
    }
    let list = doc["incarnations"].as_array().ok_or(Error::Corrupt)?;
    let mut rings = Vec::new();
    rings.try_reserve_exact(list.len()).map_err(|_| Error::NOMEM)?;
    for inc in list {
        let u = |k: &str| inc[k].as_u64().ok_or(Error::Corrupt);
        let u32_of = |k: &str| u(k).and_then(|v| u32::try_from(v).map_err(|_| Error::Corrupt));
        let ring = RecordedRing {
            id: inc["id"].as_str().ok_or(Error::Corrupt)?.to_string(),
            thread_idx: u32_of("thread_idx")?,
            os_tid: u32_of("os_tid")?,
            recorded: u("recorded")?,
            read: u("read")?,
            lost: u("lost")?,
        };
        if ring.read.checked_add(ring.lost) != Some(ring.recorded) {
            return Err(Error::Corrupt);
        }
        rings.push(ring);
    }
    Ok(Some(Recording { json, rings }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(incs: &str) -> Vec<u8> {
        format!(r#"{{"format":"latte-recording","version":1,"incarnations":[{incs}]}}"#).into_bytes()
    }

    #[test]
    fn lost_by_id_and_thread() {
        let inc = |id: &str, tid: u32, lost: u64| format!(r#"{{"id":"{id}","thread_idx":0,"os_tid":{tid},"recorded":{},"read":5,"lost":{lost}}}"#, 5 + lost);
        let r = parse(doc(&[inc("a", 1, 3), inc("a", 2, 4), inc("b", 1, 7)].join(","))).unwrap().unwrap();
        assert_eq!(r.lost(b"a", None), 7);
        assert_eq!(r.lost(b"a", Some(2)), 4);
        assert_eq!(r.lost(b"b", Some(2)), 0);
        assert_eq!(r.lost(b"c", None), 0);
    }

    #[test]
    fn damaged_documents_are_refused() {
        let bad = |d: &str| parse(d.as_bytes().to_vec()).unwrap_err();
        assert_eq!(bad("{"), Error::Corrupt);
        assert_eq!(bad(r#"{"format":"other","version":1,"incarnations":[]}"#), Error::Corrupt);
        assert_eq!(bad(r#"{"format":"latte-recording","version":2,"incarnations":[]}"#), Error::Version);
        assert_eq!(bad(r#"{"format":"latte-recording","version":1}"#), Error::Corrupt);
        // read + lost must be recorded.
        let d = r#"{"format":"latte-recording","version":1,"incarnations":[{"id":"a","thread_idx":0,"os_tid":1,"recorded":9,"read":5,"lost":3}]}"#;
        assert_eq!(bad(d), Error::Corrupt);
        let d = r#"{"format":"latte-recording","version":1,"incarnations":[{"id":"a","thread_idx":0,"os_tid":1,"recorded":8,"read":5,"lost":3}]}"#;
        assert_eq!(parse(d.as_bytes().to_vec()).unwrap().unwrap().rings.len(), 1);
        assert_eq!(bad(&d.replace("\"os_tid\":1", "\"os_tid\":5000000000")), Error::Corrupt);
    }
}
