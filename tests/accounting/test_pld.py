"""The lattice PLDs against independent computations: the actual fuzzpy Laplace release summed
by brute force, direct (non-FFT) convolution, and the closed form of the optimal composition."""

import math
from fractions import Fraction as F

import mpmath
import numpy as np
import pytest

from fuzzpy.accounting import ProvenLoss, epsilon_at_delta, laplace_grid, laplace_pld, rr_pld
from fuzzpy.runtime.grid import grid_bits


@pytest.mark.parametrize("eps", [F(1, 10), F(1, 4096), F(1, 10**5), F(3), F(1, 3)])
def test_laplace_grid_agrees_with_the_runtime(eps):
    assert laplace_grid(eps) == 2 ** grid_bits(eps)


def _release_law(eps, y, window):
    """fuzzpy's Laplace release in grid steps (docs/noise.md): M_y(j) for j in window, with the
    true noise rate a = 2x/(2+x), x = eps/K, and random rounding of y."""
    K = laplace_grid(eps)
    x = float(eps) / K
    a = 2 * x / (2 + x)
    q = math.exp(-a)
    fl, f = math.floor(y), y - math.floor(y)
    def p(z):
        return (1 - q) / (1 + q) * np.exp(-a * np.abs(z))
    return (1 - f) * p(window - fl) + f * p(window - fl - 1)


def _loss_pmf(eps, move):
    """The exact PLD (losses, masses) of the actual release between inputs 0 and `move` steps."""
    K = laplace_grid(eps)
    width = int(60 * K / float(eps)) + K + 2
    j = np.arange(-width, width + 1)
    P, Q = _release_law(eps, 0.0, j), _release_law(eps, move, j)
    keep = P > 0
    return np.log(P[keep] / Q[keep]), P[keep]


@pytest.mark.parametrize("eps", [F(1, 1024), F(1, 100), F(1, 2)])
@pytest.mark.parametrize("frac", [1.0, 0.5, 0.37])
def test_laplace_pair_dominates_the_actual_release(eps, frac):
    """Brute-force hockey stick of the real mechanism (moves up to the full sensitivity,
    fractional steps included, both directions) is below the pair's delta at every eps."""
    K = laplace_grid(eps)
    pld = laplace_pld(eps)
    for e in np.linspace(0, float(eps), 9):
        ours = pld.delta_pure(e)
        for move in (frac * K, -frac * K):
            loss, mass = _loss_pmf(eps, move)
            truth = float(np.sum(mass * np.clip(-np.expm1(e - loss), 0, None)))
            assert truth <= ours * (1 + 1e-9) + 1e-15, (e, move, truth, ours)


def test_composition_matches_direct_convolution_of_the_actual_release():
    """10 releases of eps = 1/64: the accountant's FFT composition of the dominating pair is
    above the direct convolution of the real release's loss distribution, and close to it."""
    eps, count = F(1, 64), 10
    loss, mass = _loss_pmf(eps, float(laplace_grid(eps)))
    h = float(eps) / laplace_grid(eps) / 64

    def composed(rounding):
        """The 10-fold law of the real loss, each loss rounded down or up to the grid h: the
        true delta lies between the two (delta is monotone in every loss)."""
        idx = rounding(loss / h).astype(int)
        lo = idx.min()
        one = np.bincount(idx - lo, weights=mass)
        total = np.ones(1)
        for _ in range(count):
            total = np.convolve(total, one)
        return total, (np.arange(len(total)) + count * lo) * h

    low, high = composed(np.floor), composed(np.ceil)
    ours = ProvenLoss.laplace_releases(eps, count)
    pld = laplace_pld(eps).self_compose(count)
    for e in (0.01, 0.05, 0.1):
        below = float(np.sum(low[0] * np.clip(-np.expm1(e - low[1]), 0, None)))
        above = float(np.sum(high[0] * np.clip(-np.expm1(e - high[1]), 0, None)))
        assert below <= pld.delta_pure(e) <= above * 1.05 + 1e-12
    assert epsilon_at_delta(ours, F(1, 10**6)).epsilon < float(eps) * count


@pytest.mark.parametrize("eps0,k", [(F(1, 10), 100), (F(1, 2), 10), (F(1), 3)])
def test_randomized_response_composition_is_the_kov_formula(eps0, k):
    """Optimal composition (Kairouz, Oh & Viswanath 2015, Theorem 3.3) evaluated at 50 digits:
    delta(eps) = (1+e^e0)^-k sum_i C(k,i) (e^(e0 (k-i)) - e^eps e^(e0 i))_+."""
    pld = rr_pld(eps0).self_compose(k)
    with mpmath.workdps(50):
        e0 = mpmath.mpf(eps0.numerator) / eps0.denominator
        for eps in (0.0, 0.5, 1.5):
            exact = sum(mpmath.binomial(k, i) * max(mpmath.mpf(0), mpmath.exp(e0 * (k - i))
                        - mpmath.exp(eps) * mpmath.exp(e0 * i)) for i in range(k + 1))
            exact /= (1 + mpmath.exp(e0)) ** k
            ours = pld.delta_pure(eps)
            assert float(exact) <= ours <= float(exact) * (1 + 1e-6) + 1e-12


def test_kov_at_the_laplace_reference_is_above_the_laplace_pld():
    conv = epsilon_at_delta(ProvenLoss.laplace_releases(F(1, 10), 100), F(1, 10**5))
    found = dict(conv.candidates)
    assert found["discrete Laplace PLD"] < found["optimal composition (KOV)"] < 4.4
    assert conv.method == "discrete Laplace PLD"


def test_mixed_inventories_compose():
    """Two kinds of Laplace release plus Gaussians: the PLD is regridded, still certified below
    the basic-composition and zCDP figures."""
    loss = ProvenLoss.laplace_releases(F(1, 10), 20) + ProvenLoss.laplace_releases(F(1, 4), 8) \
        + ProvenLoss.gaussian_releases(1, 5, 10, grid_sigma=4096 * 5)
    conv = epsilon_at_delta(loss, F(1, 10**6))
    found = dict(conv.candidates)
    assert conv.epsilon == min(found.values())
    assert conv.method == "discrete Laplace PLD with GDP"
    assert conv.epsilon < found["zCDP (rho = pure_rho + gauss_rho)"]
    assert conv.epsilon < found["pure epsilon (randomized response) with GDP"]


def test_randomized_response_of_a_huge_epsilon_does_not_overflow():
    """A pure release of epsilon 1e6 (a partition selection run at a large epsilon) composed in
    the pure inventory: its randomized-response pair puts all its mass on +eps."""
    pld = rr_pld(F(10**6))
    assert pld.probs[0] == 0.0 and pld.probs[-1] == 1.0
    assert rr_pld(F(1)).probs[0] == pytest.approx(1 / (1 + math.e))


def test_a_delta_below_the_certificates_margin_is_refused_at_once_not_searched():
    """At delta 1e-300 the analytic Gaussian certificate (which adds a 1e-30 margin to delta)
    cannot hold: the accountant names it refused and answers by another conversion, at once
    (it used to try 10,000 candidate epsilons in 40-digit arithmetic, two minutes of CPU)."""
    from fuzzpy.accounting.convert import epsilon_at_delta as convert
    loss = ProvenLoss(F(0), F(0), F(2), gauss_grid_sigma=F(1024))
    conv = convert(loss, F(1, 10**300))
    assert any(m == "analytic Gaussian (GDP)" and "below what the analytic certificate resolves" in why
               for m, why in conv.refused)
    assert conv.method.startswith("zCDP") and conv.epsilon < math.inf
