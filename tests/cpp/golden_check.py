#!/usr/bin/env python3
"""Compares a report or trace against a golden text, whole.

Usage: golden_check.py report-cycles|report-time|trace GOLDEN ACTUAL

In the golden texts {G} stands for the gray escape ESC[90m and {R} for the
reset ESC[0m. Numbers in the actual text are masked before the comparison:
- in a report, a number with its unit becomes N, right-aligned in the
  number's own width (the padding it had moves to its left), so that cell
  widths and alignment are still compared. Only the report's number shapes
  are masked: an integer, two decimals (skew), two decimals and K/M/B/T
  (cycles), two decimals and ns/us/ms/s/min (time); any other digit stays
  and fails the comparison;
- in a trace, a number's integer part becomes N and each decimal digit d,
  so that the printf precisions (%.3f, %.2f) are compared.
"""
import re
import sys

kind, golden_path, actual_path = sys.argv[1:4]
with open(golden_path, encoding="utf-8") as f:
    golden = f.read().replace("{G}", "\x1b[90m").replace("{R}", "\x1b[0m")
with open(actual_path, encoding="utf-8") as f:
    actual = f.read()

ESC = re.compile(r"\x1b\[[0-9;]*m")


def mask_report(text, units):
    shapes = [rf"\d+\.\d\d (?:{units})", r"-?\d+\.\d\d", r"\d+"]
    num = re.compile("|".join(f"(?:{s})" for s in shapes))
    out = []
    for line in text.split("\n"):
        # Escapes hold digits: mask only the text between them.
        parts = ESC.split(line)
        escs = ESC.findall(line)
        masked = []
        for p in parts:
            def rep(m):
                return " " * (len(m.group(0)) - 1) + "N"
            masked.append(num.sub(rep, p))
        rebuilt = masked[0]
        for e, p in zip(escs, masked[1:]):
            rebuilt += e + p
        out.append(rebuilt)
    return "\n".join(out)


def mask_trace(text):
    def rep(m):
        frac = m.group(2)
        return "N" + ("." + "d" * len(frac) if frac is not None else "")
    # Numbers outside strings: after ": " in this format.
    return re.sub(r"(?<=: )(-?\d+)(?:\.(\d+))?", rep, text)


if kind == "report-cycles":
    masked = mask_report(actual, "K|M|B|T")
elif kind == "report-time":
    masked = mask_report(actual, "min|ns|us|ms|s")
elif kind == "trace":
    masked = mask_trace(actual)
else:
    sys.exit(f"unknown kind {kind}")

if masked != golden:
    g, a = golden.split("\n"), masked.split("\n")
    for i in range(max(len(g), len(a))):
        gl = g[i] if i < len(g) else "<missing>"
        al = a[i] if i < len(a) else "<missing>"
        if gl != al:
            print(f"{actual_path}: line {i + 1} differs from {golden_path}", file=sys.stderr)
            print(f"  golden: {gl!r}", file=sys.stderr)
            print(f"  actual: {al!r}", file=sys.stderr)
            break
    sys.exit(1)
print(f"golden ok: {actual_path}")
