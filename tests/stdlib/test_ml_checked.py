"""logistic_fit_checked and linear_fit_checked (stdlib/ml.fz): the fit and the noisy mean loss of
its final model.  The epsilon is exactly the budget given, split evenly over the count, the steps
and the loss (sensitivity 1: each row's loss is clipped to [0, 1]); a seeded fit on a synthetic
table whose true model is known gets its signs; and the loss tells a converged descent from one
that has not moved."""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest
from stdlib_support import FEATURES, IMPORTS, LABEL, ROW, TRUE_MODEL, errors, load_rows, planted_rows, rows, run

from fuzzpy.checking.program import check_source
from fuzzpy.primitives.vectors import sqrt_upper


def program(fit: str, eps: str, iters: int, c: str) -> str:
    return (ROW + IMPORTS + FEATURES + LABEL
            + f"function main (db : bag Row) : fuzzy (vec[3], num) {{ {fit} ({eps}) {iters} {c} 1 features label "
            + "(vec (0, 0, 0)) db }\n")


@pytest.mark.parametrize("fit", ["logistic_fit_checked", "linear_fit_checked"])
@pytest.mark.parametrize("eps, iters", [("3/4", 6), ("1/2", 40)])
def test_checked_fit_costs_exactly_its_budget(fit, eps, iters):
    report = check_source(program(fit, eps, iters, "2"), "fit.fz")
    assert not errors(report), errors(report)
    assert report.epsilon == F(eps)
    assert report.is_pure
    step = F(eps) / (iters + 2)                 # the count, iters steps and the loss
    grad = sqrt_upper(F(3)) * 2                 # vsum: L2 sensitivity c = 2; vtuple: times ceil(sqrt 3)
    got = sorted({(m.sensitivity, m.epsilon) for m in report.mechanisms})
    assert got == sorted({(F(1), step), (grad, step)}), got
    # the count and the loss are two releases of sensitivity 1, the steps one each
    assert len(report.mechanisms) == 3


def test_logistic_fit_checked_gets_the_signs_of_the_planted_model(tmp_path):
    table = load_rows(tmp_path, planted_rows())
    body = "logistic_fit_checked 2 40 1 8 features label (vec (0, 0, 0)) db"
    for seed in (0, 1, 2):
        report, result = run(body, table, ret="fuzzy (vec[3], num)", extra=FEATURES + LABEL, seed=seed)
        w, loss = result.value
        assert report.epsilon == 2
        assert [math.copysign(1, float(v)) for v in w] == [math.copysign(1, v) for v in TRUE_MODEL], w
        assert 0 < loss < 0.2, loss             # well below 1/4, the loss of w = 0


def test_logistic_loss_tells_a_descent_that_has_not_moved(tmp_path):
    table = load_rows(tmp_path, planted_rows())
    extra = FEATURES + LABEL
    _, stuck = run("logistic_fit_checked 2 1 1 (1 / 100) features label (vec (0, 0, 0)) db", table,
                   ret="fuzzy (vec[3], num)", extra=extra, seed=3)
    _, converged = run("logistic_fit_checked 2 40 1 8 features label (vec (0, 0, 0)) db", table,
                       ret="fuzzy (vec[3], num)", extra=extra, seed=3)
    assert abs(stuck.value[1] - 0.25) < 0.02, stuck.value     # about the loss of w = 0
    assert converged.value[1] < stuck.value[1] - 0.05, (converged.value, stuck.value)


def test_linear_fit_checked_recovers_a_slope_and_a_small_loss(tmp_path):
    # y = 100 - x (+- 5): on the centred feature x / 100 - 1/2 the slope is -1, the intercept 1/2.
    table = load_rows(tmp_path, rows(400))
    extra = ("function features (r : Row) : vec[2] { vec (1, r.x / 100 - 1 / 2) }\n"
             "function target (r : Row) : num { r.y / 100 }\n")
    report, result = run("linear_fit_checked 40 60 1 (3 / 2) features target (vec (0, 0)) db", table,
                         ret="fuzzy (vec[2], num)", extra=extra, seed=4)
    w, loss = result.value
    assert report.epsilon == 40
    assert abs(w[0] - 0.5) < 0.1 and abs(w[1] + 1) < 0.2, w
    assert abs(loss) < 0.01, loss               # residuals of about 0.03: a loss of about 0.0004


def test_checked_fit_refuses_a_private_step():
    src = program("logistic_fit_checked", "3/4", 6, "2").replace("6 2 1 features", "6 2 (count db) features")
    report = check_source(src, "fit.fz")
    assert not report.ok
