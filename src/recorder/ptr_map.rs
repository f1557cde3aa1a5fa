//! A thread-private open-addressing map from ID pointers to rings: the
//! second level behind the hot cache. It grows with the IDs a thread
//! records (doubling, at most half full), so a thread with thousands of IDs
//! finds each here without the registry lock; past `PTR_MAP_MAX` entries
//! (IDs built in fresh buffers over and over) it starts over.

use crate::layout::LATTE_CACHE_HASH;

/// An open-addressing map from ID pointers to rings, thread-private.
pub(super) struct PtrMap {
    /// `keys.len()` is a power of two; `PTR_MAP_EMPTY` marks a free entry.
    keys: Vec<usize>,
    slots: Vec<u64>,
    /// Entries in use, at most half of `keys.len()`.
    len: usize,
}

/// Entries of a new map.
const PTR_MAP_SIZE: usize = 512;
/// Entries a map grows to at most; beyond, it is emptied and starts over.
const PTR_MAP_MAX: usize = 1 << 21;
/// Key of an empty entry (no string lives at address 0: NULL IDs are not cached).
const PTR_MAP_EMPTY: usize = 0;

impl PtrMap {
    pub(super) fn new() -> PtrMap {
        PtrMap { keys: vec![PTR_MAP_EMPTY; PTR_MAP_SIZE], slots: vec![0; PTR_MAP_SIZE], len: 0 }
    }

    pub(super) fn clear(&mut self) {
        if self.keys.len() > PTR_MAP_SIZE {
            *self = PtrMap::new();
        } else {
            self.keys.fill(PTR_MAP_EMPTY);
            self.len = 0;
        }
    }

    /// The entry `key` is looked up at first: the top log2(`keys.len()`)
    /// bits of its product with the hot cache's multiplier
    /// ([`LATTE_CACHE_HASH`]).
    fn home(&self, key: usize) -> usize {
        let shift = u64::BITS - self.keys.len().trailing_zeros();
        ((key as u64).wrapping_mul(LATTE_CACHE_HASH) >> shift) as usize
    }

    pub(super) fn get(&self, key: usize) -> Option<u64> {
        let mask = self.keys.len() - 1;
        let mut i = self.home(key);
        loop {
            match self.keys[i] {
                PTR_MAP_EMPTY => return None,
                k if k == key => return Some(self.slots[i]),
                _ => i = (i + 1) & mask,
            }
        }
    }

    pub(super) fn insert(&mut self, key: usize, slot: u64) {
        if key == PTR_MAP_EMPTY {
            return;
        }
        // At most half full, so probes stay short and `get` always ends.
        if self.len >= self.keys.len() / 2 {
            if self.keys.len() >= PTR_MAP_MAX {
                self.clear();
            } else {
                self.grow();
            }
        }
        self.put(key, slot);
    }

    fn put(&mut self, key: usize, slot: u64) {
        let mask = self.keys.len() - 1;
        let mut i = self.home(key);
        while self.keys[i] != PTR_MAP_EMPTY && self.keys[i] != key {
            i = (i + 1) & mask;
        }
        if self.keys[i] == PTR_MAP_EMPTY {
            self.len += 1;
        }
        self.keys[i] = key;
        self.slots[i] = slot;
    }

    /// Twice the entries, every key placed again.
    fn grow(&mut self) {
        let n = self.keys.len() * 2;
        let keys = core::mem::replace(&mut self.keys, vec![PTR_MAP_EMPTY; n]);
        let slots = core::mem::replace(&mut self.slots, vec![0; n]);
        self.len = 0;
        for (k, s) in keys.into_iter().zip(slots) {
            if k != PTR_MAP_EMPTY {
                self.put(k, s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(n: usize) -> u64 {
        (n * 128) as u64
    }

    #[test]
    fn ptr_map_finds_what_it_holds_and_grows() {
        let mut m = PtrMap::new();
        assert_eq!(m.get(0x1000), None);
        // Keys that share a home entry probe onwards.
        for k in 1..=10usize {
            m.insert(k * 0x1000, slot(k));
        }
        for k in 1..=10usize {
            assert_eq!(m.get(k * 0x1000), Some(slot(k)));
        }
        m.insert(0x1000, slot(99)); // an update, not a new entry
        assert_eq!(m.get(0x1000), Some(slot(99)));
        assert_eq!(m.len, 10);
        m.insert(PTR_MAP_EMPTY, slot(1)); // NULL IDs are never cached
        assert_eq!(m.len, 10);
        // Past half full it grows, and keeps every key.
        for k in 11..=10_000usize {
            m.insert(k * 0x1000, slot(k));
        }
        assert_eq!(m.len, 10_000);
        assert!(m.keys.len() >= 20_000);
        for k in 2..=10_000usize {
            assert_eq!(m.get(k * 0x1000), Some(slot(k)));
        }
        m.clear();
        assert_eq!((m.len, m.keys.len()), (0, PTR_MAP_SIZE));
        assert_eq!(m.get(0x2000), None);
    }
}
