//! Interning IDs: a `const char*` becomes a stable 32-bit token whose name
//! (`name`) lives in the region's name records, so no pointer ever leaves
//! the process. Tokens are handed out in order, without limit; a name gets
//! none only when the region cannot store it (its memory could not be had,
//! or the producer's `id_limit`): spans recorded under it are not recorded
//! and are counted (`unfit_id_drops`).

use crate::name::{id_is, try_normalize, Name};
use crate::reader::View;
use crate::region::Region;
use core::ffi::c_char;
use core::hash::BuildHasherDefault;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;

/// A map the interner can make in a `const` (the registry is a static)
/// and grow fallibly (`try_reserve`).
type Map<K, V> = HashMap<K, V, BuildHasherDefault<DefaultHasher>>;

/// Why an ID got no token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    /// The region could not store its name (its memory could not be had,
    /// or the producer's `id_limit`): said by the region, once.
    NoRoom,
    /// This process's memory for the interner's own maps ran out.
    NoMemory,
}

/// In-process maps from text and from pointer to token. The table of record
/// is the region's name records; these only make lookups fast.
pub struct Interner {
    by_name: Option<HashMap<Name, u32>>,
    /// Every name, by token.
    by_token: Vec<Name>,
    by_ptr: Map<usize, u32>,
    /// Per token, the first pointer a Start or pulse passed for it: the key
    /// under which the C++ `ExtractSamplesGlobal` files the token's samples
    /// (its callers look names up by address, with the literals they record
    /// through). Tokens survive a region change, so this is never cleared.
    first_ptr: Map<u32, usize>,
}

/// Pointer-map entries kept at most (IDs built in reused buffers would
/// otherwise grow it without bound).
const MAX_PTR_ENTRIES: usize = 1 << 20;

impl Default for Interner {
    fn default() -> Self {
        Self::new()
    }
}

impl Interner {
    pub const fn new() -> Interner {
        Interner {
            by_name: None,
            by_token: Vec::new(),
            by_ptr: Map::with_hasher(BuildHasherDefault::new()),
            first_ptr: Map::with_hasher(BuildHasherDefault::new()),
        }
    }

    /// Forgets everything (a new region without names).
    pub fn clear(&mut self) {
        self.by_name = None;
        self.by_token.clear();
        self.by_ptr.clear();
    }

    /// The token of a name, when it has one.
    pub fn token_of(&self, name: &[u8]) -> Option<u32> {
        self.by_name.as_ref()?.get(name).copied()
    }

    /// The name of a token, when it is one.
    pub fn name_of(&self, token: u32) -> Option<&Name> {
        self.by_token.get(token as usize)
    }

    /// Token of a stored name, adding it to the region's records when new.
    /// Everything this may allocate is had first: a name the region took
    /// always enters the maps.
    pub fn intern_name(&mut self, region: &Region, name: Name) -> Result<u32, Unfit> {
        let by_name = self.by_name.get_or_insert_with(HashMap::new);
        if let Some(&t) = by_name.get(&name) {
            return Ok(t);
        }
        by_name.try_reserve(1).map_err(|_| Unfit::NoMemory)?;
        self.by_token.try_reserve(1).map_err(|_| Unfit::NoMemory)?;
        let mut copy = Vec::new();
        copy.try_reserve_exact(name.len()).map_err(|_| Unfit::NoMemory)?;
        copy.extend_from_slice(&name);
        let t = region.append_name(&name).ok_or(Unfit::NoRoom)?;
        by_name.insert(copy, t);
        debug_assert_eq!(t as usize, self.by_token.len());
        self.by_token.push(name);
        Ok(t)
    }

    /// Token for a recording ID pointer: by pointer when seen before and
    /// its text is still that token's name (a compare, no allocation), else
    /// by content. A thread asks once per pointer (its own maps keep the
    /// answer), so a buffer that held another name when another thread
    /// first passed it (a heap name freed, its memory reused) is filed
    /// under the name it holds now.
    ///
    /// # Safety
    /// `id` is NULL or a NUL-terminated string.
    pub unsafe fn intern_ptr(&mut self, region: &Region, id: *const c_char) -> Result<u32, Unfit> {
        if let Some(&t) = self.by_ptr.get(&(id as usize)) {
            // SAFETY: forwarded from the caller.
            if self.by_token.get(t as usize).is_some_and(|n| unsafe { id_is(id, n) }) {
                return Ok(t);
            }
        }
        if self.by_ptr.len() >= MAX_PTR_ENTRIES {
            self.by_ptr.clear();
        }
        self.by_ptr.try_reserve(1).map_err(|_| Unfit::NoMemory)?;
        self.first_ptr.try_reserve(1).map_err(|_| Unfit::NoMemory)?;
        // SAFETY: forwarded from the caller.
        let name = unsafe { try_normalize(id) }.ok_or(Unfit::NoMemory)?;
        let t = self.intern_name(region, name)?;
        self.by_ptr.insert(id as usize, t);
        if !id.is_null() {
            self.first_ptr.entry(t).or_insert(id as usize);
        }
        Ok(t)
    }

    /// The first pointer a recording passed for `token` (see `first_ptr`).
    pub fn first_ptr(&self, token: u32) -> Option<usize> {
        self.first_ptr.get(&token).copied()
    }

    /// Rebuilds the name map from a region's records (after copying them).
    pub fn reload(&mut self, region: &Region) {
        self.clear();
        let mut m = HashMap::new();
        if let Ok(ids) = View::of_region(region).ids() {
            for i in ids {
                m.insert(i.name.clone(), i.token);
                self.by_token.push(i.name);
            }
        }
        self.by_name = Some(m);
    }

    /// Copies the ID names of `from` into `to` under the same tokens (a
    /// shared region replacing the private one before any recording);
    /// false when `to` could not take them all.
    pub fn copy_names(from: &Region, to: &Region) -> bool {
        let Ok(ids) = View::of_region(from).ids() else { return false };
        ids.iter().all(|i| to.append_name(&i.name) == Some(i.token))
    }
}

#[cfg(test)]
mod tests {
    use crate::name::*;

    #[test]
    fn short_names_are_kept() {
        assert_eq!(name_bytes(&normalize_bytes(b"Tick")), b"Tick");
        let n1024 = [b'a'; 1024];
        assert_eq!(name_bytes(&normalize_bytes(&n1024)), &n1024[..]);
        // SAFETY: NULL is allowed.
        assert_eq!(name_bytes(&unsafe { normalize(core::ptr::null()) }), NULL_ID_NAME);
    }

    #[test]
    fn names_up_to_the_limit_are_whole_and_longer_ones_stay_distinct() {
        let whole = vec![b'x'; crate::layout::LATTE_MAX_NAME_LEN as usize];
        assert_eq!(normalize_bytes(&whole), whole);
        let mut a = vec![b'a'; 5000];
        let mut b = a.clone();
        a.extend_from_slice(b"beta");
        b.extend_from_slice(b"gamma");
        let (na, nb) = (normalize_bytes(&a), normalize_bytes(&b));
        assert_ne!(na, nb);
        assert_eq!(na.len(), crate::layout::LATTE_MAX_NAME_LEN as usize);
        assert_eq!(na[na.len() - 17], b'~');
        // Texts alike but for their last bytes, as many as it took to find
        // two 16-bit hashes alike: 64-bit hashes keep them apart.
        let prefix = vec![b'p'; 4995];
        let cut: std::collections::HashSet<Vec<u8>> = (0..2000).map(|k| normalize_bytes(&[&prefix[..], format!("{k:05}").as_bytes()].concat())).collect();
        assert_eq!(cut.len(), 2000);
    }

    #[test]
    fn long_names_cut_on_utf8_boundaries() {
        let text = "é".repeat(3000); // 2-byte chars
        let text = text.as_bytes();
        let n = normalize_bytes(text);
        let b = name_bytes(&n);
        assert!(std::str::from_utf8(b).is_ok(), "{b:?}");
    }
}
