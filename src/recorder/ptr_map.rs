//! A thread-private open-addressing map from ID pointers to rings: the
//! second level behind the hot cache.

/// An open-addressing map from ID pointers to rings, thread-private.
pub(super) struct PtrMap {
    keys: Box<[usize; PTR_MAP_SIZE]>,
    slots: Box<[u64; PTR_MAP_SIZE]>,
    len: usize,
}

const PTR_MAP_SIZE: usize = 512;
/// Key of an empty entry (no string lives at address 0: NULL IDs are not cached).
const PTR_MAP_EMPTY: usize = 0;

impl PtrMap {
    pub(super) fn new() -> PtrMap {
        PtrMap { keys: Box::new([PTR_MAP_EMPTY; PTR_MAP_SIZE]), slots: Box::new([0; PTR_MAP_SIZE]), len: 0 }
    }

    pub(super) fn clear(&mut self) {
        self.keys.fill(PTR_MAP_EMPTY);
        self.len = 0;
    }

    fn home(key: usize) -> usize {
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55) as usize & (PTR_MAP_SIZE - 1)
    }

    pub(super) fn get(&self, key: usize) -> Option<u64> {
        let mut i = Self::home(key);
        loop {
            match self.keys[i] {
                PTR_MAP_EMPTY => return None,
                k if k == key => return Some(self.slots[i]),
                _ => i = (i + 1) & (PTR_MAP_SIZE - 1),
            }
        }
    }

    pub(super) fn insert(&mut self, key: usize, slot: u64) {
        if key == PTR_MAP_EMPTY {
            return;
        }
        // At most half full, so probes stay short and `get` always ends.
        if self.len >= PTR_MAP_SIZE / 2 {
            self.clear();
        }
        let mut i = Self::home(key);
        while self.keys[i] != PTR_MAP_EMPTY && self.keys[i] != key {
            i = (i + 1) & (PTR_MAP_SIZE - 1);
        }
        if self.keys[i] == PTR_MAP_EMPTY {
            self.len += 1;
        }
        self.keys[i] = key;
        self.slots[i] = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(n: usize) -> u64 {
        (n * 128) as u64
    }

    #[test]
    fn ptr_map_finds_what_it_holds_and_clears_when_half_full() {
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
        for k in 11..=(PTR_MAP_SIZE / 2) {
            m.insert(k * 0x1000, slot(k));
        }
        assert_eq!(m.len, PTR_MAP_SIZE / 2);
        // Full to half: the next insert starts over, and lookups still end.
        m.insert(0xdead_0000, slot(7));
        assert_eq!(m.len, 1);
        assert_eq!(m.get(0xdead_0000), Some(slot(7)));
        assert_eq!(m.get(0x1000), None);
    }
}
