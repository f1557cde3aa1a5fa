//! Two threads pinned to one CPU, both spinning: each is preempted by the
//! other, and the diff says so (preempted time, preemptions). Its own test
//! binary with one test, so that nothing else runs beside it.

use latte::internals::ffi::*;
use latte::internals::sched::*;

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: as above; `cpu` is below CPU_SETSIZE (checked by the caller).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is valid for its size; 0 = the calling thread.
    assert_eq!(unsafe { libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set) }, 0);
}

/// The first CPU this process may run on.
fn first_allowed_cpu() -> usize {
    // SAFETY: as in `pin`.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: `set` is valid for its size.
    assert_eq!(unsafe { libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set) }, 0);
    // SAFETY: reads inside the set.
    (0..libc::CPU_SETSIZE as usize).find(|&c| unsafe { libc::CPU_ISSET(c, &set) }).unwrap()
}

/// Spins on one CPU next to another spinning thread for `windows` windows
/// of 20 ms (each well within what the ring holds); returns the diffs over
/// them summed.
fn spin_pinned(cpu: usize, windows: u32, start: &std::sync::Barrier) -> latte_sched_delta {
    pin(cpu);
    assert_eq!(latte_sched_enable(), 0);
    start.wait();
    let mut sum = latte_sched_delta::default();
    let mut a = latte_sched_point::default();
    assert_eq!(latte_sched_snap(&mut a), 0);
    sum.first_cpu = a.cpu;
    let id = c"sched.pinned";
    let mut flagged = Vec::new();
    for _ in 0..windows {
        // Each window a span: it is flagged when the thread was switched out in it.
        latte::internals::ffi::latte_start(id.as_ptr(), 0);
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed().as_millis() < 20 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        latte::internals::ffi::latte_stop(id.as_ptr(), 0);
        let mut b = latte_sched_point::default();
        assert_eq!(latte_sched_snap(&mut b), 0);
        let mut d = latte_sched_delta::default();
        let rc = latte_sched_diff(&a, &b, &mut d);
        assert_eq!(rc, 0, "{d:?}");
        flagged.push((d.switch_outs, d.preempted_ns));
        sum.wall_ns += d.wall_ns;
        sum.on_cpu_ns += d.on_cpu_ns;
        sum.off_cpu_ns += d.off_cpu_ns;
        sum.preempted_ns += d.preempted_ns;
        sum.blocked_ns += d.blocked_ns;
        sum.switch_outs += d.switch_outs;
        sum.preemptions += d.preemptions;
        sum.migrations += d.migrations;
        sum.cpus = sum.cpus.max(d.cpus);
        sum.last_cpu = d.last_cpu;
        a = b;
    }
    // This thread's spans, in order: a flagged one was switched out (its
    // window's diff, which brackets it, counts a switch-out).
    let mine = own_flags(latte::internals::ffi::latte_intern_id(id.as_ptr()));
    assert_eq!(mine.len(), windows as usize);
    for (f, (outs, pre)) in mine.iter().zip(&flagged) {
        assert!(!f || (*outs >= 1 && *pre > 0), "a flagged span whose window saw no preemption");
    }
    let nf = mine.iter().filter(|&&f| f).count();
    println!("{nf} of {windows} spans flagged");
    assert!(nf >= 1, "spinning beside another thread on one CPU, no span was switched out");
    sum
}

/// This thread's samples under `token`, in ring order.
fn own_flags(token: u32) -> Vec<bool> {
    let view = latte::internals::extract::own_view().unwrap();
    let tid = latte::internals::tsc::gettid();
    let slots = latte::internals::extract::collect(&view, Some(token)).unwrap();
    let (_, raw) = slots.into_iter().find(|(s, _)| s.os_tid == tid).unwrap();
    raw.iter().map(|r| r.decode().switched).collect()
}
#[test]
fn two_threads_on_one_cpu_preempt_each_other() {
    let cpu = first_allowed_cpu();
    let start = std::sync::Arc::new(std::sync::Barrier::new(2));
    let s2 = start.clone();
    let other = std::thread::spawn(move || spin_pinned(cpu, 15, &s2));
    let mine = spin_pinned(cpu, 15, &start);
    let theirs = other.join().unwrap();
    for d in [mine, theirs] {
        println!("{}", latte::internals::ffi::delta_line(&d));
        assert!(d.preemptions >= 1 && d.preempted_ns > 0, "{d:?}");
        assert!(d.preemptions <= d.switch_outs);
        assert_eq!(d.on_cpu_ns + d.preempted_ns + d.blocked_ns, d.wall_ns);
        assert_eq!((d.first_cpu, d.last_cpu, d.cpus, d.migrations), (cpu as u32, cpu as u32, 1, 0), "pinned");
    }
}
