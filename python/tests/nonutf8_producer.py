"""A producer for test_recording.py: records into a shared region (argv[2])
through liblatte.so (argv[1]) under four IDs whose names read alike as
UTF-8 or as text (b"a\\xff", b"a\\xfe", "a\\ufffd" and the text "a\\\\xff"):
1,000, 2,000, 3,000 and 4,000 spans.
Prints READY, records once a line comes on its standard input, prints
DONE, and exits once its standard input closes."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.latte_stop.restype = ctypes.c_uint64
assert lib.latte_init_shared_region(sys.argv[2].encode()) == 0, "init"
print("READY", flush=True)
sys.stdin.readline()
ids = [ctypes.create_string_buffer(i) for i in (b"a\xff", b"a\xfe", b"a\xef\xbf\xbd", b"a\\xff")]
for j, b in enumerate(ids):
    for _ in range(1000 * (j + 1)):
        lib.latte_start(b, 0)
        lib.latte_stop(None, 0)
print("DONE", flush=True)
sys.stdin.readline()
