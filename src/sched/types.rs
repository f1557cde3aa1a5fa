//! The C types and status values of switch tracking (`latte.h` carries
//! them).

/// `latte_sched_status`: tracking is not enabled in this process.
pub const LATTE_SCHED_OFF: i32 = 0;
/// `latte_sched_status`: the calling thread is tracked.
pub const LATTE_SCHED_ON: i32 = 1;
/// `latte_sched_status`: tracking is enabled; the calling thread opens its
/// event at its next slow path (a first Start of an ID, or `latte_sched_snap`).
pub const LATTE_SCHED_PENDING: i32 = 2;

/// `latte_sched_status`: tracking is enabled; the calling thread released
/// its event (`latte_sched_release`) and is not asked again until it calls
/// `latte_sched_enable`.
pub const LATTE_SCHED_RELEASED: i32 = 3;

/// A point in a thread's run: where its switch ring stood, and when.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_sched_point {
    /// The thread's ring position (bytes of switch records ever written).
    pub head: u64,
    /// TSC (`rdtscp`), read after the head.
    pub tsc: u64,
    /// CLOCK_MONOTONIC in ns, read after the TSC: the clock of the records.
    pub mono_ns: u64,
    /// The CPU the thread ran on (from `rdtscp`).
    pub cpu: u32,
    /// Which ring `head` belongs to (unique in the process; never 0).
    pub ring: u32,
}

/// Where a thread's time went between two points.
///
/// `on_cpu_ns + preempted_ns + blocked_ns == wall_ns` when `lost` is 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_sched_delta {
    /// CLOCK_MONOTONIC ns from the first point to the second.
    pub wall_ns: u64,
    /// TSC cycles from the first point to the second.
    pub cycles: u64,
    /// Time the thread was running.
    pub on_cpu_ns: u64,
    /// Time it was switched out: `preempted_ns + blocked_ns`.
    pub off_cpu_ns: u64,
    /// Off-CPU while runnable: preempted by another thread.
    pub preempted_ns: u64,
    /// Off-CPU while not runnable: sleeping, waiting for I/O, a lock, a page.
    pub blocked_ns: u64,
    /// Times the thread was switched out.
    pub switch_outs: u32,
    /// Of those, preemptions.
    pub preemptions: u32,
    /// Times it resumed on another CPU than it last ran on (the CPUs at both
    /// points included).
    pub migrations: u32,
    /// Distinct CPUs it ran on.
    pub cpus: u32,
    /// The CPU at the first point and at the second.
    pub first_cpu: u32,
    pub last_cpu: u32,
    /// 1 when switch records of the interval were overwritten in the ring
    /// before they were read (more switches than it holds, or read too long
    /// after): only `wall_ns`, `cycles` and the CPUs are known then.
    pub lost: u32,
    pub _pad: u32,
}

/// Process-wide switch tracking counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct latte_sched_counters {
    /// 1 when tracking is enabled in this process.
    pub enabled: u32,
    /// The errno of the last refusal (positive), 0 when none.
    pub last_refusal: i32,
    /// Threads tracked now (an open event).
    pub tracked: u64,
    /// Events ever opened in this process.
    pub opened: u64,
    /// Threads the kernel refused an event, in total and by errno.
    pub refused: u64,
    pub refused_eacces: u64,
    pub refused_eperm: u64,
    pub refused_enosys: u64,
    pub refused_emfile: u64,
    pub refused_enomem: u64,
    pub refused_other: u64,
}
