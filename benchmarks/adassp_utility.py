"""linear_fit_adassp (AdaSSP, stdlib/ml.fz) against numpy's least squares on the UCI Adult data.

    python benchmarks/adassp_utility.py --data PATH/adult.data [--test PATH/adult.test]
        [--rho 0.0077,0.028,0.1] [--eps 0.5,1,2] [--seeds 10]

The program is examples/linear_regression_adassp.fz (the 0/1 income label on an intercept, age,
years of education and hours per week scaled to [-1, 1], and being married, +1/-1; features
clipped to norm 9/4, which no row reaches), checked with each --rho (its epsilon at delta 1e-6
is the checker's) and run through the interpreter with seeds 0, 1, ...; seeded noise is for
measurement only.  Printed per rho: the non-private least-squares coefficients, the mean
private ones, the largest deviation of a coefficient over the seeds, how many seeds give every
coefficient the sign of least squares, and the mean squared error on --test (the training rows
if none is given) against least squares'.  --eps runs the pure-epsilon fit,
linear_fit_adassp_pure, on the same program (Laplace noise; no delta).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "linear_regression_adassp.fz"
sys.path.insert(0, str(ROOT / "benchmarks"))

from fit_utility import show  # noqa: E402


def design(df) -> tuple[np.ndarray, np.ndarray]:
    married = np.where(df.marital_status.astype(str) == "Married-civ-spouse", 1.0, -1.0)
    x = np.c_[np.ones(len(df)), 2 * (df.age - 17) / 73 - 1, 2 * (df.education_num - 1) / 15 - 1,
              2 * (df.hours_per_week - 1) / 98 - 1, married]
    return x, (df.income.astype(str) == ">50K").to_numpy(dtype=float)


def uci_test_as_csv(path: Path) -> Path:
    """adult.test without its first line and the '.' ending its labels, as a CSV with a header."""
    import tempfile

    import pandas as pd

    columns = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
               "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country",
               "income"]
    df = pd.read_csv(path, header=None, names=columns, skipinitialspace=True, comment="|").dropna(subset=["income"])
    df["income"] = df["income"].str.rstrip(".")
    out = Path(tempfile.mkdtemp()) / "adult_test.csv"
    df.to_csv(out, index=False)
    return out


def epsilon_at(rho: str, delta: str = "1e-6") -> str:
    out = subprocess.run([sys.executable, "-m", "fuzzpy", "check", str(EXAMPLE), "--delta", delta,
                          "--param", f"rho={rho}"], capture_output=True, text=True, check=True).stdout
    return out.split("epsilon = ")[1].split(",")[0]


def private_fits(db, rho: str, seeds: int, pure: bool = False) -> list[np.ndarray]:
    """The example with rho (or, pure, linear_fit_adassp_pure with epsilon `rho`), run per seed."""
    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    src = EXAMPLE.read_text()
    if pure:
        src = src.replace("linear_fit_adassp rho B", f"linear_fit_adassp_pure ({rho}) B")
    report = check_source(src, str(EXAMPLE), params={"rho": rho})
    assert report.ok, [d.message for d in report.diagnostics]
    assert (report.epsilon, report.is_pure) == (Fraction(rho), True) if pure else report.rho == Fraction(rho)
    return [np.array([float(v) for v in run_program(report.entry_instance, {"db": db.copy()},
                                                     RandomSource.seeded(s)).value]) for s in range(seeds)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="adult.data (or a CSV with a header)")
    ap.add_argument("--test", type=Path, help="adult.test (the mean squared error is measured on it)")
    ap.add_argument("--rho", default="0.0077,0.028,0.1")
    ap.add_argument("--eps", default="0.5,1,2", help="epsilons of the pure fit (empty: none)")
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args(argv)

    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.data import load_table

    schema = check_source(EXAMPLE.read_text(), str(EXAMPLE)).schemas["Adult"]
    train = load_table(args.data, schema, header=args.data.suffix == ".csv")
    test = load_table(uci_test_as_csv(args.test), schema, header=True) if args.test else train
    x, y = design(train)
    xt, yt = design(test)
    exact = np.linalg.lstsq(x, y, rcond=None)[0]
    mse = float(((xt @ exact - yt) ** 2).mean())
    print(f"Adult: {len(train)} training rows, {len(test)} rows for the error; coefficients (intercept, age, "
          f"education, hours, married)")
    print(f"least squares {show(exact)}  mean squared error {mse:.4f} (constant model {yt.var():.4f})")
    runs = [(rho, False) for rho in args.rho.split(",") if rho] + [(eps, True) for eps in args.eps.split(",") if eps]
    for value, pure in runs:
        ws = private_fits(train, value, args.seeds, pure)
        errors = [float(((xt @ w - yt) ** 2).mean()) for w in ws]
        signs = sum(bool((np.sign(w) == np.sign(exact)).all()) for w in ws)
        cost = f"pure epsilon {value}" if pure else f"rho {value} (epsilon {epsilon_at(value)} at delta 1e-6)"
        print(f"{cost}: mean {show(np.mean(ws, axis=0))}  "
              f"largest deviation {np.abs(np.array(ws) - exact).max():.4f}  right signs {signs} of {len(ws)}  "
              f"mean squared error {min(errors):.4f}-{max(errors):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
