//! The hot state's ID cache: open-addressed by the ID pointer, at most half
//! full (the hash and sizes are constants of the generated header, which
//! `include/latte_inline.h` uses for the same probe).

use crate::layout::*;
use core::ffi::c_char;

/// Empties a hot state's ID cache.
pub(super) fn clear_cache(t: &mut latte_thread) {
    for e in t.cache.iter_mut() {
        e.key = LATTE_CACHE_EMPTY as *const c_char;
        e.ring = 0;
    }
    t.cache_used = 0;
}

/// The cached tagged ring of `id`, probing from `i` (its home entry); None at the
/// first empty entry. The
/// cache is never full, so the probe ends. NULL is never cached.
#[inline(always)]
pub fn cache_probe(t: &latte_thread, id: *const c_char, mut i: usize) -> Option<u64> {
    if id.is_null() {
        return None;
    }
    loop {
        let e = &t.cache[i];
        if e.key == id {
            return Some(e.ring);
        }
        if e.key as usize == LATTE_CACHE_EMPTY {
            return None;
        }
        i = cache_next(i);
    }
}

/// Adds `id` -> `ring` (tagged) to the cache at the first empty entry of
/// its probe order, emptying the cache first when it is half full.
pub(super) fn cache_insert(t: &mut latte_thread, id: *const c_char, ring: u64) {
    if id.is_null() {
        return;
    }
    if t.cache_used >= LATTE_CACHE_MAX_USED as u64 {
        clear_cache(t);
    }
    let mut i = cache_index(id);
    loop {
        let e = &mut t.cache[i];
        if e.key == id {
            e.ring = ring;
            return;
        }
        if e.key as usize == LATTE_CACHE_EMPTY {
            e.key = id;
            e.ring = ring;
            t.cache_used += 1;
            return;
        }
        i = cache_next(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(n: usize) -> u64 {
        tag_ring((n * 128) as *mut latte_slot_header, (n % 256) as u32)
    }

    #[test]
    fn id_cache_probes_on_and_empties_itself_when_half_full() {
        // SAFETY: an all-zero latte_thread is valid (integers, null pointers).
        let mut t: Box<latte_thread> = unsafe { Box::new(core::mem::zeroed()) };
        let key = |n: usize| (0x10_0000 + n * 24) as *const c_char;
        assert_eq!(cache_probe(&t, key(0), cache_index(key(0))), None);
        assert_eq!(cache_probe(&t, core::ptr::null(), 0), None, "NULL is never cached");
        // Keys sharing a home entry go to the following entries.
        let home = cache_index(key(0));
        let same: Vec<usize> = (1..200_000).filter(|&n| cache_index(key(n)) == home).take(3).collect();
        cache_insert(&mut t, key(0), slot(1));
        for (k, &n) in same.iter().enumerate() {
            cache_insert(&mut t, key(n), slot(k + 2));
        }
        assert_eq!(cache_probe(&t, key(0), home), Some(slot(1)));
        for (k, &n) in same.iter().enumerate() {
            assert_eq!(cache_probe(&t, key(n), home), Some(slot(k + 2)));
            assert_eq!(t.cache[(home + k + 1) % LATTE_CACHE_SIZE as usize].key, key(n));
        }
        // Never more than half full: the insert that would pass it empties it first.
        let mut n = 1_000_000;
        while t.cache_used < LATTE_CACHE_MAX_USED as u64 {
            cache_insert(&mut t, key(n), slot(7));
            n += 1;
        }
        cache_insert(&mut t, key(n), slot(8));
        assert_eq!(t.cache_used, 1);
        assert_eq!(cache_probe(&t, key(n), cache_index(key(n))), Some(slot(8)));
        assert_eq!(cache_probe(&t, key(0), home), None);
    }
}
