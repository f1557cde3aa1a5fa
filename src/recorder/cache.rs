//! The hot state's ID cache: open-addressed by the ID pointer, at most half
//! full (the hash and sizes are constants of the generated header, which
//! `include/latte_inline.h` uses for the same probe).
//!
//! An ID found past its home entry takes it, now and then
//! (`cache_promote`). The inline Start's first look is at the home entry;
//! the probe further on (`latte__probe`) is a branch off the fast path,
//! mispredicted in random order: 7 to 11 cycles a span measured over 8
//! IDs whose homes other IDs had taken first. So a Start that finds its ID
//! further on swaps it with the home entry's (one such Start in
//! `PROMOTE_EVERY` on the thread, drawn at random): the IDs a thread uses
//! now are found by the first look, whichever came first. Two IDs in use
//! that share a home swap now and then.
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
//! - C4 A promotion swaps an entry's ID with its home entry's under the
//!   writing flag (C2), by C1's steps: the home key emptied, the home entry
//!   filled with the promoted ID (now at both entries, with one ring), its
//!   old entry's key emptied, that entry filled with the home's former ID.
//!   Every ID in the cache before is in it after, each on its probe order
//!   with no empty entry between its home and it. While a key is empty, a
//!   handler probing past it misses and takes the slow path (its insert is
//!   skipped, C2): a lookup never finds a wrong ring, at worst none.
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
    /// The thread's xorshift state for `cache_promote`'s draw (never 0);
    /// const-initialised, no destructor, as `WRITING`. A handler's draw
    /// between the interrupted one's load and store is lost: harmless.
    /// Every thread starts from the same seed: a thread's draws need only
    /// be spread over its own finds, not differ from another thread's.
    static PROMOTE_DRAW: Cell<u32> = const { Cell::new(0x9E37_79B9) };
}

/// One promotion per this many probe hits past the home entry on a
/// thread, on average, drawn at random. Two IDs in use that share a home
/// would otherwise swap at every Start: alternating, 60 cycles a span
/// without promotions, 70 with one at every Start, 65 with one in 64 (the
/// draw's thread-local costs the most of that; measured with `Latte.hpp`).
/// Drawn rather than counted: a count would pick the same Starts of a loop
/// that repeats every time, so that an ID could stay off its home for
/// good; drawn, each find past the home promotes with the same chance.
const PROMOTE_EVERY: u32 = 64;

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
/// fence) the key; a fence after it too, so that the next write of a
/// promotion (rule C4) stays after it.
fn fill(e: &mut latte_cache_entry, key: *const c_char, ring: u64) {
    e.ring = ring;
    compiler_fence(Ordering::SeqCst);
    e.key = key;
    compiler_fence(Ordering::SeqCst);
}

/// Empties an entry's key (rules C1, C4), fenced on both sides.
fn vacate(e: &mut latte_cache_entry) {
    compiler_fence(Ordering::SeqCst);
    e.key = LATTE_CACHE_EMPTY as *const c_char;
    compiler_fence(Ordering::SeqCst);
}

/// At about one call in `PROMOTE_EVERY` on the thread (drawn at random),
/// moves `id`, found at entry `at` of its probe order, to its home entry,
/// and the ID there to `at` (rule C4). Does nothing when entry `at` no
/// longer holds `id` (a signal handler changed the cache since it was
/// found), when `at` is its home, for a state that is not attached, or in
/// a signal handler that interrupted a write of the cache (C2).
#[cold]
#[inline(never)]
pub fn cache_promote(t: &mut latte_thread, id: *const c_char, at: usize) {
    let home = cache_index(id);
    if id.is_null() || at == home || at >= t.cache.len() || t.attached == 0 {
        return;
    }
    let due = PROMOTE_DRAW.try_with(|d| {
        let mut x = d.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        d.set(x);
        x % PROMOTE_EVERY == 0
    });
    if due == Ok(true) {
        promote_now(t, id, at, home);
    }
}

/// The promotion itself (rule C4): `id` from entry `at` to its `home`.
fn promote_now(t: &mut latte_thread, id: *const c_char, at: usize, home: usize) {
    writing(|| {
        if t.cache[at].key != id {
            return;
        }
        let (key, ring) = (t.cache[home].key, t.cache[home].ring);
        let moved = t.cache[at].ring;
        vacate(&mut t.cache[home]);
        fill(&mut t.cache[home], id, moved);
        vacate(&mut t.cache[at]);
        fill(&mut t.cache[at], key, ring);
    });
    // As in `cache_insert`: a handler may have detached the state meanwhile.
    // SAFETY: a field of the state `t` borrows; read afresh because a
    // handler on this thread may have written it.
    if unsafe { core::ptr::read_volatile(&t.attached) } == 0 {
        clear_cache(t);
    }
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

/// The cached tagged ring of `id` and its entry, probing from `i` (its
/// home entry); None at the first empty entry, or when a signal handler
/// changed the entry while it was read (rule C3). The cache is never full,
/// so the probe ends. NULL is never cached.
#[inline(always)]
pub fn cache_probe(t: &latte_thread, id: *const c_char, mut i: usize) -> Option<(u64, usize)> {
    if id.is_null() {
        return None;
    }
    loop {
        let e = &t.cache[i];
        if e.key == id {
            return cache_entry(t, id, i).map(|r| (r, i));
        }
        if e.key as usize == LATTE_CACHE_EMPTY {
            return None;
        }
        i = cache_next(i);
    }
}

/// Adds `id` -> `ring` (tagged) to the cache at the first empty entry of
/// its probe order, emptying the cache first when it is half full. Skipped
/// in a signal handler that interrupted a write of the cache (rule C2).
pub(super) fn cache_insert(t: &mut latte_thread, id: *const c_char, ring: u64) {
    if id.is_null() {
        return;
    }
    writing(|| {
        if t.cache_used >= LATTE_CACHE_MAX_USED as u64 {
            clear_cache(t);
        }
        let mut i = cache_index(id);
        loop {
            let e = &mut t.cache[i];
            if e.key == id {
                // One aligned word: a reader sees the old ring or the new.
                e.ring = ring;
                return;
            }
            if e.key as usize == LATTE_CACHE_EMPTY {
                // Rule C1: the ring, then the key.
                e.ring = ring;
                compiler_fence(Ordering::SeqCst);
                e.key = id;
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

    /// The cached ring of `id`, probed from its home entry.
    fn ring_of(t: &latte_thread, id: *const c_char) -> Option<u64> {
        cache_probe(t, id, cache_index(id)).map(|(r, _)| r)
    }

    #[test]
    fn a_promoted_id_takes_its_home_and_every_id_stays_found() {
        // SAFETY: an all-zero latte_thread is valid (integers, null pointers).
        let mut t: Box<latte_thread> = unsafe { Box::new(core::mem::zeroed()) };
        t.attached = 1;
        let key = |n: usize| (0x30_0000 + n * 24) as *const c_char;
        let home = cache_index(key(0));
        let same: Vec<usize> = (1..200_000).filter(|&n| cache_index(key(n)) == home).take(2).collect();
        // A key of the next home, behind the cluster: its probe runs
        // through entries the promotion rewrites.
        let next = (1..200_000).find(|&n| cache_index(key(n)) == (home + 1) % LATTE_CACHE_SIZE as usize).unwrap();
        let ids = [key(0), key(same[0]), key(same[1]), key(next)];
        for (k, &id) in ids.iter().enumerate() {
            cache_insert(&mut t, id, slot(k + 1));
        }
        let at = |t: &latte_thread, id| cache_probe(t, id, cache_index(id)).map(|(_, i)| i);
        let last = at(&t, key(same[1])).unwrap();
        assert_eq!(last, (home + 2) % LATTE_CACHE_SIZE as usize);
        promote_now(&mut t, key(same[1]), last, home);
        assert_eq!(at(&t, key(same[1])), Some(home));
        assert_eq!(at(&t, key(0)), Some(last), "the home entry's ID took the promoted one's entry");
        for (k, &id) in ids.iter().enumerate() {
            assert_eq!(ring_of(&t, id), Some(slot(k + 1)));
        }
        assert_eq!(t.cache_used, 4);
        // Nothing to do at home, nor for an entry that no longer holds the ID.
        for _ in 0..PROMOTE_EVERY {
            cache_promote(&mut t, key(same[1]), home);
            cache_promote(&mut t, key(same[0]), last);
            cache_promote(&mut t, key(same[0]), usize::MAX);
        }
        assert_eq!((at(&t, key(same[1])), at(&t, key(0))), (Some(home), Some(last)));
        for (k, &id) in ids.iter().enumerate() {
            assert_eq!(ring_of(&t, id), Some(slot(k + 1)));
        }
        // About one call in PROMOTE_EVERY promotes: two IDs sharing a home,
        // each promoted from the other's entry in turn, swap that often.
        let calls = 64 * PROMOTE_EVERY;
        let mut swaps = 0;
        for _ in 0..calls {
            let (id, from) = if at(&t, key(0)) == Some(home) { (key(same[1]), last) } else { (key(0), last) };
            cache_promote(&mut t, id, from);
            if at(&t, id) == Some(home) {
                swaps += 1;
            }
        }
        assert!((32..=128).contains(&swaps), "{swaps} promotions in {calls} calls");
        for (k, &id) in ids.iter().enumerate() {
            assert_eq!(ring_of(&t, id), Some(slot(k + 1)));
        }
        if at(&t, key(0)) == Some(home) {
            promote_now(&mut t, key(same[1]), last, home);
        }
        assert_eq!((at(&t, key(same[1])), at(&t, key(0))), (Some(home), Some(last)));
        // A detached state is left alone.
        t.attached = 0;
        for _ in 0..64 * PROMOTE_EVERY {
            cache_promote(&mut t, key(0), last);
        }
        assert_eq!(at(&t, key(0)), Some(last));
    }

    #[test]
    fn id_cache_probes_on_and_empties_itself_when_half_full() {
        // SAFETY: an all-zero latte_thread is valid (integers, null pointers).
        let mut t: Box<latte_thread> = unsafe { Box::new(core::mem::zeroed()) };
        t.attached = 1;
        let key = |n: usize| (0x10_0000 + n * 24) as *const c_char;
        assert_eq!(ring_of(&t, key(0)), None);
        assert_eq!(cache_probe(&t, core::ptr::null(), 0).map(|p| p.0), None, "NULL is never cached");
        // Keys sharing a home entry go to the following entries.
        let home = cache_index(key(0));
        let same: Vec<usize> = (1..200_000).filter(|&n| cache_index(key(n)) == home).take(3).collect();
        cache_insert(&mut t, key(0), slot(1));
        for (k, &n) in same.iter().enumerate() {
            cache_insert(&mut t, key(n), slot(k + 2));
        }
        assert_eq!(ring_of(&t, key(0)), Some(slot(1)));
        for (k, &n) in same.iter().enumerate() {
            assert_eq!(ring_of(&t, key(n)), Some(slot(k + 2)));
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
        assert_eq!(ring_of(&t, key(n)), Some(slot(8)));
        assert_eq!(ring_of(&t, key(0)), None);
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
        assert_eq!(ring_of(&t, id), None);
        assert_eq!(t.cache_used, 0);
    }
}
