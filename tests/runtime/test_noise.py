"""Deterministic tests of the noise layer: randomness sources, exact probabilities (by
enumerating the samplers' random choices), the grid rule's sensitivity bound, argument checks.
Statistical goodness-of-fit tests live in test_mechanisms_statistics.py."""

from __future__ import annotations

import math
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzpy.runtime import noise
from fuzzpy.runtime.noise import (
    GRID_BITS,
    RandomSource,
    Release,
    above_threshold,
    exponential_mechanism,
    laplace_release,
    laplace_release_batch,
    plan_laplace,
    randomized_response,
    report_noisy_max,
    sample_bernoulli_exp,
    sample_discrete_laplace,
    sample_discrete_laplace_batch,
    sample_geometric_exp,
)

# --- exact enumeration of a sampler's random choices ----------------------------------------


class _Branch(Exception):
    def __init__(self, n: int) -> None:
        self.n = n


class _Scripted:
    """A stand-in RandomSource that replays a fixed prefix of choices, then asks to branch."""

    def __init__(self, script: tuple[int, ...]) -> None:
        self.script, self.widths = script, []

    def randbelow(self, n: int) -> int:
        i = len(self.widths)
        if i < len(self.script):
            self.widths.append(n)
            return self.script[i]
        raise _Branch(n)

    def randbits(self, k: int) -> int:
        return self.randbelow(2**k)


def _enumerate(fn, depth: int) -> tuple[dict, F]:
    """Exact probability of every outcome reached within `depth` random draws, and the exact
    mass of the paths still running at that depth."""
    dist: dict = {}
    unresolved = F(0)
    stack: list[tuple[int, ...]] = [()]
    while stack:
        script = stack.pop()
        src = _Scripted(script)
        try:
            out = fn(src)
        except _Branch as b:
            if len(script) >= depth:
                unresolved += F(1, math.prod(src.widths))
            else:
                stack.extend(script + (c,) for c in range(b.n))
            continue
        dist[out] = dist.get(out, F(0)) + F(1, math.prod(src.widths))
    return dist, unresolved


def _assert_brackets(dist: dict, unresolved: F, outcome, target: float) -> None:
    low = float(dist.get(outcome, F(0)))
    assert sum(dist.values()) + unresolved == 1
    assert low - 1e-15 <= target <= low + float(unresolved) + 1e-15


@pytest.mark.parametrize(
    "gamma,depth",
    [(F(1, 3), 16), (F(1), 16), (F(5, 3), 12), (F(7, 2), 16), (F(2, 7), 9)],
)
def test_bernoulli_exp_probability_is_exact(gamma, depth):
    dist, unresolved = _enumerate(lambda r: sample_bernoulli_exp(gamma, r), depth)
    assert unresolved < F(1, 1000)
    _assert_brackets(dist, unresolved, True, math.exp(-gamma))


def test_bernoulli_exp_zero_is_always_true():
    dist, unresolved = _enumerate(lambda r: sample_bernoulli_exp(F(0), r), 4)
    assert dist == {True: 1} and unresolved == 0


def test_randomized_response_keep_probability_is_exact():
    eps = F(1, 2)
    dist, unresolved = _enumerate(lambda r: randomized_response(True, eps, r), 16)
    assert unresolved < F(1, 1000)
    _assert_brackets(dist, unresolved, True, 1 / (1 + math.exp(-0.5)))


def _permute_and_flip_pmf(scores, eps: float, sens: float) -> list[float]:
    """The exact law of permute-and-flip, by summing over all visiting orders."""
    from itertools import permutations

    top = max(scores)
    p = [math.exp(eps * (q - top) / (2 * sens)) for q in scores]
    pmf = [0.0] * len(scores)
    orders = list(permutations(range(len(scores))))
    for order in orders:
        stay = 1.0
        for i in order:
            pmf[i] += stay * p[i] / len(orders)
            stay *= 1 - p[i]
    return pmf


def test_report_noisy_max_probabilities_are_exact():
    scores = [0, 2, 1]
    dist, unresolved = _enumerate(lambda r: report_noisy_max(scores, 1, F(1), r), 14)
    assert unresolved < F(1, 10**5)
    for i, target in enumerate(_permute_and_flip_pmf(scores, 1.0, 1.0)):
        _assert_brackets(dist, unresolved, i, target)


# --- RandomSource ----------------------------------------------------------------------------


def test_default_source_is_secure_and_unpredictable():
    a, b = RandomSource(), RandomSource()
    assert not a.is_seeded and not b.is_seeded
    assert a.randbits(128) != b.randbits(128)
    assert "secure" in repr(a)


def test_a_real_run_draws_from_the_secure_source(tmp_path, monkeypatch):
    """Second review round (the runtime), handled: `fuzzpy run` without --seed hands the run the
    secure source."""
    import random

    from check_and_run import ROW_A
    from cli_runs import data, fz, prog

    import fuzzpy.runtime.interpreter as interpreter

    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "env-ledger.sqlite"))  # never ~/.fuzzpy
    seen = []
    real = interpreter.start_run

    def spy(instance, tables, rng, **kw):
        seen.append(rng)
        return real(instance, tables, rng, **kw)

    monkeypatch.setattr(interpreter, "start_run", spy)
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    res = fz("run", program, "--data", data(tmp_path, ROW_A), "--budget", "1", "--ledger", tmp_path / "l.sqlite")
    assert res.exit_code == 0, res.stderr
    (rng,) = seen
    assert not rng.is_seeded and isinstance(rng._gen, random.SystemRandom)


def test_seeded_source_is_labelled_and_reproducible():
    a, b = RandomSource.seeded(7), RandomSource.seeded(7)
    assert a.is_seeded and "TESTING ONLY" in repr(a)
    assert [a.randbelow(1000) for _ in range(20)] == [b.randbelow(1000) for _ in range(20)]
    assert RandomSource.seeded(8).randbits(64) != RandomSource.seeded(7).randbits(64)


def test_randbelow_and_randbits_ranges():
    rng = RandomSource.seeded(1)
    assert {rng.randbelow(3) for _ in range(300)} == {0, 1, 2}
    assert {rng.randbelow(1) for _ in range(10)} == {0}
    assert all(0 <= rng.randbits(5) < 32 for _ in range(200))
    assert rng.randbits(0) == 0
    big = 10**40 + 7
    assert all(0 <= rng.randbelow(big) < big for _ in range(50))


@pytest.mark.parametrize("bad", [0, -3])
def test_randbelow_rejects_empty_range(bad):
    with pytest.raises(ValueError):
        RandomSource().randbelow(bad)


@pytest.mark.parametrize("seed", ["1", 1.0, True, None])
def test_seed_must_be_an_integer(seed):
    with pytest.raises(TypeError):
        RandomSource.seeded(seed)


def test_numpy_generator_follows_the_source():
    g1 = RandomSource.seeded(5).numpy_generator()
    g2 = RandomSource.seeded(5).numpy_generator()
    assert isinstance(g1, np.random.Generator)
    assert np.array_equal(g1.integers(0, 10**9, 10), g2.integers(0, 10**9, 10))
    s1, s2 = RandomSource(), RandomSource()
    assert not np.array_equal(s1.numpy_generator().integers(0, 2**62, 4),
                              s2.numpy_generator().integers(0, 2**62, 4))


def test_numpy_generator_is_one_stream_per_source():
    """Seeded once, from the source's own bits, then the same Generator: a second bulk draw
    continues the stream (it does not start it again), and the source's exact draws after it
    are those of a source that seeded one Generator."""
    src, ref = RandomSource.seeded(8), RandomSource.seeded(8)
    gen = src.numpy_generator()
    first = gen.integers(0, 2**62, 6)
    assert src.numpy_generator() is gen
    again = src.numpy_generator().integers(0, 2**62, 6)
    twin = ref.numpy_generator()
    assert np.array_equal(twin.integers(0, 2**62, 12), np.concatenate([first, again]))
    assert src.randbits(64) == ref.randbits(64)


def test_seeded_mechanisms_reproduce():
    def run(seed: int):
        r = RandomSource.seeded(seed)
        return (
            laplace_release([1.5, -2.0], F(1), F(1, 2), r).values,
            exponential_mechanism([1, 2, 3, 4], F(1), F(1), r),
            report_noisy_max([1, 2, 3, 4], F(1), F(1), r),
            above_threshold([0.1, 0.9, 0.5, 2.0], 0.5, F(1), F(1), 2, r),
            randomized_response([True, False] * 5, F(1), r),
            sample_discrete_laplace(F(10), r),
            sample_discrete_laplace_batch(F(10), 5, r).tolist(),
            laplace_release_batch(0.3, F(1), F(1), 5, r).tolist(),
        )

    assert run(11) == run(11)
    assert run(11) != run(12)


# --- the grid and the Laplace plan -----------------------------------------------------------


def test_scalar_scale_is_exactly_sensitivity_over_epsilon():
    plan = plan_laplace(F(1), F(1, 10))
    assert plan.scale == F(1) / F(1, 10) == 10
    # 2**m >= 4096 * eps = 409.6 -> m = 9; half a step of extra noise pays for random rounding
    assert plan.granularity == F(1, 512) and plan.grid_scale == 5120 + F(1, 2)
    assert plan.noise_scale == 10 + F(1, 1024)
    for sens, eps in [(F(3), F(2)), (F(1, 3), F(7, 5)), (F(100), F(1, 1000)), (F(5), F(10**6))]:
        p = plan_laplace(sens, eps)
        assert p.scale == sens / eps
        assert p.granularity <= p.scale / 2**GRID_BITS
        assert p.scale < p.noise_scale <= p.scale * (1 + F(1, 2 ** (GRID_BITS + 1)))


def test_plan_does_not_depend_on_the_number_of_coordinates():
    sens, eps = F(2), F(1, 2)
    assert {plan_laplace(sens, eps, n) for n in (1, 2, 3, 10, 10**6)} == {plan_laplace(sens, eps)}


def test_plans_are_kept_per_exact_calibration_and_inputs_are_checked_every_time():
    """A plan is computed once per (Fraction, Fraction, int) and is the plan a new computation
    gives; a float, a bool or a bad value is checked, and refused, at every call (never served
    from what an equal exact calibration left)."""
    from fuzzpy.runtime import noise

    for plan, compute in ((noise.plan_laplace, noise._plan_laplace), (noise.plan_gaussian, noise._plan_gaussian)):
        first = plan(F(3), F(1, 7), 5)
        assert plan(F(3), F(1, 7), 5) is first and first == compute(F(3), F(1, 7), 5)
        assert plan(F(3), F(1, 8), 5) == compute(F(3), F(1, 8), 5) != first
        for bad in ((3.0, F(1, 7), 5), (F(3), True, 5), (F(-3), F(1, 7), 5), (F(3), F(0), 5), (F(3), F(1, 7), True)):
            for _ in range(2):
                with pytest.raises((TypeError, ValueError)):
                    plan(*bad)


def test_tiny_epsilon_uses_the_sensitivity_as_step():
    p = plan_laplace(F(1), F(1, 10**6))
    assert p.granularity == 1 and p.grid_scale == 10**6 + F(1, 2) and p.scale == 10**6


@settings(max_examples=300, deadline=None)
@given(
    x=st.fractions(min_value=-10**6, max_value=10**6, max_denominator=10**6),
    frac=st.fractions(min_value=-1, max_value=1, max_denominator=10**4),
    sens=st.fractions(min_value=F(1, 1000), max_value=1000, max_denominator=1000),
    eps=st.fractions(min_value=F(1, 1000), max_value=50, max_denominator=1000),
)
def test_nearest_rounding_moves_at_most_2m_steps(x, frac, sens, eps):
    """The sparse vector's step: queries within `sensitivity` round to within 2**m steps."""
    k = 2 ** noise._grid_bits(eps)
    step = sens / k
    y = x + frac * sens
    assert abs(noise._to_grid(x, step) - noise._to_grid(y, step)) <= k


# --- the Laplace release's exact law and its privacy loss ----------------------------------


def _release_pmf(y: F, grid_scale: F, js: np.ndarray, random_rounding: bool = True) -> np.ndarray:
    """P(output = j steps) for input y (in steps): rounding, then discrete Laplace."""
    q = math.exp(-1 / float(grid_scale))
    dlap = lambda z: (1 - q) / (1 + q) * np.power(q, np.abs(z))  # noqa: E731
    if not random_rounding:
        return dlap(js - noise._to_grid(y, F(1)))
    low = math.floor(y)
    f = float(y - low)
    return (1 - f) * dlap(js - low) + f * dlap(js - low - 1)


def _loss(y1: F, y2: F, grid_scale: F, random_rounding: bool = True) -> float:
    """max_j |ln P(j | y1) / P(j | y2)|; beyond the window the ratio is constant."""
    lo, hi = math.floor(min(y1, y2)) - 6, math.floor(max(y1, y2)) + 7
    js = np.arange(lo, hi + 1)
    a = _release_pmf(y1, grid_scale, js, random_rounding)
    b = _release_pmf(y2, grid_scale, js, random_rounding)
    return float(np.max(np.abs(np.log(a / b))))


@settings(max_examples=300, deadline=None)
@given(
    y=st.fractions(min_value=-50, max_value=50, max_denominator=1000),
    move=st.fractions(min_value=-3, max_value=3, max_denominator=1000),
    rate=st.sampled_from([F(1), F(1, 2), F(1, 10), F(1, 4096)]),
)
def test_release_loss_is_linear_in_any_move(y, move, rate):
    """With random rounding and grid scale 1/rate + 1/2 (rate = epsilon/2**m), the loss is at
    most rate * |move| in steps for every real move: eps * t / sensitivity at distance t."""
    grid_scale = 1 / rate + F(1, 2)
    assert _loss(y, y + move, grid_scale) <= float(rate * abs(move)) * (1 + 1e-9) + 1e-12


def test_release_loss_breaks_without_random_rounding_or_the_half_step():
    rate = F(1)
    # nearest rounding: a tiny move across a rounding boundary costs a whole step
    y1, y2 = F(499, 1000), F(501, 1000)
    assert _loss(y1, y2, 1 / rate, random_rounding=False) > 400 * float(rate * (y2 - y1))
    # random rounding without the half step: the loss rate is e^rate - 1 > rate
    y1, y2 = F(0), F(1, 100)
    assert _loss(y1, y2, 1 / rate) > 1.5 * float(rate * (y2 - y1))
    assert _loss(y1, y2, 1 / rate + F(1, 2)) <= float(rate * (y2 - y1))


def test_random_rounding_probability_is_exact():
    dist, unresolved = _enumerate(lambda r: noise._round_randomly(F(7, 3), F(1, 2), r), 3)
    assert unresolved == 0 and dist == {4: F(1, 3), 5: F(2, 3)}  # 7/3 / (1/2) = 14/3
    dist, _ = _enumerate(lambda r: noise._round_randomly(F(-5, 2), F(1), r), 3)
    assert dist == {-3: F(1, 2), -2: F(1, 2)}
    dist, unresolved = _enumerate(lambda r: noise._round_randomly(F(6), F(2), r), 1)
    assert dist == {3: 1} and unresolved == 0  # on the grid: no coin at all


_EXACTS = st.fractions(max_denominator=10**30) | st.integers(-10**40, 10**40).map(F) | st.sampled_from(
    [F(0), F(-1, 3), F(2**1100, 3), F(-(2**1100), 7), F(1, 2**1100), F(3, 2**60)])
_STEPS = st.fractions(min_value=F(1, 10**20), max_value=10**20, max_denominator=10**25) | st.sampled_from(
    [F(1), F(1, 2**40), F(3, 2**41), F(2**70), F(1, 2**1100)])


@settings(max_examples=400, deadline=None)
@given(_EXACTS, _STEPS)
def test_quotient_is_the_fractions_division(x, step):
    """_round_randomly's integer division is Fraction division: the same reduced numerator
    and denominator, so the same coin is tossed on the same range."""
    q = x / step
    assert noise._quotient(x, step) == (q.numerator, q.denominator)


@settings(max_examples=400, deadline=None)
@given(st.integers(-10**320, 10**320) | st.integers(-2**60, 2**60), _STEPS)
def test_grid_float_is_the_float_of_the_grid_point(k, step):
    """A release's float is float(k * step) (saturating), bit for bit, from the integers."""
    got = noise._grid_float(k, step)
    want = noise._as_float(k * step)
    assert got == want and math.copysign(1, got) == math.copysign(1, want)


def test_release_draws_the_same_as_the_fraction_arithmetic():
    """laplace_release with the integer shortcuts gives what the Fraction arithmetic gives,
    under one seed, for numbers, pairs and values off the grid."""
    for seed, value, sens, eps in [(1, 431, F(1), F(1, 12)), (2, (331, 100), F(1), F(1, 12)),
                                   (3, F(7, 3), F(2, 3), F(5, 7)), (4, 12.625, F(1), F(10)),
                                   (5, (F(-1, 3), 2**70, -0.5), F(3), F(1, 1000))]:
        got = laplace_release(value, sens, eps, RandomSource.seeded(seed)).values
        rng = RandomSource.seeded(seed)
        plan = plan_laplace(sens, eps, 1)
        xs = [value] if not isinstance(value, tuple) else list(value)
        s = plan.grid_scale
        want = []
        for x in xs:
            y = noise._exact_value(x) / plan.granularity
            low, rem = divmod(y.numerator, y.denominator)
            k = low + (1 if rem and rng.randbelow(y.denominator) < rem else 0)
            k += noise._discrete_laplace(s.numerator, s.denominator, rng)
            want.append(float(k * plan.granularity))
        assert got == (want[0] if not isinstance(value, tuple) else tuple(want))


# --- Laplace releases ------------------------------------------------------------------------


def test_release_shapes_and_values_are_close():
    rng = RandomSource.seeded(3)
    r = laplace_release(123.25, F(1), F(100), rng)
    assert isinstance(r, Release) and isinstance(r.values, float) and r.value == r.values
    assert abs(r.value - 123.25) < r.accuracy(F(1, 10**9))
    t = laplace_release([1.0, 2.0, 3.0], F(1), F(100), rng)
    assert isinstance(t.values, tuple) and len(t.values) == 3
    assert all(abs(a - b) < 1 for a, b in zip(t.values, [1, 2, 3]))
    with pytest.raises(TypeError):
        _ = t.value
    arr = laplace_release(np.array([5.0, 6.0]), F(1), F(100), rng)
    assert len(arr.values) == 2
    assert isinstance(laplace_release(np.float64(2.0), 1, 1, rng).values, float)


def test_release_outputs_lie_on_the_grid():
    rng = RandomSource.seeded(4)
    r = laplace_release([0.1, 0.2, 1e-9], F(1), F(1, 2), rng)
    for v in r.values:
        assert (F(v) / r.granularity).denominator == 1


def test_zero_sensitivity_releases_exactly():
    r = laplace_release([0.1, 7.0], F(0), F(1), RandomSource.seeded(1))
    assert r.values == (0.1, 7.0) and r.scale == 0 and r.accuracy() == 0


def test_accuracy_formula():
    r = laplace_release(0.0, F(1), F(1, 10), RandomSource.seeded(1))
    g, s = r.granularity, r.grid_scale
    k = math.ceil(float(s) * math.log(20) * (1 + 2.0**-40))
    assert r.accuracy() == g * (k + 1)
    assert abs(float(r.accuracy()) - 10 * math.log(20)) < 0.01  # ~ scale * ln(1/beta)
    # exact tail at the returned k: P(|Z| > k) = 2 q^(k+1) / (1+q) <= beta
    q = math.exp(-1 / float(s))
    assert 2 * q ** (k + 1) / (1 + q) <= 0.05
    assert r.accuracy(F(1, 1000)) > r.accuracy(F(1, 10))
    for bad in (0, 1, -0.5, 2):
        with pytest.raises(ValueError):
            r.accuracy(bad)


def test_huge_values_saturate_instead_of_crashing():
    r = laplace_release(1.7976931348623157e308, F(10**300), F(1), RandomSource.seeded(2))
    assert r.value > 1e307 or math.isinf(r.value)


# --- mechanisms: obvious answers ---------------------------------------------------------------


def test_above_threshold_obvious_answers_and_cutoff():
    rng = RandomSource.seeded(9)
    qs = [-1000, 1000, -1000, 1000, 1000, 1000]
    assert above_threshold(qs, 0, F(1), F(1), 2, rng) == [False, True, False, True]
    assert above_threshold(qs, 0, F(1), F(1), 10, rng) == [False, True, False, True, True, True]
    assert above_threshold([-1000] * 5, 0, F(1), F(1), 1, rng) == [False] * 5
    assert above_threshold([], 0, F(1), F(1), 1, rng) == []


def test_above_threshold_zero_sensitivity_is_deterministic():
    rng = RandomSource.seeded(9)
    assert above_threshold([0, 1, 2, 3], 1, F(0), F(1), 2, rng) == [False, True, True]


def test_above_threshold_is_lazy_after_cutoff():
    def gen():
        yield 1000.0
        raise AssertionError("read past the cutoff")

    assert above_threshold(gen(), 0, F(1), F(1), 1, RandomSource.seeded(1)) == [True]


def test_selection_with_a_dominant_candidate():
    rng = RandomSource.seeded(5)
    scores = [0, 0, 10_000, 0]
    assert {exponential_mechanism(scores, F(1), F(1), rng) for _ in range(50)} == {2}
    assert {report_noisy_max(scores, F(1), F(1), rng) for _ in range(50)} == {2}


def test_selection_zero_sensitivity_picks_uniformly_among_ties():
    rng = RandomSource.seeded(5)
    picks = [exponential_mechanism([1, 3, 3, 2], F(0), F(1), rng) for _ in range(200)]
    assert set(picks) == {1, 2}
    picks = [report_noisy_max([1, 3, 3, 2], F(0), F(1), rng) for _ in range(200)]
    assert set(picks) == {1, 2}


def test_randomized_response_shapes():
    rng = RandomSource.seeded(2)
    assert isinstance(randomized_response(True, F(1), rng), bool)
    out = randomized_response(np.array([True, False, True]), F(1), rng)
    assert isinstance(out, list) and len(out) == 3 and all(isinstance(b, bool) for b in out)
    # with a huge epsilon nothing flips (flip probability e^-1000)
    assert randomized_response([True, False] * 20, F(1000), rng) == [True, False] * 20


def test_geometric_support_and_bernoulli_edge():
    rng = RandomSource.seeded(1)
    assert all(sample_geometric_exp(F(1000), rng) == 0 for _ in range(20))
    assert not any(sample_bernoulli_exp(F(10**6), rng) for _ in range(20))


def test_batch_sampler_shape_and_type():
    rng = RandomSource.seeded(1)
    a = sample_discrete_laplace_batch(F(3), 1000, rng)
    assert a.shape == (1000,) and a.dtype == np.int64
    assert sample_discrete_laplace_batch(F(3), 0, rng).shape == (0,)
    assert np.all(sample_discrete_laplace_batch(F(1, 10**6), 100, rng) == 0)
    b = laplace_release_batch(2.5, F(1), F(1), 500, rng)
    assert b.shape == (500,) and b.dtype == np.float64
    assert np.all(laplace_release_batch(2.5, F(0), F(1), 3, rng) == 2.5)
    g = plan_laplace(F(1), F(1)).granularity
    assert np.all(np.mod(b / float(g), 1) == 0)  # on the grid, like the real release


# --- bad arguments ---------------------------------------------------------------------------

R = RandomSource.seeded(0)


@pytest.mark.parametrize(
    "eps,exc",
    [(0, ValueError), (F(-1), ValueError), (-2, ValueError), (float("inf"), ValueError),
     (float("nan"), ValueError), (0.1, TypeError), ("1", TypeError), (True, TypeError)],
)
def test_bad_epsilon_rejected_everywhere(eps, exc):
    calls = [
        lambda: laplace_release(1.0, F(1), eps, R),
        lambda: exponential_mechanism([1, 2], F(1), eps, R),
        lambda: report_noisy_max([1, 2], F(1), eps, R),
        lambda: above_threshold([1.0], 0.0, F(1), eps, 1, R),
        lambda: randomized_response(True, eps, R),
        lambda: plan_laplace(F(1), eps),
    ]
    for call in calls:
        with pytest.raises(exc):
            call()


@pytest.mark.parametrize(
    "sens,exc", [(float("inf"), ValueError), (F(-1), ValueError), (0.5, TypeError)]
)
def test_bad_sensitivity_rejected_everywhere(sens, exc):
    calls = [
        lambda: laplace_release(1.0, sens, F(1), R),
        lambda: exponential_mechanism([1, 2], sens, F(1), R),
        lambda: report_noisy_max([1, 2], sens, F(1), R),
        lambda: above_threshold([1.0], 0.0, sens, F(1), 1, R),
    ]
    for call in calls:
        with pytest.raises(exc):
            call()


def test_other_bad_arguments():
    with pytest.raises(ValueError):
        exponential_mechanism([], F(1), F(1), R)
    with pytest.raises(ValueError):
        report_noisy_max([], F(1), F(1), R)
    for cutoff in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            above_threshold([1.0], 0.0, F(1), F(1), cutoff, R)
    with pytest.raises(ValueError):
        plan_laplace(F(1), F(1), 0)
    with pytest.raises(TypeError):
        randomized_response([1, 0], F(1), R)
    with pytest.raises(ValueError):
        laplace_release(np.zeros((2, 2)), F(1), F(1), R)
    with pytest.raises(TypeError):
        laplace_release("12", F(1), F(1), R)
    for bad in (F(0), F(-1)):
        with pytest.raises(ValueError):
            sample_discrete_laplace(bad, R)
        with pytest.raises(ValueError):
            sample_geometric_exp(bad, R)
        with pytest.raises(ValueError):
            sample_discrete_laplace_batch(bad, 3, R)
    with pytest.raises(ValueError):
        sample_bernoulli_exp(F(-1, 2), R)
    with pytest.raises(TypeError):
        sample_discrete_laplace(2.5, R)
    with pytest.raises(ValueError):
        sample_discrete_laplace_batch(F(1), -1, R)
    with pytest.raises(ValueError):
        laplace_release_batch(1.0, F(1), F(1), -1, R)
    with pytest.raises(ValueError):
        laplace_release_batch(1.0, F(1), F(0), 3, R)


def test_non_finite_values_saturate_instead_of_raising():
    """An error here would depend on private data, so non-finite numbers are clamped to the
    float range (1-Lipschitz) and NaN becomes 0; the run goes on and the output is still noisy."""
    rng = RandomSource.seeded(6)
    inf = float("inf")
    r = laplace_release([1.0, inf, -inf, float("nan")], F(1), F(10), rng)
    one, big, small, nan0 = r.values
    assert abs(one - 1.0) < 1 and big > 1e307 and small < -1e307 and abs(nan0) < 1
    assert exponential_mechanism([1.0, inf, 0.0], F(1), F(1), rng) == 1
    assert report_noisy_max([1.0, -inf, 0.0], F(1), F(1), rng) in (0, 2)
    assert above_threshold([inf, -inf], 0.0, F(1), F(1), 5, rng) == [True, False]


def test_per_run_laplace_releases_follow_each_runs_own_input():
    """laplace_release_runs (auditing only): run i releases values[i] with the same plan and law
    as laplace_release_batch does for that value alone (the offsets from each input compared by
    a two-sample test), on the grid; sensitivity 0 gives the inputs back."""
    from scipy import stats

    from fuzzpy.runtime.noise import laplace_release_runs

    values = [F(3, 10), 7.25, -2, F(10**20, 3)] * 1500
    out = laplace_release_runs(values, F(1), F(1, 2), RandomSource.seeded(4))
    assert out.shape == (6000,) and out.dtype == np.float64
    g = float(plan_laplace(F(1), F(1, 2)).granularity)
    assert np.all(np.mod(out / g, 1) == 0)
    for j, v in enumerate(values[:4]):
        mine = out[j::4] - float(v)
        alone = laplace_release_batch(v, F(1), F(1, 2), 1500, RandomSource.seeded(5 + j)) - float(v)
        assert stats.ks_2samp(mine, alone).pvalue > 1e-3
    assert laplace_release_runs([0.5, F(1, 3)], F(0), F(1), RandomSource.seeded(1)).tolist() == [0.5, 1 / 3]
    assert laplace_release_runs([], F(1), F(1), RandomSource.seeded(1)).shape == (0,)


@pytest.mark.parametrize("cutoff,queries", [(1, [0, 1, 2, 3, 4]), (2, [F(5, 2), 3, -1, 3.5, 2]), (3, [2, 2])])
def test_sparse_vector_batch_has_the_exact_samplers_law(cutoff, queries):
    """above_threshold_batch (auditing only) against the exact above_threshold: the frequencies
    of the answer lists agree (chi-square), and every list stops right after its cutoff-th True."""
    from collections import Counter

    from scipy import stats

    from fuzzpy.runtime.noise import above_threshold, above_threshold_batch

    n = 3000
    fast = above_threshold_batch(queries, 2, F(1), F(1), cutoff, n, RandomSource.seeded(8))
    rng = RandomSource.seeded(9)
    slow = [tuple(above_threshold(queries, 2, F(1), F(1), cutoff, rng)) for _ in range(n)]
    for out in fast:
        assert all(type(a) is bool for a in out)
        assert sum(out) <= cutoff
        assert len(out) == len(queries) if sum(out) < cutoff else out[-1]  # stops at the cutoff-th True
    ca, cb = Counter(fast), Counter(slow)
    keys = sorted(set(ca) | set(cb))
    table = np.array([[ca[k] for k in keys], [cb[k] for k in keys]])
    assert stats.chi2_contingency(table + 1).pvalue > 1e-3
    assert above_threshold_batch([], 2, F(1), F(1), 1, 4, RandomSource.seeded(1)) == [()] * 4
    assert above_threshold_batch([1, 3, 5], 2, F(0), F(1), 1, 2, RandomSource.seeded(1)) == [(False, True)] * 2
