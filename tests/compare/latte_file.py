"""Writes and reads latte's file formats from Python, independently of the
Rust code, for the tests of `latte record`, `diff` and `plot`: a recording
(a flushed image followed by a trailer, docs/recording.md) written from
lists of samples, and a region or image read back slot by slot."""
import json, math, mmap, os, random, struct

HEADER_SIZE, SLOT_HEADER_SIZE, SAMPLE_SIZE = 1024, 128, 16
LAYOUT_VERSION = 5
FLUSHED, CLOSED = 2, 2
MAX_DURATION = (1 << 48) - 1
SWITCHED = 1 << 58
SLOT_PAGE_OFFSET = 2112
PAGE = 4096
CHUNKS = 32
FIRST_NAME_BYTES = 65536
FIRST_SLOTS = 16
# Offsets in latte_region_header (src/layout.rs, layout 4).
H_VERSION, H_FIRST_SLOTS, H_SLOT_STRIDE, H_TOTAL, H_PID, H_ANCHOR = 8, 24, 40, 48, 56, 64
H_IDS_USED, H_THREADS, H_CPN, H_SLOT_CHUNKS, H_NAME_CHUNKS = 80, 88, 96, 256, 512


def page_round(n):
    return (n + PAGE - 1) & ~(PAGE - 1)


def stride_of(samples_per_slot):
    """src/layout.rs Geometry::new: bytes from one slot to the next."""
    ring = SLOT_HEADER_SIZE + samples_per_slot * SAMPLE_SIZE
    pad = (SLOT_PAGE_OFFSET + PAGE - ring % PAGE) % PAGE if ring >= PAGE else 0
    return ring + pad


def slot_place(i, first_slots):
    """(chunk, index in it) of slot i (Geometry::slot_place)."""
    k = (i // first_slots + 1).bit_length() - 1
    return k, i - first_slots * ((1 << k) - 1)


def write_recording(path, ids, cycles_per_ns=3.0, samples_per_slot=16384):
    """ids: {name: [(start_tsc, duration, switched), ...]} -> a recording
    with one incarnation per ID (thread i for the i-th ID)."""
    names = list(ids)
    chunks = []  # (incarnation number, token, samples)
    for tok, name in enumerate(names):
        s = ids[name]
        for k in range(0, len(s), samples_per_slot):
            chunks.append((tok + 1, tok, s[k:k + samples_per_slot]))
    stride = stride_of(samples_per_slot)
    end, slot_chunks = PAGE, []
    while sum(FIRST_SLOTS << k for k in range(len(slot_chunks))) < max(len(chunks), 1):
        slot_chunks.append(end)
        end += page_round((FIRST_SLOTS << (len(slot_chunks) - 1)) * stride)
    names_at = end
    total = end + FIRST_NAME_BYTES
    buf = bytearray(total)
    h = struct.pack_into
    buf[0:8] = b"LATTEREG"
    h("<IIIIIIII", buf, H_VERSION, LAYOUT_VERSION, HEADER_SIZE, SLOT_HEADER_SIZE, SAMPLE_SIZE, FIRST_SLOTS, samples_per_slot, FIRST_NAME_BYTES, 0)
    h("<QQ", buf, H_SLOT_STRIDE, stride, total)
    h("<II", buf, H_PID, 4242, FLUSHED)
    h("<QQ", buf, H_ANCHOR, 1000, 1_700_000_000_000_000_000)
    h("<II", buf, H_IDS_USED, len(names), len(chunks))
    h("<Q", buf, H_THREADS, len(names))
    h("<d", buf, H_CPN, cycles_per_ns)
    for k, off in enumerate(slot_chunks):
        h("<Q", buf, H_SLOT_CHUNKS + 8 * k, off)
    h("<Q", buf, H_NAME_CHUNKS, names_at)
    pos = names_at
    for name in names:
        raw = name.encode()
        h("<I", buf, pos, len(raw) + 1)
        buf[pos + 4:pos + 4 + len(raw)] = raw
        pos += (4 + len(raw) + 3) & ~3
    for i, (gen, tok, s) in enumerate(chunks):
        k, j = slot_place(i, FIRST_SLOTS)
        o = slot_chunks[k] + j * stride
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
        assert m[0:8] == b"LATTEREG" and struct.unpack_from("<I", m, H_VERSION)[0] == LAYOUT_VERSION
        first, cap = struct.unpack_from("<II", m, H_FIRST_SLOTS)
        stride, = struct.unpack_from("<Q", m, H_SLOT_STRIDE)
        ids_used, slots_used = struct.unpack_from("<II", m, H_IDS_USED)
        slot_chunks = struct.unpack_from("<%dQ" % CHUNKS, m, H_SLOT_CHUNKS)
        name_chunks = struct.unpack_from("<%dQ" % CHUNKS, m, H_NAME_CHUNKS)
        names, k, pos = [], 0, 0
        while len(names) < ids_used:
            base, size = name_chunks[k], FIRST_NAME_BYTES << k
            word = struct.unpack_from("<I", m, base + pos)[0] if pos + 4 <= size else 0
            if word == 0:
                k, pos = k + 1, 0
                continue
            names.append(m[base + pos + 4:base + pos + 4 + word - 1].decode())
            pos += (4 + word - 1 + 3) & ~3
        out = []
        for i in range(slots_used):
            ck, j = slot_place(i, first)
            o = slot_chunks[ck] + j * stride
            w, = struct.unpack_from("<Q", m, o)
            gen, tok, tidx = struct.unpack_from("<III", m, o + 64)
            if gen == 0:
                continue
            samples = []
            for x in range(max(0, w - cap), w):
                samples.append(struct.unpack_from("<QQ", m, o + SLOT_HEADER_SIZE + (x & (cap - 1)) * SAMPLE_SIZE))
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
