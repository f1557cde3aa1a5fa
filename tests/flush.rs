//! Flushing the region to a file: the image reads back through the reader
//! exactly like Snapshot; the error paths give their codes.

mod common;
use common::*;
use latte::internals::ffi::*;
#[cfg(feature = "uring")]
use latte::internals::flush::*;
use latte::layout::*;
use latte::reader::Mapping;
use std::ffi::CString;
use std::os::fd::AsRawFd;

/// The async flush state is process-wide: its tests take turns.
#[cfg(feature = "uring")]
static ASYNC: std::sync::Mutex<()> = std::sync::Mutex::new(());

const IDS: [&str; 3] = ["flush.a", "flush.b", "flush.c"];

fn record() {
    std::thread::scope(|s| {
        for (k, id) in IDS.iter().enumerate() {
            s.spawn(move || {
                let c = CString::new(*id).unwrap();
                for _ in 0..(1000 * (k + 1)) {
                    span(&c, LATTE_MODE_FAST, LATTE_MODE_FAST);
                }
            });
        }
    });
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("latte-flush-{}-{name}", std::process::id()))
}

/// Every ID of the image has exactly the durations Snapshot returns.
fn same_as_snapshot(path: &std::path::Path) {
    let m = Mapping::open_file(path).unwrap();
    assert!(m.view().flags() & LATTE_REGION_FLUSHED != 0);
    let c = latte::report::collect(&m.view()).unwrap();
    for id in IDS {
        let t = c.names.iter().position(|n| n == id).unwrap();
        let mut from_file: Vec<u64> = c.per_token[t].iter().map(|s| s.duration).collect();
        let mut snap = snapshot(&CString::new(id).unwrap());
        from_file.sort();
        snap.sort();
        assert_eq!(from_file, snap, "{id}");
        assert!(!snap.is_empty());
    }
}

#[cfg(feature = "uring")]
fn wait(timeout_s: u64) -> i32 {
    let t0 = std::time::Instant::now();
    loop {
        let r = latte_poll_flush();
        if r != LATTE_FLUSH_PENDING {
            return r;
        }
        assert!(t0.elapsed().as_secs() < timeout_s, "flush never finished");
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Runs `f` in a forked child whose files may not grow past 4 KiB: a write
/// beyond fails with EFBIG (SIGXFSZ ignored), as a full disk fails a write
/// with ENOSPC. Returns the child's exit code (`f`'s, 101 on a panic).
fn in_child_with_small_files(f: fn() -> i32) -> i32 {
    // SAFETY: the child only runs `f` and exits; latte's fork handlers keep
    // its lock consistent across the fork.
    match unsafe { libc::fork() } {
        0 => {
            let lim = libc::rlimit { rlim_cur: 4096, rlim_max: 4096 };
            // SAFETY: plain calls in the child.
            unsafe {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            }
            let code = std::panic::catch_unwind(f).unwrap_or(101);
            // SAFETY: leaves the child without running the parent's atexit work.
            unsafe { libc::_exit(code) }
        }
        pid => {
            let mut st = 0;
            // SAFETY: our child.
            assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
            assert!(libc::WIFEXITED(st), "child died: status {st}");
            libc::WEXITSTATUS(st)
        }
    }
}

/// A write error (here EFBIG) fails a sync flush with its code.
fn sync_flush_into_a_full_file() -> i32 {
    span(c"flush.full", LATTE_MODE_FAST, LATTE_MODE_FAST);
    let p = temp("full-sync");
    let f = std::fs::File::create(&p).unwrap();
    let rc = latte_flush_sync(f.as_raw_fd(), LATTE_UNIT_CYCLE);
    std::fs::remove_file(&p).unwrap();
    if rc == -libc::EFBIG {
        0
    } else {
        1
    }
}

#[test]
fn sync_flush_round_trip_and_errors() {
    record();
    let p = temp("sync");
    let f = std::fs::File::create(&p).unwrap();
    assert_eq!(latte_flush_sync(f.as_raw_fd(), LATTE_UNIT_TIME), 0);
    same_as_snapshot(&p);
    assert_eq!(Mapping::open_file(&p).unwrap().view().display_unit(), LATTE_UNIT_TIME);
    std::fs::remove_file(&p).unwrap();
    assert_eq!(latte_flush_sync(-1, LATTE_UNIT_CYCLE), -libc::EBADF);
    let ro = std::fs::File::open("/dev/null").unwrap();
    assert_eq!(latte_flush_sync(ro.as_raw_fd(), LATTE_UNIT_CYCLE), -libc::EBADF);
    // Not a regular file (tests/flush_targets.rs has the rest of the refusals).
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    assert_eq!(latte_flush_sync(full.as_raw_fd(), LATTE_UNIT_CYCLE), -libc::EINVAL);
    assert_eq!(in_child_with_small_files(sync_flush_into_a_full_file), 0);
}

/// A write error (here EFBIG) surfaces through poll, and stays reported.
#[cfg(feature = "uring")]
fn async_flush_into_a_full_file() -> i32 {
    span(c"flush.full", LATTE_MODE_FAST, LATTE_MODE_FAST);
    let p = temp("full-async");
    let f = std::fs::File::create(&p).unwrap();
    let ok = latte_flush_async(f.as_raw_fd(), LATTE_UNIT_CYCLE) == 0 && wait(30) == -libc::EFBIG && {
        let mut st = latte_flush_status::default();
        latte_flush_get_status(&mut st);
        st.state == -libc::EFBIG && latte_poll_flush() == -libc::EFBIG
    };
    std::fs::remove_file(&p).unwrap();
    if ok {
        0
    } else {
        1
    }
}

#[cfg(not(feature = "uring"))]
#[test]
fn async_flush_is_not_in_this_build() {
    assert_eq!(latte_flush_supported(), 0);
    assert_eq!(latte_flush_async(1, LATTE_UNIT_TIME), latte::error::LATTE_ERR_NOT_SUPPORTED);
    assert_eq!(latte_poll_flush(), latte::error::LATTE_ERR_NOT_SUPPORTED);
}

#[cfg(feature = "uring")]
#[test]
fn async_flush_round_trip() {
    let _g = ASYNC.lock().unwrap();
    assert_eq!(latte_flush_supported(), 1);
    record();
    let p = temp("async");
    let f = std::fs::File::create(&p).unwrap();
    assert_eq!(latte_flush_async(f.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    assert_eq!(wait(30), LATTE_FLUSH_IDLE);
    let mut st = latte_flush_status::default();
    assert_eq!(latte_flush_get_status(&mut st), 0);
    assert_eq!(st.state, LATTE_FLUSH_IDLE);
    // At completion every byte the flush writes is written: a progress
    // display reaches 100 %. It writes each slot's header and its ring's
    // committed memory, which holds every sample the slot has; the image
    // is larger (the rest of the header's page, each ring's memory never
    // committed and each slot's stride padding are holes).
    assert!(st.bytes_total > 0 && st.bytes_written == st.bytes_total, "{st:?}");
    let len = std::fs::metadata(&p).unwrap().len();
    let m = Mapping::open_file(&p).unwrap();
    let g = m.view().geo();
    let held: u64 = (0..m.view().slots_used())
        .filter_map(|i| m.view().slot_info(i).ok())
        .map(|s| LATTE_SLOT_HEADER_SIZE as u64 + s.write_idx.min(g.samples_per_slot as u64) * LATTE_SAMPLE_SIZE as u64)
        .sum();
    assert!(held <= st.bytes_total && st.bytes_total <= len, "{st:?}, slots hold {held} bytes, image {len} bytes");
    same_as_snapshot(&p);
    std::fs::remove_file(&p).unwrap();
}

/// The image opens and holds every `flush.own` sample (an ID only these
/// tests record, so that other tests recording meanwhile do not matter).
#[cfg(feature = "uring")]
fn image_has_own(path: &std::path::Path) {
    let m = Mapping::open_file(path).unwrap();
    let c = latte::report::collect(&m.view()).unwrap();
    let t = c.names.iter().position(|n| n == "flush.own").unwrap();
    assert_eq!(c.per_token[t].len(), snapshot(c"flush.own").len());
}

/// A fork child never touches its parent's asynchronous flush: its state
/// there is idle, its polls and cancels reap nothing of the parent's ring,
/// and the parent's flush completes, whole.
#[cfg(feature = "uring")]
#[test]
fn a_fork_child_leaves_the_parents_flush_alone() {
    let _g = ASYNC.lock().unwrap();
    for _ in 0..1000 {
        span(c"flush.own", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    let p = temp("fork");
    let f = std::fs::File::create(&p).unwrap();
    assert_eq!(latte_flush_async(f.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    in_child(|| {
        let t0 = std::time::Instant::now();
        let mut ok = true;
        while t0.elapsed() < std::time::Duration::from_millis(200) {
            ok &= latte_poll_flush() == LATTE_FLUSH_IDLE;
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let mut st = latte_flush_status::default();
        ok && latte_flush_get_status(&mut st) == 0 && st.state == LATTE_FLUSH_IDLE && st.bytes_total == 0 && latte_flush_cancel() == 0
    });
    assert_eq!(wait(10), LATTE_FLUSH_IDLE);
    let mut st = latte_flush_status::default();
    assert_eq!(latte_flush_get_status(&mut st), 0);
    assert!(st.bytes_written == st.bytes_total && st.bytes_total > 0, "{st:?}");
    image_has_own(&p);
    std::fs::remove_file(&p).unwrap();
}

/// Cancelling returns at once: the state is -ECANCELED, the writes already
/// with the kernel are reaped by later calls, and a new flush starts once
/// they are (-EBUSY until then).
#[cfg(feature = "uring")]
#[test]
fn cancel_returns_and_the_next_flush_starts() {
    let _g = ASYNC.lock().unwrap();
    for _ in 0..1000 {
        span(c"flush.own", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    let p = temp("cancel");
    let f = std::fs::File::create(&p).unwrap();
    assert_eq!(latte_flush_async(f.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    assert_eq!(latte_flush_cancel(), 1);
    assert_eq!(latte_poll_flush(), -libc::ECANCELED);
    let mut st = latte_flush_status::default();
    assert_eq!(latte_flush_get_status(&mut st), 0);
    assert_eq!(st.state, -libc::ECANCELED);
    assert_eq!(latte_flush_cancel(), 0, "nothing pending any more");
    start_flush_after_cancel(f.as_raw_fd());
    assert_eq!(wait(10), LATTE_FLUSH_IDLE);
    image_has_own(&p);
    std::fs::remove_file(&p).unwrap();
}

#[cfg(feature = "uring")]
#[test]
fn async_flush_errors() {
    let _g = ASYNC.lock().unwrap();
    assert_eq!(latte_flush_async(-1, LATTE_UNIT_CYCLE), -libc::EBADF);
    assert_eq!(latte_flush_async(9999, LATTE_UNIT_CYCLE), -libc::EBADF);
    let ro = std::fs::File::open("/dev/null").unwrap();
    assert_eq!(latte_flush_async(ro.as_raw_fd(), LATTE_UNIT_CYCLE), -libc::EBADF);
    // A full file system: the error surfaces through poll (in a child).
    assert_eq!(in_child_with_small_files(async_flush_into_a_full_file), 0);
    // A second flush while one is pending.
    span(c"flush.full", LATTE_MODE_FAST, LATTE_MODE_FAST);
    let p = temp("busy");
    let f = std::fs::File::create(&p).unwrap();
    let q = temp("busy2");
    let g = std::fs::File::create(&q).unwrap();
    assert_eq!(latte_flush_async(g.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    assert_eq!(latte_flush_async(f.as_raw_fd(), LATTE_UNIT_CYCLE), -libc::EBUSY);
    assert_eq!(wait(30), LATTE_FLUSH_IDLE);
    std::fs::remove_file(&q).unwrap();
    // The next one works.
    assert_eq!(latte_flush_async(f.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    assert_eq!(wait(30), LATTE_FLUSH_IDLE);
    assert!(Mapping::open_file(&p).is_ok());
    std::fs::remove_file(&p).unwrap();
}

#[cfg(feature = "uring")]
fn encode(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5A5A
}

/// A flush while a producer keeps writing (through the real ring writer,
/// values that encode their own index, about one per microsecond): the image
/// reads, every sample it returns is exactly the one written at its index,
/// and read + lost == written. How many survive depends on how fast the
/// flush ran against the producer (the machine's load), so only the
/// accounting and the samples themselves are checked, never a count.
#[cfg(feature = "uring")]
#[test]
fn async_flush_while_producers_record() {
    let _g = ASYNC.lock().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = std::sync::atomic::AtomicBool::new(false);
    let p = temp("live");
    std::thread::scope(|s| {
        s.spawn(|| {
            let t = latte::internals::recorder::current();
            // SAFETY: this thread's own state.
            let t = unsafe { &mut *t };
            // SAFETY: a static NUL-terminated ID.
            let slot = latte::layout::ring_ptr(unsafe { latte::internals::recorder::resolve(t, c"flush.live".as_ptr()) });
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..100 {
                    // SAFETY: this thread's own slot and its region's mask.
                    unsafe { latte::internals::recorder::write_sample(slot, t.sample_mask, i, encode(i)) };
                    i += 1;
                }
                if i > 70_000 {
                    started.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        });
        while !started.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let f = std::fs::File::create(&p).unwrap();
        assert_eq!(latte_flush_async(f.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
        assert_eq!(wait(30), LATTE_FLUSH_IDLE);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let m = Mapping::open_file(&p).unwrap();
    let v = m.view();
    let tok = v.ids().unwrap().into_iter().find(|i| latte::name::name_bytes(&i.name) == b"flush.live").unwrap().token;
    let slot = v.slots().unwrap().into_iter().find(|s| s.id_token == tok).unwrap();
    let mut cur = latte::reader::latte_cursor::default();
    let mut out = Vec::new();
    let r = v.read_slot(slot.index, &mut cur, &mut out, latte::ReadMode::Live).unwrap();
    assert!(slot.write_idx > 70_000, "the flush started after 70,000 samples");
    assert!(r.read <= v.geo().samples_per_slot as u64, "read {} lost {}", r.read, r.lost);
    assert_eq!(r.read + r.lost, slot.write_idx, "read {} lost {}", r.read, r.lost);
    let first = cur.next - r.read;
    for (k, x) in out.iter().enumerate() {
        let j = first + k as u64;
        assert!(x.start_tsc == j && x.packed == encode(j), "torn or stale sample at index {j}");
    }
    std::fs::remove_file(&p).unwrap();
}
