"""Generate points.csv: 2-D points in three clusters, for examples/kmeans.fz.

    python examples/data/make_points.py [OUT]      # default: points.csv next to this script

Synthetic data (no real person is in it): 3,000 points, 1,000 around each of the centres
(2, 2), (7, 3) and (4, 8), with independent normal noise of standard deviation 0.8 on each
coordinate, clamped to [0, 10] (the bounds the example's schema declares) and rounded to
3 decimals.  numpy's PCG64 generator with seed 20240601 makes the file byte-for-byte
reproducible.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

CENTRES = [(2.0, 2.0), (7.0, 3.0), (4.0, 8.0)]
PER_CLUSTER = 1000
SD = 0.8
SEED = 20240601


def points() -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(SEED))
    blocks = [rng.normal(loc=c, scale=SD, size=(PER_CLUSTER, 2)) for c in CENTRES]
    pts = np.clip(np.concatenate(blocks), 0.0, 10.0)
    return pts[rng.permutation(len(pts))]  # shuffled: the file's order says nothing about clusters


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else Path(__file__).with_name("points.csv")
    lines = ["x,y"] + [f"{x:.3f},{y:.3f}" for x, y in points()]
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
