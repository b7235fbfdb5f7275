"""linear_fit_ssp (stdlib/ml.fz): the least-squares line from one Laplace release of
(n, sum x, sum x^2, sum y, sum x y), x and y clipped to [-1, 1].  The checker's epsilon and
sensitivity are those of the argument in docs/stdlib.md (one row moves each sum by at most 1: L1
sensitivity 5), and a seeded fit recovers a known line."""

from __future__ import annotations

from fractions import Fraction as F

from stdlib_support import IMPORTS, ROW, errors, load_rows, rows, run

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource

LINE = "linear_fit_ssp {eps} (fun r -> r.x / 50 - 1) (fun r -> r.y / 50 - 1) db"


def test_ssp_costs_one_release_of_sensitivity_five():
    src = ROW + IMPORTS + f"function main (db : bag Row) : fuzzy (num, num) {{ {LINE.format(eps='(2/3)')} }}\n"
    report = check_source(src, "ssp.fz")
    assert not errors(report), errors(report)
    assert report.epsilon == F(2, 3) and report.is_pure
    assert [(m.sensitivity, m.epsilon, m.scale) for m in report.mechanisms] == [(F(5), F(2, 3), F(15, 2))]


def test_ssp_recovers_a_line(tmp_path):
    # y = 100 - x (+- 5): on x / 50 - 1 and y / 50 - 1 the line has slope -1 and intercept 0.
    table = load_rows(tmp_path, rows(400))
    for seed in (0, 1, 2):
        report, result = run(LINE.format(eps="4"), table, ret="fuzzy (num, num)", seed=seed)
        intercept, slope = result.value
        assert report.epsilon == 4
        assert abs(intercept) < 0.1 and abs(slope + 1) < 0.1, result.value


def test_ssp_line_is_flat_when_the_noisy_variance_is_not_positive(tmp_path):
    src = ROW + IMPORTS + "function main (db : bag Row) : fuzzy (num, num) { return (ssp_line (10, 10, 10, 5, 3)) }\n"
    report = check_source(src, "ssp.fz")
    assert not errors(report), errors(report)
    result = run_program(report.entry_instance, {"db": load_rows(tmp_path, rows(5))}, RandomSource.seeded(0))
    assert tuple(float(v) for v in result.value) == (0.5, 0.0)     # 10 * 10 - 10^2 = 0: slope 0, mean y
