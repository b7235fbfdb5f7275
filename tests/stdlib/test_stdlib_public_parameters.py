"""Every standard library function refuses a private value where a public parameter is expected
(epsilon, clip bounds, k, candidates, threshold, cutoff, iterations, centres, weights, answers,
pred/key/value capturing private data); a released (public but not constant) parameter is charged
conservatively or refused; a table passed twice is charged twice.

Found sound by the fourth review round (the standard library and the examples), and pinned here as
regression tests."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from stdlib_support import IMPORTS, ROOT, ROW

from fuzzpy.checking.program import check_source

XS = "(map (fun r -> r.x) db)"
PTS = "(map (fun r -> (r.x, r.y)) db)"
TRIPLES = "(map (fun r -> (r.x, r.y, 1)) db)"
KEYS = 'parts {"a", "b", "c", "d"}'


def lib(body: str, ret: str = "fuzzy num", extra: str = ""):
    """`main (db : bag Row) : RET { BODY }` checked next to the whole standard library."""
    src = ROW + IMPORTS + extra + f"function main (db : bag Row) : {ret} {{ {body} }}\n"
    return check_source(src, str(ROOT / "probe.fz"))


def codes(report) -> set[str]:
    return {d.code for d in report.diagnostics}


PRIVATE = "clip 1 2 (count db)"
PRIVATE_PARAMETER = {
    "noisy_count-epsilon": ("fuzzy num", f"noisy_count ({PRIVATE}) db", "E0209"),
    "noisy_sum-clip-bound": ("fuzzy num", f"noisy_sum 1 0 ({PRIVATE}) {XS}", "E0209"),
    "noisy_variance-clip-bound": ("fuzzy num", f"noisy_variance 1 ({PRIVATE}) 5 {XS}", "E0209"),
    "quantile-q": ("fuzzy num", f"quantile 0.5 (clip 0 1 (count db)) [1, 2] {XS}", "E0305"),
    "quantile-grid": ("fuzzy num", f"quantile 0.5 0.5 [count db, 2] {XS}", "E0209"),
    "cdf-boundaries": ("fuzzy (list num)", f"cdf 0.5 [count db] {XS}", "E0302"),
    "top_k-k": ("fuzzy (list string)", f'top_k 0.5 ({PRIVATE}) ["a", "b"] (fun r -> r.k) db', "E0302"),
    "top_k-candidates": ("fuzzy (list string)",
                         'top_k 0.5 1 (if count db > 2 then ["a"] else ["b"]) (fun r -> r.k) db', "E0209"),
    "top_k_by-pred-capturing-db": ("fuzzy (list num)",
                                   "top_k_by 0.5 1 [1, 2] (fun c r -> r.x < c + count db) db", "E0302"),
    "sparse_vector-threshold": ("fuzzy (list bool)",
                                f"sparse_vector 0.5 1 ({PRIVATE}) [1, 2] (fun q r -> r.x < q) db", "E0209"),
    "sparse_vector-cutoff": ("fuzzy (list bool)",
                             f"sparse_vector 0.5 ({PRIVATE}) 5 [1, 2] (fun q r -> r.x < q) db", "E0209"),
    "histogram-key-capturing-db": (f"fuzzy ({KEYS} num)", "histogram 0.5 (fun r -> if count db > 3 then r.k else r.k) db",
                                   "E0302"),
    "group_sum-value-capturing-db": (f"fuzzy ({KEYS} num)",
                                     "group_sum 0.5 (fun r -> r.k) (fun r -> clip 0 1 (count db)) 0 1 db", "E0302"),
    "kmeans-centres": ("fuzzy (list (num, num))", f"kmeans 0.1 2 2 0 100 [(count db, 1), (2, 2)] {PTS}", "E0302"),
    "kmeans-iterations": ("fuzzy (list (num, num))", f"kmeans 0.1 (clip 1 2 (count db)) 2 0 100 [(1, 1)] {PTS}",
                          "E0302"),
    "logistic-weights": ("fuzzy (num, num, num)", f"logistic_regression 0.1 2 1 0.1 (count db, 0, 0) {TRIPLES}",
                         "E0302"),
    "logistic-rate": ("fuzzy (num, num, num)", f"logistic_regression 0.1 2 1 ({PRIVATE}) (0, 0, 0) {TRIPLES}", "E0302"),
    "mean_with_chosen_bound-answers": ("fuzzy num", f"mean_with_chosen_bound 0.5 0 [1, 10] [count db > 5, true] {XS}",
                                       "E0302"),
    "adaptive_mean-slack": ("fuzzy num", f"adaptive_mean 0.5 0.5 ({PRIVATE}) 0 [1, 10] {XS}", "E0209"),
    "first_selected-of-private-answers": ("fuzzy num", "return (first_selected [1, 2] [count db > 3, true])", "E0302"),
}


@pytest.mark.parametrize("name", sorted(PRIVATE_PARAMETER))
def test_a_private_value_for_a_public_stdlib_parameter_is_refused(name):
    """Fourth review round, handled."""
    ret, body, code = PRIVATE_PARAMETER[name]
    r = lib(body, ret)
    assert not r.ok and code in codes(r), [(d.code, d.message) for d in r.diagnostics]


# Released values are public but not constants: where the number of releases or the calibration
# depends on them, the checker must charge the worst case or refuse.
RELEASED = "sample k = exponential 1 [1, 2, 3] (fun c -> 0); "   # a released int, epsilon 0 (public scores)
RELEASED_PARAMETER = {
    # min(k, n) rounds with k unknown: n rounds, 3 * 0.5
    "top_k-released-k": ("fuzzy (list string)", RELEASED + 'top_k 0.5 k ["a", "b", "c"] (fun r -> r.k) db', F(3, 2)),
    # disjoint buckets: eps whatever the (released) boundaries
    "interval_counts-released-bounds": ("fuzzy (list num)",
                                        f"sample a = laplace 1 3; interval_counts 0.5 [a, a] {XS}", F(1, 2)),
    "cdf-released-bounds": ("fuzzy (list num)", f"sample a = laplace 1 3; cdf 0.5 [a, a] {XS}", None),
    "kmeans-released-iterations": ("fuzzy (list (num, num))", RELEASED + f"kmeans 0.1 k 2 0 100 [(1, 1), (2, 2)] {PTS}",
                                   None),
    "logistic-released-iterations": ("fuzzy (num, num, num)",
                                     RELEASED + f"logistic_regression 0.1 k 1 0.1 (0, 0, 0) {TRIPLES}", None),
    "noisy_sum-released-bound": ("fuzzy num", f"sample a = laplace 1 3; noisy_sum 0.5 0 a {XS}", None),
    "sparse_vector-released-cutoff": ("fuzzy (list bool)",
                                      RELEASED + "sparse_vector 0.5 k 1 [1, 2] (fun q r -> r.x < q) db", None),
}


@pytest.mark.parametrize("name", sorted(RELEASED_PARAMETER))
def test_a_released_parameter_is_charged_its_worst_case_or_refused(name):
    """Fourth review round, handled: top_k with a released k costs n eps; cdf / kmeans / logistic
    regression over a released length are refused."""
    ret, body, epsilon = RELEASED_PARAMETER[name]
    r = lib(body, ret)
    if epsilon is None:
        assert not r.ok and codes(r) & {"E0302", "E0209", "E0306"}, [(d.code, d.message) for d in r.diagnostics]
    else:
        assert r.ok and r.epsilon == epsilon


TWICE = {
    "noisy_counts-same-bag-twice": ("fuzzy (list num)", "noisy_counts 0.5 [db, db]", F(1)),
    "noisy_counts-a-part-twice": ("fuzzy (list num)", f"let (a, b) = split_below 50 {XS}; noisy_counts 0.5 [a, b, a]",
                                  F(1)),
    "noisy_count-of-a-self-union": ("fuzzy num", "noisy_count 0.5 (union db db)", F(1)),
    "histogram-twice": (f"fuzzy ({KEYS} num, {KEYS} num)",
                        "sample a = histogram 0.5 (fun r -> r.k) db; sample b = group_count 0.5 (fun r -> r.k) db; "
                        "return (a, b)", F(1)),
    "quantile-outside-0-1": ("fuzzy num", f"quantile 1 2 [10, 50] {XS}", F(1)),
}


@pytest.mark.parametrize("name", sorted(TWICE))
def test_using_the_table_twice_through_the_library_is_charged_twice(name):
    """Fourth review round, handled."""
    ret, body, epsilon = TWICE[name]
    r = lib(body, ret)
    assert r.ok and r.epsilon == epsilon, [(d.code, d.message) for d in r.diagnostics]


def test_quantile_outside_0_1_is_calibrated_to_max_abs_q():
    """Fourth review round, handled."""
    r = lib(f"quantile 1 (0 - 1) [10, 50] {XS}")
    assert r.ok and [(m.name, m.sensitivity, m.epsilon, m.scale) for m in r.mechanisms] == [("exponential", 2, 1, 4)]


def test_inverted_clip_bounds_in_the_library_are_refused():
    """Fourth review round, handled."""
    r = lib(f"noisy_sum 0.5 10 0 {XS}")
    assert not r.ok and "E0213" in codes(r)
