"""A recording (`latte record`'s file) of a producer that keeps writing,
read in Python: its samples and its loss as the `latte` command counts
them (read + lost == what the producer wrote, per ID and per thread, and
the figures of `latte stats --json` on the same file), and damaged
trailers refused."""
import json
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import latte
from conftest import Producer, region_name, unlink_region

RING = 1024  # small: a ring laps within a pause of the recorder, so samples are lost
IDS = {"py.s.a", "py.s.b"}


@pytest.fixture(scope="module")
def recording(producer_bin, latte_bin, tmp_path_factory):
    """A producer's two threads recording flat out in bursts, followed by
    `latte record --from-start` until the producer exits; the recorder is
    stopped for 100 ms on the way, so rings lap and samples are lost."""
    name = region_name()
    path = str(tmp_path_factory.mktemp("rec") / "run.rec")
    p = Producer([producer_bin, "stream", name, str(RING)])
    rec = subprocess.Popen([latte_bin, "record", name, "-o", path, "--from-start"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        rec.send_signal(signal.SIGSTOP)
        time.sleep(0.1)
        rec.send_signal(signal.SIGCONT)
        time.sleep(0.2)
        wrote = int(p.finish().split()[1])
        out, _ = rec.communicate(timeout=30)
        assert rec.returncode == 0, out
    finally:
        for proc in (rec, p.proc):
            if proc.poll() is None:
                proc.kill()
        unlink_region(name)
    lines = {}
    for line in out.splitlines():
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        lines[f.get("id", "total")] = f
    return {"path": path, "wrote": wrote, "summary": lines}


def test_a_recording_is_recognised(recording):
    with latte.open(recording["path"]) as r:
        assert r.kind == "recording" and not r.producer_alive
        t = r.recording
        assert t["format"] == "latte-recording" and t["ended_because"] == "the producer exited"
        assert set(r.ids.values()) == IDS
        assert t["recorded"] == recording["wrote"] == t["read"] + t["lost"]
        assert all(i["read"] + i["lost"] == i["recorded"] for i in t["incarnations"])


def test_samples_count_what_the_recorder_lost(recording):
    with latte.open(recording["path"]) as r:
        t = r.recording
        s = r.samples()
        assert t["lost"] > 0, "the recorder was stopped for 100 ms: its rings of 1,024 samples lapped"
        assert s.read == len(s) == t["read"] and s.lost == t["lost"]
        assert s.recorded == recording["wrote"]
        for name in IDS:
            mine = r.samples(id=name)
            incs = [i for i in t["incarnations"] if i["id"] == name]
            assert mine.read == sum(i["read"] for i in incs) and mine.lost == sum(i["lost"] for i in incs), name
            assert (mine.read, mine.lost) == (int(recording["summary"][name]["read"]), int(recording["summary"][name]["lost"]))
            for tid in set(mine.thread.tolist()):
                one = r.samples(id=name, thread=tid)
                own = [i for i in incs if i["os_tid"] == tid]
                assert one.read == sum(i["read"] for i in own) and one.lost == sum(i["lost"] for i in own), (name, tid)
        # A follower from the start gives the file in one batch, loss included.
        f = r.follow(interval=0)
        batches = list(f)
        assert len(batches) == 1 and f.read == t["read"] and f.lost == t["lost"] and f.recorded == recording["wrote"]
        # Without from_start it starts after what the file holds.
        f = r.follow(interval=0, from_start=False)
        assert [len(b) for b in f] == [0] and f.lost == 0


def test_values_match_latte_stats(latte_bin, recording):
    """--clean: no outlier rule, so min and max are the samples' own."""
    out = subprocess.run([latte_bin, "stats", recording["path"], "--json", "--clean"], check=True, capture_output=True, text=True).stdout
    comps = {c["component"]: c for c in json.loads(out)["components"]}
    with latte.open(recording["path"]) as r:
        assert set(comps) == IDS
        for name in IDS:
            s = r.samples(id=name)
            d = np.sort(s.duration[~s.switched])
            c = comps[name]
            assert (c["read"], c["lost"]) == (s.read, s.lost), name
            assert c["samples"] == len(d) and c["min"] == d[0] and c["max"] == d[-1], name


def _with_trailer(src, dst, edit):
    """A copy of the recording at src whose trailer document is edit(doc)."""
    data = open(src, "rb").read()
    n = struct.unpack("<Q", data[-16:-8])[0]
    doc = json.loads(data[-16 - n:-16])
    body = data[:-16 - n]
    j = edit(doc)
    j = j if isinstance(j, bytes) else json.dumps(j).encode()
    with open(dst, "wb") as f:
        f.write(body + j + struct.pack("<Q", len(j)) + b"LATTEREC")
    return dst


def test_damaged_trailers_are_refused(recording, tmp_path):
    src = recording["path"]

    def wrong_sum(doc):
        doc["incarnations"][0]["lost"] += 1
        return doc

    def other_version(doc):
        doc["version"] = 99
        return doc

    def totals_off(doc):
        doc["lost"] += 12345
        return doc

    def more_read_than_held(doc):
        i = doc["incarnations"][0]
        i["read"] += 1
        i["recorded"] += 1
        doc["read"] += 1
        doc["recorded"] += 1
        return doc

    def unknown_id(doc):
        doc["incarnations"][0]["id"] = "nope"
        return doc

    def listed_twice(doc):
        doc["incarnations"].append(dict(doc["incarnations"][0]))
        return doc

    cases = [
        ("not json", lambda d: b"{not json"),
        ("read + lost != recorded", wrong_sum),
        ("no incarnations", lambda d: {k: v for k, v in d.items() if k != "incarnations"}),
        ("totals that are not the rings' sums", totals_off),
        ("more read than the file's slots hold", more_read_than_held),
        ("an ID the file does not name", unknown_id),
        ("a ring listed twice", listed_twice),
    ]
    for what, edit in cases:
        with pytest.raises(latte.FormatError, match="its recording trailer"):
            latte.open(_with_trailer(src, str(tmp_path / "bad.rec"), edit))
    with pytest.raises(latte.FormatError, match="version"):
        latte.open(_with_trailer(src, str(tmp_path / "v.rec"), other_version))
    # A length past the file's start.
    data = bytearray(open(src, "rb").read())
    data[-16:-8] = struct.pack("<Q", len(data))
    p = tmp_path / "len.rec"
    p.write_bytes(bytes(data))
    with pytest.raises(latte.FormatError):
        latte.open(str(p))
    # A trailer cut short, or its magic damaged: the file is longer than
    # its image, and not a recording either.
    good = open(src, "rb").read()
    for what, data in [("cut", good[:-5]), ("magic", good[:-1] + b"X")]:
        p = tmp_path / f"{what}.rec"
        p.write_bytes(data)
        with pytest.raises(latte.FormatError, match="its recording trailer"):
            latte.open(str(p))
    # The trailer cut off entirely: what remains is a flushed image.
    n = struct.unpack("<Q", good[-16:-8])[0]
    p = tmp_path / "image.img"
    p.write_bytes(good[:-16 - n])
    with latte.open(str(p)) as r:
        assert r.kind == "image" and r.recording is None and r.samples().lost == 0
    os.remove(p)


def unquote(field):
    return json.loads(field) if field.startswith('"') else field


# The IDs of nonutf8_producer.py, as every tool shows them, and their bytes.
WANT = {"a\\xff": 1000, "a\\xfe": 2000, "a\ufffd": 3000, "a\\\\xff": 4000}
RAW = [b"a\xff", b"a\xfe", b"a\xef\xbf\xbd", b"a\\xff"]


def test_ids_whose_names_read_alike_stay_apart(latte_bin, tmp_path):
    """Names are bytes: four IDs that read alike as UTF-8 or as text are
    four IDs in the live region, the recording, the command's summary and
    Python, each under its own name and reachable by it and by its bytes."""
    lib = os.path.join(os.path.dirname(latte_bin), "liblatte.so")
    name = region_name()
    path = str(tmp_path / "alike.rec")
    here = os.path.dirname(__file__)
    p = subprocess.Popen([sys.executable, os.path.join(here, "nonutf8_producer.py"), lib, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "READY"
        rec = subprocess.Popen([latte_bin, "record", name, "-o", path, "--from-start"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "DONE"
        with latte.open(name) as live:
            assert sorted(live.ids.values()) == sorted(WANT)
            # A C producer that never calibrated publishes no frequency:
            # the clock is measured here, and says so (never 0.0).
            assert live.calibration["cycles_per_ns"] == 0.0
            assert live.clock["source"] == "measured here" and 0.001 <= live.clock["cycles_per_ns"] <= 1000
            for text, n in WANT.items():
                assert len(live.samples(id=text)) == n
            for raw, n in zip(RAW, sorted(WANT.values())):
                assert len(live.samples(id=raw)) == n
        p.stdin.close()
        p.wait(timeout=30)
        out, _ = rec.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
        unlink_region(name)
    # The summary's key=value fields JSON-quote a name with a backslash.
    summary = {unquote(line.split()[0][3:]): int(line.split("recorded=")[1].split()[0]) for line in out.splitlines() if line.startswith("id=")}
    assert summary == WANT, summary
    with latte.open(path) as r:
        assert r.kind == "recording"
        assert {n: len(r.samples(id=t)) for t, n in r.ids.items()} == WANT
