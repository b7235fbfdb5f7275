"""Throughput of the exact discrete Gaussian sampler against numpy's float normal sampler.

    python benchmarks/gaussian_throughput.py [--draws 20000] [--repeat 3]

For several sigma, in one process: draws per second of `sample_discrete_gaussian` (exact, from
the OS generator, as releases use it; and from a seeded source, for tests), of
`gaussian_release` per coordinate (rounding + noise, a 100-vector at rho = 1/2), of the batch
sampler `sample_discrete_gaussian_batch` (auditing only), and of numpy's `Generator.normal`
called once per draw and vectorised. Prints each rate and its ratio to numpy's vectorised
rate and to numpy's one-call-per-draw rate. Best of --repeat runs.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction
from typing import Callable

import numpy as np

from fuzzpy.runtime.noise import gaussian_release
from fuzzpy.runtime.samplers import (
    RandomSource,
    sample_discrete_gaussian,
    sample_discrete_gaussian_batch,
)

SIGMAS = (1, 10, 1_000, 10**6)


def rate(fn: Callable[[], object], draws: int, repeat: int) -> float:
    """Draws per second of `fn`, which makes `draws` draws, best of `repeat` runs."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return draws / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n, rep = args.draws, args.repeat
    secure, seeded = RandomSource(), RandomSource.seeded(1)
    gen = np.random.default_rng(1)
    print(f"{'sigma':>9} {'sampler':<34} {'draws/s':>13} {'/ np vector':>12} {'/ np scalar':>12}")
    for sigma in SIGMAS:
        s2 = Fraction(sigma) ** 2
        np_vec = rate(lambda: gen.normal(0.0, float(sigma), n * 50), n * 50, rep)
        np_one = rate(lambda: [gen.normal(0.0, float(sigma)) for _ in range(n)], n, rep)
        rows = {
            "exact, OS generator": rate(lambda: [sample_discrete_gaussian(s2, secure) for _ in range(n)], n, rep),
            "exact, seeded (tests only)": rate(lambda: [sample_discrete_gaussian(s2, seeded) for _ in range(n)], n, rep),
            "batch (auditing only)": rate(lambda: sample_discrete_gaussian_batch(s2, n * 50, seeded), n * 50, rep),
            "numpy normal, one call per draw": np_one,
            "numpy normal, vectorised": np_vec,
        }
        for name, r in rows.items():
            print(f"{sigma:>9} {name:<34} {r:>13,.0f} {r / np_vec:>12.2e} {r / np_one:>12.3f}")
    # A whole release: 100 coordinates at sensitivity 1, rho = 1/2 (sigma_g = 2**14 + 10 steps).
    xs = list(np.linspace(-5.0, 5.0, 100))
    k = max(1, n // 100)
    r = rate(lambda: [gaussian_release(xs, Fraction(1), Fraction(1, 2), secure) for _ in range(k)], 100 * k, rep)
    np_vec = rate(lambda: gen.normal(0.0, 1.0, n * 50), n * 50, rep)
    np_one = rate(lambda: [gen.normal(0.0, 1.0) for _ in range(n)], n, rep)
    print(f"{'release':>9} {'gaussian_release, per coordinate':<34} {r:>13,.0f} {r / np_vec:>12.2e} {r / np_one:>12.3f}")


if __name__ == "__main__":
    main()
