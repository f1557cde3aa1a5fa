#!/usr/bin/env python3
"""`latte record --wait`, started before the program: it waits past a dead
producer's region of the name (an earlier run's), follows the program's
region once it appears and records every span from its first (5,000 of
the ID, lost 0), also past the moment a new producer holds the dead
region's lock to take its name over; a Ctrl-C while it waits ends it at once, exit 0, with no
file. Run in a private /dev/shm (make cli-test)."""
import fcntl
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

LATTE = sys.argv[1]
LIB = os.path.join(os.path.dirname(LATTE), "liblatte.so")
NAME = f"/latte-record-wait-{os.getpid()}"
SPANS = 5000
PRODUCER = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1]); lib.latte_stop.restype = ctypes.c_uint64
assert lib.latte_init_shared_region(sys.argv[2].encode()) == 0
b = ctypes.create_string_buffer(b"waited.for")
for _ in range(int(sys.argv[3])):
    lib.latte_start(b, 0); lib.latte_stop(None, 0)
"""
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: record --wait: {what}", file=sys.stderr)


def produce(spans):
    subprocess.run([sys.executable, "-c", PRODUCER, LIB, NAME, str(spans)], check=True, timeout=60)


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "w.rec")
    # An earlier run's region, its producer gone.
    produce(10)
    rec = subprocess.Popen([LATTE, "record", NAME, "--wait", "-o", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    check(rec.poll() is None, "still waiting past a dead producer's region")
    # A new producer taking the name over holds the dead region's lock for
    # a moment before it renames its own object over the name (L4 of
    # src/liveness.rs): held here for a second, the way it does.
    fd = os.open("/dev/shm" + NAME, os.O_RDWR)
    lock = struct.pack("hh4xqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock)
    time.sleep(1.0)
    check(rec.poll() is None, "still waiting while the dead region's lock is held for a take-over")
    os.close(fd)
    produce(SPANS)
    try:
        text, err = rec.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        rec.kill()
        text, err = rec.communicate()
    line = next((l for l in text.splitlines() if l.startswith("id=waited.for ")), "")
    check(rec.returncode == 0 and "waiting for a live producer" in err, f"said it waits, exit 0: {rec.returncode} {err!r}")
    check(f"recorded={SPANS} " in line and f"read={SPANS} " in line and "lost=0" in line, f"every span from the first: {line!r} {text!r}")
    r = subprocess.run([LATTE, "stats", out, "--json"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and f'"read":{SPANS}' in r.stdout, f"the recording holds them: {r.stdout[:300]!r} {r.stderr!r}")

    # Ctrl-C while waiting for a region that never comes.
    os.unlink("/dev/shm" + NAME)
    out2 = os.path.join(tmp, "never.rec")
    rec = subprocess.Popen([LATTE, "record", NAME + "-never", "--wait", "-o", out2], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    rec.send_signal(signal.SIGINT)
    try:
        _, err = rec.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        rec.kill()
        _, err = rec.communicate()
    check(rec.returncode == 0 and "stopped while waiting" in err and not os.path.exists(out2), f"Ctrl-C ends the wait: {rec.returncode} {err!r}")
    # A file target cannot be waited for.
    r = subprocess.run([LATTE, "record", out, "--wait", "-o", out2], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "--wait waits for a region" in r.stderr, f"a file target: {r.returncode} {r.stderr!r}")
print(f"cli record --wait: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
