//! The ring protocol (`src/ring.rs`) model checked with loom: the library's
//! own step functions (`publish`, `copy_checked`, `assign`, `reassigned`)
//! run here on loom's atomics, on an in-memory ring of capacity 2. Under
//! every interleaving and every value the memory model allows a load to
//! return, the reader never accepts a torn or stale sample, read + lost
//! equals what it looked at, and a reassigned slot is never taken for a
//! corrupt one.

use latte::internals::ring::{self, Atomic};
use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// loom's words, as the protocol's `Atomic`.
struct W64(AtomicU64);
struct W32(AtomicU32);

impl Atomic for W64 {
    type V = u64;
    fn load(&self, o: Ordering) -> u64 {
        self.0.load(o)
    }
    fn store(&self, v: u64, o: Ordering) {
        self.0.store(v, o)
    }
    fn fence(o: Ordering) {
        fence(o)
    }
}

impl Atomic for W32 {
    type V = u32;
    fn load(&self, o: Ordering) -> u32 {
        self.0.load(o)
    }
    fn store(&self, v: u32, o: Ordering) {
        self.0.store(v, o)
    }
    fn fence(o: Ordering) {
        fence(o)
    }
}

const CAP: u64 = 2;

struct Ring {
    write_idx: W64,
    words: [[W64; 2]; CAP as usize],
}

fn encode(i: u64) -> u64 {
    i * 1000 + 7
}

/// The writer: W1, then `ring::publish` (W2-W3).
fn write(r: &Ring, value: u64) {
    let idx = r.write_idx.load(Ordering::Relaxed); // W1
    let w = &r.words[(idx % CAP) as usize];
    ring::publish(&r.write_idx, &w[0], &w[1], idx, value, encode(value));
}

/// One read of a live slot (margin 1) from index `next`, chunks of one
/// sample: R3, then `ring::copy_checked` (R5-R6). The library copies with
/// `copy_shared` (rep movsb, then lfence); here each word is copied with a
/// relaxed load, which promises no more than that copy gives: some value a
/// store wrote, every load done before the index is loaded.
/// Returns (index, word0, word1) of every accepted sample, the lost count
/// and w1.
fn read(r: &Ring, next: u64) -> (Vec<(u64, u64, u64)>, u64, u64) {
    let w1 = r.write_idx.load(Ordering::Acquire); // R3
    let lo = next.max(ring::oldest_safe(w1, 1, CAP));
    let out = std::cell::RefCell::new(vec![(0u64, 0u64, 0u64); (w1 - lo) as usize]);
    let first = ring::copy_checked::<W64, ()>(
        lo,
        w1,
        CAP,
        1,
        1,
        |j, n, k| {
            for i in 0..n {
                let w = &r.words[((j + i) % CAP) as usize];
                out.borrow_mut()[k + i as usize] = (j + i, w[0].load(Ordering::Relaxed), w[1].load(Ordering::Relaxed));
            }
        },
        |from, n| out.borrow_mut().copy_within(from..from + n, 0),
        || Ok(r.write_idx.load(Ordering::Relaxed)),
    )
    .unwrap();
    let mut out = out.into_inner();
    out.truncate((w1 - first) as usize);
    (out, first - next, w1)
}

#[test]
fn reader_never_accepts_torn_or_stale_samples() {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    loom::model(|| {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let w = || W64(AtomicU64::new(u64::MAX));
        let ring = Arc::new(Ring { write_idx: W64(AtomicU64::new(0)), words: [[w(), w()], [w(), w()]] });
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

/// A slot handed to a new owner (`ring::assign`, A1-A4) while a reader
/// whose cursor is past the new index looks at it (R1, R3, then
/// `ring::reassigned`, R4): when the reader sees an index below its
/// cursor, R4 must see the change, so it never takes a healthy slot for a
/// corrupt one.
#[test]
fn reassignment_is_never_read_as_corruption() {
    loom::model(|| {
        let generation = Arc::new(W32(AtomicU32::new(1)));
        let write_idx = Arc::new(W64(AtomicU64::new(5)));
        let (g2, w2) = (generation.clone(), write_idx.clone());
        let registry = thread::spawn(move || {
            ring::assign(&*g2, 2, || w2.store(0, Ordering::Relaxed));
        });
        let reader = thread::spawn(move || {
            // The reader's cursor: generation 1, next index 5.
            let g1 = generation.load(Ordering::Acquire); // R1
            if g1 == 1 {
                let w1 = write_idx.load(Ordering::Acquire); // R3
                if w1 < 5 {
                    assert!(ring::reassigned(&*generation, g1), "a reset index with an unchanged generation: read as corrupt");
                }
            }
        });
        reader.join().unwrap();
        registry.join().unwrap();
    });
}
