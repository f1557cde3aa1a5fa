//! A flush whose writes never complete ends, within its stall limit, in an
//! error the caller sees (-ETIMEDOUT); its writes are cancelled in the
//! kernel, a flush into another file starts at once, one into the same
//! file only once the stuck writes are over, and `latte_flush_cancel`
//! still ends a stuck flight. The kernel's completions are withheld by a
//! test hook (`withhold_completions`): a stand-in for a disk that never
//! answers. Its own process: the stall limit (`LATTE_FLUSH_STALL_MS`) is
//! read once.
#![cfg(feature = "uring")]

mod common;
use common::*;
use latte::internals::ffi::*;
use latte::internals::flush::{latte_flush_status, withhold_completions};
use latte::layout::*;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const LIMIT_MS: u64 = 300;

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("latte-flush-stall-{}-{name}", std::process::id()))
}

/// Polls until the flush is no longer pending (at most `bound`): its
/// result and how long that took.
fn wait(bound: Duration) -> (i32, Duration) {
    let t0 = Instant::now();
    loop {
        let r = latte_poll_flush();
        if r != LATTE_FLUSH_PENDING || t0.elapsed() > bound {
            return (r, t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_flush_whose_completions_never_come_times_out() {
    // Set before the flush first reads it (this binary's only test).
    std::env::set_var("LATTE_FLUSH_STALL_MS", LIMIT_MS.to_string());
    for _ in 0..5000 {
        span(c"stall.a", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    let (pa, pb) = (temp("a"), temp("b"));
    let fa = std::fs::File::create(&pa).unwrap();
    let fb = std::fs::File::create(&pb).unwrap();

    // 1. Completions withheld: -ETIMEDOUT after the limit, not before it,
    // and not long after (the bound is generous for a busy machine).
    withhold_completions(true);
    assert_eq!(latte_flush_async(fa.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    let (r, took) = wait(Duration::from_secs(60));
    assert_eq!(r, -libc::ETIMEDOUT, "after {took:?}");
    assert!(took >= Duration::from_millis(LIMIT_MS), "timed out after {took:?}, before the limit");
    let mut st = latte_flush_status::default();
    assert_eq!(latte_flush_get_status(&mut st), 0);
    assert_eq!(st.state, -libc::ETIMEDOUT);
    assert_eq!(latte_poll_flush(), -libc::ETIMEDOUT, "the error stays until the next flush");

    // 2. Its writes may still land in file a: a flush there waits; one
    // into file b starts, and is cancelled while stuck too.
    assert_eq!(latte_flush_async(fa.as_raw_fd(), LATTE_UNIT_CYCLE), -libc::EBUSY);
    assert_eq!(latte_flush_async(fb.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    assert_eq!(latte_poll_flush(), LATTE_FLUSH_PENDING);
    assert_eq!(latte_flush_cancel(), 1);
    assert_eq!(latte_poll_flush(), -libc::ECANCELED);
    assert_eq!(latte_flush_cancel(), 0);

    // 3. The disk answers again: the strays are reaped, and a flush into
    // file a completes with a whole image.
    withhold_completions(false);
    let t0 = Instant::now();
    let rc = loop {
        let rc = latte_flush_async(fa.as_raw_fd(), LATTE_UNIT_CYCLE);
        if rc != -libc::EBUSY || t0.elapsed() > Duration::from_secs(30) {
            break rc;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(rc, 0);
    assert_eq!(wait(Duration::from_secs(30)).0, LATTE_FLUSH_IDLE);
    let m = latte::reader::Mapping::open_file(&pa).unwrap();
    let c = latte::report::collect(&m.view()).unwrap();
    let t = c.names.iter().position(|n| n == "stall.a").unwrap();
    assert_eq!(c.per_token[t].len(), 5000);
    std::fs::remove_file(&pa).unwrap();
    std::fs::remove_file(&pb).unwrap();
}
