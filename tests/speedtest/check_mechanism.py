#!/usr/bin/env python3
"""Tests `make speedtest ORIGINAL=...` end to end against a stand-in engine:
speedtest/run.py (with speedtest/plain.py and speedtest/sweep.py as its
extras, as make speedtest runs them, and an information command that
fails), given our builds and the
stand-in's, prints every row with its ours/original column and a verdict,
and exits 0, 1 or 3. Speed is not judged here (a quick run on any
machine): only that the mechanism works."""
import subprocess
import sys

ours, standin, plain_ours, plain_standin, sweep_ours, sweep_standin = sys.argv[1:7]
# speedtest/plain.py as make speedtest runs it: one of run.py's extras.
plain = f"{sys.executable} speedtest/plain.py --ours {plain_ours} --original {plain_standin} --runs 2 --calls 20000"
# speedtest/sweep.py likewise, over two Ns and two layouts.
sweep = f"{sys.executable} speedtest/sweep.py --ours {sweep_ours} --original {sweep_standin} --passes 2 --ns 1,8 --layouts literals,heap"
cmd = [sys.executable, "speedtest/run.py", "--ours", ours, "--original", standin, "--original-path", "stand-in",
       "--placements", "2", "--passes", "2", "--repeats", "2", "--iters", "2000", "--stall-repeats", "1", "--no-warmup",
       "--extra", plain, "--extra", sweep, "--info", "echo capacity-info-line; exit 4"]
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
out = p.stdout
# The run's own verdict judges a stand-in engine in a run far too short to
# mean anything about speed: printed as such, so that a log of a passing
# `make test` holds no bare "verdict: FAIL".
SELF = "self-test verdict (deliberate: a tiny run beside a stand-in engine tests the mechanism, not speed):"
print("speedtest mechanism: the output of speedtest/run.py against a stand-in engine (its figures and verdicts judge nothing):")
print("\n".join(SELF + l[len("verdict:"):] if l.startswith("verdict:") else l for l in out.splitlines()))
fails = []
if p.returncode not in (0, 1, 3):
    fails.append(f"exit code {p.returncode}, not 0, 1 or 3")
if "ours/orig" not in out:
    fails.append("no ours/original column")
rows = ["Fast Start+Stop", "Mid Start+Stop", "Hard Start+Stop", "LATTE_PULSE"]
for r in rows:
    line = next((l for l in out.splitlines() if l.startswith(r)), None)
    if line is None:
        fails.append(f"row {r!r} missing")
    elif not any(w in line for w in ("PASS", "FAIL", "BUSY")):
        fails.append(f"row {r!r} has no verdict: {line}")
    elif line.count(".") < 4:
        fails.append(f"row {r!r} lacks figures: {line}")
# The plain loop's judged rows (a GOAL line each, printed by run.py with
# its verdict last) and its sweep over 1 to 64 literals.
lines = out.splitlines()
for r in ("Fast Start+Stop, one ID", "Mid Start+Stop, one ID", "Hard Start+Stop, one ID"):
    line = next((l for l in lines if l.startswith(r)), None)
    if line is None or not line.rstrip().endswith(("PASS", "FAIL", "BUSY")) or "goal <= 1.05" not in line:
        fails.append(f"plain-loop row {r!r} missing or without its verdict: {line}")
head = next((i for i, l in enumerate(lines) if l.startswith("Fast Start+Stop round-robin over N consecutive")), None)
sweep = [l.split() for l in lines[head + 2:head + 10]] if head is not None else []
if [int(f[0]) for f in sweep if f and f[0].isdigit()] != [1, 8, 16, 24, 32, 40, 48, 64] or any(len(f) != 6 for f in sweep):
    fails.append(f"the plain loop's literal sweep is not N = 1..64 with ours, original and ours/orig: {sweep}")
# The ID sweep's rows (GOAL lines, printed by run.py with the verdict
# last): 8 IDs in both orders, cold and warm, each with its floor and a
# second line against the original, the one-ID row against it too.
for t in ("cold", "warm"):
    at = next((i for i, x in enumerate(lines) if x.startswith(f"== ID sweep, {t}")), len(lines))
    for o in ("rr", "rand"):
        line = next((l for l in lines[at:] if l.startswith(f"8 IDs, {o}")), None)
        if line is None or not line.rstrip().endswith(("PASS", "FAIL", "BUSY")) or "goal <=" not in line or line.count(".") < 4:
            fails.append(f"sweep row 8 IDs {o} {t} missing, without figures or without its verdict: {line}")
        par = next((l for l in lines if f"ours/original, 8 IDs {o} {t}:" in l), None)
        if par is None or not par.rstrip().endswith(("PASS", "FAIL", "BUSY")):
            fails.append(f"sweep row 8 IDs {o} {t} against the original missing or without its verdict: {par}")
    if not any(f"ours/original, 1 ID rr {t}:" in l for l in lines):
        fails.append(f"the sweep's one-ID row against the original ({t}) is missing")
# An information command (make speedtest's capacity.cpp): its output is
# printed, and its failure is said as information, not as a failed goal.
if "capacity-info-line" not in lines:
    fails.append("the --info command's output is not printed")
if not any(l.endswith("exited 4 (information only: not judged)") for l in lines):
    fails.append("the --info command's failure is not said as information")
for needle in ("Snapshot of 65,536 samples", "the disturbance ours/original", "verdict:"):
    if needle not in out:
        fails.append(f"missing {needle!r}")
if " 0.00 " in out:
    fails.append("a 0.00 figure")
want = {0: "verdict: PASS", 1: "verdict: FAIL", 3: "machine too busy to judge"}.get(p.returncode)
if want and want not in out:
    fails.append(f"exit {p.returncode} without {want!r}")
# A step that runs past its time limit (a program that never ends, with a
# child of its own) is stopped, children and all, and said.
sys.path.insert(0, "speedtest")
import run as speedtest_run  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
speedtest_run.STEP_LIMIT_S = 1
t0 = time.monotonic()
rc, step_out, late = speedtest_run.limited("echo started; sleep 300 & echo $! > /tmp/latte-step-child-$PPID; sleep 300", shell=True)
took = time.monotonic() - t0
if not late or "started" not in step_out or took > 60:
    fails.append(f"a step past its limit: stopped={late}, output {step_out!r}, after {took:.1f} s")
child_file = f"/tmp/latte-step-child-{os.getpid()}"
try:
    child = int(open(child_file).read())
    os.remove(child_file)
    for _ in range(100):
        if not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        fails.append(f"the step's own child {child} outlived it")
except (OSError, ValueError) as e:
    fails.append(f"the step's child was not seen: {e}")
if "ran past its time limit of 1 s: stopped; FAIL" not in speedtest_run.past_limit("x"):
    fails.append("a step past its limit is not said as a failure")
if fails:
    print("speedtest mechanism: FAILED:\n  " + "\n  ".join(fails))
    sys.exit(1)
print(f"speedtest mechanism: every row printed with ours/original and a verdict; the driver exited {p.returncode}")
