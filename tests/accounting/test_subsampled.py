"""Poisson-subsampled Gaussian releases (fuzzpy/accounting/subsampled.py): the certified PLD is
never below the exact hockey-stick curve of the subsampled pair, and its compositions are within
1% above dp-accounting's PLD accountant.

References: dp-accounting 0.6.0 (not a dependency of fuzzpy), computed once in a separate virtual
environment with

    acc = pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), count))
    acc.get_epsilon(1e-5)
"""

from __future__ import annotations

import math
from fractions import Fraction as F

import mpmath
import pytest

from fuzzpy.accounting.subsampled import subsampled_gaussian_epsilon_float, subsampled_gaussian_pld

# (rate, noise multiplier, steps) -> dp-accounting 0.6.0's epsilon at delta 1e-5
DP_ACCOUNTING_0_6_0 = {
    (0.01, 1.1, 10): 0.2717365201744012,
    (0.01, 1.1, 100): 0.5497650958602305,
    (0.01, 1.1, 1000): 1.5153702481094293,
    (0.01, 1.1, 10000): 5.192620123878041,  # the reference figure (benchmark only: slow)
    (0.001, 1.0, 10000): 0.4759870125935778,
}


def _exact_delta(q: float, mu: float, eps: float, remove: bool) -> mpmath.mpf:
    """H_{e^eps} of the subsampled continuous Gaussian pair, in closed form at 30 digits: the loss
    is increasing in x, so the divergence is P(x > x*) - e^eps Q(x > x*) where the loss is eps."""
    with mpmath.workdps(30):
        e = mpmath.mpf(eps)
        if remove:  # (1-q) N(0) + q N(mu) against N(0): log(1 - q + q e^(mu x - mu^2/2)) = eps
            x = (mpmath.log((mpmath.e**e - (1 - q)) / q) + mpmath.mpf(mu)**2 / 2) / mu
            return (1 - q) * mpmath.ncdf(-x) + q * mpmath.ncdf(mu - x) - mpmath.e**e * mpmath.ncdf(-x)
        if mpmath.e**-e <= 1 - q:  # the add pair's loss never exceeds -log(1 - q)
            return mpmath.mpf(0)
        x = (mpmath.mpf(mu)**2 / 2 - mpmath.log((mpmath.e**-e - (1 - q)) / q)) / mu
        p, r = mpmath.ncdf(mu - x), (1 - q) * mpmath.ncdf(mu - x) + q * mpmath.ncdf(-x)
        return p - mpmath.e**e * r


@pytest.mark.parametrize("remove", [True, False], ids=["remove", "add"])
@pytest.mark.parametrize("q,mu", [(0.01, 1 / 1.1), (0.1, 2.0), (0.5, 0.5)])
def test_one_subsampled_release_is_bounded_by_its_pld_and_closely(q, mu, remove):
    pld = subsampled_gaussian_pld(q, mu, 0.0, F(1, 10**5), remove)
    for eps in (0.0, 0.01, 0.1, 0.5, 1.0):
        exact = float(_exact_delta(q, mu, eps, remove))
        bound = pld.delta_pure(eps)
        assert exact <= bound, (eps, exact, bound)
        assert bound <= exact * (1 + 2e-3) + 1e-9  # the lattice's rounding (h = 1e-5) is small


def test_the_scale_of_the_discrete_gaussian_only_raises_the_bound():
    plain = subsampled_gaussian_pld(0.01, 1.0, 0.0, F(1, 10**5), True)
    scaled = subsampled_gaussian_pld(0.01, 1.0, 1e-3, F(1, 10**5), True)
    assert all(scaled.delta_pure(e) >= plain.delta_pure(e) for e in (0.0, 0.05, 0.2))


@pytest.mark.slow
def test_ten_subsampled_releases_within_one_percent_above_dp_accounting():
    """Ten steps of rate 0.01 and noise multiplier 1.1 (both directions, about 20 s); the longer
    compositions are in benchmarks/accounting_vs_pld.py --subsampled."""
    ref = DP_ACCOUNTING_0_6_0[(0.01, 1.1, 10)]
    eps = subsampled_gaussian_epsilon_float(0.01, 1 / 1.1, 0.0, 10, 1e-5)
    assert ref <= eps <= ref * 1.01


# --- Laplace releases on Poisson samples (accounting/convert._subsampled_epsilon) --------------

# (rate, Laplace epsilon, releases) -> dp-accounting 0.6.0's epsilon at delta 1e-5, computed once with
#     acc = pld.PLDAccountant(value_discretization_interval=1e-4)
#     acc.compose(dp_event.SelfComposedDpEvent(
#         dp_event.PoissonSampledDpEvent(q, dp_event.LaplaceDpEvent(1 / eps)), count))
DP_ACCOUNTING_LAPLACE_0_6_0 = {
    (0.01, 1, 100): 0.33047713463565737,
    (0.1, 1, 10): 1.1742074328638354,
    (0.05, 0.5, 1000): 3.144760073547506,
}


@pytest.mark.parametrize("key", sorted(DP_ACCOUNTING_LAPLACE_0_6_0))
def test_subsampled_laplace_compositions_are_within_half_a_percent_above_dp_accounting(key):
    from fuzzpy.accounting import ProvenLoss, epsilon_at_delta

    q, eps, count = key
    e = F(eps)
    loss = ProvenLoss(e * count, e * e * count / 2, 0, laplace=(),
                      subsampled=(("laplace", F(q).limit_denominator(1000), e, count),))
    conv = epsilon_at_delta(loss, F(1, 10**5))
    ref = DP_ACCOUNTING_LAPLACE_0_6_0[key]
    assert conv.method == "Poisson-subsampled PLD"
    assert ref <= conv.epsilon <= ref * 1.005


@pytest.mark.parametrize("remove", [True, False], ids=["remove", "add"])
def test_one_subsampled_laplace_release_is_bounded_by_its_pld(remove):
    """The PLD's delta is at least the hockey-stick divergence of the subsampled discrete Laplace
    pair computed directly from its two laws (in mpmath), and close to it."""
    from fuzzpy.accounting.pld import laplace_pld
    from fuzzpy.accounting.subsampled import subsampled_lattice_pld

    q, e = 0.05, F(1, 2)
    pair = laplace_pld(e)
    pld = subsampled_lattice_pld(pair, q, F(1, 10**5), remove)
    with mpmath.workdps(30):
        ls = [mpmath.mpf(float(pair.h)) * (pair.lo + i) for i in range(len(pair.probs))]
        p = [mpmath.mpf(float(x)) for x in pair.probs]
        qm = [pi * mpmath.exp(-li) for pi, li in zip(p, ls)]
        for eps in (0.0, 0.01, 0.03):
            g = mpmath.e**eps
            if remove:  # H_g((1-q) Q + q P || Q)
                exact = sum(max((1 - q) * b + q * a - g * b, 0) for a, b in zip(p, qm))
            else:  # H_g(P || (1-q) P + q Q)
                exact = sum(max(a - g * ((1 - q) * a + q * b), 0) for a, b in zip(p, qm))
            bound = pld.delta_pure(eps)
            assert float(exact) <= bound <= float(exact) * 1.01 + 1e-9, (eps, exact, bound)


@pytest.mark.parametrize("n,q", [(0, 0.3), (12, 0.2), (40, 0.05)])
def test_a_subsampled_laplace_count_on_neighbouring_tables_is_within_the_amplified_bound(n, q):
    """The exact laws of a Laplace count (the pair's discrete Laplace of epsilon 1, on its grid of
    K steps per unit) of a Poisson sample of a table of n rows and of n + 1 rows: their
    hockey-stick divergences, both ways, are at most the subsampled PLD's delta (remove: the
    larger table first). A rate 0.8 q in the PLD fails it (n = 12 and 40)."""
    import numpy as np
    from scipy import stats

    from fuzzpy.accounting.pld import laplace_grid, laplace_pld
    from fuzzpy.accounting.subsampled import subsampled_lattice_pld

    e = F(1)
    K = laplace_grid(e)
    a = float(e) / K
    tail = int(45 / a)  # noise beyond it has mass below 2 e^-45
    z = np.arange(-tail, tail + 1)
    noise = np.exp(-a * np.abs(z)) * (1 - math.exp(-a)) / (1 + math.exp(-a))
    size = K * (n + 1) + 2 * tail + 1

    def law(rows: int) -> np.ndarray:
        out = np.zeros(size)
        for c in range(rows + 1):
            out[K * c: K * c + len(noise)] += stats.binom.pmf(c, rows, q) * noise
        return out

    small, large = law(n), law(n + 1)
    remove = subsampled_lattice_pld(laplace_pld(e), q, F(1, 10**5), True)
    add = subsampled_lattice_pld(laplace_pld(e), q, F(1, 10**5), False)
    for eps in (0.0, 0.05, 0.2, 0.5):
        g = math.exp(eps)
        exact_remove = float(np.maximum(large - g * small, 0).sum())
        exact_add = float(np.maximum(small - g * large, 0).sum())
        assert exact_remove <= remove.delta_pure(eps) + 1e-12, (eps, exact_remove)
        assert exact_add <= add.delta_pure(eps) + 1e-12, (eps, exact_add)
