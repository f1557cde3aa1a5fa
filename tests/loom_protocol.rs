//! The ring protocol (`src/ring.rs`) model checked with loom: the library's
//! own step functions (`writer_index`, `writer_index_own`, `publish`, `assign`, `generation`,
//! `published`, `reassigned`, `copy_checked`, `unchanged`, `committed`,
//! `early_lap`: W1-W3, G1 and G3, A1-A4, R1, R3-R7) run here on loom's atomics, on an in-memory ring of capacity 2. Under
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

/// The writer: W1 (`writer_index`, or `writer_index_own` with the
/// writer's own copy of the index, as the recorder's Stop does), then
/// `ring::publish` (W2-W3).
fn write(r: &Ring, own: Option<&mut u64>, value: u64) {
    let idx = match &own {
        Some(o) => ring::writer_index_own(&r.write_idx, o),
        None => ring::writer_index(&r.write_idx),
    }; // W1
    let w = &r.words[(idx % CAP) as usize];
    let next = ring::publish(&r.write_idx, &w[0], &w[1], idx, value, encode(value));
    if let Some(o) = own {
        *o = next;
    }
}

/// One read of a live slot (margin 1) from index `next`, chunks of one
/// sample: R3, then `ring::copy_checked` (R5-R6). The library copies with
/// `copy_shared` (rep movsb, then lfence); here each word is copied with a
/// relaxed load, which promises no more than that copy gives: some value a
/// store wrote, every load done before the index is loaded.
/// Returns (index, word0, word1) of every accepted sample, the lost count
/// and w1.
fn read(r: &Ring, next: u64) -> (Vec<(u64, u64, u64)>, u64, u64) {
    let w1 = ring::published(&r.write_idx); // R3
    if w1 < next {
        return (Vec::new(), 0, w1); // R4's case: the callers that reassign check it
    }
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
            // Two writes as a pulse makes them, then one as a Stop does
            // (its own copy of the index, 2, agrees with the ring's).
            write(&r2, None, 0);
            write(&r2, None, 1);
            write(&r2, Some(&mut 2), 2);
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
            let g1 = ring::generation(&*generation); // R1
            if g1 == 1 {
                let w1 = ring::published(&*write_idx); // R3
                if w1 < 5 {
                    assert!(ring::reassigned(&*generation, g1), "a reset index with an unchanged generation: read as corrupt");
                }
            }
        });
        reader.join().unwrap();
        registry.join().unwrap();
    });
}

/// A slot reassigned while a reader copies it: the new owner resets the
/// index (A1-A4) and writes both ring positions again (W1-W3). A reader
/// that began under the old generation (R1, R3) and copied (R5-R6) keeps
/// its copy only when R7 finds the generation unchanged, and then every
/// sample it kept must be the old owner's.
#[test]
fn a_copy_of_a_reassigned_slot_is_discarded() {
    const OLD: u64 = 1_000;
    const NEW: u64 = 2_000;
    loom::model(|| {
        let w = |v: u64| W64(AtomicU64::new(v));
        // The old owner wrote indices 0 and 1; write_idx is 2.
        let ring = Arc::new(Ring { write_idx: w(2), words: [[w(OLD), w(encode(OLD))], [w(OLD + 1), w(encode(OLD + 1))]] });
        let generation = Arc::new(W32(AtomicU32::new(1)));
        let (r2, g2) = (ring.clone(), generation.clone());
        let new_owner = thread::spawn(move || {
            ring::assign(&*g2, 2, || r2.write_idx.store(0, Ordering::Relaxed));
            let mut own = 0; // a new owner's copy starts where the reset left the index
            for v in [NEW, NEW + 1] {
                write(&r2, Some(&mut own), v);
            }
        });
        thread::yield_now();
        let g1 = ring::generation(&*generation); // R1
        if g1 == 1 {
            let (kept, _, w1) = read(&ring, 1); // R3, R5-R6, from the cursor's next = 1
            if w1 < 1 {
                assert!(ring::reassigned(&*generation, g1), "R4: a reset index under an unchanged generation");
            } else if ring::unchanged(&*generation, g1) {
                // R7 kept the copy: nothing of the new owner's is in it.
                for (j, a, _) in &kept {
                    assert!(*a == OLD + *j, "a sample of the new owner kept under the old generation at index {j}: {a}");
                }
            }
        }
        new_owner.join().unwrap();
    });
}

/// A ring that cannot grow laps early (G1-G3): its writer finds index 2 at
/// the committed end (`ring::committed`), starts the ring over as a new
/// generation (`ring::early_lap`, A1-A4 by the owner itself) and writes
/// index 0 again. A reader that began under the first generation keeps its
/// copy only when R7 finds the generation unchanged, and then every sample
/// it kept is the first generation's; a reader that sees the new
/// generation finds the first one's samples counted in `gen_base`.
#[test]
fn an_early_lap_is_read_as_a_new_generation() {
    const FIRST: u64 = 1_000;
    const LAP: u64 = 2_000;
    loom::model(|| {
        let w = |v: u64| W64(AtomicU64::new(v));
        // Indices 0 and 1 written in the first generation; the committed
        // end is index 2.
        let ring = Arc::new(Ring { write_idx: w(2), words: [[w(FIRST), w(encode(FIRST))], [w(FIRST + 1), w(encode(FIRST + 1))]] });
        let (generation, gen_base, limit) = (Arc::new(W32(AtomicU32::new(1))), Arc::new(w(0)), w(2));
        let (r2, g2, b2) = (ring.clone(), generation.clone(), gen_base.clone());
        let writer = thread::spawn(move || {
            let mut own = 2;
            let idx = ring::writer_index_own(&r2.write_idx, &own); // W1
            assert!(!ring::committed(&limit, idx), "index 2 lies at the committed end");
            ring::early_lap(&*g2, &*b2, &r2.write_idx, idx); // G3
            own = 0;
            write(&r2, Some(&mut own), LAP);
        });
        thread::yield_now();
        let g1 = ring::generation(&*generation); // R1
        if g1 == 1 {
            let (kept, _, w1) = read(&ring, 0);
            if w1 < 2 {
                assert!(ring::reassigned(&*generation, g1), "R4: an early lap's reset index under an unchanged generation");
            } else if ring::unchanged(&*generation, g1) {
                for (j, a, _) in &kept {
                    assert!(*a == FIRST + *j, "a sample of the new lap kept under the first generation at index {j}: {a}");
                }
            }
        } else if g1 == 2 {
            // R1 for a new generation: its base counts the first one's two.
            assert_eq!(gen_base.load(Ordering::Relaxed), 2, "gen_base after an early lap");
        }
        writer.join().unwrap();
    });
}
