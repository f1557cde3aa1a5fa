//! `latte record TARGET -o FILE`: follows a live region with the library's
//! `Follower` and appends every sample it reads to a recording
//! (`crate::recording`), until the duration, the count, the producer's exit
//! or SIGINT/SIGTERM ends it. Loss is counted per incarnation of each ring,
//! from its writer's index: `read + lost == recorded`.
//!
//! The file is written by a thread of its own, behind a bounded queue of
//! batches (`QUEUE_BATCHES`), so that a write held up by the page cache's
//! writeback never holds up the follower; a queue that stays full (a disk
//! slower than the producers) holds the follower up instead, and the rings
//! it then cannot read in time count their loss as always.

use crate::exit::{fail, output_error, EXIT_NOT_REGION, EXIT_OUTPUT, EXIT_USAGE};
use crate::recording::Writer;
use crate::target::open;
use latte::follow::{FollowOptions, Follower, Incarnation};
use latte::layout::LATTE_REGION_FLUSHED;
use latte::reader::{latte_raw_sample, View};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Batches (each at most one ring: 1 MiB at the default 65,536 samples)
/// queued for the writing thread.
const QUEUE_BATCHES: usize = 128;

/// The nice value of the writing thread. The following thread keeps the
/// process's: it must get its CPU within a fraction of a millisecond to
/// read a busy ring before it laps, while the writing thread can catch up
/// whenever the follower sleeps.
const WRITER_NICE: libc::c_int = 10;

/// Why following ended when the producer's liveness lock was free before
/// the last pass (nothing was written during it).
const PRODUCER_EXITED: &str = "the producer exited";

/// One batch for the writing thread: the incarnation's number in the file,
/// its ring's owner and ID, and the samples.
struct Batch {
    number: u32,
    id_token: u32,
    thread_idx: u32,
    os_tid: u32,
    samples: Vec<latte_raw_sample>,
}

/// The writing thread: appends every batch, hands each buffer back for
/// reuse, and returns the writer (for its headers) with the first error.
fn write_batches(mut w: Writer, rx: mpsc::Receiver<Batch>, pool: mpsc::Sender<Vec<latte_raw_sample>>, failed: &AtomicBool) -> (Writer, Option<std::io::Error>) {
    // Linux gives each thread its own nice value; a failure leaves it as
    // it is.
    // SAFETY: setpriority takes values and touches no memory.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, WRITER_NICE) };
    let mut error = None;
    for b in rx {
        if error.is_none() {
            if let Err(e) = w.append(b.number, b.id_token, b.thread_idx, b.os_tid, &b.samples) {
                error = Some(e);
                // Relaxed: a flag read on its own by the recording loop.
                failed.store(true, Ordering::Relaxed);
            }
        }
        let _ = pool.send(b.samples);
    }
    (w, error)
}

/// What to record.
pub struct RecordOpts {
    pub target: std::ffi::OsString,
    pub output: std::path::PathBuf,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop once this many samples were read.
    pub count: Option<u64>,
    /// Only these IDs (all when empty).
    pub ids: Vec<String>,
    /// Begin at the oldest sample each ring still holds.
    pub from_start: bool,
    /// Wait for a live producer's region of the name to appear first
    /// (then record from its first sample).
    pub wait: bool,
}

/// How often `--wait` looks for the region.
const WAIT_POLL: Duration = Duration::from_millis(5);

/// `--wait`: polls until the region exists and its producer lives (a dead
/// producer's region of the name, left by an earlier run, is waited past;
/// an object being made, not yet a region, too), then opens it as `open`
/// does. A signal ends the wait: exit 0, no file written.
///
/// An object once seen without its producer stays dead. A taker claims a
/// dead object without making it read as live (L4 of `latte::liveness`),
/// but a producer built with an earlier latte takes the name over holding
/// the old object's whole lock for a moment, and a wait that took the old
/// object then would follow an earlier run's samples.
fn wait_for_region(raw: &std::ffi::OsStr, target: &str) -> Result<Option<latte::Mapping>, ExitCode> {
    let crate::target::Target::Region(name) = crate::target::resolve(raw) else {
        return Err(fail(target, "is a file: --wait waits for a region to appear", EXIT_USAGE));
    };
    let mut said = false;
    // The last object seen under the name with its producer gone.
    let mut dead: Option<latte::Mapping> = None;
    loop {
        // Relaxed: the flag alone (set by the signal handler).
        if STOP.load(Ordering::Relaxed) {
            crate::exit::say("record", &format!("{target}: stopped while waiting for it to appear; nothing recorded"));
            return Ok(None);
        }
        match latte::Mapping::open_shm(&name) {
            Ok(m) if dead.as_ref().is_some_and(|d| d.is_same_object(&m)) => {}
            Ok(m) if m.producer_alive() => return Ok(Some(m)),
            Ok(m) => dead = Some(m),
            Err(latte::Error::NotLatte | latte::Error::Truncated) => {}
            Err(e) if e == latte::Error::Os(libc::ENOENT) => {}
            Err(_) => return open(raw).map(Some), // said precisely there
        }
        if !said {
            crate::exit::say("record", &format!("{target}: waiting for a live producer's region of that name (Ctrl-C ends the wait)"));
            said = true;
        }
        std::thread::sleep(WAIT_POLL);
    }
}

/// Set by SIGINT and SIGTERM: stop, write the file, exit 0.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Relaxed: a flag read on its own by the recording loop.
    STOP.store(true, Ordering::Relaxed);
}

fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: on_signal only stores to an atomic (async-signal-safe);
        // the handler address is a valid extern "C" fn.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// An incarnation being recorded.
struct Pending {
    /// 1-based number of the incarnation in the file (its slots' generation).
    number: u32,
    /// Its figures as of the last batch.
    inc: Incarnation,
}

/// The sink's state: the incarnations recorded, the queue to the writing
/// thread and its buffers, the ID filter.
struct Store {
    queue: mpsc::SyncSender<Batch>,
    pool: mpsc::Receiver<Vec<latte_raw_sample>>,
    pending: HashMap<(u32, u32), Pending>,
    /// Order of first sight: (slot, generation) of incarnation number k+1.
    order: Vec<(u32, u32)>,
    /// Per token: kept (None: not looked up yet).
    keep: Vec<Option<bool>>,
    wanted: Vec<String>,
    read: u64,
    lost: u64,
    /// Time the following thread was kept off its CPU, in stalls (`stall`).
    stalled: Duration,
}

impl Store {
    /// Whether samples of `token` are recorded: not the reserved IDs
    /// (calibration's), and with `--id` only those named.
    fn kept(&mut self, v: &View, token: u32) -> bool {
        let t = token as usize;
        if self.keep.len() <= t {
            self.keep.resize(t + 1, None);
        }
        let wanted = &self.wanted;
        *self.keep[t].get_or_insert_with(|| {
            let Ok(n) = v.id_name(token) else { return false };
            let name = latte::name::name_bytes(&n);
            !latte::name::is_reserved_name(name) && (wanted.is_empty() || wanted.contains(&latte::name::name_text(name)))
        })
    }

    fn take(&mut self, v: &View, inc: &Incarnation, samples: &[latte_raw_sample]) {
        if !self.kept(v, inc.id_token) {
            return;
        }
        let key = (inc.slot, inc.generation);
        if !self.pending.contains_key(&key) {
            let number = self.order.len() as u32 + 1;
            self.order.push(key);
            self.pending.insert(key, Pending { number, inc: Incarnation { read: 0, lost: 0, ..*inc } });
        }
        let Some(p) = self.pending.get_mut(&key) else { return };
        // The figures are running totals: add what this batch added.
        self.read += inc.read - p.inc.read;
        self.lost += inc.lost - p.inc.lost;
        p.inc = *inc;
        if samples.is_empty() {
            return; // figures only: samples no look saw, counted lost
        }
        let mut buf = self.pool.try_recv().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(samples);
        // Blocks while the queue is full; fails only once the writing
        // thread is gone (after an error, which the loop reports).
        let _ = self.queue.send(Batch { number: p.number, id_token: inc.id_token, thread_idx: inc.thread_idx, os_tid: inc.os_tid, samples: buf });
    }
}

/// Opens `path` for the recording, emptied, and locked against a second
/// `latte record` writing it: refused when it is standard output (`-`),
/// not a regular file (a recording is written at offsets), the region
/// being recorded, or another recording being written. Nothing is emptied
/// before these checks.
fn create_output(path: &std::path::Path, m: &latte::Mapping) -> Result<std::fs::File, ExitCode> {
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display().to_string();
    let refuse = |why: &str| fail(&shown, why, EXIT_USAGE);
    if path.as_os_str() == "-" {
        return Err(refuse("a recording is written to a file, at offsets: standard output cannot hold one"));
    }
    // O_NONBLOCK: a FIFO must not block the open; O_NOCTTY: a terminal must
    // not become ours. What was opened is judged by its descriptor.
    let file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(false).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path).map_err(|e| match e
            .raw_os_error()
        {
            // A FIFO without a reader.
            Some(libc::ENXIO) => refuse("is not a regular file: a recording is written to a file, at offsets"),
            _ => fail(&shown, &output_error(path, &e), EXIT_OUTPUT),
        })?;
    if !file.metadata().map(|md| md.file_type().is_file()).unwrap_or(false) {
        return Err(refuse("is not a regular file: a recording is written to a file, at offsets"));
    }
    if m.is_object_of(file.as_fd()) {
        return Err(refuse("is the region being recorded"));
    }
    if latte::Mapping::file_is_locked(file.as_fd()) {
        return Err(refuse("is locked by another process (a running producer's region, or a file in use)"));
    }
    // SAFETY: an open descriptor; flock takes no memory.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(fail(&shown, "is locked by another writer (another latte record?)", EXIT_OUTPUT));
    }
    file.set_len(0).map_err(|e| fail(&shown, &output_error(path, &e), EXIT_OUTPUT))?;
    Ok(file)
}

/// Records `o.target` into `o.output` until one of the ends of `RecordOpts`
/// comes, then prints one line per ID and the totals.
pub fn run(o: &RecordOpts) -> Result<(), ExitCode> {
    let target = crate::target::shown(std::os::unix::ffi::OsStrExt::as_bytes(o.target.as_os_str()));
    let mut m = if o.wait {
        catch_signals();
        match wait_for_region(&o.target, &target)? {
            Some(m) => m,
            None => return Ok(()),
        }
    } else {
        open(&o.target)?
    };
    let from_start = o.from_start || o.wait;
    let v = m.view();
    if v.flags() & LATTE_REGION_FLUSHED != 0 {
        return Err(fail(&target, "is a file: record follows a live region (diff, plot and stats read files as they are)", EXIT_USAGE));
    }
    let shown = o.output.display().to_string();
    if !from_start && !m.producer_alive() {
        return Err(fail(&target, "its producer has exited: nothing more will be written to it (--from-start records what its rings hold)", EXIT_USAGE));
    }
    let file = create_output(&o.output, &m)?;
    let writer = Writer::create(file, v.geo().samples_per_slot).map_err(|e| fail(&shown, &e.to_string(), EXIT_OUTPUT))?;
    let (queue, rx) = mpsc::sync_channel(QUEUE_BATCHES);
    let (pool_tx, pool) = mpsc::channel();
    let failed = std::sync::Arc::new(AtomicBool::new(false));
    let f2 = failed.clone();
    let writing = std::thread::spawn(move || write_batches(writer, rx, pool_tx, &f2));
    let mut store =
        Store { queue, pool, pending: HashMap::new(), order: Vec::new(), keep: Vec::new(), wanted: o.ids.clone(), read: 0, lost: 0, stalled: Duration::ZERO };
    catch_signals();
    latte::pace::tight_timer_slack();
    let mut follower = Follower::new(FollowOptions { from_start, ..Default::default() });
    let started = Instant::now();
    let started_wall = std::time::SystemTime::now();
    let read_err = |e: latte::Error| fail(&target, &e.to_string(), EXIT_NOT_REGION);
    // Made on the following thread (this one), which it measures.
    let mut stalls = crate::stall::Stalls::new();
    let why = follow_until_end(o, &mut m, &mut follower, &mut store, &mut stalls, &failed, started)?;
    m.refresh().map_err(read_err)?;
    let v = m.view();
    follower.drain(&v, &mut |inc, s| store.take(&v, inc, s)).map_err(read_err)?;
    // The last stretch, the last pass and the drain: a stall there can
    // lose samples unless the producer had exited before that pass.
    if let Some(stall) = stalls.at_wake_up(None).filter(|_| why != PRODUCER_EXITED) {
        store.stalled += stall;
    }
    let seconds = started.elapsed().as_secs_f64();
    let Store { queue, pending, order, stalled, .. } = store;
    drop(queue); // the writing thread ends with the last batch
    let (writer, error) = writing.join().map_err(|_| fail(&shown, "the writing thread failed", EXIT_OUTPUT))?;
    if let Some(e) = error {
        return Err(fail(&shown, &output_error(&o.output, &e), EXIT_OUTPUT));
    }
    let incs = final_incarnations(&follower, &order, &pending);
    let name = |t: u32| v.id_name(t).map(|n| latte::name::name_text(latte::name::name_bytes(&n))).unwrap_or_default();
    let ended = Ended { why, started_wall, seconds, stalled };
    let bytes = writer.finish(&v, &trailer(o, &incs, &name, &ended)).map_err(|e| fail(&shown, &output_error(&o.output, &e), EXIT_OUTPUT))?;
    for w in &o.ids {
        if !incs.iter().any(|i| &name(i.id_token) == w) {
            crate::exit::say(
                "record",
                &format!("--id {}: nothing was recorded under it (no such ID, or none of its rings was written while followed)", crate::term::field(w)),
            );
        }
    }
    crate::term::emit(&summary(&incs, &name, &ended, bytes, &shown))
}

/// Follows the region until an end comes (the duration, the count, the
/// producer's exit, a signal, or a file that cannot be written), showing a
/// progress line on a terminal; which end, in words.
fn follow_until_end(
    o: &RecordOpts,
    m: &mut latte::Mapping,
    follower: &mut Follower,
    store: &mut Store,
    stalls: &mut crate::stall::Stalls,
    failed: &AtomicBool,
    started: Instant,
) -> Result<&'static str, ExitCode> {
    let progress = std::io::stderr().is_terminal();
    let mut shown_at = Instant::now();
    let target = crate::target::shown(std::os::unix::ffi::OsStrExt::as_bytes(o.target.as_os_str()));
    let read_err = |e: latte::Error| fail(&target, &e.to_string(), EXIT_NOT_REGION);
    let why = loop {
        // Looked at before the pass: once the producer is gone, this pass
        // reads the last samples there will ever be.
        let alive = m.producer_alive();
        // A region that grew: map its new chunks (cursors carry over).
        m.refresh().map_err(read_err)?;
        let v = m.view();
        let wait = follower.poll(&v, &mut |inc, s| store.take(&v, inc, s)).map_err(read_err)?;
        // Relaxed: the flag alone (the error itself comes with the thread's join).
        if failed.load(Ordering::Relaxed) {
            break "the file could not be written";
        }
        if progress && shown_at.elapsed() >= Duration::from_millis(250) {
            shown_at = Instant::now();
            eprint!("\rlatte record: {:.1} s  {} samples read  {} lost   ", started.elapsed().as_secs_f64(), store.read, store.lost);
        }
        // Relaxed: the flag alone (set by the signal handler).
        if STOP.load(Ordering::Relaxed) {
            break "stopped by a signal";
        }
        if !alive {
            break PRODUCER_EXITED;
        }
        if o.duration.is_some_and(|d| started.elapsed() >= d) {
            break "the duration elapsed";
        }
        if o.count.is_some_and(|n| store.read >= n) {
            break "the count was reached";
        }
        let asked = Instant::now() + Duration::from_nanos(wait);
        std::thread::sleep(Duration::from_nanos(wait));
        // A thread kept off its CPU longer than a ring takes to lap cannot
        // follow that ring whole, whatever it does (`stall`).
        if let Some(stall) = stalls.at_wake_up(Some(asked)) {
            store.stalled += stall;
        }
    };
    if progress {
        eprintln!();
    }
    Ok(why)
}

/// Every incarnation's final figures, in file order.
fn final_incarnations(follower: &Follower, order: &[(u32, u32)], pending: &HashMap<(u32, u32), Pending>) -> Vec<Incarnation> {
    let all = follower.incarnations();
    order.iter().map(|key| all.iter().find(|i| (i.slot, i.generation) == *key).copied().unwrap_or(pending[key].inc)).collect()
}

/// How and when the recording ended.
struct Ended {
    why: &'static str,
    started_wall: std::time::SystemTime,
    seconds: f64,
    /// Time the following thread was kept off its CPU, in stalls (`stall`).
    stalled: Duration,
}

/// The recording's JSON trailer (docs/recording.md).
fn trailer(o: &RecordOpts, incs: &[Incarnation], name: &dyn Fn(u32) -> String, e: &Ended) -> serde_json::Value {
    let list: Vec<_> = incs
        .iter()
        .map(|i| {
            serde_json::json!({
                "id": name(i.id_token), "token": i.id_token, "slot": i.slot, "generation": i.generation, "thread_idx": i.thread_idx, "os_tid": i.os_tid,
                "start_idx": i.start_idx, "end_idx": i.end_idx, "recorded": i.recorded(), "read": i.read, "lost": i.lost,
                "unseen": i.unseen, "closed": i.closed, "tail_unknown": i.tail_unknown,
            })
        })
        .collect();
    let (read, lost): (u64, u64) = (incs.iter().map(|i| i.read).sum(), incs.iter().map(|i| i.lost).sum());
    let ns = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    serde_json::json!({
        "format": latte::reader::RECORDING_FORMAT, "version": latte::reader::RECORDING_VERSION,
        "target": crate::target::shown(std::os::unix::ffi::OsStrExt::as_bytes(o.target.as_os_str())), "from_start": o.from_start || o.wait, "wait": o.wait, "ids": o.ids,
        "started_realtime_ns": ns(e.started_wall), "ended_realtime_ns": ns(std::time::SystemTime::now()), "seconds": e.seconds,
        "reader_stalled_seconds": e.stalled.as_secs_f64(),
        "ended_because": e.why,
        "recorded": read + lost, "read": read, "lost": lost,
        "incarnations": list,
    })
}

/// One line per ID, then the totals (`key=value`, like `watch --plain`).
fn summary(incs: &[Incarnation], name: &dyn Fn(u32) -> String, e: &Ended, bytes: u64, shown: &str) -> String {
    let (read, lost): (u64, u64) = (incs.iter().map(|i| i.read).sum(), incs.iter().map(|i| i.lost).sum());
    // Per ID token (two IDs whose names read alike stay apart): read, lost,
    // rings of unknown tail, threads; one pass.
    let mut per: std::collections::BTreeMap<u32, (u64, u64, usize, std::collections::BTreeSet<u32>)> = Default::default();
    for i in incs {
        let e = per.entry(i.id_token).or_default();
        e.0 += i.read;
        e.1 += i.lost;
        e.2 += i.tail_unknown as usize;
        e.3.insert(i.thread_idx);
    }
    let mut rows: Vec<(String, u32)> = per.keys().map(|&t| (name(t), t)).collect();
    rows.sort();
    let mut text = String::new();
    for (id, t) in &rows {
        let (r, l, unknown, threads) = &per[t];
        text.push_str(&format!("id={} recorded={} read={r} lost={l} threads={} tail_unknown={unknown}\n", crate::term::field(id), r + l, threads.len()));
    }
    text.push_str(&format!(
        "total recorded={} read={read} lost={lost} seconds={:.3} reader_stalled_seconds={:.4} bytes={bytes} file={} ended={}\n",
        read + lost,
        e.seconds,
        e.stalled.as_secs_f64(),
        crate::term::field(shown),
        crate::term::field(e.why)
    ));
    text
}
