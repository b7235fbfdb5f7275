"""The discrete Gaussian sampler and the Gaussian release: exact acceptance probabilities,
goodness of fit at fixed seeds (each test also shows it rejects a sigma off by 5 to 15%), the
release's exact rounding, its public plan, its accuracy statement, refusals, and the batch
versions used by the auditor."""

from __future__ import annotations

import math
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fuzzpy.runtime import grid, noise, samplers
from fuzzpy.runtime.noise import (
    GRID_BITS,
    GaussianRelease,
    RandomSource,
    gaussian_release,
    gaussian_release_batch,
    plan_gaussian,
    sample_discrete_gaussian,
    sample_discrete_gaussian_batch,
)

ALPHA = 1e-3  # fixed seeds: a pass is deterministic; this level only picks which seeds pass


# --- the exact law ---------------------------------------------------------------------------


def dgauss_support(sigma2: float) -> np.ndarray:
    width = int(40 * math.sqrt(sigma2)) + 40  # mass beyond is below exp(-800)
    return np.arange(-width, width + 1)


def dgauss_pmf(zs: np.ndarray, sigma2: float) -> np.ndarray:
    """P(z) for N_Z(0, sigma2), normalised over the whole (numerically complete) support."""
    support = dgauss_support(sigma2)
    norm = np.exp(-(support.astype(float) ** 2) / (2 * sigma2)).sum()
    return np.exp(-(np.asarray(zs, dtype=float) ** 2) / (2 * sigma2)) / norm


def law_pvalue(samples: np.ndarray, support: np.ndarray, pmf: np.ndarray, bins: int = 30) -> float:
    """Chi-square of integer samples against a pmf on `support`, on (merged) quantile bins."""
    cdf = np.cumsum(pmf)
    cuts = np.unique(np.searchsorted(cdf, np.linspace(1 / bins, 1 - 1 / bins, bins - 1)))
    edges = support[cuts] + 1  # bin i holds z < edges[i]
    below = np.concatenate([[0.0], cdf[cuts], [1.0]])
    probs = np.diff(below)
    keep = probs > 0
    observed = np.bincount(np.searchsorted(edges, samples, side="right"), minlength=len(probs))
    expected = probs * len(samples)
    assert expected[keep].min() >= 5, "binning too fine for a chi-square test"
    assert observed[~keep].sum() == 0
    return stats.chisquare(observed[keep], expected[keep] * observed.sum() / expected[keep].sum()).pvalue


def dgauss_pvalue(samples: np.ndarray, sigma2: float, bins: int = 30) -> float:
    support = dgauss_support(sigma2)
    return law_pvalue(samples, support, dgauss_pmf(support, sigma2), bins)


# --- the sampler: exact acceptance probabilities ----------------------------------------------

SIGMA2S = [F(1, 4), F(1, 2), F(7, 3), F(10), F(1000), F(10**12 + 1, 3)]


@pytest.mark.parametrize("sigma2", SIGMA2S)
def test_proposal_scale_is_floor_sigma_plus_one_exactly(sigma2):
    _, _, t = samplers._gaussian_params(sigma2)
    assert (t - 1) ** 2 <= sigma2 < t**2  # t - 1 = floor(sigma), without any square root


@pytest.mark.parametrize("sigma2", SIGMA2S)
def test_acceptance_times_proposal_is_the_gaussian_shape(sigma2):
    """For every y, |y|/t + gamma(y) - y^2/(2 sigma2) is the same constant sigma2/(2 t^2), in
    exact rationals: proposal exp(-|y|/t) times acceptance exp(-gamma) is proportional to
    exp(-y^2/(2 sigma2)), which is CKS20's correctness argument for Algorithm 3."""
    p, q, t = samplers._gaussian_params(sigma2)
    width = min(12 * math.isqrt(int(sigma2) + 1) + 12, 500)
    far = [7 * math.isqrt(int(sigma2) + 1) + k for k in (-1, 0, 1, 10**6)]
    for y in [*range(-width, width + 1), *far, *(-v for v in far)]:
        num, den = samplers._gaussian_rejection(y, p, q, t)
        assert num >= 0 and den > 0
        assert F(abs(y), t) + F(num, den) - F(y * y) / (2 * sigma2) == sigma2 / (2 * t * t)


class _Scripted:
    """Stands in for the proposal and the coin: replays (y, accept) pairs and records the coin's
    (num, den), so the loop of `_discrete_gaussian` is driven through chosen paths."""

    def __init__(self, script):
        self.script, self.coins, self.proposals = list(script), [], 0

    def laplace(self, num, den, rng):
        assert (num, den) == (self.t, 1)  # discrete Laplace of scale t = floor(sigma) + 1
        self.proposals += 1
        return self.script[0][0]

    def coin(self, num, den, rng):
        self.coins.append((num, den))
        return self.script.pop(0)[1]


@pytest.mark.parametrize("sigma2", [F(1, 2), F(7, 3), F(1000)])
def test_sampler_law_from_its_exact_acceptance_probabilities(sigma2, monkeypatch):
    """Drive the real rejection loop with scripted proposals and coins, read off the coin
    probability it asks for at every y, and derive its output law: proposal(y) exp(-gamma(y))
    normalised, with the truncation's remainder bounded. It must equal N_Z(0, sigma2)."""
    p, q, t = samplers._gaussian_params(sigma2)
    s = _Scripted([])
    s.t = t
    monkeypatch.setattr(samplers, "_discrete_laplace", s.laplace)
    monkeypatch.setattr(samplers, "_bernoulli_exp", s.coin)
    width = int(30 * math.sqrt(sigma2)) + 30
    ys = range(-width, width + 1)
    weight = {}
    for y in ys:
        s.script, s.coins, s.proposals = [(y, False), (y + 1, True)], [], 0
        assert samplers._discrete_gaussian(p, q, t, None) == y + 1  # a rejection loops again
        assert s.proposals == 2 and len(s.coins) == 2
        num, den = s.coins[0]
        weight[y] = math.exp(-abs(y) / t) * math.exp(-num / den)
    qq = math.exp(-1 / t)
    remainder = 2 * qq ** (width + 1) / (1 - qq)  # unnormalised proposal mass beyond the window
    total = sum(weight.values())
    pmf = dgauss_pmf(np.array(list(ys)), float(sigma2))
    derived = np.array([weight[y] / total for y in ys])
    assert remainder / total < 1e-12
    assert np.allclose(derived, pmf, rtol=1e-9, atol=remainder / total)


def test_sampler_always_returns_an_integer_and_consumes_only_integers():
    rng = RandomSource.seeded(1)
    out = [sample_discrete_gaussian(F(5, 2), rng) for _ in range(200)]
    assert all(type(v) is int for v in out)
    assert all(type(v) is int for v in (sample_discrete_gaussian(F(1, 10**9), rng) for _ in range(50)))
    # a tiny sigma puts essentially all mass at 0: P(|y| >= 1) = 2 exp(-5e8) / Z
    assert {sample_discrete_gaussian(F(1, 10**9), rng) for _ in range(50)} == {0}


# --- the sampler: goodness of fit ---------------------------------------------------------------


@pytest.mark.parametrize("sigma2,seed", [(F(1, 2), 1), (F(2), 2), (F(10), 3), (F(1000), 4)])
def test_discrete_gaussian_matches_its_pmf(sigma2, seed):
    rng = RandomSource.seeded(seed)
    xs = np.array([sample_discrete_gaussian(sigma2, rng) for _ in range(20_000)])
    s2 = float(sigma2)
    assert dgauss_pvalue(xs, s2) > ALPHA
    assert dgauss_pvalue(xs, s2 * 1.10**2) < 1e-6  # sigma 10% too large is detected
    assert dgauss_pvalue(xs, s2 * 0.90**2) < 1e-6  # and 10% too small
    assert abs(xs.mean()) < 4 * math.sqrt(s2 / len(xs))


@pytest.mark.parametrize("sigma2,seed", [(F(1, 2), 6), (F(1000), 7), (F(5000), 10), (F(10**9), 8)])
def test_batch_sampler_has_the_same_law(sigma2, seed):
    xs = sample_discrete_gaussian_batch(sigma2, 200_000, RandomSource.seeded(seed))
    assert xs.dtype == np.int64 and xs.shape == (200_000,)
    assert dgauss_pvalue(xs, float(sigma2), bins=60) > ALPHA
    assert dgauss_pvalue(xs, float(sigma2) * 1.05**2, bins=60) < 1e-6


@pytest.mark.parametrize("sigma2", [samplers._ROUNDED_MIN_SIGMA2, F(10**6)])
def test_rounded_batch_sampler_law_from_its_acceptance_probability(sigma2):
    """From sigma2 = 4096 on, the batch sampler rounds a normal y to k = floor(y + 1/2) and accepts with
    probability exp(-gap(y, k)).  Its output law is then proportional to the integral over k's
    cell of the normal density times that probability: computed here (Gauss-Legendre, 16 nodes
    per cell, every cell within 12 sigma) with the sampler's own gap function, it must be the
    discrete Gaussian to 1e-9.  (Rounding the normal without the correction is off by about
    k^2 / (24 sigma^4), 1e-4 at 3 sigma for sigma = 64: a chi-square test could not see it.)"""
    var = float(sigma2)
    sigma = math.sqrt(var)
    bound = math.ceil(samplers._ROUNDED_TAIL * sigma)
    c = (bound + 0.25) / (2 * var)
    nodes, weights = np.polynomial.legendre.leggauss(16)
    ks = np.arange(-bound, bound + 1, dtype=np.float64)
    y = ks[:, None] + nodes[None, :] / 2  # each cell [k - 1/2, k + 1/2]
    k = np.broadcast_to(ks[:, None], y.shape)
    gap = samplers._rounded_gap(y, k, var, c)
    assert gap.min() >= 0  # a probability: exp(-gap) <= 1 in every cell within the bound
    mass = (np.exp(-y * y / (2 * var) - gap) * weights).sum(axis=1)
    law = mass / mass.sum()
    pmf = dgauss_pmf(ks.astype(np.int64), var)
    assert np.allclose(law, pmf / pmf.sum(), rtol=1e-9, atol=1e-300)
    xs = sample_discrete_gaussian_batch(sigma2, 50_000, RandomSource.seeded(12))
    assert np.abs(xs).max() <= bound and xs.dtype == np.int64


def test_rounded_batch_sampler_only_where_its_cells_are_even(monkeypatch):
    """Rounded normals between sigma2 = 4096 and 2**80 only: above, a float near 12 sigma is too
    coarse for every unit cell to hold as many floats as the next (at sigma = 2**49 a float
    beyond 2**51 has spacing 1/2), and the discrete Laplace proposals are used, as below 4096."""
    used = []
    real = samplers._rounded_gaussian_batch
    monkeypatch.setattr(samplers, "_rounded_gaussian_batch", lambda *a: used.append(a[0]) or real(*a))
    for s2 in (F(4095), F(4096), F(2) ** 80, F(2) ** 80 + 1, F(2) ** 98):
        xs = sample_discrete_gaussian_batch(s2, 2_000, RandomSource.seeded(14))
        assert xs.dtype == np.int64 and len(xs) == 2_000
    assert used == [4096.0, float(2**80)]
    y = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4999999999999996])
    assert samplers._rounded_cell(y).tolist() == [-2, -1, 0, 1, 2, 3, 2]  # half-open cells, no ties to even
    # with floats of spacing 1/4 (|y| near 2**50), each cell holds 4 of them, even or odd k alike
    grid = 2.0**50 + np.arange(-40, 40) * 0.25
    assert set(np.bincount((samplers._rounded_cell(grid) - 2.0**50 + 10).astype(int))[1:-1].tolist()) == {4}


def test_rounded_batch_sampler_coin_is_u_below_exp_minus_gap():
    """The coin's shortcut (accept when u < 1 - gap) gives exactly u < exp(-gap): uniforms
    everywhere, and right at and around both thresholds, for gaps from 1e-6 to 30."""
    rng = np.random.default_rng(13)
    gaps = np.concatenate([[1e-6, 1e-3, 0.09, 0.5, 1.0, 5.0, 30.0], rng.uniform(0, 2, 200)])
    for gap in gaps:
        near = [1 - gap, math.exp(-gap)]
        u = np.concatenate([rng.random(500), near, np.nextafter(near, 0), np.nextafter(near, 1)])
        u = u[(u >= 0) & (u < 1)]
        g = np.full(len(u), gap)
        assert np.array_equal(samplers._rounded_accept(u, g), u < np.exp(-g))


def test_batch_and_exact_samplers_agree():
    """Two-sample chi-square between the exact sampler and the batch sampler at sigma2 = 10,
    and the same test telling the exact sampler from a batch with sigma 15% too large."""
    rng = RandomSource.seeded(9)
    exact = np.array([sample_discrete_gaussian(F(10), rng) for _ in range(20_000)])
    batch = sample_discrete_gaussian_batch(F(10), 100_000, rng)
    wrong = sample_discrete_gaussian_batch(F(10) * F(115, 100) ** 2, 100_000, rng)

    def two_sample(a, b):
        edges = np.arange(-8, 9)
        table = [np.bincount(np.searchsorted(edges, x, side="right"), minlength=len(edges) + 1)
                 for x in (a, b)]
        return stats.chi2_contingency(np.array(table)).pvalue

    assert two_sample(exact, batch) > ALPHA
    assert two_sample(exact, wrong) < 1e-6


# --- the privacy argument, checked numerically on small instances ------------------------------


def test_normaliser_is_largest_at_integer_shifts():
    """The lemma behind both the Renyi bound and the tail bound (docs/noise.md)."""
    for s2 in (0.05, 0.3, 1.0, 2.5, 40.0):
        xs = np.arange(-400, 401)
        at0 = np.exp(-(xs**2) / (2 * s2)).sum()
        for c in np.linspace(-1.5, 1.5, 61):
            assert np.exp(-((xs - c) ** 2) / (2 * s2)).sum() <= at0 * (1 + 1e-12)


def _log_release_law(y: np.ndarray, s2: float, grid_pts: np.ndarray) -> np.ndarray:
    """log P(output = j) for input y (in steps, one entry per coordinate): random rounding of
    each coordinate, then independent N_Z(0, s2), on the points grid_pts (shape (N, n))."""
    from scipy.special import logsumexp

    support = np.arange(-400, 401)
    log_norm = logsumexp(-(support**2) / (2 * s2))
    out = np.zeros(len(grid_pts))
    for i, yi in enumerate(y):
        low, f = math.floor(yi), yi - math.floor(yi)
        lp = lambda c: -((grid_pts[:, i] - c) ** 2) / (2 * s2) - log_norm  # noqa: E731
        out += lp(low) if f == 0 else np.logaddexp(math.log(1 - f) + lp(low), math.log(f) + lp(low + 1))
    return out


@pytest.mark.parametrize("n,rho", [(1, F(1, 2)), (1, F(8)), (2, F(1, 2)), (2, F(4))])
def test_renyi_divergence_of_the_construction_is_at_most_alpha_rho(n, rho):
    """m = 0, so neighbours move by an L2 distance of at most one step; K = 1 + ceil(sqrt(n))
    and sigma_g^2 = K^2 / (2 rho) as in the plan. For fractional and whole moves, and several
    orders, D_alpha(M(y) || M(y + t)) <= alpha * rho."""
    from scipy.special import logsumexp

    k = grid.gaussian_shift_bound(0, n)
    s2 = float(F(k * k) / (2 * rho))
    axis = np.arange(-60, 61)
    pts = np.stack(np.meshgrid(*[axis] * n, indexing="ij"), -1).reshape(-1, n)
    gen = np.random.default_rng(5)
    moves = [np.eye(n)[0], -np.eye(n)[0], np.full(n, 1 / math.sqrt(n)), np.full(n, 0.3)]
    moves += [v / max(1.0, np.linalg.norm(v)) for v in gen.normal(size=(6, n))]
    for y in [np.zeros(n), gen.random(n), gen.random(n) * 3]:
        a = _log_release_law(y, s2, pts)
        for t in moves:
            assert np.linalg.norm(t) <= 1 + 1e-12
            b = _log_release_law(y + t, s2, pts)
            for alpha in (1.5, 2.0, 8.0, 32.0):
                d = logsumexp(alpha * a + (1 - alpha) * b) / (alpha - 1)
                assert d <= alpha * float(rho) * (1 + 1e-9)


# --- the plan: public, exact, minimal ---------------------------------------------------------


def test_plan_for_one_number_at_rho_one_half():
    plan = plan_gaussian(F(1), F(1, 2))
    # (b) 2**m >= 4096 * ceil(sqrt(1)) -> m = 12; (a) sigma_g = 4097 / 1 >= 4096 holds
    assert plan.granularity == F(1, 4096) and plan.shift_bound == 4097
    assert plan.grid_sigma2 == F(4097**2)
    assert plan.sigma2 == F(4097**2, 4096**2)  # sigma 1 + 1/4096, the calibration S/sqrt(2 rho) = 1


@pytest.mark.parametrize("n,c", [(1, 1), (2, 2), (4, 2), (5, 3), (10**12, 10**6), (10**12 + 1, 10**6 + 1)])
def test_shift_bound_uses_the_exact_ceiling_of_sqrt_n(n, c):
    assert grid.ceil_sqrt(F(n)) == c
    m = grid.gaussian_grid_bits(F(1, 2), n)
    assert plan_gaussian(F(3), F(1, 2), n).shift_bound == 2**m + c


def test_ceil_sqrt_of_fractions():
    assert grid.ceil_sqrt(F(0)) == 0 and grid.ceil_sqrt(F(1, 10**9)) == 1
    assert grid.ceil_sqrt(F(9, 4)) == 2 and grid.ceil_sqrt(F(4)) == 2 and grid.ceil_sqrt(F(401, 100)) == 3


@settings(max_examples=300, deadline=None)
@given(
    rho=st.fractions(min_value=F(1, 10**6), max_value=10**9, max_denominator=10**6),
    n=st.integers(min_value=1, max_value=10**7),
    sens=st.fractions(min_value=F(1, 1000), max_value=1000, max_denominator=1000),
)
def test_plan_is_the_smallest_grid_meeting_both_conditions(rho, n, sens):
    plan = plan_gaussian(sens, rho, n)
    m = grid.gaussian_grid_bits(rho, n)
    c = grid.ceil_sqrt(F(n))

    def ok(bits: int) -> bool:
        k = 2**bits + c
        return F(k * k) / (2 * rho) >= F(2 ** (2 * GRID_BITS)) and 2**bits >= 2**GRID_BITS * c

    assert ok(m) and (m == 0 or not ok(m - 1))
    assert plan.granularity == sens / 2**m and plan.shift_bound == 2**m + c
    assert plan.grid_sigma2 == F(plan.shift_bound**2) / (2 * rho)
    # the noise is within a relative 2**-11 of the continuous calibration S^2 / (2 rho)
    assert sens**2 / (2 * rho) < plan.sigma2 <= sens**2 / (2 * rho) * (1 + F(1, 2**GRID_BITS)) ** 2


def test_plan_and_release_depend_on_public_inputs_only():
    rng = RandomSource.seeded(10)
    a = gaussian_release([0.0, 0.0, 0.0], F(2), F(1, 8), rng)
    b = gaussian_release([1e9, -5.5, float("nan")], F(2), F(1, 8), rng)
    plan = plan_gaussian(F(2), F(1, 8), 3)
    for r in (a, b):
        assert (r.sigma2, r.granularity, r.rho, r.l2_sensitivity) == (plan.sigma2, plan.granularity, F(1, 8), F(2))
    assert plan_gaussian(F(2), F(1, 8), 3) == plan  # a pure function
    assert plan_gaussian(F(2), F(1, 8), 4) == plan  # ceil(sqrt(4)) = ceil(sqrt(3))
    assert plan_gaussian(F(2), F(1, 8), 5) != plan  # the dimension is public and counts


# --- the release -----------------------------------------------------------------------------


def _steps(values, step: F) -> np.ndarray:
    out = []
    for v in values:
        k = F(v) / step
        assert k.denominator == 1  # every output is a grid point
        out.append(int(k))
    return np.array(out)


def release_pvalue(steps: np.ndarray, y: F, grid_sigma2: float, bins: int = 30) -> float:
    """Chi-square of outputs (in steps) against floor(y) + Bernoulli(frac(y)) + N_Z(0, s2)."""
    low, f = math.floor(y), float(y - math.floor(y))
    support = dgauss_support(grid_sigma2)
    base = dgauss_pmf(support, grid_sigma2)
    pmf = (1 - f) * base + f * np.concatenate([[0.0], base[:-1]])
    return law_pvalue(steps - low, support, pmf, bins)


def test_release_has_the_claimed_law_and_sigma():
    sens, rho, x = F(1), F(1, 2), 0.3
    rng = RandomSource.seeded(21)
    rels = [gaussian_release(x, sens, rho, rng) for _ in range(6000)]
    plan = plan_gaussian(sens, rho)
    assert all(isinstance(r, GaussianRelease) and r.sigma2 == plan.sigma2 for r in rels)
    z = _steps([r.value for r in rels], plan.granularity)
    y = F(x) / plan.granularity
    assert release_pvalue(z, y, float(plan.grid_sigma2)) > ALPHA
    assert release_pvalue(z, y, float(plan.grid_sigma2) * 1.12**2) < 1e-6
    errors = np.array([r.value - x for r in rels])
    assert abs(errors.mean()) < 4 * math.sqrt(1 / len(errors))  # unbiased, sigma ~ 1
    assert 0.95 < errors.std() < 1.05


class _CoinsOnly:
    """A scripted source for the rounding coin alone (the noise is patched to 0)."""

    def __init__(self, script):
        self.script, self.widths = list(script), []

    def randbelow(self, n):
        self.widths.append(n)
        if not self.script:
            raise LookupError(n)
        return self.script.pop(0)


def test_release_rounding_is_exact_and_unbiased(monkeypatch):
    """With the noise set to 0, enumerate the rounding coin: the output is floor(y) or
    floor(y) + 1 steps with probabilities 1 - frac(y) and frac(y) exactly, and its expectation
    is the input exactly (as rationals)."""
    monkeypatch.setattr(noise, "_discrete_gaussian", lambda p, q, t, rng: 0)
    x = 0.3
    plan = plan_gaussian(F(1), F(1, 2))
    y = F(x) / plan.granularity
    den = y.denominator
    probe = _CoinsOnly([])
    with pytest.raises(LookupError):
        gaussian_release(x, F(1), F(1, 2), probe)
    assert probe.widths == [den]  # a single coin randbelow(den)
    dist: dict[F, F] = {}
    for c in range(den) if den < 2**20 else []:
        out = gaussian_release(x, F(1), F(1, 2), _CoinsOnly([c])).value
        dist[F(out)] = dist.get(F(out), F(0)) + F(1, den)
    if not dist:  # enumerate by the two intervals of the coin instead: c < rem goes up
        low, rem = divmod(y.numerator, den)
        up = F(gaussian_release(x, F(1), F(1, 2), _CoinsOnly([rem - 1])).value)
        down = F(gaussian_release(x, F(1), F(1, 2), _CoinsOnly([rem])).value)
        dist = {up: F(rem, den), down: F(den - rem, den)}
    g = plan.granularity
    low = math.floor(y)
    assert dist == {low * g: 1 - (y - low), (low + 1) * g: y - low}
    assert sum(v * p for v, p in dist.items()) == F(x)


def test_vector_release_noise_per_coordinate():
    sens, rho, xs = F(2), F(1, 4), [1.25, -7.1, 1e6]
    rng = RandomSource.seeded(22)
    plan = plan_gaussian(sens, rho, 3)
    assert plan.shift_bound == 2 ** grid.gaussian_grid_bits(rho, 3) + 2
    rels = [gaussian_release(xs, sens, rho, rng) for _ in range(3000)]
    assert all(isinstance(r.values, tuple) and len(r.values) == 3 for r in rels)
    cols = [_steps([r.values[i] for r in rels], plan.granularity) for i in range(3)]
    for i, x in enumerate(xs):
        assert release_pvalue(cols[i], F(x) / plan.granularity, float(plan.grid_sigma2), bins=20) > ALPHA
    # independent coordinates: no correlation beyond chance
    corr = np.corrcoef(np.array(cols, dtype=float))
    assert np.all(np.abs(corr[np.triu_indices(3, 1)]) < 4 / math.sqrt(len(rels)))
    arr = gaussian_release(np.array([5.0, 6.0]), sens, rho, rng)
    assert isinstance(arr.values, tuple) and len(arr.values) == 2
    assert isinstance(gaussian_release(np.float64(2.0), 1, 1, rng).values, float)
    with pytest.raises(TypeError):
        _ = rels[0].value


def test_zero_sensitivity_releases_exactly_and_draws_nothing():
    class NoRandomness:
        def randbelow(self, n):
            raise AssertionError("drew randomness for a public value")

        randbits = randbelow

    r = gaussian_release([0.1, 7.0], F(0), F(1), NoRandomness())
    assert r.values == (0.1, 7.0) and r.sigma2 == 0 and r.sigma == 0.0 and r.granularity == 0
    assert r.accuracy() == 0 and r.joint_accuracy() == 0
    assert gaussian_release(2.5, 0, F(1, 3), NoRandomness()).value == 2.5
    b = gaussian_release_batch([0.1, 7.0], F(0), F(1), 4, RandomSource.seeded(1))
    assert b.shape == (4, 2) and np.all(b == [0.1, 7.0])
    assert np.all(gaussian_release_batch(2.5, F(0), F(1), 3, RandomSource.seeded(1)) == 2.5)


def test_non_finite_values_saturate_like_laplace():
    """An error would depend on private data: +-inf clamp to the float range, NaN becomes 0."""
    rng = RandomSource.seeded(6)
    inf = float("inf")
    one, big, small, nan0 = gaussian_release([1.0, inf, -inf, float("nan")], F(1), F(10), rng).values
    assert abs(one - 1.0) < 2 and big > 1e307 and small < -1e307 and abs(nan0) < 2
    huge = gaussian_release(1.7976931348623157e308, F(10**300), F(1), rng)
    assert huge.value > 1e307 or math.isinf(huge.value)


def test_seeded_releases_reproduce():
    def run(seed):
        r = RandomSource.seeded(seed)
        return (
            gaussian_release([1.5, -2.0], F(1), F(1, 2), r).values,
            sample_discrete_gaussian(F(10), r),
            sample_discrete_gaussian_batch(F(10), 5, r).tolist(),
            gaussian_release_batch(0.3, F(1), F(1), 5, r).tolist(),
        )

    assert run(11) == run(11) and run(11) != run(12)


# --- accuracy ------------------------------------------------------------------------------------


def test_accuracy_is_an_upper_bound_on_the_stated_formula():
    r = gaussian_release([0.0, 1.0, 2.0, 3.0], F(1), F(1, 2), RandomSource.seeded(1))
    g, s2 = r.granularity, r.sigma2
    for beta in (F(1, 20), F(1, 1000), 0.3, F(1, 10**12)):
        exact = math.sqrt(float(s2)) * math.sqrt(2 * math.log(2 / float(beta))) + float(g)
        a = r.accuracy(beta)
        assert isinstance(a, F) and exact <= a <= exact * (1 + 1e-9)
        # the bound's own inequality, in exact rationals: (a/g - 1)^2 >= 2 sigma_g^2 ln(2/beta)
        assert (a / g - 1) ** 2 >= (s2 / g**2) * 2 * F(math.log(2 / float(beta)))
    assert r.joint_accuracy(F(1, 20)) == r.accuracy(F(1, 80))  # union bound over 4 coordinates
    assert r.accuracy(F(1, 1000)) > r.accuracy(F(1, 10))
    assert r.sigma >= math.sqrt(r.sigma2) and F(r.sigma) ** 2 >= r.sigma2
    assert r.sigma <= math.sqrt(float(r.sigma2)) * (1 + 1e-12)
    for bad in (0, 1, -0.5, 2, float("nan")):
        with pytest.raises(ValueError):
            r.accuracy(bad)
        with pytest.raises(ValueError):
            r.joint_accuracy(bad)
    with pytest.raises(TypeError):
        r.accuracy("0.05")


def test_accuracy_holds_on_the_exact_law():
    """P(|Z| > a/g - 1) from the exact pmf is at most beta (the rounding adds < 1 step)."""
    r = gaussian_release(0.0, F(1), F(1, 2), RandomSource.seeded(2))
    s2 = float(r.sigma2 / r.granularity**2)
    support = dgauss_support(s2)
    pmf = dgauss_pmf(support, s2)
    for beta in (F(1, 2), F(1, 20), F(1, 10**6)):
        u = float(r.accuracy(beta) / r.granularity) - 1
        assert pmf[np.abs(support) > u].sum() <= float(beta)


def test_accuracy_holds_empirically():
    beta = 0.05
    rng = RandomSource.seeded(31)
    xs = [3.0, -1.5, 0.25, 1e4, 7.0]
    rels = [gaussian_release(xs, F(1), F(1, 2), rng) for _ in range(2000)]
    a, joint = float(rels[0].accuracy(beta)), float(rels[0].joint_accuracy(beta))
    errs = np.abs(np.array([r.values for r in rels]) - np.array(xs))
    n = errs.size
    assert np.mean(errs > a) <= beta + 3 * math.sqrt(beta * (1 - beta) / n)
    assert np.mean(np.any(errs > joint, axis=1)) <= beta + 3 * math.sqrt(beta * (1 - beta) / len(rels))
    # and the statement is not vacuous: most errors are well inside it
    assert np.mean(errs > a / 2) > 0.05


# --- the batch release (auditing) ------------------------------------------------------------


def test_release_batch_has_the_same_law():
    sens, rho, x = F(1), F(1, 2), 0.3
    out = gaussian_release_batch(x, sens, rho, 100_000, RandomSource.seeded(23))
    assert out.shape == (100_000,) and out.dtype == np.float64
    plan = plan_gaussian(sens, rho)
    z = _steps(out.tolist(), plan.granularity)
    y = F(x) / plan.granularity
    assert release_pvalue(z, y, float(plan.grid_sigma2), bins=50) > ALPHA
    assert release_pvalue(z, y, float(plan.grid_sigma2) * 1.05**2, bins=50) < 1e-6


def test_release_batch_on_vectors_uses_the_vector_plan():
    xs = [1.0, -2.0, 3.5]
    out = gaussian_release_batch(xs, F(2), F(1, 4), 20_000, RandomSource.seeded(24))
    plan = plan_gaussian(F(2), F(1, 4), 3)
    assert out.shape == (20_000, 3)
    for i, x in enumerate(xs):
        z = _steps(out[:, i].tolist(), plan.granularity)
        assert release_pvalue(z, F(x) / plan.granularity, float(plan.grid_sigma2), bins=30) > ALPHA
    assert np.all(np.abs(out.mean(axis=0) - xs) < 4 * math.sqrt(float(plan.sigma2) / len(out)))


# --- refusals ------------------------------------------------------------------------------------

R = RandomSource.seeded(0)


@pytest.mark.parametrize(
    "rho,exc",
    [(0, ValueError), (F(-1), ValueError), (-2, ValueError), (float("inf"), ValueError),
     (float("nan"), ValueError), (0.5, TypeError), ("1", TypeError), (True, TypeError)],
)
def test_bad_rho_rejected_everywhere(rho, exc):
    calls = [
        lambda: gaussian_release(1.0, F(1), rho, R),
        lambda: gaussian_release([1.0, 2.0], F(0), rho, R),  # even with nothing to noise
        lambda: gaussian_release_batch(1.0, F(1), rho, 3, R),
        lambda: plan_gaussian(F(1), rho),
    ]
    for call in calls:
        with pytest.raises(exc):
            call()


@pytest.mark.parametrize("sens,exc", [(float("inf"), ValueError), (F(-1), ValueError), (0.5, TypeError)])
def test_bad_sensitivity_rejected(sens, exc):
    for call in (lambda: gaussian_release(1.0, sens, F(1), R), lambda: plan_gaussian(sens, F(1)),
                 lambda: gaussian_release_batch(1.0, sens, F(1), 3, R)):
        with pytest.raises(exc):
            call()


def test_other_bad_arguments():
    for bad in (F(0), F(-1)):
        with pytest.raises(ValueError):
            sample_discrete_gaussian(bad, R)
        with pytest.raises(ValueError):
            sample_discrete_gaussian_batch(bad, 3, R)
    with pytest.raises(TypeError):
        sample_discrete_gaussian(2.5, R)
    with pytest.raises(TypeError):
        sample_discrete_gaussian_batch(2.5, 3, R)
    with pytest.raises(ValueError):
        sample_discrete_gaussian_batch(F(2) ** 99, 3, R)
    for n in (-1, 1.5, True):
        with pytest.raises(ValueError):
            sample_discrete_gaussian_batch(F(1), n, R)
        with pytest.raises(ValueError):
            gaussian_release_batch(1.0, F(1), F(1), n, R)
    for n in (0, -1, 2.0, True):
        with pytest.raises(ValueError):
            plan_gaussian(F(1), F(1), n)
    with pytest.raises(ValueError):
        gaussian_release(np.zeros((2, 2)), F(1), F(1), R)
    with pytest.raises(TypeError):
        gaussian_release("12", F(1), F(1), R)
    assert sample_discrete_gaussian_batch(F(3), 0, R).shape == (0,)


def test_per_run_gaussian_releases_follow_each_runs_own_input():
    """gaussian_release_runs (auditing only): run i releases values[i] with the plan of its
    dimension and the law gaussian_release_batch gives that input alone; inputs of different
    dimensions are refused."""
    from fuzzpy.runtime.noise import gaussian_release_runs

    values = [(F(1, 3), 2.5), (-4, F(7, 2))] * 1000
    out = gaussian_release_runs(values, F(1), F(1, 2), RandomSource.seeded(2))
    assert out.shape == (2000, 2)
    for j, v in enumerate(values[:2]):
        alone = gaussian_release_batch(list(v), F(1), F(1, 2), 1000, RandomSource.seeded(3 + j))
        for c in range(2):
            assert stats.ks_2samp(out[j::2, c] - float(v[c]), alone[:, c] - float(v[c])).pvalue > ALPHA
    scalars = gaussian_release_runs([0.25, 9], F(0), F(1), RandomSource.seeded(1))
    assert scalars.tolist() == [0.25, 9.0]
    with pytest.raises(ValueError):
        gaussian_release_runs([(1, 2), (3,)], F(1), F(1), RandomSource.seeded(1))
