//! Pacing of a polling reader (`View::read_into` with `ReadMode::Paced`, what
//! `latte_reader_read` uses): once a cursor has caught up with a live slot,
//! reads within the interval return nothing without looking; reads cut
//! short by the output, closed slots, flushed images and interval 0 are
//! never deferred; and deferring loses nothing.

mod common;
use common::*;
use latte::internals::extract::own_view;
use latte::layout::*;
use latte::reader::{latte_cursor, latte_raw_sample, ReadOutcome, View};
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::time::Duration;

/// The view of this process's region and the slot of `id` recorded by the
/// thread `tid` (an OS thread id).
fn slot_of(id: &[u8], tid: u32) -> (View<'static>, u32) {
    let v = own_view().unwrap();
    let tok = v.ids().unwrap().into_iter().find(|i| latte::name::name_bytes(&i.name) == id).unwrap().token;
    let s = v.slots().unwrap().into_iter().find(|s| s.id_token == tok && s.os_tid == tid).unwrap();
    (v, s.index)
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn read(v: &View, slot: u32, cur: &mut latte_cursor, cap: usize, pace_ns: u64) -> ReadOutcome {
    let mut buf = vec![MaybeUninit::<latte_raw_sample>::uninit(); cap];
    v.read_into(slot, cur, &mut buf, latte::ReadMode::Paced { min_interval_ns: pace_ns }).unwrap()
}

fn record(id: &CStr, n: usize) {
    for _ in 0..n {
        span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
}

const LONG: u64 = 60_000_000_000; // a minute: no test waits that long by accident

#[test]
fn a_caught_up_cursor_waits_for_the_interval_and_loses_nothing() {
    record(c"pace-live", 10);
    let (v, slot) = slot_of(b"pace-live", gettid());
    let mut cur = latte_cursor::default();
    let r = read(&v, slot, &mut cur, 1000, LONG);
    assert_eq!((r.read, r.deferred), (10, false));
    assert_ne!(cur.caught_up_ns, 0);
    record(c"pace-live", 5);
    let r = read(&v, slot, &mut cur, 1000, LONG);
    assert_eq!((r.read, r.lost, r.deferred), (0, 0, true), "within the interval: not looked at");
    assert_eq!(cur.next, 10);
    // The same cursor with a short interval that has passed looks again.
    std::thread::sleep(Duration::from_millis(2));
    let r = read(&v, slot, &mut cur, 1000, 1_000_000);
    assert_eq!((r.read, r.lost, r.deferred), (5, 0, false));
    // Interval 0: never deferred, and the cursor does not count as caught up.
    record(c"pace-live", 3);
    let r = read(&v, slot, &mut cur, 1000, 0);
    assert_eq!((r.read, r.deferred), (3, false));
    assert_eq!(cur.read + cur.lost, 18);
}

#[test]
fn a_read_cut_short_by_the_output_is_followed_at_once() {
    record(c"pace-short", 100);
    let (v, slot) = slot_of(b"pace-short", gettid());
    let mut cur = latte_cursor::default();
    let mut got = 0;
    for _ in 0..3 {
        let r = read(&v, slot, &mut cur, 30, LONG);
        assert!(!r.deferred);
        assert_eq!(cur.caught_up_ns, 0, "not caught up while the output was full");
        got += r.read;
    }
    let r = read(&v, slot, &mut cur, 30, LONG);
    assert_eq!((r.read, r.deferred), (10, false));
    assert_eq!(got + r.read, 100);
    assert_ne!(cur.caught_up_ns, 0);
    assert!(read(&v, slot, &mut cur, 30, LONG).deferred);
}

#[test]
fn a_closed_slot_is_never_deferred() {
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel::<u32>();
    let h = std::thread::spawn(move || {
        record(c"pace-closed", 3);
        tid_tx.send(gettid()).unwrap();
        go_rx.recv().unwrap();
        record(c"pace-closed", 4);
    });
    let tid = tid_rx.recv().unwrap();
    let (v, slot) = slot_of(b"pace-closed", tid);
    let mut cur = latte_cursor::default();
    assert_eq!(read(&v, slot, &mut cur, 1000, LONG).read, 3);
    assert!(read(&v, slot, &mut cur, 1000, LONG).deferred, "live and caught up: deferred");
    go_tx.send(()).unwrap();
    h.join().unwrap();
    // The owner exited: its slot is closed and final, so the next read looks
    // at once, however recent the last one.
    let r = read(&v, slot, &mut cur, 1000, LONG);
    assert_eq!((r.read, r.deferred), (4, false));
    assert_eq!(cur.read, 7);
}

#[test]
fn a_flushed_image_is_never_deferred() {
    use std::os::fd::AsRawFd;
    record(c"pace-image", 6);
    let tid = gettid();
    let p = std::env::temp_dir().join(format!("latte-pace-{}.img", std::process::id()));
    let f = std::fs::File::create(&p).unwrap();
    assert_eq!(latte::internals::ffi::latte_flush_sync(f.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    drop(f);
    let m = latte::reader::Mapping::open_file(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    let v = m.view();
    let tok = v.ids().unwrap().into_iter().find(|i| latte::name::name_bytes(&i.name) == b"pace-image").unwrap().token;
    let s = v.slots().unwrap().into_iter().find(|s| s.id_token == tok && s.os_tid == tid).unwrap();
    assert_eq!(s.state, LATTE_SLOT_LIVE, "the owner was alive when the image was taken");
    let mut cur = latte_cursor::default();
    assert_eq!(read(&v, s.index, &mut cur, 1000, LONG).read, 6);
    let r = read(&v, s.index, &mut cur, 1000, LONG);
    assert_eq!((r.read, r.deferred), (0, false), "no writer behind an image: never deferred");
}
