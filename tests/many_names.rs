//! 100,000 distinct ID names of up to 1,024 bytes in one process: each is
//! recorded, read back whole from the live region by another mapping (as a
//! reader process would), in the report of the live region, and from a
//! flushed image, and nothing is dropped.
//! The region starts with 16 slots and grows by chunks as the IDs need them.

mod common;
use common::*;
use latte::layout::*;
use latte::reader::{latte_cursor, Mapping, View};
use std::collections::HashMap;
use std::ffi::CString;

const N: usize = 100_000;

/// The name of ID `k`: lengths from 1 to 1,024 bytes, all distinct.
fn name(k: usize) -> String {
    let len = 1 + (k * 7919) % 1024;
    let tag = format!("{k}:");
    let mut s = tag.clone();
    while s.len() < len.max(tag.len()) {
        s.push((b'a' + (s.len() % 26) as u8) as char);
    }
    s
}

/// Every name and every slot of `v`: each ID has one slot holding one
/// sample, and its name is whole.
fn check(v: &View<'_>, what: &str) {
    let ids = v.ids().unwrap();
    let by_token: HashMap<u32, Vec<u8>> = ids.into_iter().map(|i| (i.token, i.name)).collect();
    let slots = v.slots().unwrap();
    assert_eq!(slots.len(), N, "{what}: slots");
    let mut seen = vec![false; N];
    for s in &slots {
        let n = String::from_utf8(by_token[&s.id_token].clone()).unwrap();
        let k: usize = n.split(':').next().unwrap().parse().unwrap();
        assert_eq!(n, name(k), "{what}: name {k} kept whole");
        assert!(!seen[k], "{what}: one slot per ID");
        seen[k] = true;
        let mut cur = latte_cursor::default();
        let mut out = Vec::new();
        v.read_slot(s.index, &mut cur, &mut out, latte::ReadMode::Live).unwrap();
        assert_eq!((out.len(), cur.lost), (1, 0), "{what}: ID {k}");
    }
}

#[test]
fn a_hundred_thousand_names_recorded_read_live_and_flushed_whole() {
    let region = format!("/latte-many-names-{}", std::process::id());
    // Small rings: 100,000 of them in about 40 MB.
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 16, samples_per_slot: 16, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(region.as_bytes(), &cfg).unwrap();
    let ids: Vec<CString> = (0..N).map(|k| CString::new(name(k)).unwrap()).collect();
    for id in &ids {
        span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
    }
    let c = counters();
    assert_eq!((c.unfit_id_drops, c.no_slot_drops, c.slots_used as usize), (0, 0, N));
    // Live, through a mapping of the object, as another process reads it.
    let m = Mapping::open_shm(region.as_bytes()).unwrap();
    check(&m.view(), "live");
    // The report of the live region (what `latte stats` prints): a row per
    // name, whole, with its one sample.
    let rows = latte::report::rows_of_view(&m.view(), LATTE_DATA_RAW, &latte::reader::Calibration::default()).unwrap();
    assert_eq!(rows.len(), N, "report: a row per ID");
    let mut seen = vec![false; N];
    for r in &rows {
        let k: usize = r.name.split(':').next().unwrap().parse().unwrap();
        assert_eq!((r.name.as_str(), r.summary.count, r.lost), (name(k).as_str(), 1, 0), "report: ID {k}");
        assert!(!seen[k], "report: one row per ID");
        seen[k] = true;
    }
    // A flushed image.
    let path = std::env::temp_dir().join(format!("latte-many-names-{}.img", std::process::id()));
    let f = std::fs::File::create(&path).unwrap();
    use std::os::fd::AsRawFd;
    assert_eq!(latte::internals::ffi::latte_flush_sync(f.as_raw_fd(), LATTE_UNIT_CYCLE), 0);
    let img = Mapping::open_file(&path).unwrap();
    check(&img.view(), "flushed");
    std::fs::remove_file(&path).unwrap();
    latte::shm::unlink(region.as_bytes()).unwrap();
}
