"""Rule Primitive (docs/soundness.md): each primitive's typing rule, declared once in the registry,
gives its result's distance; the functions a primitive applies are checked with its other
arguments' presence (a selection's score function with a public parameter, but what it captures
keeps its risk).  The attacks here go at the arithmetic rules (interval bounds, unbounded results),
comparisons, ordered windows and the functions primitives apply.

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP); runs use RandomSource.seeded (tests only).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import (
    ROW_A,
    ROW_B,
    assert_accepted_exactly,
    assert_rejected,
    check,
    codes,
    make_tables,
    outcome,
    refused_report,
)


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


DEEP = "function deep (n : num) : num { if n <= 0 then 0 else 1 + deep (n - 1) }\n"
MAIN = "function main (db : bag T) : fuzzy num "

REJECTED = {
    # first review round: unbounded arithmetic
    "division-by-private": ("E0305", "function main (db : bag T) : fuzzy num { laplace 1 (100 / (count db + 1)) }"),
    "exp-of-private": ("E0305", "function main (db : bag T) : fuzzy num { laplace 1 (exp (count db)) }"),
    "sum-of-unclipped": ("E0305", "function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> r.x - r.n * r.x + exp r.x) db)) }"),
    # (first review round: a per-part function capturing a private value was charged as if it read its
    # part alone; it is now charged once per part, exactly: test_rule_captured_per_part.py)
    # fifth review round: cswap/min/exp bounds
    "exp-times-negative-interval-bound": (
        "E0305", "function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> (0 - exp r.x) * clip 0 1 r.x) db)) }"),
    "exp-bound-other-order": (
        "E0305", "function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> clip 0 1 r.x * (0 - exp r.x)) db)) }"),
    "exp-times-zero-has-no-bound": (
        "E0305", "function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> (0 - exp r.x) * 0) db)) }"),
    "abs-of-negated-exp": (
        "E0305", "function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> abs (0 - exp r.x)) db)) }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_refused_with_the_exact_code(name):
    """First and fifth review rounds, handled: arithmetic whose result has no bound (a division by
    a private number, exp, an unclipped sum, exp under a negative or zero factor) is infinitely
    sensitive (E0305)."""
    assert_rejected(*REJECTED[name])


ACCEPTED = {
    # name: (program, total epsilon, [mechanism sensitivities in order]); first review round
    "head-doubles-the-edit-distance": ("function main (db : bag T) : fuzzy num { laplace 1 (count (head 10 (sort_by (fun r -> r.x) db))) }", F(1), [2]),
    "product-of-clipped-counts": ("function main (db : bag T) : fuzzy num { let c = clip 0 10 (count db); laplace 1 (c * c) }", F(1), [20]),
    "division-by-a-constant-bounds": ("function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> clip 0 5 r.x / 2) db)) }", F(1), [F(5, 2)]),
    "max-of-two-uses": ("function main (db : bag T) : fuzzy num { laplace 1 (max (count db) (count db)) }", F(1), [2]),
    "product-with-negative-bounds": ("function main (db : bag T) : fuzzy num { let c = clip (0 - 3) 2 (count db); laplace 1 (c * c) }", F(1), [6]),
    "tail-of-a-union": ('function main (db : bag T) : fuzzy num { laplace 1 (count (tail 2 (sort_by (fun r -> r.k) (union db db)))) }', F(1), [4]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """First review round, handled: windows double the edit distance, products and quotients of
    bounded values are bounded by their intervals, each use of the table counts."""
    assert_accepted_exactly(*ACCEPTED[name])


def test_min_with_a_constant_keeps_its_upper_bound():
    """Fifth review round (cswap/min/exp bounds): min x 5 <= 5 whatever x is (NaN from a row
    function is summed as 0)."""
    assert_accepted_exactly("function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> min (exp r.x) 5) db)) }",
                            1, [5])


def test_equality_on_bags_is_rejected_or_data_independent(tables):
    """Third review round, finding 5 (medium-high): `==` on bags failed or succeeded depending on
    the data.

    `_comparable` (arith.py) let `==` compare any two values of the same type, bags and tuples of
    bags included.  At run time `operator.eq` on DataFrames is elementwise: a frame of another
    length raises ValueError, a frame of the same length gives a frame whose truth value raises;
    inside a tuple, Python compares by identity first, and `union a b` returned `a` itself when b
    was empty.  So `(union db extra, 1) == (db, 1)` was True on a table without "b" rows and raised
    with one: under randomized_response (epsilon 1, which the rule charges) the run's exit code said
    whether the row exists, without noise.  Suggested fix: allow == / != only on types with a
    decidable, data-independent equality (numbers, bool, string, categories, unit, and
    tuples/records/sums/lists of those); reject bags, seqs, parts, functions and distributions
    with E0202."""
    r = check("function main (db : bag T) : fuzzy bool {\n"
              '  let extra = filter (fun r -> r.k == "b") db;\n'
              "  randomized_response 1 ((union db extra, 1) == (db, 1)) }")
    if not r.ok:
        assert "E0202" in codes(r)
        return
    assert outcome(r, tables(ROW_A))[0] == outcome(r, tables(ROW_A + ROW_B))[0]


@pytest.mark.parametrize("body", [
    "exponential 1 [1, 2] (fun q -> clip 0 1 (count db) + 0 * deep (count db))",
    "sample a = above_threshold 1 1 0 [1, 2] (fun q -> clip 0 1 (count db) + 0 * deep (count db)); "
    "laplace 1 (count db)",
])
def test_a_score_function_capturing_a_risky_private_computation_is_refused(body):
    """Seventh review round (7a), handled: score functions get public parameters (rule Primitive),
    but what they capture keeps its risk (E0309)."""
    refused_report(DEEP + MAIN + "{ " + body + " }", "E0309")
