//! A region that grows while the program runs: many threads times many
//! IDs lose no span; a reader that follows the region while it grows
//! accounts for every sample (read + lost == written, per slot); a
//! producer whose address space runs out keeps recording in what it has,
//! counts what it cannot record and says so once. Each case in a child
//! process of its own (a process installs one shared region).

mod common;
use common::*;
use latte::internals::region::latte_region_config;
use latte::layout::*;
use latte::reader::{latte_cursor, Mapping};
use std::ffi::CString;

fn region_name(what: &str) -> String {
    format!("/latte-growth-{what}-{}", std::process::id())
}

#[test]
fn sixty_four_threads_times_500_ids_drop_nothing() {
    let name = region_name("wide");
    in_child(|| {
        latte::internals::recorder::install_shared(name.as_bytes(), &small_rings(16)).unwrap();
        let ids: Vec<CString> = (0..500).map(|k| CString::new(format!("wide.{k}")).unwrap()).collect();
        // All 64 threads live at once: 32,000 rings in use together.
        let recorded = std::sync::Barrier::new(65);
        let read = std::sync::Barrier::new(65);
        let (slots, c) = std::thread::scope(|s| {
            for _ in 0..64 {
                s.spawn(|| {
                    for _ in 0..3 {
                        for id in &ids {
                            span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
                        }
                    }
                    recorded.wait();
                    read.wait();
                });
            }
            recorded.wait();
            let c = counters();
            let m = Mapping::open_shm(name.as_bytes()).unwrap();
            let slots = m.view().slots().unwrap();
            read.wait();
            (slots, c)
        });
        let all_three = slots.iter().all(|s| s.write_idx == 3 && s.state == LATTE_SLOT_LIVE);
        eprintln!("slots {} used {} drops {} {} all three {all_three}", slots.len(), c.slots_used, c.no_slot_drops, c.unfit_id_drops);
        latte::shm::unlink(name.as_bytes()).unwrap();
        c.no_slot_drops == 0 && c.unfit_id_drops == 0 && c.slots_used == 64 * 500 && slots.len() == 64 * 500 && all_three
    });
}

#[test]
fn a_reader_follows_a_growing_region_and_accounts_for_every_sample() {
    let name = region_name("follow");
    in_child(|| {
        latte::internals::recorder::install_shared(name.as_bytes(), &small_rings(2)).unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        // The reader maps the region before any producer records, so that
        // it sees the region grow (refreshes > 0) however the threads are
        // scheduled.
        let opened = std::sync::Barrier::new(9);
        let ok = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut m = Mapping::open_shm(name.as_bytes()).unwrap();
                opened.wait();
                let mut curs: Vec<latte_cursor> = Vec::new();
                let mut out = Vec::new();
                let mut refreshes = 0;
                let mut last = false;
                loop {
                    // Read the flag before the pass: the pass after the
                    // producers ended reads everything there is.
                    last |= done.load(std::sync::atomic::Ordering::Acquire);
                    refreshes += m.refresh().unwrap() as u32;
                    let v = m.view();
                    // Slots first: a slot's ID was named before the slot was
                    // handed out, so the names read next cover every one.
                    let slots = v.slots().unwrap();
                    let names = v.ids().unwrap();
                    for s in slots {
                        assert!(names.iter().any(|i| i.token == s.id_token), "every slot's ID has its name");
                        if curs.len() <= s.index as usize {
                            curs.resize(s.index as usize + 1, latte_cursor::default());
                        }
                        out.clear();
                        v.read_slot(s.index, &mut curs[s.index as usize], &mut out, latte::ReadMode::Live).unwrap();
                    }
                    if last {
                        break;
                    }
                }
                let v = m.view();
                let slots = v.slots().unwrap();
                let exact = slots.iter().all(|s| {
                    let c = curs[s.index as usize];
                    c.read + c.lost == s.write_idx
                });
                let total: u64 = slots.iter().map(|s| s.write_idx).sum();
                eprintln!("slots {} refreshes {refreshes} written {total} exact {exact}", slots.len());
                exact && slots.len() == 8 * 40 && refreshes > 0 && total == 8 * 40 * 1000
            });
            // The producers stay until the reader is done: their rings stay
            // theirs (no exited thread's ring is handed on).
            let recorded = std::sync::Barrier::new(9);
            let read = std::sync::Barrier::new(9);
            let (recorded, read, opened) = (&recorded, &read, &opened);
            std::thread::scope(|p| {
                for t in 0..8 {
                    p.spawn(move || {
                        // New IDs keep coming: the region grows while it is
                        // read. (IDs stay valid while recorded under: kept.)
                        let ids: Vec<CString> = (0..40).map(|k| CString::new(format!("follow.{t}.{k}")).unwrap()).collect();
                        opened.wait();
                        for id in &ids {
                            for _ in 0..1000 {
                                span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
                            }
                        }
                        recorded.wait();
                        read.wait();
                    });
                }
                recorded.wait();
                done.store(true, std::sync::atomic::Ordering::Release);
                let ok = reader.join().unwrap();
                read.wait();
                ok
            })
        });
        latte::shm::unlink(name.as_bytes()).unwrap();
        ok
    });
}

#[test]
fn out_of_address_space_records_what_fits_counts_the_rest_and_says_so_once() {
    let name = region_name("capped");
    let err = std::env::temp_dir().join(format!("latte-growth-capped-{}.err", std::process::id()));
    in_child(|| {
        // Standard error into a file, to read what the program was told.
        let f = std::fs::File::create(&err).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: both descriptors are open; fd 2 is replaced in this child only.
        unsafe { libc::dup2(f.as_raw_fd(), 2) };
        latte::internals::recorder::install_shared(name.as_bytes(), &latte_region_config { samples_per_slot: 65536, ..small_rings(4) }).unwrap();
        // Address space for what is mapped now and a little more, not for
        // the next chunks of 1 MiB rings.
        let vm_kib: u64 = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmSize:").map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap()))
            .unwrap();
        let cap = libc::rlimit { rlim_cur: vm_kib * 1024 + (6 << 20), rlim_max: libc::RLIM_INFINITY };
        // SAFETY: a valid rlimit.
        unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) };
        let ids: Vec<CString> = (0..64).map(|k| CString::new(format!("capped.{k}")).unwrap()).collect();
        for _ in 0..10 {
            for id in &ids {
                span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
            }
        }
        let c = counters();
        let recorded: u64 = ids.iter().map(|id| snapshot(id).len() as u64).sum();
        let told = std::fs::read_to_string(&err).unwrap();
        let lines = told.lines().filter(|l| l.contains("cannot grow")).count();
        eprintln!("used {} no_slot_drops {} recorded {recorded} told {lines}", c.slots_used, c.no_slot_drops);
        latte::shm::unlink(name.as_bytes()).unwrap();
        // Every span is recorded or counted; some were counted; said once.
        c.no_slot_drops > 0 && recorded + c.no_slot_drops == 640 && recorded == 10 * c.slots_used as u64 && lines == 1
    });
    let _ = std::fs::remove_file(&err);
}
