"""linear_fit_adassp (stdlib/ml.fz): AdaSSP on any number of features.  The checker proves the
two Gaussian releases' sensitivities (bound^2 for the Gram matrix, bound for X^T y) and the
cost, rho in zCDP; unbounded or data-chosen bounds are refused; on a known linear model with
many rows the coefficients are close to the truth; a collinear, constant or empty design gives
finite coefficients (the ridge term)."""

from __future__ import annotations

import math
import random
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest
from stdlib_support import IMPORTS, ROW, errors, probe

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource

POINT = "schema Point { a : num[-1, 1], b : num[-1, 1], c : num[-1, 1], y : num[-1, 1] }\n"
FIT = "linear_fit_adassp {rho} {bound} (fun p -> {features}) (fun p -> p.y) db"
THREE = "vec (1, p.a, p.b, p.c)"
TRUTH = (0.1, 0.3, -0.4, 0.2)   # y = 0.1 + 0.3 a - 0.4 b + 0.2 c + noise


def _gauss(report):
    return sorted((m.sensitivity, m.extra["rho"]) for m in report.mechanisms if m.name == "gaussian")


def _points(n: int, seed: int, collinear: bool = False) -> list[tuple[float, float, float, float]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5)
        c = a if collinear else rng.uniform(-0.5, 0.5)
        y = TRUTH[0] + TRUTH[1] * a + TRUTH[2] * b + TRUTH[3] * c + rng.gauss(0, 0.05)
        out.append((a, b, c, max(-1.0, min(1.0, y))))
    return out


def _table(tmp_path: Path, points):
    path = tmp_path / "points.csv"
    path.write_text("a,b,c,y\n" + "".join(f"{a:.6f},{b:.6f},{c:.6f},{y:.6f}\n" for a, b, c, y in points))
    schema = check_source(POINT + "function main (db : bag Point) : fuzzy num { laplace 1 (count db) }\n",
                          "schema.fz").schemas["Point"]
    return load_table(path, schema, table="db")


def _fit(table, expr: str, size: int, seed: int):
    src = (POINT + IMPORTS + f"function main (db : bag Point) : fuzzy vec[{size}] {{ {expr} }}\n")
    report = check_source(src, "adassp.fz")
    assert not errors(report), errors(report)
    result = run_program(report.entry_instance, {"db": table}, RandomSource.seeded(seed))
    return report, np.array([float(v) for v in result.value])


def test_adassp_costs_rho_in_two_gaussian_releases_of_sensitivity_bound_squared_and_bound():
    report = probe("(db : bag Row)", "linear_fit_adassp (1/2) 3 (fun r -> vec (1, r.x / 100, r.y / 100)) "
                                     "(fun r -> r.y / 100) db")
    assert report.rho == F(1, 2) and not report.is_pure and report.epsilon == 0
    assert _gauss(report) == [(F(3), F(1, 4)), (F(9), F(1, 4))]


def test_adassp_cost_does_not_grow_with_the_number_of_features():
    four = probe("(db : bag Row)", "linear_fit_adassp 1 2 (fun r -> vec (1, r.x / 100, r.y / 100, r.x / 100)) "
                                   "(fun r -> r.y / 100) db")
    assert four.rho == 1 and _gauss(four) == [(F(2), F(1, 2)), (F(4), F(1, 2))]


def test_pure_adassp_costs_eps_in_two_laplace_releases_of_l1_sensitivity_d_bound_squared_and_sqrt_d_bound():
    from fuzzpy.primitives.vectors import sqrt_upper

    report = probe("(db : bag Row)", "linear_fit_adassp_pure (1/2) 3 (fun r -> vec (1, r.x / 100, r.y / 100, 1)) "
                                     "(fun r -> r.y / 100) db")
    assert report.epsilon == F(1, 2) and report.is_pure
    laplace = sorted((m.sensitivity, m.epsilon) for m in report.mechanisms if m.name == "laplace")
    # the Gram matrix's 16 coordinates: vtuple's sqrt(16) = 4 times its L2 sensitivity 9
    assert laplace == [(sqrt_upper(F(4)) * 3, F(1, 4)), (F(36), F(1, 4))]
    assert sqrt_upper(F(4)) == 2


@pytest.mark.parametrize("expr, code, message", [
    # the clip bound read from the data: the noise could not be calibrated before the run
    ("linear_fit_adassp 1 (count db) (fun r -> vec (1, r.x)) (fun r -> r.y) db", "E0209",
     "clip norm of vsum must be a public constant"),
    ("linear_fit_adassp 1 0 (fun r -> vec (1, r.x)) (fun r -> r.y) db", "E0213", "must be positive"),
    ("linear_fit_adassp 0 1 (fun r -> vec (1, r.x)) (fun r -> r.y) db", "E0213", "rho must be positive"),
    # features that are not a vector (a tuple has no L2 norm to clip)
    ("linear_fit_adassp 1 1 (fun r -> (1, r.x)) (fun r -> r.y) db", "E0202", "expects a vector"),
])
def test_adassp_refuses_bounds_it_cannot_calibrate_to(expr, code, message):
    report = check_source(ROW + IMPORTS + f"function main (db : bag Row) {{ {expr} }}\n", "bad.fz")
    assert any(d.code == code and message in d.message for d in report.diagnostics), errors(report)


def test_an_unclipped_gram_matrix_is_infinitely_sensitive():
    # vouter outside vsum's clip: the Gram matrix of unbounded rows has no sensitivity
    src = ROW + IMPORTS + ("function main (db : bag Row) : fuzzy vec[4] { "
                           "gaussian 1 (vouter (vec (count db, count db))) }\n")
    report = check_source(src, "bad.fz")
    assert [(d.code, d.message) for d in report.diagnostics if d.severity == "error"] == [
        ("E0305", "the argument of this mechanism has unbounded sensitivity in db")]


def test_a_gram_matrix_summed_under_vsum_costs_its_clip_bound_squared():
    # the same rows under vsum's clip: any row, however large, moves the sum by at most c
    report = probe("(db : bag Row)", "gaussian 1 (vsum 1 (fun r -> vouter (vec (r.x, r.y))) db)")
    assert report.rho == 1 and _gauss(report) == [(F(1), F(1))]


@pytest.mark.slow
def test_adassp_recovers_a_known_linear_model(tmp_path):
    table = _table(tmp_path, _points(20000, seed=3))
    for seed in (0, 1, 2):
        report, theta = _fit(table, FIT.format(rho=1, bound=2, features=THREE), 4, seed)
        assert report.rho == 1
        assert np.abs(theta - np.array(TRUTH)).max() < 0.02, theta


def test_adassp_matches_least_squares_on_the_clipped_rows(tmp_path):
    points = _points(3000, seed=5)
    table = _table(tmp_path, points)
    x = np.array([(1, a, b, c) for a, b, c, _ in points])
    y = np.array([p[3] for p in points])
    exact = np.linalg.lstsq(x, y, rcond=None)[0]
    _, theta = _fit(table, FIT.format(rho=4, bound=2, features=THREE), 4, seed=0)
    assert np.abs(theta - exact).max() < 0.05, (theta, exact)
    assert (np.sign(theta) == np.sign(exact)).all()


def test_pure_adassp_recovers_a_known_linear_model(tmp_path):
    table = _table(tmp_path, _points(20000, seed=4))
    for seed in (0, 1):
        report, theta = _fit(table, FIT.format(rho=2, bound=2, features=THREE).replace("adassp", "adassp_pure"), 4, seed)
        assert report.epsilon == 2 and report.is_pure
        assert np.abs(theta - np.array(TRUTH)).max() < 0.03, theta


@pytest.mark.parametrize("features, size", [
    ("vec (1, p.a, p.a)", 3),          # two identical columns: X^T X is singular
    ("vec (1, 0, p.b)", 3),            # a column of zeros
    ("vec (0, 0)", 2),                 # nothing at all: X^T X = 0
])
def test_a_singular_design_gives_finite_coefficients(tmp_path, features, size):
    table = _table(tmp_path, _points(500, seed=7, collinear=True))
    _, theta = _fit(table, FIT.format(rho=1, bound=2, features=features), size, seed=1)
    assert theta.shape == (size,) and np.isfinite(theta).all()


def test_collinear_columns_share_their_coefficient(tmp_path):
    # c = a: only the sum of their coefficients is identified; the ridge term splits it evenly
    table = _table(tmp_path, _points(20000, seed=11, collinear=True))
    _, theta = _fit(table, FIT.format(rho=4, bound=2, features=THREE), 4, seed=2)
    assert abs(theta[1] + theta[3] - (TRUTH[1] + TRUTH[3])) < 0.05, theta
    assert abs(theta[1] - theta[3]) < 0.05 and abs(theta[2] - TRUTH[2]) < 0.05, theta


def test_an_empty_table_gives_finite_coefficients(tmp_path):
    _, theta = _fit(_table(tmp_path, []), FIT.format(rho=1, bound=2, features=THREE), 4, seed=0)
    assert np.isfinite(theta).all()


def test_adassp_tau_is_sigma_times_two_sqrt_d_plus_sqrt_two_ln_twenty(tmp_path):
    _, tau = _fit(_table(tmp_path, []), "return (vec (adassp_tau 2 4))", 1, seed=0)
    assert math.isclose(tau[0], 2 * (2 * math.sqrt(4) + 2.448))
    assert 2.448 >= math.sqrt(2 * math.log(20)) > 2.447   # the constant in stdlib/ml.fz rounds up


@pytest.mark.parametrize("tau, gram, ridge", [
    (1, 10, 0),     # smallest eigenvalue 10: lower bound 9 > tau, no ridge
    (2, 0, 2),      # X^T X = 0: lower bound 0, ridge tau
    (4, 6, 2),      # lower bound 6 - 4 = 2: ridge 4 - 2
])
def test_adassp_ridge_term_is_tau_minus_the_lower_bound_on_the_smallest_eigenvalue(tmp_path, tau, gram, ridge):
    g = f"vec ({gram}, 0, 0, {gram})"
    _, theta = _fit(_table(tmp_path, []), f"return (adassp_solve {tau} ({g}) (vec (1, 2)))", 2, seed=0)
    assert np.allclose(theta, np.array([1, 2]) / (gram + ridge)), theta
