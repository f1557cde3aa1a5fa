#!/usr/bin/env python3
"""`latte serve` end to end against a real Prometheus server.

Starts `latte serve` (every region in /dev/shm) and a Prometheus of its own
(temporary configuration and storage, free ports, scraping every second),
then a service that records known counts of known distributions
(tests/serve/service.cpp, mode `known`). Reads every raw sample of the
service's region through latte's C reader and checks, through Prometheus'
HTTP API: the counts equal what the service recorded, nothing lost, and
histogram_quantile() at 0.5, 0.99 and 0.999 lies within one bucket of the
quantile computed from the raw samples (nearest rank, no outlier rule);
the producer's pid, liveness and calibration; then the producer's exit.
Stops everything it started, on failure too.

usage: prometheus_e2e.py LATTE SERVICE LIBLATTE_SO"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

LATTE, SERVICE, LIB = sys.argv[1:4]
REGION = f"latte-serve-e2e-{os.getpid()}"
# What the service records (tests/serve/service.cpp, mode known).
# The odd ID's label is its name as every latte tool shows it (UTF-8 as it
# is, its backslash doubled: docs/fleet.md).
ODD = 'svc "odd" \\\\ \u00e9'
EXPECTED = {"svc.spread": 4000, "svc.bimodal": 3000, "svc.fast": 40000, ODD: 50}


def prometheus_binary():
    p = shutil.which("prometheus")
    if not p:
        sys.exit("serve prometheus: the prometheus command is missing: install the Debian package prometheus (apt-get install prometheus)")
    return p


def query(port, q):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise RuntimeError(f"query {q}: {doc}")
    return [(x["metric"], float(x["value"][1])) for x in doc["data"]["result"]]



def sel(**labels):
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def esc(v):
    return v.replace("\\", "\\\\").replace('"', '\\"')


DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "grafana", "latte-dashboard.json")


def check_dashboard(prom_port, text):
    """Every query of the Grafana dashboard, its variables filled in, is
    PromQL that Prometheus accepts, over metric families latte serve has."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    for e in exprs:
        q = e.replace("$region", ".*").replace("$instance", ".*").replace("$__rate_interval", "5s")
        try:
            query(prom_port, q)
            ok = True
        except Exception as x:  # HTTP 400 for a query Prometheus cannot parse
            ok = repr(x)
        h.check(ok is True, f"dashboard query accepted: {q} ({ok})")
        for name in re.findall(r"\blatte_[a-z_]+", e):
            fam = re.sub(r"_(bucket|count|sum|total|info)$", "", name)
            h.check(fam in families, f"dashboard metric {name}: family {fam} is exported")
    h.check(len(exprs) >= 8, f"the dashboard has its panels ({len(exprs)} queries)")


def main():
    prom = prometheus_binary()
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="latte-serve-e2e-")
    try:
        with h.Processes(limit_s=50) as procs:
            serve_port, serve, _ = h.start_serve(procs, LATTE, "--interval", "100ms")
            prom_port = h.free_port()
            cfg = os.path.join(tmp, "prometheus.yml")
            with open(cfg, "w") as f:
                f.write(
                    "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                    f"scrape_configs:\n  - job_name: latte\n    static_configs:\n      - targets: ['127.0.0.1:{serve_port}']\n"
                )
            log = open(os.path.join(tmp, "prometheus.log"), "w")
            p = procs.start(
                [prom, f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(tmp, 'data')}", f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            )

            def ready():
                if p.poll() is not None:
                    raise RuntimeError(f"prometheus exited ({p.returncode}): {open(log.name).read()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/-/ready", timeout=2) as r:
                        return True if r.status == 200 else None
                except OSError:
                    return None

            h.wait_for("prometheus ready", ready, 30)
            svc = h.start_service(procs, SERVICE, "/" + REGION, "known")
            raw, cpn, pid = h.read_raw(LIB, "/" + REGION)
            # Keyed by label: these names are UTF-8, so only a backslash changes.
            raw = {k.replace("\\", "\\\\"): v for k, v in raw.items()}
            h.check(cpn > 0, f"the service published its cycles per ns ({cpn})")
            h.check({k: len(v) for k, v in raw.items()} == EXPECTED, f"raw counts {({k: len(v) for k, v in raw.items()})} == {EXPECTED}")

            def counts():
                got = {m["id"]: v for m, v in query(prom_port, f"latte_span_duration_seconds_count{sel(region=REGION)}")}
                return got if got == EXPECTED else None

            got = h.wait_for("Prometheus' counts equal the service's", counts, 20)
            print(f"counts in Prometheus: {got}")
            rec = {m["id"]: v for m, v in query(prom_port, f"latte_samples_recorded_total{sel(region=REGION)}")}
            lost = {m["id"]: v for m, v in query(prom_port, f"latte_samples_lost_total{sel(region=REGION)}")}
            h.check(rec == EXPECTED, f"recorded {rec} == {EXPECTED}")
            h.check(lost == {k: 0 for k in EXPECTED}, f"lost {lost} all 0")
            # The odd name came through the text format and back whole.
            h.check(ODD in got, "an ID with quotes, a backslash and UTF-8 keeps its label")

            print(f"{'id':18} {'q':>6} {'raw':>12} {'prometheus':>12} {'buckets apart':>14}")
            for name, cycles in sorted(raw.items()):
                secs = sorted(c / cpn / 1e9 for c in cycles)
                for q in (0.5, 0.99, 0.999):
                    truth = h.nearest_rank(secs, q)
                    res = query(prom_port, f"histogram_quantile({q}, latte_span_duration_seconds_bucket{sel(region=REGION, id=esc(name))})")
                    if not h.check(len(res) == 1, f"{name} q{q}: one result ({res})"):
                        continue
                    est = res[0][1]
                    apart = h.bucket_of(est) - h.bucket_of(truth)
                    print(f"{name:18} {q:>6} {truth * 1e9:>10.1f}ns {est * 1e9:>10.1f}ns {apart:>14}")
                    h.check(abs(apart) <= 1, f"{name} q{q}: histogram_quantile {est} within one bucket of {truth}")

            up = query(prom_port, f"latte_producer_up{sel(region=REGION)}")
            h.check([v for _, v in up] == [1.0], f"producer up: {up}")
            info = query(prom_port, f"latte_producer_info{sel(region=REGION)}")
            h.check([m.get("pid") for m, _ in info] == [str(svc.pid)] and pid == svc.pid, f"info pid {info} == {svc.pid}")
            cal = query(prom_port, f"latte_calibrated{sel(region=REGION)}")
            h.check([v for _, v in cal] == [1.0], f"calibrated with the producer's figure: {cal}")
            # The pid is in the info metric only; no series has a thread label.
            labels = set()
            for m, _ in query(prom_port, f'{{__name__=~"latte_.*",region="{REGION}"}}'):
                if m["__name__"] != "latte_producer_info":
                    labels |= set(m)
            h.check(not labels & {"pid", "thread"}, f"no pid or thread label: {sorted(labels)}")

            check_dashboard(prom_port, h.scrape(serve_port))

            # The producer exits: liveness goes to 0, the counts stay.
            svc.stdin.close()
            svc.wait(timeout=10)
            down = h.wait_for("producer_up 0 after the service exited",
                            lambda: True if [v for _, v in query(prom_port, f"latte_producer_up{sel(region=REGION)}")] == [0.0] else None, 15)
            if down:
                h.check(counts() == EXPECTED, "counts unchanged after the exit")
            targets = query(prom_port, 'up{job="latte"}')
            h.check([v for _, v in targets] == [1.0], f"Prometheus scrapes latte serve without errors: {targets}")
            h.check(serve.poll() is None, "latte serve still runs")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            os.unlink("/dev/shm/" + REGION)
        except FileNotFoundError:
            pass
    print(f"serve prometheus: {time.monotonic() - t0:.1f} s")
    return h.finish("serve prometheus")


if __name__ == "__main__":
    sys.exit(main())
