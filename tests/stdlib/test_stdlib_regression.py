"""logistic_fit and linear_fit (stdlib/ml.fz) on 1, 2 and 5 features: the epsilon is exactly the
budget given, every mechanism's sensitivity is the one the rules give (1 for the count,
sqrt_upper(n) * c for the gradient sum), a fit on a planted model moves towards it, and what must
not pass is refused."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from stdlib_support import IMPORTS, ROW, errors, load_rows, rows, run

from fuzzpy.checking.program import check_source
from fuzzpy.primitives.vectors import sqrt_upper

FEATURES = {
    1: "vec (r.x / 100)",
    2: "vec (1, r.x / 100)",
    5: "vec (1, r.x / 100, r.y / 100, if r.flag then 1 else 0, if r.k == \"a\" then 1 else 0)",
}


def program(n: int, fit: str = "logistic_fit", eps: str = "3/4", iters: int = 6, c: str = "2") -> str:
    zero = "(vec (" + ", ".join(["0"] * n) + "))"
    return (ROW + IMPORTS
            + f"function features (r : Row) : vec[{n}] {{ {FEATURES[n]} }}\n"
            + "function label (r : Row) : num { if r.x < 50 then 1 else 0 }\n"
            + f"function main (db : bag Row) : fuzzy vec[{n}] {{ {fit} ({eps}) {iters} {c} 1 features label {zero} db }}\n")


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("fit", ["logistic_fit", "linear_fit"])
def test_epsilon_is_exact_for_any_number_of_features(n, fit):
    report = check_source(program(n, fit), "fit.fz")
    assert not errors(report), errors(report)
    assert report.epsilon == F(3, 4)           # the count and 6 steps, 3/28 each
    assert report.is_pure
    got = sorted({(m.sensitivity, m.epsilon, m.scale) for m in report.mechanisms})
    step = F(3, 28)
    s = sqrt_upper(F(n)) * 2                   # vsum: L2 sensitivity c = 2; vtuple: times sqrt(n)
    expected = sorted({(F(1), step, 1 / step), (s, step, s / step)})
    assert got == expected, got


def test_epsilon_follows_the_budget_and_iterations():
    report = check_source(program(5, eps="2", iters=19), "fit.fz")
    assert report.epsilon == 2
    assert {m.epsilon for m in report.mechanisms} == {F(1, 10)}


def test_logistic_fit_learns_the_planted_direction(tmp_path):
    table = load_rows(tmp_path, rows(400))
    body = "logistic_fit 40 12 1 4 features label (vec (0, 0)) db"
    extra = ("function features (r : Row) : vec[2] { vec (1, r.x / 100 - 1 / 2) }\n"
             "function label (r : Row) : num { if r.x < 50 then 1 else 0 }\n")
    report, result = run(body, table, ret="fuzzy vec[2]", extra=extra, seed=2)
    w = result.value
    assert report.epsilon == 40
    assert w[1] < -1                           # label 1 for small x: a clearly negative slope


def test_linear_fit_recovers_a_slope(tmp_path):
    # y = 100 - x (+- 5): on the centred feature x / 100 - 1/2 the slope is -1, the intercept 1/2.
    table = load_rows(tmp_path, rows(400))
    extra = ("function features (r : Row) : vec[2] { vec (1, r.x / 100 - 1 / 2) }\n"
             "function target (r : Row) : num { r.y / 100 }\n")
    report, result = run("linear_fit 40 60 1 (3 / 2) features target (vec (0, 0)) db", table, ret="fuzzy vec[2]",
                         extra=extra, seed=4)
    w = result.value
    assert report.epsilon == 40
    assert abs(w[0] - 0.5) < 0.1 and abs(w[1] + 1) < 0.2, w


def test_fit_refuses_private_step_and_unbounded_features():
    src = program(2).replace("logistic_fit (3/4) 6 2 1", "logistic_fit (3/4) 6 2 (count db)")
    report = check_source(src, "fit.fz")
    assert any(d.code in ("E0209", "E0302", "E0305") for d in report.diagnostics), errors(report)
    # a feature vector that captures private data is read once per row: refused
    src = program(2).replace("vec (1, r.x / 100)", "vec (1, r.x / 100)").replace(
        "features label", "(fun r -> vec (1, count db)) label")
    report = check_source(src, "fit.fz")
    assert not report.ok
