"""Objects that are not what they claim: each one raises a Python
exception with the library's message, and the interpreter goes on. The
ones in /dev/shm are made only in the private /dev/shm of `make
python-test` (a tmpfs in a mount namespace of its own)."""
import os
import random
import shutil
import struct

import pytest

import latte
from conftest import region_name, unlink_region

# Offsets in the region header and a slot header (src/layout.rs).
FIRST_SLOTS, SAMPLES_PER_SLOT = 24, 28
SLOT_STRIDE = 40
IDS_USED, SLOTS_USED = 80, 84
SLOT_CHUNKS = 256
WRITE_IDX, GENERATION, ID_TOKEN = 0, 64, 68


def patched(src, dst, edits):
    data = bytearray(open(src, "rb").read())
    for off, fmt, value in edits:
        struct.pack_into(fmt, data, off, value)
    open(dst, "wb").write(data)
    return dst


def slot0(image):
    h = open(image, "rb").read(1024)
    return struct.unpack_from("<Q", h, SLOT_CHUNKS)[0]


def read_all(target):
    with latte.open(target) as r:
        r.ids, r.slots, r.counters, r.calibration
        return r.samples(), r.samples(id=list(r.ids))


def test_exception_classes():
    assert issubclass(latte.FormatError, latte.Error) and issubclass(latte.FormatError, ValueError)
    assert latte.Error.__module__ == latte.FormatError.__module__ == "latte"
    assert not issubclass(latte.Error, OSError)


def test_missing_and_wrong_kinds(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such region or file") as e:
        latte.open("/latte-py-no-such-region")
    assert e.value.code == -2 and e.value.filename == "/latte-py-no-such-region"
    with pytest.raises(FileNotFoundError):
        latte.open(str(tmp_path / "none.img"))
    with pytest.raises(IsADirectoryError, match="is a directory"):
        latte.open(str(tmp_path))
    with pytest.raises(IsADirectoryError, match="is a directory"):
        latte.open("/")
    with pytest.raises(OSError, match="invalid argument"):
        latte.open("/" + "x" * 300)
    with pytest.raises(TypeError):
        latte.open(42)


def test_files_that_are_not_images(tmp_path):
    cases = {
        "empty": b"",
        "text": b"hello world\n" * 100,
        "random": bytes(random.Random(7).randrange(256) for _ in range(8192)),
        # A file of a format this version does not read: unknown magic.
        "other-format": b"LATTEREC" + bytes(4088),
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(latte.FormatError, match="not a latte region") as e:
            latte.open(str(p))
        assert e.value.code == -4001, name
        assert "latte.open reads shared-memory regions and the files latte_flush_sync and latte record write" in str(e.value)
    # Too short to hold a magic; the magic, then too little.
    p = tmp_path / "short"
    p.write_bytes(b"LATTE")
    with pytest.raises(latte.FormatError, match="truncated"):
        latte.open(str(p))
    # Too short, and not the magic's start: not latte's at all.
    p.write_bytes(b"junk12")
    with pytest.raises(latte.FormatError, match="not a latte region"):
        latte.open(str(p))
    p = tmp_path / "magic-only"
    p.write_bytes(b"LATTEREG" + bytes(100))
    with pytest.raises(latte.FormatError, match="truncated"):
        latte.open(str(p))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(latte.FormatError, match="not a latte region"):
        latte.open(str(fifo))


def test_damaged_images(burst, tmp_path):
    img = burst["image"]
    s0 = slot0(img)
    bad = {
        "version": [(8, "<I", 99)],
        "no first slots": [(FIRST_SLOTS, "<I", 0)],
        "slot stride": [(SLOT_STRIDE, "<Q", 8)],
        "ring size": [(SAMPLES_PER_SLOT, "<I", 3)],
        "slots used": [(SLOTS_USED, "<I", 0xFFFF)],
        "ids used": [(IDS_USED, "<I", 100000)],
        "write index": [(s0 + WRITE_IDX, "<Q", 1 << 62)],
        "id token": [(s0 + ID_TOKEN, "<I", 200)],
    }
    for what, edits in bad.items():
        p = patched(img, str(tmp_path / "bad.img"), edits)
        with pytest.raises(latte.FormatError, match="unsupported layout version|corrupt|truncated") as e:
            read_all(p)
        assert e.value.code in (-4002, -4003, -4004), what
    # Cut short: smaller than its header says.
    data = open(img, "rb").read()
    p = tmp_path / "cut.img"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(latte.FormatError, match="truncated"):
        latte.open(str(p))


def test_random_damage_never_crashes(burst, tmp_path):
    """Bytes of the header, the name records and the first slot headers
    overwritten at random: every open and read either works or raises."""
    img = burst["image"]
    data = open(img, "rb").read()
    s0 = slot0(img)
    stride = struct.unpack_from("<Q", data, SLOT_STRIDE)[0]
    spots = list(range(0, 4096)) + [s0 + k * stride + o for k in range(6) for o in range(128)]
    rng = random.Random(27)
    outcomes = {"read": 0, "refused": 0}
    p = tmp_path / "fuzz.img"
    for _ in range(300):
        d = bytearray(data)
        for _ in range(rng.randrange(1, 6)):
            off = rng.choice(spots)
            d[off : off + 4] = rng.randrange(1 << 32).to_bytes(4, "little")
        p.write_bytes(d)
        try:
            read_all(str(p))
            outcomes["read"] += 1
        except (latte.Error, OSError, MemoryError):
            outcomes["refused"] += 1
    assert outcomes["read"] > 0 and outcomes["refused"] > 0, outcomes


@pytest.fixture
def shm(private_shm):
    if not private_shm:
        pytest.skip("needs the private /dev/shm of make python-test (LATTE_PRIVATE_SHM=1)")


def test_hostile_shm_objects(burst, shm, tmp_path):
    names = []
    try:
        # A damaged copy of a region, a FIFO and a directory under region names.
        name = region_name()
        names.append(name)
        patched(burst["image"], "/dev/shm" + name, [(SLOTS_USED, "<I", 0xFFFF)])
        with pytest.raises(latte.FormatError, match="corrupt") as e:
            latte.open(name)
        assert str(e.value).startswith(name + ": ")
        fifo = region_name()
        names.append(fifo)
        os.mkfifo("/dev/shm" + fifo)
        with pytest.raises(latte.FormatError, match="not a latte region"):
            latte.open(fifo)
        # A region that shrinks under the reader: the next read raises
        # (the reader's pages are gone), never SIGBUS.
        name = region_name()
        names.append(name)
        shutil.copyfile(burst["image"], "/dev/shm" + name)
        with latte.open(name) as r:
            assert len(r.samples()) == burst["written"]
            os.truncate("/dev/shm" + name, 4096)
            with pytest.raises(latte.FormatError, match="truncated"):
                r.samples()
            with pytest.raises(latte.FormatError, match="truncated"):
                r.ids
        with pytest.raises(latte.FormatError, match="truncated"):
            latte.open(name)
    finally:
        for n in names:
            unlink_region(n)


def test_many_readers_at_once(burst):
    """A process holds any number of readers (the library's table of
    protected mappings grows): 200 opens of one image all succeed and read
    alike, and closing them lets as many open again."""
    opened = []
    try:
        for _ in range(200):
            opened.append(latte.open(burst["image"]))
        assert all(len(r.samples()) == burst["written"] for r in opened[::50])
        for r in opened:
            r.close()
        opened = [latte.open(burst["image"]) for _ in range(200)]
    finally:
        for r in opened:
            r.close()
