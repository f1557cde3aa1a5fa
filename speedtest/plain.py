#!/usr/bin/env python3
"""Start+Stop in a plain loop (speedtest/plain.cpp), ours beside the original.

hot.cpp times its rows in batches of 100 calls, interleaved with a
reference engine's; a user's own benchmark is a `for` loop between two TSC
reads. This driver runs plain.cpp built against our header and, with
--original, against the original's, alternately (the order swaps every
run), and prints each row's cycles per call (median over runs).

Judged, with --original only: Fast, Mid and Hard Start+Stop on one ID,
ours/original at most PARITY_GOAL, the ratio taken between the two builds'
adjacent runs (so that a change of the machine's speed between runs
mostly cancels) and its median over runs. A ratio whose runs lie on both
sides of the goal and spread by more than BUSY_SPREAD is BUSY, not judged.
The literal sweep (N consecutive short literals round-robin) is printed
for information, as × one ID of the same run and ours/original: the ID
sweep is judged by speedtest/run.py.

It runs as one of speedtest/run.py's --extra commands: a judged row is a
line `GOAL <PASS|FAIL|BUSY> text`, which run.py folds into its verdict;
every other line is printed as it is. Exit 0 unless a program failed.
"""
import argparse
import statistics
import subprocess
import sys

PARITY_GOAL = 1.05
BUSY_SPREAD = 0.05
JUDGED = [("plain.fast", "Fast Start+Stop"), ("plain.mid", "Mid Start+Stop"), ("plain.hard", "Hard Start+Stop")]
SWEEP_NS = [1, 8, 16, 24, 32, 40, 48, 64]


def run(binary, calls):
    """{row: cycles} of one run of plain.cpp."""
    p = subprocess.run([binary, str(calls)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"plain: {binary} exited {p.returncode}: {p.stderr.strip()}")
    rows = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[0] == "ROW":
            rows[f[1]] = float(f[2])
    return rows


def verdict(pairs):
    """PASS, FAIL or BUSY for ours/original ratios of adjacent runs."""
    m = statistics.median(pairs)
    if max(pairs) - min(pairs) > BUSY_SPREAD and min(pairs) <= PARITY_GOAL < max(pairs):
        return m, "BUSY"
    return m, "PASS" if m <= PARITY_GOAL else "FAIL"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True, help="plain.cpp built against our header")
    ap.add_argument("--original", help="plain.cpp built against the original header")
    ap.add_argument("--runs", type=int, default=4, help="runs of each build")
    ap.add_argument("--calls", type=int, default=3_000_000, help="calls in each timed pass")
    a = ap.parse_args()
    engines = [("ours", a.ours)] + ([("original", a.original)] if a.original else [])
    runs = {e: [] for e, _ in engines}
    for r in range(a.runs):
        for e, b in (engines if r % 2 == 0 else engines[::-1]):
            runs[e].append(run(b, a.calls))

    def cost(e, key):
        return statistics.median(x[key] for x in runs[e])

    def pairs(key):
        return [x[key] / y[key] for x, y in zip(runs["ours"], runs["original"]) if y[key] > 0]

    print(f"\n== Start+Stop in a plain loop (speedtest/plain.cpp): cycles per call, best of 7 passes of {a.calls:,} calls, "
          f"median of {a.runs} runs{', alternating with the original' if a.original else ''} ==")
    print(f"{'row':<30} {'ours':>8}" + (f" {'original':>9} {'ours/orig':>9}" if a.original else ""))
    for key, label in JUDGED:
        line = f"{label + ', one ID':<30} {cost('ours', key):8.2f}"
        if a.original:
            m, v = verdict(pairs(key))
            line = f"GOAL {v} {line} {cost('original', key):9.2f} {m:9.3f}  (ours/original, goal <= {PARITY_GOAL:.2f})"
        print(line)
    print("\nFast Start+Stop round-robin over N consecutive short literals (information; the judged sweep is speedtest/run.py's)")
    print(f"{'N':<6} {'ours':>8} {'x one ID':>9}" + (f" {'original':>9} {'x one ID':>9} {'ours/orig':>9}" if a.original else ""))
    for n in SWEEP_NS:
        key = f"plain.lit.{n}"
        per_one = {e: statistics.median(x[key] / x["plain.lit.1"] for x in runs[e]) for e, _ in engines}
        line = f"{n:<6} {cost('ours', key):8.2f} {per_one['ours']:9.3f}"
        if a.original:
            line += f" {cost('original', key):9.2f} {per_one['original']:9.3f} {statistics.median(pairs(key)):9.3f}"
        print(line)
    if not a.original:
        print("(beside the engine you are migrating from: make speedtest ORIGINAL=/path/to/Latte.hpp)")


if __name__ == "__main__":
    main()
