"""Vectors at run time: the exact clip keeps its promises (norm at most c, 1-Lipschitz, exact),
the float clip of row functions never exceeds the norm, vsum's total moves by at most c when a
row is added, and the vectorised and row-by-row paths agree."""

from __future__ import annotations

import random
from fractions import Fraction as F

import numpy as np
import pytest
from check_and_run import check, make_tables

from fuzzpy.primitives.vectors import _tangent_factor, clip_exact
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.kernels.vectors import clip_rows
from fuzzpy.runtime.samplers import RandomSource


def _norm2(v) -> F:
    return sum((F(x) ** 2 for x in v), F(0))


def _random_vector(rng: random.Random, n: int, scale: float) -> tuple:
    return tuple(F(rng.uniform(-scale, scale)).limit_denominator(10 ** 6) for _ in range(n))


@pytest.mark.parametrize("scale", [0.5, 3, 1e3, 1e30])
def test_exact_clip_bounds_the_norm_and_is_1_lipschitz(scale):
    rng = random.Random(int(scale) % 1000 + 7)
    c = F(2)
    for _ in range(300):
        n = rng.randint(1, 5)
        u = _random_vector(rng, n, scale)
        # a second point near the first (sometimes across a tangent breakpoint), or far away
        step = rng.choice([1e-9, 1e-3, 1.0]) * max(scale, 1)
        v = tuple(x + F(rng.uniform(-step, step)).limit_denominator(10 ** 9) for x in u)
        cu, cv = clip_exact(c, u), clip_exact(c, v)
        assert _norm2(cu) <= c * c and _norm2(cv) <= c * c
        assert _norm2([a - b for a, b in zip(cu, cv)]) <= _norm2([a - b for a, b in zip(u, v)])
        if _norm2(u) <= c * c:
            assert cu == u  # the identity inside the ball


def test_exact_clip_is_within_3e_5_of_the_projection_and_continuous_at_breakpoints():
    for t in [1.0001, 1.5, 2, 3.99, 4, 1000, 1e40]:
        phi = _tangent_factor(F(t) ** 2)
        assert 1 - F(3, 100000) <= phi * F(t) <= 1  # norm after the clip, relative to c
    # the grid's own points: consecutive tangents meet without a jump
    g = 1 + F(17, 256)
    for eps in (F(1, 10 ** 12), F(-1, 10 ** 12)):
        assert abs(_tangent_factor((g + eps) ** 2) - _tangent_factor(g ** 2)) < F(1, 10 ** 11)


def test_float_clip_never_exceeds_the_norm():
    rng = np.random.default_rng(3)
    c = 1.0
    rows = [rng.normal(size=(2000, 7)) * s for s in (1e-300, 1e-3, 0.4, 1.0, 3.0, 1e150, 1e300)]
    near = rng.normal(size=(2000, 7))
    near /= np.linalg.norm(near, axis=1, keepdims=True)  # norm 1 up to float rounding, both sides
    near *= 1 + rng.uniform(-1e-15, 1e-15, size=(2000, 1))
    bad = np.array([[np.nan, 1.0, 0, 0, 0, 0, 0], [np.inf, 0, 0, 0, 0, 0, 0], [1e308, 1e308, 0, 0, 0, 0, 0]])
    out = clip_rows(np.vstack(rows + [near, bad]), c)
    assert np.isfinite(out).all()
    assert max(_norm2(row) for row in out) <= F(c) ** 2  # exact norms of the float results
    assert (out[-3:-1] == 0).all()  # a missing or infinite coordinate: the row counts as 0


@pytest.mark.parametrize("n", [1, 3, 5, 7, 8, 9, 16])
def test_float_clip_is_the_same_floats_for_either_memory_layout(n):
    """The batched runtime builds its row matrices row-major, the reference one column-major:
    clip_rows sums each row's squares in coordinate order whatever the layout (numpy sums a
    row-major row of 8 or more pairwise), so both clip to the same bits.  The result is the
    clip's formula with the squares added left to right."""
    rng = np.random.default_rng(n)
    x = rng.normal(size=(4000, n)) * np.exp(rng.uniform(-5, 5, size=(4000, 1)))
    x[rng.random(x.shape) < 0.01] = np.nan
    x[rng.random(x.shape) < 0.01] = -0.0
    x[0, 0], x[1, -1], x[2, 0] = np.inf, 5e-324, 1e300
    row_major = clip_rows(np.ascontiguousarray(x), 2.0)
    assert row_major.tobytes() == clip_rows(np.asfortranarray(x), 2.0).tobytes()
    with np.errstate(all="ignore"):
        y = np.where(np.isfinite(x).all(axis=1, keepdims=True), x, 0.0)
        big = np.abs(y).max(axis=1, keepdims=True)
        safe = np.where(big > 0, big, 1.0)
        squares = (y / safe) ** 2
        total = squares[:, 0].copy()
        for j in range(1, n):
            total = total + squares[:, j]
        norm = big[:, 0] * np.sqrt(total)
        limit = 2.0 * (1 - 2.0 ** -30)
        want = y * np.where(norm > limit, limit / np.where(norm > 0, norm, 1.0), 1.0)[:, None]
    assert row_major.tobytes() == want.tobytes()
    assert clip_rows(np.zeros((3, 0)), 1.0).shape == (3, 0)


SRC = ("function main (db : bag T) : fuzzy vec[3] {\n"
       "  gaussian 1000000000000000000000000000000 (vsum 2 (fun r -> vec (r.x, r.n, if r.flag then 1 else 0)) db) }")


@pytest.fixture
def load(tmp_path):
    return make_tables(tmp_path)


def _exact_sum(report, table, vectorise=True):
    """The released total with negligible noise (sigma ~ 1e-15) and the exact unnoised sum."""
    res = run_program(report.entry_instance, {"db": table}, RandomSource.seeded(1), vectorise=vectorise)
    return res


def test_vsum_vectorised_and_row_by_row_agree_and_each_row_moves_it_by_at_most_c(load):
    r = check(SRC)
    assert r.ok
    rows = "".join(f"{x},a,{'true' if x % 2 else 'false'},{n}\n" for x, n in [(1, 0), (9, 5), (0.5, 1), (10, 5), (3, 3)])
    base = load(rows, r)
    values = {vec: _exact_sum(r, base, vec).value for vec in (True, False)}
    assert values[True] == values[False]
    extra = load(rows + "10,b,true,5\n", r)
    moved = [F(a) - F(b) for a, b in zip(_exact_sum(r, extra).value, values[True])]
    assert _norm2(moved) <= 4  # c = 2, with the noise of sigma ~ 1e-15 included
    expected = np.array([10, 5, 1.0]) * 2 / np.linalg.norm([10, 5, 1.0])
    assert np.allclose([float(m) for m in moved], expected, atol=1e-6)


def test_a_row_function_that_fails_counts_as_zero(load):
    src = ("function deep (k : num) (i : int) : num { if i <= 0 then k else deep k (i - 1) }\n"
           "function main (db : bag T) : fuzzy vec[1] {\n"
           "  gaussian 1000000000000000000000000000000 (vsum 100 (fun r -> vec (deep r.x (r.n * 100000))) db) }")
    r = check(src)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    out = _exact_sum(r, load("4,a,true,0\n7,a,true,5\n", r)).value
    assert abs(float(out[0]) - 4) < 1e-6  # the second row exceeds its call budget: 0


def test_vector_primitives_on_exact_numbers_are_exact():
    from fuzzpy.primitives.registry import lookup

    def run(name, *args):
        return lookup(name).run(*args)

    u, v = (F(1, 3), F(2)), (F(1, 7), F(-5, 2))
    assert run("vadd", u, v) == (F(10, 21), F(-1, 2)) and run("vsub", u, v) == (F(4, 21), F(9, 2))
    assert run("vscale", F(3), u) == (F(1), F(6)) and run("vdot", u, v) == F(1, 21) - 5
    assert run("vget", F(2), v) == F(-5, 2) and run("vtuple", (F(4),)) == F(4) and run("vec", F(1)) == (F(1),)
    assert run("vclip", F(5), (F(3), F(4))) == (F(3), F(4))
    out = run("vclip", F(5), (F(6), F(8)))
    assert all(isinstance(x, F) for x in out) and out[0] / out[1] == F(3, 4) and _norm2(out) <= 25
    # in a row function (floats, or columns) the same primitives compute in floats
    cols = run("vclip", 1.0, (np.array([3.0, 0.1]), np.array([4.0, 0.1])))
    assert np.allclose(cols[0], [0.6, 0.1]) and np.allclose(cols[1], [0.8, 0.1])


def test_constant_vectors_are_folded_by_the_checker():
    r = check("function main (db : bag T) : fuzzy (vec[2], num) "
              "{ return (vclip 5 (vadd (vec (3, 4)) (vec (3, 4))), vdot (vec (1, 2)) (vec (3, 4))) }")
    assert r.ok and r.inputs[0].epsilon == 0


def test_row_matrix_reads_number_columns_directly_and_coerces_the_others():
    """A row function's vectors as a float matrix: columns that are numbers already (floats with
    -0.0, NaN and infinities, ints, bools) are read as they are, exactly as coercing each with
    pandas.to_numeric reads them; a column of anything else is still coerced (text -> NaN)."""
    import math

    import pandas as pd

    from fuzzpy.runtime.vectorize import row_matrix as _row_matrix

    floats = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1.5]
    numbers = pd.DataFrame({0: floats, 1: [1, -2, 3, 0, 7, 2**53 + 1, -5], 2: [True, False] * 3 + [True]})
    coerced = numbers.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    got = _row_matrix(numbers, 3)
    assert got.dtype == np.float64 and got.tobytes() == coerced.tobytes()  # bit for bit, -0.0 included
    mixed = pd.DataFrame({0: floats, 1: ["1.5", "x", None, 2, 3.0, "nan", True]})
    out = _row_matrix(mixed, 2)
    assert out[:, 0].tobytes() == np.array(floats).tobytes()
    assert out[0, 1] == 1.5 and math.isnan(out[1, 1]) and math.isnan(out[2, 1]) and out[3, 1] == 2.0


def test_number_columns_become_the_matrix_the_frame_gives():
    """A pair evaluation's vector rows straight to a float matrix (vectorize.number_matrix): the
    same bits as building the frame and reading it (`to_frame`, `_row_matrix`), for float
    columns with -0.0, NaN and infinities, int and bool columns and number constants; anything
    else (a Series, text, a Fraction, a large int, a column of another length, another size)
    goes through the frame."""
    import math
    from fractions import Fraction

    import pandas as pd

    from fuzzpy.runtime.vectorize import Vec, number_matrix, to_frame
    from fuzzpy.runtime.vectorize import row_matrix as _row_matrix

    n = 7
    floats = np.array([0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1.5])
    ints = np.array([1, -2, 3, 0, 7, 2**53 + 1, -5])
    bools = np.array([True, False] * 3 + [True])
    out = (Vec(floats), Vec(ints), Vec(bools), 2.5, True, Vec(np.float32(0.1)), -3, Vec(-0.0))
    got = number_matrix(out, n, len(out))
    want = _row_matrix(to_frame(out, n), len(out))
    assert got is not None and got.shape == (n, len(out)) and got.tobytes() == want.tobytes()
    for other in (Vec(pd.Series(floats)), Vec(np.array(["a"] * n)), Fraction(1, 3), 2**60, Vec(floats[:3]), None):
        assert number_matrix((Vec(floats), other), n, 2) is None
    assert number_matrix((Vec(floats), Vec(ints)), n, 3) is None and number_matrix((), 0, 0) is None
