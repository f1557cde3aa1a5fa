#!/usr/bin/env python3
"""The structure check of `make lint`, beside tests/module_graph.py (which
checks src/'s module map):

1. cli/: every top-level file (or folder) of cli/src imports only those
   listed above it in docs/design.md's table of cli/ files, so the
   command's files form no circle.
2. No function outside tests and benchmarks is longer than MAX_FN_LINES,
   in src/ and cli/src/, except those in LONG_FNS (each named with why it
   is one piece); a new one fails, and so does an entry that no longer
   applies.
3. No file of src/ or cli/src/ is longer than MAX_FILE_LINES (its test
   module left out), except those in LONG_FILES, each with its one job.
4. The files of one folder (siblings: `super::name`, grouped imports,
   `crate::<folder>::name`, an item of a sibling's re-exported by mod.rs;
   a folder's mod.rs is its root, which its files build on) form no
   circle, except those in CIRCLES, each with why.

What it reads is paths in the code: a circle made only of method calls
between `impl` blocks of one type in several files is not seen (the
files of `src/reader/` say in their mod.rs which calls which)."""
import os, re, sys

from rust_source import block_end, paths_after, strip_comments, without_tests

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MAX_FN_LINES = 80
MAX_FILE_LINES = 500

# Functions longer than MAX_FN_LINES, each one step of a protocol that
# reads best whole (or a split not yet made: said so).
LONG_FNS = {}
# Files longer than MAX_FILE_LINES, each with its one job.
LONG_FILES = {
    "src/layout.rs": "the shared-memory layout: every type and constant latte.h carries, and nothing else",
}

# Circles between sibling files, each with why.
CIRCLES = {
    ("src/recorder", frozenset({"fork", "registry"})): "the registry installs the fork handlers, which are its lock's other holder (src/recorder/mod.rs)",
}

failed = 0


def fail(msg):
    global failed
    failed += 1
    print("structure: " + msg)


def rust_files(top):
    for dp, _, fs in os.walk(os.path.join(root, top)):
        for f in sorted(fs):
            if f.endswith(".rs"):
                yield os.path.relpath(os.path.join(dp, f), root)


# --- 1. cli/ files in layers -------------------------------------------
doc = open(os.path.join(root, "docs/design.md")).read()
order = []
for m in re.finditer(r"(?m)^\|\s*`cli/src/([a-z_]+)(?:\.rs|/)`\s*\|", doc):
    order.append(m.group(1))
if "main" not in order or "cmd" not in order:
    fail("docs/design.md has no table of cli/ files (with main.rs and cmd/)")
cli_mods = sorted(
    set(f[:-3] for f in os.listdir(os.path.join(root, "cli/src")) if f.endswith(".rs"))
    | set(d for d in os.listdir(os.path.join(root, "cli/src")) if os.path.isdir(os.path.join(root, "cli/src", d)))
)
for mod in cli_mods:
    if mod not in order:
        fail(f"cli/src/{mod} is not in docs/design.md's table of cli/ files")
rank = {m: i for i, m in enumerate(order)}
for f in rust_files("cli/src"):
    parts = f.split("/")[2:]
    mod = parts[0][:-3] if parts[0].endswith(".rs") else parts[0]
    if mod not in rank:
        continue
    used = set(p[0] for p in paths_after("crate::", strip_comments(open(os.path.join(root, f)).read())) if p)
    if mod == "main":
        continue
    for u in used:
        if u in rank and u != mod and rank[u] > rank[mod]:
            fail(f"{f} uses crate::{u}, which docs/design.md lists below {mod}")

# --- 2. function length ------------------------------------------------
def functions(path):
    src = without_tests(open(os.path.join(root, path)).read())
    fn_re = r'(?m)^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:default\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+"[^"]*"\s+)?fn\s+([A-Za-z0-9_]+)'
    for m in re.finditer(fn_re, src):
        j = src.find("{", m.end())
        semi = src.find(";", m.end())
        if j < 0 or 0 <= semi < j:
            continue
        k = block_end(src, j)
        yield m.group(1), src.count("\n", m.start(), k) + 1


long_seen = set()
for top in ("src", "cli/src"):
    for f in rust_files(top):
        for name, n in functions(f):
            if n > MAX_FN_LINES:
                key = f"{f}:{name}"
                long_seen.add(key)
                if key not in LONG_FNS:
                    fail(f"{key} is {n} lines (at most {MAX_FN_LINES}): split it, or add it to LONG_FNS with why")
for key in LONG_FNS:
    if key not in long_seen:
        fail(f"LONG_FNS names {key}, which is not over {MAX_FN_LINES} lines (any more): take it out")

# --- 3. file length ----------------------------------------------------
for top in ("src", "cli/src"):
    for f in rust_files(top):
        n = without_tests(open(os.path.join(root, f)).read()).count("\n")
        if n > MAX_FILE_LINES and f not in LONG_FILES:
            fail(f"{f} is {n} lines without its tests (at most {MAX_FILE_LINES}): split it by job, or add it to LONG_FILES with its one job")
        if n <= MAX_FILE_LINES and f in LONG_FILES:
            fail(f"LONG_FILES names {f}, which is {n} lines: take it out")

for f in LONG_FILES:
    if not os.path.exists(os.path.join(root, f)):
        fail(f"LONG_FILES names {f}, which does not exist: take it out")

# --- 4. circles between the files of one folder ------------------------
def sibling_edges(folder):
    """Which sibling files each file of `folder` names: `super::x` (grouped
    imports too), `crate::<folder>::x` for a folder of src/ or cli/src/, and
    an item of a sibling's reached through mod.rs (`pub use x::*`)."""
    files = [f[:-3] for f in os.listdir(os.path.join(root, folder)) if f.endswith(".rs") and f != "mod.rs"]
    # The top-level items each sibling defines, for names re-exported by mod.rs.
    owner = {}
    for f in files:
        text = strip_comments(without_tests(open(os.path.join(root, folder, f + ".rs")).read()))
        for name in re.findall(r"(?m)^(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(?:const\s+|static\s+|fn\s+|struct\s+|enum\s+|type\s+|trait\s+|macro_rules!\s*)(?:mut\s+)?(\w+)", text):
            owner.setdefault(name, f)
    rel = folder.split("/", 1)[1] if folder.startswith("src/") else folder.split("/", 2)[2] if folder.startswith("cli/src/") else None
    crate_prefix = "crate::" + rel.replace("/", "::") + "::" if rel else None
    edges = {}
    for f in files:
        text = strip_comments(without_tests(open(os.path.join(root, folder, f + ".rs")).read()))
        found = paths_after("super::", text)
        if crate_prefix:
            found += paths_after(crate_prefix, text)
        names = set()
        for p in found:
            if not p:
                continue
            if p[0] in files:
                names.add(p[0])
            elif p[0] in owner:
                names.add(owner[p[0]])
        edges[f] = set(n for n in names if n != f)
    return edges


def circles(edges):
    """The strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


folders = sorted(set(os.path.relpath(dp, root) for top in ("src", "cli/src") for dp, _, fs in os.walk(os.path.join(root, top)) if "mod.rs" in fs))
known = set()
for folder in folders:
    for c in circles(sibling_edges(folder)):
        if (folder, c) in CIRCLES:
            known.add((folder, c))
        else:
            fail(f"{folder}: the files {', '.join(sorted(c))} call one another in a circle")
for key in CIRCLES:
    if key not in known:
        fail(f"CIRCLES names {key[0]}: {', '.join(sorted(key[1]))}, which is not a circle (any more): take it out")

print(f"structure: {len(LONG_FNS)} long functions and {len(LONG_FILES)} long files named with why; {'ok' if failed == 0 else f'{failed} problem(s)'}")
sys.exit(1 if failed else 0)
