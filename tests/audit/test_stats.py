"""Clopper-Pearson bounds, the epsilon lower bound and sample-size planning, against exact values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fuzzpy.audit.stats import (
    cp_lower,
    cp_upper,
    epsilon_lower_bound,
    expected_bound,
    per_bound_alpha,
    point_estimate,
    samples_needed,
    samples_needed_support,
)


def test_closed_forms_at_the_ends():
    # k = 0: the upper bound solves (1 - p)^n = alpha; k = n: the lower bound solves p^n = alpha.
    assert cp_upper(0, 100, 0.05) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-12)
    assert cp_lower(100, 100, 0.05) == pytest.approx(0.05 ** (1 / 100), rel=1e-12)
    assert cp_lower(0, 100, 0.05) == 0.0 and cp_upper(100, 100, 0.05) == 1.0


def test_bounds_are_the_binomial_tail_inversions():
    # The lower bound p_L for k successes satisfies P[Bin(n, p_L) >= k] = alpha exactly.
    n, k, alpha = 200, 37, 0.01
    lo, hi = float(cp_lower(k, n, alpha)), float(cp_upper(k, n, alpha))
    assert stats.binom.sf(k - 1, n, lo) == pytest.approx(alpha, rel=1e-9)
    assert stats.binom.cdf(k, n, hi) == pytest.approx(alpha, rel=1e-9)
    assert lo < k / n < hi


@pytest.mark.parametrize("p", [0.003, 0.05, 0.3, 0.9])
def test_coverage_is_at_least_one_minus_alpha_exactly(p):
    # Sum the binomial pmf over every k whose one-sided bound misses p: at most alpha.
    n, alpha = 300, 0.05
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, p)
    assert pmf[cp_lower(k, n, alpha) > p].sum() <= alpha
    assert pmf[cp_upper(k, n, alpha) < p].sum() <= alpha


def test_bonferroni_split():
    assert per_bound_alpha(0.95, 1) == pytest.approx(0.025)
    assert per_bound_alpha(0.95, 10) == pytest.approx(0.0025)
    with pytest.raises(ValueError):
        per_bound_alpha(1.0, 3)


def test_epsilon_lower_bound_and_estimate():
    alpha = 0.0025
    lb = float(epsilon_lower_bound(4000, 10000, 2000, 10000, alpha))
    assert lb == pytest.approx(math.log(float(cp_lower(4000, 10000, alpha)) / float(cp_upper(2000, 10000, alpha))))
    assert 0.55 < lb < math.log(2)          # below the point estimate ln 2
    assert float(point_estimate(4000, 10000, 2000, 10000)) == pytest.approx(math.log(2))
    assert float(epsilon_lower_bound(0, 10, 0, 10, alpha)) == -math.inf
    # A one-sided event: finite, growing like ln(n).
    assert float(epsilon_lower_bound(1000, 10000, 0, 10000, alpha)) == pytest.approx(
        math.log(float(cp_lower(1000, 10000, alpha)) / (1 - alpha ** (1 / 10000))))


def test_samples_needed_is_the_least_sufficient_size():
    # An event with P2 = 0.1 whose true ratio is e^(0.5 + 0.25), claim 0.5, 9 tests.
    n = samples_needed(0.1, 0.5, 0.25, tests=9)
    alpha = per_bound_alpha(0.95, 9)
    p1 = 0.1 * math.exp(0.75)
    assert expected_bound(p1, 0.1, n, alpha) > 0.5 >= expected_bound(p1, 0.1, n - 1, alpha)
    # Normal approximation: z * (sqrt((1-p1)/p1) + sqrt((1-p2)/p2)) / sqrt(n) = 0.25, z = 2.77.
    assert n == pytest.approx((2.77 * (math.sqrt((1 - p1) / p1) + 3.0) / 0.25) ** 2, rel=0.05)
    # Half the excess needs roughly four times the samples.
    assert 3.0 < samples_needed(0.1, 0.5, 0.125, tests=9) / n < 5.0


def test_support_case():
    # P2 = 0: the bound is about ln(p1 n / ln(1/alpha)) once p1 n is large, so n grows like
    # e^claim * ln(1/alpha) / p1, with a small-count penalty on top (here about 2x).
    n = samples_needed_support(0.1, 0.5, tests=9)
    alpha = per_bound_alpha(0.95, 9)
    assert expected_bound(0.1, 0.0, n, alpha) > 0.5 >= expected_bound(0.1, 0.0, n - 1, alpha)
    rough = math.exp(0.5) * math.log(1 / alpha) / 0.1
    assert rough < n < 3 * rough
    assert 5 * n < samples_needed_support(0.1, 3.0, tests=9) < 15 * n  # e^2.5 = 12 times, less the penalty


def test_the_bound_at_a_delta():
    # (epsilon, delta): epsilon >= ln((CP_lower(k1) - delta) / CP_upper(k2)).
    alpha, delta = 0.0025, 0.01
    lo, hi = float(cp_lower(4000, 10000, alpha)), float(cp_upper(2000, 10000, alpha))
    assert float(epsilon_lower_bound(4000, 10000, 2000, 10000, alpha, delta)) == pytest.approx(
        math.log((lo - delta) / hi), rel=1e-12)
    # delta = 0 is the pure bound, bit for bit; a larger delta never gives a larger bound.
    assert epsilon_lower_bound(4000, 10000, 2000, 10000, alpha, 0.0) == epsilon_lower_bound(
        4000, 10000, 2000, 10000, alpha)
    assert epsilon_lower_bound(4000, 10000, 2000, 10000, alpha, 0.1) < epsilon_lower_bound(
        4000, 10000, 2000, 10000, alpha, delta)
    # An event whose probability is within delta shows nothing, even one never seen on the other side.
    assert float(epsilon_lower_bound(50, 10000, 0, 10000, alpha, delta)) == -math.inf
    assert float(point_estimate(50, 10000, 0, 10000, delta)) == -math.inf
    assert float(point_estimate(4000, 10000, 2000, 10000, delta)) == pytest.approx(math.log(0.39 / 0.2))
    with pytest.raises(ValueError):
        epsilon_lower_bound(1, 10, 1, 10, alpha, 1.0)


def test_samples_needed_at_a_delta():
    # P2 = 0.01 and (P1 - delta) / P2 = e^1.5, claim 1.3 at delta 1e-5: the least sufficient n.
    alpha, delta = per_bound_alpha(0.95, 9), 1e-5
    n = samples_needed(0.01, 1.3, 0.2, tests=9, delta=delta)
    p1 = 0.01 * math.exp(1.5) + delta
    assert expected_bound(p1, 0.01, n, alpha, delta) > 1.3 >= expected_bound(p1, 0.01, n - 1, alpha, delta)


def test_the_ranking_quantiles_of_many_counts_are_each_counts_own():
    """`shrunk` reads counts on one sample size from a table of every count's quantile: the same
    floats as the quantile computed for that count alone, and the general path for anything
    else (fractional counts, mixed sizes, a scalar)."""
    from fuzzpy.audit.stats import shrunk

    k = np.array([0, 3, 3, 200, 17, 1, 199])
    for q in (0.25, 0.75):
        assert shrunk(k, 200, q).tolist() == [float(stats.beta.ppf(q, x + 0.5, 200 - x + 0.5)) for x in k]
    odd = np.array([0.5, 3.0, 10.0])
    assert shrunk(odd, 200, 0.25).tolist() == stats.beta.ppf(0.25, odd + 0.5, 200 - odd + 0.5).tolist()
    assert shrunk(k, np.array([200, 300, 200, 300, 200, 300, 300]), 0.75).tolist() == \
        stats.beta.ppf(0.75, k + 0.5, np.array([200, 300, 200, 300, 200, 300, 300]) - k + 0.5).tolist()
    assert float(shrunk(3, 200, 0.25)) == float(stats.beta.ppf(0.25, 3.5, 197.5))
