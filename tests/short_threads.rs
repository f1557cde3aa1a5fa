//! 10,000 short-lived threads: memory stays bounded, slots of exited threads
//! are reused once exited threads hold half the region, before it grows, and what reuse discards
//! is counted.

mod common;
use common::*;
use latte::layout::*;

#[test]
fn ten_thousand_short_threads() {
    let threads = 10_000u64;
    let rss0 = rss_kib();
    for _ in 0..threads {
        std::thread::spawn(|| {
            for _ in 0..3 {
                span(c"short", LATTE_MODE_FAST, LATTE_MODE_FAST);
            }
        })
        .join()
        .unwrap();
    }
    let c = counters();
    let cap = LATTE_DEFAULT_PRIVATE_SLOTS as u64;
    assert_eq!(c.threads_seen, threads);
    assert_eq!(c.slots_used as u64, cap);
    assert_eq!(c.slot_reuses, threads - cap);
    assert_eq!(c.reuse_discarded, 3 * (threads - cap));
    assert_eq!(c.no_slot_drops, 0);
    // What was not discarded is still readable after the threads exited.
    assert_eq!(snapshot(c"short").len() as u64, 3 * cap);
    // Bounded memory: about one page per slot (16 MiB measured), plus pooled thread states.
    let grown = rss_kib().saturating_sub(rss0);
    eprintln!("RSS grew by {grown} KiB for {threads} threads");
    assert!(grown < 48 * 1024, "RSS grew by {grown} KiB");
}
