#!/usr/bin/env python3
"""`latte diff`, `latte plot` and `latte record` end to end.

usage: run.py LATTE PRODUCER

diff: on synthetic recordings (tests/compare/latte_file.py writes them, a
writer of the format independent of the Rust code): a known 5 % shift of
the median over 10,000 samples is `slower` (exit 8) one way and `faster`
(exit 0) the other; 200 seeded pairs drawn from one distribution are
called slower or faster in at most 7 % of them; IDs on one side only;
too few samples; --clean; sides at different TSC frequencies compared in
time; --json valid.

plot: the SVG rendered to PNG by rsvg-convert: one curve per run by colour,
the slower run's curve above the faster at p99, no two texts overlapping
(each text rendered alone, their pixel boxes disjoint); PNG output decodes.

record: against tests/compare/producer.cpp writing a known number of spans
(more than a ring): read + lost == written per ID, the file holds exactly
what it says it read, the last ring's samples are in the file as they were
in the region, and `latte stats` on the file and on the live region agree
for an ID both hold whole."""
import collections, json, math, os, pty, re, select, shutil, struct, subprocess, sys, tempfile, time, zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from latte_file import lognormal, read_slots, trailer, write_recording  # noqa: E402

LATTE, PRODUCER = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="latte-compare-")
failures = passes = 0


def check(cond, what):
    global failures, passes
    print(("ok   " if cond else "FAIL ") + what)
    if cond:
        passes += 1
    else:
        failures += 1


def latte(*args):
    return subprocess.run([LATTE, *args], capture_output=True, text=True, timeout=60)


def path(name):
    return os.path.join(TMP, name)


def diff_json(a, b, *extra):
    r = latte("diff", a, b, "--json", *extra)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = None
    return r, doc


def by_id(doc):
    return {i["id"]: i for i in doc["ids"]}


# ---------------------------------------------------------------- diff ----
def test_shift():
    t0 = time.time()
    base = lognormal(10_000, 1)
    write_recording(path("base.rec"), {"svc.x": base})
    # The same draws 5 % longer (rounded up): the median moves by 5 % exactly.
    write_recording(path("slow.rec"), {"svc.x": [(s, -(-d * 105 // 100), w) for s, d, w in base]})
    r, doc = diff_json(path("base.rec"), path("slow.rec"))
    check(doc is not None, "diff --json prints valid JSON")
    x = by_id(doc)["svc.x"]
    check(x["verdict"] == "slower" and r.returncode == 8, f"5 % longer median: slower, exit 8 (got {x['verdict']}, {r.returncode})")
    check(0.05 <= x["change"]["p50"] < 0.0515, f"median change 5 % ({x['change']['p50']:.4f})")
    lo, hi = x["median_change_ci"]
    check(lo < 0.05 < hi and lo > 0, f"the median's interval holds 5 % and not 0 ([{lo:.4f}, {hi:.4f}])")
    check(x["p_value"] < 1e-6, f"U test p-value tiny ({x['p_value']:.2e})")
    check(x["a"]["count"] == 10_000 and x["b"]["count"] == 10_000, "counts of each side")
    # The same draws 5 % shorter (rounded down): faster, exit 0.
    write_recording(path("fast.rec"), {"svc.x": [(s, d * 95 // 100, w) for s, d, w in base]})
    r, doc = diff_json(path("base.rec"), path("fast.rec"))
    x = by_id(doc)["svc.x"]
    check(x["verdict"] == "faster" and r.returncode == 0, f"5 % shorter median: faster, exit 0 (got {x['verdict']}, {r.returncode})")
    # An independent draw of one distribution: no change, exit 0.
    write_recording(path("same.rec"), {"svc.x": lognormal(10_000, 2)})
    r, doc = diff_json(path("base.rec"), path("same.rec"))
    check(by_id(doc)["svc.x"]["verdict"] == "no change" and r.returncode == 0, f"same distribution: no change, exit 0 (got {r.returncode})")
    # A shift under the threshold is significant but not a verdict.
    write_recording(path("slow2.rec"), {"svc.x": [(s, -(-d * 102 // 100), w) for s, d, w in base]})
    r, doc = diff_json(path("base.rec"), path("slow2.rec"))
    x = by_id(doc)["svc.x"]
    check(x["verdict"] == "no change" and x["p_value"] < 0.05 and r.returncode == 0, "2 % shift under the 5 % threshold: no change, exit 0")
    r, doc = diff_json(path("base.rec"), path("slow2.rec"), "--threshold", "1%")
    check(by_id(doc)["svc.x"]["verdict"] == "slower" and r.returncode == 8, "the same with --threshold 1%: slower, exit 8")
    # The table.
    r = latte("diff", path("base.rec"), path("slow.rec"))
    check(r.returncode == 8 and "svc.x" in r.stdout and "slower" in r.stdout and "bootstrap" in r.stdout and "seed 1" in r.stdout,
          "the table names the ID, the verdict and the bootstrap's seed")
    print(f"     ({time.time() - t0:.1f} s)")


def test_false_positives():
    t0 = time.time()
    pairs, called, below = 200, 0, 0
    called_default = 0
    for k in range(pairs):
        a, b = path(f"fp-a-{k}.rec"), path(f"fp-b-{k}.rec")
        write_recording(a, {"fp": lognormal(2_000, 10_000 + 2 * k)})
        write_recording(b, {"fp": lognormal(2_000, 10_001 + 2 * k)})
        # Threshold 0: the verdict rests on the U test alone.
        r, doc = diff_json(a, b, "--threshold", "0", "--replicates", "100")
        x = by_id(doc)["fp"]
        called += x["verdict"] in ("slower", "faster")
        # What the default threshold of 5 % would have said.
        called_default += x["verdict"] in ("slower", "faster") and abs(x["change"]["p50"]) >= 0.05
        below += x["p_value"] < 0.5
        os.remove(a)
        os.remove(b)
    check(called <= 0.07 * pairs, f"200 same-distribution pairs at threshold 0: slower or faster in {called} ({100 * called / pairs:.1f} %, at most 7 %)")
    check(called_default <= called, f"at the default threshold: {called_default}")
    # p-values of one distribution are uniform: about half fall below 0.5.
    check(0.35 * pairs <= below <= 0.65 * pairs, f"p-values below 0.5 in {below} of {pairs} pairs")
    print(f"     ({time.time() - t0:.1f} s)")


def test_sides_and_options():
    a = {"both": lognormal(1_000, 20), "only.a": lognormal(500, 21), "few": lognormal(5, 22),
         "sw": lognormal(5_000, 23)}
    b = {"both": lognormal(1_000, 24), "only.b": lognormal(500, 25), "few": lognormal(5, 26),
         # A quarter of the samples switched out and three times longer.
         "sw": lognormal(5_000, 27, switched_share=0.25, switched_factor=3.0)}
    write_recording(path("sa.rec"), a)
    write_recording(path("sb.rec"), b)
    r, doc = diff_json(path("sa.rec"), path("sb.rec"))
    v = {k: x["verdict"] for k, x in by_id(doc).items()}
    check(v.get("only.a") == "only in A" and v.get("only.b") == "only in B", f"IDs on one side: only in A / only in B ({v})")
    check(v.get("few") == "too few samples", "5 samples a side: too few samples")
    check(by_id(doc)["only.a"]["b"]["count"] == 0 and by_id(doc)["only.b"]["a"]["count"] == 0, "the missing side counts 0")
    check(v.get("sw") == "slower", "switched samples counted: slower")
    r2, doc2 = diff_json(path("sa.rec"), path("sb.rec"), "--clean")
    sw = by_id(doc2)["sw"]
    check(sw["verdict"] == "no change" and sw["b"]["count"] < 4_000 and doc2["clean"], f"--clean leaves them out: no change ({sw['verdict']}, {sw['b']['count']})")
    # The same times at another TSC frequency: compared in ns, no change.
    base = lognormal(10_000, 30)
    write_recording(path("f3.rec"), {"t": base}, cycles_per_ns=3.0)
    write_recording(path("f2.rec"), {"t": [(s, round(d * 2 / 3), w) for s, d, w in base]}, cycles_per_ns=2.0)
    r, doc = diff_json(path("f3.rec"), path("f2.rec"))
    t = by_id(doc)["t"]
    check(doc["compared_in"] == "time" and t["verdict"] == "no change" and abs(t["change"]["p50"]) < 0.002,
          f"3.0 vs 2.0 cycles/ns: compared in time, no change ({t['verdict']}, {t['change']['p50']:+.4f})")
    for key in ("a", "b", "alpha", "threshold", "bootstrap", "ids", "slower", "faster"):
        check(key in doc, f"--json has {key}")
    r = latte("diff", path("sa.rec"), path("nope.rec"))
    check(r.returncode == 3 and "no such file" in r.stderr, "a missing side: exit 3 and says so")


# ---------------------------------------------------------------- plot ----
PALETTE = [(0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28), (0x2c, 0xa0, 0x2c), (0xff, 0x7f, 0x0e), (0x94, 0x67, 0xbd), (0x8c, 0x56, 0x4b)]


def read_png(p):
    """(width, height, rows) of an 8-bit RGB or RGBA PNG; a row is the
    bytes r, g, b of each pixel."""
    data = open(p, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if bpp == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3))
        prev = line
    return w, h, rows


def near(px, c, tol=40):
    return sum(abs(px[k] - c[k]) for k in range(3)) <= tol


def pixels(row, x0=0, x1=None):
    """The (r, g, b) of a row's pixels x0..x1."""
    part = row[3 * x0:None if x1 is None else 3 * x1]
    return zip(part[0::3], part[1::3], part[2::3])


def colour_count(rows, colour, x0=0, x1=None, tol=40):
    """Pixels of `rows` (columns x0..x1) within `tol` of `colour`."""
    seen = collections.Counter()
    for row in rows:
        seen.update(pixels(row, x0, x1))
    return sum(n for px, n in seen.items() if near(px, colour, tol))


def text_boxes(text):
    """(texts, how many were found drawn, pairs of texts whose boxes meet) of an SVG."""
    # Every text alone on white, each in a colour of its own, rendered once.
    # An anti-aliased pixel of colour c is 255 - a (255 - c): its distance
    # from white points the way c's does, so each inked pixel goes to the
    # text whose direction it matches; the pixel boxes must not meet.
    assert text.count("<svg") == 1
    head = re.match(r"(.*?<svg[^>]*>)", text, re.S).group(1)
    texts = re.findall(r"<text[^>]*>.*?</text>", text, re.S)
    dirs = []
    for d in ((r, g, b) for r in range(4) for g in range(4) for b in range(4)):
        if any(d) and math.gcd(math.gcd(d[0], d[1]), d[2]) == 1:
            dirs.append(d)
    colours = [tuple(255 - 255 * x // max(d) for x in d) for d in dirs][: len(texts)]
    unit = [tuple(x / math.sqrt(sum(y * y for y in d)) for x in d) for d in dirs]
    layer = head + '<rect x="0" y="0" width="100%" height="100%" fill="#FFFFFF"/>'
    for t, c in zip(texts, colours):
        layer += re.sub(r'fill="[^"]*"', 'fill="#%02x%02x%02x"' % c, t, count=1)
    with open(path("texts.svg"), "w") as f:
        f.write(layer + "</svg>")
    subprocess.run(["rsvg-convert", path("texts.svg"), "-o", path("texts.png")], check=True, timeout=30)
    _, _, rows = read_png(path("texts.png"))
    boxes = {}
    for y, row in enumerate(rows):
        for x in sorted(set(m.start() // 3 for m in re.finditer(rb"[^\xff]", row))):
            p = row[3 * x:3 * x + 3]
            v = (255 - p[0], 255 - p[1], 255 - p[2])
            n = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
            if n < 120:
                continue
            best = max(range(len(colours)), key=lambda k: sum(v[i] * unit[k][i] for i in range(3)))
            if sum(v[i] * unit[best][i] for i in range(3)) / n < 0.99:
                continue
            b = boxes.setdefault(best, [x, y, x, y])
            b[0], b[1], b[2], b[3] = min(b[0], x), min(b[1], y), max(b[2], x), max(b[3], y)
    names = [re.sub("<[^>]*>", "", t).strip() for t in texts]
    ks = sorted(boxes)
    overlaps = [(names[i], names[j]) for n, i in enumerate(ks) for j in ks[n + 1:]
                if boxes[i][0] <= boxes[j][2] and boxes[j][0] <= boxes[i][2] and boxes[i][1] <= boxes[j][3] and boxes[j][1] <= boxes[i][3]]
    return texts, len(boxes), overlaps


def test_plot():
    t0 = time.time()
    write_recording(path("p-fast.rec"), {"svc.p": lognormal(20_000, 40)})
    write_recording(path("p-slow.rec"), {"svc.p": lognormal(20_000, 41, scale=1.25, switched_share=0.01, switched_factor=2.0)})
    svg, png = path("plot.svg"), path("plot.png")
    r = latte("plot", path("p-fast.rec"), path("p-slow.rec"), "-o", svg)
    check(r.returncode == 0 and os.path.getsize(svg) > 1000, f"plot writes the SVG ({r.stderr.strip()})")
    subprocess.run(["rsvg-convert", svg, "-o", png], check=True, timeout=60)
    w, h, rows = read_png(png)
    check(w == 1280 and h == 420, f"rendered {w}x{h}")
    counts = [colour_count(rows, c, 0, w // 2) for c in PALETTE]  # the left panel
    curves = [k for k, n in enumerate(counts) if n > 200]
    check(curves == [0, 1], f"two curves by colour, the first two of the palette (pixels per colour {counts})")
    # x of p99: the axis label "99" (text-anchor middle) of the spectrum.
    text = open(svg).read()
    labels = re.findall(r'<text x="([0-9.]+)" y="([0-9.]+)"[^>]*>\s*([^<]*?)\s*</text>', text)
    x99 = [float(x) for x, y, t in labels if t == "99" and float(x) < w // 2]
    check(len(x99) == 1, "one '99' label on the spectrum's axis")
    col = int(round(x99[0]))
    ys = {k: [y for y in range(h) if any(near(px, PALETTE[k]) for px in pixels(rows[y], col - 1, col + 2))] for k in (0, 1)}
    check(ys[0] and ys[1], "both curves cross the p99 column")
    if ys[0] and ys[1]:
        check(max(ys[1]) < min(ys[0]), f"the slower run's curve lies above the faster's at p99 (rows {min(ys[1])}-{max(ys[1])} over {min(ys[0])}-{max(ys[0])})")
    texts, found, overlaps = text_boxes(text)
    check(len(texts) >= 20 and found == len(texts), f"{len(texts)} texts, each drawn ({found} found)")
    check(not overlaps, f"no two texts overlap {overlaps[:5]}")
    # The check sees an overlap: the first caption again, 6 px lower.
    first = re.search(r'<text x="([0-9.]+)" y="([0-9.]+)"([^>]*>.*?</text>)', text, re.S)
    moved = '<text x="%s" y="%g"%s' % (first.group(1), float(first.group(2)) + 6, first.group(3))
    _, _, seen = text_boxes(text.replace("</svg>", moved + "</svg>"))
    check(len(seen) >= 1, f"a caption drawn twice 6 px apart is an overlap ({seen[:1]})")
    # The heat map's colour key, and its axis naming magenta only for a
    # run whose producer tracked switches.
    words = [re.sub(r"<[^>]*>", "", t).strip() for t in texts]
    check("samples" in words and "per cell" in words, f"the heat map has a colour key: {words}")
    st = latte("stats", path("p-fast.rec"), "--json")
    tracked = json.loads(st.stdout)["components"][0]["switched"] is not None
    want = "time since the first sample (magenta: switched out)" if tracked else "time since the first sample (switches not tracked)"
    check(want in words and sum("magenta" in t for t in words) == tracked, f"the heat map's axis says what was tracked ({tracked}): {words}")
    magenta = colour_count(rows, (0xe7, 0x29, 0x8a), w // 2)
    check(magenta == 0, "the heat map of the first run (no switched samples) marks none")
    r = latte("plot", path("p-fast.rec"), path("p-slow.rec"), "--heatmap-run", "2", "-o", svg)
    subprocess.run(["rsvg-convert", "--zoom", "0.5", svg, "-o", png], check=True, timeout=60)
    hw, _, rows = read_png(png)
    magenta = colour_count(rows, (0xe7, 0x29, 0x8a), hw // 2, None, 60)
    check(magenta > 20, f"--heatmap-run 2 marks the second run's switched samples ({magenta} px)")
    r = latte("plot", path("p-fast.rec"), path("p-slow.rec"), "-o", path("direct.png"))
    pw, ph, prow = read_png(path("direct.png"))
    pc = [colour_count(prow, c, 0, pw // 2) for c in PALETTE]
    check(r.returncode == 0 and (pw, ph) == (1280, 420) and pc[0] > 200 and pc[1] > 200, f"-o x.png writes a PNG with both curves ({pc[:2]})")
    r = latte("plot", path("p-fast.rec"), "-o", path("x.jpg"))
    check(r.returncode == 2 and ".svg or .png" in r.stderr, "another extension: usage error")
    print(f"     ({time.time() - t0:.1f} s)")


# -------------------------------------------------------------- record ----
def stop_producer(prod, region):
    """Kills the producer if it still runs and removes its region."""
    if prod.poll() is None:
        prod.kill()
    try:
        os.remove("/dev/shm" + region)
    except OSError:
        pass


def test_record():
    t0 = time.time()
    region = f"/latte-compare-{os.getpid()}"
    n_fast, n_slow = 1_000_000, 20_000
    prod = subprocess.Popen([PRODUCER, region, str(n_fast), str(n_slow)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rec_file = path("run.rec")
    try:
        check(prod.stdout.readline().strip() == "READY", "producer ready")
        rec = subprocess.Popen([LATTE, "record", region, "-o", rec_file, "--from-start"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        prod.stdin.write("go\n")
        prod.stdin.flush()
        done = prod.stdout.readline().strip()
        check(done == f"DONE fast={n_fast} slow={n_slow}", f"producer wrote {done}")
        live = latte("stats", region, "--json")
        live_slots = read_slots("/dev/shm" + region)
        prod.stdin.close()
        prod.wait(timeout=30)
        out, err = rec.communicate(timeout=30)
        # A live region (its producer gone, its rings still there) against the file.
        _, live_diff = diff_json(region, rec_file)
    finally:
        stop_producer(prod, region)
    slow = by_id(live_diff)["rec.slow"] if live_diff else None
    check(slow is not None and slow["a"]["count"] == n_slow and slow["b"]["count"] <= n_slow and slow["verdict"] == "no change",
          f"diff of the region and its recording: rec.slow the same ({slow and slow['verdict']})")
    check(rec.returncode == 0, f"record exits 0 when the producer exits ({err.strip()})")
    lines = {m.group(1): m for m in re.finditer(r"^id=(\S+) recorded=(\d+) read=(\d+) lost=(\d+)", out, re.M)}
    written = {"rec.fast": n_fast, "rec.slow": n_slow}
    slots = read_slots(rec_file)
    for name, n in written.items():
        m = lines.get(name)
        check(m is not None, f"record reports {name}")
        if not m:
            continue
        recorded, read, lost = int(m.group(2)), int(m.group(3)), int(m.group(4))
        held = sum(len(s) for i, _, _, s in slots if i == name)
        check(recorded == n and read + lost == n, f"{name}: recorded {recorded} == written {n} == read {read} + lost {lost}")
        check(held == n - lost, f"{name}: the file holds written - lost = {n - lost} samples ({held})")
    print(f"     rec.fast lost {lines['rec.fast'].group(4) if 'rec.fast' in lines else '?'} of {n_fast} (a loaded machine may lose some; counted)")
    t = trailer(rec_file)
    check(all(i["read"] + i["lost"] == i["recorded"] for i in t["incarnations"]), "trailer: read + lost == recorded per incarnation")
    # The last ring of rec.fast, as the region held it: in the file as it was
    # (the samples the recording did not lose).
    ring = [s for i, _, _, s in live_slots if i == "rec.fast"][0]
    in_file = set(tuple(x) for i, _, _, s in slots if i == "rec.fast" for x in s)
    missing = [x for x in ring if tuple(x) not in in_file]
    lost_fast = int(lines["rec.fast"].group(4)) if "rec.fast" in lines else 0
    check(len(ring) == 65536 and len(missing) <= lost_fast, f"the region's last {len(ring)} samples are in the file ({len(missing)} not, lost {lost_fast})")
    # stats on the file and on the live region: rec.slow is whole in both.
    f = latte("stats", rec_file, "--json")
    fj, lj = json.loads(f.stdout), json.loads(live.stdout)
    fs = {c["component"]: c for c in fj["components"]}
    ls = {c["component"]: c for c in lj["components"]}
    same = all(fs["rec.slow"][k] == ls["rec.slow"][k] for k in ("read", "samples", "p50", "p90", "p99", "p999", "max", "min", "avg", "outliers"))
    if lines.get("rec.slow") and int(lines["rec.slow"].group(4)) == 0:
        check(same, f"stats of rec.slow agree on the file and the live region ({fs['rec.slow']['p50']} / {ls['rec.slow']['p50']})")
    check(fj["cycles_per_ns"] == lj["cycles_per_ns"], "the file keeps the producer's frequency")
    check(fs["rec.fast"]["read"] == n_fast - lost_fast and fs["rec.fast"]["lost"] == lost_fast,
          f"stats on the file: rec.fast read {fs['rec.fast']['read']}, lost {fs['rec.fast']['lost']} (record's figures)")
    r, doc = diff_json(rec_file, rec_file)
    fast = by_id(doc)["rec.fast"] if doc else {}
    check(fast.get("a", {}).get("lost") == lost_fast == fast.get("b", {}).get("lost"), f"diff --json: each side's lost is the recording's ({fast.get('a', {}).get('lost')})")
    r = latte("diff", rec_file, rec_file, "--wide")
    row = [l for l in r.stdout.splitlines() if l.startswith("rec.fast")]
    check("LOST A/B" in r.stdout and row and f"{lost_fast}/{lost_fast}" in row[0], "diff's table says each side's lost")
    r = latte("diff", rec_file, region)
    check(r.returncode == 3, "diff of a region that is gone: exit 3")
    r = latte("record", rec_file, "-o", path("x.rec"))
    check(r.returncode == 2 and "live region" in r.stderr, "record of a file: usage error")
    # A trailer whose figures do not add up: refused by every reader of it.
    data = open(rec_file, "rb").read()
    n = struct.unpack("<Q", data[-16:-8])[0]
    doc = json.loads(data[-16 - n:-16])
    doc["incarnations"][0]["lost"] += 1
    j = json.dumps(doc).encode()
    with open(path("bad.rec"), "wb") as f:
        f.write(data[:-16 - n] + j + struct.pack("<Q", len(j)) + b"LATTEREC")
    for cmd in (["stats", path("bad.rec")], ["diff", path("bad.rec"), rec_file]):
        r = latte(*cmd)
        check(r.returncode == 4 and "recording trailer" in r.stderr, f"{cmd[0]} of a trailer whose read + lost is not recorded: exit 4 ({r.returncode}, {r.stderr.strip()})")
    print(f"     ({time.time() - t0:.1f} s)")


def test_record_options():
    """--id keeps one ID; --count stops once that many were read; --for
    stops after the duration while the producer lives."""
    t0 = time.time()
    region = f"/latte-compare-opt-{os.getpid()}"
    prod = subprocess.Popen([PRODUCER, region, "200000", "20000"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        check(prod.stdout.readline().strip() == "READY", "producer ready")
        only = subprocess.Popen([LATTE, "record", region, "-o", path("only.rec"), "--id", "rec.slow"], stdout=subprocess.PIPE, text=True)
        count = subprocess.Popen([LATTE, "record", region, "-o", path("count.rec"), "--count", "1000"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        prod.stdin.write("go\n")
        prod.stdin.flush()
        prod.stdout.readline()
        out, _ = count.communicate(timeout=30)
        check(count.returncode == 0 and 'ended="the count was reached"' in out, f"--count 1000 ends the recording ({out.strip().splitlines()[-1:]})")
        m = re.search(r"^total recorded=(\d+) read=(\d+)", out, re.M)
        check(m is not None and int(m.group(2)) >= 1000, "--count: at least that many read")
        # Standard error a terminal: the progress line.
        master, slave = pty.openpty()
        r = subprocess.run([LATTE, "record", region, "-o", path("for.rec"), "--for", "600ms"], stdout=subprocess.PIPE, stderr=slave, text=True, timeout=30)
        os.close(slave)
        shown = b""
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        os.close(master)
        check(r.returncode == 0 and 'ended="the duration elapsed"' in r.stdout, "--for 600ms ends the recording while the producer lives")
        check(b"\rlatte record: " in shown and b"samples read" in shown, f"a progress line on a terminal ({shown[:60]!r})")
        prod.stdin.close()
        prod.wait(timeout=30)
        out, _ = only.communicate(timeout=30)
    finally:
        stop_producer(prod, region)
    ids = {i for i, _, _, _ in read_slots(path("only.rec"))}
    check(ids == {"rec.slow"} and "id=rec.fast" not in out, f"--id rec.slow records that ID only ({ids})")
    check(re.search(r"^id=rec.slow recorded=20000 ", out, re.M) is not None, "--id: rec.slow's 20,000 spans accounted for")
    print(f"     ({time.time() - t0:.1f} s)")


def test_record_outputs():
    """record never writes into what it reads, nor where it cannot write
    a recording, nor into another record's file; a region whose producer
    has exited has nothing new to record."""
    t0 = time.time()
    region = f"/latte-compare-out-{os.getpid()}"
    prod = subprocess.Popen([PRODUCER, region, "1000", "1000"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        check(prod.stdout.readline().strip() == "READY", "producer ready")
        size = os.stat("/dev/shm" + region).st_size
        r = latte("record", region, "-o", "/dev/shm" + region, "--for", "100ms")
        check(r.returncode == 2 and "is the region being recorded" in r.stderr and os.stat("/dev/shm" + region).st_size == size,
              f"-o the region's own file: refused, the region untouched ({r.returncode}, {r.stderr.strip()})")
        other = f"/latte-compare-other-{os.getpid()}"
        prod2 = subprocess.Popen([PRODUCER, other, "10", "10"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        check(prod2.stdout.readline().strip() == "READY", "a second producer ready")
        size2 = os.stat("/dev/shm" + other).st_size
        r = latte("record", region, "-o", "/dev/shm" + other, "--for", "100ms")
        check(r.returncode == 2 and "is locked by another process" in r.stderr and os.stat("/dev/shm" + other).st_size == size2,
              f"-o another producer's live region: refused, untouched ({r.stderr.strip()})")
        stop_producer(prod2, other)
        r = latte("record", region, "-o", "-", "--for", "100ms")
        check(r.returncode == 2 and "standard output" in r.stderr and not os.path.exists("-"), f"-o -: refused ({r.stderr.strip()})")
        fifo = path("fifo")
        os.mkfifo(fifo)
        r = latte("record", region, "-o", fifo, "--for", "100ms")
        check(r.returncode == 2 and "not a regular file" in r.stderr, f"-o a FIFO: refused at once ({r.stderr.strip()})")
        first = subprocess.Popen([LATTE, "record", region, "-o", path("same.rec"), "--for", "2s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        r = latte("record", region, "-o", path("same.rec"), "--for", "100ms")
        check(r.returncode == 6 and "locked by another writer" in r.stderr, f"a second record into the same file: refused ({r.stderr.strip()})")
        first.communicate(timeout=30)
        check(first.returncode == 0 and latte("stats", path("same.rec")).returncode == 0, "the first record's file is whole")
        r = latte("record", region, "-o", path("nope.rec"), "--for", "100ms", "--id", "no.such.id")
        check(r.returncode == 0 and "--id no.such.id: nothing was recorded under it" in r.stderr, f"--id of no ID: said ({r.stderr.strip()})")
        prod.stdin.write("go\n")
        prod.stdin.flush()
        prod.stdout.readline()
        prod.stdin.close()
        prod.wait(timeout=30)
        r = latte("record", region, "-o", path("gone.rec"))
        check(r.returncode == 2 and "its producer has exited" in r.stderr and not os.path.exists(path("gone.rec")),
              f"a region whose producer exited: nothing to follow, no file ({r.stderr.strip()})")
        r = latte("record", region, "-o", path("gone.rec"), "--from-start")
        check(r.returncode == 0 and re.search(r"^id=rec.slow recorded=1000 read=1000 lost=0", r.stdout, re.M) is not None,
              "with --from-start: what its rings hold")
    finally:
        stop_producer(prod, region)
    print(f"     ({time.time() - t0:.1f} s)")


# The recordings are removed after a run that passed, kept (and named)
# after one that failed or broke off.
passed = False
try:
    for test in (test_shift, test_false_positives, test_sides_and_options, test_plot, test_record, test_record_options, test_record_outputs):
        print(f"== compare: {test.__name__}")
        test()
    passed = failures == 0
finally:
    if passed:
        shutil.rmtree(TMP, ignore_errors=True)
    else:
        print(f"compare: the run's files are kept in {TMP}")
print(f"compare: {passes} passed, {failures} failed")
sys.exit(1 if failures else 0)
