#!/usr/bin/env python3
"""The `latte record` and `latte diff` figures of `make speedtest`.

usage: compare.py LATTE PRODUCER

1. record following a thread that records flat out (tests/compare/
   producer.cpp, "rec.fast" back to back for SECONDS): samples followed per
   second of the reader's CPU time (user + system, from getrusage of the
   finished `latte record`), beside memcpy of the same bytes in this
   process; lost must be 0 (goal: follows it without loss).
2. `latte serve` following the same flat-out thread for SECONDS (rings of
   the default 65,536 samples, which it laps in under 2 ms): lost must be 0;
   serve's CPU time (user + system, from /proc) while it followed, scaled
   to a thread recording 36 M spans/s, must stay under 25 % of one core.
   Beside it, a probe process sleeps 300 us at a time and notes how late
   it wakes: on a machine that keeps a sleeping thread off its CPU longer
   than a ring takes to lap (a VM whose vCPU the host pauses), no reader
   can follow that thread whole: a loss no larger than what the writer
   wrote during the probe's late wake-ups is reported UNJUDGED with both
   figures; a larger one FAILs.
3. diff of two recordings of 10 M samples each (the producer's "rec.slow",
   recorded twice): wall time of `latte diff`, goal under 2 s.

Prints one row per figure with its goal and PASS or FAIL; exits 1 when a
goal failed."""
import os, re, subprocess, sys, tempfile, time, urllib.request

LATTE, PRODUCER = sys.argv[1], sys.argv[2]
SECONDS = 2.0
DIFF_SAMPLES = 10_000_000
DIFF_GOAL_S = 2.0
# The rate the serve goal is stated at (spans/s of one thread), and the
# share of one core serve may use to follow it.
SERVE_RATE = 36e6
SERVE_SHARE_GOAL = 0.25
# Samples per ring of the producer's region (the default).
RING = 65536
TMP = tempfile.mkdtemp(prefix="latte-speed-compare-")
failed = 0


def row(name, value, goal, ok):
    global failed
    failed += not ok
    print(f"{name:<44} {value:>28}   goal {goal:<22} {'PASS' if ok else 'FAIL'}")


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
print(f"   producer wrote {written} spans in {SECONDS} s ({written / SECONDS / 1e6:.1f} M/s); record read {read}, lost {lost}, CPU {cpu:.3f} s")
row("record: flat-out thread followed, lost", f"{lost} of {recorded}", "0", lost == 0 and recorded == written)
print(f"{'record: samples followed per reader core':<44} {per_core / 1e6:>24.1f} M/s   (figure)")
print(f"{'  memcpy of the same bytes, one core':<44} {copy / 1e6:>24.1f} M/s   (figure: samples of 16 bytes)")
os.remove(os.path.join(TMP, "flat.rec"))

def cpu_seconds(pid):
    """User + system CPU time of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The probe's sleep (ms).
PROBE_SLEEP_MS = 0.3
# What the wake-up probe runs: sleeps of 300 us for argv[1] seconds, then
# prints the longest gap between two wake-ups and every gap (ms) over 1 ms.
PROBE = r"""
import sys, time
end = time.monotonic() + float(sys.argv[1])
last, gaps = time.monotonic(), []
while last < end:
    time.sleep(0.0003)
    now = time.monotonic()
    gaps.append(now - last)
    last = now
print(max(gaps) * 1e3, *[round(g * 1e3, 2) for g in gaps if g > 1e-3])
"""


def run_serve():
    """The producer's flat-out thread followed by `latte serve` for SECONDS:
    (spans written, serve's recorded, lost and read figures, serve's CPU
    seconds over the recording, the probe's gaps in ms: the longest and
    those over 1 ms)."""
    region = f"/latte-speed-serve-{os.getpid()}"
    prod = subprocess.Popen([PRODUCER, region, "0", "0", str(SECONDS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    serve = None
    try:
        assert prod.stdout.readline().strip() == "READY"
        serve = subprocess.Popen([LATTE, "serve", region, "--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = int(re.search(r"127\.0\.0\.1:(\d+)/metrics", serve.stderr.readline()).group(1))
        time.sleep(0.2)
        cpu0 = cpu_seconds(serve.pid)
        probe = subprocess.Popen([sys.executable, "-c", PROBE, str(SECONDS)], stdout=subprocess.PIPE, text=True)
        prod.stdin.write("go\n")
        prod.stdin.flush()
        written = int(re.search(r"fast=(\d+)", prod.stdout.readline()).group(1))
        cpu = cpu_seconds(serve.pid) - cpu0
        gaps = [float(g) for g in probe.communicate(timeout=60)[0].split()]
        figures = None
        for _ in range(50):  # the last samples come with the next look or pass
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            get = lambda n: int(float(re.search(n + r'\{[^}]*id="rec.fast"[^}]*\} (\S+)', text).group(1)))
            figures = (get("latte_samples_recorded_total"), get("latte_samples_lost_total"), get("latte_span_duration_seconds_count"))
            if figures[0] == written:
                break
            time.sleep(0.1)
        return (written, *figures, cpu, gaps)
    finally:
        for p in (serve, prod):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        try:
            os.remove("/dev/shm" + region)
        except OSError:
            pass


written, recorded, lost, read, cpu, gaps = run_serve()
rate = written / SECONDS
share = cpu / SECONDS * SERVE_RATE / rate
lap_ms = RING / rate * 1e3
# How late each wake-up of the probe came (past its 0.3 ms sleep), the
# ones later than a lap, and what the writer wrote during them: the most a
# reader kept off its CPU as long could have lost.
late = [g - PROBE_SLEEP_MS for g in gaps[1:] if g - PROBE_SLEEP_MS > lap_ms]
explained = int(sum(late) * 1e-3 * rate)
print(f"   producer wrote {written} spans in {SECONDS} s ({rate / 1e6:.1f} M/s); serve recorded {recorded}, read {read}, lost {lost}, CPU {cpu:.2f} s")
print(f"   a ring of {RING} samples laps in {lap_ms:.2f} ms; the probe woke up to {max(gaps[0] - PROBE_SLEEP_MS, 0):.2f} ms late, "
      f"{len(late)} times later than a lap, during which the writer wrote {explained} spans")
if 0 < lost <= explained and recorded == written:
    print(f"{'serve: flat-out thread followed, lost':<44} {f'{lost} of {recorded}':>28}   goal 0                      UNJUDGED (this machine kept a sleeping thread off its CPU longer than the ring laps, long enough to lose it all)")
else:
    row("serve: flat-out thread followed, lost", f"{lost} of {recorded}", "0", lost == 0 and recorded == written)
row(f"serve: CPU to follow {SERVE_RATE / 1e6:.0f} M spans/s", f"{share * 100:.1f} % of one core", f"< {SERVE_SHARE_GOAL * 100:.0f} %", share < SERVE_SHARE_GOAL)
print(f"{'serve: samples followed per reader core':<44} {read / cpu / 1e6 if cpu > 0 else float('inf'):>24.1f} M/s   (figure; memcpy above)")

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
for f in files:
    os.remove(f)
os.rmdir(TMP)
sys.exit(1 if failed else 0)
