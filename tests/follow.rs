//! The `Follower` against this process's own region: a thread records more
//! than a ring's worth of spans while the follower follows; for its ring,
//! `read + lost == recorded == written`, the sink got exactly `read`
//! samples, in order, none twice; and a thread that exits is seen closed.

mod common;
use common::*;
use latte::follow::{FollowOptions, Follower};
use latte::internals::extract::own_view;
use latte::layout::*;
use std::sync::{Arc, Barrier};

#[test]
fn a_thread_writing_more_than_a_ring_is_followed_exactly() {
    const WRITTEN: u64 = 300_000; // more than 4 rings of 65,536
    span(c"follow-init", LATTE_MODE_FAST, LATTE_MODE_FAST); // the region exists
    let v = own_view().unwrap();
    let mut f = Follower::new(FollowOptions::default());
    let go = Arc::new(Barrier::new(2));
    let g = go.clone();
    let writer = std::thread::spawn(move || {
        g.wait();
        for _ in 0..WRITTEN {
            span(c"follow-fast", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    });
    let mut got: Vec<(u32, u64)> = Vec::new(); // (slot, start_tsc) handed to the sink
    let mut sink = |inc: &latte::follow::Incarnation, s: &[latte::reader::latte_raw_sample]| got.extend(s.iter().map(|x| (inc.slot, x.start_tsc)));
    f.poll(&v, &mut sink).unwrap();
    go.wait();
    while !writer.is_finished() {
        let wait = f.poll(&v, &mut sink).unwrap();
        std::thread::sleep(std::time::Duration::from_nanos(wait));
    }
    let tid = writer.join().unwrap();
    f.drain(&v, &mut sink).unwrap();
    let tok = v.ids().unwrap().into_iter().find(|i| latte::name::name_bytes(&i.name) == b"follow-fast").unwrap().token;
    let incs: Vec<_> = f.incarnations().into_iter().filter(|i| i.id_token == tok && i.os_tid == tid).collect();
    assert_eq!(incs.len(), 1, "{incs:?}");
    let i = incs[0];
    assert_eq!((i.start_idx, i.end_idx), (0, WRITTEN), "{i:?}");
    assert_eq!(i.read + i.lost, WRITTEN, "{i:?}");
    assert!(i.closed && !i.tail_unknown, "the thread exited and its ring was read to the end: {i:?}");
    let mine: Vec<u64> = got.iter().filter(|(s, _)| *s == i.slot).map(|(_, t)| *t).collect();
    assert_eq!(mine.len() as u64, i.read);
    assert!(mine.windows(2).all(|w| w[0] < w[1]), "in order, none twice");
    eprintln!("follow: read {} lost {} of {WRITTEN}", i.read, i.lost);
}
