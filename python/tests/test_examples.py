"""The examples people copy: the Python block of docs/reader.md and
docs/python_percentiles.py, run against a region the producer recorded."""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_docs_example_plots_percentiles(burst, tmp_path):
    png = tmp_path / "p.png"
    for target in (burst["name"], burst["image"]):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "python_percentiles.py"), target, str(png)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert f"{burst['written']:,} samples read, 0 lost" in r.stdout
        assert re.search(r"^py\.b\.inner\s+3,000\s", r.stdout, re.M), r.stdout
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        png.unlink()


def test_guide_python_block(burst, tmp_path):
    readme = open(os.path.join(ROOT, "docs", "reader.md")).read()
    blocks = re.findall(r"<!-- python-test: \S+ -->\n```python\n(.*?)```\n", readme, re.S)
    assert len(blocks) == 1
    body = blocks[0].replace('"/my-service"', repr(burst["name"])).replace('"request"', '"py.b"')
    assert repr(burst["name"]) in body and '"py.b"' in body
    r = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "3000 samples of py.b, 0 lost" in r.stdout, r.stdout
