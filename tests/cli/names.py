#!/usr/bin/env python3
"""Names are bytes: two regions whose names differ only in a byte that is
not UTF-8 and its `\\xNN` look-alike, each with IDs that differ the same
way, stay apart in stats, trace, diff, plot and serve (tests/cli/
names_producer.py records them; the ID caf\\xe8 is 4 x slower in the
second region, so diff must say slower and exit 8). Run in a private
/dev/shm (make cli-test)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

LATTE = sys.argv[1]
LIB = os.path.join(os.path.dirname(LATTE), "liblatte.so")
HERE = os.path.dirname(os.path.abspath(__file__))
BASE = f"/latte-names-{os.getpid()}"
A = BASE.encode() + b"-\xff"  # the byte 0xFF
B = BASE.encode() + b"-\\xff"  # the text \xff
SHOWN = {A: BASE + "-\\xff", B: BASE + "-\\\\xff"}
# Every ID as the tools show it, with its span count.
IDS = {"caf\\xe9": 1000, "caf\\xe8": 1000, "caf\\\\xe9": 500, "x\\xff": 200, "x\\\\xff": 150}
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {what}", file=sys.stderr)


def latte(*args):
    return subprocess.run([LATTE.encode(), *[a if isinstance(a, bytes) else a.encode() for a in args]], capture_output=True, timeout=120)


def producer(region, slow):
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "names_producer.py"), LIB, os.fsdecode(region), str(slow)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "READY", "producer ready"
    return p


def scrape(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20).read().decode()


def label(s):
    # A Prometheus label value: backslash and quote escaped.
    return s.replace("\\", "\\\\").replace('"', '\\"')


producers = [producer(A, 1), producer(B, 4)]
serve = subprocess.Popen([LATTE, "serve", "--listen", "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
try:
    port = None
    for _ in range(20):
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/metrics", serve.stderr.readline())
        if m:
            port = int(m.group(1))
            break
    check(port is not None, "serve listens")
    # serve counts what is recorded once it watches: both regions seen first.
    for _ in range(100):
        body = scrape(port) if port else ""
        if all(f'latte_producer_up{{region="{label(SHOWN[r][1:])}"}} 1' in body for r in (A, B)):
            break
        subprocess.run(["sleep", "0.1"])
    check(all(f'latte_producer_up{{region="{label(SHOWN[r][1:])}"}} 1' in body for r in (A, B)), f"serve exports both regions under two labels: {body[-2000:]}")
    for p in producers:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in producers:
        check(p.stdout.readline().strip() == "DONE", "producer done")
    want = {(SHOWN[r][1:], i): n for r in (A, B) for i, n in IDS.items()}
    got = {}
    for _ in range(100):
        body = scrape(port) if port else ""
        got = {(m[1], m[2]): int(m[3]) for m in (re.match(r'latte_span_duration_seconds_count\{region="((?:[^"\\]|\\.)*)",id="((?:[^"\\]|\\.)*)"\} (\d+)', l) for l in body.splitlines()) if m}
        got = {(k[0].replace("\\\\", "\\"), k[1].replace("\\\\", "\\")): v for k, v in got.items() if k[0].startswith(label(BASE[1:]))}
        if got == want:
            break
        subprocess.run(["sleep", "0.1"])
    check(got == want, f"serve: a series per (region, ID), each with its own count: {got}")
finally:
    serve.terminate()
    serve.wait(timeout=10)
    for p in producers:
        p.stdin.close()
        p.wait(timeout=30)

try:
    for r in (A, B):
        out = latte("stats", r, "--json")
        rows = {c["component"]: c["read"] for c in json.loads(out.stdout)["components"]} if out.returncode == 0 else {}
        check(rows == IDS, f"stats {SHOWN[r]}: a row per ID: {rows} {out.stderr!r}")
        out = latte("stats", r)
        text = out.stdout.decode()
        check(all(len(re.findall(rf"│ {re.escape(i)} +│ +{n} ", text)) == 1 for i, n in IDS.items()), f"stats table: a row per ID:\n{text}")
    out = latte("ls", "--json")
    names = [x["name"] for x in json.loads(out.stdout)] if out.returncode == 0 else []
    check(names.count(SHOWN[A]) == 1 and names.count(SHOWN[B]) == 1, f"ls: both regions, each once: {names}")

    def trace(*ids):
        args = [a for i in ids for a in ("--id", i)]
        out = latte("trace", A, "-o", "-", *args)
        evs = json.loads(out.stdout) if out.returncode == 0 else []
        counts = {}
        for e in evs:
            if e["ph"] == "X":
                counts[e["name"]] = counts.get(e["name"], 0) + 1
        return counts

    check(trace() == IDS, f"trace: an event name per ID: {trace()}")
    check(trace(b"caf\xe8") == {"caf\\xe8": 1000}, "trace --id with the name's bytes")
    check(trace("caf\\xe9") == {"caf\\xe9": 1000}, "trace --id with the name as shown")
    check(trace("caf\\\\xe9", "x\\\\xff") == {"caf\\\\xe9": 500, "x\\\\xff": 150}, "trace --id of the look-alikes as shown")

    out = latte("diff", A, B, "--json")
    d = json.loads(out.stdout) if out.stdout else {}
    verdicts = {i["id"]: (i["verdict"], i["a"]["count"], i["b"]["count"]) for i in d.get("ids", [])}
    check(out.returncode == 8 and len(d.get("ids", [])) == len(IDS) and verdicts.get("caf\\xe8", ("",))[0] == "slower"
          and all(verdicts.get(i, (None, 0, 0))[1:] == (n, n) for i, n in IDS.items()),
          f"diff: an ID per name, caf\\xe8 slower, exit 8: {out.returncode} {verdicts}")
    check(d.get("a", {}).get("source") == SHOWN[A] and d.get("b", {}).get("source") == SHOWN[B], f"diff names both sources apart: {d.get('a')} {d.get('b')}")

    with tempfile.TemporaryDirectory() as tmp:
        svg = os.path.join(tmp, "p.svg")
        out = latte("plot", A, B, "-o", svg)
        titles = re.findall(r">\s*([^<>]*?): percentile spectrum", open(svg).read()) if out.returncode == 0 else []
        check(sorted(titles) == sorted(IDS), f"plot: a panel per ID: {titles} {out.stderr!r}")
        out = latte("plot", A, B, "-o", svg, "--id", b"x\xff", "--id", "x\\\\xff")
        titles = re.findall(r">\s*([^<>]*?): percentile spectrum", open(svg).read()) if out.returncode == 0 else []
        check(sorted(titles) == ["x\\\\xff", "x\\xff"], f"plot --id by bytes and as shown: {titles} {out.stderr!r}")
finally:
    for r in (A, B):
        try:
            os.unlink(b"/dev/shm" + r)
        except FileNotFoundError:
            pass

print(f"cli names: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
