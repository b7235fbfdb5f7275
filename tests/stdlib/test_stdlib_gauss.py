"""The Gaussian (zCDP) functions of stdlib/stats.fz: exact rho and noise of every release, and
seeded runs within the accuracy each release states."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from stdlib_support import IMPORTS, ROW, errors, load_rows, probe, rows, run

from fuzzpy.checking.program import check_source


def _gauss(report):
    """(sensitivity, sigma^2) of every Gaussian release the probe made, and the probe's rho."""
    return sorted((m.sensitivity, m.extra["sigma2"]) for m in report.mechanisms if m.name == "gaussian")


@pytest.mark.parametrize("params, expr, rho, releases", [
    ("(db : bag Row)", "gauss_count 0.25 db", F(1, 4), [(1, F(2))]),
    ("(xs : bag num)", "gauss_sum 0.5 0 10 xs", F(1, 2), [(10, F(100))]),
    ("(xs : bag num)", "gauss_sum 0.5 (0 - 30) 10 xs", F(1, 2), [(30, F(900))]),
    ("(xs : bag num)", "gauss_mean 0.5 0 10 xs", F(1, 2), [(1, F(2)), (10, F(200))]),
    ("(db : bag Row)", "gauss_histogram 0.5 (fun r -> r.k) db", F(1, 2), [(1, F(1))]),
    ("(db : bag Row)", "gauss_vector_sum 0.5 2 (fun r -> vec (r.x, r.y)) db", F(1, 2), [(2, F(4))]),
])
def test_exact_rho_and_calibration(params, expr, rho, releases):
    report = probe(params, expr)
    assert report.rho == rho and not report.is_pure and report.epsilon == 0
    assert _gauss(report) == releases


def test_a_histogram_over_groups_is_parallel_but_a_count_twice_is_sequential():
    twice = probe("(db : bag Row)", "sample a = gauss_count 0.25 db; sample b = gauss_count 0.25 db; return (a + b)")
    assert twice.rho == F(1, 2)
    # the same table used twice inside one release: distance 2, group privacy 2^2 in zCDP
    doubled = probe("(db : bag Row)", "gaussian 0.25 (count db + count db)")
    assert doubled.rho == F(1, 4) and _gauss(doubled) == [(2, F(8))]


@pytest.mark.parametrize("expr, code", [
    ("gauss_count (count db) db", "E0209"),     # rho from the data
    ("gauss_count 0 db", "E0213"),
    ("gauss_sum 0.5 0 10 (map (fun r -> r.k) db)", "E0202"),
    ("gauss_vector_sum 0.5 (count db) (fun r -> vec (r.x, r.y)) db", "E0209"),   # clip norm from the data
    ("gauss_vector_sum 0.5 2 (fun r -> (r.x, r.y)) db", "E0202"),               # a tuple is not a vector
])
def test_refusals(expr, code):
    src = ROW + IMPORTS + f"function main (db : bag Row) {{ {expr} }}\n"
    report = check_source(src, "bad.fz")
    assert code in {d.code for d in report.diagnostics}, errors(report)


def test_runs_within_the_stated_accuracy(tmp_path):
    data = rows(400)
    table = load_rows(tmp_path, data)
    body = ("sample n = gauss_count 0.5 db; sample s = gauss_sum 0.5 0 100 (map (fun r -> r.x) db); "
            "sample v = gauss_vector_sum 0.5 200 (fun r -> vec (r.x, r.y)) db; "
            "sample h = gauss_histogram 0.5 (fun r -> r.k) db; return (n, s, v, h)")
    report, result = run(body, table, ret="fuzzy (num, num, vec[2], parts {\"a\", \"b\", \"c\", \"d\"} num)")
    assert report.rho == 2
    n, s, v, h = result.value
    truth = [len(data), sum(x for x, *_ in data), (sum(x for x, *_ in data), sum(y for _, y, *_ in data))]
    bounds = [rel.accuracy.bound for rel in result.releases]
    assert abs(n - truth[0]) <= bounds[0] and abs(float(s) - truth[1]) <= float(bounds[1])
    assert all(abs(float(a) - b) <= float(bounds[2]) for a, b in zip(v, truth[2]))
    for key in "abcd":
        assert abs(h[key] - sum(1 for *_, k, _ in data if k == key)) <= 3 * bounds[3]
