//! A NULL out-parameter is -EINVAL everywhere, and the call does nothing
//! (no cursor moved): the caller would not know what it got. The buffer of
//! a size query (`out` NULL with `cap` 0) is the one NULL that is allowed.

mod common;
use common::*;
use latte::internals::ffi::*;
use latte::layout::*;
use latte::reader::{latte_cursor, latte_raw_sample, latte_slot_info};
use std::ffi::CString;

#[test]
fn null_out_parameters_are_einval() {
    let name = CString::new(format!("/latte-null-outs-{}", std::process::id())).unwrap();
    assert_eq!(latte_init_shared_region(name.as_ptr()), 0);
    for _ in 0..10 {
        span(c"null.outs", LATTE_MODE_FAST, LATTE_MODE_FAST);
    }

    // The reader: slots and read.
    let mut r = core::ptr::null_mut();
    assert_eq!(latte_reader_open(name.as_ptr(), &mut r), 0);
    let mut slots = [latte_slot_info::default(); 8];
    let mut n = 0usize;
    assert_eq!(latte_reader_slots(r, slots.as_mut_ptr(), slots.len(), core::ptr::null_mut()), -libc::EINVAL);
    assert_eq!(latte_reader_slots(r, core::ptr::null_mut(), 8, &mut n), -libc::EINVAL, "a NULL buffer with room claimed");
    assert_eq!(latte_reader_slots(r, core::ptr::null_mut(), 0, &mut n), -libc::ERANGE, "a size query");
    assert_eq!(latte_reader_slots(r, slots.as_mut_ptr(), slots.len(), &mut n), 0);
    let slot = slots[..n].iter().find(|s| s.write_idx == 10).expect("the slot of null.outs").index;
    let mut cur = latte_cursor::default();
    let mut out = [latte_raw_sample::default(); 16];
    assert_eq!(latte_reader_read(r, slot, &mut cur, out.as_mut_ptr(), out.len(), core::ptr::null_mut()), -libc::EINVAL);
    assert_eq!((cur.next, cur.read, cur.lost), (0, 0, 0), "the cursor did not move");
    let mut got = 0usize;
    assert_eq!(latte_reader_read(r, slot, &mut cur, out.as_mut_ptr(), out.len(), &mut got), 0);
    assert_eq!(got, 10, "every sample is still there to read");
    let mut info = Default::default();
    assert_eq!(latte_reader_get_info(r, core::ptr::null_mut()), -libc::EINVAL);
    assert_eq!(latte_reader_get_info(r, &mut info), 0);
    latte_reader_close(r);

    // The process's own samples.
    let mut buf = [0u64; 64];
    assert_eq!(latte_samples_snapshot(c"null.outs".as_ptr(), buf.as_mut_ptr(), buf.len(), core::ptr::null_mut()), -libc::EINVAL);
    assert_eq!(latte_samples_snapshot(c"null.outs".as_ptr(), buf.as_mut_ptr(), buf.len(), &mut n), 0);
    assert_eq!(n, 10);
    assert_eq!(latte_samples_extract(core::ptr::null_mut(), 0, core::ptr::null_mut()), -libc::EINVAL);

    // Fixed outputs.
    let mut o9 = [0f64; 9];
    let mut p = 0f64;
    assert_eq!(latte_calibration_get_overheads(o9.as_mut_ptr(), core::ptr::null_mut()), -libc::EINVAL);
    assert_eq!(latte_calibration_get_overheads(core::ptr::null_mut(), &mut p), -libc::EINVAL);
    assert_eq!(latte_calibration_get_overheads(o9.as_mut_ptr(), &mut p), 0);
    let v = [1.0f64, 2.0, 3.0];
    let (mut vals, mut kept, mut outl, mut cut, mut has) = ([0f64; 3], 0usize, 0usize, 0f64, 0i32);
    assert_eq!(latte_samples_clean(v.as_ptr(), 3, vals.as_mut_ptr(), core::ptr::null_mut(), &mut outl, &mut cut, &mut has), -libc::EINVAL);
    assert_eq!(latte_samples_clean(v.as_ptr(), 3, core::ptr::null_mut(), &mut kept, &mut outl, &mut cut, &mut has), -libc::EINVAL);
    assert_eq!(latte_samples_clean(v.as_ptr(), 3, vals.as_mut_ptr(), &mut kept, &mut outl, &mut cut, &mut has), 0);
    assert_eq!(kept, 3);
    let _ = std::fs::remove_file(format!("/dev/shm{}", name.to_str().unwrap()));
}
