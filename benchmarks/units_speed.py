"""Privacy units against hand-written pandas doing the same work, on a synthetic flights table.

    python benchmarks/units_speed.py [--rows 10000000] [--units 100000] [--repeat 3]

A table of `rows` flights by `units` planes (each flight: a plane, one of 100 destinations, one of
3 origins), and three queries, each run through the fuzzpy interpreter (checked program,
`run_program`) and as one would write it with pandas (the release with the same exact sampler):

* bound rows: at most 5 flights per plane, counted (pandas: shuffle, `groupby(plane).head(5)`);
* bounded groups: at most 2 origins per plane and 5 flights per plane and origin, a histogram
  (pandas: shuffle, `drop_duplicates` + `groupby(plane).head(2)` on the (plane, origin) pairs,
  then `groupby([plane, origin]).head(5)`);
* select keys: the destinations whose noisy number of planes reaches the threshold, each plane
  counted in at most 3 destinations (pandas: the distinct (plane, dest) pairs shuffled,
  `groupby(plane).head(3)`, `value_counts`, a threshold on discrete Laplace counts).

The pandas versions shuffle with numpy's generator (they need not be secure); fuzzpy draws its
choices from the run's secure random source.  Prints the best-of-N time (interleaved runs), the
peak traced memory (tracemalloc) and the ratios fuzzpy / pandas (target: at most 1.5 for both).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import pandas as pd

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.kernels.units import reaches
from fuzzpy.runtime.noise import laplace_release
from fuzzpy.runtime.samplers import RandomSource

SCHEMA = ('schema Flight unit plane { plane : string, dest : string, origin : cat{"EWR", "JFK", "LGA"} }\n'
          "param eps : num = 1;\n")
QUERIES = {
    "bound rows": "laplace eps (count (bound_rows 5 t))",
    "bounded groups": "each (fun g -> laplace eps (count g)) (bound_groups 2 5 (fun r -> r.origin) t)",
    "select keys": "select_keys eps 0.000001 3 (fun r -> r.dest) t",
}
EPS = Fraction(1)


def flights(rows: int, units: int, seed: int = 0) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    plane = gen.zipf(1.3, rows) % units  # a few planes fly a lot
    return pd.DataFrame({
        "plane": pd.Categorical.from_codes(plane, [f"N{i}" for i in range(units)]).astype(str),
        "dest": pd.Categorical.from_codes(gen.integers(0, 100, rows), [f"D{i:02d}" for i in range(100)]).astype(str),
        "origin": pd.Categorical.from_codes(gen.integers(0, 3, rows), ["EWR", "JFK", "LGA"]),
    })


# ---- by hand --------------------------------------------------------------------------------------

def hand_bound_rows(df: pd.DataFrame, rng: RandomSource, gen: np.random.Generator) -> float:
    kept = df.iloc[gen.permutation(len(df))].groupby("plane", sort=False).head(5)
    return laplace_release(len(kept), Fraction(5), EPS, rng).value


def hand_bounded_groups(df: pd.DataFrame, rng: RandomSource, gen: np.random.Generator) -> dict:
    shuffled = df.iloc[gen.permutation(len(df))]
    pairs = shuffled[["plane", "origin"]].drop_duplicates().groupby("plane", sort=False).head(2)
    kept = shuffled.merge(pairs, on=["plane", "origin"]).groupby(["plane", "origin"], sort=False,
                                                                  observed=True).head(5)
    counts = kept["origin"].value_counts()
    return {k: laplace_release(int(counts.get(k, 0)), Fraction(1), EPS, rng).value for k in ("EWR", "JFK", "LGA")}


def hand_select_keys(df: pd.DataFrame, rng: RandomSource, gen: np.random.Generator, info: dict) -> list:
    pairs = df[["plane", "dest"]].drop_duplicates()
    pairs = pairs.iloc[gen.permutation(len(pairs))].groupby("plane", sort=False).head(3)
    counts = pairs["dest"].value_counts()
    scale, threshold = Fraction(info["scale"]), int(info["threshold"])
    return sorted(k for k, n in counts.items() if reaches(threshold - int(n), scale, rng))


# ---- measuring ------------------------------------------------------------------------------------

def checked(body: str):
    report = check_source(SCHEMA + "function main (t : bag Flight) { " + body + " }", "bench.fz")
    assert report.ok, [d.message for d in report.diagnostics]
    return report


def timed_pair(a: Callable[[], Any], b: Callable[[], Any], repeat: int) -> tuple[float, float]:
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, out in ((a, times[0]), (b, times[1])):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return min(times[0]), min(times[1])


def peak_bytes(fn: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--units", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    t0 = time.perf_counter()
    df = flights(args.rows, args.units)
    print(f"{len(df):,} flights of {df['plane'].nunique():,} planes in {time.perf_counter() - t0:.1f} s")
    rng, gen = RandomSource(), np.random.default_rng(1)
    print(f"{'query':16} {'fuzzpy':>10} {'pandas':>10} {'time x':>7} {'fuzzpy MiB':>11} {'pandas MiB':>11} {'mem x':>6}")
    for name, body in QUERIES.items():
        report = checked(body)
        info = next((m.extra | {"scale": m.scale} for m in report.mechanisms if m.name == "select_keys"), {})
        hand = {"bound rows": lambda: hand_bound_rows(df, rng, gen),
                "bounded groups": lambda: hand_bounded_groups(df, rng, gen),
                "select keys": lambda: hand_select_keys(df, rng, gen, info)}[name]
        fuzz = lambda: run_program(report.entry_instance, {"t": df}, rng)  # noqa: E731
        fuzz(), hand()  # warm up
        tf, th = timed_pair(fuzz, hand, args.repeat)
        mf, mh = peak_bytes(fuzz), peak_bytes(hand)
        print(f"{name:16} {tf * 1000:8.0f}ms {th * 1000:8.0f}ms {tf / th:7.2f} {mf / 2**20:11.1f} {mh / 2**20:11.1f} "
              f"{mf / max(mh, 1):6.2f}")


if __name__ == "__main__":
    main()
