"""One epoch of minibatch DP-SGD over Adult: fuzzpy's program against a hand-written numpy
implementation of the same algorithm, in the same process.

    python benchmarks/dpsgd_speed.py --data PATH/adult.data [--q 0.01] [--repeat 3]

The algorithm (examples/dpsgd_logistic.fz): logistic regression on an intercept and three
features scaled to [-1, 1]; each of the 1/q steps keeps every row with probability q (one coin
per row from the OS generator), clips each kept row's gradient to L2 norm 1, sums them, adds
Gaussian noise of standard deviation 2 per coordinate and moves the weights by rate / (q n)
times the noisy sum.  fuzzpy's epoch is the checked program run by the interpreter with the run's
source of a real run, the OS generator (`--seeded` for a seeded source, whose Mersenne Twister
coins are slower than os.urandom's); its noise is the exact discrete Gaussian.  numpy's draws its
coins from os.urandom and its noise from numpy's normal sampler.  Neither side's timing includes
its input: the table, conformed to its schema as a run loads it (fuzzpy), and the feature matrix
(numpy) are made before the clock starts.  Printed: the seconds of each and the ratio (goal: at most
3)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fit_utility import load_adult  # noqa: E402

PROGRAM = """schema Adult { age : num[17, 90], education_num : num[1, 16], hours_per_week : num[1, 99],
  sex : cat{"Female", "Male"}, income : cat{"<=50K", ">50K"} }
import "stdlib/ml.fz"
param q : num = 0.01;
param T : int = 100;
param n : num = 32561;
function features (r : Adult) : vec[4] {
  vec (1, 2 * (r.age - 17) / 73 - 1, 2 * (r.education_num - 1) / 15 - 1, 2 * (r.hours_per_week - 1) / 98 - 1)
}
function label (r : Adult) : num { if r.income == ">50K" then 1 else 0 }
function gradient (w : vec[4]) (r : Adult) : vec[4] { let x = features r; vscale (sigmoid (vdot w x) - label r) x }
function descend (db : bag Adult) (w : vec[4]) (t : int) : fuzzy vec[4] {
  if t <= 0 then return w
  else
    sample g = subsample q (fun s -> gaussian 0.125 (vsum 1 (fun r -> gradient w r) s)) db;
    descend db (vsub w (vscale (2 / (q * n)) g)) (t - 1)
}
function main (db : bag Adult) : fuzzy vec[4] { descend db (vec (0, 0, 0, 0)) T }
"""


def numpy_epoch(x: np.ndarray, y: np.ndarray, q: float, steps: int, rng: np.random.Generator) -> np.ndarray:
    n, d = x.shape
    w = np.zeros(d)
    threshold = np.uint64(int(q * 2**64))
    for _ in range(steps):
        keep = np.frombuffer(os.urandom(8 * n), dtype="<u8") < threshold
        xs, ys = x[keep], y[keep]
        g = (1 / (1 + np.exp(-xs @ w)) - ys)[:, None] * xs
        norms = np.maximum(np.linalg.norm(g, axis=1) / 1.0, 1.0)
        total = (g / norms[:, None]).sum(axis=0) + rng.normal(0, 2.0, d)
        w = w - 2 / (q * n) * total
    return w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="adult.data")
    ap.add_argument("--q", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seeded", action="store_true", help="run fuzzpy with a seeded source (tests and demos only)")
    args = ap.parse_args()
    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.data import load_frame
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    df = load_adult(args.data)
    steps = round(1 / args.q)
    report = check_source(PROGRAM, str(ROOT / "dpsgd.fz"), params={"q": str(args.q), "T": str(steps),
                                                                      "n": str(len(df))})
    assert report.ok, [d.message for d in report.diagnostics]
    # the table as a run loads it (declared categories as pandas Categoricals), not as read_csv
    table_of_run = load_frame(df, report.schemas["Adult"])
    x = np.c_[np.ones(len(df)), 2 * (df.age - 17) / 73 - 1, 2 * (df.education_num - 1) / 15 - 1,
              2 * (df.hours_per_week - 1) / 98 - 1]
    y = (df.income == ">50K").to_numpy(dtype=float)
    gen = np.random.default_rng(0)
    ours, theirs = [], []
    for seed in range(args.repeat):
        table, source = table_of_run.copy(), RandomSource.seeded(seed) if args.seeded else RandomSource()
        t = time.perf_counter()
        run_program(report.entry_instance, {"db": table}, source)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        numpy_epoch(x, y, args.q, steps, gen)
        theirs.append(time.perf_counter() - t)
    a, b = min(ours), min(theirs)
    source = "a seeded source" if args.seeded else "the OS generator"
    print(f"one epoch ({steps} steps of rate {args.q}, {len(df)} rows, fuzzpy with {source}): fuzzpy {a:.3f} s, numpy {b:.3f} s, "
          f"x{a / b:.2f}")


if __name__ == "__main__":
    main()
