"""Exact rationals of many runs at once (fuzzpy/runtime/ratios.py) and the batched evaluator's
arithmetic on them: every value read back must be the Fraction (or nearest float) the exact
scalar fold gives, lane by lane, whatever the representation (unreduced, reduced by gcd)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fuzzpy.primitives.registry import lookup
from fuzzpy.runtime import ratios as R
from fuzzpy.runtime.batch import LaneEvaluator, Lanes, select_lanes, unlane
from fuzzpy.runtime.interpreter import Interpreter, RunState
from fuzzpy.runtime.kernels.arith import _b_numeric
from fuzzpy.runtime.noise import _grid_split, _grid_split_ratios, _grid_split_scaled, laplace_release_runs
from fuzzpy.runtime.numbers import as_float
from fuzzpy.runtime.ratios import ExactColumns, Ratios
from fuzzpy.runtime.samplers import RandomSource

# Finite floats and exact numbers of every kind a run holds: released floats (subnormal, huge,
# signed zeros), exact Fractions with large terms, ints beyond int64.
POOL = [0.0, -0.0, 1.5, -2.25, 0.1, 1e308, -1e308, 5e-324, 3e-310, 2.0**60, 1234.5, -7.0,
        Fraction(1, 3), Fraction(-5, 2), Fraction(10**40, 7), Fraction(-1, 10**40), 0, 7, -(10**30), 10**400,
        Fraction(2**1024 - 1, 3)]


def _lanes(rng, n):
    return [POOL[i] for i in rng.integers(0, len(POOL), n)]


def _reference(ev, name, xs, ys):
    prim = lookup(name)
    return [Interpreter.call_prim(ev, prim, None, [x, y]) for x, y in zip(xs, ys)]


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "max", "min", "lt", "le", "gt", "ge", "eq", "ne"])
def test_exact_lane_arithmetic_is_the_scalar_fold(name):
    """Lane by lane the same value and type as the scalar run: Fractions for + - * / max min
    (x / 0 = 0, 0 * x = 0), booleans for comparisons; constants on either side; chains of
    operations whose terms outgrow the reduction bound."""
    rng = np.random.default_rng(11)
    n = 300
    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), n)
    prim = lookup(name)
    xs, ys = _lanes(rng, n), _lanes(rng, n)
    ys[::7] = [0] * len(ys[::7])  # divisions by zero
    for a, b in ((Lanes(list(xs)), Lanes(list(ys))), (Lanes(list(xs)), Fraction(-3, 7)), (0.75, Lanes(list(ys)))):
        out = _b_numeric(ev, prim, None, [a, b])
        assert out is not NotImplemented
        want = _reference(ev, name, unlane(a, n), unlane(b, n))
        got = unlane(out, n)
        assert got == want and [type(v) for v in got] == [type(v) for v in want]
        if name in ("add", "sub", "mul", "div", "max", "min"):  # results as operands (signs, order)
            for then in ("lt", "max", "sub"):
                again = unlane(_b_numeric(ev, lookup(then), None, [Lanes.of_ratios(out.ratios), Fraction(1, 5)]), n)
                assert again == _reference(ev, then, want, [Fraction(1, 5)] * n)


def test_a_long_chain_reduces_and_stays_exact(monkeypatch):
    """A gradient-descent-like chain (w - s * g, s = rate / n) far past the reduction bound: the
    values read back are the Fractions of the same chain run one Fraction at a time, the floats
    are theirs, and the bound really triggered reductions."""
    reduced = []
    real = R._reduced

    def spy(num, den, bits):
        out = real(num, den, bits)
        reduced.append(bits > R.REDUCE_BITS)
        return out

    monkeypatch.setattr(R, "_reduced", spy)
    rng = np.random.default_rng(5)
    n = 40
    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), n)
    ns = [float(x) for x in rng.normal(3000, 200, n)]
    w_lane, w_ref = Lanes([Fraction(0)] * n), [Fraction(0)] * n
    s_lane = _b_numeric(ev, lookup("div"), None, [Fraction(4), Lanes(ns)])
    s_ref = [Fraction(4) / Fraction(x) for x in ns]
    for _ in range(30):
        g = [float(x) for x in rng.normal(0, 100, n)]
        w_lane = _b_numeric(ev, lookup("sub"), None, [w_lane, _b_numeric(ev, lookup("mul"), None, [s_lane, Lanes(g)])])
        w_ref = [w - s * Fraction(x) for w, s, x in zip(w_ref, s_ref, g)]
        assert w_lane._data is None  # still held as ratios
        assert w_lane.ratios.floats().tolist() == [float(w) for w in w_ref]
    assert any(reduced)
    assert w_lane.values() == w_ref


def test_floats_saturate_as_as_float():
    """The nearest float of each value (int true division is correctly rounded, unreduced or
    not), infinities past the float range as as_float gives them."""
    values = [Fraction(1, 3), Fraction(-10**400, 7), Fraction(10**400), Fraction(1, 10**400), Fraction(-1, 10**400),
              Fraction(2**1024 - 1), Fraction(7), Fraction(0)]
    r = Ratios.of_values(values)
    unreduced = Ratios(r.num * 6, r.den * 6, r.bits + 3)
    want = [as_float(v) for v in values]
    assert [str(x) for x in r.floats().tolist()] == [str(x) for x in want]
    assert [str(x) for x in unreduced.floats().tolist()] == [str(x) for x in want]


def test_quotients_are_computed_once_and_overflow_every_time():
    """num / den as floats is kept (a loop-invariant factor is read at every step): the same
    array again, with the values of a new computation; a value past the floats raises
    OverflowError at every read (strict readers refuse it), and floats() still saturates."""
    values = [Fraction(1, 3), Fraction(-7, 2), Fraction(0), Fraction(10**20, 3)]
    r = Ratios.of_values(values)
    first = r.quotients()
    assert r.quotients() is first and first.tolist() == [float(v) for v in values]
    assert r.floats().tolist() == first.tolist()
    huge = Ratios.of_values([Fraction(1), Fraction(10**400)])
    for _ in range(2):
        with pytest.raises(OverflowError):
            huge.quotients()
    assert huge.floats().tolist() == [1.0, math.inf]


def test_float_products_keep_zero_times_anything_as_zero():
    """`_mul` on float arrays (row functions, vscale on released floats): 0 * x is +0.0 for every
    x, infinities and NaN included, and any other product is IEEE's, bit for bit, whether or not
    an operand holds a zero (the product without zeros is returned as it is)."""
    from fuzzpy.runtime.kernels.arith import mul as _mul

    vals = [0.0, -0.0, 1.0, -2.5, math.inf, -math.inf, math.nan, 5e-324, 1e308, -1e-300]
    xs = np.array([a for a in vals for _ in vals])
    ys = np.array([b for _ in vals for b in vals])

    def want(x, y):
        with np.errstate(all="ignore"):
            return np.array([0.0 if a == 0 or b == 0 else a * b for a, b in zip(np.broadcast_to(x, np.shape(y) or np.shape(x)),
                                                                                  np.broadcast_to(y, np.shape(x) or np.shape(y)))])

    nonzero = xs != 0
    for x, y in ((xs, ys), (xs[nonzero], ys[nonzero]), (xs[nonzero], 3.0), (-2.0, ys), (xs, 0.0)):
        got = _mul(x, y)
        assert type(got) is np.ndarray and got.tobytes() == want(x, y).tobytes()
    assert _mul(0.0, math.inf) == 0.0 and math.copysign(1, _mul(-0.0, 5.0)) == 1.0 and _mul(2.0, 3.0) == 6.0


def test_floats_become_their_exact_ratios():
    """of_values of released floats (frexp, not reduced) is each float's exact value; an
    infinity or NaN, a bool or a string keeps the reference path (None)."""
    xs = [0.0, -0.0, 1.5, -3.25, 1e300, -1e-320, 5e-324, 2.0**60, 0.1, -1e308]
    r = Ratios.of_values(xs)
    assert [Fraction(int(p), int(q)) for p, q in zip(r.num, r.den)] == [Fraction(x) for x in xs]
    assert r.bits >= max(max(abs(int(p)).bit_length(), int(q).bit_length()) for p, q in zip(r.num, r.den))
    assert r.fractions() == [Fraction(x) for x in xs]
    for bad in ([1.0, math.inf], [math.nan], [True], ["a"], [1.0, None]):
        assert Ratios.of_values(bad) is None


def test_lane_views_and_selections_keep_the_values():
    """A lane of ratios read alone, a selection of lanes, and the whole list: the same Fractions."""
    values = [Fraction(1, 3), Fraction(-5, 2), Fraction(10**40, 7), Fraction(0)]
    lanes = Lanes.of_ratios(Ratios.of_values(values))
    assert [lanes.at(i) for i in range(4)] == values and lanes._data is None  # at() builds one
    sub = select_lanes(lanes, np.array([2, 0]), np.array([1, -1, 0, -1]))
    assert sub._data is None and sub.values() == [values[2], values[0]]
    assert len(lanes) == 4 and lanes.values() == values and lanes._data is not None


def test_grid_split_of_ratios_is_the_grid_split():
    """floor(x / step) and the fraction above it: the same floats from the ratios as from the
    values (negative values floor down, zero on the grid, huge and tiny terms)."""
    values = [Fraction(0), Fraction(1, 3), Fraction(-7, 3), 2.5, -0.1, Fraction(10**30, 7), Fraction(-1, 10**30), 12345]
    for step in (Fraction(1, 1024), Fraction(3, 7), Fraction(2**20)):
        low, frac = _grid_split(values, step)
        rlow, rfrac = _grid_split_ratios(Ratios.of_values(values), step)
        assert low.tolist() == rlow.tolist() and frac.tolist() == rfrac.tolist()


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()  # -0.0 and +0.0 differ


def test_scaled_ratios_read_and_split_as_their_integers():
    """Ratios.of_scaled (a bounded sum's grid integers x times 2**k) holds x * 2**k exactly, and
    its float fast paths (floats(), the grid split for a power-of-two step) give the object
    path's floats bit for bit: signs, zeros (-0.0 included, read as +0.0 as the integer 0 is),
    +-(2**53 - 1), exponents at both ends of the fast range and just outside it."""
    rng = np.random.default_rng(11)
    edge = [0.0, -0.0, 1.0, -1.0, 2.0**53 - 1, -(2.0**53 - 1), 3.0, -5.0]
    fast = 0
    for k in (-1080, -1001, -1000, -990, -60, -30, -1, 0, 1, 7, 40, 880, 900, 901):
        for mag in (1, 20, 53):
            x = np.array(edge + np.trunc(rng.uniform(-1, 1, 40) * 2.0**mag).tolist())
            r = R.Ratios.of_scaled(x, k)
            sub = r.take(np.arange(len(x))[::-1])  # taken before the integers are built
            assert r._num is None and sub._num is None and len(r) == len(sub) == len(x)
            one_by_one = [Lanes.of_ratios(r).at(i) for i in range(len(x))]  # builds nothing either
            assert r._num is None and one_by_one == [Fraction(int(v)) * Fraction(2) ** k for v in x.tolist()]
            plain = R.Ratios(r.num, r.den, r.bits)
            assert sub.fractions() == plain.fractions()[::-1]
            assert r.fractions() == [Fraction(int(v)) * Fraction(2) ** k for v in x.tolist()]
            assert _bits(r.floats()) == _bits(plain.floats())
            for step in (Fraction(1, 16384), Fraction(1), Fraction(2**20), Fraction(4, 2**40), Fraction(1, 2**60)):
                try:
                    want = _grid_split_ratios(plain, step)
                except OverflowError:  # beyond float range: the fast path must not be taken
                    assert _grid_split_scaled(r, step) is None
                    continue
                got = _grid_split_ratios(r, step)
                fast += _grid_split_scaled(r, step) is not None
                assert _bits(got[0]) == _bits(want[0]) and _bits(got[1]) == _bits(want[1])
    assert fast > 100  # the float path was really taken
    # a step that is not a power of two, or arithmetic on the ratios, keeps the object path
    r = R.Ratios.of_scaled(np.array([3.0, -7.0]), -4)
    assert _grid_split_scaled(r, Fraction(3, 7)) is None and r.add(r).scaled is None
    assert r.take(np.array([1])).scaled[0].tolist() == [-7.0]


@pytest.mark.parametrize("epsilon", [Fraction(1, 2), Fraction(10**12)])
def test_laplace_runs_of_ratios_draw_as_runs_of_values(epsilon):
    """Under one seed the per-run Laplace sampler gives the same releases from exact columns as
    from the same values run by run (a noiseless plan too)."""
    values = [Fraction(1, 3), Fraction(-7, 3), Fraction(0), Fraction(10**9, 7), Fraction(5)] * 20
    a = laplace_release_runs(values, Fraction(1), epsilon, RandomSource.seeded(4))
    b = laplace_release_runs(Ratios.of_values(values), Fraction(1), epsilon, RandomSource.seeded(4))
    assert a.tolist() == b.tolist()


def test_clip_on_ratio_lanes_is_the_exact_fold():
    """clip lo hi x on lanes held as ratios: min(max(x, lo), hi) by exact comparisons, at and
    past either bound, float and Fraction bounds, lo > hi; an infinite bound keeps the fold."""
    from fuzzpy.runtime.kernels.arith import _b_clip

    xs = [Fraction(5, 3), Fraction(0), Fraction(1, 10**30), Fraction(-1, 10**30), Fraction(10), Fraction(10**40, 3),
          Fraction(-7, 2), Fraction(1, 4)]
    n = len(xs)
    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), n)
    prim = lookup("clip")
    for lo, hi in ((Fraction(0), Fraction(10)), (-0.5, 0.25), (0, 0), (Fraction(3), Fraction(1)), (Fraction(1, 4), 7)):
        out = _b_clip(ev, prim, None, [lo, hi, Lanes.of_ratios(Ratios.of_values(xs))])
        assert out._data is None  # still ratios
        want = [Interpreter.call_prim(ev, prim, None, [lo, hi, x]) for x in xs]
        assert out.values() == want and all(type(v) is Fraction for v in out.values())
    assert _b_clip(ev, prim, None, [0, math.inf, Lanes.of_ratios(Ratios.of_values(xs))]) is NotImplemented


def test_merged_branches_keep_values_and_types():
    """Putting an `if`'s branches back together: tuples coordinate by coordinate, ratios and
    Fraction constants as ratios, a float or int constant lane by lane (its type kept); the
    same values as merging lane by lane."""
    from fuzzpy.runtime.batch import _merge_values

    n = 6
    left, right = np.array([0, 2, 5]), np.array([1, 3, 4])
    lr = Lanes.of_ratios(Ratios.of_values([Fraction(1, 3), Fraction(-2), Fraction(7, 9)]))
    parts = [(left, (lr, Fraction(5, 2), 1.5)), (right, (Fraction(-1, 7), Lanes([0.25, 2.0, -1.0]), 3))]
    merged = _merge_values(n, parts)
    assert merged[0]._data is None  # the Fraction coordinate stayed ratios
    got = unlane(merged, n)
    want = [None] * n
    for idx, v in parts:
        for i, x in zip(idx.tolist(), unlane(v, len(idx))):
            want[i] = x
    assert got == want
    assert [[type(x) for x in row] for row in got] == [[type(x) for x in row] for row in want]


def test_per_run_inputs_as_ratios_only_where_the_draws_are_the_same():
    """Float inputs become ratios (the same draws under one seed), except -0.0 (a noiseless
    release gives it back as it is), infinities and NaN, and values of other kinds."""
    from fuzzpy.audit.batched import _input_ratios

    xs = [0.0, 1.5, -2.25, 1e300, 3e-310]
    r = _input_ratios(Lanes(list(xs)))
    assert r is not None and r.fractions() == [Fraction(x) for x in xs]
    for bad in ([0.0, -0.0], [1.0, math.inf], [math.nan], [1.0, Fraction(1)], [True, False]):
        assert _input_ratios(Lanes(bad)) is None
    a = laplace_release_runs(xs * 20, Fraction(1), Fraction(1, 3), RandomSource.seeded(8))
    b = laplace_release_runs(Ratios.of_values(xs * 20), Fraction(1), Fraction(1, 3), RandomSource.seeded(8))
    assert a.tolist() == b.tolist()


@pytest.mark.parametrize("rho", [Fraction(1, 50), Fraction(10**12)])
def test_gaussian_runs_of_exact_columns_draw_as_runs_of_values(rho):
    """Under one seed the per-run Gaussian sampler gives the same releases from exact columns as
    from the same vectors run by run (and for numbers)."""
    from fuzzpy.runtime.noise import gaussian_release_runs

    rows = [(Fraction(1, 3), Fraction(-7, 3), Fraction(0)), (Fraction(10**9, 7), Fraction(5), Fraction(1, 8))] * 30
    cols = tuple(Ratios.of_values([r[j] for r in rows]) for j in range(3))
    a = gaussian_release_runs(rows, Fraction(1), rho, RandomSource.seeded(2))
    b = gaussian_release_runs(ExactColumns(cols, False), Fraction(1), rho, RandomSource.seeded(2))
    assert a.shape == b.shape == (60, 3) and a.tolist() == b.tolist()
    c = gaussian_release_runs([r[0] for r in rows], Fraction(1), rho, RandomSource.seeded(2))
    d = gaussian_release_runs(ExactColumns(cols[:1], True), Fraction(1), rho, RandomSource.seeded(2))
    assert c.tolist() == d.tolist()


@pytest.mark.parametrize("rho", [Fraction(1, 50), Fraction(10**12)])
def test_gaussian_runs_of_a_vector_sum_split_all_coordinates_at_once(rho):
    """Coordinates held on one grid (a vector sum's `x * 2**k`) are split together: the same
    releases, bit for bit, as from the same values held as plain ratios (split coordinate by
    coordinate, exactly), or on grids of different k; each coordinate's runs are contiguous."""
    from fuzzpy.runtime.noise import gaussian_release_runs

    rng = np.random.default_rng(5)
    xs = [np.trunc(rng.normal(0, 2.0**40, 80)) for _ in range(4)]
    xs[0][:4] = [0.0, -0.0, 2.0**53 - 1, -(2.0**53 - 1)]
    one_grid = tuple(Ratios.of_scaled(x, -30) for x in xs)
    plain = tuple(Ratios(r.num, r.den, r.bits) for r in one_grid)
    mixed = one_grid[:2] + tuple(Ratios.of_scaled(x * 2, -31) for x in xs[2:])
    # sensitivity 2: the grid step is a power of two, which the float split needs
    outs = [gaussian_release_runs(ExactColumns(cols, False), Fraction(2), rho, RandomSource.seeded(4))
            for cols in (one_grid, plain, mixed)]
    assert outs[0].shape == (80, 4) and outs[0].tobytes() == outs[1].tobytes() == outs[2].tobytes()
    assert all(col.flags["C_CONTIGUOUS"] for col in outs[0].T)


@pytest.mark.parametrize("name", ["vadd", "vsub", "vscale"])
def test_vector_arithmetic_on_ratio_and_int_lanes_is_the_scalar_runs(name):
    """vadd / vsub / vscale where the exact operand is held as ratios or int64 lanes and the
    other is released floats: the scalar runs' floats lane by lane; an exact operand too large
    for a float leaves vadd and vsub to the scalar runs (they would raise), while vscale
    saturates as as_float does."""
    from fuzzpy.runtime.kernels.vectors import _b_vector

    n = 5
    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), n)
    prim = lookup(name)
    exact = Lanes.of_ratios(Ratios.of_values([Fraction(1, 3), Fraction(-5, 2), Fraction(0), Fraction(10**30), Fraction(7)]))
    ints = Lanes(np.array([3, -4, 0, 2**60, 1], dtype=np.int64))
    floats = (Lanes([0.5, -1e308, math.inf, 2.0, -0.0]), Lanes([1.5, 3.0, -2.0, 0.0, 1e-300]))
    left = exact if name == "vscale" else (exact, ints)
    out = _b_vector(ev, prim, None, [left, floats])
    want = [Interpreter.call_prim(ev, prim, None, [lane_view_(left, i), lane_view_(floats, i)]) for i in range(n)]
    got = unlane(out, n)
    assert [[str(x) for x in g] for g in got] == [[str(x) for x in w] for w in want]
    huge = Lanes.of_ratios(Ratios.of_values([Fraction(10**400)] * n))
    big = _b_vector(ev, prim, None, [huge if name == "vscale" else (huge, ints), floats])
    if name == "vscale":
        assert unlane(big, n)[0][0] == math.inf
    else:
        assert big is NotImplemented


def lane_view_(v, i):  # one lane of a lane value, as the scalar run sees it
    from fuzzpy.runtime.batch import lane_view

    return lane_view(v, i)
