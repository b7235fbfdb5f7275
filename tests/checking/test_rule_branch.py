"""Rule Branch (docs/soundness.md): a branch on a value at infinite distance moves everything it
produces arbitrarily (a bool, a sum's side and a list's shape are discrete), and when an arm may
fail (or may not finish), which arm runs decides whether the run completes, so the choice's
dependences join the failure risk.

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP); runs use the soundness oracle (`fuzzpy.audit.oracle.audit_pair`).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import ROW_A, assert_accepted_exactly, assert_rejected, audit, kinds, make_tables, refused_report


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "
FIB = "function fib (n : num) : num { if n <= 1 then n else fib (n - 1) + fib (n - 2) }\n"

REJECTED = {
    # first review round: private control flow
    "branch-on-private-comparison": ("E0302", "function main (db : bag T) : fuzzy num { if count db > 5 then return 1 else return 0 }"),
    "case-on-private-sum": ("E0302", "function main (db : bag T) : fuzzy num { case (if count db > 3 then inl 1 else inr 2) of { inl a => return 0 | inr b => return 1 } }"),
    "case-on-private-length-list": ("E0302", "function main (db : bag T) : fuzzy num { case (if count db > 3 then [1] else []) of { [] => return 0 | h :: t => return 1 } }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_refused_with_the_exact_code(name):
    """First review round, handled: a release chosen by a private comparison, a private sum's side
    or a private list's length is infinitely far apart on neighbours (E0302)."""
    assert_rejected(*REJECTED[name])


ACCEPTED = {
    # fifth review round: sums, a private payload through an ascribed sum, and a public scrutinee
    "ascribed-sum-with-private-payload": (
        "function main (db : bag T) : fuzzy num { let s = (inl (count db) : num + num); "
        "case s of { inl a => laplace 1 a | inr b => laplace 1 b } }", F(1), [1, 1]),
    "public-scrutinee-scales-the-table": (
        "function main (db : bag T) : fuzzy num { case (inl 1 : num + num) of { inl a => laplace 1 (a * count db) "
        "| inr b => return b } }", F(1), [1]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """Fifth review round, handled: a case on a public sum charges only the arm taken."""
    assert_accepted_exactly(*ACCEPTED[name])


# ---- work that never finishes, under a branch on private data ----------------------------------

POW2 = "function pow2 (x : num) (m : int) : num { if m <= 0 then x else pow2 (x * x) (m - 1) }\n"
UNFINISHED = {
    "released-squared": POW2 + MAIN + "{ sample a = laplace 1 (count db); "
                                       "let z = if count db > 1 then pow2 a 40 else 0; laplace 1 (count db) }",
    "public-nonconstant-squared": POW2 + MAIN + "{ let z = if count db > 1 then pow2 (count db * 0 + 3) 40 else 0; "
                                                 "laplace 1 (count db) }",
    "unrolled-fib": FIB + MAIN + "{ let z = if count db > 1 then fib 60 else 0; laplace 1 (count db) }",
}


@pytest.mark.parametrize("name", sorted(UNFINISHED))
def test_a_private_branch_around_endless_public_work_is_a_risk(name):
    """Seventh review round (7a), finding 5 (medium): work that never finishes but carried no FAIL
    -- exact products of public values, and unrolled recursions with exponentially many calls --
    under a branch on private data.  Rule Branch only adds the choice when an arm has FAIL.

    (a) Rule Exact treated a product of public numbers as harmless ("grows only by that factor's
    digits"), but released values and public non-constants (`count db * 0 + 3`, a widened counter)
    are exact Fractions at run time: squaring one 40 times needs 2^40 times its digits.  The arm
    had no FAIL, so `if count db > 1 then pow2 a 40 else 0` had no risk, and only the table with
    count > 1 ran (forever).  (b) Rule Unroll bounds the *depth* of an unrolled recursion (fib 60
    nests 60 calls), not the number of calls (fib 60 makes ~10^12): a public constant computation
    that never ends, with no FAIL, run or not depending on private data.  Suggested fix (made):
    rule Exact adds FAIL to a product or quotient of two non-constant numbers (public or not) whose
    result is not a bounded integer; rule Unroll adds FAIL when an instance's total number of calls
    exceeds a work budget (limits.MAX_CALLS).  Then rule Branch adds the private choice (E0309)."""
    refused_report(UNFINISHED[name], "E0309")


def test_evidence_unrolled_fib_under_a_private_branch_times_out_on_one_table(tables):
    """Seventh review round (7a), finding 5: fixed (fib 60 makes more than limits.MAX_CALLS calls:
    FAIL, so the private branch is refused, E0309); the entry point is still built, and shows why."""
    r, pair = audit(UNFINISHED["unrolled-fib"], tables, ROW_A, ROW_A * 2, timeout=0.5)
    ok = r.ok  # (never `assert r.ok`: pytest would print the report, whose IR repr is exponential here)
    assert not ok and pair.a.status == "ok" and pair.b.status == "timeout" and "outcome" in kinds(pair)
