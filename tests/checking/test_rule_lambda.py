"""Rule Lambda (docs/soundness.md): `fun x -> e` evaluates nothing; as data (stored, returned
unapplied) its distance is infinite on everything it captures; each application is checked at its
site, so what it captures is charged once per application.

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP); runs use RandomSource.seeded (tests only).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import ROW_A, assert_accepted_exactly, assert_rejected, check, make_tables, run_result


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


DOWN = "function down (x : num) : num { if x > 0 then down (x - 1) else 0 }\n"
MAIN = "function main (db : bag T) : fuzzy num "

REJECTED = {
    # first review round: a closure capturing the table, released as data
    "closure-capturing-db-released": ("E0302", "function main (db : bag T) : fuzzy (num -o num) { return (fun (x : num) -> count db : num -o num) }"),
    "tuple-holding-a-capturing-closure-released": ("E0302", "function main (db : bag T) : fuzzy num { let p = (fun (x : num) -> count db, 1); sample q = return p; return 1 }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_refused_with_the_exact_code(name):
    """First review round, handled: a function value that captures the table is infinitely far
    apart on neighbours when it is released (E0302)."""
    assert_rejected(*REJECTED[name])


ACCEPTED = {
    # first review round
    "closure-applied-twice": ("function main (db : bag T) : fuzzy num { let g = fun (u : num) -> count db; laplace 1 (g 1 + g 2) }", F(1), [2]),
    "public-component-of-a-tuple-holding-a-closure": ("function main (db : bag T) : fuzzy num { let p = (fun (x : num) -> count db, 1); return p.2 }", F(0), []),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """First review round, handled: a closure is charged once per application, and a tuple's
    public component is public whatever the closure next to it captures."""
    assert_accepted_exactly(*ACCEPTED[name])


def test_a_closure_in_a_tuple_is_not_computed_and_not_charged(tables):
    """Sixth review round: a lambda evaluates nothing, so a risky body it is never applied to is
    neither run nor charged."""
    r = check(DOWN + MAIN + "{ let p = (fun (u : num) -> down (count db * 100000), 1); laplace 1 (count db) }")
    assert r.ok and r.epsilon == 1
    assert [run_result(r, tables(rows)).value is not None for rows in ("", ROW_A)] == [True, True]
