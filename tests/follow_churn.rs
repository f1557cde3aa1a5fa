//! The `Follower` over rings that go from thread to thread faster than it
//! looks: a region of 4 rings, 1,000 threads one after another, 300 spans
//! each, looked at every 20 ms. Most owners live and end between two
//! looks; what they wrote is counted lost in the ring's incarnation seen
//! last, so that over every incarnation `read + lost == recorded ==` the
//! 300,000 spans written, and each incarnation's own `read + lost ==
//! recorded()`.

mod common;
use common::*;
use latte::follow::{FollowOptions, Follower};
use latte::layout::*;

const THREADS: u64 = 1_000;
const SPANS: u64 = 300;

#[test]
fn threads_that_live_between_two_looks_are_counted() {
    let name = format!("/latte-follow-churn-{}", std::process::id());
    let cfg =
        latte::internals::region::latte_region_config { slot_capacity: 4, samples_per_slot: 1024, id_capacity: 0, mode: 0o600, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
    span(c"churn.init", LATTE_MODE_FAST, LATTE_MODE_FAST);
    let mut m = latte::Mapping::open_shm(name.as_bytes()).unwrap();
    let mut f = Follower::new(FollowOptions::default());
    let mut sink_read = 0u64;
    let mut sink = |_: &latte::follow::Incarnation, s: &[latte::reader::latte_raw_sample]| sink_read += s.len() as u64;
    f.poll(&m.view(), &mut sink).unwrap();
    let writer = std::thread::spawn(|| {
        for _ in 0..THREADS {
            std::thread::spawn(|| {
                for _ in 0..SPANS {
                    span(c"churn.span", LATTE_MODE_FAST, LATTE_MODE_FAST);
                }
            })
            .join()
            .unwrap();
        }
    });
    while !writer.is_finished() {
        m.refresh().unwrap();
        f.poll(&m.view(), &mut sink).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    writer.join().unwrap();
    m.refresh().unwrap();
    let v = m.view();
    f.drain(&v, &mut sink).unwrap();
    let tok = v.ids().unwrap().into_iter().find(|i| latte::name::name_bytes(&i.name) == b"churn.span").unwrap().token;
    let incs: Vec<_> = f.incarnations().into_iter().filter(|i| i.id_token == tok).collect();
    for i in &incs {
        assert_eq!(i.read + i.lost, i.recorded(), "{i:?}");
    }
    let (read, lost, unseen): (u64, u64, u64) = incs.iter().fold((0, 0, 0), |a, i| (a.0 + i.read, a.1 + i.lost, a.2 + i.unseen));
    let _ = latte::internals::ffi::latte_region_unlink(std::ffi::CString::new(name).unwrap().as_ptr());
    eprintln!("churn: {} incarnations seen of {THREADS} threads; read {read} lost {lost} (unseen {unseen})", incs.len());
    assert_eq!(read + lost, THREADS * SPANS, "every span is read or counted lost");
    assert_eq!(sink_read, read + incs.iter().filter(|i| i.id_token != tok).map(|i| i.read).sum::<u64>());
    assert!((incs.len() as u64) < THREADS, "the test meant owners no look saw: {} incarnations", incs.len());
}
