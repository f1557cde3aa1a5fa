#!/usr/bin/env python3
"""`latte serve` exporting 500 regions at once: one exporter maps every one
(no fixed limit on the mappings a reader holds) and counts each exactly.
The regions are made after the exporter started (so it reads them from
their beginning) by tests/serve/many_regions.c, one process per region,
region i holding i + 1 samples of "many.span" from a producer that has
exited. Every region must show exactly that count, recorded == read, none
lost, none unreadable, its producer down.

usage: many_regions.py LATTE MANY_REGIONS"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

LATTE, MAKER = sys.argv[1:3]
N = 500
TAG = f"latte-serve-many-{os.getpid()}"


def main():
    t0 = time.monotonic()
    with h.Processes(60) as procs:
        port, serve, lines = h.start_serve(procs, LATTE, "--interval", "100ms")
        made = subprocess.run([MAKER, "/" + TAG, str(N)], capture_output=True, text=True, timeout=60)
        h.check(made.returncode == 0 and made.stdout.strip() == f"MADE {N}", f"{N} regions made: {made.returncode} {made.stdout!r} {made.stderr!r}")
        names = [f"{TAG}-{i}" for i in range(N)]

        # A pass of serve may have read a region's last span before its
        # producer exited (up 1 then): wait for the pass after.
        def all_counted():
            s = h.parse(h.scrape(port))
            got = {l["region"]: v for n, l, v in s if n == "latte_span_duration_seconds_count" and l.get("id") == "many.span"}
            down = {l["region"] for n, l, v in s if n == "latte_producer_up" and v == 0}
            return s if len(got) == N and all(got.get(x) == i + 1 and x in down for i, x in enumerate(names)) else None

        s = h.wait_for(f"every one of {N} regions exported with its exact count, its producer down", all_counted, 20)
        if s is None:
            s = h.parse(h.scrape(port))
        count = {l["region"]: v for n, l, v in s if n == "latte_span_duration_seconds_count" and l.get("id") == "many.span"}
        recorded = {l["region"]: v for n, l, v in s if n == "latte_samples_recorded_total" and l.get("id") == "many.span"}
        lost = {l["region"]: v for n, l, v in s if n == "latte_samples_lost_total" and l.get("id") == "many.span"}
        up = {l["region"]: v for n, l, v in s if n == "latte_producer_up"}
        unreadable = [l for n, l, v in s if n == "latte_serve_region_unreadable"]
        wrong = [(x, count.get(x), recorded.get(x), lost.get(x)) for i, x in enumerate(names)
                 if not (count.get(x) == recorded.get(x) == i + 1 and lost.get(x) == 0)]
        h.check(not wrong, f"count == recorded == i + 1 and lost == 0 for every region: {len(wrong)} wrong, first {wrong[:3]}")
        h.check(sum(count.get(x, 0) for x in names) == N * (N + 1) // 2, "the total over the regions")
        h.check(all(up.get(x) == 0 for x in names), "every producer shown down (they exited)")
        h.check(not unreadable, f"no region unreadable: {unreadable[:3]}")
        h.check(serve.poll() is None, "latte serve still runs")
        print(f"{N} regions: {len(count)} exported, {sum(count.values()):.0f} samples counted")
    for x in os.listdir("/dev/shm"):
        if x.startswith(TAG):
            os.unlink("/dev/shm/" + x)
    print(f"serve many regions: {time.monotonic() - t0:.1f} s")
    return h.finish("serve many regions")


if __name__ == "__main__":
    sys.exit(main())
