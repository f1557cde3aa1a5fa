#!/usr/bin/env python3
"""The Python package's row of `make speedtest`: a flushed image of
10,485,750 samples (10 IDs x 1,048,575 in rings of 1,048,576, written by
python/tests/producer.c) read into numpy arrays by `latte.open(path).samples()`,
beside reading the same file's bytes into memory (`readinto`, the page
cache's copy: the floor of any reader of that file), each round in a
fresh interpreter (the first read of a process: what a notebook does), 5
rounds. Prints a GOAL line (speedtest/run.py's --extra protocol): the
median seconds against the goal (< 1 s), with the ratio to the bytes' read
in the same processes. BUSY when the rounds' quartiles lie on both sides of
the goal.

Usage: python_read.py PRODUCER (run with the interpreter that has latte)."""
import os
import statistics
import subprocess
import sys
import time

import latte

RING, IDS, ROUNDS, GOAL_S = 1 << 20, 10, 5, 1.0  # 10 x (RING - 1) samples


def child(path):
    """One round, in a fresh interpreter (the first read of a process, as a
    notebook's): the file's bytes, then the samples. Prints both times and
    the count."""
    buf = bytearray(os.path.getsize(path))
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        got = f.readinto(buf)
    t1, c1 = time.perf_counter(), time.process_time()
    with latte.open(path) as r:
        s = r.samples()
    t2, c2 = time.perf_counter(), time.process_time()
    print(t1 - t0, t2 - t1, got == len(buf), len(s), s.lost, c2 - c1)


def main():
    if sys.argv[1] == "--child":
        return child(sys.argv[2])
    producer = sys.argv[1]
    path = f"/tmp/latte-speedtest-python-{os.getpid()}.img"
    region = f"/latte-speedtest-python-{os.getpid()}"
    try:
        out = subprocess.run([producer, "bulk", region, str(RING), str(IDS), path], check=True, capture_output=True, text=True).stdout
        n = int(out.split()[1])
        t_bytes, t_numpy, t_cpu = [], [], []
        for _ in range(ROUNDS):
            f = subprocess.run([sys.executable, __file__, "--child", path], check=True, capture_output=True, text=True).stdout.split()
            if f[2] != "True" or int(f[3]) != n or int(f[4]) != 0:
                print(f"GOAL FAIL Python: read {f[3]} samples of {n} ({f[4]} lost); the file's bytes read whole: {f[2]}")
                return 1
            t_bytes.append(float(f[0]))
            t_numpy.append(float(f[1]))
            t_cpu.append(float(f[5]))
        med = statistics.median(t_numpy)
        ratio = statistics.median(x / y for x, y in zip(t_numpy, t_bytes))
        q = statistics.quantiles(t_numpy, n=4)
        verdict = "PASS" if med < GOAL_S else "FAIL"
        if q[0] < GOAL_S <= q[2]:
            verdict = "BUSY"
        print("\n== Python: latte.open(image).samples(), the first read of a fresh interpreter ==")
        print(f"GOAL {verdict} {n:,} samples of a flushed image ({os.path.getsize(path) / 2**20:.0f} MiB) into numpy arrays (8 fields): "
              f"{med:.3f} s [quartiles {q[0]:.3f} {q[2]:.3f}] ({statistics.median(t_cpu):.3f} s on the CPU), {med / n * 1e9:.1f} ns a sample, "
              f"median of {ROUNDS} processes; "
              f"reading the file's bytes {statistics.median(t_bytes):.3f} s; ratio {ratio:.1f} x, per process "
              f"(goal < {GOAL_S:.0f} s; busy when the quartiles lie on both sides of it)")
        return 0
    finally:
        for p in (path, "/dev/shm" + region):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


if __name__ == "__main__":
    sys.exit(main())
