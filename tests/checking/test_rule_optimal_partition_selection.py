"""Rule Optimal partition selection (docs/soundness.md): select_keys_optimal keeps a key with n units
with probability pi(ceil(n/S)) of the optimal curve for (eps/(m S), delta/(m S)); the curve is
exact on its grid and satisfies the (e, d) inequalities with the real e^e; a neighbour pair's
released key sets are within (eps, delta) exactly; it costs what select_keys costs and is never less
likely to release a key than select_keys' threshold."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction as F

import mpmath
import pytest

from fuzzpy.accounting.partition_selection import (
    BITS,
    ONE,
    keep_curve,
    keep_interval,
    lower_end,
    selection_divergence,
    upper_end,
)
from fuzzpy.runtime.kernels.units import kept_by_curve
from fuzzpy.runtime.samplers import RandomSource
from tests.conftest import check

U = 'schema F unit plane { plane : string, dest : string, n : int[0, 5] }\n'
EDGES = [(F(1), F(1, 10**6), 1), (F(1, 100), F(1, 10**9), 1), (F(10), F(1, 10**6), 1), (F(1), F(1, 2), 1),
         (F(1), F(1, 10**30), 1), (F(1, 2), F(1, 10**6), 7), (F(3), F(1, 1000), 3)]


def exp_interval(x: F):
    from mpmath import iv

    iv.dps = 60
    return iv.exp(iv.mpf(x.numerator) / iv.mpf(x.denominator))


@pytest.mark.parametrize("eps, delta, m", EDGES)
def test_the_curve_meets_both_inequalities_with_the_real_exponential(eps, delta, m):
    curve = keep_curve(eps, delta, m, F(1))
    assert curve.epsilon == eps / m and curve.delta == delta / m
    assert curve.grid[0] == 0 and curve.grid[-1] == ONE and curve.complete
    e_up, e_down = exp_interval(curve.epsilon), exp_interval(-curve.epsilon)
    for prev, cur in zip(curve.grid, curve.grid[1:]):
        p, q = F(prev, ONE), F(cur, ONE)
        assert p <= q <= 1
        assert q <= lower_end(e_up * mpmath.iv.mpf(p.numerator) / p.denominator) + curve.delta  # pi(n) <= e^e pi(n-1) + d
        assert 1 - p <= lower_end(e_up * mpmath.iv.mpf((1 - q).numerator) / (1 - q).denominator) + curve.delta
        # and it is the largest such curve, up to the grid: within 2^-120 of the recursion from p
        rest = max(F(0), 1 - p - curve.delta)
        best = min(upper_end(e_up * mpmath.iv.mpf(p.numerator) / p.denominator) + curve.delta,
                   1 - lower_end(e_down * mpmath.iv.mpf(rest.numerator) / rest.denominator), F(1))
        assert best - q < F(1, 2**120)


def test_the_first_step_is_delta_and_a_key_nobody_has_is_never_released():
    curve = keep_curve(F(1), F(1, 10**6), 2, F(1))
    assert curve.probability(0) == 0 and curve.probability(-3) == 0
    assert F(1, 2 * 10**6) - F(1, ONE) < curve.probability(1) <= F(1, 2 * 10**6)


def test_a_sensitivity_above_one_reads_counts_in_its_steps_and_splits_eps_and_delta_over_m_s():
    curve = keep_curve(F(1), F(1, 10**6), 2, F(3))
    assert (curve.epsilon, curve.delta, curve.step) == (F(1, 6), F(1, 6 * 10**6), 3)
    assert [curve.numerator(n) for n in (1, 2, 3)] == [curve.grid[1]] * 3 and curve.numerator(4) == curve.grid[2]


def test_a_delta_below_the_grid_leaves_the_curve_at_zero_and_the_checker_refuses_it():
    assert not keep_curve(F(1), F(1, 10**40), 1, F(1)).complete
    r = check(U + "function main (t : bag F) { select_keys_optimal 1 0.0000000000000000000000000000000000000001 1 "
              "(fun r -> r.dest) t }")
    assert not r.ok and [d.code for d in r.diagnostics] == ["E0213"], r.diagnostics
    assert "does not reach 1" in r.diagnostics[0].message


def test_it_costs_what_select_keys_costs():
    r = check(U + "function main (t : bag F) { select_keys_optimal 1 0.000001 2 (fun r -> r.dest) t }")
    assert r.ok and r.epsilon == 1 and r.approx_delta == F(1, 10**6) and not r.is_pure
    m = r.mechanisms[0]
    assert m.name == "select_keys_optimal" and m.sensitivity == 1 and m.extra["method"] == "optimal"
    assert m.extra["threshold"] == keep_curve(F(1), F(1, 10**6), 2, F(1)).half_count()
    helper = "function sel (b) { select_keys_optimal 1 0.000001 1 (fun r -> r.dest) b }\n"
    r = check(U + helper + "function main (t : bag F) { sel (union t t) }")
    assert not r.ok and "E0332" in [d.code for d in r.diagnostics]  # its delta would need group privacy


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("eps, delta", [(F(1), F(1, 10**6)), (F(1, 10), F(1, 10**5)), (F(2), F(1, 10**9))])
def test_it_is_never_less_likely_to_release_a_key_than_the_threshold(eps, delta, m):
    text = f"select_keys {float(eps)} {float(delta):.12f} {m} (fun r -> r.dest) t"
    laplace = check(U + f"function main (t : bag F) {{ {text} }}")
    info = {"scale": laplace.mechanisms[0].scale, "threshold": laplace.mechanisms[0].extra["threshold"]}
    optimal = {"method": "optimal", "epsilon": eps, "delta": delta, "m": m, "sensitivity": F(1)}
    for n in range(1, info["threshold"] + 40):
        assert lower_end(keep_interval(n, optimal)) >= upper_end(keep_interval(n, info)) - F(1, 2**120), n
    assert keep_curve(eps, delta, m, F(1)).half_count() <= info["threshold"]


@pytest.mark.parametrize("eps, delta, m", [(F(1), F(1, 10**6), 1), (F(1, 2), F(1, 1000), 3), (F(2), F(1, 10), 2)])
def test_a_neighbour_pairs_released_keys_are_within_eps_and_delta_exactly(eps, delta, m):
    """A unit added to m keys, at every count: the exact divergence of the two laws of the moved
    keys at e^eps is at most delta (and the bound is tight where the curve starts: one new key)."""
    info = {"method": "optimal", "epsilon": eps, "delta": delta, "m": m, "sensitivity": F(1)}
    length = len(keep_curve(eps, delta, m, F(1)).grid)
    for n in list(range(0, length + 1)):
        before = [keep_interval(n, info)] * m
        after = [keep_interval(n + 1, info)] * m
        assert selection_divergence(before, after, eps) <= delta, n
    new_keys = selection_divergence([keep_interval(0, info)] * m, [keep_interval(1, info)] * m, eps)
    assert delta * F(9, 10) < new_keys <= delta
    # more keys moved than the rule allows (m + 1) is over delta: the check is not blind
    assert selection_divergence([keep_interval(0, info)] * (m + 1), [keep_interval(1, info)] * (m + 1), eps) > delta


@pytest.mark.parametrize("n", [1, 5, 9, 14, 20])
def test_the_keep_frequency_is_the_curves_probability(n):
    info = {"epsilon": F(1), "delta": F(1, 100), "m": 1, "sensitivity": F(1)}
    curve = keep_curve(F(1), F(1, 100), 1, F(1))
    rng = RandomSource.seeded(n)
    trials = 4000
    counts = {f"k{i}": n for i in range(trials)}
    kept = len(kept_by_curve(counts, info, rng))
    p = float(curve.probability(n))
    sd = (trials * p * (1 - p)) ** 0.5
    assert abs(kept - trials * p) <= 5 * sd + 1, (kept, trials * p)


def test_each_key_reads_its_own_bits_from_the_runs_random_source():
    class Bits:
        def __init__(self):
            self.asked = Counter()

        def randbytes(self, k):
            self.asked[k] += 1
            return bytes([0xFF]) * k

    info = {"epsilon": F(1), "delta": F(1, 100), "m": 1, "sensitivity": F(1)}
    rng = Bits()
    top = len(keep_curve(F(1), F(1, 100), 1, F(1)).grid)
    assert kept_by_curve({"a": 1, "b": top, "c": 0}, info, rng) == ("b",)  # the largest u: kept at probability 1
    assert rng.asked == Counter({2 * BITS // 8: 1})  # one draw of 16 bytes for each key with units


def test_the_table_of_half_counts_in_the_docs_is_what_the_code_computes():
    from pathlib import Path

    from fuzzpy.primitives.units import selection_threshold

    text = (Path(__file__).parents[2] / "docs" / "privacy-notions.md").read_text()
    section = text[text.index("### The optimal rule"):text.index("## Certification")]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 13
    for eps, delta, m, threshold, optimal, ratio in rows[1:]:
        e, d, groups = F(eps.strip()), F(delta.strip()), int(m)
        assert selection_threshold(e, d, groups, F(1)) == int(threshold)
        assert keep_curve(e, d, groups, F(1)).half_count() == int(optimal)
        assert f"{int(optimal) / int(threshold):.2f}" == ratio.strip()
