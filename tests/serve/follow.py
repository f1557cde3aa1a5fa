"""`latte serve` follows a thread that records flat out: a service records
svc.flat back to back on one thread for 10 s (tens of millions of spans a
second, rings of 2^20 samples: one laps in about 20 ms, two hundred times
less than serve's --interval), and serve's figures for it are exact and
whole: recorded == the spans the service wrote, lost == 0, and the
histogram's count == recorded. Serve reads each ring as its writer fills a
quarter of it, not once per --interval. Run by `make serve-test` in a
private /dev/shm.
Usage: follow.py LATTE SERVICE."""
import os
import sys

from harness import Processes, check, finish, parse, scrape, start_serve, start_service, value, wait_for

LATTE, SERVICE = sys.argv[1], sys.argv[2]
REGION = f"/latte-test-follow-{os.getpid()}"


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
sys.exit(finish("follow"))
