"""Latency percentiles of a latte region, plotted with matplotlib.

    python docs/python_percentiles.py TARGET [OUT.png]

TARGET is a region name (`/name`, a program that runs or ran) or the path
of a flushed image. Prints each ID's percentiles in ns and draws them, one
line per ID, into OUT.png (percentiles.png by default). Needs the `latte`
package (`pip install ./python`), numpy and matplotlib.
"""
import sys

import matplotlib

matplotlib.use("Agg")  # no display: draw into a file
import matplotlib.pyplot as plt
import numpy as np

import latte

target = sys.argv[1]
out = sys.argv[2] if len(sys.argv) > 2 else "percentiles.png"

# %% Load every sample of the region: one numpy array per field.
with latte.open(target) as region:
    samples = region.samples()
    names = region.ids  # {token: name}
print(f"{target}: {samples.read:,} samples read, {samples.lost:,} lost (overwritten before this read)")

# %% Percentiles per ID, on an axis of nines (p50, p90, p99, p99.9, ...).
qs = np.array([50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100])
x = -np.log10(1 - np.minimum(qs, 99.999) / 100)
print(f"{'ID':<24}{'samples':>10}" + "".join(f"{'p' + format(q, 'g') if q < 100 else 'max':>10}" for q in qs))
fig, ax = plt.subplots(figsize=(9, 5))
for token, name in sorted(names.items(), key=lambda kv: kv[1]):
    d = samples.duration_ns[samples.id == token]
    if len(d) == 0:
        continue
    p = np.percentile(d, qs, method="inverted_cdf")  # nearest rank, as `latte stats`
    print(f"{name:<24}{len(d):>10,}" + "".join(f"{v:10.1f}" for v in p))
    ax.plot(x, p, marker="o", label=f"{name} ({len(d):,})")

# %% Draw.
ax.set_xticks(x, [f"p{q:g}" if q < 100 else "max" for q in qs])
ax.set_yscale("log")
ax.set_ylabel("duration (ns)")
ax.set_title(f"latency percentiles: {target}")
ax.grid(True, which="both", alpha=0.3)
ax.legend(loc="upper left", fontsize="small")
fig.tight_layout()
fig.savefig(out, dpi=100)
print(f"wrote {out}")
