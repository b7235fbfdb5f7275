"""Goodness-of-fit tests: each sampler and mechanism against its exact law, at fixed seeds
(so every run is deterministic). Each family also checks that the test has power: the same
draws must be rejected against a slightly wrong law (for example a scale off by 15%)."""

from __future__ import annotations

import math
from fractions import Fraction as F
from itertools import permutations, product

import numpy as np
import pytest
from scipy import stats

from fuzzpy.runtime.noise import (
    RandomSource,
    above_threshold,
    exponential_mechanism,
    laplace_release,
    laplace_release_batch,
    plan_laplace,
    randomized_response,
    report_noisy_max,
    sample_discrete_laplace,
    sample_discrete_laplace_batch,
    sample_geometric_exp,
)

ALPHA = 1e-3  # fixed seeds: a pass is deterministic; this level only picks which seeds pass


# --- exact laws ------------------------------------------------------------------------------


def dlap_cdf(z: np.ndarray, scale: float) -> np.ndarray:
    """P(Z <= z) for P(z) proportional to exp(-|z|/scale): P(Z >= j) = q^j / (1+q), j >= 1."""
    q = math.exp(-1 / scale)
    z = np.asarray(z, dtype=float)
    upper = 1 - np.power(q, np.maximum(z, 0) + 1) / (1 + q)
    lower = np.power(q, np.maximum(-z, 0)) / (1 + q)
    return np.where(z >= 0, upper, lower)


def dlap_pvalue(samples: np.ndarray, scale: float, bins: int = 30) -> float:
    """Chi-square test of integer samples against the discrete Laplace, on quantile bins."""
    p = np.linspace(1 / bins, 1 - 1 / bins, bins - 1)
    quant = np.where(p < 0.5, scale * np.log(2 * p), -scale * np.log(2 * (1 - p)))
    edges = np.unique(np.round(quant).astype(np.int64))
    below = dlap_cdf(edges - 1, scale)  # P(Z < edge)
    probs = np.diff(np.concatenate([[0.0], below, [1.0]]))
    observed = np.bincount(np.searchsorted(edges, samples, side="right"), minlength=len(probs))
    expected = probs * len(samples)
    assert expected.min() >= 5, "binning too fine for a chi-square test"
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


def categorical_pvalue(indices, pmf) -> float:
    observed = np.bincount(np.asarray(indices), minlength=len(pmf))
    expected = np.asarray(pmf) / np.sum(pmf) * len(indices)
    return stats.chisquare(observed, expected).pvalue


# --- exact samplers --------------------------------------------------------------------------


@pytest.mark.parametrize("scale,seed", [(F(3), 1), (F(7, 3), 2), (F(1, 2), 3), (F(2500), 4)])
def test_discrete_laplace_matches_its_pmf(scale, seed):
    rng = RandomSource.seeded(seed)
    xs = np.array([sample_discrete_laplace(scale, rng) for _ in range(20_000)])
    assert dlap_pvalue(xs, float(scale)) > ALPHA
    assert dlap_pvalue(xs, float(scale) * 1.15) < 1e-6  # the test can tell a wrong scale
    assert abs(xs.mean()) < 0.05 * float(scale) + 0.05


def test_geometric_exp_matches_its_pmf():
    gamma = F(1, 3)
    rng = RandomSource.seeded(5)
    xs = np.array([sample_geometric_exp(gamma, rng) for _ in range(20_000)])
    q = math.exp(-1 / 3)
    top = 25
    pmf = [(1 - q) * q**k for k in range(top)] + [q**top]  # last bin: k >= top
    assert categorical_pvalue(np.minimum(xs, top), pmf) > ALPHA
    q_wrong = math.exp(-1.15 / 3)
    wrong = [(1 - q_wrong) * q_wrong**k for k in range(top)] + [q_wrong**top]
    assert categorical_pvalue(np.minimum(xs, top), wrong) < 1e-6


@pytest.mark.parametrize("scale,seed", [(F(3), 6), (F(7, 3), 7), (F(40960), 8)])
def test_batch_sampler_has_the_same_law(scale, seed):
    xs = sample_discrete_laplace_batch(scale, 200_000, RandomSource.seeded(seed))
    assert dlap_pvalue(xs, float(scale), bins=60) > ALPHA
    assert dlap_pvalue(xs, float(scale) * 1.05, bins=60) < 1e-6


# --- Laplace releases ------------------------------------------------------------------------


def release_pvalue(steps: np.ndarray, y: F, grid_scale: float, bins: int = 30) -> float:
    """Chi-square of outputs (in grid steps) against the exact law for input y (in steps):
    floor(y) + Bernoulli(frac(y)) + discrete Laplace(grid_scale)."""
    low, f = math.floor(y), float(y - math.floor(y))
    p = np.linspace(1 / bins, 1 - 1 / bins, bins - 1)
    quant = np.where(p < 0.5, grid_scale * np.log(2 * p), -grid_scale * np.log(2 * (1 - p)))
    edges = np.unique(np.round(quant).astype(np.int64))
    below = (1 - f) * dlap_cdf(edges - 1, grid_scale) + f * dlap_cdf(edges - 2, grid_scale)
    probs = np.diff(np.concatenate([[0.0], below, [1.0]]))
    observed = np.bincount(np.searchsorted(edges, steps - low, side="right"), minlength=len(probs))
    expected = probs * len(steps)
    assert expected.min() >= 5
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


def _steps(values, step: F) -> np.ndarray:
    out = []
    for v in values:
        k = F(v) / step
        assert k.denominator == 1  # every output is a grid point
        out.append(int(k))
    return np.array(out)


def test_laplace_release_has_the_claimed_law_and_scale():
    sens, eps, x = F(1), F(1, 10), 0.3
    rng = RandomSource.seeded(21)
    rels = [laplace_release(x, sens, eps, rng) for _ in range(6000)]
    assert {r.scale for r in rels} == {F(1) / F(1, 10)} and rels[0].scale == 10
    step, s = rels[0].granularity, rels[0].grid_scale
    assert s == 5120 + F(1, 2) and rels[0].noise_scale == 10 + step / 2
    y = F(x) / step  # 153.6 steps: rounds up with probability 0.6
    z = _steps([r.value for r in rels], step)
    assert release_pvalue(z, y, float(s)) > ALPHA
    assert release_pvalue(z, y, float(s) * 1.15) < 1e-6
    errors = np.array([r.value - x for r in rels])
    assert 9.4 < np.abs(errors).mean() < 10.6  # E|Laplace(10)| = 10
    assert abs(errors.mean()) < 4 * 10 * math.sqrt(2 / len(errors))  # unbiased


def test_laplace_release_tuple_noise_per_coordinate():
    sens, eps, xs = F(2), F(1, 2), [1.25, -7.1, 1e6]
    rng = RandomSource.seeded(22)
    plan = plan_laplace(sens, eps, 3)
    rels = [laplace_release(xs, sens, eps, rng) for _ in range(3000)]
    assert all(r.grid_scale == plan.grid_scale and r.scale == 4 for r in rels)
    for i, x in enumerate(xs):
        z = _steps([r.values[i] for r in rels], plan.granularity)
        assert release_pvalue(z, F(x) / plan.granularity, float(plan.grid_scale), bins=20) > ALPHA
    # coverage of the per-coordinate accuracy bound at beta = 0.05
    a = float(rels[0].accuracy(0.05))
    n = 3 * len(rels)
    miss = np.mean([abs(v - x) > a for r in rels for v, x in zip(r.values, xs)])
    assert miss <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)


def test_laplace_release_batch_has_the_same_law():
    sens, eps, x = F(1), F(1, 10), 0.3
    out = laplace_release_batch(x, sens, eps, 100_000, RandomSource.seeded(23))
    plan = plan_laplace(sens, eps)
    z = _steps(out.tolist(), plan.granularity)
    assert release_pvalue(z, F(x) / plan.granularity, float(plan.grid_scale), bins=50) > ALPHA
    assert release_pvalue(z, F(x) / plan.granularity, float(plan.grid_scale) * 1.05, bins=50) < 1e-6


# --- selection -------------------------------------------------------------------------------


def em_pmf(scores, eps: float, sens: float) -> np.ndarray:
    w = np.exp(eps * (np.asarray(scores, dtype=float) - max(scores)) / (2 * sens))
    return w / w.sum()


def pf_pmf(scores, eps: float, sens: float) -> np.ndarray:
    top = max(scores)
    p = [math.exp(eps * (q - top) / (2 * sens)) for q in scores]
    pmf = np.zeros(len(scores))
    orders = list(permutations(range(len(scores))))
    for order in orders:
        stay = 1.0
        for i in order:
            pmf[i] += stay * p[i] / len(orders)
            stay *= 1 - p[i]
    return pmf


@pytest.mark.parametrize(
    "scores,sens,eps,seed",
    [([0, 1, 2, 3.5], F(1), F(1), 31), ([5.0, 4.5, -1.0, 5.0, 2.25], F(2), F(3, 2), 32)],
)
def test_exponential_mechanism_frequencies(scores, sens, eps, seed):
    rng = RandomSource.seeded(seed)
    picks = [exponential_mechanism(scores, sens, eps, rng) for _ in range(20_000)]
    assert categorical_pvalue(picks, em_pmf(scores, float(eps), float(sens))) > ALPHA
    # forgetting the factor 2 (epsilon/sensitivity) would be detected
    assert categorical_pvalue(picks, em_pmf(scores, 2 * float(eps), float(sens))) < 1e-6


@pytest.mark.parametrize(
    "scores,sens,eps,seed",
    [([0, 1, 2, 3.5], F(1), F(1), 41), ([5.0, 4.5, -1.0, 5.0], F(2), F(3, 2), 42)],
)
def test_report_noisy_max_frequencies(scores, sens, eps, seed):
    rng = RandomSource.seeded(seed)
    picks = [report_noisy_max(scores, sens, eps, rng) for _ in range(20_000)]
    assert categorical_pvalue(picks, pf_pmf(scores, float(eps), float(sens))) > ALPHA
    assert categorical_pvalue(picks, em_pmf(scores, float(eps), float(sens))) < 1e-6


@pytest.mark.parametrize("pmf_fn", [em_pmf, pf_pmf])
def test_selection_laws_are_epsilon_dp_on_neighbouring_scores(pmf_fn):
    """Brute force over all 1-sensitive neighbours of small score vectors: every output's
    probability ratio is at most e^eps; halving the 2 in the exponent breaks it."""
    eps = 1.0
    worst_ok = worst_bad = 0.0
    for q in product(range(3), repeat=3):
        base_ok, base_bad = pmf_fn(q, eps, 1.0), pmf_fn(q, 2 * eps, 1.0)
        for d in product((-1, 0, 1), repeat=3):
            q2 = [a + b for a, b in zip(q, d)]
            worst_ok = max(worst_ok, np.max(np.log(base_ok / pmf_fn(q2, eps, 1.0))))
            worst_bad = max(worst_bad, np.max(np.log(base_bad / pmf_fn(q2, 2 * eps, 1.0))))
    assert worst_ok <= eps + 1e-12
    assert worst_bad > eps + 0.1


# --- randomized response ---------------------------------------------------------------------


@pytest.mark.parametrize("eps,seed", [(F(1), 51), (F(1, 4), 52), (F(3), 53)])
def test_randomized_response_keep_rate(eps, seed):
    rng = RandomSource.seeded(seed)
    n = 20_000
    bits = [True, False] * (n // 2)
    out = randomized_response(bits, eps, rng)
    kept = sum(a == b for a, b in zip(out, bits))
    p = math.exp(float(eps)) / (1 + math.exp(float(eps)))
    assert stats.binomtest(kept, n, p).pvalue > ALPHA
    # the coins never look at the bit: the keep rate is the same for True and False
    kept_true = sum(out[i] for i in range(0, n, 2))
    kept_false = sum(not out[i] for i in range(1, n, 2))
    assert stats.binomtest(kept_true, n // 2, p).pvalue > ALPHA
    assert stats.binomtest(kept_false, n // 2, p).pvalue > ALPHA


# --- sparse vector ---------------------------------------------------------------------------


def svt_single_query_p(gap_steps: int, rho_scale: float, nu_scale: float) -> float:
    """P(nu - rho >= gap) for independent discrete Laplaces, summed over rho numerically."""
    width = int(40 * rho_scale)
    x = np.arange(-width, width + 1)
    q = math.exp(-1 / rho_scale)
    p_rho = (1 - q) / (1 + q) * np.power(q, np.abs(x))
    return float(np.sum(p_rho * (1 - dlap_cdf(gap_steps + x - 1, nu_scale))))


def test_above_threshold_noise_scales():
    """One query 5 units below the threshold, cutoff 3: P(True) must match Lyu et al.'s
    scales (threshold sensitivity/eps1, query 2*cutoff*sensitivity/eps2, eps1 = eps2 = eps/2)."""
    sens, eps, cutoff = F(1), F(1), 3
    k = 2**12  # grid steps per unit of sensitivity at eps = 1 (2**m >= 4096 * eps)
    rho_scale = k / 0.5
    nu_scale = 2 * cutoff * k / 0.5
    gap = 5 * k  # threshold - query, in grid steps
    p = svt_single_query_p(gap, rho_scale, nu_scale)
    p_wrong = svt_single_query_p(gap, rho_scale, nu_scale / cutoff)  # forgot the cutoff
    rng = RandomSource.seeded(61)
    n = 6000
    hits = sum(above_threshold([0.0], 5.0, sens, eps, cutoff, rng)[0] for _ in range(n))
    assert stats.binomtest(hits, n, p).pvalue > ALPHA
    assert stats.binomtest(hits, n, p_wrong).pvalue < 1e-6
