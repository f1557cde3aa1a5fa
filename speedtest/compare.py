#!/usr/bin/env python3
"""The `latte record` and `latte diff` figures of `make speedtest`.

usage: compare.py LATTE PRODUCER

1. record following a thread that records flat out (tests/compare/
   producer.cpp, "rec.fast" back to back for SECONDS): samples followed per
   second of the reader's CPU time (user + system, from getrusage of the
   finished `latte record`), beside memcpy of the same bytes in this
   process; lost must be 0 (goal: follows it without loss). A loss no
   larger than what the writer wrote while record's following thread was
   kept off its CPU (its reader_stalled_seconds) is UNJUDGED, as serve's.
2. `latte serve` following the same flat-out thread for SECONDS (rings of
   the default 65,536 samples, which it laps in under 2 ms): lost must be 0;
   serve's CPU time (user + system, from /proc) while it followed, scaled
   to a thread recording 36 M spans/s, must stay under 25 % of one core:
   SERVE_RUNS runs, PASS when every run is under the goal, FAIL when none
   is, BUSY (too noisy to judge, every figure printed) when they lie on
   both sides of it. The loss is judged on the first run.
   A reader kept off its CPU longer than a ring takes to lap (on a VM
   whose vCPU the host pauses) cannot follow that thread whole: serve
   says how long it was (latte_serve_reader_stalled_seconds_total). A
   loss no larger than what the writer wrote during those stalls is
   reported UNJUDGED with both figures; a larger one FAILs.
3. diff of two recordings of 10 M samples each (the producer's "rec.slow",
   recorded twice): wall time of `latte diff`, goal under 2 s.

Prints one row per figure with its goal and PASS, FAIL or BUSY; exits 1
when a goal failed, else 3 when a row was too noisy to judge, else 0."""
import atexit, os, re, shutil, signal, subprocess, sys, tempfile, time, urllib.request

LATTE, PRODUCER = sys.argv[1], sys.argv[2]
SECONDS = 2.0
DIFF_SAMPLES = 10_000_000
DIFF_GOAL_S = 2.0
# The rate the serve goal is stated at (spans/s of one thread), and the
# share of one core serve may use to follow it.
SERVE_RATE = 36e6
SERVE_SHARE_GOAL = 0.25
# Runs of serve following the thread: on 2 vCPUs its CPU share moves by a
# fifth from run to run.
SERVE_RUNS = 3
# Samples per ring of the producer's region (the default).
RING = 65536
TMP = tempfile.mkdtemp(prefix="latte-speed-compare-")
# Hundreds of MiB of recordings: gone however the run ends.
atexit.register(shutil.rmtree, TMP, True)
failed = 0
busy = 0
# The longest the whole comparison may run (about a minute here): past it,
# it stops (its producers, record and serve are killed on the way out), says
# so and fails.
LIMIT_S = 600


def past_limit(signum, frame):
    print(f"speedtest: speedtest/compare.py ran past its time limit of {LIMIT_S} s: stopped; FAIL", flush=True)
    sys.exit(1)


signal.signal(signal.SIGALRM, past_limit)
signal.alarm(LIMIT_S)


def row(name, value, goal, ok):
    global failed
    failed += not ok
    print(f"{name:<44} {value:>28}   goal {goal:<22} {'PASS' if ok else 'FAIL'}")


def judge_loss(who, thread, written, recorded, lost, stalled):
    """The row of `who`'s loss following the flat-out thread: 0 is the goal;
    a loss no larger than what the writer wrote while `who`'s `thread` was
    kept off its CPU (`stalled` seconds, preempted or woken late: the most
    those stalls could lose) is UNJUDGED, a larger one FAILs."""
    rate = written / SECONDS
    explained = int(stalled * rate)
    print(f"   a ring of {RING} samples laps in {RING / rate * 1e3:.2f} ms; {who}'s {thread} was stalled {stalled * 1e3:.1f} ms in all "
          f"(stretches over 1 ms off its CPU), during which the writer wrote {explained} spans")
    name = f"{who}: flat-out thread followed, lost"
    if 0 < lost <= explained and recorded == written:
        print(f"{name:<44} {f'{lost} of {recorded}':>28}   goal 0                      UNJUDGED ({who}'s {thread} was kept off its CPU longer than the ring laps)")
    else:
        row(name, f"{lost} of {recorded}", "0", lost == 0 and recorded == written)


def run_record(producer_args, out):
    """The producer (its region, then argv producer_args) followed by
    `latte record --from-start -o out` until it exits; returns (the
    producer's DONE line, record's output, record's CPU seconds: user +
    system, from wait4 on its pid)."""
    region = f"/latte-speed-compare-{os.getpid()}"
    prod = subprocess.Popen([PRODUCER, region, *producer_args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert prod.stdout.readline().strip() == "READY"
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.dup2(wr, 1)
            os.execv(LATTE, [LATTE, "record", region, "-o", out, "--from-start"])
        os.close(wr)
        time.sleep(0.2)
        prod.stdin.write("go\n")
        prod.stdin.flush()
        done = prod.stdout.readline()
        prod.stdin.close()
        prod.wait(timeout=120)
        chunks = []
        while True:
            b = os.read(rd, 65536)
            if not b:
                break
            chunks.append(b)
        _, _, usage = os.wait4(pid, 0)
        os.close(rd)
    finally:
        if prod.poll() is None:
            prod.kill()
        try:
            os.remove("/dev/shm" + region)
        except OSError:
            pass
    return done, b"".join(chunks).decode(), usage.ru_utime + usage.ru_stime


def memcpy_rate(nbytes):
    """Bytes per second of copying nbytes into memory already touched (a
    slice assignment is one memmove; best of 5) in this process."""
    src = bytearray(os.urandom(1 << 20)) * max(1, nbytes >> 20)
    dst = bytearray(len(src))
    best = None
    for _ in range(5):
        t = time.perf_counter()
        dst[:] = src
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return len(src) / best


print("== latte record, latte serve and latte diff")
done, text, cpu = run_record(["0", "0", str(SECONDS)], os.path.join(TMP, "flat.rec"))
m = re.search(r"^id=rec.fast recorded=(\d+) read=(\d+) lost=(\d+)", text, re.M)
written = int(re.search(r"fast=(\d+)", done).group(1))
recorded, read, lost = (int(m.group(k)) for k in (1, 2, 3))
per_core = read / cpu if cpu > 0 else float("inf")
copy = memcpy_rate(min(read * 16, 256 << 20)) / 16
stalled = float(re.search(r"^total .*reader_stalled_seconds=(\S+)", text, re.M).group(1))
print(f"   producer wrote {written} spans in {SECONDS} s ({written / SECONDS / 1e6:.1f} M/s); record read {read}, lost {lost}, CPU {cpu:.3f} s")
judge_loss("record", "following thread", written, recorded, lost, stalled)
print(f"{'record: samples followed per reader core':<44} {per_core / 1e6:>24.1f} M/s   (figure)")
print(f"{'  memcpy of the same bytes, one core':<44} {copy / 1e6:>24.1f} M/s   (figure: samples of 16 bytes)")
os.remove(os.path.join(TMP, "flat.rec"))

def cpu_seconds(pid):
    """User + system CPU time of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_serve():
    """The producer's flat-out thread followed by `latte serve` for SECONDS:
    (spans written, serve's recorded, lost and read figures, serve's CPU
    seconds over the recording, the seconds its reading thread was
    stalled)."""
    region = f"/latte-speed-serve-{os.getpid()}"
    prod = subprocess.Popen([PRODUCER, region, "0", "0", str(SECONDS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    serve = None
    try:
        assert prod.stdout.readline().strip() == "READY"
        serve = subprocess.Popen([LATTE, "serve", region, "--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = int(re.search(r"127\.0\.0\.1:(\d+)/metrics", serve.stderr.readline()).group(1))
        time.sleep(0.2)
        cpu0 = cpu_seconds(serve.pid)
        prod.stdin.write("go\n")
        prod.stdin.flush()
        written = int(re.search(r"fast=(\d+)", prod.stdout.readline()).group(1))
        cpu = cpu_seconds(serve.pid) - cpu0
        figures = None
        for _ in range(50):  # the last samples come with the next look or pass
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            get = lambda n: int(float(re.search(n + r'\{[^}]*id="rec.fast"[^}]*\} (\S+)', text).group(1)))
            stalled = float(re.search(r"^latte_serve_reader_stalled_seconds_total (\S+)", text, re.M).group(1))
            figures = (get("latte_samples_recorded_total"), get("latte_samples_lost_total"), get("latte_span_duration_seconds_count"), stalled)
            if figures[0] == written:
                break
            time.sleep(0.1)
        recorded, lost, read, stalled = figures
        return written, recorded, lost, read, cpu, stalled
    finally:
        for p in (serve, prod):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        try:
            os.remove("/dev/shm" + region)
        except OSError:
            pass


shares, per_core = [], []
for k in range(SERVE_RUNS):
    written, recorded, lost, read, cpu, stalled = run_serve()
    rate = written / SECONDS
    shares.append(cpu / SECONDS * SERVE_RATE / rate)
    per_core.append(read / cpu if cpu > 0 else float("inf"))
    print(f"   run {k + 1}: producer wrote {written} spans in {SECONDS} s ({rate / 1e6:.1f} M/s); serve recorded {recorded}, read {read}, lost {lost}, CPU {cpu:.2f} s")
    if k == 0:
        judge_loss("serve", "reading thread", written, recorded, lost, stalled)
name = f"serve: CPU to follow {SERVE_RATE / 1e6:.0f} M spans/s"
value = ", ".join(f"{x * 100:.1f}" for x in shares) + " % of one core"
goal = f"< {SERVE_SHARE_GOAL * 100:.0f} %"
under = [x < SERVE_SHARE_GOAL for x in shares]
if any(under) and not all(under):
    busy += 1
    print(f"{name:<44} {value:>28}   goal {goal:<22} BUSY (runs on both sides of the goal)")
else:
    row(name, value, goal, all(under))
print(f"{'serve: samples followed per reader core':<44} {sorted(per_core)[len(per_core) // 2] / 1e6:>24.1f} M/s   (figure, median of the runs; memcpy above)")

files = []
for k in range(2):
    f = os.path.join(TMP, f"diff-{k}.rec")
    _, text, _ = run_record(["0", str(DIFF_SAMPLES)], f)
    m = re.search(r"^id=rec.slow recorded=(\d+) read=(\d+) lost=(\d+)", text, re.M)
    print(f"   recording {k + 1}: rec.slow recorded {m.group(1)}, read {m.group(2)}, lost {m.group(3)}")
    files.append(f)
best = None
for _ in range(3):
    t = time.perf_counter()
    r = subprocess.run([LATTE, "diff", files[0], files[1]], capture_output=True, text=True)
    dt = time.perf_counter() - t
    best = dt if best is None else min(best, dt)
print("   " + "\n   ".join(r.stdout.strip().splitlines()))
row("diff: two recordings of 10 M samples", f"{best:.2f} s (best of 3)", f"< {DIFF_GOAL_S} s", best < DIFF_GOAL_S and r.returncode in (0, 8))
sys.exit(1 if failed else 3 if busy else 0)
