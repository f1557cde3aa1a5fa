//! A ring handed to a new thread while a reader reads it: the reader sees
//! a restart (or nothing, while the slot changes hands), never corruption,
//! and every sample it returns belongs to the slot's current owner. Short
//! threads come and go over a region with few slots, so slots are reused
//! continuously, while a reader thread polls every slot through its own
//! read-only mapping (as another process would).

use latte::internals::ffi::{latte_start, latte_stop};
use latte::layout::*;
use latte::reader::{latte_cursor, latte_raw_sample, Mapping};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn reused_slots_never_read_as_corrupt() {
    let name = format!("/latte-test-reuse-{}", std::process::id());
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 4, samples_per_slot: 256, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
    let m = Mapping::open_shm(name.as_bytes()).unwrap();
    latte::shm::unlink(name.as_bytes()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let m = m;
            let v = m.view();
            let mut curs = vec![latte_cursor::default(); v.slot_capacity() as usize];
            let mut buf = vec![MaybeUninit::<latte_raw_sample>::uninit(); v.geo().samples_per_slot as usize];
            let (mut reads, mut restarts, mut corrupt, mut other) = (0u64, 0u64, 0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                for i in 0..v.slot_capacity() as u32 {
                    match v.read_into(i, &mut curs[i as usize], &mut buf, latte::ReadMode::Live) {
                        Ok(r) => {
                            reads += 1;
                            restarts += r.restarted as u64;
                        }
                        Err(latte::Error::Corrupt) => corrupt += 1,
                        Err(_) => other += 1,
                    }
                }
            }
            (reads, restarts, corrupt, other)
        })
    };
    let t0 = Instant::now();
    let mut threads = 0u64;
    while t0.elapsed() < Duration::from_secs(3) {
        let hs: Vec<_> = (0..4)
            .map(|k| {
                std::thread::spawn(move || {
                    let id = [c"reuse.a", c"reuse.b"][k % 2];
                    for _ in 0..300 {
                        latte_start(id.as_ptr(), LATTE_MODE_FAST);
                        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        threads += 4;
    }
    stop.store(true, Ordering::Relaxed);
    let (reads, restarts, corrupt, other) = reader.join().unwrap();
    let c = latte::counters::counters_of(latte::internals::recorder::region_if_any().unwrap().header());
    eprintln!("threads {threads}, slot reuses {}, reads {reads}, restarts {restarts}, corrupt {corrupt}, other errors {other}", c.slot_reuses);
    assert!(c.slot_reuses > 0, "no slot was reused: the test saw nothing");
    assert_eq!(corrupt, 0, "a healthy region read as corrupt");
    assert_eq!(other, 0);
}
