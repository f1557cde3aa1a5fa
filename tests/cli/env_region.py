#!/usr/bin/env python3
"""LATTE_REGION end to end, with a program written for the original Latte
(tests/cli/unchanged.cpp, no latte call of its own): run with the variable,
it records into that shared region from its first span (one in a static
constructor), and `latte ls` and `latte stats` see it live and after it
exits. A second run under the same name takes the region of its dead
predecessor over (one that exited, one that was SIGKILLed, whose region
stays readable until then); a run whose name belongs to a live producer
records privately and says so once on standard error (not with
LATTE_QUIET=1); `auto` and an empty value name the region after the
program and its pid, with a suffix when that name is a live producer's or
not a region (two programs of one name and pid, in two PID namespaces).
LATTE_RING_SAMPLES sets how many samples its rings hold, the variable's
region's and the private one's; a value that cannot be used is said once
and the default kept.

usage: env_region.py LATTE UNCHANGED"""
import json
import os
import re
import signal
import subprocess
import sys
import time

LATTE, PROG = sys.argv[1:3]
TAG = f"latte-env-{os.getpid()}"
passed = failed = 0
ENV = {k: v for k, v in os.environ.items() if k not in ("LATTE_REGION", "LATTE_QUIET", "LATTE_RING_SAMPLES")}


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {what}", file=sys.stderr)
    return cond


def start(count, wrap=(), **env):
    p = subprocess.Popen([*wrap, PROG, str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**ENV, **env})
    line = p.stdout.readline()
    check(line.startswith("READY"), f"the program started: {line!r}")
    return p


def finish(p):
    """Closes its standard input; returns (exit code, stdout, stderr)."""
    out, err = p.communicate(timeout=30)
    return p.returncode, out, err


def ls():
    r = subprocess.run([LATTE, "ls", "--json"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, f"latte ls: {r.returncode} {r.stderr}")
    return {x["name"]: x for x in json.loads(r.stdout)}


def reads(name):
    """Samples read per ID by `latte stats NAME --json`."""
    r = subprocess.run([LATTE, "stats", name, "--json"], capture_output=True, text=True, timeout=30)
    if not check(r.returncode == 0, f"latte stats {name}: {r.returncode} {r.stderr}"):
        return {}
    return {c["component"]: c["read"] for c in json.loads(r.stdout)["components"]}


def seen(name, p, count, alive, when):
    row = ls().get(name, {})
    check(row.get("pid") == p.pid and row.get("alive") is alive, f"latte ls lists {name} (pid {p.pid}, alive {alive}) {when}: {row}")
    check(reads(name) == {"unchanged.static": 1, "unchanged.work": count}, f"latte stats {name}: 1 + {count} spans {when}: {reads(name)}")


def stats(name):
    """(read, lost) per ID by `latte stats NAME --json`."""
    r = subprocess.run([LATTE, "stats", name, "--json"], capture_output=True, text=True, timeout=30)
    if not check(r.returncode == 0, f"latte stats {name}: {r.returncode} {r.stderr}"):
        return {}
    return {c["component"]: (c["read"], c["lost"]) for c in json.loads(r.stdout)["components"]}


def report_count(out, component):
    """SAMPLES of `component` in the original's report on standard output."""
    m = re.search(re.escape(component) + r"\D*?(\d+)", re.sub(r"\x1b\[[0-9;]*m", "", out))
    return int(m.group(1)) if m else None


def ring_samples():
    """LATTE_RING_SAMPLES: the rings of the variable's region and of the
    private region hold that many samples; every span still counted."""
    name = f"/{TAG}-ring"
    p = start(5000, LATTE_REGION=name, LATTE_RING_SAMPLES="1024")
    check(ls().get(name, {}).get("ring_samples") == 1024, f"latte ls: rings of 1024 samples: {ls().get(name)}")
    read, lost = stats(name).get("unchanged.work", (0, 0))
    check(0 < read <= 1024 and read + lost == 5000, f"a ring of 1024 samples: read {read} + lost {lost} == 5000")
    rc, out, err = finish(p)
    check(rc == 0 and err == "" and report_count(out, "unchanged.work") == 1024, f"the program's report: 1024 samples, stderr {err!r}")
    os.unlink("/dev/shm" + name)
    # Private memory: the program's own report shows what its rings hold.
    rc, out, err = finish(start(3000, LATTE_RING_SAMPLES="256"))
    check(rc == 0 and err == "" and report_count(out, "unchanged.work") == 256, f"the private region's rings of 256 samples: {err!r}")
    # A value that cannot be used: said once, the default kept.
    for bad in ("1000", "64k", "1"):
        p = start(2000, LATTE_REGION=name, LATTE_RING_SAMPLES=bad)
        check(ls().get(name, {}).get("ring_samples") == 65536, f"LATTE_RING_SAMPLES={bad}: the default ring")
        rc, out, err = finish(p)
        check(rc == 0 and err.count("\n") == 1 and "LATTE_RING_SAMPLES" in err and bad in err and "65536" in err,
              f"LATTE_RING_SAMPLES={bad}: one line: {err!r}")
        check(report_count(out, "unchanged.work") == 2000, f"LATTE_RING_SAMPLES={bad}: every span kept")
        os.unlink("/dev/shm" + name)
    # An empty value is no value: nothing said.
    p = start(10, LATTE_REGION=name, LATTE_RING_SAMPLES="")
    check(ls().get(name, {}).get("ring_samples") == 65536, "LATTE_RING_SAMPLES=: the default ring")
    rc, _, err = finish(p)
    check(rc == 0 and err == "", f"LATTE_RING_SAMPLES=: nothing said: {err!r}")
    os.unlink("/dev/shm" + name)
    # Rings larger than /dev/shm (512 MiB here) holds whole, 16 of 64 MiB:
    # ring memory is committed as it is written, so the region is made of
    # them and holds a few pages per ring, with nothing said.
    p = start(100, LATTE_REGION=name, LATTE_RING_SAMPLES=str(1 << 22))
    check(ls().get(name, {}).get("ring_samples") == 1 << 22, f"rings larger than /dev/shm: made: {ls().get(name)}")
    rc, out, err = finish(p)
    check(rc == 0 and err == "" and report_count(out, "unchanged.work") == 100, f"rings larger than /dev/shm: every span kept, nothing said: {err!r}")
    os.unlink("/dev/shm" + name)
    rc, _, err = finish(start(10, LATTE_RING_SAMPLES="1000", LATTE_QUIET="1"))
    check(rc == 0 and err == "", f"LATTE_QUIET=1: nothing said of a bad LATTE_RING_SAMPLES: {err!r}")


def main():
    name = f"/{TAG}-svc"
    # A first run: seen live and after it exits.
    first = start(1000, LATTE_REGION=name)
    seen(name, first, 1000, True, "while the first run runs")
    rc, out, err = finish(first)
    check(rc == 0 and err == "" and "unchanged.work" in out, f"the first run: exit {rc}, stderr {err!r}")
    seen(name, first, 1000, False, "after the first run exited")

    # The second run takes its exited predecessor's region over: its own
    # counts only, under its pid. `latte watch --follow`, watching the
    # exited run's region, follows the name to it from its first sample.
    watch = subprocess.Popen([LATTE, "watch", name, "--follow", "--interval", "200ms", "--plain"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    second = start(700, LATTE_REGION=name)
    seen(name, second, 700, True, "taken over by the second run")
    time.sleep(1.0)
    watch.terminate()
    w_out, w_err = watch.communicate(timeout=30)
    check(f"taken over by a new producer (pid {second.pid})" in w_err, f"watch --follow says the name was taken over: {w_err!r}")
    check(re.search(r"id=unchanged\.work .*recorded=700 read=700 lost=0", w_out) is not None,
          f"watch --follow read the new producer's 700 spans: {w_out[-600:]!r}")

    # Killed: the region stays readable; the next run takes it over.
    second.kill()
    second.wait(timeout=30)
    for f in (second.stdin, second.stdout, second.stderr):
        f.close()
    seen(name, second, 700, False, "after the second run was SIGKILLed")
    third = start(300, LATTE_REGION=name)
    seen(name, third, 300, True, "taken over by the third run, after a SIGKILL")

    # A live producer's name is never taken: the fourth run records into
    # private memory and says so once; with LATTE_QUIET=1, silently.
    fourth = start(200, LATTE_REGION=name)
    rc, out, err = finish(fourth)
    lines = err.splitlines()
    check(rc == 0 and len(lines) == 1 and "LATTE_REGION" in lines[0] and name in lines[0] and "private memory" in lines[0]
          and f"a live producer's region, pid {third.pid}" in lines[0], f"a live producer's name refused, said once, with whose: {err!r}")
    check("unchanged.work" in out, "the refused run recorded privately (its own report)")
    quiet = start(200, LATTE_REGION=name, LATTE_QUIET="1")
    rc, out, err = finish(quiet)
    check(rc == 0 and err == "" and "unchanged.work" in out, f"LATTE_QUIET=1: nothing said: {err!r}")
    seen(name, third, 300, True, "the live producer's region untouched")
    rc, _, err = finish(third)
    check(rc == 0 and err == "", f"the third run: exit {rc}, stderr {err!r}")
    os.unlink("/dev/shm" + name)

    # A name that cannot be a region: said with why, recorded privately.
    for value, why in (("/a/b", "no '/' after its first byte"), ("foo/bar", "no '/' after its first byte")):
        bad = start(10, LATTE_REGION=value)
        rc, out, err = finish(bad)
        check(rc == 0 and err.count("\n") == 1 and value in err and why in err and "unchanged.work" in out, f"a bad name {value!r}: {err!r}")
    # Values matched as documented: `auto` in lower case only, nothing
    # trimmed; a value refused is said, and nothing is made.
    for value, why in (("AUTO", "in lower case"), ("Auto", "in lower case"), ("auto ", "white space"), (" svc", "white space")):
        before = set(os.listdir("/dev/shm"))
        p = start(10, LATTE_REGION=value)
        rc, out, err = finish(p)
        check(rc == 0 and err.count("\n") == 1 and why in err and "private memory" in err and "unchanged.work" in out,
              f"LATTE_REGION={value!r} refused with why: {err!r}")
        check(set(os.listdir("/dev/shm")) == before, f"LATTE_REGION={value!r} made nothing in /dev/shm")

    # Another user's dead region: the take-over is refused for permission,
    # and the line says so (not that the name is a live producer's).
    roots = f"/{TAG}-roots"
    rc, _, _ = finish(start(5, LATTE_REGION=roots))
    os.chmod("/dev/shm" + roots, 0o644)
    p = start(5, wrap=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"), LATTE_REGION=roots)
    rc, out, err = finish(p)
    check(rc == 0 and err.count("\n") == 1 and "ermission denied" in err and "owned by uid 0" in err and "live producer" not in err
          and "unchanged.work" in out, f"another user's dead region: refused for permission, said: {err!r}")
    os.unlink("/dev/shm" + roots)

    # The default name: /latte-PROGRAM-PID, for `auto` and for an empty value.
    for value in ("auto", ""):
        p = start(50, LATTE_REGION=value)
        auto = f"/latte-{os.path.basename(PROG)}-{p.pid}"
        seen(auto, p, 50, True, f"with LATTE_REGION={value!r}")
        rc, _, err = finish(p)
        check(rc == 0 and err == "", f"LATTE_REGION={value!r}: exit {rc}, stderr {err!r}")
        if os.path.exists("/dev/shm" + auto):
            os.unlink("/dev/shm" + auto)

    # Two programs of one name and pid (pid 1 of a PID namespace each)
    # sharing this /dev/shm: the default name held by a live producer, or
    # by an object that is not a region, moves on to the next suffix.
    base = f"/latte-{os.path.basename(PROG)}-1"
    with open("/dev/shm" + base, "w") as f:
        f.write("not a region")
    ns = ("unshare", "--pid", "--fork")
    a = start(40, wrap=ns, LATTE_REGION="auto")
    b = start(60, wrap=ns, LATTE_REGION="auto")
    check(reads(base + "-2") == {"unchanged.static": 1, "unchanged.work": 40}, f"{base} is not a region: the first takes {base}-2")
    check(reads(base + "-3") == {"unchanged.static": 1, "unchanged.work": 60}, f"{base}-2 is live: the second takes {base}-3")
    for p in (a, b):
        rc, _, err = finish(p)
        check(rc == 0 and err == "", f"a program in a PID namespace: exit {rc}, stderr {err!r}")
    # Its predecessor exited: a restart takes the first free suffix's region over.
    c = start(7, wrap=ns, LATTE_REGION="auto")
    check(reads(base + "-2") == {"unchanged.static": 1, "unchanged.work": 7}, f"a restart takes over {base}-2, whose producer exited")
    finish(c)
    for n in (base, base + "-2", base + "-3"):
        os.unlink("/dev/shm" + n)
    # Every name it may move on to taken: it records privately, and its one
    # line names them all.
    taken = [base] + [f"{base}-{k}" for k in range(2, 17)]
    for n in taken:
        with open("/dev/shm" + n, "w") as f:
            f.write("not a region")
    d = start(5, wrap=ns, LATTE_REGION="auto")
    rc, out, err = finish(d)
    check(rc == 0 and "unchanged.work" in out and err.count("\n") == 1 and f"{base} nor its -2 ... -16:" in err,
          f"all 16 default names taken: one line naming them: {err!r}")
    for n in taken:
        os.unlink("/dev/shm" + n)

    ring_samples()

    # Without the variable: nothing in /dev/shm.
    before = set(os.listdir("/dev/shm"))
    p = start(10)
    check(set(os.listdir("/dev/shm")) == before, "without LATTE_REGION the program records privately")
    finish(p)

    print(f"cli LATTE_REGION: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    signal.alarm(60)
    sys.exit(main())
