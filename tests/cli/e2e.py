#!/usr/bin/env python3
"""End-to-end test of the `latte` command against a real instrumented C++
service recording into a shared region: ls, stats (table and JSON), trace,
watch (plain mode), while the service runs and after it exits; colour and
width on a pseudo-terminal and through a pipe; then hostile objects, error
messages and exit codes, and permission denied."""
import fcntl
import json
import os
import stat
import pty
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import termios

LATTE, SERVICE = sys.argv[1], sys.argv[2]
NAME = f"/latte-e2e-{os.getpid()}"
SHM = "/dev/shm" + NAME
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {what}", file=sys.stderr)


# The environment of a colour terminal user; each test adds what it needs.
BASE_ENV = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "TERM")}
BASE_ENV["TERM"] = "xterm-256color"
ESC = "\x1b["


def latte(*args, env=None):
    return subprocess.run([LATTE, *args], capture_output=True, text=True, timeout=60, env={**BASE_ENV, **(env or {})})


def latte_pty(*args, cols=200, env=None):
    """Runs latte with standard output on a pseudo-terminal `cols` wide;
    returns (exit code, what it printed there, its standard error)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    p = subprocess.Popen([LATTE, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env={**BASE_ENV, **(env or {})})
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    return p.returncode, out.decode().replace("\r\n", "\n"), err


def fields(line):
    """A `watch --plain` line as a dict (every field is key=value)."""
    out = {}
    for f in line.split(" "):
        k, sep, v = f.partition("=")
        check(sep == "=" and k and v, f"watch field {f!r} in {line!r}")
        out[k] = v
    return out


def stats_json():
    r = latte("stats", NAME, "--json")
    check(r.returncode == 0, f"stats --json exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def check_counts(doc, when):
    comps = {c["component"]: c for c in doc["components"]}
    # "read": every sample read; "samples": those kept by the outlier rule.
    for name, n in [("svc.a", 5000), ("svc.b", 300), ("svc.outer", 100), ("svc.inner", 100)]:
        c = comps.get(name, {})
        check(c.get("read") == n, f"{name} read {c.get('read')} {when}")
        check(c.get("samples", -1) + c.get("outliers", -1) == n, f"{name} kept + outliers {when}")
    check(comps.get("svc.a", {}).get("threads") == 2, f"svc.a threads {when}")
    check("latte.calibrate" not in comps, f"calibration hidden {when}")
    a = comps.get("svc.a", {})
    check(a.get("min", -1) <= a.get("p50", -2) <= a.get("p99", -3) <= a.get("max", -4), f"percentiles ordered {when}")
    check(doc["counters"]["threads_seen"] >= 3, f"threads counter {when}")


svc = subprocess.Popen([SERVICE, NAME], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
try:
    ready = svc.stdout.readline().split()
    check(ready[:1] == ["READY"], "service ready")
    sched = int(ready[1]) if len(ready) > 1 else -1

    # ls: ours, alive.
    r = latte("ls", "--json")
    regions = {x["name"]: x for x in json.loads(r.stdout)}
    check(NAME in regions and regions[NAME]["alive"] and regions[NAME]["pid"] == svc.pid, "ls lists the live region")

    # stats while it runs.
    doc = stats_json()
    check(doc["producer_alive"], "producer alive")
    check_counts(doc, "while running")
    r = latte("stats", NAME)
    check(r.returncode == 0 and "LATTE TELEMETRY [CYCLES][RAW]" in r.stdout and "svc.a" in r.stdout and "P99.9" in r.stdout, "stats table")
    # Switched samples: the service's 20 sleeping spans of 40 are flagged
    # (when its switch tracking was granted: it says so on its READY line).
    check(sched == 0, f"the service's switch tracking was refused ({sched}): the switched figures cannot be checked")
    sl = {c["component"]: c for c in doc["components"]}.get("svc.sleep", {})
    check(sl.get("read") == 40 and 20 <= sl.get("switched", -1) <= 40 and abs(sl.get("switched_share", 0) - sl.get("switched", 0) / 40) < 1e-9,
          f"stats --json counts switched samples: {sl}")
    r = latte("stats", NAME, "--json", "--clean")
    check(r.returncode == 0, f"stats --json --clean exit {r.returncode}: {r.stderr}")
    cl = json.loads(r.stdout)
    slc = {c["component"]: c for c in cl["components"]}.get("svc.sleep", {})
    check(cl["clean"] and slc.get("read") == 40 and slc.get("outliers") == 0 and slc.get("samples") == 40 - slc.get("switched", -1),
          f"stats --clean leaves the switched samples out: {slc}")
    check(slc.get("max", 1e18) < sl.get("max", 0), f"the sleeping spans are not in the clean figures: {slc.get('max')} vs {sl.get('max')}")
    # Every sample of svc.allsleep switched out: its --clean row says nothing is left.
    al = {c["component"]: c for c in cl["components"]}.get("svc.allsleep", {})
    check(al.get("read") == 5 and al.get("switched") == 5 and al.get("samples") == 0 and al.get("median", 0) is None and al.get("p99", 0) is None,
          f"stats --clean --json keeps a component with nothing left, figures null: {al}")
    r = latte("stats", NAME, "--clean", "--wide")
    check("svc.allsleep" in r.stdout and "none left" in r.stdout and "every sample read (5) was switched out" in r.stdout, f"stats --clean says nothing is left: {r.stdout}")
    check(cl.get("switch_tracking") is True and sl.get("switched") is not None, "a region with switch tracking says so")
    r = latte("stats", NAME, "--clean", "--wide")
    check(r.returncode == 0 and "SWITCHED" in r.stdout and "clean: samples switched out" in r.stdout, "stats --clean table")
    r = latte("stats", NAME, "--time", "--calibrated")
    check(r.returncode == 0 and "LATTE TELEMETRY [TIME][CAL]" in r.stdout and "SELF-OFFSET" in r.stdout, "stats --time --calibrated")
    check(" ns " in r.stdout or " us " in r.stdout, "times shown")

    # trace while it runs.
    out = f"/tmp/latte-e2e-{os.getpid()}.json"
    r = latte("trace", NAME, "-o", out)
    check(r.returncode == 0, f"trace exit {r.returncode}: {r.stderr}")
    events = [e for e in json.load(open(out)) if e["ph"] != "M"]
    names = [e["name"] for e in events]
    check(names.count("svc.a") == 5000 and names.count("svc.b") == 300, "trace counts")
    check(all(e["ph"] == "X" and e["pid"] == svc.pid and e["tid"] > 0 for e in events), "trace fields")
    check(all(a["ts"] <= b["ts"] for a, b in zip(events, events[1:])), "trace ordered")
    os.unlink(out)

    # watch, plain mode (stdout is a pipe), three intervals.
    r = latte("watch", NAME, "--interval", "200ms", "--count", "3")
    lines = [fields(l) for l in r.stdout.splitlines()]
    check(r.returncode == 0 and len(lines) >= 3, f"watch lines: {r.stdout!r}")
    check(all(l.get("time", "").endswith("Z") and "T" in l.get("time", "") for l in lines), "watch lines carry a UTC timestamp")
    live = [l for l in lines if l.get("id") == "svc.live"]
    check(len(live) == 3, "watch shows the live ID every interval")
    check(all(l.get("recorded_rate", "").endswith("/s") and float(l["recorded_rate"][:-2]) > 50 and l.get("read_rate", "").endswith("/s") for l in live),
          "watch rates per second")
    check(all(int(l.get("read", -1)) + int(l.get("lost", -1)) == int(l.get("recorded", -3)) for l in live), f"watch: read + lost == recorded: {live}")
    check(all(l[k].endswith("cycles") for l in live for k in ("p50", "p90", "p99", "p999", "max")), "cycle mode says cycles")
    check(all(l.get("id") not in ("svc.a", "latte.calibrate") for l in lines), "watch shows only what is new, never the reserved ID")
    # The live pulses come from the tracked thread, each after a 1 ms poll: switched.
    check(all(int(l.get("switched", -1)) >= 1 and l.get("switched_share", "").endswith("%") for l in live), f"watch counts switched samples: {live}")
    r = latte("watch", NAME, "--interval", "200ms", "--count", "1", "--time")
    live = [fields(l) for l in r.stdout.splitlines() if "id=svc.live" in l]
    check(r.returncode == 0 and len(live) == 1 and all(live[0][k].endswith("ns") for k in ("p50", "max")), f"watch --time in ns: {r.stdout!r}")
    # On a terminal: a redrawn table whose cells carry the unit.
    code, out, err = latte_pty("watch", NAME, "--interval", "200ms", "--count", "2")
    check(code == 0 and ESC + "2J" in out and "P99.9" in out and " cycles" in out, f"watch on a terminal: {out!r} {err!r}")
    # --clean: svc.nap's samples are all switched out: its line says none is left.
    r = latte("watch", NAME, "--interval", "300ms", "--count", "2", "--clean")
    naps = [fields(l) for l in r.stdout.splitlines() if "id=svc.nap" in l]
    check(r.returncode == 0 and naps and all(l.get("p50") == "none-left" and l.get("left") == "0" and l.get("read") == l.get("switched") for l in naps),
          f"watch --clean: an ID with nothing left says so: {naps}")
    code, out, err = latte_pty("watch", NAME, "--interval", "200ms", "--count", "1", env={"TERM": "dumb"})
    check(code == 0 and ESC not in out and "time=" in out, f"watch with TERM=dumb is plain: {out!r}")

    # Colour: only on a terminal, and never with NO_COLOR or TERM=dumb.
    code, out, err = latte_pty("stats", NAME)
    check(code == 0 and ESC + "90m" in out and "svc.a" in out, f"stats on a terminal is coloured: {err!r}")
    r = latte("stats", NAME)
    check(r.returncode == 0 and ESC not in r.stdout, "stats through a pipe has no escapes")
    for env in ({"NO_COLOR": "1"}, {"TERM": "dumb"}):
        code, out, err = latte_pty("stats", NAME, env=env)
        check(code == 0 and ESC not in out and "svc.a" in out, f"no colour with {env}")
    code, out, err = latte_pty("stats", NAME, "--color", "never")
    check(code == 0 and ESC not in out, "--color never on a terminal")
    r = latte("stats", NAME, "--color", "always", env={"NO_COLOR": "1"})
    check(r.returncode == 0 and ESC + "90m" in r.stdout, "--color always through a pipe")
    r = latte("stats", NAME, "--color", "sometimes")
    check(r.returncode == 2 and "sometimes" in r.stderr, "--color takes auto, always, never")

    # Width: the table fits the terminal, or COLUMNS; --wide keeps all.
    def widest(text):
        return max(len(re.sub(r"\x1b\[[0-9;]*m", "", l)) for l in text.splitlines())
    code, out, err = latte_pty("stats", NAME, cols=80)
    check(code == 0 and widest(out) <= 80 and "svc.live" in out and "--wide" in out, f"stats on an 80-column terminal: {widest(out)}")
    code, out, err = latte_pty("stats", NAME, "--wide", cols=80)
    check(code == 0 and widest(out) > 180 and "SKEW" in out, "stats --wide keeps every column")
    code, out, err = latte_pty("stats", NAME, cols=250)
    check(code == 0 and "SKEW" in out and "P99.9" in out and "--wide" not in out, "a wide terminal shows every column")
    r = latte("stats", NAME, env={"COLUMNS": "100"})
    check(r.returncode == 0 and widest(r.stdout) <= 100 and "MEDIAN" in r.stdout, "COLUMNS=100 through a pipe")
    r = latte("stats", NAME)
    check(r.returncode == 0 and "SKEW" in r.stdout, "a pipe without COLUMNS gets every column")
    code, out, err = latte_pty("ls", cols=60)
    check(code == 0 and widest(out) <= 60 and NAME in out, f"ls on a 60-column terminal: {out!r}")

    # --json honours --time: the same figures in ns.
    cyc = {c["component"]: c for c in stats_json()["components"]}
    r = latte("stats", NAME, "--json", "--time")
    doc = json.loads(r.stdout)
    ns = {c["component"]: c for c in doc["components"]}
    cpn = doc["cycles_per_ns"]
    check(doc["unit"] == "ns" and cpn > 0, "stats --json --time says ns")
    check(abs(ns["svc.a"]["p50"] * cpn - cyc["svc.a"]["p50"]) <= 1e-6 * max(1.0, cyc["svc.a"]["p50"]), "p50 in ns = cycles / cycles_per_ns")
    check(stats_json()["unit"] == "cycles", "stats --json says cycles")

    # The trace of the CLI: metadata events, then the extra fields under args.
    r = latte("trace", NAME, "-o", out_path := f"/tmp/latte-e2e-{os.getpid()}-meta.json")
    events = json.load(open(out_path))
    os.unlink(out_path)
    meta = [e for e in events if e["ph"] == "M"]
    procs = [e for e in meta if e["name"] == "process_name"]
    threads = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    check(len(procs) == 1 and procs[0]["pid"] == svc.pid and "svc-main" in procs[0]["args"]["name"], f"process name: {procs}")
    check(threads.get(svc.pid) == f"svc-main (tid {svc.pid})", f"main thread named with its tid: {threads}")
    xs = [e for e in events if e["ph"] == "X"]
    check(set(threads) == {e["tid"] for e in xs}, "a thread_name event for every thread that recorded")
    check(all(set(e["args"]) == {"component", "depth", "start_ns", "duration_ns", "sample_index"} for e in xs), "extra fields under args")
    check(all("component" not in e for e in xs), "no extra fields at the top level")
    check(not any(e["name"] == "latte.calibrate" for e in xs), "trace leaves the reserved ID out")
    check([e["args"]["sample_index"] for e in xs if e["name"] == "svc.b"] == list(range(300)), "sample_index counts per component")

    # ls counts the program's IDs only (the reserved latte.calibrate is left out).
    r = latte("ls", "--json")
    regions = {x["name"]: x for x in json.loads(r.stdout)}
    check(regions[NAME]["ids"] == 8, f"ls ids (svc.nap too), without the reserved one: {regions[NAME]}")

    # Output path errors name the output path.
    r = latte("trace", NAME, "-o", "/missing/dir/t.json")
    check(r.returncode == 6 and "/missing/dir/t.json" in r.stderr and "no such directory /missing/dir" in r.stderr, f"trace to a missing directory: {r.stderr!r}")
    r = latte("trace", NAME, "-o", "/tmp")
    check(r.returncode == 6 and "is a directory" in r.stderr, f"trace to a directory: {r.stderr!r}")
    # A write that fails removes only a file trace made: not a file that was
    # there, not a device (a node of /dev/full's numbers in a small tmpfs of
    # this test's mount namespace).
    small = tempfile.mkdtemp(prefix="latte-e2e-small.")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", small]).returncode == 0:
        try:
            keep, new, dev = (os.path.join(small, n) for n in ("keep.json", "new.json", "full"))
            with open(keep, "w") as f:
                f.write("kept")
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
            r = latte("trace", NAME, "-o", keep)
            check(r.returncode == 6 and "no space left" in r.stderr and os.path.exists(keep), f"trace into a full disk over a file that was there: the file stays ({r.stderr!r})")
            os.remove(keep)
            r = latte("trace", NAME, "-o", new)
            check(r.returncode == 6 and not os.path.exists(new), f"trace into a full disk: its own partial file removed ({r.stderr!r})")
            r = latte("trace", NAME, "-o", dev)
            check(r.returncode == 6 and os.path.exists(dev) and stat.S_ISCHR(os.stat(dev).st_mode), f"trace to a full device: the device stays ({r.stderr!r})")
            r = latte("plot", NAME, "-o", dev + ".svg")
            check(r.returncode in (0, 6), f"plot into a full disk: exit {r.returncode}")
            check(r.returncode == 0 or not os.path.exists(dev + ".svg"), "plot's own partial file removed")
        finally:
            subprocess.run(["umount", small])
            os.rmdir(small)
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            r = subprocess.run([LATTE, "stats", NAME], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
        check(r.returncode == 1 and "standard output" in r.stderr, f"stats > /dev/full: {r.returncode} {r.stderr!r}")

    # watch ends by itself once the producer has exited and all is read.
    watcher = subprocess.Popen([LATTE, "watch", NAME, "--interval", "100ms"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=BASE_ENV)
    follower = subprocess.Popen([LATTE, "watch", NAME, "--interval", "100ms", "--follow", "--count", "40"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=BASE_ENV)
finally:
    svc.stdin.close()
    rc = svc.wait(timeout=30)
check(rc == 0, "service exit")
wout, werr = watcher.communicate(timeout=60)
check(watcher.returncode == 0 and "has exited and every sample is read" in werr, f"watch ends after the producer: {watcher.returncode} {werr!r}")
last = [fields(l) for l in wout.splitlines()][-1:]
check(bool(last), "watch printed its intervals")
fout, ferr = follower.communicate(timeout=60)
flines = [fields(l) for l in fout.splitlines()]
check(follower.returncode == 0 and len(flines) >= 40 and flines[-1].get("state") == "idle" and "exited" not in ferr, f"watch --follow keeps going: {len(flines)} {ferr!r}")

# After the producer exited: the object persists and reads the same.
doc = stats_json()
check(not doc["producer_alive"], "producer gone")
check_counts(doc, "after exit")
r = latte("ls", "--json")
regions = {x["name"]: x for x in json.loads(r.stdout)}
check(NAME in regions and not regions[NAME]["alive"], "ls shows the producer dead")

# Hostile and missing objects.
def expect_fail(target, code, text, label):
    r = latte("stats", target)
    check(r.returncode == code and text in r.stderr and not r.stdout, f"{label}: exit {r.returncode}, {r.stderr!r}")

foreign = SHM + "-foreign"
with open(foreign, "wb") as f:
    f.write(os.urandom(8192))
expect_fail(NAME + "-foreign", 4, "not a latte region", "foreign object")
data = open(SHM, "rb").read()
with open(SHM + "-trunc", "wb") as f:
    f.write(data[:5000])
expect_fail(NAME + "-trunc", 4, "truncated", "truncated object")
bad = bytearray(data)
bad[8] = 99
with open(SHM + "-ver", "wb") as f:
    f.write(bad)
expect_fail(NAME + "-ver", 4, "version", "future version")
fileimg = f"/tmp/latte-e2e-{os.getpid()}.img"
with open(fileimg, "wb") as f:
    f.write(data[:3000])
expect_fail(fileimg, 4, "truncated", "truncated file")
expect_fail("/latte-e2e-absent", 3, "no such region", "missing region")
expect_fail("./latte-e2e-absent.img", 3, "no such file", "missing file")
expect_fail("/", 4, "is a directory", "the root directory")
with tempfile.TemporaryDirectory() as d:
    expect_fail(d, 4, "is a directory", "a directory")
textfile = f"/tmp/latte-e2e-{os.getpid()}.txt"
with open(textfile, "w") as f:
    f.write("not a region\n" * 1000)
expect_fail(textfile, 4, "not a latte region", "a text file")
os.unlink(textfile)
# Objects that cannot be regions: a socket and symbolic links (one to a
# region: latte never follows a link).
odd = [f"/dev/shm/latte-e2e-odd-{os.getpid()}-{k}" for k in ("sock", "link", "loop")]
sock = socket.socket(socket.AF_UNIX)
sock.bind(odd[0])
os.symlink(f"/dev/shm{NAME}", odd[1])
os.symlink(odd[2], odd[2])
r = latte("ls")
check(r.returncode == 0 and "-foreign" not in r.stdout and "-odd-" not in r.stdout, f"ls skips objects that are not ours: {r.stdout}")
sock.close()
for p in odd:
    os.unlink(p)

# Permission denied: the region is 0600 and owned by us; read it as nobody.
runuser = shutil.which("runuser") or shutil.which("setpriv")
if os.geteuid() == 0 and runuser and os.path.basename(runuser) == "runuser":
    os.chmod(LATTE, 0o755)
    r = subprocess.run([runuser, "-u", "nobody", "--", LATTE, "stats", NAME], capture_output=True, text=True, timeout=60)
    check(r.returncode == 5 and "permission denied" in r.stderr and "owner uid 0" in r.stderr, f"permission denied: {r.returncode} {r.stderr!r}")
    r = subprocess.run([runuser, "-u", "nobody", "--", LATTE, "ls"], capture_output=True, text=True, timeout=60)
    row = [l for l in r.stdout.splitlines() if l.startswith(NAME + " ")]
    check(r.returncode == 0 and len(row) == 1 and "permission denied" in row[0], f"ls as another user shows the region it cannot read: {r.stdout!r}")
    r = subprocess.run([runuser, "-u", "nobody", "--", LATTE, "ls", "--json"], capture_output=True, text=True, timeout=60)
    rows = {x["name"]: x for x in json.loads(r.stdout)}
    check(rows.get(NAME, {}).get("readable") is False and rows[NAME]["error"] == "permission denied", "ls --json as another user")
else:
    print("cli e2e: permission check skipped (needs root and runuser)")

# A region whose name is not UTF-8 (the library takes any bytes but '/'
# and NUL): listed, read and exported by every command, shown with \xNN.
BNAME = NAME.encode() + b"-\xff\xfe"
BSHOWN = NAME + "-\\xff\\xfe"
nsvc = subprocess.Popen([SERVICE.encode(), BNAME], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
try:
    check(nsvc.stdout.readline().startswith("READY"), "service under a non-UTF-8 name ready")

    def latte_b(*args):
        return subprocess.run([LATTE.encode(), *args], capture_output=True, timeout=60, env=BASE_ENV)

    r = latte_b(b"ls", b"--json")
    rows = {x["name"]: x for x in json.loads(r.stdout)} if r.returncode == 0 else {}
    check(rows.get(BSHOWN, {}).get("readable") is True and rows[BSHOWN]["pid"] == nsvc.pid, f"ls lists a non-UTF-8 name as {BSHOWN}: {list(rows)}")
    r = latte_b(b"stats", BNAME, b"--json")
    comps = {c["component"]: c for c in json.loads(r.stdout)["components"]} if r.returncode == 0 else {}
    check(comps.get("svc.a", {}).get("read") == 5000, f"stats reads a non-UTF-8 name: {r.returncode} {r.stderr!r}")
    r = latte_b(b"watch", BNAME, b"--interval", b"200ms", b"--count", b"1")
    check(r.returncode == 0 and b"id=svc.live" in r.stdout, f"watch reads a non-UTF-8 name: {r.returncode} {r.stderr!r}")
    # On an 80-column terminal, with a live ID's row, LOST is shown.
    code, out, err = latte_pty("watch", BNAME, "--interval", "200ms", "--count", "2", cols=80)
    check(code == 0 and "svc.live" in out and "LOST" in out, f"watch on 80 columns keeps LOST: {out!r}")
    # trace -o - writes to standard output; filters by ID, thread and time.
    r = latte_b(b"trace", BNAME, b"-o", b"-")
    full = [e for e in json.loads(r.stdout) if e["ph"] == "X"] if r.returncode == 0 else []
    check([e["name"] for e in full].count("svc.a") == 5000 and not os.path.exists("-"), f"trace -o - of a non-UTF-8 name to stdout: {r.returncode} {r.stderr!r}")
    r = latte_b(b"trace", BNAME, b"-o", b"-", b"--id", b"svc.b", b"--id", b"svc.inner")
    got = [e["name"] for e in json.loads(r.stdout) if e["ph"] == "X"] if r.returncode == 0 else []
    check(got.count("svc.b") == 300 and got.count("svc.inner") == 100 and len(got) == 400, f"trace --id: {len(got)} events")
    r = latte_b(b"trace", BNAME, b"-o", b"-", b"--id", b"svc.b", b"--id", b"no.such.id")
    check(r.returncode == 2 and b"no ID named no.such.id" in r.stderr and not r.stdout, f"trace --id of no ID: a usage error ({r.returncode}, {r.stderr!r})")
    r = latte_b(b"trace", BNAME, b"-o", b"-", b"--thread", str(nsvc.pid).encode())
    evs = json.loads(r.stdout) if r.returncode == 0 else []
    xs = [e for e in evs if e["ph"] == "X"]
    check(xs and all(e["tid"] == nsvc.pid for e in xs) and "svc.a" not in {e["name"] for e in xs}
          and {e["tid"] for e in evs if e["name"] == "thread_name"} == {nsvc.pid}, "trace --thread: the main thread's samples only")
    if full:
        ts = sorted(e["ts"] for e in full)
        lo, hi = ts[len(ts) // 4], ts[3 * len(ts) // 4]
        r = latte_b(b"trace", BNAME, b"-o", b"-", b"--from", f"{lo / 1e6!r}s".encode(), b"--to", f"{hi / 1e6!r}s".encode())
        win = [e for e in json.loads(r.stdout) if e["ph"] == "X"] if r.returncode == 0 else []
        want = [e for e in full if lo - 0.001 <= e["ts"] < hi + 0.001]
        check(win and all(lo - 0.001 <= e["ts"] < hi + 0.001 for e in win) and abs(len(win) - len(want)) <= 2,
              f"trace --from/--to: {len(win)} events in [{lo}, {hi}) us, {len(want)} expected: {r.stderr!r}")
    # serve exports it (the name named on its command line).
    sv = subprocess.Popen([LATTE.encode(), b"serve", b"--listen", b"127.0.0.1:0", BNAME], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for _ in range(20):
            line = sv.stderr.readline()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/metrics", line)
            if m:
                port = int(m.group(1))
                break
        body = ""
        if port:
            import urllib.request
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20).read().decode()
        check(f'latte_producer_up{{region="{BSHOWN[1:].replace(chr(92), chr(92) * 2)}"}} 1' in body, f"serve exports a non-UTF-8 name: port {port}")
    finally:
        sv.terminate()
        sv.wait(timeout=10)
finally:
    nsvc.stdin.close()
    nsvc.wait(timeout=30)
os.unlink(b"/dev/shm" + BNAME)

# watch against a producer of known count and rate: 500,000 spans of
# about 1 us on one thread into rings of 4,096 samples (lapped every few
# ms). Over its intervals watch's recorded counts add up to exactly
# 500,000, each interval's read + lost == recorded, and the recorded rate
# of the intervals inside the burst is the producer's own rate (within a
# factor 2: an invariant, not a speed check). No switch tracking:
# SWITCHED says so.
BURST = NAME + "-burst"
bsvc = subprocess.Popen([SERVICE, BURST, "burst"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
check(bsvc.stdout.readline().strip() == "READY", "burst service ready")
bwatch = subprocess.Popen([LATTE, "watch", BURST, "--interval", "200ms"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=BASE_ENV)
# Its first line: watch has skipped what was there and reads from now on.
first = bwatch.stdout.readline()
bsvc.stdin.write("go\n")
bsvc.stdin.flush()
done = bsvc.stdout.readline().split()
bsvc.stdin.close()
bsvc.wait(timeout=30)
bout, berr = bwatch.communicate(timeout=60)
bout = first + bout
check(done[:1] == ["DONE"] and bwatch.returncode == 0, f"burst done {done}, watch exit {bwatch.returncode} {berr!r}")
blines = [fields(l) for l in bout.splitlines() if "id=svc.burst" in l]
rec = [int(l.get("recorded", -1)) for l in blines]
check(sum(rec) == 500000, f"watch: recorded adds up to what the producer wrote (500000): {sum(rec)} over {len(rec)} intervals")
check(all(int(l.get("read", -1)) + int(l.get("lost", -1)) == int(l.get("recorded", -2)) for l in blines), "watch: read + lost == recorded in every interval")
if len(done) == 2:
    known_rate = 500000 / (int(done[1]) / 1e9)
    inner = [float(l["recorded_rate"][:-2]) for a, l, b in zip(rec, blines[1:], rec[2:]) if a > 0 and b > 0 and "recorded_rate" in l]
    inner.sort()
    mid = inner[len(inner) // 2] if inner else 0
    check(not inner or 0.5 <= mid / known_rate <= 2, f"watch: recorded rate {mid:.0f}/s (median inside the burst) vs the producer's {known_rate:.0f}/s")
check(blines and all(l.get("switched") == "not-tracked" and "switched_share" not in l for l in blines), f"watch: switched not tracked: {blines[:1]}")
doc = json.loads(latte("stats", BURST, "--json").stdout)
bc = {c["component"]: c for c in doc["components"]}.get("svc.burst", {})
check(doc.get("switch_tracking") is False and "switched" in bc and bc["switched"] is None, f"stats --json: switched null when not tracked: {bc}")
r = latte("stats", BURST, "--wide")
check("not tracked" in r.stdout, "stats: SWITCHED not tracked")
# The burst producer never calibrated: a calibrated table says so (no matrix of zeros).
r = latte("stats", BURST, "--calibrated", "--wide")
check(r.returncode == 0 and "NOT CALIBRATED" in r.stdout and "SELF-OFFSET" not in r.stdout and "never calibrated" in r.stderr,
      f"stats --calibrated of an uncalibrated region says so: {r.stdout[:400]!r}")
os.unlink("/dev/shm" + BURST)

for p in [SHM, foreign, SHM + "-trunc", SHM + "-ver", fileimg]:
    if os.path.exists(p):
        os.unlink(p)
print(f"cli e2e: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
