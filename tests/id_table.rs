//! A region made with an ID limit (`id_capacity` 256) takes 256 names; the
//! 257th gets no token and what is recorded under it is dropped and
//! counted.

mod common;
use common::*;
use latte::layout::*;
use std::ffi::CString;

#[test]
fn the_257th_id_does_not_fit() {
    let region = format!("/latte-id-limit-{}", std::process::id());
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 4, samples_per_slot: 1024, id_capacity: 256, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(region.as_bytes(), &cfg).unwrap();
    let names: Vec<CString> = (0..257).map(|k| CString::new(format!("id-{k}")).unwrap()).collect();
    for (k, n) in names.iter().take(256).enumerate() {
        assert_eq!(latte::internals::ffi::latte_intern_id(n.as_ptr()), k as u32);
    }
    assert_eq!(latte::internals::ffi::latte_intern_id(names[256].as_ptr()), LATTE_INVALID_ID);
    // Known IDs still record; the unknown one is dropped and counted.
    span(&names[5], LATTE_MODE_FAST, LATTE_MODE_FAST);
    span(&names[256], LATTE_MODE_FAST, LATTE_MODE_FAST);
    span(&names[256], LATTE_MODE_FAST, LATTE_MODE_FAST);
    assert_eq!(snapshot(&names[5]).len(), 1);
    assert!(snapshot(&names[256]).is_empty());
    assert_eq!(counters().unfit_id_drops, 2);
    assert_eq!(thread_counters().dropped, 2);
    // The inline path's slow path: a sink ring (never NULL), never cached,
    // so that each span under the unfit ID is counted; a Stop writes into
    // the sink, and nothing reads it.
    let me = latte::internals::recorder::current();
    let sink = latte::internals::ffi::latte_internal_thread_resolve_v3(me, names[256].as_ptr());
    assert_ne!(sink, 0);
    assert_eq!(latte::internals::ffi::latte_internal_thread_resolve_v3(me, names[256].as_ptr()), sink);
    assert_eq!(counters().unfit_id_drops, 4);
    // SAFETY: `me` is this thread's active state.
    let t = unsafe { &mut *me };
    for _ in 0..70_000 {
        // SAFETY: a NUL-terminated ID.
        unsafe { latte::internals::recorder::start(t, names[256].as_ptr(), LATTE_MODE_FAST) };
        latte::internals::recorder::stop(t, LATTE_MODE_FAST);
    }
    assert_eq!(counters().unfit_id_drops, 70_004);
    assert!(snapshot(&names[256]).is_empty());
    // Calibration needs no ID of the table (its own ring): it runs, and
    // drops nothing.
    assert_eq!(latte::internals::ffi::latte_calibration_run(), 0);
    assert_eq!(counters().unfit_id_drops, 70_004);
    let r = latte::internals::api::own_report(LATTE_UNIT_CYCLE, LATTE_DATA_RAW).unwrap();
    assert!(r.contains("id-5"));
    latte::shm::unlink(region.as_bytes()).unwrap();
}
