"""`latte serve` follows a thread that records flat out: a service records
svc.flat back to back on one thread for 10 s (tens of millions of spans a
second, rings of 2^21 samples: one laps in about 42 ms, less than half of
serve's --interval), and serve's figures for it are exact and
whole: recorded == the spans the service wrote, lost == 0, and the
histogram's count == recorded. Serve reads each ring as its writer fills a
quarter of it, not once per --interval.
Then a region whose slot a hostile writer corrupts: serve says why, and
counts the failed reads once per pass (--interval), however often it looks
at the region's rings in between.
Run by `make serve-test` in a private /dev/shm.
Usage: follow.py LATTE SERVICE CORRUPT."""
import os
import subprocess
import sys
import time

from harness import Processes, check, finish, parse, scrape, start_serve, start_service, value, wait_for

LATTE, SERVICE, CORRUPT = sys.argv[1], sys.argv[2], sys.argv[3]
REGION = f"/latte-test-follow-{os.getpid()}"


def figures_of(port, region, id):
    """(recorded, lost) of one series, None until exported."""
    s = parse(scrape(port))
    r = value(s, "latte_samples_recorded_total", region=region[1:], id=id)
    return None if r is None else (r, value(s, "latte_samples_lost_total", region=region[1:], id=id))


def figures(port):
    s = parse(scrape(port))
    get = lambda n: value(s, n, region=REGION[1:], id="svc.flat")
    return get("latte_samples_recorded_total"), get("latte_samples_lost_total"), get("latte_span_duration_seconds_count")


with Processes(limit_s=60) as procs:
    svc = start_service(procs, SERVICE, REGION, "flat")
    port, serve, said = start_serve(procs, LATTE, REGION)
    svc.stdin.write("go\n")
    svc.stdin.flush()
    done = svc.stdout.readline().split()
    check(done[:1] == ["DONE"], f"the service recorded: {done}")
    written = int(done[1])
    # The last samples are read by a look or a pass within --interval.
    got = wait_for("serve has read every span the service wrote", lambda: (lambda f: f if f[0] == written else None)(figures(port)), 10)
    recorded, lost, count = got or figures(port)
    print(f"service wrote {written} spans in 10 s ({written / 10e6:.1f} M/s); serve: recorded {recorded:.0f}, lost {lost:.0f}, count {count:.0f}")
    check(written > 10_000_000, f"the service recorded flat out: {written} spans")
    check(recorded == written, f"recorded_total {recorded} == written {written}")
    check(lost == 0, f"lost_total {lost} == 0")
    check(count == recorded, f"histogram count {count} == recorded {recorded}")
    os.remove("/dev/shm" + REGION)

with Processes(limit_s=60) as procs:
    region = REGION + "-hostile"
    svc = start_service(procs, SERVICE, region, "live")
    port, serve, said = start_serve(procs, LATTE, region)
    errors = lambda: value(parse(scrape(port)), "latte_serve_read_errors_total", region=region[1:]) or 0
    wait_for("serve reads the live region", lambda: figures_of(port, region, "svc.tick"), 10)
    check(errors() == 0, "no read error before the corruption")
    subprocess.run([CORRUPT, region], check=True)
    t0 = time.monotonic()
    wait_for("serve says why it cannot read the region", lambda: any("corrupt" in l for l in said) or None, 10)
    time.sleep(1.0)
    n, elapsed = errors(), time.monotonic() - t0
    # Once per pass (100 ms), and a pass at each change in /dev/shm: far
    # fewer than the looks, which come every millisecond or sooner.
    passes = elapsed / 0.1 + 3
    print(f"corrupt slot: {n:.0f} read errors counted in {elapsed:.1f} s (passes at most {passes:.0f}); said: {[l.strip() for l in said if 'corrupt' in l][:1]}")
    check(0 < n <= passes, f"read errors counted once per pass: {n} in {elapsed:.1f} s")
    check(sum("corrupt" in l for l in said) == 1, "the error is said once")
    os.remove("/dev/shm" + region)
sys.exit(finish("serve follow"))
