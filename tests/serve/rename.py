"""`latte serve` counts each sample once across a region's rename: a
producer (ctypes over liblatte.so) records 500 spans into the region its
`LATTE_REGION` names, then names it anew with `latte_init_shared_region`
(the same object under another name) and records 500 more. serve, started
first and watching every region, counts 1,000 over both names' series, not
the old name's 500 plus the whole object again under the new one; both
names' series say read + lost == recorded. Run by `make serve-test` in a
private /dev/shm.
Usage: rename.py LATTE LIBLATTE."""
import os
import subprocess
import sys
import time

from harness import Processes, check, finish, parse, scrape, start_serve, wait_for

SPANS = 500

PRODUCER = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.latte_stop.restype = ctypes.c_uint64
# latte knows an ID by its string's address too: the buffer stays alive.
rid = ctypes.create_string_buffer(b"ren")
def record(n):
    for _ in range(n):
        lib.latte_start(rid, 0)
        lib.latte_stop(None, 0)
record(int(sys.argv[3]))
print("FIRST", flush=True)
sys.stdin.readline()
rc = lib.latte_init_shared_region(sys.argv[2].encode())
record(int(sys.argv[3]))
print(f"RENAMED {rc}", flush=True)
sys.stdin.readline()
"""


def main():
    latte, libpath = sys.argv[1:3]
    old, new = f"/latte-ren-a-{os.getpid()}", f"/latte-ren-b-{os.getpid()}"
    with Processes(60) as procs:
        port, _serve, _lines = start_serve(procs, latte)

        def per_region():
            s = parse(scrape(port))
            rec = {l["region"]: v for n, l, v in s if n == "latte_samples_recorded_total" and l.get("id") == "ren"}
            read = {l["region"]: v for n, l, v in s if n == "latte_span_duration_seconds_count" and l.get("id") == "ren"}
            lost = {l["region"]: v for n, l, v in s if n == "latte_samples_lost_total" and l.get("id") == "ren"}
            return rec, read, lost

        time.sleep(0.5)  # serve has made its first scan: the producer's region is found later, read from its start
        prod = procs.start([sys.executable, "-c", PRODUCER, libpath, new, str(SPANS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "LATTE_REGION": old, "LATTE_QUIET": "1"})
        check(prod.stdout.readline().strip() == "FIRST", "the producer recorded into its LATTE_REGION region")
        wait_for("serve counts the first spans under the old name", lambda: True if per_region()[0].get(old[1:]) == SPANS else None, 20)
        prod.stdin.write("go\n")
        prod.stdin.flush()
        check(prod.stdout.readline().strip() == "RENAMED 0", "latte_init_shared_region renamed the region")
        check(not os.path.exists(f"/dev/shm{old}") and os.path.exists(f"/dev/shm{new}"), "the object is under the new name only")

        # The new name found and read: give serve two rescans (1 s each) more,
        # so that a second count of the object would have shown.
        wait_for("serve finds the new name", lambda: True if new[1:] in per_region()[0] else None, 20)
        time.sleep(2.5)
        rec, read, lost = per_region()
        total = sum(rec.values())
        print(f"rename: recorded {rec}, read {read}, lost {lost}")
        check(total == 2 * SPANS, f"each sample counted once across the rename: {total:.0f} for {2 * SPANS}")
        check(all(read.get(r, 0) + lost.get(r, 0) == rec[r] for r in rec), "read + lost == recorded under each name")
        prod.stdin.write("end\n")
        prod.stdin.flush()
        prod.wait(timeout=10)
    subprocess.run(["rm", "-f", f"/dev/shm{old}", f"/dev/shm{new}"])
    return finish("serve rename")


if __name__ == "__main__":
    sys.exit(main())
