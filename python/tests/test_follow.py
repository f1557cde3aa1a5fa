"""A region its producer keeps writing while Python reads: whole reads
and a follower, with the accounting of the `latte` command
(read + lost == recorded, and recorded == what the producer wrote)."""
import os
import subprocess
import threading
import time

import numpy as np

import latte
from conftest import Producer, region_name, unlink_region

RING = 1024  # small: a ring laps between polls, and samples are lost


def test_follow_a_live_region_to_its_end(producer_bin):
    name = region_name()
    p = Producer([producer_bin, "stream", name, str(RING)])
    try:
        r = latte.open(name)
        assert r.producer_alive
        f = r.follow(interval=0.02)
        batches = 0
        timer = threading.Timer(0.6, p.proc.stdin.close)
        timer.start()
        last_tsc = {}
        for b in f:
            batches += 1
            assert b.read == len(b) and b.read + b.lost == b.recorded
            assert f.read + f.lost == f.recorded
            assert set(b.names[t] for t in set(b.id.tolist())) <= {"py.s.a", "py.s.b"}
            # Each ring's samples come oldest first, and newer than the previous batch's.
            for key in set(zip(b.id.tolist(), b.thread.tolist())):
                sel = (b.id == key[0]) & (b.thread == key[1])
                tsc = b.start_tsc[sel].astype(np.int64)
                assert (np.diff(tsc) >= 0).all()
                assert tsc[0] >= last_tsc.get(key, 0)
                last_tsc[key] = tsc[-1]
            assert batches < 2000, "the follower did not end after the producer exited"
        timer.join()
        wrote = int(p.finish().split()[1])
        # The producer exited before the last poll began: everything it wrote is accounted for.
        assert not r.producer_alive
        assert f.recorded == wrote == sum(s["written"] for s in r.slots)
        assert f.read + f.lost == wrote
        assert f.read > 0 and batches >= 3
        r.close()
    finally:
        if p.proc.poll() is None:
            p.proc.kill()
        unlink_region(name)


def test_whole_reads_while_the_producer_writes(producer_bin):
    name = region_name()
    p = Producer([producer_bin, "stream", name, str(RING)])
    try:
        with latte.open(name) as r:
            total_lost = 0
            for _ in range(40):
                before = sum(s["written"] for s in r.slots)
                s = r.samples()
                after = sum(s_["written"] for s_ in r.slots)
                # A read from the start of every ring: what it returns and
                # what it lost is what was written by some moment during it.
                assert before <= s.read + s.lost <= after
                assert s.read <= 2 * RING
                assert (s.duration < 1 << 48).all() and (s.depth == 0).all()
                total_lost += s.lost
                time.sleep(0.005)
            assert total_lost > 0, "the rings never lapped: the read-while-writing case was not exercised"
            # A follower from now on sees only what is new.
            f = r.follow(interval=0.01, from_start=False)
            first = next(f)
            assert first.recorded == first.read + first.lost
            assert first.recorded < sum(s_["written"] for s_ in r.slots)  # the past is skipped
    finally:
        p.finish()
        unlink_region(name)


def test_following_a_flushed_image_gives_one_batch(burst):
    with latte.open(burst["image"]) as r:
        batches = list(r.follow(interval=0.01))
        assert len(batches) == 1 and batches[0].read == burst["written"] and batches[0].lost == 0


def test_reads_from_threads(burst):
    # Readers in several Python threads at once (the reads release the interpreter).
    with latte.open(burst["image"]) as r:
        out = []

        def work():
            for _ in range(5):
                out.append(len(r.samples()))

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert out == [burst["written"]] * 20


def test_follow_threads_that_come_and_go_between_polls(producer_bin, tmp_path):
    # 1,000 threads one after another, 200 spans each, through 4 rings: most
    # live and end between two polls of the default interval. What no poll
    # saw is counted lost, never missing from both.
    threads, spans = 1000, 200
    name = region_name()
    p = Producer([producer_bin, "churn", name, str(RING), str(threads), str(spans)])
    try:
        r = latte.open(name)
        f = r.follow()
        # `latte record` follows the same rings with the library's follower.
        rec = str(tmp_path / "churn.rec")
        record = subprocess.Popen([os.environ["LATTE_BIN"], "record", name, "-o", rec], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)  # record has started following
        p.proc.stdin.write("go\n")
        p.proc.stdin.close()  # it exits once the threads are done
        for b in f:
            assert b.read == len(b) and b.read + b.lost == b.recorded
        wrote = int(p.proc.stdout.readline().split()[1])
        assert p.proc.wait(timeout=30) == 0
        assert wrote == threads * spans
        assert f.read + f.lost == f.recorded == wrote, (f.read, f.lost, f.recorded)
        assert f.read > 0
        r.close()
        out, err = record.communicate(timeout=30)
        assert record.returncode == 0, err
        line = [l for l in out.splitlines() if l.startswith("id=py.churn ")]
        assert len(line) == 1, out
        fig = dict(kv.split("=", 1) for kv in line[0].split())
        assert int(fig["recorded"]) == wrote and int(fig["read"]) + int(fig["lost"]) == wrote, line[0]
        with latte.open(rec) as got:
            assert got.samples().read == int(fig["read"])
    finally:
        if p.proc.poll() is None:
            p.proc.kill()
        unlink_region(name)
