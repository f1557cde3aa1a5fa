"""Writes and reads latte's file formats from Python, independently of the
Rust code, for the tests of `latte record`, `diff` and `plot`: a recording
(a flushed image followed by a trailer, docs/recording.md) written from
lists of samples, and a region or image read back slot by slot."""
import json, math, mmap, os, random, struct

HEADER_SIZE, SLOT_HEADER_SIZE, SAMPLE_SIZE, ID_NAME_SIZE = 512, 128, 16, 32
LAYOUT_VERSION = 3
FLUSHED, CLOSED = 2, 2
MAX_DURATION = (1 << 48) - 1
SWITCHED = 1 << 58
SLOT_PAGE_OFFSET = 2112


def geometry(id_capacity, slot_capacity, samples_per_slot):
    """src/layout.rs Geometry::new."""
    ids_end = HEADER_SIZE + id_capacity * ID_NAME_SIZE
    slots_offset = (ids_end + 4095) & ~4095
    ring = SLOT_HEADER_SIZE + samples_per_slot * SAMPLE_SIZE
    pad = (SLOT_PAGE_OFFSET + 4096 - ring % 4096) % 4096 if ring >= 4096 else 0
    stride = ring + pad
    return slots_offset, stride, slots_offset + stride * slot_capacity


def write_recording(path, ids, cycles_per_ns=3.0, samples_per_slot=16384):
    """ids: {name: [(start_tsc, duration, switched), ...]} -> a recording
    with one incarnation per ID (thread i for the i-th ID)."""
    names = list(ids)
    chunks = []  # (incarnation number, token, samples)
    for tok, name in enumerate(names):
        s = ids[name]
        for k in range(0, max(len(s), 1), samples_per_slot):
            if s[k:k + samples_per_slot]:
                chunks.append((tok + 1, tok, s[k:k + samples_per_slot]))
    id_capacity = 256
    slots_offset, stride, total = geometry(id_capacity, max(len(chunks), 1), samples_per_slot)
    buf = bytearray(total)
    h = struct.pack_into
    buf[0:8] = b"LATTEREG"
    h("<IIIIIIII", buf, 8, LAYOUT_VERSION, HEADER_SIZE, SLOT_HEADER_SIZE, SAMPLE_SIZE, id_capacity, ID_NAME_SIZE, max(len(chunks), 1), samples_per_slot)
    h("<QQQQ", buf, 40, HEADER_SIZE, slots_offset, stride, total)
    h("<II", buf, 72, 4242, FLUSHED)
    h("<QQ", buf, 80, 1000, 1_700_000_000_000_000_000)
    h("<II", buf, 96, len(names), len(chunks))
    h("<Q", buf, 104, len(names))
    h("<d", buf, 112, cycles_per_ns)
    for tok, name in enumerate(names):
        raw = name.encode()[:31]
        buf[HEADER_SIZE + tok * ID_NAME_SIZE:HEADER_SIZE + tok * ID_NAME_SIZE + len(raw)] = raw
    for k, (gen, tok, s) in enumerate(chunks):
        o = slots_offset + k * stride
        h("<QQ", buf, o, len(s), len(s))
        h("<IIIII", buf, o + 64, gen, tok, tok, 1000 + tok, CLOSED)
        words = []
        for start, d, sw in s:
            words += [start, min(d, MAX_DURATION) | (SWITCHED if sw else 0)]
        struct.pack_into("<%dQ" % len(words), buf, o + SLOT_HEADER_SIZE, *words)
    trailer = {"format": "latte-recording", "version": 1, "target": "synthetic", "from_start": True, "ids": [],
               "seconds": 1.0, "ended_because": "synthetic", "recorded": sum(len(v) for v in ids.values()),
               "read": sum(len(v) for v in ids.values()), "lost": 0,
               "incarnations": [{"id": n, "slot": t, "generation": t + 1, "thread_idx": t, "os_tid": 1000 + t, "start_idx": 0,
                                 "end_idx": len(ids[n]), "recorded": len(ids[n]), "read": len(ids[n]), "lost": 0,
                                 "closed": True, "tail_unknown": False} for t, n in enumerate(names)]}
    j = json.dumps(trailer).encode()
    with open(path, "wb") as f:
        f.write(buf)
        f.write(j + struct.pack("<Q", len(j)) + b"LATTEREC")


def lognormal(n, seed, median=1000.0, sigma=0.25, scale=1.0, switched_share=0.0, switched_factor=1.0):
    """n samples (start_tsc, duration, switched) of a log-normal duration,
    seeded; durations scaled by `scale` and rounded up."""
    r = random.Random(seed)
    out = []
    t = 10_000
    for _ in range(n):
        sw = r.random() < switched_share
        d = median * math.exp(sigma * r.gauss(0.0, 1.0)) * (switched_factor if sw else 1.0)
        out.append((t, math.ceil(d * scale), sw))
        t += 2000 + int(d)
    return out


def read_slots(path):
    """Every assigned slot of a region or image: [(id name, thread_idx,
    write_idx, [(start_tsc, packed), ...] oldest first)]. For a region
    whose producer no longer writes."""
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    try:
        assert m[0:8] == b"LATTEREG"
        id_cap, _, slot_cap, cap = struct.unpack_from("<IIII", m, 24)
        id_off, slots_off, stride, _ = struct.unpack_from("<QQQQ", m, 40)
        ids_used, slots_used = struct.unpack_from("<II", m, 96)
        names = [m[id_off + t * ID_NAME_SIZE:id_off + (t + 1) * ID_NAME_SIZE].split(b"\0")[0].decode() for t in range(ids_used)]
        out = []
        for i in range(slots_used):
            o = slots_off + i * stride
            w, = struct.unpack_from("<Q", m, o)
            gen, tok, tidx = struct.unpack_from("<III", m, o + 64)
            if gen == 0:
                continue
            samples = []
            for j in range(max(0, w - cap), w):
                samples.append(struct.unpack_from("<QQ", m, o + SLOT_HEADER_SIZE + (j & (cap - 1)) * SAMPLE_SIZE))
            out.append((names[tok], tidx, w, samples))
        return out
    finally:
        m.close()


def trailer(path):
    with open(path, "rb") as f:
        f.seek(-16, os.SEEK_END)
        n, magic = struct.unpack("<Q8s", f.read(16))
        assert magic == b"LATTEREC", magic
        f.seek(-16 - n, os.SEEK_END)
        return json.loads(f.read(n))
