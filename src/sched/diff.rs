//! Where a thread's time went between two points: the switch records
//! between them split into on-CPU, preempted and blocked time.

use super::perf::{self, Ring, Window};
use super::{latte_sched_delta, latte_sched_point, with_thread};
use crate::error::Error;

/// Where the calling thread's time went between two of its points. Err:
/// `-EINVAL` for points of another ring (another thread's, or this one's
/// before a fork) or out of order; `LATTE_ERR_SCHED_LOST` with the delta
/// (its `lost` set) when records were overwritten.
pub fn diff(a: &latte_sched_point, b: &latte_sched_point) -> Result<latte_sched_delta, (Error, latte_sched_delta)> {
    let bad = |e| Err((e, latte_sched_delta::default()));
    if a.ring == 0 || a.ring != b.ring || b.head < a.head || b.mono_ns < a.mono_ns {
        return bad(Error::INVAL);
    }
    let res = with_thread(|t| match t.ring.as_ref() {
        Some(r) if t.id == a.ring => Some(split(r, a, b)),
        _ => None,
    });
    match res {
        Some(Some(d)) if d.lost == 0 => Ok(d),
        Some(Some(d)) => Err((Error::SchedLost, d)),
        Some(None) => bad(Error::INVAL),
        None => bad(Error::BUSY),
    }
}

/// CPUs seen, as a bit set of the first [`CpuSet::CPUS`] (CPUs beyond it
/// are counted by their changes only).
struct CpuSet {
    words: [u64; CpuSet::WORDS],
    /// CPUs in the set.
    count: u32,
}

impl CpuSet {
    /// Words of the set.
    const WORDS: usize = 64;
    /// CPUs the set holds.
    const CPUS: u32 = CpuSet::WORDS as u32 * u64::BITS;

    fn new() -> CpuSet {
        CpuSet { words: [0; CpuSet::WORDS], count: 0 }
    }

    fn add(&mut self, cpu: u32) {
        if cpu >= CpuSet::CPUS {
            return;
        }
        let (w, b) = ((cpu / u64::BITS) as usize, cpu % u64::BITS);
        if self.words[w] & (1 << b) == 0 {
            self.words[w] |= 1 << b;
            self.count += 1;
        }
    }
}

/// Walks the switch records between two points of ring `r`.
fn split(r: &Ring, a: &latte_sched_point, b: &latte_sched_point) -> latte_sched_delta {
    let (t0, t1) = (a.mono_ns, b.mono_ns);
    let mut d = latte_sched_delta { wall_ns: t1 - t0, cycles: b.tsc.wrapping_sub(a.tsc), first_cpu: a.cpu, last_cpu: b.cpu, ..Default::default() };
    let mut cpus = CpuSet::new();
    cpus.add(a.cpu);
    let mut cpu = a.cpu;
    // Record times lie within the points' up to the order of the reads in
    // `snap`; clamping keeps the parts summing to the wall time.
    let mut running_since = Some(t0);
    let mut off_since: Option<(u64, bool)> = None;
    let window = r.read(a.head, b.head, |rec| {
        let t = rec.time.clamp(t0, t1);
        if rec.cpu != cpu {
            d.migrations += 1;
            cpu = rec.cpu;
        }
        cpus.add(rec.cpu);
        if rec.header.misc & perf::MISC_SWITCH_OUT != 0 {
            if let Some(s) = running_since.take() {
                d.on_cpu_ns += t - s;
            }
            let preempted = rec.header.misc & perf::MISC_SWITCH_OUT_PREEMPT != 0;
            d.switch_outs += 1;
            d.preemptions += preempted as u32;
            off_since = Some((t, preempted));
        } else {
            if let Some((s, preempted)) = off_since.take() {
                if preempted {
                    d.preempted_ns += t - s;
                } else {
                    d.blocked_ns += t - s;
                }
            }
            running_since.get_or_insert(t);
        }
    });
    if b.cpu != cpu {
        d.migrations += 1;
    }
    cpus.add(b.cpu);
    d.cpus = cpus.count;
    if window == Window::Lost {
        return latte_sched_delta { lost: 1, on_cpu_ns: 0, preempted_ns: 0, blocked_ns: 0, switch_outs: 0, preemptions: 0, migrations: 0, ..d };
    }
    if let Some(s) = running_since {
        d.on_cpu_ns += t1 - s;
    }
    if let Some((s, preempted)) = off_since {
        if preempted {
            d.preempted_ns += t1 - s;
        } else {
            d.blocked_ns += t1 - s;
        }
    }
    d.off_cpu_ns = d.preempted_ns + d.blocked_ns;
    d
}
