//! The region's name records, read past a `NameCursor`: the names of the
//! IDs, by token.

use super::{check_whole, copy_shared, IdInfo, NameCursor, View};
use crate::error::Error;
use crate::layout::*;
use crate::name::Name;
use core::sync::atomic::{AtomicU32, Ordering};

impl View<'_> {
    /// The name of token `t` (reads the records before it: for many
    /// names, read them all with `ids` or `ids_since`).
    pub fn id_name(&self, t: u32) -> Result<Name, Error> {
        if t >= self.ids_used() {
            return Err(Error::Corrupt);
        }
        let mut c = NameCursor::default();
        let mut found = None;
        self.scan_names(&mut c, Some(t), |i| found = Some(i.name))?;
        found.ok_or(Error::Corrupt)
    }

    /// Every published ID this view maps. `Error::Truncated` when the
    /// object shrank under the mapping (what was read may be zeros).
    pub fn ids(&self) -> Result<Vec<IdInfo>, Error> {
        let mut c = NameCursor::default();
        let mut v = Vec::new();
        self.ids_since(&mut c, &mut v)?;
        Ok(v)
    }

    /// Appends the IDs published after the cursor (the names this view
    /// maps) to `out`, and moves the cursor past them.
    pub fn ids_since(&self, c: &mut NameCursor, out: &mut Vec<IdInfo>) -> Result<(), Error> {
        let r = self.scan_names(c, None, |i| out.push(i));
        check_whole(self.base)?;
        r
    }

    /// Reads name records from `c` on, up to `ids_used` (or up to token
    /// `stop`, inclusive), handing each to `f`.
    pub(super) fn scan_names(&self, c: &mut NameCursor, stop: Option<u32>, mut f: impl FnMut(IdInfo)) -> Result<(), Error> {
        let n = self.ids_used();
        while c.token < n && c.chunk < LATTE_CHUNKS {
            let k = c.chunk as usize;
            let (base, avail) = (self.chunks.name_base[k], self.chunks.name_avail[k]);
            if base.is_null() {
                return Ok(()); // a chunk this view does not map (yet)
            }
            let full = avail == name_chunk_bytes(c.chunk);
            if c.pos + LATTE_NAME_LEN_SIZE as u64 > avail {
                if !full {
                    return Ok(()); // the rest lies past the mapping
                }
                *c = NameCursor { token: c.token, chunk: c.chunk + 1, pos: 0 };
                continue;
            }
            // Relaxed: the record lies below the count loaded with acquire.
            // SAFETY: pos + 4 <= avail: inside the mapping, 4-aligned (records are).
            let word = unsafe { AtomicU32::from_ptr(base.add(c.pos as usize) as *mut u32) }.load(Ordering::Relaxed);
            if word == 0 {
                *c = NameCursor { token: c.token, chunk: c.chunk + 1, pos: 0 };
                continue;
            }
            let len = (word - 1) as u64;
            if len > LATTE_MAX_NAME_LEN as u64 {
                return Err(Error::Corrupt);
            }
            let rec = name_record_bytes(len);
            if c.pos + rec > avail {
                return if full { Err(Error::Corrupt) } else { Ok(()) };
            }
            let mut name = vec![0u8; len as usize];
            // SAFETY: the record's bytes lie inside the mapping (checked
            // above); `name` is ours, len bytes long.
            unsafe { copy_shared(name.as_mut_ptr(), base.add((c.pos + LATTE_NAME_LEN_SIZE as u64) as usize), len as usize) };
            let t = c.token;
            c.pos += rec;
            c.token += 1;
            if stop.is_none_or(|s| s == t) {
                f(IdInfo { token: t, name });
            }
            if stop == Some(t) {
                return Ok(());
            }
        }
        Ok(())
    }
}
