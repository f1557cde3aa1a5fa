"""`latte serve` and `latte watch` follow a region that grows while they
read it, and serve accounts for rings that change owner: a producer (ctypes over liblatte.so) starts with 4 rings of 64
samples and records 300 new IDs, 100 spans each, one after another, so the
region grows by several chunks of rings and of names while both read. Every
ID is exported once with read + lost == recorded == 100 exactly (rings lap
between passes: loss is expected, and counted), and watch names IDs made
after it started. Then 1,000 short-lived threads over 128 rings: serve's
read + lost == recorded == what the threads wrote. Then rings past a
region's budget of 1 MiB: serve's early laps, ring memory and budget are
the producer's own (`latte stats --json`), read + lost == recorded. Run
by `make serve-test` in a private /dev/shm.
Usage: growth.py LATTE SERVICE LIBLATTE (SERVICE unused)."""
import json
import os
import subprocess
import sys
import time

import threading

from harness import Processes, check, drain, finish, parse, scrape, start_serve, value, wait_for

IDS, SPANS = 300, 100

# What both producers begin with: the region made with a first chunk of
# FIRST rings of 64 samples, READY said, then a line on standard input
# awaited. argv: liblatte.so, region, then the producer's own.
MAKE_REGION = r"""
import ctypes, sys, threading, time
lib = ctypes.CDLL(sys.argv[1])
class Cfg(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in ("slot_capacity", "samples_per_slot", "id_capacity", "mode", "if_taken", "budget_mib")]
cfg = Cfg(FIRST, SAMPLES, 0, 0, 0, BUDGET)
rc = lib.latte_init_shared_region_with(sys.argv[2].encode(), ctypes.byref(cfg))
print("READY" if rc == 0 else f"init {rc}", flush=True)
sys.stdin.readline()
"""

PRODUCER = MAKE_REGION.replace("FIRST", "4").replace("SAMPLES", "64").replace("BUDGET", "0") + r"""
# IDs stay valid while recorded under: kept in buffers of their own.
ids = [ctypes.create_string_buffer(f"grow.{k}".encode()) for k in range(int(sys.argv[3]))]
for b in ids:
    for _ in range(int(sys.argv[4])):
        lib.latte_start(b, 0)
        lib.latte_stop(None, 0)
    time.sleep(0.003)
print("DONE", flush=True)
sys.stdin.readline()
"""


CHURN = MAKE_REGION.replace("FIRST", "128").replace("SAMPLES", "64").replace("BUDGET", "0") + r"""
ids = [ctypes.create_string_buffer(b"churn.a"), ctypes.create_string_buffer(b"churn.b")]
def task(k):
    for _ in range(int(sys.argv[4])):
        lib.latte_start(ids[k % 2], 0)
        lib.latte_stop(None, 0)
# One short-lived thread per task, a few at a time: their rings go to the next ones.
for k in range(0, int(sys.argv[3]), 4):
    ts = [threading.Thread(target=task, args=(k + j,)) for j in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
print("DONE", flush=True)
sys.stdin.readline()
"""

# Rings of 65,536 samples in a region whose budget is 1 MiB: four IDs of
# 100,000 spans each outgrow it, so their rings lap early.
BUDGETED = MAKE_REGION.replace("FIRST", "8").replace("SAMPLES", "65536").replace("BUDGET", "1") + r"""
ids = [ctypes.create_string_buffer(f"budget.{k}".encode()) for k in range(4)]
for b in ids:
    for _ in range(int(sys.argv[3])):
        lib.latte_start(b, 0)
        lib.latte_stop(None, 0)
print("DONE", flush=True)
sys.stdin.readline()
"""


def produced(procs, latte, code, libpath, kind, *args):
    """Starts producer `code` (argv: libpath, its region, then `args`) and
    `latte serve` on its region, lets it record, and returns (the
    producer, serve's port, serve, the region, its label)."""
    region = f"/latte-{kind}-{os.getpid()}"
    prod = procs.start([sys.executable, "-c", code, libpath, region, *map(str, args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    check(prod.stdout.readline().strip() == "READY", f"the {kind} producer made its region")
    port, serve, _ = start_serve(procs, latte, region)
    time.sleep(0.5)
    prod.stdin.write("go\n")
    prod.stdin.flush()
    check(prod.stdout.readline().strip() == "DONE", f"the {kind} producer recorded")
    return prod, port, serve, region, region[1:]


def region_sum(samples, name, label):
    """A metric summed over the series of one region."""
    return sum(v for n, l, v in samples if n == name and l.get("region") == label)


def budgeted(latte, libpath, procs):
    """A region at its budget: serve exports its early laps, its ring
    memory and its budget as the producer counts them, and read + lost ==
    recorded for every ID."""
    spans = 100_000
    prod, port, serve, region, label = produced(procs, latte, BUDGETED, libpath, "budget", spans)
    counters = json.loads(subprocess.run([latte, "stats", region, "--json"], capture_output=True, text=True, check=True).stdout)["counters"]

    def totals():
        s = parse(scrape(port))
        return s if region_sum(s, "latte_samples_recorded_total", label) == 4 * spans and value(s, "latte_ring_early_laps_total", region=label) == counters["early_laps"] else None

    s = wait_for("serve counts every sample and early lap of the budgeted region", totals, 30)
    if s is not None:
        read, lost = (region_sum(s, m, label) for m in ("latte_span_duration_seconds_count", "latte_samples_lost_total"))
        laps, ring, budget = (value(s, m, region=label) for m in ("latte_ring_early_laps_total", "latte_ring_memory_bytes", "latte_ring_memory_budget_bytes"))
        print(f"budget: {laps:.0f} early laps, {ring:.0f} bytes of rings of a budget of {budget:.0f}: read {read:.0f} + lost {lost:.0f} == recorded {4 * spans}")
        check(laps > 0 and laps == counters["early_laps"], f"early laps exported as the producer counts them ({laps} against {counters['early_laps']})")
        check(ring == counters["committed_bytes"] and budget == counters["budget_bytes"] == 1 << 20, f"ring memory and budget exported as the producer counts them ({ring}, {budget} against {counters})")
        check(read + lost == 4 * spans, "read + lost == recorded in a region at its budget")
    procs.stop(serve)
    prod.stdin.write("end\n")
    prod.stdin.flush()
    subprocess.run(["rm", "-f", f"/dev/shm{region}"])


def churn(latte, libpath, procs):
    """1,000 short-lived threads over a region of 128 rings: serve's read +
    lost == recorded, and recorded is exactly what the threads wrote."""
    threads, spans = 1000, 100
    prod, port, serve, region, label = produced(procs, latte, CHURN, libpath, "churn", threads, spans)

    def totals():
        s = parse(scrape(port))
        return s if region_sum(s, "latte_samples_recorded_total", label) == threads * spans else None

    s = wait_for("serve counts every sample the short threads wrote", totals, 30)
    if s is not None:
        read, lost = (region_sum(s, m, label) for m in ("latte_span_duration_seconds_count", "latte_samples_lost_total"))
        reuses = value(s, "latte_slot_reuses_total", region=label)
        print(f"churn: {threads} threads, {reuses:.0f} ring reuses: read {read:.0f} + lost {lost:.0f} == recorded {threads * spans}")
        check(read + lost == threads * spans and reuses > 0, "read + lost == what the threads wrote")
    procs.stop(serve)
    prod.stdin.write("end\n")
    prod.stdin.flush()
    subprocess.run(["rm", "-f", f"/dev/shm{region}"])


def main():
    latte, _service, libpath = sys.argv[1:4]
    region = f"/latte-growth-{os.getpid()}"
    label = region[1:]  # serve's region label: the name without its slash
    with Processes(120) as procs:
        prod = procs.start([sys.executable, "-c", PRODUCER, libpath, region, str(IDS), str(SPANS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        check(prod.stdout.readline().strip() == "READY", "the producer made its region")
        port, _serve, _lines = start_serve(procs, latte, region)
        watch = procs.start([latte, "watch", region, "--plain", "--interval", "200ms"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        watched = []
        threading.Thread(target=drain, args=(watch.stdout, watched), daemon=True).start()
        time.sleep(0.5)  # both have mapped the region as it was made
        prod.stdin.write("go\n")
        prod.stdin.flush()
        check(prod.stdout.readline().strip() == "DONE", "the producer recorded")

        seen = {}

        def settled():
            s = parse(scrape(port))
            rec = {l["id"]: v for n, l, v in s if n == "latte_samples_recorded_total" and l.get("region") == label}
            seen["ids"], seen["whole"] = len(rec), sum(1 for v in rec.values() if v == SPANS)
            if len(rec) < IDS or seen["whole"] < IDS:
                return None
            return s

        s = wait_for("serve exports every ID with all it recorded", settled, 60)
        if s is None:
            print(f"growth: serve exported {seen.get('ids')} IDs, {seen.get('whole')} with all {SPANS} recorded", file=sys.stderr)
        if s is not None:
            exact = all(
                value(s, "latte_span_duration_seconds_count", region=label, id=f"grow.{k}") + value(s, "latte_samples_lost_total", region=label, id=f"grow.{k}") == SPANS
                for k in range(IDS)
            )
            check(exact, "every ID: read + lost == recorded")
            lost = sum(value(s, "latte_samples_lost_total", region=label, id=f"grow.{k}") for k in range(IDS))
            print(f"growth: {IDS} IDs exported, {lost:.0f} of {IDS * SPANS} samples lost to lapping rings (counted)")
            check(value(s, "latte_slots_used", region=label) >= IDS, f"the region grew past its first 4 rings: slots_used {value(s, 'latte_slots_used', region=label)}")
        time.sleep(0.5)
        procs.stop(watch)
        out = "".join(watched)
        check(f"grow.{IDS - 1}" in out, "watch names an ID made after it started (the last one)")
        prod.stdin.write("end\n")
        prod.stdin.flush()
        churn(latte, libpath, procs)
        budgeted(latte, libpath, procs)
    subprocess.run(["rm", "-f", f"/dev/shm{region}"])
    return finish("serve growth")


if __name__ == "__main__":
    sys.exit(main())
