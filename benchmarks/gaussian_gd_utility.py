"""Noisy gradient descent for logistic regression: Gaussian (zCDP) against Laplace (pure epsilon)
at the same epsilon, at delta = 1e-6, on the shipped Adult sample.

    pip install -e ".[bench]"
    python benchmarks/gaussian_gd_utility.py [--runs 5] [--eps 0.25,0.5,1,2,4] [--delta 1e-6]
                                             [--out docs/img/gaussian_gd_utility.png]

For every epsilon: examples/logistic_regression.fz (Laplace, T = 9 steps, its parameter B = eps:
pure eps-DP, hence (eps, delta)-DP for every delta) and examples/logistic_regression_gauss.fz
(Gaussian, T = 300 steps, its parameter rho = the largest rho whose (eps, delta) conversion is
at most eps).  Each is checked (the proven epsilon, resp. rho, must be the one asked for), then
run `--runs` times with seeds 0, 1, ... (seeded noise: measurement only) through `run_program`,
and the classifier's accuracy on the sample is recorded (the sample is also the training set:
this measures how much the noise costs the optimiser, not generalisation).

THE CONVERSION FROM RHO TO (EPSILON, DELTA) IS THIS SCRIPT'S OWN, not fuzzpy's certified
accountant (being built elsewhere): the Renyi-DP conversion (rho-zCDP is (alpha, alpha rho)-RDP
for every alpha > 1; Balle et al. 2020, Theorem 21, in the form
eps = alpha rho + log((alpha - 1)/alpha) - (log delta + log alpha)/(alpha - 1)), minimised over a
grid of alpha.  Every alpha gives a valid bound, so the minimum over a grid is an upper bound on
the minimum over all alpha: the epsilon printed is never below what the formula gives.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "data" / "adult_sample.csv"
LAPLACE = ROOT / "examples" / "logistic_regression.fz"
GAUSS = ROOT / "examples" / "logistic_regression_gauss.fz"
OUT = ROOT / "docs" / "img" / "gaussian_gd_utility.png"
ALPHAS = np.exp(np.linspace(math.log(1.001), math.log(1e5), 20000))


def rdp_epsilon(rho: float, delta: float) -> float:
    """epsilon at delta of a rho-zCDP mechanism by the RDP conversion (an upper bound)."""
    a = ALPHAS
    eps = a * rho + np.log((a - 1) / a) - (math.log(delta) + np.log(a)) / (a - 1)
    return float(eps.min())


def rho_for_epsilon(eps: float, delta: float) -> Fraction:
    """The largest rho (a rational, rounded down to 6 significant digits) whose conversion is
    at most eps."""
    lo, hi = 0.0, eps
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rdp_epsilon(mid, delta) <= eps else (lo, mid)
    digits = 6 - int(math.floor(math.log10(lo)))
    rho = Fraction(math.floor(lo * 10 ** digits), 10 ** digits)
    assert rdp_epsilon(float(rho), delta) <= eps
    return rho


def accuracy(weights, df) -> float:
    x = np.c_[np.ones(len(df)), 2 * (df.age - 17) / 73 - 1, 2 * (df.education_num - 1) / 15 - 1,
              2 * (df.hours_per_week - 1) / 98 - 1, np.where(df.marital_status == "Married-civ-spouse", 1, -1)]
    return float(((x @ np.array([float(w) for w in weights]) > 0) == (df.income == ">50K")).mean())


def runs(program: Path, params: dict, n: int):
    from fuzzpy.checking.program import check_file
    from fuzzpy.runtime.data import load_table
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    report = check_file(program, params=params)
    assert report.ok, [d.message for d in report.diagnostics]
    (schema,) = report.schemas.values()
    df = load_table(SAMPLE, schema, table="db")
    accs = [accuracy(run_program(report.entry_instance, {"db": df}, RandomSource.seeded(s)).value, df)
            for s in range(n)]
    return report, accs, float((df.income == "<=50K").mean())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--eps", default="0.25,0.5,1,2,4")
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = []
    for text in args.eps.split(","):
        eps = float(text)
        rho = rho_for_epsilon(eps, args.delta)
        lap_report, lap, majority = runs(LAPLACE, {"B": text}, args.runs)
        gauss_report, gau, _ = runs(GAUSS, {"rho": str(rho)}, args.runs)
        assert lap_report.epsilon == Fraction(text) and gauss_report.rho == rho
        rows.append((eps, rho, rdp_epsilon(float(rho), args.delta), lap, gau, majority))
    print(f"delta = {args.delta:g}; rho -> epsilon by this script's RDP conversion; {args.runs} seeded runs each")
    print("| epsilon | Laplace GD (T = 9) accuracy, mean [min, max] | rho (Gaussian) | its epsilon | "
          "Gaussian GD (T = 300) accuracy, mean [min, max] |")
    print("| --- | --- | --- | --- | --- |")
    for eps, rho, conv, lap, gau, majority in rows:
        print(f"| {eps:g} | {100 * statistics.mean(lap):.1f}% [{100 * min(lap):.1f}, {100 * max(lap):.1f}] | "
              f"{float(rho):.6g} | {conv:.4f} | {100 * statistics.mean(gau):.1f}% "
              f"[{100 * min(gau):.1f}, {100 * max(gau):.1f}] |")
    print(f"majority class: {100 * rows[0][5]:.1f}%")
    _plot(rows, args)
    return 0


def _plot(rows, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for idx, label, color in ((3, "Laplace, pure epsilon (T = 9)", "tab:blue"),
                              (4, "Gaussian, zCDP (T = 300)", "tab:orange")):
        accs = [r[idx] for r in rows]
        ax.plot(eps, [100 * statistics.mean(a) for a in accs], "o-", color=color, label=label)
        ax.fill_between(eps, [100 * min(a) for a in accs], [100 * max(a) for a in accs], color=color, alpha=0.2)
    ax.axhline(100 * rows[0][5], color="gray", ls="--", label="majority class")
    ax.set_xscale("log")
    ax.set_xlabel(f"epsilon (at delta = {args.delta:g} for the Gaussian version)")
    ax.set_ylabel("accuracy on the Adult sample (%)")
    ax.set_title("Noisy gradient descent, logistic regression")
    ax.legend(loc="lower right")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"plot: {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    sys.exit(main())
