#!/usr/bin/env python3
"""`latte watch` on a region another process truncates to 0 under a live
producer: the intervals before it, then LATTE_ERR_TRUNCATED said and exit 4
(never `state=idle` for a region whose pages are gone). Run in a private
/dev/shm (make cli-test)."""
import os
import subprocess
import sys
import time

LATTE = sys.argv[1]
LIB = os.path.join(os.path.dirname(LATTE), "liblatte.so")
NAME = f"/latte-truncated-{os.getpid()}"
# A producer that records a span now and then until its standard input closes.
PRODUCER = r"""
import ctypes, select, sys
lib = ctypes.CDLL(sys.argv[1]); lib.latte_stop.restype = ctypes.c_uint64
assert lib.latte_init_shared_region(sys.argv[2].encode()) == 0
b = ctypes.create_string_buffer(b"busy")
print("READY", flush=True)
while not select.select([sys.stdin], [], [], 0.001)[0]:
    for _ in range(100):
        lib.latte_start(b, 0); lib.latte_stop(None, 0)
"""
prod = subprocess.Popen([sys.executable, "-c", PRODUCER, LIB, NAME], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
failed = 0
try:
    assert prod.stdout.readline().strip() == "READY"
    watch = subprocess.Popen([LATTE, "watch", NAME, "--interval", "100ms"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Truncated once watch has printed an interval of busy samples.
    first = watch.stdout.readline()
    os.truncate("/dev/shm" + NAME, 0)
    t0 = time.monotonic()
    try:
        rest, err = watch.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        watch.kill()
        rest, err = watch.communicate()
    took = time.monotonic() - t0
    out = first + rest
    checks = [
        ("an interval of the busy ID before the truncation", "id=busy" in first),
        ("exit 4 (not a latte region any more)", watch.returncode == 4),
        ("the truncation said", "truncated" in err),
        ("no interval called idle", "state=idle" not in out),
        ("within a few intervals", took < 20),
    ]
    for what, ok in checks:
        if not ok:
            failed += 1
            print(f"FAILED: watch on a truncated region: {what}: exit {watch.returncode}, after {took:.1f} s, stderr {err!r}, output {out[-500:]!r}", file=sys.stderr)
finally:
    prod.stdin.close()
    prod.wait(timeout=30)
    try:
        os.unlink("/dev/shm" + NAME)
    except FileNotFoundError:
        pass
print(f"cli truncated: {5 - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
