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

use super::View;
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
    /// The ID's token in the file (the trailer's `token`; for a trailer
    /// without one, the token of the one ID so named). Set when the
    /// trailer is checked against its image.
    pub token: u32,
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
    /// The trailer's totals: recorded, read, lost (the rings' sums).
    pub totals: (u64, u64, u64),
}

impl Recording {
    /// The rings' recorded, read and lost, summed; `Error::Corrupt` past
    /// `u64`.
    fn sums(&self) -> Result<(u64, u64, u64), Error> {
        let sum = |a: u64, b: u64| a.checked_add(b).ok_or(Error::Corrupt);
        self.rings.iter().try_fold((0u64, 0u64, 0u64), |(a, b, c), r| Ok((sum(a, r.recorded)?, sum(b, r.read)?, sum(c, r.lost)?)))
    }

    /// Samples lost per ID token (indexed by token, as long as the largest
    /// token a ring names), of the OS thread `os_tid` (None: every thread):
    /// one pass over the rings.
    pub fn lost_by_token(&self, os_tid: Option<u32>) -> Vec<u64> {
        let mut lost = Vec::new();
        for r in self.rings.iter().filter(|r| os_tid.is_none_or(|t| t == r.os_tid)) {
            let t = r.token as usize;
            if lost.len() <= t {
                lost.resize(t + 1, 0u64);
            }
            lost[t] = lost[t].saturating_add(r.lost);
        }
        lost
    }
}

/// A ring's token before the check resolves it (a trailer without tokens).
const NO_TOKEN: u32 = u32::MAX;

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

/// The trailer of the file behind `fd`, whose image part `view` is, when
/// it is a recording: None for a flushed image (the file ends where the
/// image does); `Error::Corrupt` when the file goes on past the image
/// without a whole trailer, or the trailer is damaged or disagrees with the
/// image (`check`); `Error::Version` for another version of the format.
pub(super) fn read_trailer(fd: BorrowedFd<'_>, view: &View<'_>) -> Result<Option<Recording>, Error> {
    let Some(mut rec) = trailer_of(fd, view.published_size())? else { return Ok(None) };
    check(&mut rec, view)?;
    Ok(Some(rec))
}

/// The trailer after the image's `image_len` bytes, checked on its own.
fn trailer_of(fd: BorrowedFd<'_>, image_len: u64) -> Result<Option<Recording>, Error> {
    // SAFETY: an all-zero stat is a valid out-parameter; fd is open.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(Error::last_os());
    }
    let len = st.st_size as u64;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || len <= image_len {
        return Ok(None);
    }
    // Past the image: a trailer, whole, or a damaged recording.
    if len - image_len < TRAILER_FOOTER {
        return Err(Error::Corrupt);
    }
    let mut end = [0u8; TRAILER_FOOTER as usize];
    pread_exact(fd, &mut end, len - TRAILER_FOOTER)?;
    let (n, magic) = end.split_at(size_of::<u64>());
    if magic != RECORDING_MAGIC {
        return Err(Error::Corrupt);
    }
    let n = u64::from_le_bytes(n.try_into().map_err(|_| Error::Corrupt)?);
    if n > MAX_TRAILER || n != len - image_len - TRAILER_FOOTER {
        return Err(Error::Corrupt);
    }
    let mut json = vec![0u8; n as usize];
    pread_exact(fd, &mut json, len - TRAILER_FOOTER - n)?;
    parse(json)
}

/// The trailer against the image: every ring's ID is one of the image's
/// (by token, its name agreeing; a trailer without tokens, by a name that
/// one ID alone has), no ring is listed twice, the totals are the rings'
/// sums, and per ID the rings' `read` is what the image's slots hold. Sets
/// each ring's token.
fn check(rec: &mut Recording, view: &View<'_>) -> Result<(), Error> {
    let names: Vec<String> = view.ids()?.iter().map(|i| crate::name::name_text(crate::name::name_bytes(&i.name))).collect();
    // Name to token; None for a name two IDs share (a hostile image).
    let mut by_name: std::collections::HashMap<&str, Option<u32>> = std::collections::HashMap::new();
    for (t, n) in names.iter().enumerate() {
        by_name.entry(n.as_str()).and_modify(|e| *e = None).or_insert(Some(t as u32));
    }
    let mut read_by_id = vec![0u64; names.len()];
    for r in &mut rec.rings {
        let t = if r.token != NO_TOKEN { r.token } else { by_name.get(r.id.as_str()).copied().flatten().ok_or(Error::Corrupt)? };
        if names.get(t as usize) != Some(&r.id) {
            return Err(Error::Corrupt);
        }
        r.token = t;
        read_by_id[t as usize] = read_by_id[t as usize].checked_add(r.read).ok_or(Error::Corrupt)?;
    }
    let mut held_by_id = vec![0u64; names.len()];
    for s in view.slots()? {
        let h = held_by_id.get_mut(s.id_token as usize).ok_or(Error::Corrupt)?;
        *h = h.checked_add(s.write_idx).ok_or(Error::Corrupt)?;
    }
    if read_by_id != held_by_id || rec.totals != rec.sums()? {
        return Err(Error::Corrupt);
    }
    Ok(())
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
    let total = |k: &str| doc[k].as_u64().ok_or(Error::Corrupt);
    let totals = (total("recorded")?, total("read")?, total("lost")?);
    let mut rings = Vec::new();
    rings.try_reserve_exact(list.len()).map_err(|_| Error::NOMEM)?;
    let mut seen = std::collections::HashSet::new();
    for inc in list {
        // A followed ring is listed once: its slot and generation.
        if !seen.insert((inc["slot"].as_u64().ok_or(Error::Corrupt)?, inc["generation"].as_u64().ok_or(Error::Corrupt)?)) {
            return Err(Error::Corrupt);
        }
        let u = |k: &str| inc[k].as_u64().ok_or(Error::Corrupt);
        let u32_of = |k: &str| u(k).and_then(|v| u32::try_from(v).map_err(|_| Error::Corrupt));
        let token = match &inc["token"] {
            serde_json::Value::Null => NO_TOKEN,
            v => v.as_u64().and_then(|t| u32::try_from(t).ok()).filter(|&t| t != NO_TOKEN).ok_or(Error::Corrupt)?,
        };
        let ring = RecordedRing {
            id: inc["id"].as_str().ok_or(Error::Corrupt)?.to_string(),
            token,
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
    Ok(Some(Recording { json, rings, totals }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trailer of `incs` (id, os_tid, read, lost), totals summed.
    fn doc(incs: &[(&str, u32, u64, u64)]) -> String {
        let list: Vec<String> = incs
            .iter()
            .enumerate()
            .map(|(k, (id, tid, read, lost))| {
                format!(
                    r#"{{"id":"{id}","slot":{k},"generation":1,"thread_idx":0,"os_tid":{tid},"recorded":{},"read":{read},"lost":{lost}}}"#,
                    read.wrapping_add(*lost)
                )
            })
            .collect();
        // Wrapping: a test's totals may be past u64 (the check refuses them).
        let (read, lost) = incs.iter().fold((0u64, 0u64), |(r, l), i| (r.wrapping_add(i.2), l.wrapping_add(i.3)));
        format!(
            r#"{{"format":"latte-recording","version":1,"recorded":{},"read":{read},"lost":{lost},"incarnations":[{}]}}"#,
            read.wrapping_add(lost),
            list.join(",")
        )
    }

    fn parsed(d: &str) -> Result<Option<Recording>, Error> {
        parse(d.as_bytes().to_vec())
    }

    #[test]
    fn lost_by_id_and_thread() {
        let mut r = parsed(&doc(&[("a", 1, 5, 3), ("a", 2, 5, 4), ("b", 1, 5, 7)])).unwrap().unwrap();
        // The check against the image sets the tokens: a 0, b 1.
        for ring in &mut r.rings {
            ring.token = (ring.id == "b") as u32;
        }
        assert_eq!(r.lost_by_token(None), [7, 7]);
        assert_eq!(r.lost_by_token(Some(2)), [4]);
        assert_eq!(r.lost_by_token(Some(3)), Vec::<u64>::new());
        assert_eq!(r.sums(), Ok((29, 15, 14)));
        assert_eq!(r.totals, (29, 15, 14));
    }

    #[test]
    fn damaged_documents_are_refused() {
        let good = doc(&[("a", 1, 5, 3)]);
        assert!(parsed(&good).unwrap().is_some());
        assert_eq!(parsed("{").unwrap_err(), Error::Corrupt);
        assert_eq!(parsed(&good.replace("latte-recording", "other")).unwrap_err(), Error::Corrupt);
        assert_eq!(parsed(&good.replace(r#""version":1"#, r#""version":2"#)).unwrap_err(), Error::Version);
        assert_eq!(parsed(&good.replace(r#","incarnations":[{"#, r#","rings":[{"#)).unwrap_err(), Error::Corrupt);
        // read + lost must be recorded.
        assert_eq!(parsed(&good.replace(r#""lost":3}"#, r#""lost":4}"#)).unwrap_err(), Error::Corrupt);
        assert_eq!(parsed(&good.replace(r#""os_tid":1"#, r#""os_tid":5000000000"#)).unwrap_err(), Error::Corrupt);
        // A ring listed twice.
        let twice = doc(&[("a", 1, 5, 3), ("a", 1, 5, 3)]).replace(r#""slot":1"#, r#""slot":0"#);
        assert_eq!(parsed(&twice).unwrap_err(), Error::Corrupt);
        // Totals past u64 are refused when summed.
        let huge = parsed(&doc(&[("a", 1, 0, u64::MAX / 2 + 1), ("b", 1, 0, u64::MAX / 2 + 1)])).unwrap().unwrap();
        assert_eq!(huge.sums(), Err(Error::Corrupt));
    }
}
