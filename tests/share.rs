//! A shared region asked for after recording began: the private region
//! moves into it where it stands, while threads record, and a reader of the
//! shared object finds every sample, those from before the move included.
//! Each case in a child process of its own (a process installs one shared
//! region).

mod common;
use common::*;
use latte::internals::region::latte_region_config;
use latte::layout::*;
use latte::reader::{latte_cursor, Mapping, ReadMode};
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Whether this kernel lets latte pause writers (`userfaultfd`
/// write-protection, Linux 6.4 and later, not refused by seccomp). Where it
/// cannot, a move is refused with -EBUSY (tests/c/core.c checks that under
/// a filter that refuses the call), and the cases of a move are skipped,
/// saying so.
fn can_move(case: &str) -> bool {
    let ok = latte::internals::pause::available();
    if !ok {
        eprintln!("{case}: skipped: this kernel cannot pause writers (userfaultfd write-protection)");
    }
    ok
}

fn region_name(what: &str) -> String {
    format!("/latte-share-{what}-{}", std::process::id())
}

/// Spans and pulses each thread made, by OS thread id.
struct Made {
    tid: u32,
    spans: u64,
    pulses: u64,
}

/// Four threads, every signal blocked, record spans (two IDs, nested) and
/// pulses until `stop`;
/// each has made at least `before` spans when `moved` runs, and at least
/// as many again after it returned.
fn record_around(before: u64, moved: impl FnOnce()) -> Vec<Made> {
    let stop = AtomicBool::new(false);
    let progress: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = progress
            .iter()
            .map(|p| {
                let stop = &stop;
                s.spawn(move || {
                    // As a server's workers often do (sigwait elsewhere): a
                    // pause by SIGSEGV would kill them.
                    block_all_signals();
                    let mut site = latte::layout::latte_pulse_site::new();
                    let (mut spans, mut pulses) = (0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        latte::internals::ffi::latte_start(c"share.outer".as_ptr(), LATTE_MODE_FAST);
                        span(c"share.inner", LATTE_MODE_FAST, LATTE_MODE_FAST);
                        latte::internals::ffi::latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                        latte::internals::ffi::latte_pulse(&mut site, c"share.pulse".as_ptr());
                        spans += 1;
                        pulses += 1;
                        p.store(spans, Ordering::Relaxed);
                    }
                    // The first pulse of a site primes it: no sample.
                    Made { tid: latte::internals::tsc::gettid(), spans, pulses: pulses - 1 }
                })
            })
            .collect();
        let wait_for = |n: u64| {
            while progress.iter().any(|p| p.load(Ordering::Relaxed) < n) {
                std::thread::yield_now();
            }
        };
        wait_for(before);
        moved();
        let after: Vec<u64> = progress.iter().map(|p| p.load(Ordering::Relaxed)).collect();
        for (p, a) in progress.iter().zip(after) {
            while p.load(Ordering::Relaxed) < a + before {
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    })
}

/// Blocks every signal on the calling thread.
fn block_all_signals() {
    // SAFETY: a zeroed, then filled, sigset and a valid call.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, core::ptr::null_mut());
    }
}

/// Per (OS thread id, ID name): the samples its slot in the shared object
/// `name` says were written, and how many a reader reads from it.
fn written_and_read(name: &str) -> Vec<(u32, String, u64, u64)> {
    let m = Mapping::open_shm(name.as_bytes()).unwrap();
    let v = m.view();
    let mut out = Vec::new();
    for s in v.slots().unwrap() {
        let id = String::from_utf8_lossy(&v.id_name(s.id_token).unwrap()).into_owned();
        let mut cur = latte_cursor::default();
        let mut samples = Vec::new();
        v.read_slot(s.index, &mut cur, &mut samples, ReadMode::Live).unwrap();
        out.push((s.os_tid, id, s.gen_base + s.write_idx, samples.len() as u64));
    }
    out
}

#[test]
fn recording_moves_into_a_shared_region_where_it_stands() {
    if !can_move("recording_moves_into_a_shared_region_where_it_stands") {
        return;
    }
    let name = region_name("moved");
    in_child(|| {
        // Recorded before any shared region was asked for: private memory.
        for _ in 0..10 {
            span(c"share.before", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        let before = latte::internals::recorder::region_if_any().unwrap().base();
        let mut rc = None;
        let made = record_around(20_000, || rc = Some(latte::internals::recorder::install_shared(name.as_bytes(), &latte_region_config::default())));
        let main_tid = latte::internals::tsc::gettid();
        let after = latte::internals::recorder::region_if_any().unwrap();
        let found = written_and_read(&name);
        let of = |tid: u32, id: &str| found.iter().find(|f| f.0 == tid && f.1 == id).map(|f| (f.2, f.3));
        let mut ok = rc == Some(Ok(())) && after.base() == before && after.is_shared();
        ok &= of(main_tid, "share.before") == Some((10, 10));
        for m in &made {
            let want = |n: u64| Some((n, n.min(LATTE_DEFAULT_SAMPLES as u64)));
            let (o, i, p) = (of(m.tid, "share.outer"), of(m.tid, "share.inner"), of(m.tid, "share.pulse"));
            eprintln!("thread {}: {} spans, {} pulses; the object: outer {o:?}, inner {i:?}, pulse {p:?}", m.tid, m.spans, m.pulses);
            ok &= o == want(m.spans) && i == want(m.spans) && p == want(m.pulses);
        }
        let c = counters();
        eprintln!("drops: no slot {}, unfit {}, late {}", c.no_slot_drops, c.unfit_id_drops, c.late_drops);
        ok &= c.no_slot_drops == 0 && c.unfit_id_drops == 0;
        // The object's header says shared, made by this process.
        let m = Mapping::open_shm(name.as_bytes()).unwrap();
        ok &= m.view().flags() & LATTE_REGION_SHARED != 0 && m.view().producer_pid() == std::process::id();
        latte::shm::unlink(name.as_bytes()).unwrap();
        ok
    });
}

#[test]
fn the_region_grows_after_the_move_and_a_second_call_is_refused() {
    if !can_move("the_region_grows_after_the_move_and_a_second_call_is_refused") {
        return;
    }
    let name = region_name("grows");
    in_child(|| {
        span(c"share.first", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let moved = latte::internals::recorder::install_shared(name.as_bytes(), &latte_region_config::default());
        // Past the chunks the private region had: new chunks come from the object.
        let ids: Vec<CString> = (0..300).map(|k| CString::new(format!("share.grow.{k}")).unwrap()).collect();
        for id in &ids {
            span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        let found = written_and_read(&name);
        let all = ids.iter().all(|id| found.iter().any(|f| f.1 == id.to_str().unwrap() && f.2 == 1 && f.3 == 1));
        let again = latte::internals::recorder::install_shared(region_name("again").as_bytes(), &latte_region_config::default());
        eprintln!("moved {moved:?}, {} slots in the object, all 300 new IDs {all}, again {again:?}", found.len());
        latte::shm::unlink(name.as_bytes()).unwrap();
        moved.is_ok() && all && found.len() == 301 && again == Err(latte::Error::Os(libc::EALREADY))
    });
}

#[test]
fn capacities_that_differ_from_the_regions_are_refused_and_change_nothing() {
    let name = region_name("capacities");
    in_child(|| {
        span(c"share.cap", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let cfg = latte_region_config { samples_per_slot: 1024, ..Default::default() };
        let rc = latte::internals::recorder::install_shared(name.as_bytes(), &cfg);
        let exists = std::path::Path::new(&format!("/dev/shm{name}")).exists();
        let private = !latte::internals::recorder::region_if_any().unwrap().is_shared();
        span(c"share.cap", LATTE_MODE_FAST, LATTE_MODE_FAST);
        rc == Err(latte::Error::Os(libc::EBUSY)) && !exists && private && snapshot(c"share.cap").len() == 2
    });
}

/// The word at `p`, loaded atomically.
fn word(p: usize) -> &'static AtomicU64 {
    // SAFETY: `p` is a page of a mapping leaked by the test: valid, aligned.
    unsafe { AtomicU64::from_ptr(p as *mut u64) }
}

#[test]
fn a_writer_with_every_signal_blocked_waits_while_its_memory_moves() {
    if !can_move("a_writer_with_every_signal_blocked_waits_while_its_memory_moves") {
        return;
    }
    in_child(|| {
        let p = latte::internals::mmap::Mmap::anonymous(4096).unwrap().leak() as usize;
        let pause = latte::internals::pause::Pause::begin(vec![(p, 4096)]).unwrap();
        let writer = std::thread::spawn(move || {
            block_all_signals();
            word(p).store(7, Ordering::Relaxed)
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        // The writer waits: nothing landed.
        let held = word(p).load(Ordering::Relaxed) == 0 && !writer.is_finished();
        drop(pause);
        writer.join().unwrap();
        eprintln!("held {held}, then {}", word(p).load(Ordering::Relaxed));
        held && word(p).load(Ordering::Relaxed) == 7
    });
}

#[test]
fn a_moved_region_takes_dev_shm_for_what_it_holds_only() {
    if !can_move("a_moved_region_takes_dev_shm_for_what_it_holds_only") {
        return;
    }
    let name = region_name("sparse");
    in_child(|| {
        for _ in 0..10 {
            span(c"share.sparse", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        let rc = latte::internals::recorder::install_shared(name.as_bytes(), &latte_region_config::default());
        let path = CString::new(format!("/dev/shm{name}")).unwrap();
        // SAFETY: an all-zero stat is a valid out-parameter.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        // SAFETY: a valid path and out-parameter.
        let ok = unsafe { libc::stat(path.as_ptr(), &mut st) } == 0;
        let (size, held) = (st.st_size as u64, st.st_blocks as u64 * 512);
        eprintln!("moved {rc:?}: the object is {size} bytes, {held} of them held");
        let found = written_and_read(&name);
        latte::shm::unlink(name.as_bytes()).unwrap();
        // One ring of the region's 256-ring first chunk: its header, its
        // ring and the names, not the chunk.
        rc.is_ok() && ok && size >= 256 << 20 && held <= 4 << 20 && found.iter().any(|f| f.1 == "share.sparse" && f.2 == 10 && f.3 == 10)
    });
}

#[test]
fn a_name_that_cannot_be_taken_is_refused_before_anything_moves() {
    let name = region_name("taken");
    in_child(|| {
        span(c"share.taken", LATTE_MODE_FAST, LATTE_MODE_FAST);
        // Not a latte region: never taken over.
        let path = format!("/dev/shm{name}");
        std::fs::write(&path, b"someone else's").unwrap();
        let rc = latte::internals::recorder::install_shared(name.as_bytes(), &latte_region_config::default());
        let r = latte::internals::recorder::region_if_any().unwrap();
        let untouched = std::fs::read(&path).unwrap() == b"someone else's";
        span(c"share.taken", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let _ = std::fs::remove_file(&path);
        eprintln!("rc {rc:?}, in an object {}, shared {}", r.in_object(), r.is_shared());
        rc == Err(latte::Error::Os(libc::EEXIST)) && !r.in_object() && !r.is_shared() && untouched && snapshot(c"share.taken").len() == 2
    });
}

#[test]
fn the_region_latte_region_named_takes_the_name_asked_for_after_recording() {
    let from_env = region_name("env");
    let own = region_name("env-own");
    in_child(|| {
        // The child has not used latte yet: its region is made at the first span.
        std::env::set_var("LATTE_REGION", &from_env);
        for _ in 0..10 {
            span(c"share.env", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        let made = Mapping::open_shm(from_env.as_bytes()).is_ok();
        let rc = latte::internals::recorder::install_shared(own.as_bytes(), &latte_region_config::default());
        let old_gone = Mapping::open_shm(from_env.as_bytes()).err() == Some(latte::Error::Os(libc::ENOENT));
        span(c"share.env", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let found = written_and_read(&own);
        let again = latte::internals::recorder::install_shared(region_name("env-again").as_bytes(), &latte_region_config::default());
        eprintln!("made {made}, renamed {rc:?}, old name gone {old_gone}, found {found:?}, again {again:?}");
        latte::shm::unlink(own.as_bytes()).unwrap();
        made && rc.is_ok() && old_gone && found.iter().any(|f| f.1 == "share.env" && f.2 == 11 && f.3 == 11) && again == Err(latte::Error::Os(libc::EALREADY))
    });
}

#[test]
fn a_full_dev_shm_after_the_move_hands_out_an_exited_threads_slot() {
    if !can_move("a_full_dev_shm_after_the_move_hands_out_an_exited_threads_slot") {
        return;
    }
    // SAFETY: getuid has no memory effects.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("skipped: mounting a small /dev/shm in a mount namespace needs root");
        return;
    }
    in_child(|| {
        // A /dev/shm of 16 MiB of this child's own.
        // SAFETY: plain system calls with valid arguments, in the child.
        let mounted = unsafe {
            libc::unshare(libc::CLONE_NEWNS) == 0
                && libc::mount(core::ptr::null(), c"/".as_ptr(), core::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, core::ptr::null()) == 0
                && libc::mount(c"tmpfs".as_ptr(), c"/dev/shm".as_ptr(), c"tmpfs".as_ptr(), 0, c"size=16m".as_ptr().cast()) == 0
        };
        // A thread records and exits: its slot can be handed out again.
        std::thread::spawn(|| span(c"share.exited", LATTE_MODE_FAST, LATTE_MODE_FAST)).join().unwrap();
        let name = "/latte-share-full";
        let rc = latte::internals::recorder::install_shared(name.as_bytes(), &latte_region_config::default());
        // The rest of /dev/shm taken: the next fresh slot cannot be reserved.
        let fill = std::fs::File::create("/dev/shm/fill").unwrap();
        // SAFETY: an all-zero statvfs is a valid out-parameter.
        let mut fs: libc::statvfs = unsafe { core::mem::zeroed() };
        // SAFETY: a valid path and out-parameter.
        let size = if unsafe { libc::statvfs(c"/dev/shm".as_ptr(), &mut fs) } == 0 { fs.f_bavail * fs.f_frsize } else { 0 };
        // SAFETY: a valid descriptor.
        let filled = unsafe { libc::posix_fallocate(std::os::fd::AsRawFd::as_raw_fd(&fill), 0, size as libc::off_t) } == 0;
        std::thread::spawn(|| span(c"share.after", LATTE_MODE_FAST, LATTE_MODE_FAST)).join().unwrap();
        let c = counters();
        let found = written_and_read(name);
        eprintln!("mounted {mounted}, moved {rc:?}, filled {size} ({filled}); no slot drops {}, reuses {}; found {found:?}", c.no_slot_drops, c.slot_reuses);
        // The exited thread's slot, whose one sample (counted in the slot's
        // lineage, gen_base) gave way to the new owner's.
        let after = found.iter().any(|f| f.1 == "share.after" && f.2 == 2 && f.3 == 1);
        mounted && rc.is_ok() && filled && c.no_slot_drops == 0 && c.slot_reuses == 1 && c.reuse_discarded == 1 && after && found.len() == 1
    });
}
