"""`latte serve --max-ids`: a region's first N IDs (in the order it
registered them) get series of their own, the others' samples go to one
series with `folded="true"` and no `id` label, and `latte_ids_folded` says
how many IDs that is; read + lost == recorded in every series, and nothing
recorded is missing from both. A producer (ctypes over liblatte.so) records
3 spans into each of 100,000 IDs (rings of 64 samples): with the default
bound (1,000) the exposition has 1,000 IDs' series and the folded one,
300,000 recorded in all; with `--max-ids 10` on 30 IDs of another region,
10 and the folded one. The scrape's time and serve's memory are printed,
not judged (docs/fleet.md gives the measured figures). Run by `make
serve-test` in a private /dev/shm.
Usage: max_ids.py LATTE LIBLATTE."""
import os
import subprocess
import sys
import time

from harness import Processes, check, finish, parse, request, start_serve, wait_for

PRODUCER = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
class Cfg(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in ("slot_capacity", "samples_per_slot", "id_capacity", "mode", "if_taken", "budget_mib")]
cfg = Cfg(0, 64, 0, 0, 0)
rc = lib.latte_init_shared_region_with(sys.argv[2].encode(), ctypes.byref(cfg))
# latte knows an ID by its string's address too: every buffer stays alive.
ids = [ctypes.create_string_buffer(f"id.{k}".encode()) for k in range(int(sys.argv[3]))]
print(f"READY {rc}", flush=True)
sys.stdin.readline()
for b in ids:
    for _ in range(3):
        lib.latte_start(b, 0)
        lib.latte_stop(None, 0)
print("DONE", flush=True)
sys.stdin.readline()
"""

SPANS = 3


def run(procs, latte, libpath, ids, args):
    """Records SPANS spans into each of `ids` IDs while a `latte serve
    ARGS` watches; returns the parsed exposition once every span is counted
    (None if that never came), the label and the scrape's seconds."""
    region = f"/latte-maxids-{ids}-{os.getpid()}"
    label = region[1:]
    prod = procs.start([sys.executable, "-c", PRODUCER, libpath, region, str(ids)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    check(prod.stdout.readline().strip() == "READY 0", f"the producer of {ids} IDs made its region")
    port, serve, _ = start_serve(procs, latte, region, *args)
    time.sleep(0.5)  # the region was found at the first scan, its rings new: all is counted
    prod.stdin.write("go\n")
    prod.stdin.flush()
    check(prod.stdout.readline().strip() == "DONE", f"the producer recorded into {ids} IDs")
    took = []

    def whole():
        t = time.monotonic()
        status, _, body = request(port, timeout=120)
        took.append(time.monotonic() - t)
        s = parse(body) if status == 200 else []
        rec = sum(v for n, l, v in s if n == "latte_samples_recorded_total" and l.get("region") == label)
        return s if rec == ids * SPANS else None

    s = wait_for(f"serve counts all {ids * SPANS} spans", whole, 60, every=0.5)
    rss = [line.split()[1] for line in open(f"/proc/{serve.pid}/status") if line.startswith("VmHWM")]
    print(f"max_ids: {ids} IDs, {' '.join(args) or 'default bound'}: last scrape {took[-1]:.2f} s, serve's peak RSS {int(rss[0]) // 1024} MiB")
    procs.stop(serve)
    prod.stdin.write("end\n")
    prod.stdin.flush()
    prod.wait(timeout=10)
    subprocess.run(["rm", "-f", f"/dev/shm{region}"])
    return s, label


def check_folded(s, label, ids, bound):
    own = {l["id"] for n, l, _ in s if n == "latte_samples_recorded_total" and l.get("region") == label and "id" in l}
    check(own == {f"id.{k}" for k in range(bound)}, f"the first {bound} IDs have series of their own ({len(own)} do)")
    folded = [(n, l, v) for n, l, v in s if l.get("region") == label and l.get("folded") == "true"]
    check(all("id" not in l for _, l, _ in folded), "the folded series has no id label")

    def one(name):
        v = [x for n, _, x in folded if n == name]
        return v[0] if len(v) == 1 else None

    rec, read, lost = one("latte_samples_recorded_total"), one("latte_span_duration_seconds_count"), one("latte_samples_lost_total")
    check(rec == (ids - bound) * SPANS, f"the folded series holds the other IDs' samples: {rec} of {(ids - bound) * SPANS}")
    check(read is not None and lost is not None and read + lost == rec, f"folded: read {read} + lost {lost} == recorded {rec}")
    n_folded = [v for n, l, v in s if n == "latte_ids_folded" and l.get("region") == label]
    check(n_folded == [ids - bound], f"latte_ids_folded says {ids - bound}: {n_folded}")


def main():
    latte, libpath = sys.argv[1:3]
    with Processes(240) as procs:
        s, label = run(procs, latte, libpath, 30, ["--max-ids", "10"])
        if s is not None:
            check_folded(s, label, 30, 10)
        s, label = run(procs, latte, libpath, 30, [])
        if s is not None:
            check(not any(l.get("folded") for _, l, _ in s), "under the bound: no folded series")
            check([v for n, l, v in s if n == "latte_ids_folded"] == [0], "under the bound: latte_ids_folded 0")
        s, label = run(procs, latte, libpath, 100_000, [])
        if s is not None:
            check_folded(s, label, 100_000, 1000)
    return finish("serve max-ids")


if __name__ == "__main__":
    sys.exit(main())
