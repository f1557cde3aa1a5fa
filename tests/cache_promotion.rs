//! The Rust hot path's ID cache promotion (src/recorder/cache.rs, rule C4):
//! an ID that others had pushed off its home entry takes it back within
//! 64 Starts that find it further on, the IDs moved stay cached, and every
//! span lands under its own ID.

mod common;
use common::*;
use latte::layout::*;
use std::ffi::CStr;

/// Three names whose pointers share a home entry of the thread's cache.
fn names_sharing_a_home() -> [&'static CStr; 3] {
    let pool: &'static mut [u8] = Box::leak(vec![0u8; 1 << 20].into_boxed_slice());
    let base = pool.as_ptr() as usize;
    let home = cache_index(pool.as_ptr().cast());
    let at: Vec<usize> = (0..pool.len() - 32).step_by(32).filter(|&o| cache_index((base + o) as *const _) == home).take(3).collect();
    assert_eq!(at.len(), 3);
    for (k, &o) in at.iter().enumerate() {
        let name = format!("promotion.{k}\0");
        pool[o..o + name.len()].copy_from_slice(name.as_bytes());
    }
    let pool: &'static [u8] = pool;
    [at[0], at[1], at[2]].map(|o| CStr::from_bytes_until_nul(&pool[o..]).unwrap())
}

#[test]
fn an_id_pushed_off_its_home_takes_it_back() {
    std::thread::spawn(|| {
        let [old_a, old_b, hot] = names_sharing_a_home();
        let home = cache_index(hot.as_ptr());
        span(old_a, LATTE_MODE_FAST, LATTE_MODE_FAST);
        span(old_b, LATTE_MODE_FAST, LATTE_MODE_FAST);
        span(hot, LATTE_MODE_FAST, LATTE_MODE_FAST);
        let me = latte::internals::recorder::current();
        // SAFETY: this thread's state, read between its own calls.
        let key = |k: usize| unsafe { (*me).cache[(home + k) % LATTE_CACHE_SIZE as usize].key };
        assert_eq!([key(0), key(1), key(2)], [old_a.as_ptr(), old_b.as_ptr(), hot.as_ptr()], "first come, first at home");
        let mut starts = 1;
        while key(0) != hot.as_ptr() {
            assert!(starts <= 64, "promoted within 64 Starts that found it past its home");
            span(hot, LATTE_MODE_FAST, LATTE_MODE_FAST);
            starts += 1;
        }
        assert_eq!([key(1), key(2)], [old_b.as_ptr(), old_a.as_ptr()], "the home's ID took the promoted one's entry");
        span(old_a, LATTE_MODE_FAST, LATTE_MODE_FAST);
        span(old_b, LATTE_MODE_FAST, LATTE_MODE_FAST);
        assert_eq!((snapshot(hot).len(), snapshot(old_a).len(), snapshot(old_b).len()), (starts, 2, 2));
        assert_eq!(thread_counters().dropped, 0);
    })
    .join()
    .unwrap();
}
