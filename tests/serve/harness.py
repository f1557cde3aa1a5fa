"""What the tests of `latte serve` share: the processes they start (and
stop, whatever happens), scrapes, the metrics text parsed, the histogram's
bucket bounds, and raw samples read through latte's C reader (ctypes over
liblatte.so)."""
import ctypes
import http.client
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {what}", file=sys.stderr)
    return cond


def wait_for(what, fn, limit_s, every=0.1):
    """Polls `fn` (None: not yet) every `every` s for at most `limit_s`;
    checks that it came, and returns its value."""
    end = time.monotonic() + limit_s
    while True:
        v = fn()
        if v is not None or time.monotonic() > end:
            check(v is not None, f"{what} within {limit_s} s")
            return v
        time.sleep(every)

def finish(name):
    print(f"{name}: {passed} passed, {failed} failed")
    return 1 if failed else 0


class Processes:
    """Every process a test starts; `stop_all` ends each (TERM, then KILL)
    and waits for it. Used as a context manager, it runs on any exit, and
    SIGTERM/SIGALRM turn into exceptions so that it does."""

    def __init__(self, limit_s):
        self.procs = []
        self.limit_s = limit_s

    def __enter__(self):
        def stop(sig, _frame):
            raise SystemExit(f"stopped by signal {sig} (time limit {self.limit_s} s for SIGALRM)")

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGALRM, stop)
        signal.alarm(self.limit_s)
        return self

    def __exit__(self, *exc):
        signal.alarm(0)
        self.stop_all()
        return False

    def start(self, args, **kw):
        p = subprocess.Popen(args, **kw)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in (p.stdin, p.stdout, p.stderr):
            if f:
                f.close()

    def stop_all(self):
        for p in reversed(self.procs):
            self.stop(p)


def drain(f, lines):
    try:
        lines.extend(f)
    except (ValueError, OSError):  # closed by Processes.stop
        pass


def start_serve(procs, latte, *args):
    """`latte serve --listen 127.0.0.1:0 ARGS`: the port the kernel picked,
    read from its "listening on" line, and the process."""
    p = procs.start([latte, "serve", "--listen", "127.0.0.1:0", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    while True:
        line = p.stderr.readline()
        if not line:
            raise RuntimeError(f"latte serve ended before listening (exit {p.wait()}): {''.join(lines)}")
        lines.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/metrics", line)
        if m:
            # The rest of what it says is kept, so that it never waits on a full pipe.
            threading.Thread(target=drain, args=(p.stderr, lines), daemon=True).start()
            return int(m.group(1)), p, lines


def start_service(procs, service, region, mode):
    p = procs.start([service, region, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if line.split()[:1] != ["READY"]:
        raise RuntimeError(f"service {region} {mode} did not start: {line!r} (exit {p.poll()})")
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method="GET", path="/metrics", timeout=20):
    """(status, headers, body) of one request on a new connection. The
    timeout only guards against a hang; no check depends on speed."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        c.close()


def scrape(port):
    status, headers, body = request(port)
    if status != 200:
        raise RuntimeError(f"scrape: HTTP {status}: {body}")
    return body


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def unescape(v):
    return re.sub(r'\\(.)', lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def parse(text):
    """Samples of an OpenMetrics text: [(name, {label: value}, value)]."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            raise ValueError(f"not a sample line: {line!r}")
        labels = {k: unescape(v) for k, v in LABEL.findall(m.group(3) or "")}
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def value(samples, name, **labels):
    """The value of the one sample `name` with those labels (None if none)."""
    hits = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items())]
    if len(hits) > 1:
        raise ValueError(f"{len(hits)} samples match {name} {labels}")
    return hits[0] if hits else None


# The histogram's finite bucket bounds (seconds), as docs/fleet.md states
# them: 4 ns * 2^(k/2), k = 0 .. 62.
BOUNDS = [(4 << (k // 2)) * (math.sqrt(2) if k % 2 else 1.0) / 1e9 for k in range(63)]


def bucket_of(seconds):
    """Index of the bucket holding a value (le: at most the bound); 63 is +Inf."""
    for k, b in enumerate(BOUNDS):
        if seconds <= b:
            return k
    return len(BOUNDS)


def nearest_rank(sorted_values, q):
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


class SlotInfo(ctypes.Structure):
    _fields_ = [("index", ctypes.c_uint32), ("generation", ctypes.c_uint32), ("id_token", ctypes.c_uint32), ("thread_idx", ctypes.c_uint32),
                ("os_tid", ctypes.c_uint32), ("state", ctypes.c_uint32), ("write_idx", ctypes.c_uint64), ("gen_base", ctypes.c_uint64)]


class Cursor(ctypes.Structure):
    _fields_ = [("generation", ctypes.c_uint32), ("_pad", ctypes.c_uint32), ("next", ctypes.c_uint64), ("lost", ctypes.c_uint64),
                ("read", ctypes.c_uint64), ("caught_up_ns", ctypes.c_uint64), ("base", ctypes.c_uint64), ("lost_before", ctypes.c_uint64)]


class RawSample(ctypes.Structure):
    _fields_ = [("start_tsc", ctypes.c_uint64), ("packed", ctypes.c_uint64)]


class RegionInfo(ctypes.Structure):
    _fields_ = [("producer_pid", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("id_capacity", ctypes.c_uint32), ("slot_capacity", ctypes.c_uint32),
                ("samples_per_slot", ctypes.c_uint32), ("display_unit", ctypes.c_uint32), ("total_size", ctypes.c_uint64),
                ("anchor_tsc", ctypes.c_uint64), ("anchor_realtime_ns", ctypes.c_uint64), ("cycles_per_ns", ctypes.c_double),
                ("calibrated", ctypes.c_uint32), ("_pad", ctypes.c_uint32), ("overhead", ctypes.c_double * 10)]


MAX_DURATION = (1 << 48) - 1


def read_raw(libpath, region):
    """Every sample of a quiescent region through latte's C reader: per ID
    name, the durations in cycles; and the region's cycles per ns and pid.
    Fails when a slot could not be read whole (lost or short)."""
    lib = ctypes.CDLL(libpath)
    r = ctypes.c_void_p()
    rc = lib.latte_reader_open(region.encode(), ctypes.byref(r))
    if rc != 0:
        raise RuntimeError(f"latte_reader_open({region}): {rc}")
    try:
        lib.latte_reader_set_min_interval(r, ctypes.c_uint64(0))
        info = RegionInfo()
        lib.latte_reader_get_info(r, ctypes.byref(info))
        slots = (SlotInfo * 4096)()
        n = ctypes.c_size_t()
        rc = lib.latte_reader_slots(r, slots, 4096, ctypes.byref(n))
        if rc != 0:
            raise RuntimeError(f"latte_reader_slots: {rc}")
        per_id = {}
        for s in slots[: n.value]:
            if lib.latte_reader_id_is_reserved(r, s.id_token) != 0:
                continue
            buf = ctypes.create_string_buffer(64)
            lib.latte_reader_id_name(r, s.id_token, buf, 64)
            name = buf.value.decode()
            cur = Cursor()
            out = (RawSample * (s.write_idx + 1))()
            got = ctypes.c_size_t()
            rc = lib.latte_reader_read(r, s.index, ctypes.byref(cur), out, s.write_idx + 1, ctypes.byref(got))
            if rc != 0 or got.value != s.write_idx or cur.lost != 0:
                raise RuntimeError(f"slot {s.index}: rc {rc}, read {got.value} of {s.write_idx}, lost {cur.lost}")
            per_id.setdefault(name, []).extend(x.packed & MAX_DURATION for x in out[: got.value])
        return per_id, info.cycles_per_ns, info.producer_pid
    finally:
        lib.latte_reader_close(r)


def written(libpath, region):
    """Samples written so far per ID name (the slots' write indices), read
    through latte's C reader."""
    lib = ctypes.CDLL(libpath)
    r = ctypes.c_void_p()
    rc = lib.latte_reader_open(region.encode(), ctypes.byref(r))
    if rc != 0:
        raise RuntimeError(f"latte_reader_open({region}): {rc}")
    try:
        slots = (SlotInfo * 4096)()
        n = ctypes.c_size_t()
        if lib.latte_reader_slots(r, slots, 4096, ctypes.byref(n)) != 0:
            raise RuntimeError("latte_reader_slots failed")
        out = {}
        for s in slots[: n.value]:
            if lib.latte_reader_id_is_reserved(r, s.id_token) == 0:
                buf = ctypes.create_string_buffer(64)
                lib.latte_reader_id_name(r, s.id_token, buf, 64)
                out[buf.value.decode()] = out.get(buf.value.decode(), 0) + s.write_idx
        return out
    finally:
        lib.latte_reader_close(r)
