#!/usr/bin/env python3
"""The end of `make test`: sums the counts every suite printed into the log
(cargo's "test result: ... N passed; M failed", the C, C++, CLI, serve, Python,
compare, install and README suites' "NAME: N passed, M failed"), checks that the log holds no terminal
escape codes, and prints one line, then the seconds each suite took.
Exit status: make's, else 1 on escapes."""
import re
import sys

log_path, make_rc = sys.argv[1], int(sys.argv[2])
text = open(log_path, encoding="utf-8", errors="replace").read()
cargo = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed", re.M)
suite = re.compile(r"^([a-z][a-z0-9 _+().-]*): (\d+) passed, (\d+) failed$", re.M)
groups = {}


def add(group, p, f):
    a = groups.setdefault(group, [0, 0, 0])
    a[0] += int(p)
    a[1] += int(f)
    a[2] += 1


for m in cargo.finditer(text):
    add("Rust", m.group(1), m.group(2))
for m in suite.finditer(text):
    name = m.group(1)
    group = {"cli": "CLI", "install": "install", "readme": "README", "cpp": "C++", "serve": "serve", "python": "Python", "compare": "compare"}.get(re.split(r"[ -]", name)[0], "C")
    add(group, m.group(2), m.group(3))
passed = sum(g[0] for g in groups.values())
failed = sum(g[1] for g in groups.values())
parts = ", ".join(f"{k} {v[0]} in {v[2]} runs" for k, v in groups.items())
took = re.findall(r"^make test: suite (\S+) took (\d+) s$", text, re.M)
escapes = text.count("\x1b")
status = "passed" if make_rc == 0 and failed == 0 and escapes == 0 else "FAILED"
print(f"make test: {status}: {passed} passed, {failed} failed ({parts})")
if took:
    print("make test: seconds per suite: " + ", ".join(f"{n} {t}" for n, t in took) + f" (in all {sum(int(t) for _, t in took)})")
if escapes:
    print(f"make test: the log {log_path} holds {escapes} terminal escape codes")
if make_rc != 0:
    print(f"make test: a suite failed (make exit status {make_rc}); see {log_path}")
sys.exit(make_rc or (1 if failed or escapes else 0))
