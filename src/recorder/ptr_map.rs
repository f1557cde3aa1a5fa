//! A thread-private open-addressing map from ID pointers to rings: the
//! second level behind the hot cache. It grows with the IDs a thread
//! records (doubling, at most half full), so a thread with thousands of IDs
//! finds each here without the registry lock; past `PTR_MAP_MAX` entries
//! (IDs built in fresh buffers over and over) it starts over.
//!
//! A signal handler that records on the thread may look up this map (its
//! own slow path, before it asks for the registry lock) while the thread
//! it interrupted is changing it. Every change runs under `writing`, and a
//! lookup that finds it set answers "not here": the handler then asks for
//! the lock its thread holds, is refused, and its span is counted as a
//! reentrant drop (`lock.rs`). It never reads a half-written entry or a
//! table being replaced.

use crate::layout::LATTE_CACHE_HASH;
use core::sync::atomic::{compiler_fence, Ordering};

/// An open-addressing map from ID pointers to rings, thread-private.
pub(super) struct PtrMap {
    /// (key, tagged ring) pairs, side by side so that a probe reads one
    /// cache line; `entries.len()` is a power of two; a key of
    /// `PTR_MAP_EMPTY` marks a free entry.
    entries: Vec<(usize, u64)>,
    /// Entries in use, at most half of `entries.len()`.
    len: usize,
    /// Set while the map changes (the module doc); read and written
    /// volatile, as a signal handler on the thread may read it.
    writing: bool,
}

/// Entries of a new map.
const PTR_MAP_SIZE: usize = 512;
/// Entries a map grows to at most; beyond, it is emptied and starts over.
const PTR_MAP_MAX: usize = 1 << 21;
/// Key of an empty entry (no string lives at address 0: NULL IDs are not cached).
const PTR_MAP_EMPTY: usize = 0;
/// A free entry.
const EMPTY_ENTRY: (usize, u64) = (PTR_MAP_EMPTY, 0);

impl PtrMap {
    pub(super) fn new() -> PtrMap {
        PtrMap { entries: vec![EMPTY_ENTRY; PTR_MAP_SIZE], len: 0, writing: false }
    }

    /// Runs `f` with `writing` set.
    fn changing(&mut self, f: impl FnOnce(&mut PtrMap)) {
        // SAFETY: a field of `self`; volatile so that the store is made
        // before the change, where a handler on this thread can see it.
        unsafe { core::ptr::write_volatile(&mut self.writing, true) };
        compiler_fence(Ordering::SeqCst);
        f(self);
        compiler_fence(Ordering::SeqCst);
        // SAFETY: as above.
        unsafe { core::ptr::write_volatile(&mut self.writing, false) };
    }

    pub(super) fn clear(&mut self) {
        self.changing(PtrMap::clear_now);
    }

    fn clear_now(&mut self) {
        if self.entries.len() > PTR_MAP_SIZE {
            // Field by field: `writing` stays set while the table is replaced.
            self.entries = vec![EMPTY_ENTRY; PTR_MAP_SIZE];
        } else {
            self.entries.fill(EMPTY_ENTRY);
        }
        self.len = 0;
    }

    /// The entry `key` is looked up at first: the top log2(`entries.len()`)
    /// bits of its product with the hot cache's multiplier
    /// ([`LATTE_CACHE_HASH`]).
    fn home(&self, key: usize) -> usize {
        let shift = u64::BITS - self.entries.len().trailing_zeros();
        ((key as u64).wrapping_mul(LATTE_CACHE_HASH) >> shift) as usize
    }

    /// The ring of `key`; None when it is not here, or when the map is
    /// changing (a signal handler that interrupted a change).
    pub(super) fn get(&self, key: usize) -> Option<u64> {
        // SAFETY: a field of `self`, read afresh (the module doc).
        if unsafe { core::ptr::read_volatile(&self.writing) } {
            return None;
        }
        compiler_fence(Ordering::SeqCst);
        let mask = self.entries.len() - 1;
        let mut i = self.home(key);
        loop {
            match self.entries[i] {
                (PTR_MAP_EMPTY, _) => return None,
                (k, ring) if k == key => return Some(ring),
                _ => i = (i + 1) & mask,
            }
        }
    }

    pub(super) fn insert(&mut self, key: usize, slot: u64) {
        if key == PTR_MAP_EMPTY {
            return;
        }
        self.changing(|m| {
            // At most half full, so probes stay short and `get` always ends.
            if m.len >= m.entries.len() / 2 {
                if m.entries.len() >= PTR_MAP_MAX {
                    m.clear_now();
                } else {
                    m.grow();
                }
            }
            m.put(key, slot);
        });
    }

    fn put(&mut self, key: usize, slot: u64) {
        let mask = self.entries.len() - 1;
        let mut i = self.home(key);
        while self.entries[i].0 != PTR_MAP_EMPTY && self.entries[i].0 != key {
            i = (i + 1) & mask;
        }
        if self.entries[i].0 == PTR_MAP_EMPTY {
            self.len += 1;
        }
        self.entries[i] = (key, slot);
    }

    /// Twice the entries, every key placed again.
    fn grow(&mut self) {
        let n = self.entries.len() * 2;
        let old = core::mem::replace(&mut self.entries, vec![EMPTY_ENTRY; n]);
        self.len = 0;
        for (k, s) in old {
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
        assert!(m.entries.len() >= 20_000);
        for k in 2..=10_000usize {
            assert_eq!(m.get(k * 0x1000), Some(slot(k)));
        }
        m.clear();
        assert_eq!((m.len, m.entries.len()), (0, PTR_MAP_SIZE));
        assert_eq!(m.get(0x2000), None);
        // Emptying a grown map replaces its tables and leaves the flag as it was.
        m.writing = true;
        m.entries = vec![EMPTY_ENTRY; PTR_MAP_SIZE * 4];
        m.clear_now();
        assert!(m.writing && m.entries.len() == PTR_MAP_SIZE);
        m.writing = false;
        // While it changes, a lookup (a signal handler's) finds nothing.
        m.insert(0x3000, slot(3));
        m.writing = true;
        assert_eq!(m.get(0x3000), None);
        m.writing = false;
        assert_eq!(m.get(0x3000), Some(slot(3)));
    }
}
