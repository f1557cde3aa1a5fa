#!/usr/bin/env python3
"""Checks the module map of docs/design.md against the code: every module
of src/ is listed, its "imports" column is exactly the crate modules it
uses, and every import is of a lower layer (the graph has no cycle and no
module reaches up)."""
import os, re, sys

from rust_source import strip_comments

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
doc = open(os.path.join(root, "docs/design.md")).read()
section = doc.split("## Module map", 1)[1].split("\n## ", 1)[0]
rows = {}
for line in section.splitlines():
    m = re.match(r"\|\s*(\d+)\s*\|\s*`src/([a-z_]+)(?:\.rs|/)`\s*\|.*\|\s*([a-z_, ]*)\|\s*$", line)
    if m:
        rows[m.group(2)] = (int(m.group(1)), set(x.strip() for x in m.group(3).split(",") if x.strip()))

def sources(mod):
    p = os.path.join(root, "src", mod)
    if os.path.isdir(p):
        return [os.path.join(p, f) for f in sorted(os.listdir(p)) if f.endswith(".rs")]
    return [p + ".rs"]

mods = sorted(set(f[:-3] for f in os.listdir(os.path.join(root, "src")) if f.endswith(".rs") and f != "lib.rs")
              | set(d for d in os.listdir(os.path.join(root, "src")) if os.path.isdir(os.path.join(root, "src", d))))
failed = 0
def fail(msg):
    global failed
    failed += 1
    print("module graph: " + msg)

# Names the crate root re-exports (`pub use api::{Span, ...}`), and macros
# (`#[macro_export]` ones live at the crate root): each counts as a use of
# the module that defines it.
lib = strip_comments(open(os.path.join(root, "src/lib.rs")).read())
root_names = {}
for m in re.finditer(r"pub use ([a-z_]+)::(\{[^}]*\}|[A-Za-z_]+)\s*;", lib):
    for name in re.findall(r"[A-Za-z_]+", m.group(2)):
        root_names[name] = m.group(1)
for mod in mods:
    for f in sources(mod):
        for name in re.findall(r"#\[macro_export\]\s*macro_rules!\s*([a-z_]+)", open(f).read()):
            root_names[name] = mod

def uses(text, top_level):
    """The crate modules a file's code names."""
    text = strip_comments(text)
    found = set()
    prefixes = ["crate"] + (["super"] if top_level else [])
    for p in prefixes:
        for m in re.finditer(p + r"::(\{[^;]*?\}|[A-Za-z_]+!?)", text, re.S):
            item = m.group(1)
            names = re.findall(r"(?:^|[{,]\s*)([A-Za-z_]+)", item) if item.startswith("{") else [item.rstrip("!")]
            for n in names:
                found.add(root_names.get(n, n))
    return found

for mod in mods:
    if mod not in rows:
        fail(f"src/{mod} is not in the module map of docs/design.md")
        continue
    used = set()
    for f in sources(mod):
        # `super::` in a top-level module's own file names a crate module.
        top = os.path.dirname(f) == os.path.join(root, "src")
        used |= uses(open(f).read(), top)
    used = {u for u in used if u in mods and u != mod}
    layer, listed = rows[mod]
    if used != listed:
        fail(f"src/{mod}: imports {sorted(used)}, the map says {sorted(listed)}")
    for u in used:
        if u in rows and rows[u][0] >= layer:
            fail(f"src/{mod} (layer {layer}) imports {u} (layer {rows[u][0]}): not a lower layer")
for mod in rows:
    if mod not in mods:
        fail(f"the map lists src/{mod}, which does not exist")
print(f"module graph: {len(mods)} modules, {'0 failed' if not failed else str(failed) + ' failed'}")
sys.exit(1 if failed else 0)
