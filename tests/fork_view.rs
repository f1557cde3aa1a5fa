//! A fork child's view is the region as it stood at the fork, whatever the
//! parent records meanwhile: a producer thread of the parent writes samples
//! that encode their own index (about one per 100 ns, in bursts of 100)
//! while the main thread forks. A child fork handler registered before
//! latte's sleeps 50 ms, so that latte's copy runs long after the parent
//! went on recording. The child must see a write index between the
//! producer's count just before the fork and just after it, only samples
//! that are exactly the ones written at their index (those the parent may
//! have overwritten meanwhile are counted lost), and read + lost == index.

mod common;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn encode(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5A5A
}

extern "C" fn slow_child() {
    std::thread::sleep(std::time::Duration::from_millis(50));
}

#[test]
fn a_fork_child_sees_the_region_as_at_the_fork() {
    // Before latte installs its own: child handlers run in the order
    // registered, so this one runs first.
    // SAFETY: a valid extern "C" function without arguments.
    assert_eq!(unsafe { libc::pthread_atfork(None, None, Some(slow_child)) }, 0);
    let name = format!("/latte-test-forkview-{}", std::process::id());
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 8, samples_per_slot: 65536, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
    let count = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let t = latte::internals::recorder::current();
            // SAFETY: this thread's own state.
            let t = unsafe { &mut *t };
            // SAFETY: a static NUL-terminated ID.
            let slot = latte::layout::ring_ptr(unsafe { latte::internals::recorder::resolve(t, c"fork.view".as_ptr()) });
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..100 {
                    // SAFETY: this thread's own slot and its region's mask.
                    unsafe { latte::internals::recorder::write_sample(slot, t.sample_mask, i, encode(i)) };
                    i += 1;
                    // Release: the sample is written before the count says so.
                    count.store(i, Ordering::Release);
                }
                std::hint::spin_loop();
            }
        });
        // Acquire: pairs with the producer's release.
        while count.load(Ordering::Acquire) < 100_000 {
            std::thread::yield_now();
        }
        let mut pipe = [0i32; 2];
        // SAFETY: a pipe for the child's write index.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        let before = count.load(Ordering::Acquire);
        // SAFETY: the child only reads its own view, writes to the pipe and _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let (code, w) = child_check(before);
            // SAFETY: our pipe end, 8 bytes from a local.
            unsafe { libc::write(pipe[1], w.to_ne_bytes().as_ptr() as *const libc::c_void, 8) };
            // SAFETY: leave the child at once.
            unsafe { libc::_exit(code) };
        }
        let after = count.load(Ordering::Acquire);
        let mut st = 0;
        // SAFETY: our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
        stop.store(true, Ordering::Relaxed);
        let mut b = [0u8; 8];
        // SAFETY: our pipe end, into a local of 8 bytes.
        let got = unsafe { libc::read(pipe[0], b.as_mut_ptr() as *mut libc::c_void, 8) };
        let w = u64::from_ne_bytes(b);
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "child check failed (status {st}); write index {w}, count before the fork {before}");
        assert_eq!(got, 8);
        // The cut lies between the count read just before the fork and the
        // one read just after it (the count trails the index by at most one
        // sample): nothing the parent wrote during the child's 50 ms shows.
        assert!(
            before <= w && w <= after + 1,
            "the child's write index {w} is not between {before} and {after} (+1): it shows what the parent wrote after the fork"
        );
    });
    let _ = latte::internals::ffi::latte_region_unlink(std::ffi::CString::new(name).unwrap().as_ptr());
}

/// In the child: (0, its write index of `fork.view`) when every sample it
/// reads is exactly the one written at its index and read + lost equals
/// that index; else a code naming the check that failed.
fn child_check(before: u64) -> (i32, u64) {
    let Some(v) = latte::internals::extract::own_view() else { return (10, 0) };
    let Ok(ids) = v.ids() else { return (11, 0) };
    let Some(tok) = ids.iter().find(|i| latte::name::name_bytes(&i.name) == b"fork.view").map(|i| i.token) else { return (12, 0) };
    let Ok(slots) = v.slots() else { return (13, 0) };
    let Some(s) = slots.iter().find(|s| s.id_token == tok) else { return (14, 0) };
    let mut cur = latte::reader::latte_cursor::default();
    let mut out = Vec::new();
    let Ok(r) = v.read_slot(s.index, &mut cur, &mut out, latte::ReadMode::Final) else { return (15, 0) };
    let w = s.write_idx;
    if w < before {
        return (20, w);
    }
    if r.read + r.lost != w {
        eprintln!("child: read {} + lost {} != write index {w}", r.read, r.lost);
        return (21, w);
    }
    let first = cur.next - r.read;
    for (k, x) in out.iter().enumerate() {
        let j = first + k as u64;
        if x.start_tsc != j || x.packed != encode(j) {
            eprintln!("child: torn or later sample at index {j}");
            return (22, w);
        }
    }
    (0, w)
}
