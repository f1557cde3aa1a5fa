#!/usr/bin/env python3
"""make readme-test: the examples of the README, docs/api.md and docs/reader.md, as a reader would use them.
Installs the working tree into a temporary prefix, writes every code block
marked `<!-- readme-test: FILE -->` to FILE in a temporary directory, runs
every block marked `<!-- readme-test: run -->` there with `sh -e` (the
README's own command lines, with PATH and PKG_CONFIG_PATH pointing into
the prefix), and checks that the examples are complete (no `...`) and leave
no region behind in /dev/shm. Program output is kept in the log file, not
printed (the C++ report has colour escapes)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

make = os.environ.get("MAKE", "make")
# In reading order: the README (its example builds app), the API page (it
# builds quickstart), the reader page (its examples use quickstart).
readme = "".join(open(p).read() for p in ("README.md", "docs/api.md", "docs/reader.md"))
blocks = re.findall(r"<!-- readme-test: (\S+) -->\n```(\w+)\n(.*?)```\n", readme, re.S)
passed = failed = 0


def check(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"readme: FAILED: {what}\n{detail}", file=sys.stderr)


check(len([b for b in blocks if b[0] != "run"]) >= 3 and len([b for b in blocks if b[0] == "run"]) >= 3, f"the pages have marked examples and command blocks ({len(blocks)})")
for name, lang, body in blocks:
    if lang in ("c", "cpp"):
        check("..." not in body, f"{name} is a complete program (no '...')")
        check("latte_error_string" in body or lang == "cpp", f"{name} prints latte_error_string on failure")

demo = re.compile(r"^latte-(quickstart|reader-demo|demo|app)-")
before = {n for n in os.listdir("/dev/shm") if demo.match(n)}
tmp = tempfile.mkdtemp(prefix="latte-readme.")
try:
    prefix = os.path.join(tmp, "prefix")
    work = os.path.join(tmp, "work")
    os.mkdir(work)
    subprocess.run([make, "-s", "install", f"PREFIX={prefix}"], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ)
    env.update(PATH=f"{prefix}/bin:{env['PATH']}", PKG_CONFIG_PATH=f"{prefix}/lib/pkgconfig", NO_COLOR="1")
    env.pop("COLUMNS", None)
    log = open(os.path.join("build", "readme-test.log"), "w")
    for k, (name, lang, body) in enumerate(blocks):
        if name != "run":
            with open(os.path.join(work, name), "w") as f:
                f.write(body)
            continue
        r = subprocess.run(["sh", "-e", "-c", body], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        first = body.strip().splitlines()[0]
        log.write(f"$ {body}\n{r.stdout}{r.stderr}\n")
        check(r.returncode == 0, f"block {k} ({first}) exit {r.returncode}", r.stdout[-3000:] + r.stderr[-3000:])
        if r.returncode == 0:
            print(f"readme: ok: {first}")
    log.close()
    after = {n for n in os.listdir("/dev/shm") if demo.match(n)}
    check(after <= before, f"the examples leave no region in /dev/shm: {sorted(after - before)}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"readme: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
