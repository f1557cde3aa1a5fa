//! The recording core through the C ABI, in the default private region.

mod common;
use common::*;
use latte::internals::extract::own_view;
use latte::internals::ffi::*;
use latte::layout::*;
use latte::reader::latte_cursor;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

#[test]
fn exact_counts_per_thread_and_shared() {
    let names: Vec<CString> = (0..8).map(|k| CString::new(format!("exact-{k}")).unwrap()).collect();
    std::thread::scope(|s| {
        for (k, n) in names.iter().enumerate() {
            s.spawn(move || {
                for _ in 0..2000 {
                    span(n, LATTE_MODE_FAST, LATTE_MODE_FAST);
                }
                if k < 4 {
                    for _ in 0..1000 {
                        span(c"exact-shared", LATTE_MODE_MID, LATTE_MODE_HARD);
                    }
                }
            });
        }
    });
    for n in &names {
        assert_eq!(snapshot(n).len(), 2000, "{n:?}");
    }
    assert_eq!(snapshot(c"exact-shared").len(), 4000);
    assert!(snapshot(c"exact-never").is_empty());
}

#[test]
fn ring_keeps_the_newest_65536() {
    std::thread::spawn(|| {
        let want: Vec<u64> = (0..70_000).map(|_| span(c"wrap", LATTE_MODE_FAST, LATTE_MODE_FAST)).collect();
        // Read on the recording thread itself: its ring is final.
        let got = snapshot(c"wrap");
        assert_eq!(got.len(), 65536);
        assert_eq!(&got[..], &want[70_000 - 65536..]);
    })
    .join()
    .unwrap();
    // And after the thread exited (closed slot).
    assert_eq!(snapshot(c"wrap").len(), 65536);
}

#[test]
fn depth_limit_and_orphans_are_counted() {
    std::thread::spawn(|| {
        let before = counters();
        for _ in 0..70 {
            latte_start(c"deep".as_ptr(), LATTE_MODE_FAST);
        }
        assert_eq!(thread_counters().depth, 64);
        for _ in 0..70 {
            latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        }
        let t = thread_counters();
        assert_eq!((t.overflow_starts, t.orphan_stops, t.depth), (6, 6, 0));
        assert_eq!(latte_stop(core::ptr::null(), LATTE_MODE_FAST), 0);
        assert_eq!(thread_counters().orphan_stops, 7);
        let after = counters();
        assert!(after.overflow_starts - before.overflow_starts >= 6);
        assert!(after.orphan_stops - before.orphan_stops >= 7);
        assert_eq!(snapshot(c"deep").len(), 64);
    })
    .join()
    .unwrap();
}

#[test]
fn depth_and_modes_are_recorded() {
    std::thread::spawn(|| {
        latte_start(c"outer".as_ptr(), LATTE_MODE_HARD);
        latte_start(c"inner".as_ptr(), LATTE_MODE_MID);
        let inner = latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        let outer = latte_stop(core::ptr::null(), LATTE_MODE_HARD);
        assert!(outer >= inner);
        let v = own_view().unwrap();
        let c = latte::report::collect(&v).unwrap();
        let tok = |n: &str| c.names.iter().position(|x| x == n).unwrap();
        let i = c.per_token[tok("inner")].last().copied().unwrap();
        let o = c.per_token[tok("outer")].last().copied().unwrap();
        assert_eq!((i.depth, i.start_mode, i.stop_mode, i.duration), (1, LATTE_MODE_MID, LATTE_MODE_FAST, inner));
        assert_eq!((o.depth, o.start_mode, o.stop_mode, o.duration), (0, LATTE_MODE_HARD, LATTE_MODE_HARD, outer));
        assert!(i.start_tsc >= o.start_tsc);
    })
    .join()
    .unwrap();
}

#[test]
fn null_and_overlong_ids() {
    std::thread::spawn(|| {
        span(c"", LATTE_MODE_FAST, LATTE_MODE_FAST);
        latte_start(core::ptr::null(), LATTE_MODE_FAST);
        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        assert_eq!(snapshot(c"<null-id>").len(), 1);
        let a = c"an_identifier_well_beyond_thirty_one_bytes_A";
        let b = c"an_identifier_well_beyond_thirty_one_bytes_B";
        span(a, LATTE_MODE_FAST, LATTE_MODE_FAST);
        span(b, LATTE_MODE_FAST, LATTE_MODE_FAST);
        span(b, LATTE_MODE_FAST, LATTE_MODE_FAST);
        assert_eq!(snapshot(a).len(), 1);
        assert_eq!(snapshot(b).len(), 2);
        let ta = latte_intern_id(a.as_ptr());
        let mut buf = [0 as core::ffi::c_char; 64];
        assert_eq!(latte_id_name(ta, buf.as_mut_ptr(), buf.len()), 44);
        // SAFETY: latte_id_name NUL-terminates.
        let name = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert_eq!(name, a.to_str().unwrap(), "names are kept whole");
        // A buffer too small gets the name cut and its whole length.
        let mut small = [0 as core::ffi::c_char; 8];
        assert_eq!(latte_id_name(ta, small.as_mut_ptr(), small.len()), 44);
        // SAFETY: latte_id_name NUL-terminates.
        assert_eq!(unsafe { CStr::from_ptr(small.as_ptr()) }.to_str().unwrap(), "an_iden");
        // Content, not address: a copy of the text is the same ID.
        let copy = CString::new("null_and_overlong").unwrap();
        assert_eq!(latte_intern_id(copy.as_ptr()), latte_intern_id(c"null_and_overlong".as_ptr()));
    })
    .join()
    .unwrap();
}

#[test]
fn reader_cursors_while_a_writer_runs() {
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let (s2, w2) = (stop.clone(), written.clone());
    let h = std::thread::spawn(move || {
        let mut n = 0;
        while !s2.load(Ordering::Relaxed) {
            span(c"cursor-live", LATTE_MODE_FAST, LATTE_MODE_FAST);
            n += 1;
        }
        w2.store(n, Ordering::Relaxed);
    });
    let v = loop {
        let v = own_view().unwrap();
        let tok = v.ids().unwrap().into_iter().find(|i| latte::name::name_bytes(&i.name) == b"cursor-live");
        if let Some(t) = tok {
            if let Some(s) = v.slots().unwrap().into_iter().find(|s| s.id_token == t.token) {
                break (v, s.index);
            }
        }
        std::thread::yield_now();
    };
    let (view, idx) = v;
    let mut cur = latte_cursor::default();
    let mut out = Vec::new();
    let mut last_tsc = 0;
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_millis(300) {
        out.clear();
        view.read_slot(idx, &mut cur, &mut out, latte::ReadMode::Live).unwrap();
        for r in &out {
            let s = r.decode();
            assert!(s.start_tsc >= last_tsc, "samples out of order: stale or torn");
            last_tsc = s.start_tsc;
        }
    }
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    out.clear();
    view.read_slot(idx, &mut cur, &mut out, latte::ReadMode::Live).unwrap();
    assert_eq!(cur.read + cur.lost, written.load(Ordering::Relaxed));
    assert_eq!(cur.next, written.load(Ordering::Relaxed));
}

#[test]
fn report_hides_calibration_and_lists_components() {
    std::thread::spawn(|| {
        for _ in 0..100 {
            span(c"reported", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        assert_eq!(latte_calibration_run(), 0);
        let r = latte::internals::api::own_report(LATTE_UNIT_TIME, LATTE_DATA_CALIBRATED).unwrap();
        assert!(r.contains("LATTE TELEMETRY [TIME][CAL]"));
        assert!(r.contains("SELF-OFFSET H[Start] x W[Stop]") && r.contains("PULSE"));
        assert!(r.contains("reported"));
        assert!(!r.contains("latte.calibrate"));
        let mut o = [0f64; 9];
        let mut p = 0f64;
        latte_calibration_get_overheads(o.as_mut_ptr(), &mut p);
        assert!(o.iter().all(|&x| x > 0.0) && p > 0.0, "{o:?} {p}");
        assert!(latte_tsc_cycles_per_ns() > 0.0);
    })
    .join()
    .unwrap();
}

#[test]
fn bad_arguments_get_errors() {
    assert_eq!(latte_init_shared_region(core::ptr::null()), -libc::EINVAL);
    assert_eq!(latte_trace_write(core::ptr::null()), -libc::EINVAL);
    assert_eq!(latte_region_get_counters(core::ptr::null_mut()), -libc::EINVAL);
    assert_eq!(
        latte_samples_clean(
            core::ptr::null(),
            3,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            core::ptr::null_mut()
        ),
        -libc::EINVAL
    );
    latte_pulse(core::ptr::null_mut(), c"x".as_ptr());
    latte_string_free(core::ptr::null_mut());
    latte_reader_close(core::ptr::null_mut());
    // SAFETY: strerror returns a static C string.
    assert!(!unsafe { CStr::from_ptr(latte_error_string(-12345)) }.to_bytes().is_empty());
    let mut st = latte::internals::flush::latte_flush_status::default();
    assert_eq!(latte_flush_get_status(core::ptr::null_mut()), -libc::EINVAL);
    let _ = latte_flush_get_status(&mut st);
}

/// The tests that count late drops, one at a time (the counter is process-wide).
static LATE_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A pthread key whose destructor, `dtor`, runs after latte's when a
/// thread that armed it (`arm_after_latte`) ends: glibc runs a round of key
/// destructors in the keys' order, and latte's key was made first (its
/// first span in this process, taken here if not before).
fn key_after_latte(dtor: unsafe extern "C" fn(*mut libc::c_void)) -> libc::pthread_key_t {
    span(c"key.order", LATTE_MODE_FAST, LATTE_MODE_FAST);
    let mut k: libc::pthread_key_t = 0;
    // SAFETY: a valid out-pointer and a destructor of the right type.
    assert_eq!(unsafe { libc::pthread_key_create(&mut k, Some(dtor)) }, 0);
    k
}

/// Arms the calling thread's `key` (its destructor then runs at the
/// thread's end).
fn arm_after_latte(key: libc::pthread_key_t) {
    // SAFETY: a key `key_after_latte` made; any non-null value arms it.
    assert_eq!(unsafe { libc::pthread_setspecific(key, core::ptr::dangling()) }, 0);
}

/// Spans recorded by a thread's thread-local destructors are kept: latte
/// retires the thread after them, in a pthread key's destructor. So are
/// the spans of a thread whose first span is in such a destructor, and
/// the thread's states are retired all the same (its ring is closed).
#[test]
fn spans_of_thread_local_destructors_are_recorded() {
    struct RecordsOnDrop(&'static CStr);
    impl Drop for RecordsOnDrop {
        fn drop(&mut self) {
            for _ in 0..3 {
                latte_start(self.0.as_ptr(), LATTE_MODE_FAST);
                latte_stop(core::ptr::null(), LATTE_MODE_FAST);
            }
        }
    }
    thread_local! {
        static EARLY: RecordsOnDrop = const { RecordsOnDrop(c"tls.dtor") };
        static FIRST: RecordsOnDrop = const { RecordsOnDrop(c"tls.dtor.first") };
    }
    let _serial = LATE_TESTS.lock().unwrap();
    let before = counters();
    std::thread::spawn(|| {
        EARLY.with(|_| ()); // registered before the thread's first span
        span(c"tls.dtor.body", LATTE_MODE_FAST, LATTE_MODE_FAST);
        EARLY.with(|_| ()); // and after it
    })
    .join()
    .unwrap();
    std::thread::spawn(|| FIRST.with(|_| ())).join().unwrap();
    assert_eq!(counters().late_drops, before.late_drops, "nothing was late");
    assert_eq!(snapshot(c"tls.dtor").len(), 3);
    assert_eq!(snapshot(c"tls.dtor.first").len(), 3, "a thread's first span in a destructor is kept");
    assert_eq!(snapshot(c"tls.dtor.body").len(), 1);
    let v = own_view().unwrap();
    let tok = v.ids().unwrap().into_iter().find(|i| latte::name::name_bytes(&i.name) == b"tls.dtor.first").unwrap().token;
    let states: Vec<u32> = v.slots().unwrap().iter().filter(|s| s.id_token == tok).map(|s| s.state).collect();
    assert_eq!(states, [LATTE_SLOT_CLOSED], "that thread was retired too");
}

/// A span recorded from a key destructor that runs after latte's (the
/// thread is retired by then) is not recorded, is counted as a late drop,
/// and crashes nothing.
#[test]
fn recording_after_thread_teardown_is_counted() {
    unsafe extern "C" fn records(_: *mut libc::c_void) {
        for _ in 0..3 {
            latte_start(c"late".as_ptr(), LATTE_MODE_FAST);
            latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        }
    }
    let _serial = LATE_TESTS.lock().unwrap();
    let key = key_after_latte(records);
    let before = counters().late_drops;
    std::thread::spawn(move || {
        span(c"early", LATTE_MODE_FAST, LATTE_MODE_FAST);
        arm_after_latte(key);
    })
    .join()
    .unwrap();
    assert_eq!(counters().late_drops, before + 3, "each span after teardown is counted once (at its Start)");
    assert!(snapshot(c"late").is_empty());
    assert_eq!(snapshot(c"early").len(), 1);
}

#[test]
fn a_span_open_at_thread_teardown_is_counted_once() {
    unsafe extern "C" fn stops(_: *mut libc::c_void) {
        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
    }
    let _serial = LATE_TESTS.lock().unwrap();
    let key = key_after_latte(stops);
    let before = counters().late_drops;
    std::thread::spawn(move || {
        arm_after_latte(key);
        latte_start(c"open.at.exit".as_ptr(), LATTE_MODE_FAST);
    })
    .join()
    .unwrap();
    assert_eq!(counters().late_drops, before + 1, "the span its Stop could not close is counted once");
    assert!(snapshot(c"open.at.exit").is_empty());
}

/// A duration that does not fit 48 bits is defined: a negative one (the
/// TSC went backwards) records 0, a longer one saturates.
#[test]
fn durations_out_of_range_are_defined() {
    let t = latte::internals::recorder::current();
    // SAFETY: the calling thread's own active state.
    let t = unsafe { &mut *t };
    let now = latte::internals::tsc::rdtsc();
    // SAFETY: a NUL-terminated ID.
    unsafe { latte::internals::recorder::start(t, c"dur.neg".as_ptr(), LATTE_MODE_FAST) };
    let d = t.depth as usize - 1;
    t.frame_tsc[d] = now + 1_000_000_000;
    assert_eq!(latte::internals::recorder::stop_at(t, LATTE_MODE_FAST, now), 0);
    // SAFETY: a NUL-terminated ID.
    unsafe { latte::internals::recorder::start(t, c"dur.long".as_ptr(), LATTE_MODE_FAST) };
    t.frame_tsc[d] = now.wrapping_sub(1u64 << 50); // the TSC may not have reached 2^50 yet
    assert_eq!(latte::internals::recorder::stop_at(t, LATTE_MODE_FAST, now), LATTE_MAX_DURATION);
    assert_eq!(snapshot(c"dur.neg"), vec![0]);
    assert_eq!(snapshot(c"dur.long"), vec![LATTE_MAX_DURATION]);
}

fn caller_state() -> *mut latte_thread {
    // SAFETY: an all-zero latte_thread is what a caller's zero-initialised
    // thread-local holds; leaked, as a thread-local outlives the thread's use.
    Box::leak(Box::new(unsafe { core::mem::zeroed::<latte_thread>() }))
}

/// A caller's own state (what latte_inline.h keeps in a thread-local) takes
/// the thread's open spans over at its first slow path; the library's calls
/// then work on it, and a Stop through a state that lost the thread closes
/// the active state's innermost span.
#[test]
fn a_callers_state_takes_over_open_spans() {
    std::thread::spawn(|| {
        let before = thread_counters();
        latte_start(c"take.a".as_ptr(), LATTE_MODE_HARD); // Rust's own state
        let a = caller_state();
        // The inline Start's cache miss: attaches `a`, moves take.a over.
        assert_ne!(latte_internal_thread_resolve_v3(a, c"take.b".as_ptr()), 0);
        // SAFETY: `a` is this thread's active state now.
        let sa = unsafe { &mut *a };
        assert_eq!((sa.depth, sa.attached), (1, 1));
        // SAFETY: a NUL-terminated ID.
        unsafe { latte::internals::recorder::start(sa, c"take.b".as_ptr(), LATTE_MODE_FAST) }; // a cache hit
        assert_eq!(thread_counters().depth, 2);
        // Closes take.b.
        assert!(latte_stop(core::ptr::null(), LATTE_MODE_MID) > 0);
        // A second caller state takes over take.a; a Stop through `a` (now
        // empty) closes it there.
        let b = caller_state();
        assert_ne!(latte_internal_thread_resolve_v3(b, c"take.c".as_ptr()), 0);
        // SAFETY: `a` is this thread's (inactive) state.
        assert_eq!(unsafe { ((*a).depth, (*a).attached) }, (0, 0));
        // SAFETY: `b` is this thread's active state.
        assert_eq!(unsafe { (*b).depth }, 1);
        assert!(latte_internal_thread_stop_slow_v3(a, LATTE_MODE_HARD, latte::internals::tsc::rdtsc()) > 0);
        // SAFETY: as above.
        assert_eq!(unsafe { (*b).depth }, 0);
        let after = thread_counters();
        assert_eq!(after.orphan_stops, before.orphan_stops, "no Stop was an orphan");
        // Now nothing is open anywhere: an orphan.
        assert_eq!(latte_internal_thread_stop_slow_v3(a, LATTE_MODE_FAST, latte::internals::tsc::rdtsc()), 0);
        assert_eq!(thread_counters().orphan_stops, before.orphan_stops + 1);
    })
    .join()
    .unwrap();
    let own = own_view().unwrap();
    let read = |id: &CStr| {
        let tok = latte_intern_id(id.as_ptr());
        let mut out = Vec::new();
        for (_, raw) in latte::internals::extract::collect(&own, Some(tok)).unwrap() {
            out.extend(raw.iter().map(|r| r.decode()));
        }
        out
    };
    let a = read(c"take.a");
    let b = read(c"take.b");
    assert_eq!(a.len(), 1);
    assert_eq!((a[0].depth, a[0].start_mode, a[0].stop_mode), (0, LATTE_MODE_HARD, LATTE_MODE_HARD));
    assert_eq!(b.len(), 1);
    assert_eq!((b[0].depth, b[0].start_mode, b[0].stop_mode), (1, LATTE_MODE_FAST, LATTE_MODE_MID));
}

/// The inline path's slow path from a key destructor that runs after
/// latte's: a sink ring (never NULL), a counted late drop, nothing
/// recorded.
#[test]
fn inline_slow_path_after_teardown_is_counted() {
    unsafe extern "C" fn resolves(_: *mut libc::c_void) {
        let a = caller_state();
        let sink = latte_internal_thread_resolve_v3(a, c"late.inline".as_ptr());
        assert_ne!(sink, 0);
        // A never-attached state (mask 0) gets a one-sample sink; the
        // Stop that follows writes into it.
        // SAFETY: the sink returned for `a`, whose mask is 0.
        unsafe { latte::internals::recorder::write_sample(ring_ptr(sink), 0, 1, 2) };
        let mut site = latte_pulse_site::new();
        latte_internal_thread_pulse_slow_v3(a, &mut site, c"late.inline".as_ptr(), 1);
    }
    let _serial = LATE_TESTS.lock().unwrap();
    let key = key_after_latte(resolves);
    let before = counters().late_drops;
    std::thread::spawn(move || {
        span(c"early.inline", LATTE_MODE_FAST, LATTE_MODE_FAST);
        arm_after_latte(key);
    })
    .join()
    .unwrap();
    assert_eq!(counters().late_drops, before + 2, "the resolve and the pulse are counted");
    assert!(snapshot(c"late.inline").is_empty());
}

/// Spans and pulses under one ID on one thread write one ring: a Stop's
/// own copy of the ring's index (`next_idx`) is stale after every pulse,
/// and the Stop then writes at the ring's index. Nothing is overwritten:
/// every span and every pulse interval is there, in order.
#[test]
fn spans_and_pulses_share_a_ring_without_overwriting() {
    std::thread::spawn(|| {
        let mut site = latte_pulse_site::new();
        let id = c"mixed.ring";
        latte_pulse(&mut site, id.as_ptr()); // primes the site
        for _ in 0..3000 {
            span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
            latte_pulse(&mut site, id.as_ptr());
            span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        let mut raw = Vec::new();
        // SAFETY: a valid C string.
        unsafe { latte::internals::extract::snapshot_into(id.as_ptr(), &mut raw) }.unwrap();
        assert_eq!(raw.len(), 9000);
        let modes: Vec<u32> = raw.iter().map(|r| r.decode().stop_mode).collect();
        for (k, m) in modes.iter().enumerate() {
            let want = if k % 3 == 1 { LATTE_MODE_PULSE } else { LATTE_MODE_FAST };
            assert_eq!(*m, want, "sample {k}");
        }
    })
    .join()
    .unwrap();
}

/// Every slow path `latte_inline.h` calls carries the generation of the
/// layout it shares with Rust, so that a program inlined against another
/// generation's header fails to link instead of misreading the state.
#[test]
fn inline_entry_points_carry_the_layout_generation() {
    let header = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/latte_inline.h")).unwrap();
    let suffix = format!("_v{}", latte::layout::LATTE_THREAD_LAYOUT);
    let names: Vec<&str> = header.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("latte_internal_")).collect();
    assert!(names.len() >= 4, "{names:?}");
    for n in names {
        assert!(n.ends_with(&suffix), "{n} does not end in {suffix}");
    }
}
