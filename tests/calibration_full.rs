//! Calibration has its own place: in a region whose IDs are all taken, it
//! records, measures and publishes its overheads without taking a slot or
//! an ID and without raising any of the region's counters; a report of a
//! region that never calibrated says so instead of showing zeros.

mod common;
use common::*;
use latte::internals::ffi::*;
use latte::layout::*;

#[test]
fn calibration_in_a_full_region_touches_nothing_of_the_program() {
    let name = format!("/latte-test-calfull-{}", std::process::id());
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 2, samples_per_slot: 1024, id_capacity: 2, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
    span(c"full.a", LATTE_MODE_FAST, LATTE_MODE_FAST);
    span(c"full.b", LATTE_MODE_FAST, LATTE_MODE_FAST);
    // Every ID the region takes is taken: a third is dropped (counted once).
    span(c"full.c", LATTE_MODE_FAST, LATTE_MODE_FAST);
    let before = counters();
    assert_eq!((before.slots_used, before.unfit_id_drops), (2, 1));

    // Uncalibrated: a calibrated view says so, with no matrix of zeros.
    let v = latte::internals::extract::own_view().unwrap();
    let cal = v.calibration();
    assert!(!cal.calibrated);
    let rows = latte::report::rows_of_view(&v, LATTE_DATA_CALIBRATED, &cal).unwrap();
    let opts = latte::report::Options { unit: LATTE_UNIT_CYCLE, data: LATTE_DATA_CALIBRATED, extended: true, color: false, max_width: None };
    let text = latte::report::render(&rows, &opts, &cal, None);
    assert!(text.contains("NOT CALIBRATED") && !text.contains("SELF-OFFSET"), "{text}");

    assert_eq!(latte_calibration_run(), 0);
    let after = counters();
    assert_eq!(
        (after.slots_used, after.ids_used, after.no_slot_drops, after.unfit_id_drops, after.overflow_starts, after.orphan_stops),
        (before.slots_used, before.ids_used, before.no_slot_drops, before.unfit_id_drops, before.overflow_starts, before.orphan_stops),
        "calibration touched the program's counters"
    );
    let (mut o9, mut p) = ([0f64; 9], 0f64);
    assert_eq!(latte_calibration_get_overheads(o9.as_mut_ptr(), &mut p), 0);
    assert!(o9.iter().all(|&x| x > 0.0) && p > 0.0, "calibrated in a full region: {o9:?} {p}");
    let r = latte::internals::api::own_report(LATTE_UNIT_CYCLE, LATTE_DATA_CALIBRATED).unwrap();
    assert!(r.contains("SELF-OFFSET") && !r.contains("NOT CALIBRATED"), "{r}");
    // The program's own samples are all still there.
    assert_eq!((snapshot(c"full.a").len(), snapshot(c"full.b").len()), (1, 1));
    let _ = latte_region_unlink(std::ffi::CString::new(name).unwrap().as_ptr());
}
