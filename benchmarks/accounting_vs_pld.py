"""fuzzpy's certified epsilon at delta 1e-5 side by side with dp-accounting's PLD accountant
(Google's differential privacy library, the tight reference), for compositions of Gaussian
releases and of pure releases, with the ratio fuzzpy / reference.

dp-accounting is not a dependency of fuzzpy (it pins an old attrs). By default the reference
column holds figures recorded with dp-accounting 0.6.0 (PLDAccountant,
value_discretization_interval=1e-4, continuous Gaussian noise); give the Python of a virtual
environment that has it to recompute them:

    python benchmarks/accounting_vs_pld.py [--reference-python /path/to/venv/bin/python] [--subsampled]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from fractions import Fraction as F

from fuzzpy.accounting import ProvenLoss, epsilon_at_delta
from fuzzpy.runtime.noise import grid_sigma_lower

DELTA = F(1, 10**5)

# (sigma of each release of sensitivity 1, releases) -> dp-accounting 0.6.0's epsilon at 1e-5
RECORDED = {
    (1, 1): 4.37717810002493,
    (1, 10): 17.85658683146691,
    (1, 100): 91.81728962407377,
    (1, 1000): 633.9298513669117,
    (4, 100): 13.206712241909576,
    (10, 10000): 91.81728962407377,
    (100, 10000): 4.37717810002493,
}
# 100 pure releases of epsilon 0.1 composed optimally: the exact binomial formula of Kairouz, Oh &
# Viswanath 2015 (Theorem 3.3) for 100 randomized responses, solved at 40 digits
PURE_REFERENCE = 4.306791372516507
# Poisson-subsampled Gaussian (rate, noise multiplier, steps) -> dp-accounting 0.6.0's epsilon at 1e-5
SUBSAMPLED = {
    (0.01, 1.1, 10): 0.2717365201744012,
    (0.01, 1.1, 100): 0.5497650958602305,
    (0.01, 1.1, 1000): 1.5153702481094293,
    (0.01, 1.1, 10000): 5.192620123878041,
    # at rate 0.001 the losses are of the order of 1e-3: interval 1e-5 (1e-4 gives 0.475987, loose)
    (0.001, 1.0, 10000): 0.47576354601194615,
}
# dp-accounting's value_discretization_interval for each rate (about rate / 100)
_INTERVAL = {0.01: 1e-4, 0.001: 1e-5}
# the same compositions by Opacus 1.6.0's default accountant (RDP, its default orders), recorded
# in a virtual environment with `pip install --no-deps opacus` (opacus/accountants/analysis/rdp.py
# needs only numpy and scipy): compute_rdp then get_privacy_spent at delta 1e-5
OPACUS_RDP = {10: 0.8394535578288401, 100: 0.9560910987474418, 1000: 1.7117700912203435,
              10000: 5.63199236854841}
# Poisson-subsampled Laplace (rate, epsilon, releases) -> dp-accounting 0.6.0's epsilon at 1e-5
# (PoissonSampledDpEvent of LaplaceDpEvent(1 / epsilon), value_discretization_interval 1e-4)
SUBSAMPLED_LAPLACE = {
    (0.01, 1, 100): 0.33047713463565737,
    (0.1, 1, 10): 1.1742074328638354,
    (0.05, 0.5, 1000): 3.144760073547506,
}


def subsampled_gaussian_loss(q: float, z: float, steps: int) -> ProvenLoss:
    """`steps` Gaussian releases of sensitivity 1 and noise z on Poisson samples of rate q, as
    the checker states them (`subsample q (fun s -> gaussian rho ...)`), on the runtime's grid."""
    rho = F(1) / (2 * F(z) ** 2)
    grid = grid_sigma_lower([(F(1), rho, 1)])
    rate = F(q).limit_denominator(10**6)
    return ProvenLoss(0, 0, rho * steps, laplace=(), subsampled=(("gauss", rate, rho, steps),),
                      gauss_grid_sigma=grid, gauss_sampled_rho=rho * steps)


def subsampled_laplace_loss(q: float, eps: float, count: int) -> ProvenLoss:
    e, rate = F(eps), F(q).limit_denominator(10**6)
    return ProvenLoss(e * count, e * e * count / 2, 0, laplace=(), subsampled=(("laplace", rate, e, count),))

_REFERENCE_SCRIPT = """
import json, sys
from dp_accounting import pld, dp_event
out = []
for sigma, count in json.loads(sys.argv[1]):
    acc = pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(sigma), count))
    out.append(acc.get_epsilon(1e-5))
print(json.dumps(out))
"""


_SUBSAMPLED_SCRIPT = """
import json, sys
from dp_accounting import pld, dp_event
out = []
for q, z, steps, interval in json.loads(sys.argv[1]):
    acc = pld.PLDAccountant(value_discretization_interval=interval)
    acc.compose(dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps))
    out.append(acc.get_epsilon(1e-5))
print(json.dumps(out))
"""


def subsampled_references(python: str | None) -> dict[tuple[float, float, int], float]:
    """dp-accounting's epsilon for the subsampled Gaussian compositions: recorded, or recomputed."""
    if python is None:
        return dict(SUBSAMPLED)
    keys = list(SUBSAMPLED)
    args = [[q, z, steps, _INTERVAL[q]] for q, z, steps in keys]
    res = subprocess.run([python, "-c", _SUBSAMPLED_SCRIPT, json.dumps(args)], capture_output=True,
                         text=True, check=True)
    return dict(zip(keys, json.loads(res.stdout)))


def references(python: str | None) -> dict[tuple[int, int], float]:
    if python is None:
        return dict(RECORDED)
    keys = list(RECORDED)
    res = subprocess.run([python, "-c", _REFERENCE_SCRIPT, json.dumps(keys)], capture_output=True,
                         text=True, check=True)
    return dict(zip(keys, json.loads(res.stdout)))


def gaussian_loss(sigma: int, count: int) -> ProvenLoss:
    """`count` releases of sensitivity 1 and noise sigma, on the grid the runtime plans for them."""
    rho = F(1, 2 * sigma * sigma)
    return ProvenLoss.gaussian_releases(1, sigma, count, grid_sigma=grid_sigma_lower([(F(1), rho, 1)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-python", help="a Python with dp-accounting 0.6.0 installed")
    parser.add_argument("--subsampled", action="store_true",
                        help="also Poisson-subsampled Gaussian and Laplace compositions (minutes)")
    parser.add_argument("--max-steps", type=int, default=10_000,
                        help="skip the subsampled Gaussian compositions longer than this")
    args = parser.parse_args()
    refs = references(args.reference_python)
    print(f"{'releases':>24s} {'fuzzpy':>12s} {'reference':>14s} {'ratio':>9s}  conversion (time)")
    for (sigma, count), ref in refs.items():
        t = time.perf_counter()
        conv = epsilon_at_delta(gaussian_loss(sigma, count), DELTA)
        took = time.perf_counter() - t
        name = f"{count} x Gaussian sigma {sigma}"
        print(f"{name:>24s} {float(conv.epsilon):12.6f} {ref:14.6f} {float(conv.epsilon) / ref:9.6f}  "
              f"{conv.method} ({took:.2f} s)")
    if args.subsampled:
        for (q, z, steps), ref in subsampled_references(args.reference_python).items():
            if steps > args.max_steps:
                continue
            t = time.perf_counter()
            conv = epsilon_at_delta(subsampled_gaussian_loss(q, z, steps), DELTA)
            eps = float(conv.epsilon)
            name = f"{steps} x Poisson {q} z {z}"
            opacus = f"; Opacus RDP {OPACUS_RDP[steps]:.6f}" if q == 0.01 else ""
            print(f"{name:>24s} {eps:12.6f} {ref:14.6f} {eps / ref:9.6f}  {conv.method} "
                  f"({time.perf_counter() - t:.1f} s){opacus}")
        for (q, e, count), ref in SUBSAMPLED_LAPLACE.items():
            t = time.perf_counter()
            conv = epsilon_at_delta(subsampled_laplace_loss(q, e, count), DELTA)
            eps = float(conv.epsilon)
            name = f"{count} x Poisson {q} Lap {e}"
            print(f"{name:>24s} {eps:12.6f} {ref:14.6f} {eps / ref:9.6f}  {conv.method} "
                  f"({time.perf_counter() - t:.0f} s)")
    conv = epsilon_at_delta(ProvenLoss(F(10), F(1, 2), pure=((F(1, 10), 100),)), DELTA)
    print(f"{'100 x pure epsilon 0.1':>24s} {float(conv.epsilon):12.6f} {PURE_REFERENCE:14.6f} "
          f"{float(conv.epsilon) / PURE_REFERENCE:9.6f}  {conv.method}")


if __name__ == "__main__":
    main()
