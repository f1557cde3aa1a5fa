"""A producer for tests/cli/names.py: records into the shared region named
argv[2] (any bytes) through liblatte.so (argv[1]) under IDs whose names
differ only in bytes that are not UTF-8 or in a `\\xNN` look-alike, each
span a busy loop; the ID caf\\xe8's loop is argv[3] times as long. Prints
READY, records once a line comes on its standard input, prints DONE, and
exits once its standard input closes (the region stays)."""
import ctypes
import os
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.latte_stop.restype = ctypes.c_uint64
assert lib.latte_init_shared_region(os.fsencode(sys.argv[2])) == 0, "init"
slow = int(sys.argv[3])
# (name, spans, loop length)
IDS = [(b"caf\xe9", 1000, 100), (b"caf\xe8", 1000, 100 * slow), (b"caf\\xe9", 500, 100), (b"x\xff", 200, 10), (b"x\\xff", 150, 10)]
# latte knows an ID by its string's address too: every buffer stays alive.
bufs = [ctypes.create_string_buffer(name) for name, _, _ in IDS]
print("READY", flush=True)
sys.stdin.readline()
for b, (_, spans, loop) in zip(bufs, IDS):
    for _ in range(spans):
        lib.latte_start(b, 0)
        for _ in range(loop):
            pass
        lib.latte_stop(None, 0)
print("DONE", flush=True)
sys.stdin.read()
