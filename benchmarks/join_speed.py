"""Joins against hand-written pandas: time and peak memory of fuzzpy's join kernels, through a
checked program run by the interpreter, over the same loaded frames as a pandas `merge` (plus,
for the private-private join, the same truncation written with pandas).

    python benchmarks/join_speed.py [--rows 1000000] [--keys 3000] [--k 20] [--repeat 3]

Two programs, on a synthetic flights-like table of `--rows` private rows keyed by `--keys` tail
numbers and a public table of planes (one row per tail number):

* join_public: `count (join_public "tail" "tail" f p)`, against `len(f.merge(p, on="tail"))`;
* join_private: both sides truncated to k rows per key, then joined, against a pandas
  truncation (a random priority per row, the k smallest per key by a groupby rank) and a merge.

Prints, for each, fuzzpy's and pandas' best time and peak memory (tracemalloc: numpy and pandas
buffers included) and the ratios fuzzpy / pandas; the goal is at most 1.5 for both.  The goal's
size is 10M rows (`--rows 10000000`, several GB of memory); the default is smaller.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCHEMAS = """schema F { tail : string, delay : num[0, 100] }
public schema P { tail : string unique, seats : int[0, 500] }
schema Q { tail : string, seats : int[0, 500] }
"""
PUBLIC = 'function main (f : bag F) (p : bag P) : fuzzy num { laplace 1 (count (join_public "tail" "tail" f p)) }'
PRIVATE = ('function main (f : bag F) (q : bag Q) : fuzzy num { laplace 1 (count (join_private "tail" "tail" '
           '(truncate K "tail" f) (truncate 1 "tail" q))) }')


def tables(rows: int, keys: int, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    names = pd.array([f"N{i:05d}" for i in range(keys)], dtype="string")
    f = pd.DataFrame({"tail": names.take(rng.integers(0, keys, rows)), "delay": rng.uniform(0, 100, rows)})
    p = pd.DataFrame({"tail": names, "seats": rng.integers(2, 500, keys)})
    return f, p


def measured(fn: Callable[[], Any], repeat: int) -> tuple[float, int, Any]:
    """Best wall time over `repeat` runs, and the peak traced memory of one run."""
    best, out = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak, out


def fuzzpy_run(source: str, frames: dict[str, pd.DataFrame]) -> Callable[[], Any]:
    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    report = check_source(SCHEMAS + source, "join_speed.fz")
    assert report.ok, [d.message for d in report.diagnostics]
    return lambda: run_program(report.entry_instance, dict(frames), RandomSource.seeded(1)).value


def pandas_truncate(frame: pd.DataFrame, k: int, rng: np.random.Generator) -> pd.DataFrame:
    """At most k rows per tail, chosen by a random priority: what a careful analyst writes."""
    priority = pd.Series(rng.random(len(frame)), index=frame.index)
    rank = priority.groupby(frame["tail"]).rank(method="first")
    return frame[(rank <= k).to_numpy()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=3_000)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    f, p = tables(args.rows, args.keys)
    q = p.sample(frac=1.0, replace=True, random_state=2).reset_index(drop=True)  # planes, some repeated
    cases = {
        "join_public": (fuzzpy_run(PUBLIC, {"f": f, "p": p}), lambda: len(f.merge(p, on="tail"))),
        "join_private": (fuzzpy_run(PRIVATE.replace("K", str(args.k)), {"f": f, "q": q}),
                         lambda: len(pandas_truncate(f, args.k, np.random.default_rng(3)).merge(
                             pandas_truncate(q, 1, np.random.default_rng(4)), on="tail"))),
    }
    print(f"{args.rows:,} private rows, {args.keys:,} keys, k = {args.k}; best of {args.repeat}")
    worst = 0.0
    for name, (ours, theirs) in cases.items():
        t_ours, m_ours, v_ours = measured(ours, args.repeat)
        t_pd, m_pd, v_pd = measured(theirs, args.repeat)
        ratios = (t_ours / t_pd, m_ours / m_pd)
        worst = max(worst, *ratios)
        print(f"{name:13s} fuzzpy {t_ours:7.3f} s {m_ours / 2**20:8.1f} MiB | pandas {t_pd:7.3f} s "
              f"{m_pd / 2**20:8.1f} MiB | ratio time {ratios[0]:.2f}, memory {ratios[1]:.2f} "
              f"(rows joined: {v_pd:,}, released count {float(v_ours):,.0f})")
    print(f"worst ratio {worst:.2f} (goal <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
