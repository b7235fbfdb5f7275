"""Time of epsilon_at_delta for the reference cases and for 10,000 Gaussian releases, printed
against a baseline run in the same process: the plain float formula of the analytic Gaussian
(one bisection, no certificate). Run: python benchmarks/conversion_speed.py"""

from __future__ import annotations

import time
from fractions import Fraction

from fuzzpy.accounting import ProvenLoss, epsilon_at_delta
from fuzzpy.accounting.gaussian import gdp_epsilon_float

DELTA = Fraction(1, 10**5)
GRID = 4096


def _time(fn, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    cases = {
        "1 Gaussian (sigma 1)": ProvenLoss.gaussian_releases(1, 1, grid_sigma=GRID),
        "100 Gaussians (sigma 4)": ProvenLoss.gaussian_releases(1, 4, 100, grid_sigma=4 * GRID),
        "100 Laplace (eps 0.1)": ProvenLoss.laplace_releases(Fraction(1, 10), 100),
        "10,000 Gaussians (sigma 100)": ProvenLoss.gaussian_releases(1, 100, 10_000,
                                                                    grid_sigma=100 * GRID),
        "10,000 Gaussians + 100 Laplace": ProvenLoss.gaussian_releases(1, 100, 10_000,
                                                                      grid_sigma=100 * GRID)
        + ProvenLoss.laplace_releases(Fraction(1, 10), 100),
    }
    baseline = _time(lambda: gdp_epsilon_float(1.0, 1e-5), 20)
    print(f"baseline (float analytic Gaussian, uncertified): {baseline * 1e3:.3f} ms")
    for name, loss in cases.items():
        from fuzzpy.accounting import convert
        convert._slack.cache_clear()
        convert._inventory.cache_clear()
        t = time.perf_counter()
        conv = epsilon_at_delta(loss, DELTA)
        cold = time.perf_counter() - t
        warm = _time(lambda: epsilon_at_delta(loss, DELTA))
        print(f"{name:34s} eps={float(conv.epsilon):9.4f} ({conv.method}); "
              f"cold {cold * 1e3:7.1f} ms = {cold / baseline:7.0f}x baseline, "
              f"cached {warm * 1e3:6.1f} ms = {warm / baseline:6.0f}x")


if __name__ == "__main__":
    main()
