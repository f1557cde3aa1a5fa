//! Interning IDs: a `const char*` becomes a stable 32-bit token whose name
//! (`name`) lives in the region's ID table, so no pointer ever leaves the
//! process. When the table is full, a new name gets no token: spans
//! recorded under it are not recorded and are counted (`unfit_id_drops`).

use crate::layout::latte_id_entry;
use crate::name::{normalize, Name};
use crate::region::Region;
use core::ffi::c_char;
use core::sync::atomic::Ordering;
use std::collections::BTreeMap;

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

impl Default for Interner {
    fn default() -> Self {
        Self::new()
    }
}

impl Interner {
    pub const fn new() -> Interner {
        Interner { by_name: BTreeMap::new(), by_ptr: BTreeMap::new(), first_ptr: BTreeMap::new() }
    }

    /// Forgets everything (a new region without names).
    pub fn clear(&mut self) {
        self.by_name.clear();
        self.by_ptr.clear();
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
    use crate::name::*;

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
