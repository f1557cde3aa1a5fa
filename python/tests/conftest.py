"""Fixtures of the Python package's tests: the producer (tests/producer.c,
built by `make python-test` against liblatte.so), the `latte` command,
fresh region names, and regions recorded by the producer.

`make python-test` runs the suite in a mount namespace with a tmpfs of its
own on /dev/shm (LATTE_PRIVATE_SHM=1): the hostile objects the tests make
there never reach the machine's /dev/shm. The run ends with the line
"python: N passed, M failed" that `make test`'s summary adds up."""
import itertools
import os
import subprocess

import pytest

_names = itertools.count()


def _tool(var):
    path = os.environ.get(var)
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"{var} is not set to an executable (make python-test sets it)")
    return path


@pytest.fixture(scope="session")
def producer_bin():
    return _tool("LATTE_PRODUCER")


@pytest.fixture(scope="session")
def latte_bin():
    return _tool("LATTE_BIN")


@pytest.fixture(scope="session")
def private_shm():
    return os.environ.get("LATTE_PRIVATE_SHM") == "1"


def region_name():
    return f"/latte-py-{os.getpid()}-{next(_names)}"


def unlink_region(name):
    try:
        os.unlink("/dev/shm" + name)
    except FileNotFoundError:
        pass


class Producer:
    """A producer process; `finish()` closes its stdin and waits for it."""

    def __init__(self, args):
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "READY":
            self.proc.kill()
            raise RuntimeError(f"producer {args}: no READY line (got {line}, exit {self.proc.wait()})")
        self.ready = line

    def finish(self):
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        out = self.proc.stdout.read()
        rc = self.proc.wait(timeout=30)
        assert rc == 0, f"producer exited {rc}"
        return out


PER_ID = 3000
RING = 4096


@pytest.fixture(scope="module")
def burst(producer_bin, tmp_path_factory):
    """A region recorded by `producer burst` (5 x PER_ID samples in 4
    program IDs, and 20 in py.sleep, 10 of them switched out), still held by
    its running producer, and its flushed image of the same samples."""
    name = region_name()
    image = str(tmp_path_factory.mktemp("burst") / "burst.img")
    p = Producer([producer_bin, "burst", name, str(RING), str(PER_ID), image])
    if p.ready[2] != "0":
        p.finish()
        unlink_region(name)
        pytest.fail(f"the producer's switch tracking was refused ({p.ready[2]}): the switched samples cannot be checked")
    try:
        yield {"name": name, "image": image, "written": int(p.ready[1]), "pid": p.proc.pid}
    finally:
        p.finish()
        unlink_region(name)


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    terminalreporter.write_line(f"python: {passed} passed, {failed} failed")
