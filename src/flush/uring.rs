//! The io_uring flush: the plan's writes (`super::Plan`) submitted as
//! SQEs, reaped by `poll`, step after step (the three steps of `super`).
//!
//! Nothing of it waits for ever. A flight during which the kernel completes
//! none of its writes for the stall limit (`STALL_LIMIT`, or
//! `LATTE_FLUSH_STALL_MS`) ends with -ETIMEDOUT at the next `poll`: its
//! writes are cancelled in the kernel (`IORING_OP_ASYNC_CANCEL`), and the
//! flight, whose buffers the kernel may still read, becomes a stray: kept
//! (never freed while a write of it is with the kernel) and reaped, without
//! waiting, by every later call. A stray holds back only a new flush into
//! the same file (-EBUSY: its late writes would land in the new image);
//! one into another file starts at once. `latte_flush_cancel` makes the
//! flight a stray the same way.

use super::*;
use core::sync::atomic::AtomicPtr;
use io_uring::{opcode, types, IoUring};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a flight may go without one of its writes completing before
/// it ends with -ETIMEDOUT: a disk that completes nothing for this long
/// is stuck, not slow.
pub const STALL_LIMIT: Duration = Duration::from_secs(10);
/// The variable that sets the stall limit, in milliseconds (at least 1).
pub const STALL_LIMIT_ENV: &str = "LATTE_FLUSH_STALL_MS";
/// The user_data of an `ASYNC_CANCEL` request (a write's is its index in
/// `Flight::inflight`, far below).
const CANCEL_TAG: u64 = u64::MAX;

enum Step {
    Data,
    SlotHeaders,
    FileHeader,
}

struct Flight {
    ring: IoUring,
    /// The flush's own duplicate of the caller's descriptor.
    fd: std::os::fd::OwnedFd,
    plan: Plan,
    step: Step,
    /// Writes not yet submitted.
    queue: VecDeque<Write>,
    /// Submitted writes by user_data.
    inflight: Vec<Option<Write>>,
    outstanding: usize,
    written: u64,
    /// Step 3's write, kept from `headers` until step 2 is done.
    plan_file_header: Option<Write>,
    /// The target file (device, inode): a stray holds back a new flush
    /// into it only.
    file: (u64, u64),
    /// When a write last completed (or the flight began).
    progress: Instant,
}

// SAFETY: see Plan; the ring is only used under the mutex.
unsafe impl Send for Flight {}

enum State {
    Idle,
    Flying(Box<Flight>),
    Done(u64, u64),
    /// The error, bytes written and to write.
    Failed(Error, u64, u64),
}

/// A process's flush: its state and its strays, the flights that failed,
/// timed out or were cancelled while writes of theirs were with the
/// kernel (their buffers must outlive them).
struct Flushes {
    state: State,
    /// (Moving a flight moves none of the buffers its writes read: those
    /// are region memory or the plan's heap buffers.)
    strays: Vec<Flight>,
}

/// This process's flush. A fork child inherits its parent's memory,
/// ring descriptor and lock state: it never touches them. `this`
/// gives each process a state of its own on first use (the parent's
/// copy is left alone, leaked), so that a child's calls see an idle
/// flush and never reap the parent's completions.
struct Proc {
    pid: u32,
    state: Mutex<Flushes>,
}

static PROC: AtomicPtr<Proc> = AtomicPtr::new(core::ptr::null_mut());

fn this() -> &'static Proc {
    let pid = std::process::id();
    // Acquire: pairs with the release of the exchange below.
    let p = PROC.load(Ordering::Acquire);
    // SAFETY: a non-null PROC points to a leaked, never-freed Proc.
    if let Some(cur) = unsafe { p.as_ref() }.filter(|c| c.pid == pid) {
        return cur;
    }
    let fresh = Box::into_raw(Box::new(Proc { pid, state: Mutex::new(Flushes { state: State::Idle, strays: Vec::new() }) }));
    // AcqRel: publishes the new Proc; sees one another thread installed.
    match PROC.compare_exchange(p, fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: just leaked, never freed.
        Ok(_) => unsafe { &*fresh },
        Err(other) => {
            // SAFETY: ours, never published.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: another thread's leaked Proc (of this process:
            // only this process's threads store into PROC after fork).
            unsafe { &*other }
        }
    }
}

/// The flush, with its strays reaped (without waiting) and dropped once
/// none of their writes is with the kernel.
fn lock() -> std::sync::MutexGuard<'static, Flushes> {
    let mut g = this().state.lock().unwrap_or_else(|p| p.into_inner());
    g.strays.retain_mut(|f| {
        let _ = reap(f);
        f.outstanding > 0
    });
    g
}

/// Ends a flight that will submit nothing more: asks the kernel to cancel
/// its writes still in flight, and keeps it as a stray while any is.
fn retire(g: &mut Flushes, mut f: Box<Flight>) {
    f.queue.clear();
    let _ = reap(&mut f);
    if f.outstanding == 0 {
        return;
    }
    for (ud, w) in f.inflight.iter().enumerate() {
        if w.is_some() {
            let sqe = opcode::AsyncCancel::new(ud as u64).build().user_data(CANCEL_TAG);
            // SAFETY: a cancel request refers to no memory of ours.
            if unsafe { f.ring.submission().push(&sqe) }.is_err() {
                break; // the queue is full: those left run to their end
            }
        }
    }
    let _ = f.ring.submit();
    let _ = reap(&mut f);
    if f.outstanding > 0 {
        g.strays.push(*f);
    }
}

/// The stall limit: `LATTE_FLUSH_STALL_MS` when it is a number of
/// milliseconds (at least 1), else `STALL_LIMIT` (another value is said
/// once on standard error, unless `LATTE_QUIET=1`).
fn stall_limit() -> Duration {
    static LIMIT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let Some(v) = std::env::var_os(STALL_LIMIT_ENV) else { return STALL_LIMIT };
        match v.to_str().and_then(|t| t.parse::<u64>().ok()).filter(|&ms| ms >= 1) {
            Some(ms) => Duration::from_millis(ms),
            None => {
                crate::region::say(format_args!(
                    "{STALL_LIMIT_ENV}={:?}: not a number of milliseconds (at least 1); the flush's stall limit is {} s",
                    v.to_string_lossy(),
                    STALL_LIMIT.as_secs()
                ));
                STALL_LIMIT
            }
        }
    })
}

/// Completions are left in the kernel's queue while set: a test's stand-in
/// for a disk that never completes a write.
static WITHHOLD: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Withholds (or gives back) every flight's completions from `poll`, to
/// test the stall limit. Test builds only.
#[cfg(feature = "internals")]
pub fn withhold_completions(on: bool) {
    // Relaxed: a flag looked at on its own, by the caller's own thread or
    // under the flush lock after it.
    WITHHOLD.store(on, Ordering::Relaxed);
}

/// (device, inode) of an open file.
fn file_id(fd: &std::os::fd::OwnedFd) -> Result<(u64, u64), Error> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is writable; fd is open (owned).
    if unsafe { libc::fstat(std::os::fd::AsRawFd::as_raw_fd(fd), &mut st) } != 0 {
        return Err(Error::last_os());
    }
    Ok((st.st_dev, st.st_ino))
}

const ENTRIES: u32 = 64;
/// The longest write one SQE asks for (a longer one goes as several): at
/// most ENTRIES of them are with the kernel at once, so that one completes
/// well within the stall limit on a slow disk (64 MiB at 50 MB/s: 1.3 s).
const MAX_WRITE: u64 = 1 << 20;

fn submit(f: &mut Flight) -> Result<(), Error> {
    while let Some(w) = f.queue.front().copied() {
        let slot = match f.inflight.iter().position(|x| x.is_none()) {
            Some(s) => s,
            None => {
                f.inflight.push(None);
                f.inflight.len() - 1
            }
        };
        let len = w.len.min(MAX_WRITE) as u32;
        let sqe = opcode::Write::new(types::Fd(std::os::fd::AsRawFd::as_raw_fd(&f.fd)), w.src, len).offset(w.off).build().user_data(slot as u64);
        // SAFETY: the buffer stays valid until its completion is reaped:
        // it is region memory (never unmapped) or owned by the plan,
        // which lives in the Flight until the flush ends.
        if unsafe { f.ring.submission().push(&sqe) }.is_err() {
            break; // the submission queue is full; poll submits the rest
        }
        f.queue.pop_front();
        f.inflight[slot] = Some(w);
        f.outstanding += 1;
    }
    f.ring.submit().map_err(|e| Error::from_io(&e))?;
    Ok(())
}

/// Reaps every available completion (each one is accounted for, even
/// after an error: the error path waits for exactly the writes still in
/// flight); a short write is requeued for its remainder. Returns the
/// first error.
fn reap(f: &mut Flight) -> Result<(), Error> {
    // Relaxed: see withhold_completions.
    if WITHHOLD.load(Ordering::Relaxed) {
        return Ok(());
    }
    let cqes: Vec<(u64, i32)> = f.ring.completion().map(|c| (c.user_data(), c.result())).collect();
    let mut first_err = None;
    for (ud, res) in cqes {
        if ud == CANCEL_TAG {
            continue; // a cancel's own completion: the write's comes too
        }
        f.progress = Instant::now();
        let w = match f.inflight.get_mut(ud as usize).and_then(|x| x.take()) {
            Some(w) => w,
            None => {
                first_err.get_or_insert(Error::Os(libc::EIO));
                continue;
            }
        };
        f.outstanding -= 1;
        if res <= 0 {
            first_err.get_or_insert(if res < 0 { Error::Os(-res) } else { Error::Os(libc::EIO) });
            continue;
        }
        f.written += res as u64;
        if (res as u64) < w.len {
            // SAFETY: still inside the same buffer.
            f.queue.push_back(Write { src: unsafe { w.src.add(res as usize) }, len: w.len - res as u64, off: w.off + res as u64 });
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn advance(f: &mut Flight) -> Result<bool, Error> {
    reap(f)?;
    if f.queue.is_empty() && f.outstanding == 0 {
        match f.step {
            Step::Data => {
                let (slot_writes, fw) = f.plan.headers();
                f.queue.extend(slot_writes);
                f.plan_file_header = Some(fw);
                f.step = Step::SlotHeaders;
            }
            Step::SlotHeaders => {
                let fw = f.plan_file_header.take().ok_or(Error::Os(libc::EIO))?;
                f.queue.push_back(fw);
                f.step = Step::FileHeader;
            }
            Step::FileHeader => {
                set_len(std::os::fd::AsRawFd::as_raw_fd(&f.fd), f.plan.total);
                return Ok(true);
            }
        }
    }
    submit(f)?;
    Ok(false)
}

pub fn flush_async(fd: i32, unit: latte_unit) -> Result<(), Error> {
    let mut g = lock();
    if matches!(g.state, State::Flying(_)) {
        return Err(Error::BUSY);
    }
    let fd = own_target(fd)?;
    let file = file_id(&fd)?;
    // Writes of an earlier flight into this file still with the kernel: a
    // new image must not be overwritten by them.
    if g.strays.iter().any(|s| s.file == file) {
        return Err(Error::BUSY);
    }
    let region = crate::recorder::REGISTRY.lock().region()?;
    let ring = IoUring::new(ENTRIES)?;
    let plan = Plan::new(region, unit);
    let queue: VecDeque<Write> = plan.data_writes().into();
    let mut f = Box::new(Flight {
        ring,
        fd,
        plan,
        step: Step::Data,
        queue,
        inflight: Vec::new(),
        outstanding: 0,
        written: 0,
        plan_file_header: None,
        file,
        progress: Instant::now(),
    });
    if let Err(e) = submit(&mut f) {
        g.state = State::Failed(e, f.written, f.plan.to_write);
        retire(&mut g, f);
        return Err(e);
    }
    g.state = State::Flying(f);
    Ok(())
}

/// Ends the flight in flight with `e`: its state becomes `e`, nothing more
/// is submitted, and its writes still with the kernel are cancelled there
/// (the flight is a stray until they end).
fn fail_flight(g: &mut Flushes, e: Error) {
    let State::Flying(f) = core::mem::replace(&mut g.state, State::Idle) else { return };
    g.state = State::Failed(e, f.written, f.plan.to_write);
    retire(g, f);
}

/// Cancels a pending flush, without waiting: 1 when one was pending
/// (its state becomes -ECANCELED; nothing more is submitted, and the
/// writes already with the kernel are cancelled there and reaped by later
/// calls; the file holds no file header, so it never passes for an
/// image), 0 when none was.
pub fn cancel() -> Result<bool, Error> {
    let mut g = lock();
    let State::Flying(_) = &g.state else { return Ok(false) };
    fail_flight(&mut g, Error::Os(libc::ECANCELED));
    Ok(true)
}

pub fn poll() -> Result<i32, Error> {
    let mut g = lock();
    let done = match &mut g.state {
        State::Idle | State::Done(..) => return Ok(LATTE_FLUSH_IDLE),
        State::Failed(e, ..) => return Err(*e),
        State::Flying(f) => match advance(f) {
            // No write of the flight completed for the stall limit.
            Ok(false) if f.progress.elapsed() > stall_limit() => Err(Error::Os(libc::ETIMEDOUT)),
            Ok(false) => return Ok(LATTE_FLUSH_PENDING),
            Ok(true) => Ok((f.written, f.plan.to_write)),
            Err(e) => Err(e),
        },
    };
    match done {
        Ok((w, t)) => {
            g.state = State::Done(w, t);
            Ok(LATTE_FLUSH_IDLE)
        }
        Err(e) => {
            fail_flight(&mut g, e);
            Err(e)
        }
    }
}

pub fn status() -> latte_flush_status {
    let g = lock();
    match &g.state {
        State::Idle => latte_flush_status::default(),
        State::Flying(f) => latte_flush_status { state: LATTE_FLUSH_PENDING, _pad: 0, bytes_written: f.written, bytes_total: f.plan.to_write },
        State::Done(w, t) => latte_flush_status { state: LATTE_FLUSH_IDLE, _pad: 0, bytes_written: *w, bytes_total: *t },
        State::Failed(e, w, t) => latte_flush_status { state: e.code(), _pad: 0, bytes_written: *w, bytes_total: *t },
    }
}
