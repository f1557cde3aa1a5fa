"""latte's latency samples in Python.

``latte.open(target)`` opens a shared-memory region of a running (or
exited) program, by name (``"/name"`` or ``"name"``), or a flushed image or
a ``latte record`` recording, by path (``"./run.img"``, ``"/tmp/run.rec"``,
a ``pathlib.Path``), read-only,
through latte's own reader (the Rust library, validated before it is
trusted). Its samples come as numpy arrays, one per field, without a Python
object per sample::

    import latte
    with latte.open("/my-service") as r:
        s = r.samples(id="request")        # latte.Samples
        s.duration_ns                      # numpy float64 array
        df = r.to_pandas()                 # with pandas installed

Errors are exceptions with the library's messages: ``FileNotFoundError``,
``PermissionError`` and the other ``OSError`` subclasses for what the
system refused, ``latte.FormatError`` (a ``latte.Error`` and a
``ValueError``) for an object that is not a region or flushed image, or a
damaged one, and ``latte.Error`` for the rest. Every one carries the
library's error code as ``code``.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from . import _latte
from ._latte import Error, FormatError

__all__ = ["open", "Region", "Samples", "Follow", "Error", "FormatError", "FIELDS"]

#: The arrays of a ``Samples``, with their numpy dtypes.
FIELDS = {
    "id": "uint32",  # the ID's token (Region.ids names it)
    "thread": "uint32",  # the OS thread id of the recording thread
    "start_tsc": "uint64",  # the TSC at the start
    "start_ns": "int64",  # CLOCK_REALTIME of the start, ns since the epoch
    "duration": "uint64",  # cycles
    "duration_ns": "float64",  # ns (cycles / Region.clock["cycles_per_ns"])
    "depth": "uint8",  # nesting depth, 0 for an outermost span
    "switched": "bool",  # the thread was switched out during the span (see below)
}
# ``switched`` is exact for a thread with switch tracking on (docs/sched.md);
# a thread without it never sets it, so there False means "not tracked", not
# "not switched out".

_NOT_LATTE = -4001  # LATTE_ERR_NOT_LATTE
# The longest interval or timeout a follower takes, in seconds (a year; NaN
# and infinity are refused).
_MAX_WAIT = 365 * 86400.0


def _is_region_name(target: str) -> bool:
    # The rule of the `latte` command (latte::shm::is_region_name).
    return target != "" and "/" not in target[1:]


class Samples:
    """Samples as columns: one numpy array per field of ``FIELDS``, all of
    one length, in reading order (slot by slot, each ring oldest first).

    ``read`` is the number of samples returned, ``lost`` the number the
    producer wrote that were overwritten before they could be read (for a
    recording, also those ``latte record`` could not read in time);
    ``recorded`` = ``read + lost``. ``names`` maps an ID token to its name.
    """

    def __init__(self, arrays: dict, names: dict):
        for f in FIELDS:
            setattr(self, f, arrays[f])
        self.read = arrays["read"]
        self.lost = arrays["lost"]
        self.names = names

    @property
    def recorded(self) -> int:
        return self.read + self.lost

    def __len__(self) -> int:
        return len(self.duration)

    def __repr__(self) -> str:
        return f"<latte.Samples {self.read} read, {self.lost} lost, {len(set(self.id.tolist()))} IDs>"

    def to_pandas(self):
        """A ``pandas.DataFrame``, a row per sample: ``name`` (categorical),
        the fields of ``FIELDS`` and ``start`` (``datetime64[ns]``, UTC).
        Needs pandas (``pip install pandas``)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("latte.Samples.to_pandas needs pandas: pip install pandas") from None
        import numpy as np

        tokens = sorted(self.names)
        categories = [self.names[t] for t in tokens]
        code_of = np.full(max(tokens, default=0) + 1, -1, dtype=np.int32)
        code_of[tokens] = np.arange(len(tokens), dtype=np.int32)
        df = pd.DataFrame({f: getattr(self, f) for f in FIELDS}, copy=False)
        codes = code_of[self.id] if len(self.id) else np.empty(0, dtype=np.int32)
        df.insert(0, "name", pd.Categorical.from_codes(codes, categories=categories))
        df.insert(4, "start", pd.to_datetime(self.start_ns, unit="ns", utc=True))
        return df


class Follow:
    """An iterator over a region's new samples: each ``next`` waits until
    ``interval`` seconds have passed since the previous poll, then returns
    a ``Samples`` of what was written since. It ends after the first poll
    that began once the producer had exited (that poll reads the last
    samples there will ever be; a flushed image gives one batch), or once
    ``timeout`` seconds have passed.

    ``read``, ``lost`` and ``recorded`` count over every poll so far, from
    the writers' own counts: ``read + lost == recorded``, the samples written
    to the followed rings up to where the polls reached (from the rings'
    start, or from when the follower began without ``from_start``). A ring
    handed from thread to thread between two polls is accounted whole: what
    no poll saw, its threads' tail and threads that came and went between
    polls, is counted lost, in the ID and thread of the ring's owner seen
    last (as ``latte record`` and ``latte serve`` count it).
    """

    def __init__(self, region: "Region", tokens, thread, from_start: bool, interval: float, timeout):
        self._region = region
        self._f = _latte.Follower(region._r, tokens, thread, from_start)
        self._interval = interval
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._next = time.monotonic()
        self._done = False

    def __iter__(self):
        return self

    def __next__(self) -> Samples:
        if self._done:
            raise StopIteration
        wait = self._next - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._next = max(self._next + self._interval, time.monotonic())
        # Looked at before reading: once the producer is gone, this poll
        # takes everything it wrote.
        alive = self._region.producer_alive
        batch = Samples(self._f.poll(), self._region._names())
        if not alive or (self._deadline is not None and time.monotonic() >= self._deadline):
            self._done = True
        return batch

    @property
    def read(self) -> int:
        return self._f.read

    @property
    def lost(self) -> int:
        return self._f.lost

    @property
    def recorded(self) -> int:
        return self._f.recorded


class Region:
    """An opened region or flushed image (``latte.open``). Closing it
    (``close``, or leaving a ``with`` block) unmaps it; a process may hold
    any number open at once (each keeps one file descriptor)."""

    def __init__(self, raw: "_latte.Region"):
        self._r = raw

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self) -> str:
        state = "closed" if self._r.closed else f"{self._r.kind}, producer pid {self._r.producer_pid}"
        return f"<latte.Region {self._r.target!r} ({state})>"

    def close(self) -> None:
        self._r.close()

    @property
    def target(self) -> str:
        return self._r.target

    @property
    def kind(self) -> str:
        """``"region"`` (shared memory), ``"image"`` (a flushed image) or
        ``"recording"`` (a file ``latte record`` wrote)."""
        return self._r.kind

    @property
    def recording(self):
        """A recording's trailer as a dict (docs/recording.md): what was
        followed, for how long, why it ended, and per followed ring
        (``incarnations``) the samples its thread wrote (``recorded``),
        ``read`` into the file and ``lost``. None for a region or an image."""
        text = self._r.recording_json
        return None if text is None else json.loads(text)

    @property
    def producer_pid(self) -> int:
        return self._r.producer_pid

    @property
    def producer_alive(self) -> bool:
        """Whether the producer runs now (always False for an image)."""
        return self._r.producer_alive

    @property
    def ids(self) -> dict:
        """``{token: name}`` of the program's IDs (latte's reserved
        calibration ID left out). A name is shown as the ``latte`` command
        shows it: UTF-8 as is, a backslash doubled, any other byte as
        ``\\xNN``, so two IDs never share a name; ``samples(id=...)`` takes
        that text or the name's bytes."""
        return {t: n for t, n, reserved, _ in self._r.ids() if not reserved}

    @property
    def slots(self) -> list:
        """Every assigned (thread, ID) ring: index, id, name, thread (OS
        tid), thread_index, state (``"live"``, or ``"closed"`` once its
        thread exited) and written (samples written to it so far)."""
        names = {t: n for t, n, _, _ in self._r.ids()}
        out = self._r.slots()
        for s in out:
            s["name"] = names.get(s["id"], "")
        return out

    @property
    def threads(self) -> list:
        """The OS thread ids that recorded a program ID, sorted."""
        ids = self.ids
        return sorted({s["thread"] for s in self._r.slots() if s["id"] in ids})

    @property
    def counters(self) -> dict:
        return self._r.counters()

    @property
    def calibration(self) -> dict:
        """The producer's calibration: cycles_per_ns (0.0 when it published
        none), calibrated, overheads[start mode][stop mode] and pulse, in
        cycles."""
        return self._r.calibration()

    @property
    def clock(self) -> dict:
        """cycles_per_ns used for the ns fields (the producer's, else
        measured here once, over 50 ms), its ``source`` (``"producer"`` or
        ``"measured here"``), anchor_tsc and anchor_realtime_ns."""
        return self._r.clock_info()

    @property
    def geometry(self) -> dict:
        return self._r.geometry()

    def _tokens(self, id):
        if id is None:
            return None
        wanted = list(id) if isinstance(id, (list, tuple, set, frozenset)) else [id]
        ids = self._r.ids()
        by_name = {n: t for t, n, _, _ in ids}
        by_bytes = {b: t for t, _, _, b in ids}
        known = {t for t, _, _, _ in ids}
        tokens = []
        for w in wanted:
            if isinstance(w, str):
                if w not in by_name:
                    raise KeyError(f"{self.target}: no ID named {w!r}")
                tokens.append(by_name[w])
            elif isinstance(w, (bytes, bytearray)):
                if bytes(w) not in by_bytes:
                    raise KeyError(f"{self.target}: no ID of the bytes {bytes(w)!r}")
                tokens.append(by_bytes[bytes(w)])
            elif isinstance(w, (int, np.integer)) and not isinstance(w, bool):
                if int(w) not in known:
                    raise KeyError(f"{self.target}: no ID of token {int(w)}")
                tokens.append(int(w))
            else:
                raise TypeError(f"an ID is a name (str, as Region.ids shows it), its bytes or a token (int), not {type(w).__name__}")
        return tokens

    def samples(self, id=None, thread=None) -> Samples:
        """The samples the rings hold now, as a ``Samples``: of ``id`` (a
        name, a token, or a list of them; None: every program ID) and of
        ``thread`` (an OS thread id; None: every thread). The read runs with
        the interpreter released."""
        tokens = self._tokens(id)
        return Samples(self._r.samples(tokens, thread), self._names())

    def _names(self) -> dict:
        return {t: n for t, n, _, _ in self._r.ids()}

    def to_pandas(self, id=None, thread=None):
        """``samples(id, thread).to_pandas()``."""
        return self.samples(id, thread).to_pandas()

    def follow(self, interval: float = 0.1, id=None, thread=None, from_start: bool = True, timeout=None) -> Follow:
        """A ``Follow`` iterator over the new samples of ``id`` and
        ``thread`` (as ``samples``), one batch every ``interval`` seconds.
        With ``from_start`` the first batch holds what the rings hold
        already; otherwise following starts now."""
        if not (isinstance(interval, (int, float)) and 0 <= interval < _MAX_WAIT):
            raise ValueError(f"follow: interval is seconds from 0 to {_MAX_WAIT:.0f}, not {interval!r}")
        if timeout is not None and not (isinstance(timeout, (int, float)) and 0 <= timeout < _MAX_WAIT):
            raise ValueError(f"follow: timeout is None or seconds from 0 to {_MAX_WAIT:.0f}, not {timeout!r}")
        return Follow(self, self._tokens(id), thread, from_start, interval, timeout)


def open(target) -> Region:
    """Opens a region (``"/name"`` or ``"name"``: no ``/`` after the first
    character), or a flushed image or recording (any other path, an
    ``os.PathLike``, or a name of no region that is a file's path, as the
    ``latte`` command reads it) read-only, and validates it."""
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
        if _is_region_name(target):
            # A path object is a file, even where its text reads as a name.
            target = os.path.join(".", target) if not target.startswith("/") else "/." + target
    if not isinstance(target, str):
        raise TypeError(f"latte.open: a region name or a path, not {type(target).__name__}")
    if target == "/" or (not _is_region_name(target) and os.path.isdir(target)):
        raise IsADirectoryError(21, "is a directory, not a latte region, flushed image or recording", target)
    try:
        return Region(_latte.open_target(target))
    except FormatError as e:
        if getattr(e, "code", None) == _NOT_LATTE and not _is_region_name(target):
            err = FormatError(f"{e} (latte.open reads shared-memory regions and the files latte_flush_sync and latte record write)")
            err.code = e.code
            raise err from None
        raise
