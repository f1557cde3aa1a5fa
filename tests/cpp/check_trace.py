#!/usr/bin/env python3
"""Validates a latte Chrome trace: a JSON array of complete events ordered by
start time, with the documented fields, the given pid, non-zero tids, and the
odd ID of tests/cpp/api.cpp decoded back exactly; sample_index counts
each (thread, ID) track from 0 in start order."""
import json
import sys

path, pid = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    events = json.load(f)
assert isinstance(events, list) and events, "not a non-empty array"
keys = {"name", "ph", "pid", "tid", "ts", "dur", "component", "sample_index", "depth", "start_ns", "duration_ns"}
last = -1.0
per = {}
track = {}
for e in events:
    assert set(e) == keys, f"fields {sorted(e)}"
    assert e["ph"] == "X", e
    assert e["pid"] == pid, (e["pid"], pid)
    assert isinstance(e["tid"], int) and e["tid"] > 0, e
    assert e["ts"] >= last, "not ordered by start time"
    last = e["ts"]
    assert e["dur"] >= 0 and e["duration_ns"] >= 0 and e["depth"] >= 0
    assert e["name"] == e["component"]
    per.setdefault(e["name"], []).append(e["sample_index"])
    track.setdefault((e["name"], e["tid"]), []).append(e["sample_index"])
    assert not e["name"].startswith("latte.calibrate"), "calibration sample in the trace"
for (name, tid), idx in track.items():
    assert idx == list(range(len(idx))), f"sample_index of {name} on thread {tid}"
odd = 'odd "quoted" \\ back\tslash\x01'
assert odd in per, f"odd id missing: {sorted(per)[:20]}"
print(f"trace ok: {len(events)} events, {len(per)} components")
