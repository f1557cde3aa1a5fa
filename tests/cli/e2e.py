#!/usr/bin/env python3
"""End-to-end test of the `latte` command against a real instrumented C++
service recording into a shared region: ls, stats (table and JSON), trace,
watch (plain mode), while the service runs and after it exits; then hostile
objects, a missing region, and permission denied."""
import json
import os
import shutil
import subprocess
import sys

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


def latte(*args):
    return subprocess.run([LATTE, *args], capture_output=True, text=True, timeout=60)


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
    check(svc.stdout.readline().strip() == "READY", "service ready")

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
    r = latte("stats", NAME, "--time", "--calibrated")
    check(r.returncode == 0 and "LATTE TELEMETRY [TIME][CAL]" in r.stdout and "SELF-OFFSET" in r.stdout, "stats --time --calibrated")
    check(" ns " in r.stdout or " us " in r.stdout, "times shown")

    # trace while it runs.
    out = f"/tmp/latte-e2e-{os.getpid()}.json"
    r = latte("trace", NAME, "-o", out)
    check(r.returncode == 0, f"trace exit {r.returncode}: {r.stderr}")
    events = json.load(open(out))
    names = [e["name"] for e in events]
    check(names.count("svc.a") == 5000 and names.count("svc.b") == 300, "trace counts")
    check(all(e["ph"] == "X" and e["pid"] == svc.pid and e["tid"] > 0 for e in events), "trace fields")
    check(all(a["ts"] <= b["ts"] for a, b in zip(events, events[1:])), "trace ordered")
    os.unlink(out)

    # watch, plain mode (stdout is a pipe), three intervals.
    r = latte("watch", NAME, "--interval", "200ms", "--count", "3")
    lines = [l for l in r.stdout.splitlines() if l.startswith("interval=")]
    check(r.returncode == 0 and len(lines) >= 3, f"watch lines: {r.stdout!r}")
    live = [l for l in lines if "id=svc.live" in l]
    check(len(live) == 3, "watch shows the live ID every interval")
    check(all(float(l.split("rate=")[1].split()[0]) > 50 for l in live), "watch rates")
    check(all("svc.a" not in l for l in lines), "watch shows only what is new")
finally:
    svc.stdin.close()
    rc = svc.wait(timeout=30)
check(rc == 0, "service exit")

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
r = latte("ls")
check(r.returncode == 0 and "-foreign" not in r.stdout, "ls skips objects that are not ours")

# Permission denied: the region is 0600 and owned by us; read it as nobody.
runuser = shutil.which("runuser") or shutil.which("setpriv")
if os.geteuid() == 0 and runuser and os.path.basename(runuser) == "runuser":
    os.chmod(LATTE, 0o755)
    r = subprocess.run([runuser, "-u", "nobody", "--", LATTE, "stats", NAME], capture_output=True, text=True, timeout=60)
    check(r.returncode == 5 and "permission denied" in r.stderr, f"permission denied: {r.returncode} {r.stderr!r}")
else:
    print("cli e2e: permission check skipped (needs root and runuser)")

for p in [SHM, foreign, SHM + "-trunc", SHM + "-ver", fileimg]:
    if os.path.exists(p):
        os.unlink(p)
print(f"cli e2e: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
