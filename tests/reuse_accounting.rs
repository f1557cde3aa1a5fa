//! A reader following a region whose rings keep changing owner (1,000
//! short-lived threads over a few rings) accounts for every sample exactly:
//! per slot, what it read, what each generation lost, and what earlier
//! owners wrote that it never saw (`lost_before`) add up to the slot's
//! `gen_base + write_idx`; and over the region that is what the threads
//! wrote. In a child process (a process installs one shared region).

mod common;
use common::*;
use latte::internals::region::latte_region_config;
use latte::layout::*;
use latte::reader::{latte_cursor, Mapping};
use std::sync::atomic::{AtomicBool, Ordering};

const THREADS: u64 = 1000;
const SPANS: u64 = 50;

#[test]
fn a_thousand_short_threads_over_a_few_rings_every_sample_accounted() {
    let name = format!("/latte-reuse-accounting-{}", std::process::id());
    in_child(|| {
        let cfg = latte_region_config { slot_capacity: 4, samples_per_slot: 64, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
        latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
        let done = AtomicBool::new(false);
        let ok = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut m = Mapping::open_shm(name.as_bytes()).unwrap();
                // Per slot: the cursor, and what its reads returned and lost
                // over every generation.
                let mut curs: Vec<(latte_cursor, u64, u64, u64)> = Vec::new();
                let mut out = Vec::new();
                let mut last = false;
                loop {
                    last |= done.load(Ordering::Acquire);
                    m.refresh().unwrap();
                    let v = m.view();
                    for sl in v.slots().unwrap() {
                        let i = sl.index as usize;
                        if curs.len() <= i {
                            curs.resize(i + 1, (latte_cursor::default(), 0, 0, 0));
                        }
                        let c = &mut curs[i];
                        out.clear();
                        let r = v.read_slot(sl.index, &mut c.0, &mut out, latte::ReadMode::Live).unwrap();
                        c.1 += r.read;
                        c.2 += r.lost;
                        c.3 += r.lost_before;
                        assert_eq!(c.0.lost_before, c.3, "the cursor keeps the same count");
                    }
                    if last {
                        break;
                    }
                }
                let v = m.view();
                let slots = v.slots().unwrap();
                let mut written = 0;
                let mut exact = true;
                for sl in &slots {
                    let c = curs[sl.index as usize];
                    exact &= c.1 + c.2 + c.3 == sl.gen_base + sl.write_idx;
                    written += sl.gen_base + sl.write_idx;
                }
                let lost_before: u64 = curs.iter().map(|c| c.3).sum();
                let c = counters();
                eprintln!("rings {} reuses {} written {written} lost before a new owner {lost_before} exact {exact}", slots.len(), c.slot_reuses);
                exact && written == THREADS * SPANS && c.slot_reuses > 0
            });
            for t in 0..THREADS {
                std::thread::spawn(move || {
                    let id = if t % 2 == 0 { c"reuse.even" } else { c"reuse.odd" };
                    for _ in 0..SPANS {
                        span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
                    }
                })
                .join()
                .unwrap();
            }
            done.store(true, Ordering::Release);
            reader.join().unwrap()
        });
        latte::shm::unlink(name.as_bytes()).unwrap();
        ok
    });
}
