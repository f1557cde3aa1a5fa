#!/usr/bin/env python3
"""What a ring's memory costs the measuring thread (speedtest/growth.cpp),
ours beside the original.

The original zeroes a new ID's whole buffer at the ID's first use on a
thread; ours commits a ring's memory in bulk as it is written, in slow
paths of the writing thread (the ID's first use, then each growth). This
driver runs growth.cpp built against our header and, with --original,
against the original's, alternately (the order swaps every run), and
prints, median over runs: an ID's first Start+Stop, the slowest of its
next 70,000 (ours: its largest growth) and a warm one, in cycles and µs.

Judged, with --original only: ours' slowest Start+Stop after an ID's first
use (its largest growth) at most the original's first use of an ID
(STALL_GOAL ×), the ratio taken between adjacent runs of the two builds
and its median over runs; a ratio whose runs lie on both sides of the goal
and spread by more than BUSY_SPREAD is BUSY, not judged. Without the
original, ours' figures are printed for information.

It runs as one of speedtest/run.py's --extra commands (a judged row is a
line `GOAL <PASS|FAIL|BUSY> text`). Exit 0 unless a program failed.
"""
import argparse
import statistics
import subprocess

STALL_GOAL = 1.00
BUSY_SPREAD = 0.10


def run(binary):
    """{row: value} of one run of growth.cpp."""
    p = subprocess.run([binary], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"growth: {binary} exited {p.returncode}: {p.stderr.strip()}")
    return {f[1]: float(f[2]) for f in (line.split() for line in p.stdout.splitlines()) if len(f) == 3 and f[0] == "ROW"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True, help="growth.cpp built against our header")
    ap.add_argument("--original", help="growth.cpp built against the original header")
    ap.add_argument("--runs", type=int, default=4, help="runs of each build")
    a = ap.parse_args()
    engines = [("ours", a.ours)] + ([("original", a.original)] if a.original else [])
    runs = {e: [] for e, _ in engines}
    for r in range(a.runs):
        for e, b in (engines if r % 2 == 0 else engines[::-1]):
            runs[e].append(run(b))

    def med(e, key):
        return statistics.median(x[key] for x in runs[e])

    print(f"\n== a ring's memory on the measuring thread (speedtest/growth.cpp): one Start+Stop timed alone, "
          f"median over 12 fresh IDs and {a.runs} runs{', alternating with the original' if a.original else ''} ==")
    print(f"{'row':<52} {'ours':>18}" + (f" {'original':>18}" if a.original else ""))
    rows = [("growth.first", "an ID's first Start+Stop on a thread"),
            ("growth.worst", "the slowest of its next 70,000 (ours: largest growth)"),
            ("growth.warm", "a Start+Stop once the ring is written through")]
    for key, label in rows:
        line = f"{label:<52}"
        for e, _ in engines:
            c = med(e, key)
            line += f" {c:>9.0f} cy {c / med(e, 'growth.tsc_per_us'):>6.1f} us"
        print(line)
    if not a.original:
        return
    pairs = [x["growth.worst"] / y["growth.first"] for x, y in zip(runs["ours"], runs["original"])]
    m = statistics.median(pairs)
    v = "PASS" if m <= STALL_GOAL else "FAIL"
    if max(pairs) - min(pairs) > BUSY_SPREAD and min(pairs) <= STALL_GOAL < max(pairs):
        v = "BUSY"
    print(f"GOAL {v} largest ring growth on the measuring thread vs the original's first use of an ID: {m:.2f} x (goal <= {STALL_GOAL:.2f})")


if __name__ == "__main__":
    main()
