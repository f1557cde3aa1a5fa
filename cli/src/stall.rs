//! A reading thread's stalls: the time it was kept off its CPU, during
//! which a busy ring may lap (what is overwritten is counted lost). Counted
//! by `latte record`'s following thread (`reader_stalled_seconds`) and
//! `latte serve`'s reading thread
//! (`latte_serve_reader_stalled_seconds_total`).
//!
//! A stall is a stretch between two wake-ups of the thread (a pass and the
//! wait after it; for `record`, also its last pass and the drain after it,
//! unless the producer had exited) in which it was kept off its CPU for
//! more than [`STALL`] in all: the longer of the time it waited on the run
//! queue while runnable, its waits added up (the kernel's figure,
//! `/proc/thread-self/schedstat`, which counts a thread preempted in the
//! middle of a pass as well as one woken late: either delays the pass, and
//! so every ring's next read), and how much later than it asked it woke up
//! (which also counts a late timer, and a host's pause of the vCPU during
//! the sleep; a pause in the middle of a pass is in neither). Where the
//! kernel keeps no such figure, only the late wake-ups count.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// A stretch in which the thread was kept off its CPU this long or less is
/// not a stall: a busy ring laps in about 1.5 ms.
pub const STALL: Duration = Duration::from_millis(1);

/// The calling thread's stall meter. Made on the thread it measures (the
/// file it reads is that thread's).
pub struct Stalls {
    /// `/proc/thread-self/schedstat` of the thread; None where the kernel
    /// keeps no scheduler statistics.
    schedstat: Option<File>,
    /// The thread's run-queue wait at the last wake-up, in nanoseconds.
    waited_ns: u64,
}

impl Stalls {
    /// A meter for the calling thread, from now.
    pub fn new() -> Stalls {
        let schedstat = File::open("/proc/thread-self/schedstat").ok();
        let mut s = Stalls { schedstat, waited_ns: 0 };
        s.waited_ns = s.run_queue_ns().unwrap_or(0);
        s
    }

    /// The thread's run-queue wait so far (the file's second field).
    fn run_queue_ns(&mut self) -> Option<u64> {
        let mut buf = [0u8; 96];
        let n = self.schedstat.as_ref()?.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>());
        // A running thread has used some CPU: a 0 there means the kernel
        // keeps no figures (scheduler statistics off), not no wait.
        let (Some(Ok(ran_ns)), Some(Ok(waited_ns))) = (fields.next(), fields.next()) else {
            return None;
        };
        (ran_ns > 0).then_some(waited_ns)
    }

    /// At a wake-up that was asked for at `asked` (None for a wake-up by
    /// an event): the stall since the last wake-up, if there was one.
    pub fn at_wake_up(&mut self, asked: Option<Instant>) -> Option<Duration> {
        let late = asked.map_or(Duration::ZERO, |a| Instant::now().saturating_duration_since(a));
        let waited = match self.run_queue_ns() {
            Some(now) => Duration::from_nanos(now.saturating_sub(std::mem::replace(&mut self.waited_ns, now))),
            None => Duration::ZERO,
        };
        stall_of(late, waited)
    }
}

/// The stall of a stretch in which the thread woke up `late` and waited
/// `waited` on the run queue: the longer of the two (a late wake-up is
/// most often run-queue wait too), when it is more than [`STALL`].
fn stall_of(late: Duration, waited: Duration) -> Option<Duration> {
    Some(late.max(waited)).filter(|d| *d > STALL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_the_longer_figure_past_a_millisecond() {
        let ms = Duration::from_millis;
        assert_eq!(stall_of(Duration::ZERO, Duration::ZERO), None);
        assert_eq!(stall_of(STALL, STALL), None);
        assert_eq!(stall_of(ms(3), ms(2)), Some(ms(3)));
        assert_eq!(stall_of(Duration::ZERO, ms(2)), Some(ms(2)));
        assert_eq!(stall_of(ms(2), ms(2)), Some(ms(2)), "counted once");
    }

    #[test]
    fn a_late_wake_up_is_a_stall() {
        let mut s = Stalls::new();
        let asked = Instant::now();
        std::thread::sleep(STALL * 3);
        let d = s.at_wake_up(Some(asked)).expect("3 ms late");
        assert!(d >= STALL * 3);
    }

    /// The first CPU the calling thread may run on.
    fn first_allowed_cpu() -> usize {
        // SAFETY: an all-zero cpu_set_t is an empty set; sched_getaffinity
        // fills it, CPU_ISSET reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
            (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)).expect("some CPU is allowed")
        }
    }

    /// Pins the calling thread to `cpu`.
    fn pin_to(cpu: usize) {
        // SAFETY: an all-zero cpu_set_t is an empty set; CPU_SET and
        // sched_setaffinity take valid pointers to it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set), 0);
        }
    }

    #[test]
    fn a_thread_preempted_in_a_pass_is_stalled() {
        // A pass that spins 40 ms on a CPU it shares with a spinning
        // thread waits on the run queue for a good part of it, and wakes
        // up on time: only the kernel's run-queue figure sees the stall.
        let cpu = first_allowed_cpu();
        pin_to(cpu);
        let mut s = Stalls::new();
        if s.run_queue_ns().is_none() {
            // Not a failure: the product then counts late wake-ups only.
            eprintln!("not run: this kernel keeps no run-queue figure (/proc/thread-self/schedstat)");
            return;
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let rival = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin_to(cpu);
                // Relaxed: the flag alone.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {}
            })
        };
        let until = Instant::now() + Duration::from_millis(40);
        while Instant::now() < until {}
        let stall = s.at_wake_up(None);
        // Relaxed: the flag alone.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        rival.join().unwrap();
        assert!(stall.is_some_and(|d| d > STALL), "{stall:?}");
    }
}
