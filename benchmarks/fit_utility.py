"""The private fits of stdlib/ml.fz against the non-private ones on the UCI Adult data.

    python benchmarks/fit_utility.py --data PATH/adult.data [--test PATH/adult.test]
        [--eps 0.5] [--iters 9,40] [--step 1,8] [--seeds 5]

Model: income > 50K (logistic) or its 0/1 indicator (linear, least squares) on an intercept,
age, years of education and hours per week, each scaled to [-1, 1] as in
examples/cookbook/regression.fz (`--fourth sex`: being male, 0 or 1, instead of the hours).  The non-private references are numpy's: least squares, and
logistic regression by Newton's method (IRLS).  Every private fit is the fuzzpy program run
through the interpreter (checked first: its epsilon must be the one asked for) with seeds
0, 1, ...; seeded noise is for measurement only.  Printed per (iters, step): the mean private
coefficients, how many seeds give every coefficient the sign of the non-private fit, and the
logistic model's accuracy on --test (the training data if none is given).

A seed-free, noise-free descent (`--noise-free`) separates non-convergence from noise: if the
noise-free coefficients are far from the reference, more iterations or a larger step are needed,
not more epsilon.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
           "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country",
           "income"]
SCHEMA = ('schema Adult { age : num[17, 90], education_num : num[1, 16], hours_per_week : num[1, 99], '
          'sex : cat{"Female", "Male"}, income : cat{"<=50K", ">50K"} }\n')
LABEL = '(fun r -> if r.income == ">50K" then 1 else 0)'
# The fourth feature: hours per week scaled to [-1, 1] (the cookbook's), or being male as 0/1
# (the model of the issue that found the non-convergence).
FOURTH = {"hours": ("2 * (r.hours_per_week - 1) / 98 - 1", lambda df: 2 * (df.hours_per_week - 1) / 98 - 1),
          "sex": ('if r.sex == "Male" then 1 else 0', lambda df: (df.sex == "Male").astype(float))}


def load_adult(path: Path) -> pd.DataFrame:
    """The UCI file (no header, ', ' separators, test labels ending in '.'), or a CSV file with
    the same columns and a header (examples/data/adult_sample.csv), as a clean frame."""
    if path.suffix == ".csv":
        df = pd.read_csv(path)
    else:
        df = pd.read_csv(path, header=None, names=COLUMNS, skipinitialspace=True, comment="|")
    df = df.dropna(subset=["income"])
    df["income"] = df["income"].str.rstrip(".")
    return df[["age", "education_num", "hours_per_week", "sex", "income"]].reset_index(drop=True)


def features(fourth: str) -> str:
    return ("(fun r -> vec (1, 2 * (r.age - 17) / 73 - 1, 2 * (r.education_num - 1) / 15 - 1, "
            + FOURTH[fourth][0] + "))")


def design(df: pd.DataFrame, fourth: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.c_[np.ones(len(df)), 2 * (df.age - 17) / 73 - 1, 2 * (df.education_num - 1) / 15 - 1,
              FOURTH[fourth][1](df)]
    return x, (df.income == ">50K").to_numpy(dtype=float)


def least_squares(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(x, y, rcond=None)[0]


def logistic_newton(x: np.ndarray, y: np.ndarray, steps: int = 25) -> np.ndarray:
    """Non-private logistic regression by Newton's method (iteratively reweighted least squares)."""
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-x @ w))
        hessian = x.T @ (x * (p * (1 - p))[:, None])
        w = w + np.linalg.solve(hessian, x.T @ (y - p))
    return w


def sklearn_logistic(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """scikit-learn's non-private logistic regression (no penalty; x carries its own intercept
    column), or None when scikit-learn is not installed (it is not a dependency of fuzzpy)."""
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        return None
    model = LogisticRegression(C=np.inf, fit_intercept=False, max_iter=1000).fit(x, y)
    return model.coef_[0]


def noise_free_descent(x: np.ndarray, y: np.ndarray, iters: int, step: float, c: float, logistic: bool) -> np.ndarray:
    """fit_vec's descent without noise: per-row gradients clipped to L2 norm c, mean, step."""
    w = np.zeros(x.shape[1])
    for _ in range(iters):
        z = x @ w
        e = (1 / (1 + np.exp(-z)) if logistic else z) - y
        g = e[:, None] * x
        norms = np.maximum(np.linalg.norm(g, axis=1) / c, 1)
        w = w - step * (g / norms[:, None]).sum(axis=0) / len(y)
    return w


def accuracy(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(((x @ w > 0) == (y == 1)).mean())


def brier(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """The mean squared error of the predicted probability (logistic_fit_checked's loss, noise-free)."""
    return float(((1 / (1 + np.exp(-x @ w)) - y) ** 2).mean())


def private_fits(fit: str, df: pd.DataFrame, eps: str, iters: int, step: str, seeds: int,
                 fourth: str) -> list[np.ndarray]:
    """The fuzzpy program `fit eps iters 1 step features label 0 db`, checked then run per seed."""
    from fractions import Fraction

    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    src = (SCHEMA + 'import "stdlib/ml.fz"\n'
           + f"function main (db : bag Adult) : fuzzy vec[4] {{ {fit} ({eps}) {iters} 1 ({step}) {features(fourth)} {LABEL} "
           + "(vec (0, 0, 0, 0)) db }\n")
    report = check_source(src, str(ROOT / "fit.fz"))
    assert report.ok, [d.message for d in report.diagnostics]
    assert report.epsilon == Fraction(eps), report.epsilon
    db = df.copy()
    return [np.array([float(v) for v in run_program(report.entry_instance, {"db": db}, RandomSource.seeded(s)).value])
            for s in range(seeds)]


def ssp_fits(df: pd.DataFrame, eps: str, seeds: int) -> list[np.ndarray]:
    """linear_fit_ssp on education scaled to [-1, 1] against the 0/1 label, checked then run per seed."""
    from fractions import Fraction

    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    src = (SCHEMA + 'import "stdlib/ml.fz"\n'
           + f"function main (db : bag Adult) : fuzzy (num, num) {{ linear_fit_ssp ({eps}) "
           + f"(fun r -> 2 * (r.education_num - 1) / 15 - 1) {LABEL} db }}\n")
    report = check_source(src, str(ROOT / "ssp.fz"))
    assert report.ok and report.epsilon == Fraction(eps), [d.message for d in report.diagnostics]
    return [np.array([float(v) for v in run_program(report.entry_instance, {"db": df.copy()},
                                                     RandomSource.seeded(s)).value]) for s in range(seeds)]


def show(w: np.ndarray) -> str:
    return "(" + ", ".join(f"{v:+.3f}" for v in w) + ")"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="adult.data")
    ap.add_argument("--test", type=Path, help="adult.test (accuracy is measured on it)")
    ap.add_argument("--eps", default="0.5")
    ap.add_argument("--iters", default="9,40")
    ap.add_argument("--step", default="1,8")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--fourth", choices=sorted(FOURTH), default="hours", help="the fourth feature")
    ap.add_argument("--noise-free", action="store_true", help="also print the noise-free descent")
    args = ap.parse_args(argv)

    train = load_adult(args.data)
    x, y = design(train, args.fourth)
    xt, yt = design(load_adult(args.test), args.fourth) if args.test else (x, y)
    ref = {"logistic_fit": logistic_newton(x, y), "linear_fit": least_squares(x, y)}
    print(f"Adult: {len(train)} training rows; accuracy on {'the test file' if args.test else 'the training rows'}"
          f" ({len(yt)} rows); coefficients (intercept, age, education, {args.fourth})")
    print(f"non-private logistic (Newton) {show(ref['logistic_fit'])}  accuracy {accuracy(ref['logistic_fit'], xt, yt):.4f}"
          f"  Brier {brier(ref['logistic_fit'], x, y):.4f} (constant model {y.mean() * (1 - y.mean()):.4f}, w = 0 0.25)")
    print(f"non-private linear (least squares) {show(ref['linear_fit'])}")
    print(f"majority class accuracy {max(yt.mean(), 1 - yt.mean()):.4f}")
    for iters in (int(v) for v in args.iters.split(",")):
        for step in args.step.split(","):
            for fit in ("logistic_fit", "linear_fit"):
                logistic = fit == "logistic_fit"
                if args.noise_free:
                    w = noise_free_descent(x, y, iters, float(step), 1.0, logistic)
                    print(f"{fit} iters {iters} step {step} noise-free {show(w)}"
                          + (f"  accuracy {accuracy(w, xt, yt):.4f}" if logistic else ""))
                ws = private_fits(fit, train, args.eps, iters, step, args.seeds, args.fourth)
                signs = sum(bool(np.all(np.sign(w) == np.sign(ref[fit]))) for w in ws)
                line = (f"{fit} eps {args.eps} iters {iters} step {step}: mean {show(np.mean(ws, axis=0))}"
                        f"  right signs {signs}/{len(ws)}")
                if logistic:
                    accs = [accuracy(w, xt, yt) for w in ws]
                    line += (f"  accuracy mean {statistics.mean(accs):.4f} min {min(accs):.4f}"
                             f"  Brier mean {statistics.mean(brier(w, x, y) for w in ws):.4f}")
                print(line, flush=True)
    ref1 = least_squares(x[:, [0, 2]], y)
    ws = ssp_fits(train, args.eps, args.seeds)
    print(f"least squares on education alone {show(ref1)}; linear_fit_ssp eps {args.eps}: mean {show(np.mean(ws, axis=0))}"
          f"  largest deviation {np.abs(np.array(ws) - ref1).max():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
