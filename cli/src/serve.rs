//! `latte serve`: the regions' metrics (`export`) over HTTP at `/metrics`,
//! in the OpenMetrics text format, for Prometheus to scrape.
//!
//! Two threads of work: the read pass (`export::State::pass`) once per
//! interval on a thread of its own, and the HTTP server, hyper's HTTP/1
//! connections on a single-threaded tokio runtime. A scrape encodes the
//! state on tokio's blocking pool (at most `ENCODERS` at once), so neither a
//! slow client nor a long encoding holds up the others.
//!
//! What a client gets: `GET` or `HEAD /metrics` 200 with the metrics; another
//! method on `/metrics` 405 (with `Allow`); another path 404; a request hyper
//! cannot parse 400, headers over `MAX_HEADER_BYTES` 431. A client that has
//! not sent its whole header within `HEADER_TIMEOUT` (also between requests
//! on a kept-alive connection) is disconnected; no connection lasts longer
//! than `CONNECTION_LIFETIME`; at most `MAX_CONNECTIONS` are open at once
//! (more wait in the listen backlog).

use crate::export::{Options, State};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The OpenMetrics text format's media type.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);
const MAX_CONNECTIONS: usize = 256;
const MAX_HEADER_BYTES: usize = 16 * 1024;
const ENCODERS: usize = 4;

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
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "latte: serve: {text}");
}

fn lock(s: &Mutex<State>) -> MutexGuard<'_, State> {
    // A pass that panicked (caught in `reader`) left the state usable.
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// The state as a prometheus-client collector: encoded on each scrape.
pub struct Metrics(Arc<Mutex<State>>);

impl Metrics {
    pub fn new(state: Arc<Mutex<State>>) -> Metrics {
        Metrics(state)
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("latte regions")
    }
}

impl Collector for Metrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        lock(&self.0).encode(&mut enc)
    }
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
        .map_err(|e| crate::fail("serve", &format!("cannot listen on {}: {e}", o.listen), crate::EXIT_OTHER))?;
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| o.listen.to_string());
    {
        let st = lock(&state);
        for n in &named {
            match st.unreadable_reason(n.as_bytes()) {
                Some(Some(why)) => say(&format!("{n}: {why} (looked at again every second)")),
                None => say(&format!("no region {n} yet (looked for every second)")),
                Some(None) => {}
            }
        }
    }
    let what = if named.is_empty() { "every latte region in /dev/shm".to_string() } else { named.join(" ") };
    say(&format!("listening on http://{addr}/metrics ({what})"));
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Metrics::new(state.clone())));
    let registry = Arc::new(registry);
    let every = o.interval;
    std::thread::Builder::new()
        .name("latte-read".into())
        .spawn(move || reader(&state, every))
        .map_err(|e| crate::fail("serve", &format!("cannot start the reading thread: {e}"), crate::EXIT_OTHER))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(ENCODERS)
        .build()
        .map_err(|e| crate::fail("serve", &format!("cannot start the HTTP runtime: {e}"), crate::EXIT_OTHER))?;
    rt.block_on(accept(listener, registry)).map_err(|e| crate::fail("serve", &e, crate::EXIT_OTHER))
}

/// The read pass, once per `every` (never two back to back after a slow one).
fn reader(state: &Mutex<State>, every: Duration) {
    let mut next = Instant::now() + every;
    loop {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next = (next + every).max(Instant::now());
        let mut st = lock(state);
        // A panic is a bug: said once per pass, and the next pass goes on.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| st.pass(Instant::now()))).is_err() {
            say("a read pass failed; the next one goes on");
        }
    }
}

async fn accept(listener: std::net::TcpListener, registry: Arc<Registry>) -> Result<(), String> {
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| format!("cannot listen: {e}"))?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut last_error: Option<std::io::ErrorKind> = None;
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return Err("the connection limit closed".into());
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
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
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| answer(req, registry.clone()));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            // Errors are the client's (a reset, a timeout, a bad request
            // already answered): nothing to do but close.
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, conn).await;
            drop(permit);
        });
    }
}

fn plain(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

async fn answer(req: Request<Incoming>, registry: Arc<Registry>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    if req.uri().path() != "/metrics" {
        return Ok(plain(StatusCode::NOT_FOUND, "not found: the metrics are at /metrics\n"));
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed: /metrics answers GET and HEAD\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Ok(r);
    }
    let text = tokio::task::spawn_blocking(move || {
        let mut s = String::with_capacity(1 << 16);
        prometheus_client::encoding::text::encode(&mut s, &registry).map(|_| s)
    })
    .await;
    Ok(match text {
        Ok(Ok(s)) => {
            let mut r = Response::new(Full::new(Bytes::from(s)));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
            r
        }
        _ => plain(StatusCode::INTERNAL_SERVER_ERROR, "the metrics could not be encoded\n"),
    })
}
