//! IDs in heap buffers, each thread's own, freed when the thread ends: the
//! memory of one name is soon another thread's buffer for another name.
//! A thread's first use of a pointer is checked against the pointer's text
//! (`Interner::intern_ptr`), so every name's spans are filed under it, in
//! every round.

mod common;
use common::*;
use latte::layout::*;
use std::ffi::CString;

/// Three threads, one heap name each (`r{round}.{k}`), 100 × (k + 1) spans.
fn record(round: usize) {
    std::thread::scope(|s| {
        for k in 0..3 {
            s.spawn(move || {
                let c = CString::new(format!("r{round}.{k}")).unwrap();
                for _ in 0..(100 * (k + 1)) {
                    span(&c, LATTE_MODE_FAST, LATTE_MODE_FAST);
                }
            });
        }
    });
}

#[test]
fn heap_names_reused_across_threads_are_filed_by_their_text() {
    let mut checked = 0;
    for round in 0..200 {
        let before = counters();
        std::thread::scope(|s| {
            s.spawn(|| record(round));
            s.spawn(|| record(round));
        });
        let after = counters();
        // A round that reused exited threads' rings may have discarded
        // older rounds' samples: only rounds without reuse are counted.
        if after.slot_reuses != before.slot_reuses {
            continue;
        }
        for k in 0..3 {
            let n = snapshot(&CString::new(format!("r{round}.{k}")).unwrap()).len();
            assert_eq!(n, 2 * 100 * (k + 1), "round {round}, name {k}");
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} rounds without reuse");
    eprintln!("heap ids: {checked} rounds checked");
}
