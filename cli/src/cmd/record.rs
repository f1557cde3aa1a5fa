//! `latte record TARGET -o FILE`: follows a live region with the library's
//! `Follower` and appends every sample it reads to a recording
//! (`crate::recording`), until the duration, the count, the producer's exit
//! or SIGINT/SIGTERM ends it. Loss is counted per incarnation of each ring,
//! from its writer's index: `read + lost == recorded`.

use crate::recording::Writer;
use crate::{fail, open, output_error, EXIT_NOT_REGION, EXIT_OUTPUT, EXIT_USAGE};
use latte::follow::{FollowOptions, Follower, Incarnation};
use latte::layout::LATTE_REGION_FLUSHED;
use latte::reader::{latte_raw_sample, View};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to record.
pub struct RecordOpts {
    pub target: String,
    pub output: std::path::PathBuf,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop once this many samples were read.
    pub count: Option<u64>,
    /// Only these IDs (all when empty).
    pub ids: Vec<String>,
    /// Begin at the oldest sample each ring still holds.
    pub from_start: bool,
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

/// The sink's state: the incarnations recorded, the file, the ID filter.
struct Store {
    writer: Writer,
    pending: HashMap<(u32, u32), Pending>,
    /// Order of first sight: (slot, generation) of incarnation number k+1.
    order: Vec<(u32, u32)>,
    /// Per token: kept (None: not looked up yet).
    keep: Vec<Option<bool>>,
    wanted: Vec<String>,
    read: u64,
    lost: u64,
    error: Option<std::io::Error>,
}

impl Store {
    fn kept(&mut self, v: &View, token: u32) -> bool {
        if self.wanted.is_empty() {
            return true;
        }
        let t = token as usize;
        if self.keep.len() <= t {
            self.keep.resize(t + 1, None);
        }
        *self.keep[t].get_or_insert_with(|| {
            let name = v.id_name(token).map(|n| String::from_utf8_lossy(latte::name::name_bytes(&n)).into_owned()).unwrap_or_default();
            self.wanted.contains(&name)
        })
    }

    fn take(&mut self, v: &View, inc: &Incarnation, samples: &[latte_raw_sample]) {
        if self.error.is_some() || !self.kept(v, inc.id_token) {
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
        if let Err(e) = self.writer.append(p.number, inc.id_token, inc.thread_idx, inc.os_tid, samples) {
            self.error = Some(e);
        }
    }
}

pub fn run(o: &RecordOpts) -> Result<(), ExitCode> {
    let m = open(&o.target)?;
    let v = m.view();
    if v.flags() & LATTE_REGION_FLUSHED != 0 {
        return Err(fail(&o.target, "is a file: record follows a live region (diff, plot and stats read files as they are)", EXIT_USAGE));
    }
    let shown = o.output.display().to_string();
    let file = std::fs::File::create(&o.output).map_err(|e| fail(&shown, &output_error(&o.output, &e), EXIT_OUTPUT))?;
    let writer = Writer::create(file, v.geo().id_capacity, v.geo().samples_per_slot).map_err(|e| fail(&shown, &e.to_string(), EXIT_OUTPUT))?;
    let mut store = Store { writer, pending: HashMap::new(), order: Vec::new(), keep: Vec::new(), wanted: o.ids.clone(), read: 0, lost: 0, error: None };
    catch_signals();
    let mut follower = Follower::new(FollowOptions { from_start: o.from_start, ..Default::default() });
    let started = Instant::now();
    let started_wall = std::time::SystemTime::now();
    let progress = std::io::stderr().is_terminal();
    let mut shown_at = Instant::now();
    let read_err = |e: latte::Error| fail(&o.target, &e.to_string(), EXIT_NOT_REGION);
    let why = loop {
        // Looked at before the pass: once the producer is gone, this pass
        // reads the last samples there will ever be.
        let alive = m.producer_alive();
        let wait = follower.poll(&v, &mut |inc, s| store.take(&v, inc, s)).map_err(read_err)?;
        if let Some(e) = store.error.take() {
            return Err(fail(&shown, &output_error(&o.output, &e), EXIT_OUTPUT));
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
            break "the producer exited";
        }
        if o.duration.is_some_and(|d| started.elapsed() >= d) {
            break "the duration elapsed";
        }
        if o.count.is_some_and(|n| store.read >= n) {
            break "the count was reached";
        }
        std::thread::sleep(Duration::from_nanos(wait));
    };
    follower.drain(&v, &mut |inc, s| store.take(&v, inc, s)).map_err(read_err)?;
    let seconds = started.elapsed().as_secs_f64();
    if progress {
        eprintln!();
    }
    if let Some(e) = store.error.take() {
        return Err(fail(&shown, &output_error(&o.output, &e), EXIT_OUTPUT));
    }
    // Every incarnation's final figures, in file order.
    let all = follower.incarnations();
    let mut incs = Vec::new();
    for key in &store.order {
        let mut inc = store.pending[key].inc;
        if let Some(f) = all.iter().find(|i| (i.slot, i.generation) == *key) {
            inc = *f;
        }
        incs.push(inc);
    }
    let name = |t: u32| v.id_name(t).map(|n| String::from_utf8_lossy(latte::name::name_bytes(&n)).into_owned()).unwrap_or_default();
    let list: Vec<_> = incs
        .iter()
        .map(|i| {
            serde_json::json!({
                "id": name(i.id_token), "slot": i.slot, "generation": i.generation, "thread_idx": i.thread_idx, "os_tid": i.os_tid,
                "start_idx": i.start_idx, "end_idx": i.end_idx, "recorded": i.recorded(), "read": i.read, "lost": i.lost,
                "closed": i.closed, "tail_unknown": i.tail_unknown,
            })
        })
        .collect();
    let (read, lost): (u64, u64) = (incs.iter().map(|i| i.read).sum(), incs.iter().map(|i| i.lost).sum());
    let ns = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let trailer = serde_json::json!({
        "format": "latte-recording", "version": crate::recording::RECORDING_VERSION,
        "target": o.target, "from_start": o.from_start, "ids": o.ids,
        "started_realtime_ns": ns(started_wall), "ended_realtime_ns": ns(std::time::SystemTime::now()), "seconds": seconds,
        "ended_because": why,
        "recorded": read + lost, "read": read, "lost": lost,
        "incarnations": list,
    });
    let bytes = store.writer.finish(&v, &trailer).map_err(|e| fail(&shown, &output_error(&o.output, &e), EXIT_OUTPUT))?;
    // One line per ID, then the totals (key=value, like `watch --plain`).
    let mut ids: Vec<String> = incs.iter().map(|i| name(i.id_token)).collect();
    ids.sort();
    ids.dedup();
    let mut text = String::new();
    for id in &ids {
        let of: Vec<&Incarnation> = incs.iter().filter(|i| &name(i.id_token) == id).collect();
        let (r, l) = (of.iter().map(|i| i.read).sum::<u64>(), of.iter().map(|i| i.lost).sum::<u64>());
        let unknown = of.iter().filter(|i| i.tail_unknown).count();
        let threads: std::collections::BTreeSet<u32> = of.iter().map(|i| i.thread_idx).collect();
        text.push_str(&format!("id={} recorded={} read={r} lost={l} threads={} tail_unknown={unknown}\n", crate::field(id), r + l, threads.len()));
    }
    text.push_str(&format!(
        "total recorded={} read={read} lost={lost} seconds={seconds:.3} bytes={bytes} file={} ended={}\n",
        read + lost,
        crate::field(&shown),
        crate::field(why)
    ));
    crate::emit(&text)
}
