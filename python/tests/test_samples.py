"""A region a producer recorded, read live and from its flushed image:
what it describes, the samples' dtypes and values, checked against
`latte stats --json` on the same data."""
import json
import math
import os
import subprocess
import time

import numpy as np
import pytest

import latte
from conftest import PER_ID

PROGRAM_IDS = {"py.a", "py.b", "py.b.inner", "py.tick", "py.sleep"}
COUNTS = {"py.a": 2 * PER_ID, "py.b": PER_ID, "py.b.inner": PER_ID, "py.tick": PER_ID, "py.sleep": 20}


def stats(latte_bin, target, *flags):
    out = subprocess.run([latte_bin, "stats", target, "--json", *flags], check=True, capture_output=True, text=True).stdout
    return {c["component"]: c for c in json.loads(out)["components"]}, json.loads(out)


@pytest.fixture(params=["region", "image"])
def target(request, burst):
    return burst["name"] if request.param == "region" else burst["image"]


def test_describes_the_region(burst, target):
    with latte.open(target) as r:
        live = target == burst["name"]
        assert r.kind == ("region" if live else "image")
        assert r.producer_pid == burst["pid"]
        assert r.producer_alive is live
        assert set(r.ids.values()) == PROGRAM_IDS
        slots = r.slots
        by_name = {}
        for s in slots:
            by_name.setdefault(s["name"], []).append(s)
        assert sorted(len(v) for k, v in by_name.items() if k in PROGRAM_IDS) == [1, 1, 1, 1, 2]
        assert all(s["written"] * len(by_name[k]) == COUNTS[k] for k in PROGRAM_IDS for s in by_name[k])
        assert all(s["state"] in ("live", "closed") for s in slots)
        # py.a's two threads, and the main thread (py.b, py.tick).
        assert len(r.threads) == 3
        assert r.threads == sorted({s["thread"] for k in PROGRAM_IDS for s in by_name[k]})
        c = r.counters
        # The program's five IDs (calibration takes none).
        assert c["threads_seen"] == 3 and c["ids_used"] == 5 and c["overflow_starts"] == 0
        cal = r.calibration
        assert cal["calibrated"] and 0.001 <= cal["cycles_per_ns"] <= 1000
        assert len(cal["overheads"]) == 3 and all(len(row) == 3 for row in cal["overheads"])
        assert r.clock["cycles_per_ns"] == cal["cycles_per_ns"] and r.clock["source"] == "producer"
        assert r.geometry["samples_per_slot"] == 4096
    assert r.target == target and "closed" in repr(r)
    with pytest.raises(latte.Error, match="closed"):
        r.samples()


def test_dtypes_and_shapes(target):
    with latte.open(target) as r:
        s = r.samples()
    n = len(s)
    assert n == 5 * PER_ID + 20 == s.read and s.lost == 0 and s.recorded == n
    for field, dtype in latte.FIELDS.items():
        a = getattr(s, field)
        assert isinstance(a, np.ndarray) and a.dtype == np.dtype(dtype), field
        assert a.shape == (n,) and a.flags.c_contiguous and a.flags.writeable, field


def test_values_match_latte_stats(latte_bin, target):
    """--clean: the figures of the samples not switched out, with no
    outlier rule: their own min, max, mean and nearest-rank percentiles."""
    with latte.open(target) as r:
        s = r.samples()
        ids = r.ids
        cpn = r.clock["cycles_per_ns"]
    cyc, _ = stats(latte_bin, target, "--clean")
    ns, doc = stats(latte_bin, target, "--clean", "--time")
    assert doc["cycles_per_ns"] == cpn
    assert set(cyc) == PROGRAM_IDS
    for token, name in ids.items():
        mine = s.id == token
        kept = mine & ~s.switched
        d = np.sort(s.duration[kept])
        dn = np.sort(s.duration_ns[kept])
        c, t = cyc[name], ns[name]
        assert c["read"] == int(mine.sum()) == COUNTS[name], name
        assert c["lost"] == 0 and c["switched"] == int(s.switched[mine].sum()) == (10 if name == "py.sleep" else 0), name
        assert c["samples"] == len(d) and c["threads"] == len(set(s.thread[mine].tolist()))
        for q, key in [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999")]:
            k = min(max(math.ceil(q * len(d)), 1), len(d)) - 1
            assert c[key] == d[k], (name, key)
            assert t[key] == dn[k], (name, key)
        assert c["min"] == d[0] and c["max"] == d[-1]
        assert t["min"] == dn[0] and t["max"] == dn[-1]
        assert c["avg"] == pytest.approx(d.mean(), rel=1e-12)


def test_fields(burst, target):
    with latte.open(target) as r:
        s = r.samples()
        tok = {n: t for t, n in r.ids.items()}
        clock = r.clock
    inner, outer = s.id == tok["py.b.inner"], s.id == tok["py.b"]
    assert (s.depth[inner] == 1).all() and (s.depth[outer] == 0).all() and (s.depth[s.id == tok["py.a"]] == 0).all()
    # A span holds its nested one: the outer one starts first, lasts longer.
    assert (s.start_tsc[outer] <= s.start_tsc[inner]).all() and (s.duration[outer] >= s.duration[inner]).all()
    np.testing.assert_allclose(s.duration_ns, s.duration / clock["cycles_per_ns"], rtol=1e-12)
    # Times of day: the producer ran in the last minutes; each ring oldest first.
    now = time.time_ns()
    assert (s.start_ns > now - 600 * 10**9).all() and (s.start_ns < now).all()
    for t in set(s.thread.tolist()):
        for i in set(s.id.tolist()):
            sel = (s.thread == t) & (s.id == i)
            assert (np.diff(s.start_tsc[sel].astype(np.int64)) >= 0).all()
    # Switched out: the py.sleep spans around a sleep (every other one), only.
    sleep = s.id == tok["py.sleep"]
    assert s.switched[sleep].tolist() == [True, False] * 10 and not s.switched[~sleep].any()
    assert (s.duration_ns[sleep][::2] >= 200_000).all()


def test_filters(target):
    with latte.open(target) as r:
        tok = {n: t for t, n in r.ids.items()}
        a = r.samples(id="py.a")
        assert len(a) == 2 * PER_ID and set(a.id.tolist()) == {tok["py.a"]}
        t0 = sorted(set(a.thread.tolist()))[0]
        one = r.samples(id="py.a", thread=t0)
        assert len(one) == PER_ID and (one.thread == t0).all()
        both = r.samples(id=["py.b", tok["py.tick"]])
        assert len(both) == 2 * PER_ID
        assert len(r.samples(thread=t0)) == PER_ID
        assert len(r.samples(thread=1)) == 0
        with pytest.raises(KeyError, match="no ID named"):
            r.samples(id="nope")
        # Calibration records in a ring of its own, outside the region: no
        # ID of that name, no samples to read.
        with pytest.raises(KeyError, match="no ID named"):
            r.samples(id="latte.calibrate")
        with pytest.raises(KeyError, match="no ID of token 999"):
            r.samples(id=999)
        with pytest.raises(TypeError, match="a name .* or a token"):
            r.samples(id=0.5)
        # A follower's interval and timeout are seconds, finite and not negative.
        for bad in (float("nan"), -1, float("inf")):
            with pytest.raises(ValueError, match="interval"):
                r.follow(interval=bad)
            with pytest.raises(ValueError, match="timeout"):
                r.follow(timeout=bad)


def test_to_pandas(target):
    pd = pytest.importorskip("pandas")
    with latte.open(target) as r:
        df = r.to_pandas()
        s = r.samples()
    assert len(df) == len(s)
    assert list(df.columns) == ["name", "id", "thread", "start_tsc", "start", "start_ns", "duration", "duration_ns", "depth", "switched"]
    assert str(df["start"].dtype).startswith("datetime64[ns")
    assert set(df["name"].unique()) == PROGRAM_IDS
    assert df.groupby("name", observed=True).size().to_dict() == COUNTS
    assert (df["duration"].to_numpy() == s.duration).all()
    assert df["duration"].dtype == np.uint64 and df["switched"].dtype == bool


def test_path_objects_are_files(burst, tmp_path):
    import pathlib

    with latte.open(pathlib.Path(burst["image"])) as r:
        assert r.kind == "image"
    # A file named like a region, given as a path object, is the file.
    os.symlink(burst["image"], tmp_path / "looks-like-a-name")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with latte.open(pathlib.Path("looks-like-a-name")) as r:
            assert r.kind == "image"
        # Given as text, a name of no region that is a file's path is the
        # file too, as the `latte` command reads it.
        with latte.open("looks-like-a-name") as r:
            assert r.kind == "image"
        with pytest.raises(FileNotFoundError, match="no such region or file") as e:
            latte.open("no-such-name-or-file")
        assert e.value.code == -2
    finally:
        os.chdir(cwd)
