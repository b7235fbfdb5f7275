"""The linear-algebra primitives at run time (fuzzpy/runtime/kernels/linalg.py): vouter is exact on
exact numbers and the same on columns as row by row; a row's Gram share summed by vsum is the
Gram matrix and moves by at most the clip bound; min_eigenvalue and ridge_solve are numpy's
results on the symmetric part, and never fail (a singular matrix gives the least-squares
solution of smallest norm, a non-finite input NaN)."""

from __future__ import annotations

import math
from fractions import Fraction as F

import numpy as np
import pytest
from check_and_run import check, make_tables

from fuzzpy.primitives.registry import lookup
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource


def run(name, *args):
    return lookup(name).run(*args)


@pytest.fixture
def load(tmp_path):
    return make_tables(tmp_path)


def test_vouter_is_exact_on_exact_numbers_and_elementwise_on_columns():
    assert run("vouter", (F(1, 3), F(-2))) == (F(1, 9), F(-2, 3), F(-2, 3), F(4))
    cols = run("vouter", (np.array([1.0, 0.5]), np.array([2.0, -4.0])))
    assert [list(c) for c in cols] == [[1.0, 0.25], [2.0, -2.0], [2.0, -2.0], [4.0, 16.0]]


# noise of standard deviation ~1e-15: the released value is the exact sum up to it
SRC = ("function main (db : bag T) : fuzzy vec[4] {\n"
       "  gaussian 1000000000000000000000000000000 (vsum 2 (fun r -> vouter (vec (r.x / 10, r.n / 5))) db) }")


def test_a_gram_matrix_summed_by_vsum_is_the_same_vectorised_and_row_by_row(load):
    r = check(SRC)
    assert r.ok
    rows = "1,a,true,0\n9,b,false,5\n0.5,c,true,1\n10,a,false,5\n3,b,true,3\n"
    table = load(rows, r)
    values = {vec: run_program(r.entry_instance, {"db": table}, RandomSource.seeded(1), vectorise=vec).value
              for vec in (True, False)}
    assert values[True] == values[False]
    x = np.array([[1, 0], [9, 5], [0.5, 1], [10, 5], [3, 3]]) / [10, 5]
    assert np.allclose([float(v) for v in values[True]], (x.T @ x).reshape(-1), atol=1e-9)


def test_a_row_beyond_the_bound_moves_the_gram_matrix_by_at_most_it(load):
    # (10/10, 5/5) has norm sqrt 2; its outer product has norm 2, the bound: summed as it is
    r = check(SRC)
    base = run_program(r.entry_instance, {"db": load("1,a,true,0\n", r)}, RandomSource.seeded(1)).value
    more = run_program(r.entry_instance, {"db": load("1,a,true,0\n10,a,true,5\n", r)}, RandomSource.seeded(1)).value
    moved = np.array([float(a) - float(b) for a, b in zip(more, base)])
    assert np.linalg.norm(moved) <= 2 + 1e-9 and np.allclose(moved, [1, 1, 1, 1], atol=1e-6)


def test_min_eigenvalue_is_that_of_the_symmetric_part():
    assert math.isclose(run("min_eigenvalue", (F(2), F(1), F(1), F(2))), 1.0)
    assert math.isclose(run("min_eigenvalue", (2.0, 3.0, -1.0, 2.0)), 1.0)   # (M + M^T)/2 = [[2, 1], [1, 2]]
    assert math.isnan(run("min_eigenvalue", (1.0, math.nan, 0.0, 1.0)))


def test_ridge_solve_solves_the_regularised_symmetric_system():
    out = run("ridge_solve", F(1), (F(3), F(0), F(0), F(1)), (F(8), F(4)))
    assert np.allclose(out, [2.0, 2.0]) and all(type(v) is float for v in out)
    assert np.allclose(run("ridge_solve", 0.0, (2.0, 3.0, -1.0, 2.0), (3.0, 3.0)), [1.0, 1.0])


def test_ridge_solve_of_a_singular_matrix_gives_the_least_squares_solution_of_smallest_norm():
    out = run("ridge_solve", 0.0, (1.0, 1.0, 1.0, 1.0), (2.0, 2.0))    # [[1, 1], [1, 1]] t = (2, 2)
    assert np.allclose(out, [1.0, 1.0])
    assert np.allclose(run("ridge_solve", 0.0, (0.0, 0.0, 0.0, 0.0), (1.0, 1.0)), [0.0, 0.0])
    assert all(math.isnan(v) for v in run("ridge_solve", math.inf, (1.0, 0.0, 0.0, 1.0), (1.0, 1.0)))


def test_sqrt_and_vsize():
    assert run("sqrt", F(9, 4)) == 1.5 and run("sqrt", -1.0) == 0.0 and math.isnan(run("sqrt", math.nan))
    assert run("vsize", (F(1), F(2), F(3))) == 3
