//! A thread-private open-addressing map from ID pointers to rings: the
//! second level behind the hot cache. It grows with the IDs a thread
//! records (doubling, at most half full), so a thread with thousands of IDs
//! finds each here without the registry lock; past `PTR_MAP_MAX` entries
//! (IDs built in fresh buffers over and over) it starts over.
//!
//! A signal handler that records on the thread runs this map's code
//! nested inside the thread's own, at any instruction; two flags keep
//! either side from seeing the other's half-done work:
//!
//! | the thread is in | a handler on it | why that is safe |
//! |---|---|---|
//! | a change (`writing`) | finds nothing: its `get` answers "not here" | it then asks for the registry lock its thread holds, is refused, and its span is counted as a reentrant drop (`lock.rs`); it never reads a half-written entry or a table being replaced |
//! | a lookup (`reading`) | changes nothing: its `insert` is skipped | its span is recorded all the same (the registry gave it its ring); the thread's lookup goes on in a table that was not replaced or freed under it |
//!
//! Both flags are this thread's alone: read and written with relaxed
//! atomics between compiler fences, which order them against the map's
//! other accesses as a handler on the same thread sees them.

use crate::layout::LATTE_CACHE_HASH;
use core::sync::atomic::{compiler_fence, AtomicBool, Ordering};

/// An open-addressing map from ID pointers to rings, thread-private.
pub(super) struct PtrMap {
    /// (key, tagged ring) pairs, side by side so that a probe reads one
    /// cache line; `entries.len()` is a power of two; a key of
    /// `PTR_MAP_EMPTY` marks a free entry.
    entries: Vec<(usize, u64)>,
    /// Entries in use, at most half of `entries.len()`.
    len: usize,
    /// Set while the map changes (the module doc).
    writing: AtomicBool,
    /// Set while the thread looks a key up (the module doc).
    reading: AtomicBool,
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
    /// A new, empty map, with no table yet (the first insert makes it).
    pub(super) fn new() -> PtrMap {
        PtrMap { entries: Vec::new(), len: 0, writing: AtomicBool::new(false), reading: AtomicBool::new(false) }
    }

    /// Empties the map of a state that changes hands: a thread's new
    /// state, an exited thread's, or one a fork child inherited from a
    /// thread that does not exist there, whose flags may have been caught
    /// up. Frees the table (allocates nothing) and lowers both flags. Under
    /// the registry lock, where no handler of the state's thread can be in
    /// the map.
    pub(super) fn reset(&mut self) {
        self.entries = Vec::new();
        self.len = 0;
        self.writing.store(false, Ordering::Relaxed);
        self.reading.store(false, Ordering::Relaxed);
    }

    /// Runs `f` with `writing` set, unless the map is being read or
    /// changed already: then this is a signal handler that interrupted
    /// the thread's own `get` or change, and `f` is skipped (the module
    /// doc). Returns whether `f` ran.
    fn changing(&mut self, f: impl FnOnce(&mut PtrMap)) -> bool {
        if self.reading.load(Ordering::Relaxed) || self.writing.load(Ordering::Relaxed) {
            return false;
        }
        // Relaxed, fenced: only this thread, or a handler on it, reads
        // the flag; the fences keep the change between the two stores.
        self.writing.store(true, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        f(self);
        compiler_fence(Ordering::SeqCst);
        self.writing.store(false, Ordering::Relaxed);
        true
    }

    fn clear_now(&mut self) {
        // A grown table goes back to the first size; if even that cannot
        // be had, the grown one is emptied in place.
        match (self.entries.len() > PTR_MAP_SIZE).then(|| try_table(PTR_MAP_SIZE)).flatten() {
            // Field by field: `writing` stays set while the table is replaced.
            Some(t) => self.entries = t,
            None => self.entries.fill(EMPTY_ENTRY),
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
        // Relaxed, fenced: this thread's own flags (the module doc).
        if self.writing.load(Ordering::Relaxed) || self.entries.is_empty() {
            return None;
        }
        // Nested lookups (a handler's inside the thread's) each put back
        // what they found, so the outermost one clears the flag.
        let was_reading = self.reading.load(Ordering::Relaxed);
        self.reading.store(true, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        let found = self.probe(key);
        compiler_fence(Ordering::SeqCst);
        self.reading.store(was_reading, Ordering::Relaxed);
        found
    }

    fn probe(&self, key: usize) -> Option<u64> {
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

    /// Enters `key`'s ring; skipped (the map only saves a later lookup)
    /// when a handler calls it inside the thread's own lookup or change.
    pub(super) fn insert(&mut self, key: usize, slot: u64) {
        if key == PTR_MAP_EMPTY {
            return;
        }
        let _ = self.changing(|m| {
            if m.entries.is_empty() {
                match try_table(PTR_MAP_SIZE) {
                    Some(t) => m.entries = t,
                    None => return,
                }
            }
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

    /// Twice the entries, every key placed again; the map starts over
    /// instead when the memory cannot be had (it only saves lookups).
    fn grow(&mut self) {
        let Some(table) = try_table(self.entries.len() * 2) else {
            self.clear_now();
            return;
        };
        let old = core::mem::replace(&mut self.entries, table);
        self.len = 0;
        for (k, s) in old {
            if k != PTR_MAP_EMPTY {
                self.put(k, s);
            }
        }
    }
}

/// A table of `n` free entries; None when the memory cannot be had (an
/// allocation failure must not abort the measured program).
fn try_table(n: usize) -> Option<Vec<(usize, u64)>> {
    let mut t = Vec::new();
    t.try_reserve_exact(n).ok()?;
    t.resize(n, EMPTY_ENTRY);
    Some(t)
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
        m.reset();
        assert_eq!((m.len, m.entries.len()), (0, 0));
        assert_eq!(m.get(0x2000), None);
        // Emptying a grown map replaces its tables and leaves the flag as it was.
        m.writing.store(true, Ordering::Relaxed);
        m.entries = vec![EMPTY_ENTRY; PTR_MAP_SIZE * 4];
        m.clear_now();
        assert!(m.writing.load(Ordering::Relaxed) && m.entries.len() == PTR_MAP_SIZE);
        m.writing.store(false, Ordering::Relaxed);
        // While it changes, a lookup (a signal handler's) finds nothing.
        m.insert(0x3000, slot(3));
        m.writing.store(true, Ordering::Relaxed);
        assert_eq!(m.get(0x3000), None);
        m.writing.store(false, Ordering::Relaxed);
        assert_eq!(m.get(0x3000), Some(slot(3)));
    }

    #[test]
    fn ptr_map_is_not_changed_inside_a_lookup_or_a_change() {
        let mut m = PtrMap::new();
        m.insert(0x1000, slot(1));
        // A handler inside the thread's lookup: its inserts, even one that
        // would grow the table, are skipped; the table stays where it is.
        m.reading.store(true, Ordering::Relaxed);
        let table = m.entries.as_ptr();
        for k in 2..=PTR_MAP_SIZE {
            m.insert(k * 0x1000, slot(k));
        }
        assert_eq!((m.len, m.entries.as_ptr()), (1, table));
        // A handler's own lookup inside it finds what is there, and leaves
        // the thread's flag up.
        assert_eq!(m.get(0x1000), Some(slot(1)));
        assert!(m.reading.load(Ordering::Relaxed));
        m.reading.store(false, Ordering::Relaxed);
        // Inside a change, likewise.
        m.writing.store(true, Ordering::Relaxed);
        m.insert(0x2000, slot(2));
        m.writing.store(false, Ordering::Relaxed);
        assert_eq!((m.len, m.get(0x2000)), (1, None));
        // A state inherited with a flag caught up (a fork child of a thread
        // inside its lookup) is reset whole when it changes hands.
        m.reading.store(true, Ordering::Relaxed);
        m.reset();
        m.insert(0x1000, slot(1));
        assert_eq!(m.get(0x1000), Some(slot(1)));
        // Outside both, a lookup leaves no flag behind, and inserts go in.
        m.insert(0x2000, slot(2));
        assert_eq!(m.get(0x2000), Some(slot(2)));
        assert!(!m.reading.load(Ordering::Relaxed) && !m.writing.load(Ordering::Relaxed));
    }
}
