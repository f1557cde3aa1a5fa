//! The first flush of a process gets the cycles per ns it writes into the
//! image from the region's anchor and a (TSC, clock) pair taken at the
//! flush: it never measures the TSC's frequency (a window of 120 ms) or
//! sleeps on the caller. Its own process, so that nothing calibrated before.
#![cfg(feature = "uring")]

mod common;
use common::*;
use latte::internals::ffi::*;
use latte::layout::*;
use latte::reader::Mapping;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

#[test]
fn first_async_flush_does_not_calibrate_on_the_caller() {
    for _ in 0..20_000 {
        span(c"first.flush", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    assert_eq!(latte::internals::tsc::STALLS.load(Ordering::Relaxed), 0, "nothing measured before the flush");
    let p = std::env::temp_dir().join(format!("latte-flush-first-{}", std::process::id()));
    let f = std::fs::File::create(&p).unwrap();
    assert_eq!(latte_flush_async(f.as_raw_fd(), LATTE_UNIT_TIME), 0);
    assert_eq!(latte::internals::tsc::STALLS.load(Ordering::Relaxed), 0, "latte_flush_async measured or slept on the caller");
    let t0 = std::time::Instant::now();
    while latte_poll_flush() == LATTE_FLUSH_PENDING {
        assert!(t0.elapsed().as_secs() < 30, "flush never finished");
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    assert_eq!(latte_poll_flush(), LATTE_FLUSH_IDLE);
    assert_eq!(latte::internals::tsc::STALLS.load(Ordering::Relaxed), 0, "latte_poll_flush measured or slept");
    // The image carries a figure that agrees with a measurement.
    let m = Mapping::open_file(&p).unwrap();
    let image = m.view().calibration().cycles_per_ns;
    let measured = latte::internals::tsc::measure_cycles_per_ns(30);
    assert!((image / measured - 1.0).abs() < 0.01, "image {image} measured {measured}");
    std::fs::remove_file(&p).unwrap();
}
