//! `latte serve`: the regions' metrics (`export`) over HTTP at `/metrics`,
//! in the OpenMetrics text format, for Prometheus to scrape.
//!
//! Two kinds of work: the reading thread (`serve_read`: the passes, and the
//! paced looks at busy rings between them), and the HTTP server, hyper's
//! HTTP/1 connections on a single-threaded tokio runtime. A scrape encodes a
//! copy of the state on tokio's blocking pool (at most `ENCODERS` at once,
//! at a lower priority than the reading thread), so neither a slow client
//! nor a long encoding holds up the others or the reading.
//!
//! What a client gets: `GET` or `HEAD /metrics` 200 with the metrics; another
//! method on `/metrics` 405 (with `Allow`); another path 404; a request hyper
//! cannot parse 400, headers over `MAX_HEADER_BYTES` 431; a request followed
//! by a half-close is answered.
//!
//! No client locks the others out: a client that has not sent its whole
//! header within `HEADER_TIMEOUT` (also between requests on a kept-alive
//! connection) is disconnected; a response not written out within
//! `WRITE_TIMEOUT` (a client that does not read) ends its connection; no
//! connection lasts longer than `CONNECTION_LIFETIME`. A new connection is
//! always accepted: when its address holds `MAX_PER_ADDRESS` connections,
//! or `MAX_CONNECTIONS` are open, `admit` closes the stalest connection of
//! that address (or of the address holding the most), so that a flood
//! displaces the flooder's own connections.

use crate::export::{lock, Metrics, Options, State};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The OpenMetrics text format's media type.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);
/// A response not written out within this is given up with its connection
/// (its client does not read).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const WATCHDOG_TICK: Duration = Duration::from_millis(250);
const MAX_CONNECTIONS: usize = 256;
const MAX_PER_ADDRESS: usize = 64;
const MAX_HEADER_BYTES: usize = 16 * 1024;
const ENCODERS: usize = 4;
/// The nice value of the HTTP and encoding threads (the reading thread
/// keeps the process's).
const ENCODER_NICE: libc::c_int = 10;

pub struct ServeOpts {
    pub listen: std::net::SocketAddr,
    pub interval: Duration,
    pub export: Options,
}

/// Raises this process's soft limit on open descriptors to its hard
/// limit: each region watched keeps its object open (to ask whether its
/// producer lives), so the soft limit (often 1,024) would otherwise cap the
/// regions one exporter can watch. Left as it is when that fails; a region
/// past the limit is then reported unreadable, with the reason.
fn raise_open_files_limit() {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0 && l.rlim_cur < l.rlim_max {
        l.rlim_cur = l.rlim_max;
        // SAFETY: a valid rlimit, at most the hard limit.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) };
    }
}

/// `latte: serve: {text}` on standard error. A failed write (standard
/// error closed) is ignored: serving goes on.
pub fn say(text: &str) {
    crate::exit::say("serve", text);
}

pub fn run(o: ServeOpts) -> Result<(), ExitCode> {
    let named = o.export.regions.clone();
    raise_open_files_limit();
    // Cycles to seconds for regions whose producer has published no
    // figure: the TSC is invariant and shared by the machine's cores.
    let own_cpn = latte::measure_cycles_per_ns(50);
    let state = Arc::new(Mutex::new(State::new(o.export, own_cpn)));
    lock(&state).pass(Instant::now());
    let listener = std::net::TcpListener::bind(o.listen)
        .and_then(|l| l.set_nonblocking(true).map(|_| l))
        .map_err(|e| crate::exit::fail("serve", &format!("cannot listen on {}: {e}", o.listen), crate::exit::EXIT_OTHER))?;
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| o.listen.to_string());
    {
        let st = lock(&state);
        for n in &named {
            let (bytes, n) = (n, crate::term::label_text(n));
            match st.unreadable_reason(bytes) {
                Some(Some(why)) => say(&format!("{n}: {why} (looked at again every second)")),
                None => say(&format!("no region {n} yet (looked for every second)")),
                Some(None) => {}
            }
        }
    }
    let what = if named.is_empty() {
        "every latte region in /dev/shm".to_string()
    } else {
        named.iter().map(|n| crate::term::label_text(n)).collect::<Vec<_>>().join(" ")
    };
    say(&format!("listening on http://{addr}/metrics ({what})"));
    let every = o.interval;
    std::thread::Builder::new()
        .name("latte-read".into())
        .spawn({
            let state = state.clone();
            move || crate::serve_read::reader(&state, every)
        })
        .map_err(|e| crate::exit::fail("serve", &format!("cannot start the reading thread: {e}"), crate::exit::EXIT_OTHER))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(ENCODERS)
        // The threads that encode scrapes run at a lower priority than the
        // reading thread, which must get its CPU within a fraction of a
        // millisecond to read a busy ring before it laps. Linux gives each
        // thread its own nice value; a failure leaves it as it is.
        // SAFETY: setpriority takes values and touches no memory.
        .on_thread_start(|| unsafe {
            libc::setpriority(libc::PRIO_PROCESS, 0, ENCODER_NICE);
        })
        .build()
        .map_err(|e| crate::exit::fail("serve", &format!("cannot start the HTTP runtime: {e}"), crate::exit::EXIT_OTHER))?;
    let cache = Arc::new(Cache { state, last: Mutex::new(None) });
    rt.block_on(accept(listener, cache)).map_err(|e| crate::exit::fail("serve", &e, crate::exit::EXIT_OTHER))
}

/// The connections open, each with its client's address, its progress and
/// the handle that ends it (`admit` picks which to end when too many are
/// open; `watchdog` ends those past a deadline).
#[derive(Default)]
struct Connections {
    next_id: u64,
    open: HashMap<u64, Open>,
}

struct Open {
    ip: IpAddr,
    progress: Arc<Progress>,
    abort: tokio::task::AbortHandle,
    since: Instant,
}

type Table = Arc<Mutex<Connections>>;

fn table_lock(t: &Mutex<Connections>) -> MutexGuard<'_, Connections> {
    // Nothing panics while holding it; a poisoned table is still consistent.
    t.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a connection is doing, in milliseconds since `epoch` (0: not
/// doing it). Written by the connection's I/O (`Watched`) and its requests
/// (`answer`), read by `watchdog` and `admit`. Relaxed atomics are enough:
/// each field is a value read on its own, and a decision taken on a value
/// a few milliseconds old only ends a connection a tick later or earlier.
struct Progress {
    epoch: Instant,
    /// The last time bytes were read or written.
    last: AtomicU64,
    /// Since when a response has been waiting to be written out (from the
    /// first write after the previous flush completed, to the next flush).
    writing: AtomicU64,
    /// Requests being answered (their metrics being encoded).
    answering: AtomicU64,
}

impl Progress {
    fn new(epoch: Instant) -> Progress {
        let p = Progress { epoch, last: AtomicU64::new(0), writing: AtomicU64::new(0), answering: AtomicU64::new(0) };
        p.moved();
        p
    }

    /// Milliseconds since `epoch`, at least 1 (0 means "not").
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn moved(&self) {
        self.last.store(self.now(), Ordering::Relaxed);
    }

    /// How long since the connection last moved a byte.
    fn idle_ms(&self) -> u64 {
        self.now().saturating_sub(self.last.load(Ordering::Relaxed))
    }

    /// How long a response has waited to be written out (0: none waits).
    fn writing_ms(&self) -> u64 {
        match self.writing.load(Ordering::Relaxed) {
            0 => 0,
            t => self.now().saturating_sub(t),
        }
    }
}

/// A connection's stream, noting its progress in `Progress`.
struct Watched {
    io: tokio::net::TcpStream,
    progress: Arc<Progress>,
}

impl Watched {
    fn wrote(&self, r: &Poll<std::io::Result<usize>>) {
        if self.progress.writing.load(Ordering::Relaxed) == 0 {
            self.progress.writing.store(self.progress.now(), Ordering::Relaxed);
        }
        if let Poll::Ready(Ok(n)) = r {
            if *n > 0 {
                self.progress.moved();
            }
        }
    }
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.progress.moved();
        }
        r
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, b);
        self.wrote(&r);
        r
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, b);
        self.wrote(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        // Everything written so far is with the kernel: no response waits.
        if r.is_ready() {
            self.progress.writing.store(0, Ordering::Relaxed);
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Takes a connection out of the table when its task ends (completed or
/// aborted).
struct Leave(Table, u64);

impl Drop for Leave {
    fn drop(&mut self) {
        table_lock(&self.0).open.remove(&self.1);
    }
}

/// Makes room for a new connection from `ip`: when `ip` holds
/// `MAX_PER_ADDRESS` connections, ends the stalest of them; when
/// `MAX_CONNECTIONS` are open, the stalest of the address holding the most.
/// A new connection is always let in, so that whoever floods the server
/// displaces only its own connections (or, at the total cap, those of the
/// address holding the most).
fn admit(t: &mut Connections, ip: IpAddr) -> Option<tokio::task::AbortHandle> {
    let mut per_ip: HashMap<IpAddr, usize> = HashMap::new();
    for o in t.open.values() {
        *per_ip.entry(o.ip).or_default() += 1;
    }
    let from = if per_ip.get(&ip).copied().unwrap_or(0) >= MAX_PER_ADDRESS {
        Some(ip)
    } else if t.open.len() >= MAX_CONNECTIONS {
        per_ip.iter().max_by_key(|(_, n)| **n).map(|(ip, _)| *ip)
    } else {
        None
    };
    let from = from?;
    // Stalest: not answering a request first, then the longest without
    // moving a byte.
    let victim = t
        .open
        .iter()
        .filter(|(_, o)| o.ip == from)
        .max_by_key(|(_, o)| (o.progress.answering.load(Ordering::Relaxed) == 0, o.progress.idle_ms(), std::cmp::Reverse(o.since)))
        .map(|(k, _)| *k);
    victim.and_then(|k| t.open.remove(&k)).map(|o| o.abort)
}

/// Ends connections past a deadline, every `WATCHDOG_TICK`: a response not
/// written out within `WRITE_TIMEOUT` (a client that does not read), or a
/// connection open for `CONNECTION_LIFETIME`. (hyper itself ends one whose
/// next request header has not come within `HEADER_TIMEOUT`.)
async fn watchdog(table: Table) {
    loop {
        tokio::time::sleep(WATCHDOG_TICK).await;
        let mut late = Vec::new();
        table_lock(&table).open.retain(|_, o| {
            let past = o.progress.writing_ms() > WRITE_TIMEOUT.as_millis() as u64 || o.since.elapsed() > CONNECTION_LIFETIME;
            if past {
                late.push(o.abort.clone());
            }
            !past
        });
        // Outside the lock: an ended task's `Leave` takes it.
        for a in late {
            a.abort();
        }
    }
}

async fn accept(listener: std::net::TcpListener, cache: Arc<Cache>) -> Result<(), String> {
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| format!("cannot listen: {e}"))?;
    let table: Table = Arc::default();
    tokio::spawn(watchdog(table.clone()));
    let epoch = Instant::now();
    let mut last_error: Option<std::io::ErrorKind> = None;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors, a connection reset before it was
                // accepted: said once per kind, then tried again shortly.
                if last_error != Some(e.kind()) {
                    say(&format!("accepting a connection: {e} (trying again)"));
                    last_error = Some(e.kind());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let progress = Arc::new(Progress::new(epoch));
        let mut t = table_lock(&table);
        let displaced = admit(&mut t, peer.ip());
        let id = t.next_id;
        t.next_id += 1;
        let (cache, io, leave) = (cache.clone(), Watched { io: stream, progress: progress.clone() }, Leave(table.clone(), id));
        let answering = progress.clone();
        let task = tokio::spawn(async move {
            let _leave = leave;
            let service = hyper::service::service_fn(move |req| answer(req, cache.clone(), answering.clone()));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES)
                // A request whose client shut its side down after sending
                // it (`nc -N`) is answered.
                .half_close(true)
                .serve_connection(hyper_util::rt::TokioIo::new(io), service);
            // Errors are the client's (a reset, a timeout, a bad request
            // already answered): nothing to do but close.
            let _ = conn.await;
        });
        // The task cannot have ended yet (this runtime has one thread and
        // has not run it): its entry goes in before its `Leave` can run.
        t.open.insert(id, Open { ip: peer.ip(), progress, abort: task.abort_handle(), since: Instant::now() });
        drop(t);
        if let Some(a) = displaced {
            a.abort();
        }
    }
}

/// The last metrics text encoded, with the number of the read pass it
/// shows: scrapes between two passes share one encoding.
struct Cache {
    state: Arc<Mutex<State>>,
    last: Mutex<Option<(u64, Bytes)>>,
}

impl Cache {
    /// The metrics text: the cached one when the state has not changed
    /// since it was encoded (`State::version`), else the encoding of a copy
    /// of the state, taken under the same lock as its version, so that a
    /// cached text is never older than one already served.
    fn text(&self) -> Result<Bytes, std::fmt::Error> {
        let last = |c: &Mutex<Option<(u64, Bytes)>>| c.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (version, metrics) = {
            let st = lock(&self.state);
            let version = st.version();
            if let Some((v, text)) = last(&self.last) {
                if v == version {
                    return Ok(text);
                }
            }
            (version, Metrics::of(&st))
        };
        let mut registry = Registry::default();
        registry.register_collector(Box::new(metrics));
        let mut s = String::with_capacity(1 << 16);
        prometheus_client::encoding::text::encode(&mut s, &registry)?;
        let text = Bytes::from(s);
        let mut cached = self.last.lock().unwrap_or_else(|e| e.into_inner());
        // Two encodings that ran at once: the later state is kept.
        if cached.as_ref().is_none_or(|(v, _)| *v < version) {
            *cached = Some((version, text.clone()));
        }
        Ok(text)
    }
}

fn plain(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

async fn answer(req: Request<Incoming>, cache: Arc<Cache>, progress: Arc<Progress>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    if req.uri().path() != "/metrics" {
        return Ok(plain(StatusCode::NOT_FOUND, "not found: the metrics are at /metrics\n"));
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed: /metrics answers GET and HEAD\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Ok(r);
    }
    progress.answering.fetch_add(1, Ordering::Relaxed);
    let text = tokio::task::spawn_blocking(move || cache.text()).await;
    progress.answering.fetch_sub(1, Ordering::Relaxed);
    Ok(match text {
        Ok(Ok(s)) => {
            let mut r = Response::new(Full::new(s));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
            r
        }
        _ => plain(StatusCode::INTERNAL_SERVER_ERROR, "the metrics could not be encoded\n"),
    })
}
