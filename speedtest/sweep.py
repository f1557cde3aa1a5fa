#!/usr/bin/env python3
"""The ID sweep of `make speedtest`: Fast Start+Stop over N distinct IDs on
one thread (speedtest/sweep.cpp), each row alone in a process of its own,
cold and warm, over four layouts of the names, beside the floor model and,
with --original, the original engine.

Rows. N = 1 to 10,000 IDs, round-robin (rr) and random (rand); cold (the
timed calls are the first to write the rings past each ID's first use) at
every N, warm (rings written through once) up to 256 IDs. Each row's figure
is its cost over a memory-free reference measured in the same process
(sweep.cpp: Method), so that the machine's speed, which moves between
processes here, cancels; a row's *rise* is that figure over the one-ID
row's of the same layout and temperature, per pass, median over passes.
The floor model (`sweep floor`: a ring per (thread, ID) with no lookup,
the same N, order and temperature) rises too, as the machine's TLB and
caches do: its rise is printed beside each row.

Goals (worst layout of each row):
  N <= 256      rise <= 1.10; where the floor's rise passes 1.05, the row's
                rise over the floor's <= 1.05 instead (the row then judges
                latte, not the machine's TLB)
  512 to 2,000  rise <= 1.30
  10,000        rise over the floor's <= 1.25
  with --original, every N and layout: ours over the original's cost
                (each over its process's reference, adjacent runs, median
                over passes) <= 1.00
A figure whose passes spread by more than BUSY_SPREAD and lie on both
sides of its goal is BUSY, not judged.

It runs as one of speedtest/run.py's --extra commands (a judged row is a
line `GOAL <PASS|FAIL|BUSY> text`). Exit 0 unless a program failed.
"""
import argparse
import statistics
import subprocess
import sys

RISE_GOAL = 1.10        # N <= SMALL_MAX: rise over one ID
FLOOR_BENT = 1.05       # the floor's rise past which a small row is judged against it
OVER_FLOOR_GOAL = 1.05  # the row's rise over the floor's, when the floor bends
MANY_GOAL = 1.30        # 512 to 2,000 IDs: rise over one ID
HUGE_OVER_FLOOR = 1.25  # 10,000 IDs: rise over the floor's
PARITY_GOAL = 1.00      # ours over the original
BUSY_SPREAD = 0.05
SMALL_MAX = 256
HUGE = 10000

LAYOUTS = ["literals", "spread", "heap", "mixed"]
NS = [1, 8, 32, 64, 128, 256, 512, 1000, 2000, 10000]
WARM_MAX = 256  # warm rows up to this N (sweep.cpp: TEMP)


def run(cmd):
    """(cost, reference, ratio) of one sweep.cpp row."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    rows = [l.split() for l in p.stdout.splitlines() if l.startswith("ROW")]
    if p.returncode != 0 or len(rows) != 1:
        raise SystemExit(f"sweep: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return tuple(float(x) for x in rows[0][1:4])


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def verdict(values, goal):
    """PASS/FAIL of the median of per-pass values, BUSY when they spread
    past BUSY_SPREAD on both sides of the goal."""
    m = med(values)
    if len(values) > 1 and (max(values) - min(values)) / m > BUSY_SPREAD and min(values) <= goal < max(values):
        return "BUSY"
    return "PASS" if m <= goal else "FAIL"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True, help="sweep.cpp built against our header")
    ap.add_argument("--original", help="sweep.cpp built against the original header")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--ns", default=",".join(map(str, NS)), help="the Ns (1 first)")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    a = ap.parse_args()
    ns = [int(x) for x in a.ns.split(",")]
    layouts = a.layouts.split(",")
    if ns[0] != 1:
        raise SystemExit("sweep: --ns must start with 1 (every rise is taken to one ID)")
    engines = [("ours", a.ours)] + ([("original", a.original)] if a.original else [])
    rows = [(t, n, o) for t in ("cold", "warm") for n in ns if t == "cold" or n <= WARM_MAX
            for o in (["rr"] if n == 1 else ["rr", "rand"])]
    # r[(engine, layout, temp, n, order)] = [ratio per pass]; engine "floor" has layout "-".
    r = {}
    for p in range(a.passes):
        for t, n, o in rows:
            r.setdefault(("floor", "-", t, n, o), []).append(run([a.ours, "floor", str(n), o, t])[2])
            for k, lay in enumerate(layouts):
                for e, b in (engines if (p + k) % 2 == 0 else engines[::-1]):
                    r.setdefault((e, lay, t, n, o), []).append(run([b, "id", lay, str(n), o, t])[2])

    def rise(e, lay, t, n, o):
        """Per pass: the row's ratio over the one-ID row's."""
        return [x / y for x, y in zip(r[(e, lay, t, n, o)], r[(e, lay, t, 1, "rr")])]

    for t in ("cold", "warm"):
        print(f"\n== ID sweep, {t}: Fast Start+Stop over N IDs on one thread, each row alone in a process "
              f"(speedtest/sweep.cpp; median of {a.passes} passes) ==")
        print("rise: the row's cost over one ID's of the same layout (each over the same process's memory-free reference); "
              "floor: the floor model's rise (a ring per (thread, ID), no lookup)")
        head = f"{'N, order':<16}" + "".join(f"{l:>10}" for l in layouts) + f"{'floor':>8}"
        print(head + ("   ours/original, worst layout" if a.original else ""))
        one = "one ID (cycles over the reference)" + "".join(f" {l} {med(r[('ours', l, t, 1, 'rr')]):.3f}" for l in layouts)
        print(one)
        for _, n, o in [x for x in rows if x[0] == t]:
            fl = rise("floor", "-", t, n, o) if n > 1 else [1.0]
            rises = {l: rise("ours", l, t, n, o) for l in layouts}
            worst = max(layouts, key=lambda l: med(rises[l]))
            line = f"{(f'{n} IDs, {o}' if n > 1 else '1 ID'):<16}" + "".join(f"{med(rises[l]):10.3f}" for l in layouts) + f"{med(fl):8.3f}"
            if n > 1:
                w = rises[worst]
                if n <= SMALL_MAX and med(fl) <= FLOOR_BENT:
                    g, vals, what = RISE_GOAL, w, f"rise {med(w):.3f}"
                elif n <= SMALL_MAX or n >= HUGE:
                    g = OVER_FLOOR_GOAL if n <= SMALL_MAX else HUGE_OVER_FLOOR
                    vals = [x / f for x, f in zip(w, fl)]
                    what = f"rise over the floor's {med(vals):.3f}"
                else:
                    g, vals, what = MANY_GOAL, w, f"rise {med(w):.3f}"
                print(f"GOAL {verdict(vals, g)} {line}  worst {worst}: {what} (goal <= {g:.2f})")
            else:
                print(line)
            if a.original:
                par = {l: [x / y for x, y in zip(r[("ours", l, t, n, o)], r[("original", l, t, n, o)])] for l in layouts}
                pw = max(layouts, key=lambda l: med(par[l]))
                print(f"GOAL {verdict(par[pw], PARITY_GOAL)} {'':<16}ours/original, {n} ID{'s' if n > 1 else ''} {o} {t}: "
                      + ", ".join(f"{l} {med(par[l]):.3f}" for l in layouts) + f" (goal <= {PARITY_GOAL:.2f} for every layout)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
