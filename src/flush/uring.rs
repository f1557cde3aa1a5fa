//! The io_uring flush: the plan's writes (`super::Plan`) submitted as
//! SQEs, reaped by `poll`, step after step (the three steps of `super`).

use super::*;
use core::sync::atomic::AtomicPtr;
use io_uring::{opcode, types, IoUring};
use std::collections::VecDeque;
use std::sync::Mutex;

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
}

// SAFETY: see Plan; the ring is only used under the mutex.
unsafe impl Send for Flight {}

enum State {
    Idle,
    Flying(Box<Flight>),
    Done(u64, u64),
    /// The error, bytes written and to write, and the flight while
    /// writes it submitted are still with the kernel (their buffers
    /// must outlive them): reaped, without waiting, by later calls.
    Failed(Error, u64, u64, Option<Box<Flight>>),
}

/// This process's flush. A fork child inherits its parent's memory,
/// ring descriptor and lock state: it never touches them. `this`
/// gives each process a state of its own on first use (the parent's
/// copy is left alone, leaked), so that a child's calls see an idle
/// flush and never reap the parent's completions.
struct Proc {
    pid: u32,
    state: Mutex<State>,
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
    let fresh = Box::into_raw(Box::new(Proc { pid, state: Mutex::new(State::Idle) }));
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

fn lock() -> std::sync::MutexGuard<'static, State> {
    this().state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reaps what completed of a failed or cancelled flight, without
/// waiting; true once none of its writes is with the kernel.
fn settle(left: &mut Option<Box<Flight>>) -> bool {
    if let Some(f) = left {
        let _ = reap(f);
        if f.outstanding > 0 {
            return false;
        }
    }
    *left = None;
    true
}

const ENTRIES: u32 = 64;

fn submit(f: &mut Flight) -> Result<(), Error> {
    while let Some(w) = f.queue.front().copied() {
        let slot = match f.inflight.iter().position(|x| x.is_none()) {
            Some(s) => s,
            None => {
                f.inflight.push(None);
                f.inflight.len() - 1
            }
        };
        let len = w.len.min(1 << 30) as u32;
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
    let cqes: Vec<(u64, i32)> = f.ring.completion().map(|c| (c.user_data(), c.result())).collect();
    let mut first_err = None;
    for (ud, res) in cqes {
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
    let mut st = lock();
    if matches!(*st, State::Flying(_)) {
        return Err(Error::BUSY);
    }
    // Writes of a flush that failed or was cancelled still with the
    // kernel: a new image must not be overwritten by them.
    if let State::Failed(.., left) = &mut *st {
        if !settle(left) {
            return Err(Error::BUSY);
        }
    }
    let fd = own_target(fd)?;
    let region = crate::recorder::REGISTRY.lock().region()?;
    let ring = IoUring::new(ENTRIES)?;
    let plan = Plan::new(region, unit);
    let queue: VecDeque<Write> = plan.data_writes().into();
    let mut f = Box::new(Flight { ring, fd, plan, step: Step::Data, queue, inflight: Vec::new(), outstanding: 0, written: 0, plan_file_header: None });
    if let Err(e) = submit(&mut f) {
        f.queue.clear();
        let (w, t) = (f.written, f.plan.to_write);
        *st = State::Failed(e, w, t, Some(f));
        return Err(e);
    }
    *st = State::Flying(f);
    Ok(())
}

/// Cancels a pending flush, without waiting: 1 when one was pending
/// (its state becomes -ECANCELED; nothing more is submitted, and the
/// writes already with the kernel are reaped by later calls; the file
/// holds no file header, so it never passes for an image), 0 when none
/// was.
pub fn cancel() -> Result<bool, Error> {
    let mut st = lock();
    let State::Flying(_) = &*st else { return Ok(false) };
    let State::Flying(mut f) = core::mem::replace(&mut *st, State::Idle) else { unreachable!() };
    f.queue.clear();
    let (w, t) = (f.written, f.plan.to_write);
    let mut left = Some(f);
    settle(&mut left);
    *st = State::Failed(Error::Os(libc::ECANCELED), w, t, left);
    Ok(true)
}

pub fn poll() -> Result<i32, Error> {
    let mut st = lock();
    let next = match &mut *st {
        State::Idle | State::Done(..) => return Ok(LATTE_FLUSH_IDLE),
        State::Failed(e, _, _, left) => {
            settle(left);
            return Err(*e);
        }
        State::Flying(f) => match advance(f) {
            Ok(false) => return Ok(LATTE_FLUSH_PENDING),
            Ok(true) => State::Done(f.written, f.plan.to_write),
            Err(e) => {
                f.queue.clear();
                let (w, t) = (f.written, f.plan.to_write);
                let State::Flying(f) = core::mem::replace(&mut *st, State::Idle) else { unreachable!() };
                let mut left = Some(f);
                settle(&mut left);
                State::Failed(e, w, t, left)
            }
        },
    };
    let rc = match next {
        State::Failed(e, ..) => Err(e),
        _ => Ok(LATTE_FLUSH_IDLE),
    };
    *st = next;
    rc
}

pub fn status() -> latte_flush_status {
    let st = lock();
    match &*st {
        State::Idle => latte_flush_status::default(),
        State::Flying(f) => latte_flush_status { state: LATTE_FLUSH_PENDING, _pad: 0, bytes_written: f.written, bytes_total: f.plan.to_write },
        State::Done(w, t) => latte_flush_status { state: LATTE_FLUSH_IDLE, _pad: 0, bytes_written: *w, bytes_total: *t },
        State::Failed(e, w, t, _) => latte_flush_status { state: e.code(), _pad: 0, bytes_written: *w, bytes_total: *t },
    }
}
