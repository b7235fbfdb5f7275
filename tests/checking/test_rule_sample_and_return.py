"""Rules Sample and Return (docs/soundness.md): `sample` composes sequentially (the losses add, the
sampled value is public) and runs its expressions when the distribution is drawn, not when it is
built; `return e` of a value that moves is infinitely far apart in max-divergence, so releasing a
private value without noise is refused.

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP); runs use RandomSource.seeded (tests only).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import ROW_A, ROW_B, assert_accepted_exactly, assert_rejected, check, make_tables, run_result


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "

REJECTED = {
    # first review round
    "return-private-value": ("E0302", "function main (db : bag T) : fuzzy num { return (count db) }"),
    "comparing-distributions": ("E0202", "function main (db : bag T) : fuzzy num { let d = laplace 1 (count db); if d == d then return 1 else return 0 }"),
    # fifth review round
    "released-plus-private": (
        "E0302", "function main (db : bag T) : fuzzy num { sample a = laplace 1 (count db); return (a + count db) }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_refused_with_the_exact_code(name):
    """First and fifth review rounds, handled: a raw private value returned (alone or next to a
    released one) is E0302; distributions cannot be compared (E0202)."""
    assert_rejected(*REJECTED[name])


def test_a_distribution_sampled_twice_is_charged_twice():
    """First review round, handled: each `sample` of one distribution is a release of its own."""
    assert_accepted_exactly("function main (db : bag T) : fuzzy (num, num) { let d = laplace 1 (count db); sample x = d; sample y = d; return (x, y) }",
                            F(2), [1])


@pytest.mark.parametrize("body", [
    # a mechanism inside a discarded let: a distribution is only a value until sampled
    "{ laplace (let z = laplace 1 (count db); 1) (count db) }",
    "{ sample a = (let z = laplace 1 (count db); return 1); laplace 1 (count db) }",
    # a finite private let-bound value under a constant body
    "{ laplace (let z = count db; 1) (count db) }",
])
def test_a_discarded_mechanism_never_releases_and_the_epsilon_covers_the_run(body, tables):
    """Sixth review round (constants passed as constants): a distribution that is never sampled
    releases nothing, and the proven epsilon covers what the run releases."""
    r = check(MAIN + body)
    assert r.ok and r.epsilon == 1
    for rows in ("", ROW_A, ROW_A + ROW_B):
        res = run_result(r, tables(rows))
        assert len(res.releases) == 1  # only the mechanism that is sampled releases
    a, b = run_result(r, tables(ROW_A), 3).value, run_result(r, tables(ROW_A + ROW_B), 3).value
    assert abs(F(b) - F(a)) == 1
