//! The hot state's ID cache: open-addressed by the ID pointer, at most half
//! full (the hash and sizes are constants of the generated header, which
//! `include/latte_inline.h` uses for the same probe).
//!
//! The newest ID takes its home entry. The inline Start looks only there
//! and calls out to probe further (`latte__probe`): a call and, in random
//! order, a mispredicted branch, 7 to 11 cycles a span measured over 8 IDs
//! cached after others had taken their home entries. So an insert whose home
//! entry holds another ID moves that ID on to the first empty entry of
//! its probe order and takes the home entry (rule C4): the IDs a thread
//! starts using are found at home, the ones it used before one or more
//! entries on. Every ID stays findable: no entry between its home and it
//! is empty once an insert ends.
//!
//! Signal handlers. A handler that records on the thread it interrupted
//! reads the cache (the inline Start and Rust's both do), and may write it
//! (its own slow path), at any instruction of a write the interrupted code
//! was making, and may change the cache between two loads of a Start it
//! interrupted. Three rules keep a reader from taking a ring that is not
//! its key's:
//! - C1 An entry's ring is written while its key is empty (or is the same
//!   ID, when its ring changes), then (after a compiler fence) its key;
//!   emptying the cache writes keys only. A handler that reads a key
//!   therefore finds that key's ring beside it.
//! - C2 Inserts run under a per-thread flag (`WRITING`); an insert that
//!   finds it set is a handler's, interrupting one under way, and is
//!   skipped: the handler's span takes its ring from the slow path
//!   uncached. Otherwise the handler could fill the entry the interrupted
//!   insert had chosen between C1's two writes, and the interrupted insert
//!   would then pair its key with the handler's ring. Emptying is never
//!   skipped (it writes keys only); an insert that finds its state detached
//!   when it ends empties the cache again.
//! - C3 A reader loads an entry's key, then its ring, then its key again,
//!   with a compiler fence between each two, and takes the ring only when
//!   both keys are the ID it looks for. A handler that ran between the
//!   first two loads left an entry whose ring and key the last two read
//!   together (C1); one that ran between the last two left the ring read
//!   before it, the ring of the first key. (Two handlers, one in each gap,
//!   that put another ID in the entry and then the reader's own ID back,
//!   would pass unnoticed: two signals, each within one instruction of the
//!   other's window.)
//!
//! - C4 An insert that moves the home entry's ID on first copies it to the
//!   empty entry (C1: ring, then key), then empties the home entry's key,
//!   then fills it (C1). Until the copy is done the ID is at home; after
//!   it, at both entries (with one ring) or at the new one. While the home
//!   key is empty, a handler probing past it misses and takes the slow
//!   path (its insert is skipped, C2): a lookup never finds a wrong ring,
//!   at worst no ring.
//!
//! A thread sees its own writes in program order, so compiler fences are
//! all the ordering a handler on the same thread needs.

use crate::layout::*;
use core::cell::Cell;
use core::ffi::c_char;
use core::sync::atomic::{compiler_fence, Ordering};

std::thread_local! {
    /// Whether this thread is writing a cache (rule C2). Const-initialised
    /// and without a destructor, so a signal handler may read it.
    static WRITING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` under the thread's writing flag (rule C2); does nothing when
/// the flag is already set (a signal handler interrupting a write).
fn writing(f: impl FnOnce()) {
    let Ok(busy) = WRITING.try_with(|w| w.replace(true)) else {
        return; // the thread is exiting: nothing is cached any more
    };
    if busy {
        return;
    }
    compiler_fence(Ordering::SeqCst);
    f();
    compiler_fence(Ordering::SeqCst);
    let _ = WRITING.try_with(|w| w.set(false));
}

/// Empties a hot state's ID cache: its keys only (rule C1). It is safe at
/// any point, even in a signal handler that interrupted a write of the
/// cache, so it is never skipped (a detach must empty it; `cache_insert`
/// looks again).
pub(super) fn clear_cache(t: &mut latte_thread) {
    for e in t.cache.iter_mut() {
        e.key = LATTE_CACHE_EMPTY as *const c_char;
    }
    t.cache_used = 0;
}

/// Fills an empty entry by rule C1: the ring, then (after a compiler
/// fence) the key; a fence after it too, so that a write that follows
/// (rule C4's emptying of the home key) stays after it.
fn fill(e: &mut latte_cache_entry, key: *const c_char, ring: u64) {
    e.ring = ring;
    compiler_fence(Ordering::SeqCst);
    e.key = key;
    compiler_fence(Ordering::SeqCst);
}

/// The tagged ring of `id` when entry `i` holds it, read by rule C3 (the
/// key, the ring, the key again). NULL is never cached.
#[inline(always)]
pub fn cache_entry(t: &latte_thread, id: *const c_char, i: usize) -> Option<u64> {
    let e = &t.cache[i];
    // Each word through a relaxed atomic load (a plain `mov` on x86-64): a
    // signal handler on this thread may write them between the loads, and
    // the fences keep the three in order (rule C3).
    let key = || {
        // SAFETY: `e.key` is a live, aligned pointer-sized field; atomics
        // only read it here.
        unsafe { core::sync::atomic::AtomicPtr::from_ptr(core::ptr::addr_of!(e.key) as *mut *mut c_char) }.load(Ordering::Relaxed) as *const c_char
    };
    if key() != id || id.is_null() {
        return None;
    }
    compiler_fence(Ordering::SeqCst);
    // SAFETY: as above, for the aligned u64 `e.ring`.
    let ring = unsafe { core::sync::atomic::AtomicU64::from_ptr(core::ptr::addr_of!(e.ring) as *mut u64) }.load(Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    (key() == id).then_some(ring)
}

/// The cached tagged ring of `id`, probing from `i` (its home entry); None at the
/// first empty entry, or when a signal handler changed the entry while it
/// was read (rule C3). The
/// cache is never full, so the probe ends. NULL is never cached.
#[inline(always)]
pub fn cache_probe(t: &latte_thread, id: *const c_char, mut i: usize) -> Option<u64> {
    if id.is_null() {
        return None;
    }
    loop {
        let e = &t.cache[i];
        if e.key == id {
            return cache_entry(t, id, i);
        }
        if e.key as usize == LATTE_CACHE_EMPTY {
            return None;
        }
        i = cache_next(i);
    }
}

/// Adds `id` -> `ring` (tagged) to the cache at its home entry, the ID
/// there moving on to the first empty entry of the probe order (rule C4),
/// emptying the cache first when it is half full. An ID already cached
/// gets the new ring where it is. Skipped in a signal handler that
/// interrupted a write of the cache (rule C2).
pub(super) fn cache_insert(t: &mut latte_thread, id: *const c_char, ring: u64) {
    if id.is_null() {
        return;
    }
    writing(|| {
        if t.cache_used >= LATTE_CACHE_MAX_USED as u64 {
            clear_cache(t);
        }
        let home = cache_index(id);
        let mut i = home;
        loop {
            let e = &mut t.cache[i];
            if e.key == id {
                // One aligned word: a reader sees the old ring or the new.
                e.ring = ring;
                return;
            }
            if e.key as usize == LATTE_CACHE_EMPTY {
                if i != home {
                    let (key, ring) = (t.cache[home].key, t.cache[home].ring);
                    fill(&mut t.cache[i], key, ring);
                    t.cache[home].key = LATTE_CACHE_EMPTY as *const c_char;
                    compiler_fence(Ordering::SeqCst);
                }
                fill(&mut t.cache[home], id, ring);
                t.cache_used += 1;
                return;
            }
            i = cache_next(i);
        }
    });
    // A signal handler may have detached this state (`thread::detach`)
    // while the insert ran: a detached state's cache stays empty.
    // SAFETY: a field of the state `t` borrows; read afresh because a
    // handler on this thread may have written it.
    if unsafe { core::ptr::read_volatile(&t.attached) } == 0 {
        clear_cache(t);
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
        t.attached = 1;
        let key = |n: usize| (0x10_0000 + n * 24) as *const c_char;
        assert_eq!(cache_probe(&t, key(0), cache_index(key(0))), None);
        assert_eq!(cache_probe(&t, core::ptr::null(), 0), None, "NULL is never cached");
        // Keys sharing a home entry: the newest at home (rule C4), the
        // others on the following entries, each with its own ring.
        let home = cache_index(key(0));
        let same: Vec<usize> = (1..200_000).filter(|&n| cache_index(key(n)) == home).take(3).collect();
        let at = |t: &latte_thread, k: usize| t.cache[(home + k) % LATTE_CACHE_SIZE as usize].key;
        cache_insert(&mut t, key(0), slot(1));
        assert_eq!(at(&t, 0), key(0));
        for (k, &n) in same.iter().enumerate() {
            cache_insert(&mut t, key(n), slot(k + 2));
            assert_eq!(at(&t, 0), key(n), "the newest takes the home entry");
            assert_eq!(at(&t, k + 1), if k == 0 { key(0) } else { key(same[k - 1]) }, "the one it held moves to the first empty entry");
        }
        assert_eq!(cache_probe(&t, key(0), home), Some(slot(1)));
        assert_eq!(cache_entry(&t, key(same[2]), home), Some(slot(4)));
        for (k, &n) in same.iter().enumerate() {
            assert_eq!(cache_probe(&t, key(n), home), Some(slot(k + 2)));
        }
        assert_eq!(t.cache_used, 4);
        // A key cached already keeps its entry; its ring is replaced.
        cache_insert(&mut t, key(0), slot(9));
        assert_eq!((cache_probe(&t, key(0), home), t.cache_used), (Some(slot(9)), 4));
        // A key whose home is taken by a key of another home (a cluster
        // running past it) takes that entry too, and the key moved on stays
        // findable from its own home.
        let next = (1..200_000).find(|&n| cache_index(key(n)) == (home + 1) % LATTE_CACHE_SIZE as usize).unwrap();
        let held = at(&t, 1);
        cache_insert(&mut t, key(next), slot(5));
        assert_eq!(at(&t, 1), key(next));
        assert_eq!(cache_probe(&t, held, home), cache_probe(&t, held, cache_index(held)));
        assert!(cache_probe(&t, held, home).is_some());
        for (k, &n) in same.iter().enumerate() {
            assert_eq!(cache_probe(&t, key(n), home), Some(slot(k + 2)));
        }
        assert_eq!(cache_probe(&t, key(0), home), Some(slot(9)));
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

    #[test]
    fn emptying_writes_keys_only_and_a_detached_state_keeps_nothing() {
        // SAFETY: an all-zero latte_thread is valid (integers, null pointers).
        let mut t: Box<latte_thread> = unsafe { Box::new(core::mem::zeroed()) };
        t.attached = 1;
        let id = 0x20_0000 as *const c_char;
        let h = cache_index(id);
        cache_insert(&mut t, id, slot(3));
        clear_cache(&mut t);
        // Rule C1: the key goes, the ring stays (a reader never pairs a key with a cleared ring).
        assert_eq!((t.cache[h].key as usize, t.cache[h].ring, t.cache_used), (LATTE_CACHE_EMPTY, slot(3), 0));
        // An insert that ends on a detached state (a signal handler detached
        // it meanwhile) leaves the cache empty.
        t.attached = 0;
        cache_insert(&mut t, id, slot(4));
        assert_eq!(cache_probe(&t, id, h), None);
        assert_eq!(t.cache_used, 0);
    }
}
