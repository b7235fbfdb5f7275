"""The standard library runs: on a small deterministic table, with seeded noise and a large
epsilon (noise scale S/eps tiny), every statistic is close to the exact one computed here in
Python, and the post-processing relations between releases hold exactly."""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest
from stdlib_support import load_rows, rows, run

BIG = 10000  # epsilon: noise scales are S / 10000
DATA = rows(400)
XS = [x for x, _, _, _ in DATA]
N = len(DATA)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return load_rows(tmp_path_factory.mktemp("stdlib"), DATA)


def close(a, b, tol):
    return abs(float(a) - float(b)) <= tol


def test_counts_sums_means_and_variance(table):
    mean = sum(XS) / N
    var = sum((x - mean) ** 2 for x in XS) / N
    assert close(run(f"noisy_count {BIG} db", table)[1].value, N, 0.01)
    assert close(run(f"noisy_sum {BIG} 0 100 (select (fun r -> r.x) db)", table)[1].value, sum(XS), 0.5)
    # clipping is applied: values above 50 count as 50
    assert close(run(f"noisy_sum {BIG} 0 50 (select (fun r -> r.x) db)", table)[1].value,
                 sum(min(x, 50) for x in XS), 0.5)
    for fn in ("noisy_mean", "noisy_mean_pair"):
        assert close(run(f"{fn} {BIG} 0 100 (select (fun r -> r.x) db)", table)[1].value, mean, 0.01)
    assert close(run(f"noisy_variance {BIG} 0 100 (select (fun r -> r.x) db)", table)[1].value, var, 1)


def test_noisy_mean_of_an_empty_bag_is_the_midpoint(table):
    report, result = run(f"noisy_mean {BIG} 10 30 (select (fun r -> r.x) (filter (fun r -> r.x > 1000) db))", table)
    assert result.value == 20


def test_histogram(table):
    _, result = run(f"histogram {BIG} (fun r -> r.k) db", table, ret='fuzzy (parts {"a", "b", "c", "d"} num)')
    for key in "abcd":
        assert close(result.value[key], sum(1 for r in DATA if r[2] == key), 0.01)


def test_cdfs_and_interval_counts(table):
    bounds = [20, 40, 60, 80]
    below = [sum(1 for x in XS if x < h) for h in bounds]
    _, cdf = run(f"cdf {BIG} {bounds} (select (fun r -> r.x) db)", table, ret="fuzzy (list num)")
    assert all(close(a, b, 0.01) for a, b in zip(cdf.value, below)) and len(cdf.value) == 4
    _, iv = run(f"interval_counts {BIG} {bounds} (select (fun r -> r.x) db)", table, ret="fuzzy (list num)")
    edges = [-math.inf] + bounds + [math.inf]
    exact = [sum(1 for x in XS if lo <= x < hi) for lo, hi in zip(edges, edges[1:])]
    assert len(iv.value) == 5 and all(close(a, b, 0.01) for a, b in zip(iv.value, exact))
    _, by = run(f"cdf_by_intervals {BIG} {bounds} (select (fun r -> r.x) db)", table, ret="fuzzy (list num)")
    released = [rel.value for rel in by.releases]
    assert len(released) == 5  # n + 1 interval counts, one release each
    assert list(by.value) == [sum(released[:i + 1]) for i in range(4)]  # exactly their running totals
    assert all(close(a, b, 0.05) for a, b in zip(by.value, below))


def best_quantile(q, grid):
    scores = {c: -abs(sum(1 for x in XS if x < c) - q * N) for c in grid}
    best = max(scores.values())
    (winner,) = [c for c, s in scores.items() if s == best]
    return winner


@pytest.mark.parametrize("q", [F(1, 2), F(1, 10), F(3, 4)])
def test_quantiles_pick_the_best_grid_point(table, q):
    grid = list(range(5, 100, 10))
    _, result = run(f"quantile {BIG} ({q.numerator} / {q.denominator}) {grid} (select (fun r -> r.x) db)", table)
    assert result.value == best_quantile(q, grid)


def test_median_and_quantiles(table):
    grid = list(range(5, 100, 10))
    assert run(f"median {BIG} {grid} (select (fun r -> r.x) db)", table)[1].value == best_quantile(F(1, 2), grid)
    _, result = run(f"quantiles {BIG} [0.25, 0.75] {grid} (select (fun r -> r.x) db)", table, ret="fuzzy (list num)")
    assert list(result.value) == [best_quantile(F(1, 4), grid), best_quantile(F(3, 4), grid)]


def test_top_k_returns_the_k_largest_counts_without_repeats(table):
    counts = {k: sum(1 for r in DATA if r[2] == k) for k in "abcd"}
    ranked = sorted(counts, key=lambda k: -counts[k])
    assert len(set(counts.values())) == 4
    _, result = run(f'top_k {BIG} 3 ["a", "b", "c", "d"] (fun r -> r.k) db', table, ret="fuzzy (list string)")
    assert list(result.value) == ranked[:3]
    # at epsilon 0.01 the winners are noisy, but never repeated
    for seed in range(5):
        _, result = run('top_k 0.01 3 ["a", "b", "c", "d"] (fun r -> r.k) db', table, ret="fuzzy (list string)",
                        seed=seed)
        assert len(set(result.value)) == 3 and set(result.value) <= set("abcd")
        assert [rel.mechanism for rel in result.releases] == ["noisy_max"] * 3


def test_sparse_vector_finds_the_queries_above_the_threshold(table):
    queries = [10, 20, 30, 40, 50, 60, 70]
    counts = [sum(1 for x in XS if x < q) for q in queries]
    threshold = 150
    assert all(abs(c - threshold) > 5 for c in counts)
    above = [q for q, c in zip(queries, counts) if c >= threshold]
    _, result = run(f"queries_above {BIG} 2 {threshold} {queries} (fun q r -> r.x < q) db", table,
                    ret="fuzzy (list num)")
    assert list(result.value) == above[:2]
    _, result = run(f"sparse_vector {BIG} 2 {threshold} {queries} (fun q r -> r.x < q) db", table,
                    ret="fuzzy (list bool)")
    answers = [c >= threshold for c in counts]
    stop = [i for i, a in enumerate(answers) if a][1]
    assert list(result.value) == answers[:stop + 1]  # it stops after the second true


def test_adaptive_clip_bound_and_mean(table):
    cands, slack = [10, 50, 90, 95, 99, 100], 10
    above = {c: sum(1 for x in XS if x > c) for c in cands}
    assert all(abs(v - slack) > 2 for v in above.values())
    chosen = next((c for c in cands if above[c] <= slack), cands[-1])
    _, result = run(f"clip_bound {BIG} {slack} {cands} (select (fun r -> r.x) db)", table)
    assert result.value == chosen
    _, result = run(f"adaptive_mean {BIG} {BIG} {slack} 0 {cands} (select (fun r -> r.x) db)", table)
    assert close(result.value, sum(min(x, chosen) for x in XS) / N, 0.01)
    # the mean was released with the calibration of the chosen bound
    scales = {rel.scale for rel in result.releases if rel.mechanism == "laplace"}
    assert F(chosen) / F(BIG // 2) in scales


def test_kmeans_finds_the_two_clusters(table):
    body = f"kmeans {BIG} 3 2 0 100 [(20, 20), (80, 80)] (select (fun r -> (r.x, r.y)) db)"
    _, result = run(body, table, ret="fuzzy (list (num, num))")
    # the points lie along y = 100 - x: the two clusters split around x = 50
    low = [(x, y) for x, y, _, _ in DATA if x < 50]
    high = [(x, y) for x, y, _, _ in DATA if x >= 50]
    centres = sorted(result.value)
    for (cx, cy), pts in zip(centres, (low, high)):
        assert close(cx, sum(p[0] for p in pts) / len(pts), 2)
        assert close(cy, sum(p[1] for p in pts) / len(pts), 2)
    assert len(result.releases) == 3 * 2 * 3  # iterations x clusters x (count, sum x, sum y)
    assert {rel.epsilon for rel in result.releases} == {BIG}


def test_logistic_regression_learns_the_label(table):
    # flag = x < 30: the weight of x/100 must become negative, and predictions mostly right
    body = (f"sample n = noisy_count {BIG} db; logistic_regression {BIG} 60 1 (5 / n) (0, 0, 0) "
            "(select (fun r -> (r.x / 100, r.y / 100, if r.flag then 1 else 0)) db)")
    _, result = run(body, table, ret="fuzzy (num, num, num)")
    w0, w1, w2 = result.value
    assert w1 < 0
    correct = sum(1 for x, y, _, f in DATA
                  if (1 / (1 + math.exp(-(w0 + w1 * x / 100 + w2 * y / 100))) > 0.5) == f)
    assert correct / N > 0.9
    assert len(result.releases) == 61


def test_group_aggregates(table):
    ret = 'fuzzy (parts {"a", "b", "c", "d"} num)'
    _, sums = run(f"group_sum {BIG} (fun r -> r.k) (fun r -> r.x) 0 50 db", table, ret=ret)
    _, means = run(f"group_mean {BIG} (fun r -> r.k) (fun r -> r.x) 0 50 db", table, ret=ret)
    for key in "abcd":
        xs = [min(x, 50) for x, _, k, _ in DATA if k == key]
        assert close(sums.value[key], sum(xs), 0.5)
        assert close(means.value[key], sum(xs) / len(xs), 0.05)
