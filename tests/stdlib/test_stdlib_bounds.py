"""Every standard library function: its exact privacy loss or sensitivity, as a formula in its
public arguments, checked at several values of them, with the calibration of its mechanisms
(sensitivity S, epsilon, noise scale)."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from stdlib_support import mechanisms, probe, probe_type

INF = float("inf")


def eps_of(params: str, expr: str) -> F:
    report = probe(params, expr)
    assert report.entry == "probe"
    assert isinstance(report.epsilon, F)
    return report.epsilon


def fmt(q: F) -> str:
    """A fraction as fuzzpy source."""
    text = str(abs(q.numerator)) if q.denominator == 1 else f"({abs(q.numerator)} / {q.denominator})"
    return f"(0 - {text})" if q < 0 else text


def coef(q: F) -> str:
    """As the checker prints a coefficient in a type."""
    if q == 1:
        return ""
    if q.denominator == 1:
        return f"[{q.numerator}]"
    f = float(q)
    return f"[{f:g}]" if F(repr(f)) == q else f"[{q}]"


# ---- bags.fz ----------------------------------------------------------------------------------

@pytest.mark.parametrize("lo, hi", [(0, 5), (-7, 5), (-3, -1), (2, 2)])
def test_clipped_sum_is_max_abs_bound_sensitive(lo, hi):
    bound = max(abs(F(lo)), abs(F(hi)))
    assert probe_type("(xs : bag num)", f"clipped_sum {fmt(F(lo))} {fmt(F(hi))} xs") == f"bag num -o{coef(bound)} num"
    t = probe_type("(xs : bag num)", f"sum_and_count {fmt(F(lo))} {fmt(F(hi))} xs")
    assert t == f"bag num -o{coef(bound + 1)} (num, int[0, inf])"


def test_row_helpers_are_1_sensitive_in_the_table():
    assert probe_type("(db : bag Row)", "count_where (fun r -> r.x > 50) db") == "bag Row -o int[0, inf]"
    assert probe_type("(db : bag Row)", "count (reject (fun r -> r.flag) db)") == "bag Row -o int[0, inf]"
    assert probe_type("(db : bag Row)", "clipped 0 10 (select (fun r -> r.y) db)") == "bag Row -o bag (num[0, 10])"


def test_split_helpers_give_disjoint_parts():
    # counting both halves of a split, or every bucket, is as sensitive as counting the whole
    assert probe_type("(xs : bag num)", "let (a, b) = split_below 50 xs; count a + count b") == "bag num -o int"
    src = "noisy_counts 1 (buckets [10, 20, 30, 40, 50] xs)"
    assert eps_of("(xs : bag num)", src) == 1


def test_counting_a_bucket_list_twice_costs_twice():
    assert eps_of("(xs : bag num)", "let bs = buckets [10, 20] xs; sample a = noisy_counts 1 bs; "
                  "sample b = noisy_counts 1 bs; return (a, b)") == 2


# ---- lists.fz ---------------------------------------------------------------------------------

def test_list_helpers():
    assert probe_type("(xs : list num)", "list_length xs") == "list num -o[0] int"
    assert probe_type("(xs : list num)", "list_total xs") == "list num -o num"
    assert probe_type("(xs : list num)", "without_last xs") == "list num -o list num"
    # x1 moves all n running totals: n-sensitive for a list of n constants, unbounded otherwise
    for n in (1, 3, 6):
        consts = ", ".join(str(i) for i in range(n))
        assert probe_type("(s : num)", f"running_total s [{consts}]") == f"num -o{coef(F(n))} list num"
    assert probe_type("(xs : list num)", "prefix_sums xs") == "list num -> list num"
    assert probe_type("(a : list bool)", "selected [1, 2] a") == "list bool -o[0] list (int[1, 2])"


# ---- stats.fz ---------------------------------------------------------------------------------

EPS = [F(1, 4), F(3, 10), F(2)]


@pytest.mark.parametrize("eps", EPS)
def test_noisy_count(eps):
    r = probe("(db : bag Row)", f"noisy_count {fmt(eps)} db")
    assert r.epsilon == eps
    assert mechanisms(r) == [("laplace", 1, eps, 1 / eps)]


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("lo, hi", [(0, 10), (-20, 5)])
def test_noisy_sum_is_calibrated_to_the_clip_bound(eps, lo, hi):
    bound = max(abs(F(lo)), abs(F(hi)))
    r = probe("(xs : bag num)", f"noisy_sum {fmt(eps)} {fmt(F(lo))} {fmt(F(hi))} xs")
    assert r.epsilon == eps
    assert mechanisms(r) == [("laplace", bound, eps, bound / eps)]


@pytest.mark.parametrize("eps", EPS)
def test_noisy_mean_splits_the_budget_in_halves(eps):
    r = probe("(xs : bag num)", f"noisy_mean {fmt(eps)} 0 10 xs")
    assert r.epsilon == eps
    assert mechanisms(r) == sorted([("laplace", 1, eps / 2, 2 / eps), ("laplace", 10, eps / 2, 20 / eps)])


@pytest.mark.parametrize("eps", EPS)
def test_noisy_mean_pair_is_one_release_of_sensitivity_bound_plus_one(eps):
    r = probe("(xs : bag num)", f"noisy_mean_pair {fmt(eps)} (0 - 4) 10 xs")
    assert r.epsilon == eps
    assert mechanisms(r) == [("laplace", 11, eps, 11 / eps)]


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("lo, hi", [(0, 10), (-6, 2)])
def test_noisy_variance_splits_in_thirds_on_centred_values(eps, lo, hi):
    w = (F(hi) - F(lo)) / 2
    r = probe("(xs : bag num)", f"noisy_variance {fmt(eps)} {fmt(F(lo))} {fmt(F(hi))} xs")
    assert r.epsilon == eps
    third = eps / 3
    assert mechanisms(r) == sorted([("laplace", 1, third, 1 / third), ("laplace", w, third, w / third),
                                    ("laplace", w * w, third, w * w / third)])


@pytest.mark.parametrize("eps", EPS)
def test_histogram_composes_in_parallel(eps):
    r = probe("(db : bag Row)", f"histogram {fmt(eps)} (fun r -> r.k) db")
    assert r.epsilon == eps  # four groups, not 4 eps
    assert mechanisms(r) == [("laplace", 1, eps, 1 / eps)]


def test_histogram_over_a_bounded_int_key():
    r = probe("(db : bag Row)", "histogram (1 / 2) (fun r -> clip 0 3 (if r.x < 50 then 0 else 3)) db")
    assert r.epsilon == F(1, 2)
    assert str(r.entry_type) == 'fuzzy (parts {"0", "1", "2", "3"} num)'


@pytest.mark.parametrize("eps, n", [(F(1, 2), 3), (F(1, 8), 8), (F(1, 10), 12)])
def test_cumulative_cdf_costs_n_eps_and_intervals_cost_eps(eps, n):
    bounds = "[" + ", ".join(str(5 * (i + 1)) for i in range(n)) + "]"
    assert eps_of("(xs : bag num)", f"cdf {fmt(eps)} {bounds} xs") == n * eps
    assert eps_of("(xs : bag num)", f"interval_counts {fmt(eps)} {bounds} xs") == eps
    assert eps_of("(xs : bag num)", f"cdf_by_intervals {fmt(eps)} {bounds} xs") == eps


@pytest.mark.parametrize("q", [F(1, 2), F(9, 10), F(1, 4), F(0), F(1)])
def test_quantile_score_sensitivity_is_max_q_one_minus_q(q):
    s = max(q, 1 - q)
    assert probe_type("(xs : bag num)", f"quantile_score {fmt(q)} xs 50") == f"bag num -o{coef(s)} num"
    r = probe("(xs : bag num)", f"quantile (1 / 2) {fmt(q)} [10, 20, 30] xs")
    assert r.epsilon == F(1, 2)
    # the exponential mechanism: temperature 2S/eps
    assert mechanisms(r) == [("exponential", s, F(1, 2), 4 * s)]


@pytest.mark.parametrize("qs", [[F(1, 2)], [F(1, 4), F(3, 4)], [F(1, 10), F(1, 2), F(9, 10), F(1, 4)]])
def test_quantiles_cost_eps_per_quantile(qs):
    src = "[" + ", ".join(fmt(q) for q in qs) + "]"
    assert eps_of("(xs : bag num)", f"quantiles (1 / 3) {src} [10, 20, 30, 40] xs") == F(len(qs), 3)
    assert eps_of("(xs : bag num)", "median (1 / 3) [10, 20, 30, 40] xs") == F(1, 3)


# ---- groups.fz --------------------------------------------------------------------------------

@pytest.mark.parametrize("eps", EPS)
def test_group_aggregates_compose_in_parallel(eps):
    e = fmt(eps)
    r = probe("(db : bag Row)", f"group_count {e} (fun r -> r.k) db")
    assert r.epsilon == eps and mechanisms(r) == [("laplace", 1, eps, 1 / eps)]
    r = probe("(db : bag Row)", f"group_sum {e} (fun r -> r.k) (fun r -> r.x) (0 - 20) 50 db")
    assert r.epsilon == eps and mechanisms(r) == [("laplace", 50, eps, 50 / eps)]
    r = probe("(db : bag Row)", f"group_mean {e} (fun r -> r.k) (fun r -> r.x) 0 50 db")
    assert r.epsilon == eps
    assert mechanisms(r) == sorted([("laplace", 1, eps / 2, 2 / eps), ("laplace", 50, eps / 2, 100 / eps)])


# ---- select.fz --------------------------------------------------------------------------------

@pytest.mark.parametrize("k, n", [(1, 3), (2, 4), (3, 5), (4, 4), (6, 3), (0, 3)])
def test_top_k_costs_eps_per_round(k, n):
    cands = "[" + ", ".join(str(10 * (i + 1)) for i in range(n)) + "]"
    eps = F(1, 4)
    r = probe("(db : bag Row)", f"top_k_by (1 / 4) {k} {cands} (fun c r -> r.x < c) db")
    assert r.epsilon == min(k, n) * eps  # the list runs out after n rounds
    if k:
        assert mechanisms(r) == [("noisy_max", 1, eps, 2 / eps)]


def test_top_k_of_categories():
    assert eps_of("(db : bag Row)", 'top_k (1 / 2) 3 ["a", "b", "c", "d"] (fun r -> r.k) db') == F(3, 2)


@pytest.mark.parametrize("cutoff", [1, 2, 5])
def test_sparse_vector_costs_eps_whatever_the_cutoff(cutoff):
    for fn in ("sparse_vector", "queries_above"):
        r = probe("(db : bag Row)", f"{fn} (1 / 2) {cutoff} 100 [10, 20, 30, 40, 50] (fun q r -> r.x < q) db")
        assert r.epsilon == F(1, 2)
        (m,) = r.mechanisms
        assert (m.name, m.sensitivity, m.epsilon, m.scale) == ("above_threshold", 1, F(1, 2), 4)
        assert m.extra == {"cutoff": cutoff, "query_scale": 8 * cutoff}


# ---- ml.fz ------------------------------------------------------------------------------------

@pytest.mark.parametrize("eps, iters", [(F(1, 10), 1), (F(1, 10), 4), (F(1, 3), 2)])
def test_kmeans_costs_3_eps_per_iteration(eps, iters):
    centres = "[(10, 10), (50, 50), (90, 90)]"
    r = probe("(pts : bag (num, num))", f"kmeans {fmt(eps)} {iters} 3 0 100 {centres} pts")
    assert r.epsilon == 3 * iters * eps
    assert mechanisms(r) == sorted([("laplace", 1, eps, 1 / eps), ("laplace", 100, eps, 100 / eps)])


def test_kmeans_groups_by_a_bounded_int_key():
    # the centres are read once per row: they must be public (released), hence "->" for cs
    t = probe_type("(cs : list (num, num)) (pts : bag (num, num))",
                   "groupby (fun p -> clip 0 2 (nearest cs p)) pts")
    assert t == 'list (num, num) -> bag (num, num) -o parts {"0", "1", "2"} (bag (num, num))'


@pytest.mark.parametrize("eps, iters, c", [(F(1, 10), 1, 1), (F(1, 10), 5, 1), (F(1, 2), 3, F(1, 4))])
def test_logistic_regression_costs_eps_per_step_with_l1_sensitivity_3c(eps, iters, c):
    r = probe("(pts : bag (num, num, num))", f"logistic_regression {fmt(eps)} {iters} {fmt(F(c))} 0.01 (0, 0, 0) pts")
    assert r.epsilon == iters * eps
    assert mechanisms(r) == [("laplace", 3 * F(c), eps, 3 * F(c) / eps)]


def test_the_gradient_is_clipped_in_each_coordinate():
    t = probe_type("(w : (num, num, num)) (p : (num, num, num))", "logistic_gradient 2 w p")
    assert t == "(num, num, num) -> (num, num, num) -> (num[-2, 2], num[-2, 2], num[-2, 2])"


# ---- adaptive.fz -------------------------------------------------------------------------------

@pytest.mark.parametrize("eps1, eps2", [(F(1, 2), F(1, 4)), (F(1, 10), F(9, 10))])
def test_adaptive_mean_costs_eps1_plus_eps2_and_checks_every_bound(eps1, eps2):
    cands = [1, 10, 100, 1000]
    r = probe("(xs : bag num)", f"adaptive_mean {fmt(eps1)} {fmt(eps2)} 10 0 {cands} xs")
    assert r.epsilon == eps1 + eps2
    half = eps2 / 2
    expected = [("above_threshold", 1, eps1, 2 / eps1), ("laplace", 1, half, 1 / half)]
    expected += [("laplace", F(c), half, F(c) / half) for c in cands]  # one calibration per branch
    assert mechanisms(r) == sorted(set(expected))
    assert eps_of("(xs : bag num)", f"clip_bound {fmt(eps1)} 10 {cands} xs") == eps1
