//! The ring protocol (src/recorder.rs writer, src/reader.rs reader) model
//! checked with loom on an in-memory ring of capacity 2: under every
//! interleaving and every value the memory model allows a load to return,
//! the reader never accepts a torn or stale sample, and read + lost never
//! exceeds what was written.

use loom::sync::atomic::{fence, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const CAP: u64 = 2;

struct Ring {
    write_idx: AtomicU64,
    words: [[AtomicU64; 2]; CAP as usize],
}

fn encode(i: u64) -> u64 {
    i * 1000 + 7
}

/// The writer's steps, as in recorder::write_sample.
fn write(r: &Ring, value: u64) {
    let idx = r.write_idx.load(Ordering::Relaxed);
    let w = &r.words[(idx % CAP) as usize];
    w[0].store(value, Ordering::Release);
    w[1].store(encode(value), Ordering::Release);
    r.write_idx.store(idx + 1, Ordering::Release);
}

/// One pass of the reader, as in View::read_protocol (live slot: margin 1),
/// with chunks of one sample: after each, an acquire fence and a load of
/// write_idx decide whether it was safe while copied.
/// Returns (index, word0, word1) of every accepted sample and the lost count.
fn read(r: &Ring, next: u64) -> (Vec<(u64, u64, u64)>, u64, u64) {
    let w1 = r.write_idx.load(Ordering::Acquire);
    let oldest_safe = |w: u64| (w + 1).saturating_sub(CAP);
    let lo = next.max(oldest_safe(w1));
    let mut copy = Vec::new();
    let mut first_kept = lo;
    for j in lo..w1 {
        let w = &r.words[(j % CAP) as usize];
        copy.push((j, w[0].load(Ordering::Relaxed), w[1].load(Ordering::Relaxed)));
        fence(Ordering::Acquire);
        let front = oldest_safe(r.write_idx.load(Ordering::Relaxed));
        if front > j {
            first_kept = front.min(j + 1);
        }
    }
    let kept: Vec<_> = copy.into_iter().filter(|(j, _, _)| *j >= first_kept).collect();
    (kept, first_kept - next, w1)
}

#[test]
fn reader_never_accepts_torn_or_stale_samples() {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    loom::model(|| {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ring = Arc::new(Ring {
            write_idx: AtomicU64::new(0),
            words: [[AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)], [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)]],
        });
        let r2 = ring.clone();
        let writer = thread::spawn(move || {
            for v in 0..3 {
                write(&r2, v);
            }
        });
        // Without a yield here loom runs the reader to completion first and
        // explores a single execution; with it, every interleaving.
        thread::yield_now();
        let (kept, lost, next) = read(&ring, 0);
        for (j, a, b) in &kept {
            assert_eq!(*a, *j, "stale sample accepted at index {j}");
            assert_eq!(*b, encode(*j), "torn sample accepted at index {j}");
        }
        assert_eq!(kept.len() as u64 + lost, next);
        writer.join().unwrap();
    });
    let runs = RUNS.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("loom explored {runs} executions");
    assert!(runs > 100, "loom explored only {runs} executions");
}

/// A slot handed to a new owner (as recorder's allocate_slot does it:
/// generation 0, release fence, write_idx 0, then the new generation with
/// release) while a reader whose cursor is past the new index looks at it
/// (as View::read_protocol does): when the reader sees an index below its
/// cursor, its second load of the generation must show the change, so it
/// never takes a healthy slot for a corrupt one.
#[test]
fn reassignment_is_never_read_as_corruption() {
    use loom::sync::atomic::AtomicU32;
    loom::model(|| {
        let generation = Arc::new(AtomicU32::new(1));
        let write_idx = Arc::new(AtomicU64::new(5));
        let (g2, w2) = (generation.clone(), write_idx.clone());
        let registry = thread::spawn(move || {
            g2.store(0, Ordering::Relaxed);
            fence(Ordering::Release);
            w2.store(0, Ordering::Relaxed);
            g2.store(2, Ordering::Release);
        });
        let reader = thread::spawn(move || {
            // The reader's cursor: generation 1, next index 5.
            let g1 = generation.load(Ordering::Acquire);
            if g1 == 1 {
                let w1 = write_idx.load(Ordering::Acquire);
                if w1 < 5 {
                    let again = generation.load(Ordering::Acquire);
                    assert_ne!(again, g1, "a reset index with an unchanged generation: read as corrupt");
                }
            }
        });
        reader.join().unwrap();
        registry.join().unwrap();
    });
}
