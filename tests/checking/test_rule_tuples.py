"""Rule Tuples, records, lists, injections, projections, fields (docs/soundness.md): distances
compose as the type's metric says (tensor tuples and records add, with-pairs take the max, a
projection of an unsplit value moves as the whole), and the failure risk is always the union of
the sub-expressions' risks, whatever is done with their values.

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP); runs use RandomSource.seeded (tests only).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import ROW_A, assert_accepted_exactly, check, make_tables, outcome, refused_report


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


DOWN = "function down (x : num) : num { if x > 0 then down (x - 1) else 0 }\n"
DEEP = "function deep (n : num) : num { if n <= 0 then 0 else 1 + deep (n - 1) }\n"
MAIN = "function main (db : bag T) : fuzzy num "

ACCEPTED = {
    # name: (program, total epsilon, [mechanism sensitivities in order])
    # first review round
    "tensor-tuple-is-l1": ("function main (db : bag T) : fuzzy (num, num) { laplace 1 (count db, count (filter (fun r -> r.flag) db)) }", F(1), [2]),
    # fifth review round: with-pairs destructured, recombined, nested in tensors, passed as parameters
    "with-pair-destructured-and-added": (
        "function main (db : bag T) : fuzzy num { let (|a, b|) = (|count db, count db|); laplace 1 (a + b) }", F(1), [2]),
    "with-pair-inside-a-tensor": (
        "function main (db : bag T) : fuzzy num { let p = ((|count db, count db|), 1); let (w, u) = p; "
        "laplace 1 (w.1 + w.2) }", F(1), [2]),
    "with-pair-parameter-both-projections": (
        "function f (p : (|num, num|)) : num { p.1 + p.2 }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 (f (|count db, count db|)) }", F(1), [2]),
    "with-pair-recombined-as-tensor": (
        "function f (p : (|num, num|)) : (num, num) { let (|a, b|) = p; (a, b) }\n"
        "function main (db : bag T) : fuzzy (num, num) { laplace 1 (f (|count db, count db|)) }", F(1), [2]),
    "with-pair-of-bags-unioned": (
        "function main (db : bag T) : fuzzy num { let w = (|db, db|); laplace 1 (count (union w.1 w.2)) }", F(1), [2]),
    "with-pair-of-bags-parameter": (
        "function f (w : (|bag T, bag T|)) : num { count (union w.1 w.2) }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 (f (|db, db|)) }", F(1), [2]),
    "with-pair-of-split-parts": (
        "function f (w : (|bag T, bag T|)) : num { count (union w.1 w.2) }\n"
        "function main (db : bag T) : fuzzy num { let (a, b) = split (fun r -> r.flag) db; "
        "laplace 1 (f (|a, a|) + f (|b, b|)) }", F(1), [2]),
    "with-pair-of-parts-plus-a-part": (
        "function main (db : bag T) : fuzzy num { let (a, b) = split (fun r -> r.flag) db; let w = (|a, b|); "
        "laplace 1 (count w.1 + count w.2 + count a) }", F(1), [2]),
    # fifth review round: records of bags
    "record-of-bags": (
        "function main (db : bag T) : fuzzy num { let r = { a = db, b = db }; laplace 1 (count r.a + count r.b) }",
        F(1), [2]),
    "record-of-bags-parameter": (
        "function f (r : { a : bag T, b : bag T }) : num { count r.a + count r.b }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 (f { a = db, b = db }) }", F(1), [4]),
    "record-of-split-parts-parameter": (
        "function f (r : { a : bag T, b : bag T }) : num { count r.a + count r.b }\n"
        "function main (db : bag T) : fuzzy num { let (x, y) = split (fun r -> r.flag) db; "
        "laplace 1 (f { a = x, b = y } + f { a = x, b = x }) }", F(1), [6]),
    # fifth review round: cswap with negative intervals: projections of an unsplit pair each move as the whole
    "cswap-negative-intervals": (
        "function main (db : bag T) : fuzzy num { let c = cswap (clip (0 - 5) 0 (count db), clip (0 - 3) 2 (count db)); "
        "laplace 1 (c.1 + c.2) }", F(1), [4]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """Attacks on the metrics of tuples, with-pairs and records (first and fifth review rounds),
    each accepted with exactly its true epsilon."""
    assert_accepted_exactly(*ACCEPTED[name])


def test_with_pair_projections_release_within_the_proven_sensitivity(tables):
    """Fifth review round: a with-pair destructured and added moves its release by exactly 2."""
    r = check(ACCEPTED["with-pair-destructured-and-added"][0])
    a, b = outcome(r, tables("0,a,true,5\n" * 3), 7), outcome(r, tables("0,a,true,5\n" * 3 + ROW_A), 7)
    assert abs(F(b[1]) - F(a[1])) == 2


def test_a_risky_component_of_a_destructured_tuple_is_charged():
    """Sixth review round (unused-let charging): a component that is never used was still
    computed, so its risk counts (E0309)."""
    refused_report(DOWN + MAIN + "{ let (a, b) = (down (count db * 100000), 1); laplace 1 (count db) }", "E0309")


@pytest.mark.parametrize("body", [
    "let z = (inl (deep (count db)) : num + num); laplace 1 (count db)",
    "let z = deep (count db) :: []; laplace 1 (count db)",
    "let z = [1, deep (count db)]; laplace 1 (count db)",
    "let z = cswap (deep (count db), 1); laplace 1 (count db)",
    "let z = clip 3 3 (deep (count db)); laplace 1 (count db)",
    "let z = min 0 (deep (count db)) * 0; laplace 1 (count db)",
    "let q = pmap (fun g -> deep (count g)) (groupby (fun r -> r.k) db); laplace 1 (count db)",
    "let q = values (pmap (fun g -> deep (count g)) (groupby (fun r -> r.k) db)); laplace 1 (count db)",
    "sample v = each (fun g -> (sample a = laplace 1 (count g); return (deep (count g)))) "
    "(groupby (fun r -> r.k) db); laplace 1 (count db)",
])
def test_a_risk_carried_by_each_construct_is_refused(body):
    """Seventh review round (7a, the failure effect), handled: a risky computation inside an
    injection, a cons, a list, cswap, clip, min, pmap, values or each keeps its risk (E0309)."""
    refused_report(DEEP + MAIN + "{ " + body + " }", "E0309")
