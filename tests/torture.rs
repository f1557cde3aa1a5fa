//! Torture: producer threads write at full speed, through the real ring
//! writer, values that encode their own write index, while a reader
//! *process* reads the shared region continuously. Every sample the reader
//! returns must be the one written at that index (never torn, never stale),
//! and for every slot read + lost == written. Odd slots are read with
//! pacing (`latte_reader_read`'s, with a longer interval so that reads are
//! deferred even on a slow machine; a deferred read must lose nothing
//! unaccounted either), even ones without.
//!
//! `LATTE_TORTURE_SECS` sets the producers' run time (default 2 s; longer
//! runs are a benchmark option).

use latte::internals::recorder;
use latte::layout::*;
use latte::reader::{latte_cursor, latte_raw_sample, Mapping};
use std::io::BufRead;
use std::mem::MaybeUninit;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn encode(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5_5A5A_0F0F_F0F0
}

const THREADS: usize = 3;

/// The reader process: reads until every slot is closed and drained, then
/// prints one line per slot: `slot read lost corrupt write_idx deferred`.
fn reader_process(name: &str) {
    let t0 = Instant::now();
    let m = loop {
        match Mapping::open_shm(name.as_bytes()) {
            Ok(m) => break m,
            Err(_) if t0.elapsed() < Duration::from_secs(10) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("open {name}: {e}"),
        }
    };
    let v = m.view();
    let mut curs = vec![latte_cursor::default(); v.slot_capacity() as usize];
    let mut corrupt = vec![0u64; curs.len()];
    let mut deferred = vec![0u64; curs.len()];
    let mut buf = vec![MaybeUninit::<latte_raw_sample>::uninit(); v.geo().samples_per_slot as usize];
    loop {
        let slots = v.slots().unwrap();
        let mut all_done = slots.len() >= THREADS;
        for s in &slots {
            let c = &mut curs[s.index as usize];
            let pace = if s.index % 2 == 1 { 100_000 } else { 0 };
            let r = v.read_into(s.index, c, &mut buf, latte::ReadMode::Paced { min_interval_ns: pace }).unwrap();
            deferred[s.index as usize] += r.deferred as u64;
            // SAFETY: read_into initialised the first r.read elements.
            let got = unsafe { core::slice::from_raw_parts(buf.as_ptr() as *const latte_raw_sample, r.read as usize) };
            let first = c.next - r.read;
            for (k, x) in got.iter().enumerate() {
                let j = first + k as u64;
                if x.start_tsc != j || x.packed != encode(j) {
                    corrupt[s.index as usize] += 1;
                }
            }
            let info = v.slot_info(s.index).unwrap();
            if info.state != LATTE_SLOT_CLOSED || c.next != info.write_idx {
                all_done = false;
            }
        }
        if all_done {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "reader never caught up");
    }
    for s in v.slots().unwrap() {
        let c = &curs[s.index as usize];
        let i = s.index as usize;
        println!("\nTORTURE {} {} {} {} {} {}", s.index, c.read, c.lost, corrupt[i], s.write_idx, deferred[i]);
    }
}

#[test]
fn torture_reader_process() {
    if let Ok(name) = std::env::var("LATTE_TORTURE_READER") {
        reader_process(&name);
        return;
    }
    let secs: f64 = std::env::var("LATTE_TORTURE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let name = format!("/latte-torture-{}", std::process::id());
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 8, samples_per_slot: 4096, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
    recorder::install_shared(name.as_bytes(), &cfg).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "torture_reader_process", "--nocapture", "--test-threads=1"])
        .env("LATTE_TORTURE_READER", &name)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let go = AtomicBool::new(true);
    let written: Vec<u64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    let t = recorder::current();
                    // SAFETY: the calling thread's own state.
                    let t = unsafe { &mut *t };
                    // SAFETY: a static NUL-terminated ID.
                    let slot = latte::layout::ring_ptr(unsafe { recorder::resolve(t, c"torture".as_ptr()) });
                    assert!(!slot.is_null());
                    let mut i = 0u64;
                    let deadline = Instant::now() + Duration::from_secs_f64(secs);
                    while go.load(Ordering::Relaxed) {
                        for _ in 0..1024 {
                            // SAFETY: this thread's own slot and its region's mask.
                            unsafe { recorder::write_sample(slot, t.sample_mask, i, encode(i)) };
                            i += 1;
                        }
                        if Instant::now() > deadline {
                            break;
                        }
                    }
                    i
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    go.store(false, Ordering::Relaxed);
    let out = child.stdout.take().unwrap();
    let lines: Vec<String> =
        std::io::BufReader::new(out).lines().map(|l| l.unwrap()).filter_map(|l| l.split_once("TORTURE ").map(|x| x.1.to_string())).collect();
    assert!(child.wait().unwrap().success());
    latte::shm::unlink(name.as_bytes()).unwrap();
    assert_eq!(lines.len(), THREADS, "{lines:?}");
    let mut total_written: Vec<u64> = Vec::new();
    for l in &lines {
        let f: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
        let (read, lost, corrupt, widx, deferred) = (f[1], f[2], f[3], f[4], f[5]);
        eprintln!("slot {}: written {widx}, read {read}, lost {lost}, corrupt {corrupt}, deferred reads {deferred}", f[0]);
        assert_eq!(corrupt, 0, "torn or stale samples returned");
        assert_eq!(deferred > 0, f[0] % 2 == 1, "only the paced slots defer, and they do");
        assert_eq!(read + lost, widx, "read + lost != written");
        assert!(read > 0);
        total_written.push(widx);
    }
    total_written.sort();
    let mut w = written.clone();
    w.sort();
    assert_eq!(total_written, w);
}
