"""Interpreter speed against hand-written pandas + numpy, on UCI Adult replicated to 10M rows.

    python benchmarks/run_speed.py [--rows 10000000] [--repeat 5] [--data path/to/adult.data]

Three queries run through the fuzzpy interpreter (checked program, `run_program`) and as the
pandas one would write by hand, both releasing with the same exact Laplace sampler, in one
process.  Prints the best-of-N time (interleaved runs) and the peak traced memory (tracemalloc: numpy buffers) of
each, and the ratio fuzzpy / hand-written (target: at most 1.5).  Checking and loading are not
timed (both sides share the loaded table); the check time is printed once for reference.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.noise import laplace_release
from fuzzpy.runtime.samplers import RandomSource

ADULT = Path("/work/shared/data/adult/adult.data")
RACES = ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black")
EPS = Fraction(1, 10)


def _cats(words: str) -> str:
    return "cat{" + ", ".join(f'"{w}"' for w in words.split()) + "}"


SCHEMA = f"""schema Adult {{
  age : int[17, 90], workclass : string, fnlwgt : num[0, 1500000],
  education : {_cats("Bachelors Some-college 11th HS-grad Prof-school Assoc-acdm Assoc-voc 9th 7th-8th 12th "
                     "Masters 1st-4th 10th Doctorate 5th-6th Preschool")},
  education_num : int[1, 16],
  marital_status : {_cats("Married-civ-spouse Divorced Never-married Separated Widowed Married-spouse-absent "
                          "Married-AF-spouse")},
  occupation : string, relationship : {_cats("Wife Own-child Husband Not-in-family Other-relative Unmarried")},
  race : {_cats(" ".join(RACES))}, sex : cat{{"Female", "Male"}},
  capital_gain : num[0, 100000], capital_loss : num[0, 5000], hours_per_week : int[1, 99],
  native_country : string, income : cat{{"<=50K", ">50K"}}
}}
param eps : num = 0.1;
"""

QUERIES = {
    "filtered count": ("fuzzy num", "laplace eps (count (filter (fun r -> r.age >= 40) db))"),
    "clipped sum": ("fuzzy num", "laplace eps (sum (map (fun r -> clip 0 5000 r.capital_gain) db))"),
    "group-by histogram": (f"fuzzy (parts {{{', '.join(repr(r).replace(chr(39), chr(34)) for r in RACES)}}} num)",
                           "each (fun g -> laplace eps (count g)) (groupby (fun r -> r.race) db)"),
}


# ---- the hand-written baselines: what one would write with pandas, plus the same sampler -------

def hand_count(df: pd.DataFrame, rng: RandomSource) -> float:
    return laplace_release(int((df["age"] >= 40).sum()), Fraction(1), EPS, rng).value


def hand_sum(df: pd.DataFrame, rng: RandomSource) -> float:
    total = float(df["capital_gain"].clip(0, 5000).sum())
    return laplace_release(total, Fraction(5000), EPS, rng).value


def hand_histogram(df: pd.DataFrame, rng: RandomSource) -> dict:
    counts = df["race"].value_counts().reindex(list(RACES), fill_value=0)
    return {k: laplace_release(int(c), Fraction(1), EPS, rng).value for k, c in counts.items()}


HAND = {"filtered count": hand_count, "clipped sum": hand_sum, "group-by histogram": hand_histogram}


# ---- measuring -----------------------------------------------------------------------------------

def replicate(path: Path, rows: int) -> tuple[pd.DataFrame, Any]:
    report = check_source(SCHEMA + "function main (db : bag Adult) : fuzzy num { laplace eps (count db) }", "b.fz")
    base = load_table(path, report.schemas["Adult"], table="db")
    big = base.take(np.arange(rows) % len(base)).reset_index(drop=True)  # one gather, no Python loop
    return big, report.schemas["Adult"]


def check_query(name: str):
    ret, body = QUERIES[name]
    t0 = time.perf_counter()
    report = check_source(SCHEMA + f"function main (db : bag Adult) : {ret} {{ {body} }}", "bench.fz")
    assert report.ok, [d.message for d in report.diagnostics]
    return report.entry_instance, time.perf_counter() - t0


def timed_pair(a: Callable[[], Any], b: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best-of-`repeat` times of a and b, interleaved so that background load hits both alike."""
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
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--data", type=Path, default=ADULT)
    args = parser.parse_args()
    t0 = time.perf_counter()
    df, _ = replicate(args.data, args.rows)
    print(f"Adult replicated to {len(df):,} rows in {time.perf_counter() - t0:.1f} s "
          f"({df.memory_usage(deep=False).sum() / 2**20:,.0f} MiB of columns)")
    rng = RandomSource()
    print(f"{'query':20} {'fuzzpy':>10} {'by hand':>10} {'time x':>7} {'fuzzpy MiB':>11} {'hand MiB':>9} {'mem x':>6}"
          f"  check")
    for name in QUERIES:
        instance, check_s = check_query(name)
        fuzz = lambda: run_program(instance, {"db": df}, rng)  # noqa: E731
        hand = lambda: HAND[name](df, rng)  # noqa: E731
        fuzz(), hand()  # warm up (imports, caches)
        tf, th = timed_pair(fuzz, hand, args.repeat)
        mf, mh = peak_bytes(fuzz), peak_bytes(hand)
        print(f"{name:20} {tf * 1000:8.1f}ms {th * 1000:8.1f}ms {tf / th:7.2f} {mf / 2**20:11.1f} {mh / 2**20:9.1f} "
              f"{mf / max(mh, 1):6.2f}  {check_s * 1000:.1f}ms")


if __name__ == "__main__":
    main()
