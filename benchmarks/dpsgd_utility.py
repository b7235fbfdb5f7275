"""Minibatch DP-SGD of stdlib/ml.fz (dpsgd_logistic, dpsgd_linear) against the non-private fits
on the UCI Adult data.

    python benchmarks/dpsgd_utility.py --data PATH/adult.data --test PATH/adult.test [--seeds 5]
        [--delta 1e-6] [--linear-rate 0.5]

Model: examples/dpsgd_logistic.fz (income > 50K on an intercept, age, years of education and
hours per week scaled to [-1, 1], and being married, +1/-1), checked with its imports and run by
the interpreter with seeds 1, 2, ... (seeded noise is for measurement only); dpsgd_linear is the
same program with the least-squares fit of the 0/1 label.  The non-private references are
numpy's: logistic regression by Newton's method and least squares (benchmarks/fit_utility.py).
Printed per fit: the epsilon at the delta, the mean coefficients, how many seeds give every
coefficient the non-private fit's sign, the released mean loss, and the logistic model's test
accuracy (each seed's, and the non-private model's)."""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fit_utility import COLUMNS, accuracy, least_squares, logistic_newton, show, sklearn_logistic  # noqa: E402

EXAMPLE = ROOT / "examples" / "dpsgd_logistic.fz"


def load(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, header=None, names=COLUMNS, skipinitialspace=True, comment="|")
    df = df.dropna(subset=["income"])
    df["income"] = df["income"].str.rstrip(".")
    return df.reset_index(drop=True)


def design(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    x = np.c_[np.ones(len(df)), 2 * (df.age - 17) / 73 - 1, 2 * (df.education_num - 1) / 15 - 1,
              2 * (df.hours_per_week - 1) / 98 - 1, np.where(df.marital_status == "Married-civ-spouse", 1.0, -1.0)]
    return x, (df.income == ">50K").to_numpy(dtype=float)


def program(linear_rate: str | None) -> str:
    """The example's text, or with dpsgd_linear at the given learning rate."""
    src = EXAMPLE.read_text()
    if linear_rate is None:
        return src
    return src.replace("dpsgd_logistic q rho_step T C rate", f"dpsgd_linear q rho_step T C ({linear_rate})")


def fits(src: str, df: pd.DataFrame, seeds: int, delta: Fraction):
    """(epsilon at delta, [(coefficients, released loss)] per seed) of the checked program."""
    from fuzzpy.checking.program import check_source
    from fuzzpy.pipeline.guarantee import guarantee
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    report = check_source(src, str(EXAMPLE))
    assert report.ok, [d.message for d in report.diagnostics]
    eps = guarantee(report, delta).epsilon
    out = []
    for seed in range(1, seeds + 1):
        w, loss = run_program(report.entry_instance, {"db": df.copy()}, RandomSource.seeded(seed)).value
        out.append((np.array([float(v) for v in w]), float(loss)))
    return eps, out


def summary(name: str, eps, runs, reference: np.ndarray, test) -> None:
    ws = np.array([w for w, _ in runs])
    signs = sum(bool(np.all(np.sign(w) == np.sign(reference))) for w in ws)
    line = (f"{name}: epsilon {float(eps):.4f}; mean {show(ws.mean(axis=0))}; right signs {signs} of {len(runs)}; "
            f"released loss {', '.join(f'{loss:.4f}' for _, loss in runs)}")
    if test is not None:
        line += "; test accuracy " + ", ".join(f"{100 * accuracy(w, *test):.2f}%" for w in ws)
    print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="adult.data")
    ap.add_argument("--test", type=Path, required=True, help="adult.test")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--delta", type=Fraction, default=Fraction(1, 10**6))
    ap.add_argument("--linear-rate", default="0.5")
    args = ap.parse_args()
    train, test = load(args.data), load(args.test)
    x, y = design(train)
    xt, yt = design(test)
    newton, lsq = logistic_newton(x, y), least_squares(x, y)
    print(f"non-private logistic (Newton): {show(newton)}; test accuracy {100 * accuracy(newton, xt, yt):.2f}%; "
          f"majority {100 * (yt == 0).mean():.2f}%")
    print(f"non-private least squares: {show(lsq)}")
    sk = sklearn_logistic(x, y)
    if sk is not None:
        print(f"non-private logistic (scikit-learn, no penalty): {show(sk)}; "
              f"test accuracy {100 * accuracy(sk, xt, yt):.2f}%")
    eps, runs = fits(program(None), train, args.seeds, args.delta)
    summary("dpsgd_logistic", eps, runs, newton, (xt, yt))
    eps, runs = fits(program(args.linear_rate), train, args.seeds, args.delta)
    summary(f"dpsgd_linear (rate {args.linear_rate})", eps, runs, lsq, None)


if __name__ == "__main__":
    main()
