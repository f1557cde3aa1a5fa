//! Interning IDs: a `const char*` becomes a stable 32-bit token whose name
//! lives in the region's ID table, so no pointer ever leaves the process.
//!
//! Rules:
//! - Same text, same token (two equal strings at two addresses merge).
//! - A NULL id is the name `<null-id>`.
//! - A name longer than 31 bytes is stored as its first bytes (cut at a UTF-8
//!   boundary, at most 26), `~`, and 4 hex digits of a hash of the whole
//!   text: long IDs stay distinct and recognisable.
//! - When the table is full, a new name gets no token: spans recorded under it
//!   are not recorded and are counted (`unfit_id_drops`).

use crate::layout::{latte_id_entry, LATTE_ID_NAME_SIZE};
use crate::region::Region;
use core::ffi::c_char;
use core::sync::atomic::Ordering;
use std::collections::BTreeMap;

/// The name a NULL id records under.
pub const NULL_ID_NAME: &[u8] = b"<null-id>";

/// A name as stored in the table: up to 31 bytes.
pub type Name = [u8; LATTE_ID_NAME_SIZE as usize];

fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The stored form of a name's bytes (see the module rules).
pub fn normalize_bytes(text: &[u8]) -> Name {
    let mut out = [0u8; LATTE_ID_NAME_SIZE as usize];
    let max = LATTE_ID_NAME_SIZE as usize - 1;
    if text.len() <= max {
        out[..text.len()].copy_from_slice(text);
        return out;
    }
    // Cut at a UTF-8 boundary: never start the cut on a continuation byte.
    let mut cut = 26;
    while cut > 0 && (text[cut] & 0xC0) == 0x80 {
        cut -= 1;
    }
    out[..cut].copy_from_slice(&text[..cut]);
    let h = fnv1a(text);
    let folded = (h ^ (h >> 16)) & 0xFFFF;
    let tail = format!("~{folded:04x}");
    out[cut..cut + 5].copy_from_slice(tail.as_bytes());
    out
}

/// The stored form of a C string (NULL allowed).
///
/// # Safety
/// `id` is NULL or points to a NUL-terminated string.
pub unsafe fn normalize(id: *const c_char) -> Name {
    if id.is_null() {
        return normalize_bytes(NULL_ID_NAME);
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    normalize_bytes(unsafe { core::ffi::CStr::from_ptr(id) }.to_bytes())
}

/// The bytes of a stored name, up to its NUL.
pub fn name_bytes(n: &Name) -> &[u8] {
    let len = n.iter().position(|&b| b == 0).unwrap_or(n.len());
    &n[..len]
}

/// In-process maps from text and from pointer to token. The table of record
/// is the region's ID table; these only make lookups fast.
pub struct Interner {
    by_name: BTreeMap<Name, u32>,
    by_ptr: BTreeMap<usize, u32>,
    /// Per token, the first pointer a Start or pulse passed for it: the key
    /// under which the C++ `ExtractSamplesGlobal` files the token's samples
    /// (its callers look names up by address, with the literals they record
    /// through). Tokens survive a region change, so this is never cleared.
    first_ptr: BTreeMap<u32, usize>,
}

/// Pointer-map entries kept at most (IDs built in reused buffers would
/// otherwise grow it without bound).
const MAX_PTR_ENTRIES: usize = 65536;

impl Interner {
    pub const fn new() -> Interner {
        Interner { by_name: BTreeMap::new(), by_ptr: BTreeMap::new(), first_ptr: BTreeMap::new() }
    }

    /// Forgets everything (a new region without names).
    pub fn clear(&mut self) {
        self.by_name.clear();
        self.by_ptr.clear();
    }

    /// Token of a stored name, without adding it.
    pub fn lookup(&self, name: &Name) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// Token of a stored name, adding it to the region's table when new.
    pub fn intern_name(&mut self, region: &Region, name: &Name) -> Option<u32> {
        if let Some(&t) = self.by_name.get(name) {
            return Some(t);
        }
        let h = region.header();
        // Only the registry (under its lock) appends, so this load sees our own last store.
        let n = h.ids_used.load(Ordering::Relaxed);
        if n >= region.geometry().id_capacity {
            return None;
        }
        let e = region.id_entry(n);
        // SAFETY: entry n is inside the table and unpublished (n >= ids_used):
        // no reader looks at it until the release store below.
        unsafe { core::ptr::write(e, latte_id_entry { name: *name }) };
        // Release: publishes the name written above to any reader that
        // loads ids_used with acquire.
        h.ids_used.store(n + 1, Ordering::Release);
        self.by_name.insert(*name, n);
        Some(n)
    }

    /// Token for a recording ID pointer: by pointer when seen before (no
    /// string compare), else by content.
    ///
    /// # Safety
    /// `id` is NULL or a NUL-terminated string.
    pub unsafe fn intern_ptr(&mut self, region: &Region, id: *const c_char) -> Option<u32> {
        if let Some(&t) = self.by_ptr.get(&(id as usize)) {
            return Some(t);
        }
        // SAFETY: forwarded from the caller.
        let name = unsafe { normalize(id) };
        let t = self.intern_name(region, &name)?;
        if self.by_ptr.len() >= MAX_PTR_ENTRIES {
            self.by_ptr.clear();
        }
        self.by_ptr.insert(id as usize, t);
        if !id.is_null() {
            self.first_ptr.entry(t).or_insert(id as usize);
        }
        Some(t)
    }

    /// The first pointer a recording passed for `token` (see `first_ptr`).
    pub fn first_ptr(&self, token: u32) -> Option<usize> {
        self.first_ptr.get(&token).copied()
    }

    /// Rebuilds the name map from a region's table (after copying a table).
    pub fn reload(&mut self, region: &Region) {
        self.clear();
        let n = region.header().ids_used.load(Ordering::Acquire);
        for t in 0..n {
            // SAFETY: t < ids_used <= capacity; published entries never change.
            let name = unsafe { (*region.id_entry(t)).name };
            self.by_name.insert(name, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_kept() {
        assert_eq!(name_bytes(&normalize_bytes(b"Tick")), b"Tick");
        let n31 = [b'a'; 31];
        assert_eq!(name_bytes(&normalize_bytes(&n31)), &n31[..]);
        // SAFETY: NULL is allowed.
        assert_eq!(name_bytes(&unsafe { normalize(core::ptr::null()) }), NULL_ID_NAME);
    }

    #[test]
    fn long_names_stay_distinct_and_fit() {
        let a = normalize_bytes(b"compute_something_expensive(alpha, beta)");
        let b = normalize_bytes(b"compute_something_expensive(alpha, gamma)");
        assert_ne!(a, b);
        assert_eq!(name_bytes(&a).len(), 31);
        assert!(name_bytes(&a).starts_with(b"compute_something_expensiv"));
        assert_eq!(a[26], b'~');
    }

    #[test]
    fn long_names_cut_on_utf8_boundaries() {
        let text = "ééééééééééééééééééééééééé".as_bytes(); // 2-byte chars
        let n = normalize_bytes(text);
        let b = name_bytes(&n);
        assert!(std::str::from_utf8(b).is_ok(), "{b:?}");
    }
}
