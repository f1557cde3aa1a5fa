#!/usr/bin/env python3
"""`latte serve` over HTTP at its edges, with real services recording:
the answers to every kind of request (200, HEAD, 404, 405, 400, 431), slow
clients that never finish a request while others scrape, many scrapes at
once, regions that vanish mid-scrape (unlinked, the producer killed, the
object shrunk under the mapping, a producer restarting under the same
name), objects that are not regions, a region named before it exists,
--per-thread, and 70 copies of a region, all mapped. After each, the
exporter must still answer; at the end it must still run.

usage: http_edges.py LATTE SERVICE LIBLATTE_SO"""
import os
import select
import shutil
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

LATTE, SERVICE, LIB = sys.argv[1:4]
TAG = f"latte-serve-http-{os.getpid()}"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def name(x):
    return f"{TAG}-{x}"


def shm(x):
    return "/dev/shm/" + name(x)


def raw_exchange(port, data, whole=False, timeout=20, half_close=False):
    """Sends bytes on a new connection (then, with `half_close`, shuts its
    sending side down, as `nc -N` does); returns what comes back: the
    answer's head, or (`whole`) everything until the server closes. A reset
    ends it too (the server closing on unread bytes, after its answer)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    try:
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except ConnectionError:
            pass  # answered and closed before it read everything
        while whole or b"\r\n\r\n" not in out:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except ConnectionError:
        pass
    finally:
        s.close()
    return out



def samples(port):
    return h.parse(h.scrape(port))


class Scrapers:
    """Threads scraping back to back until stopped; every answer recorded."""

    def __init__(self, port, n):
        self.port, self.stop_flag, self.results = port, threading.Event(), []
        self.threads = [threading.Thread(target=self.run) for _ in range(n)]
        for t in self.threads:
            t.start()

    def run(self):
        while not self.stop_flag.is_set():
            try:
                status, headers, body = h.request(self.port)
                self.results.append((status, body.endswith("# EOF\n")))
            except Exception as e:  # a connection error is a failure too
                self.results.append((repr(e), False))

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join()
        return self.results


def all_ok(results):
    return len(results) > 0 and all(s == 200 and eof for s, eof in results)


def main():
    t0 = time.monotonic()
    with h.Processes(limit_s=100) as procs:
        port, serve, _ = h.start_serve(procs, LATTE, "--interval", "50ms", "--keep-gone", "2s")
        live = h.start_service(procs, SERVICE, "/" + name("live"), "live")
        # A client that never finishes its request: disconnected after the
        # header timeout (10 s), looked at at the end.
        lingering = socket.create_connection(("127.0.0.1", port), timeout=30)
        lingering.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        lingering_since = time.monotonic()
        known = h.start_service(procs, SERVICE, "/" + name("known"), "known")

        # --- every kind of request --------------------------------------
        def both_present():
            s = samples(port)
            return s if h.value(s, "latte_span_duration_seconds_count", region=name("known"), id="svc.fast") == 40000 and \
                h.value(s, "latte_producer_up", region=name("live")) == 1 else None

        s = h.wait_for("both services' series", both_present, 10)
        status, headers, body = h.request(port)
        h.check(status == 200 and headers.get("content-type") == OPENMETRICS, f"GET /metrics: {status} {headers.get('content-type')}")
        h.check(body.endswith("# EOF\n"), "the body ends with # EOF")
        h.check(h.value(s, "latte_calibrated", region=name("live")) == 0.0, "a producer that never calibrated: latte_calibrated 0")
        h.check(h.value(s, "latte_calibrated", region=name("known")) == 1.0, "a calibrated producer: latte_calibrated 1")
        status, headers, body = h.request(port, "HEAD")
        h.check(status == 200 and body == "" and headers.get("content-type") == OPENMETRICS, f"HEAD /metrics: {status}, {len(body)} bytes")
        for path in ("/", "/metric", "/metrics/x", "/nothing?x=1"):
            status, _, body = h.request(port, "GET", path)
            h.check(status == 404, f"GET {path}: {status} (404)")
        status, _, _ = h.request(port, "GET", "/metrics?name[]=x")
        h.check(status == 200, f"GET /metrics with a query: {status}")
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            status, headers, _ = h.request(port, method)
            h.check(status == 405 and headers.get("allow") == "GET, HEAD", f"{method} /metrics: {status}, Allow {headers.get('allow')}")
        out = raw_exchange(port, b"THIS IS NOT HTTP\r\n\r\n")
        h.check(out.startswith(b"HTTP/1.1 400"), f"garbage: {out[:40]!r} (400)")
        out = raw_exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n")
        h.check(out.startswith(b"HTTP/1.1 431"), f"70 kB of header: {out[:40]!r} (431)")
        out = raw_exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", whole=True)
        h.check(out.startswith(b"HTTP/1.1 200") and out.endswith(b"# EOF\n"), "a raw HTTP/1.1 request with Connection: close")
        out = raw_exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n", whole=True)
        h.check(out.startswith(b"HTTP/1.0 200") and out.endswith(b"# EOF\n"), f"HTTP/1.0: {out[:20]!r}")
        outs = [raw_exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", whole=True, half_close=True) for _ in range(5)]
        h.check(all(o.startswith(b"HTTP/1.1 200") and o.endswith(b"# EOF\n") for o in outs),
                f"5 requests each followed by a half-close (nc -N), all answered: {[o[:15] for o in outs]}")

        # --- slow clients that never finish their request ---------------
        slow = []
        for _ in range(50):
            c = socket.create_connection(("127.0.0.1", port), timeout=20)
            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # no blank line: never done
            slow.append(c)
        idle = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(20)]  # send nothing
        ok = 0
        for _ in range(10):
            status, _, body = h.request(port)
            ok += status == 200 and body.endswith("# EOF\n")
        h.check(ok == 10, f"10 scrapes answered while 70 clients hold requests open ({ok})")
        for c in slow + idle:
            c.close()

        # --- clients that pipeline requests and never read ----------------
        # 256 of them (64 from each of 4 addresses: the total cap), then 256
        # more from the scraper's own address (the cap per address): a new
        # scrape is answered all the same, within 2 s (it takes a few ms).
        flood = []
        for phase, sources in (("4 other addresses", [f"127.0.1.{k}" for k in range(1, 5)]), ("the scraper's address", ["127.0.0.1"])):
            for k in range(256):
                c = socket.socket()
                c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                c.bind((sources[k % len(sources)], 0))
                c.settimeout(5)
                c.connect(("127.0.0.1", port))
                c.setblocking(False)
                try:
                    c.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 200)
                except (BlockingIOError, ConnectionError):
                    pass
                flood.append(c)
            time.sleep(1.0)  # the server writes until their buffers are full
            for i in range(3):
                t = time.monotonic()
                try:
                    status, _, body = h.request(port, timeout=2)
                    took, ok = time.monotonic() - t, status == 200 and body.endswith("# EOF\n")
                except OSError as e:
                    took, ok = time.monotonic() - t, repr(e)
                h.check(ok is True and took <= 2, f"a scrape while 256 clients from {phase} pipeline requests and never read: {ok}, {took:.2f} s")
        for c in flood:
            c.close()
        status, _, body = h.request(port)
        h.check(status == 200 and body.endswith("# EOF\n"), "answered after the flood")

        # --- many scrapes at once -----------------------------------------
        res = []
        lock = threading.Lock()

        def burst():
            last = -1.0
            for _ in range(6):
                s = samples(port)
                v = h.value(s, "latte_samples_recorded_total", region=name("live"), id="svc.tick")
                with lock:
                    res.append(v is not None and v >= last)
                last = v if v is not None else last

        threads = [threading.Thread(target=burst) for _ in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        h.check(len(res) == 32 * 6 and all(res), f"32 clients x 6 scrapes: {sum(res)} of {32 * 6} answered, counts never going back")

        # --- counts: each sample once -------------------------------------
        s = samples(port)
        for id_, n in (("svc.spread", 4000), ("svc.bimodal", 3000), ("svc.fast", 40000)):
            h.check(h.value(s, "latte_span_duration_seconds_count", region=name("known"), id=id_) == n, f"{id_}: count {n}")
            h.check(h.value(s, "latte_samples_lost_total", region=name("known"), id=id_) == 0, f"{id_}: nothing lost")
            h.check(h.value(s, "latte_samples_switched_total", region=name("known"), id=id_) is None, f"{id_}: no switched count (not tracked is not 0)")
        h.check(h.value(s, "latte_switches_tracked", region=name("known")) == 0, "latte_switches_tracked 0 for a producer without switch tracking")
        tick = [h.value(s, n, region=name("live"), id="svc.tick") for n in ("latte_span_duration_seconds_count", "latte_samples_lost_total")]
        h.check(tick[0] and tick[0] > 0 and tick[1] == 0, f"live region: samples read, none lost ({tick})")

        # --- --per-thread: a second exporter, for one region named --------
        # The region comes after the exporter: it is read from its start.
        pport, pserve, _ = h.start_serve(procs, LATTE, "--per-thread", "/" + name("pt"))
        pt = h.start_service(procs, SERVICE, "/" + name("pt"), "known")

        def per_thread():
            s = samples(pport)
            fast = sorted((l.get("thread"), v) for n, l, v in s if n == "latte_span_duration_seconds_count" and l.get("id") == "svc.fast")
            return (fast, s) if [v for _, v in fast] == [20000, 20000] else None

        got = h.wait_for("--per-thread: svc.fast, 20,000 per thread", per_thread, 5)
        if got:
            fast, s = got
            h.check(all(t and t.isdigit() for t, _ in fast) and fast[0][0] != fast[1][0], f"thread labels are OS thread ids: {fast}")
            h.check(all(l.get("region") == name("pt") for n, l, v in s if "region" in l), "a named region only")
            spread = [l.get("thread") for n, l, v in s if n == "latte_span_duration_seconds_count" and l.get("id") == "svc.spread"]
            h.check(spread == [str(pt.pid)], f"the main thread's ID has the main thread's id: {spread}")
        procs.stop(pserve)
        procs.stop(pt)
        os.unlink(shm("pt"))

        # --- a service restarting faster than the rescan ------------------
        # Ten incarnations 300 ms apart, 10,000 spans each, each taking the
        # name over from the last. Serve reads each one it finds whole; one
        # replaced before serve was scheduled at all (a loaded machine) is
        # counted from the producers' own counts (the incarnation and
        # recorded_before each region carries), as unseen. Exact either way:
        # recorded (read + lost) + unseen == the 100,000 spans written.
        iport, iserve, _ = h.start_serve(procs, LATTE, "/" + name("inc"))
        for _ in range(10):
            p_ = h.start_service(procs, SERVICE, "/" + name("inc"), "inc")
            p_.wait()
            time.sleep(0.3)

        def incarnations():
            s = samples(iport)
            rec = h.value(s, "latte_samples_recorded_total", region=name("inc"), id="svc.inc") or 0
            unseen = h.value(s, "latte_samples_unseen_total", region=name("inc")) or 0
            return (rec, unseen, s) if rec + unseen == 100000 else None

        got = h.wait_for("10 incarnations: recorded + unseen == 100,000", incarnations, 5)
        s = got[2] if got else samples(iport)
        rec, lost = (h.value(s, n, region=name("inc"), id="svc.inc") for n in ("latte_samples_recorded_total", "latte_samples_lost_total"))
        unseen, unseen_regions = (h.value(s, n, region=name("inc")) for n in ("latte_samples_unseen_total", "latte_regions_unseen_total"))
        print(f"10 incarnations 300 ms apart: {rec} recorded, {lost} lost, {unseen} unseen in {unseen_regions} regions")
        h.check(got is not None and lost == 0 and unseen == 10000 * (unseen_regions or 0),
                f"every incarnation read whole or counted unseen, exactly ({rec} + {unseen} of 100000, {lost} lost)")
        procs.stop(iserve)
        os.unlink(shm("inc"))

        # --- incarnations serve never saw, counted from the producers' counts
        # Serve reads a first incarnation, is stopped (SIGSTOP) while three
        # more each take the name over and exit, then a fifth starts and
        # serve goes on: the three it never saw are counted unseen, exactly
        # (3 regions, 30,000 samples), the first and the fifth read whole.
        uport, userve, _ = h.start_serve(procs, LATTE, "/" + name("unseen"))
        h.start_service(procs, SERVICE, "/" + name("unseen"), "inc").wait()

        def first_read():
            v = h.value(samples(uport), "latte_samples_recorded_total", region=name("unseen"), id="svc.inc")
            return v if v == 10000 else None

        h.wait_for("the first incarnation read whole", first_read, 5)
        os.kill(userve.pid, signal.SIGSTOP)
        for _ in range(4):
            h.start_service(procs, SERVICE, "/" + name("unseen"), "inc").wait()
        os.kill(userve.pid, signal.SIGCONT)

        def after():
            s = samples(uport)
            v = [h.value(s, n, region=name("unseen"), id="svc.inc") for n in ("latte_samples_recorded_total", "latte_samples_lost_total")]
            v += [h.value(s, n, region=name("unseen")) for n in ("latte_samples_unseen_total", "latte_regions_unseen_total")]
            return v if v[0] == 20000 else None

        got = h.wait_for("the fifth incarnation read whole after SIGCONT", after, 5)
        print(f"5 incarnations, serve stopped through 3: recorded, lost, unseen, unseen regions = {got}")
        h.check(got == [20000, 0, 30000, 3], f"three incarnations never seen: 30,000 samples in 3 regions counted unseen (recorded, lost, unseen, regions: {got})")
        procs.stop(userve)
        os.unlink(shm("unseen"))

        # --- --split-switched: the histogram in two series by `switched` ---
        # A producer with switch tracking: 20 of its 40 spans sleep (switched
        # out). The switched="true" series counts exactly the samples
        # latte_samples_switched_total counts, and the two add up to what was
        # recorded; without the option there is no `switched` label.
        sport, sserve, _ = h.start_serve(procs, LATTE, "--split-switched", "/" + name("sched"))
        sc_ = h.start_service(procs, SERVICE, "/" + name("sched"), "sched")

        def split():
            s = samples(sport)
            c = {l.get("switched"): v for n, l, v in s if n == "latte_span_duration_seconds_count" and l.get("id") == "svc.sched"}
            sw = h.value(s, "latte_samples_switched_total", region=name("sched"), id="svc.sched")
            rec = h.value(s, "latte_samples_recorded_total", region=name("sched"), id="svc.sched")
            return (c, sw, rec) if rec == 40 else None

        got = h.wait_for("--split-switched: svc.sched's 40 samples read", split, 5)
        if got:
            c, sw, rec = got
            h.check(set(c) == {"true", "false"} and c["true"] == sw and c["true"] + c["false"] == rec and 20 <= sw <= 40,
                    f"--split-switched: switched series {c}, switched_total {sw}, recorded {rec}")
        h.check(not any("switched" in l for n, l, v in samples(port) if n.startswith("latte_span_duration")), "no `switched` label without --split-switched")
        procs.stop(sserve)
        procs.stop(sc_)
        os.unlink(shm("sched"))

        # --- --per-thread with thread churn: series retire after --keep-gone
        # 3 s of short-lived threads over 8 rings, most rings handed to a
        # new thread before a pass sees them closed: every thread's series
        # goes --keep-gone (1 s) after its thread no longer holds a ring.
        cport, cserve, _ = h.start_serve(procs, LATTE, "--per-thread", "--keep-gone", "1s", "/" + name("churn"))
        ch = h.start_service(procs, SERVICE, "/" + name("churn"), "churn")

        def churn_threads():
            return {l.get("thread") for n, l, v in samples(cport) if n == "latte_span_duration_seconds_count" and l.get("id") == "svc.churn"}

        most = 0
        while True:
            most = max(most, len(churn_threads()))
            if select.select([ch.stdout], [], [], 0.2)[0]:
                break
        h.check(ch.stdout.readline().strip() == "DONE" and most > 0, f"churn: per-thread series seen during it (at most {most} at once)")
        left = h.wait_for("every churned thread's series gone 1 s (--keep-gone) after the churn",
                          lambda: True if not churn_threads() else None, 6)
        if not left:
            print(f"series left: {len(churn_threads())}")
        procs.stop(cserve)
        procs.stop(ch)
        os.unlink(shm("churn"))

        # --- a region unlinked mid-scrape ---------------------------------
        sc = Scrapers(port, 4)
        time.sleep(0.3)
        os.unlink(shm("live"))
        gone = h.wait_for("the unlinked region's series gone after --keep-gone",
                        lambda: True if h.value(samples(port), "latte_producer_up", region=name("live")) is None else None, 8)
        r = sc.stop()
        h.check(all_ok(r), f"{len(r)} scrapes while the region was unlinked: all 200 with # EOF")
        procs.stop(live)

        # --- the producer killed mid-scrape, then restarted -------------
        k = h.start_service(procs, SERVICE, "/" + name("kill"), "live")
        h.wait_for("the new region found", lambda: True if h.value(samples(port), "latte_producer_up", region=name("kill")) == 1 else None, 5)
        sc = Scrapers(port, 4)
        time.sleep(0.3)
        k.send_signal(signal.SIGKILL)
        k.wait()
        down = h.wait_for("producer_up 0 after SIGKILL",
                        lambda: True if h.value(samples(port), "latte_producer_up", region=name("kill")) == 0 else None, 5)
        r = sc.stop()
        h.check(all_ok(r), f"{len(r)} scrapes while the producer was killed: all 200")
        # Each sample once: what the killed producer wrote, no more, no less.
        old = h.written(LIB, "/" + name("kill")).get("svc.tick")
        tick = lambda n: h.value(samples(port), n, region=name("kill"), id="svc.tick")  # noqa: E731
        before = h.wait_for(f"recorded == written ({old}) for the killed producer", lambda: old if tick("latte_samples_recorded_total") == old else None, 5)
        h.check(tick("latte_samples_lost_total") == 0, "nothing lost")
        k2 = h.start_service(procs, SERVICE, "/" + name("kill"), "live")  # takes the stale name over

        def restarted():
            s = samples(port)
            info = [l.get("pid") for n, l, v in s if n == "latte_producer_info" and l.get("region") == name("kill")]
            v = h.value(s, "latte_samples_recorded_total", region=name("kill"), id="svc.tick")
            return (info, v) if info == [str(k2.pid)] and v is not None and v > before else None

        got = h.wait_for("the restarted producer's pid and counts", restarted, 5)
        procs.stop(k2)
        new = h.written(LIB, "/" + name("kill")).get("svc.tick")
        total = h.wait_for(f"recorded == written before the restart ({before}) + after ({new})",
                         lambda: True if before and new and tick("latte_samples_recorded_total") == before + new else None, 5)
        h.check(got is not None and total, f"counts go on across the restart: {before} -> {got and got[1]} -> {tick('latte_samples_recorded_total')}")

        # --- the object shrinks under the mapping mid-scrape ------------
        t = h.start_service(procs, SERVICE, "/" + name("shrink"), "live")
        h.wait_for("the region to shrink found", lambda: True if h.value(samples(port), "latte_producer_up", region=name("shrink")) == 1 else None, 5)
        sc = Scrapers(port, 4)
        time.sleep(0.2)
        os.truncate(shm("shrink"), 4096)
        errs = h.wait_for("read errors counted for the shrunk region",
                        lambda: True if (h.value(samples(port), "latte_serve_read_errors_total", region=name("shrink")) or 0) > 0 else None, 5)
        r = sc.stop()
        h.check(all_ok(r), f"{len(r)} scrapes while the object shrank: all 200")
        h.check(t.poll() is None, "the producer of the shrunk region still runs")
        procs.stop(t)
        os.unlink(shm("shrink"))

        # --- objects that are not regions ---------------------------------
        with open(shm("junk"), "wb") as f:
            f.write(b"not a latte region at all" * 100)
        open(shm("empty"), "wb").close()
        os.mkdir(shm("dir"))
        time.sleep(1.3)
        s = samples(port)
        h.check(not any(l.get("region", "").startswith(name("junk")) or l.get("region") in (name("empty"), name("dir")) for _, l, _ in s),
                "objects that are not regions are not shown")
        os.unlink(shm("junk"))
        os.unlink(shm("empty"))
        os.rmdir(shm("dir"))

        # --- a region named before it exists ------------------------------
        lport, lserve, lines = h.start_serve(procs, LATTE, "/" + name("later"))
        h.check(any("no region /" + name("later") + " yet" in x for x in lines), f"says the named region is not there yet: {lines}")
        h.check(h.value(samples(lport), "latte_producer_up", region=name("later")) is None, "nothing for it yet")
        later = h.start_service(procs, SERVICE, "/" + name("later"), "live")
        h.wait_for("the named region found once it exists",
                 lambda: True if h.value(samples(lport), "latte_producer_up", region=name("later")) == 1 else None, 5)
        procs.stop(later)
        procs.stop(lserve)
        os.unlink(shm("later"))

        # --- more regions than one chunk of the fault table ----------------
        small = h.start_service(procs, SERVICE, "/" + name("small"), "small")
        copies = [shm(f"copy-{i:02d}") for i in range(70)]
        for c in copies:
            shutil.copyfile(shm("small"), c)

        def mapped_all():
            s = samples(port)
            mapped = {l["region"] for n, l, v in s if n == "latte_producer_up" and l["region"].startswith(name("copy-"))}
            refused = {l["region"] for n, l, v in s if n == "latte_serve_region_unreadable" and l["region"].startswith(name("copy-"))}
            return (mapped, refused) if len(mapped | refused) == 70 else None

        got = h.wait_for("70 copies of a region: each mapped or refused", mapped_all, 8)
        if got:
            mapped, refused = got
            h.check(len(mapped) == 70 and not refused, f"70 region copies: {len(mapped)} mapped, {len(refused)} refused")
        for c in copies:
            os.unlink(c)
        h.wait_for("no region refused", lambda: True if not any(
            n == "latte_serve_region_unreadable" and l["region"].startswith(TAG) for n, l, _ in samples(port)) else None, 5)
        procs.stop(small)
        procs.stop(known)
        try:
            lingering.settimeout(max(1.0, 15 - (time.monotonic() - lingering_since)))
            closed = lingering.recv(100) == b""
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            closed = False
        waited = time.monotonic() - lingering_since
        h.check(closed and waited >= 9.5, f"a request never finished is disconnected after the header timeout (closed {closed} after {waited:.1f} s)")
        lingering.close()
        h.check(serve.poll() is None, "latte serve still runs after all of it")
    for x in os.listdir("/dev/shm"):
        if x.startswith(TAG):
            os.unlink("/dev/shm/" + x)
    print(f"serve http: {time.monotonic() - t0:.1f} s")
    return h.finish("serve http")


if __name__ == "__main__":
    sys.exit(main())
