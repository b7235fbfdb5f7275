"""Rule Widen (docs/soundness.md): a chain of nested instances reached under branches on values that
are not constants is unrolled for 256 speculative levels; then the numeric constants that changed
are forgotten (widened, keeping their parameter's declared type), so that rule Recursion applies;
a mechanism that needs a forgotten constant says which recursion was widened.

Attacks found by the review rounds and pinned as regression tests, and false rejections pinned as
they are today (rule Widen (breadth) is tested in test_widen_breadth.py).  Runs use
RandomSource.seeded (tests only).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import ROW_A, assert_accepted_exactly, check, codes, exactly, make_tables, moved, refused_report


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "
# widened after 256 nested instances, solved as a fixpoint: still exactly 2
PAST_THE_WIDENING_DEPTH = ("function f (i : num) (x : num) : num { if i > 0 then f (i - 1) x else x + x }\n"
                           "function main (db : bag T) : fuzzy num { laplace 1 (f 300 (count db)) }")


def test_a_recursion_past_the_widening_depth_keeps_its_exact_bound():
    """Third review round (widening after 256 instances), handled: still exactly 2."""
    assert_accepted_exactly(PAST_THE_WIDENING_DEPTH, F(1), [2])


def test_recursion_past_the_widening_depth_runs_with_its_calibration(tables):
    """Third review round, handled: the run moves by exactly the proven 2."""
    r = check(PAST_THE_WIDENING_DEPTH)
    assert moved(r, tables(""), tables(ROW_A)) == 2


SPEC_LOOP = ("function loop (i : int) (db : bag T) : fuzzy num {{\n  if i <= 0 then return 0 else "
             "(sample x = laplace 0.01 (count db); if x > 0 then loop (i - 1) db else loop (i - 1) db) }}\n"
             + MAIN + "{{ loop {n} db }}")


def test_fr2_a_constant_bounded_loop_under_a_released_branch_is_widened_after_256_levels():
    """Seventh review round (7b), false rejection FR2: rule Widen counted *any* branch on a
    non-constant, so a loop bounded by a constant counter whose recursive call sits under a branch
    on a released value (adaptive algorithms: `if x > t then loop (i - 1) a else loop (i - 1) b`)
    was widened after 256 levels: the counter forgotten, the loop's releases unbounded (E0302,
    plus FR1's E0309/E0311).  Precise: 300 levels of 0.01 = 3, as for the same loop without the
    branch.  Suggested fix: only count as speculative the levels whose *termination* is not decided
    by constants.  Fixed by rule Count: the loop is checked once and charged exactly for each
    level."""
    exactly(SPEC_LOOP.format(n=200), 2, [1])
    exactly(SPEC_LOOP.format(n=300), 3, [1])


def test_fr3_widening_a_bounded_parameter_reports_a_type_mismatch():
    """Seventh review round (7b), false rejection FR3: widening forgot a constant argument of a
    parameter with a declared bounded type: the widened argument (`int`, unbounded) no longer fit
    `int[0, 1000]` and the error was a type mismatch the user did not write (E0202 "expected
    int[0, 1000], but this argument is int").  Precise: E0302 (the loop's releases are unbounded).
    Suggested fix: widen to the parameter's declared type.  Fixed: a widened argument keeps its
    parameter's declared type; the error is the precise one."""
    r = refused_report("function f (i : int[0, 1000]) (db : bag T) : fuzzy num {\n  sample a = laplace 0.001 (count db);\n"
                       "  if a > 0 then f (clip 0 1000 (i + 1)) db else return i }\n" + MAIN + "{ f 0 db }", "E0302")
    assert "E0202" not in codes(r)


def test_fr6_an_untyped_argument_whose_bounds_drift_is_unrolled_to_the_limit(monkeypatch):
    """Seventh review round (7b), false rejection FR6: a speculative recursion whose untyped (or
    type-variable) numeric argument changes bounds at each level (`f (n - 1) (x * 2)` with
    x : num[0, 10]) never reaches the same instance key: rule Widen forgets constants, not bounds,
    so it is unrolled to UNROLL_DEPTH (20,000 levels, ~30 s) and refused with E0306, whose note
    speaks of recursion on public constants.  Declaring `(x : num)` gives epsilon 0 at once.
    Suggested fix: widen changed parameter types too."""
    from fuzzpy import limits

    monkeypatch.setattr(limits, "UNROLL_DEPTH", 300)  # the same path, faster
    use = MAIN + "{ sample n = laplace 1 3; laplace 1 (clip 0 1 (f n (clip 0 10 (count db)))) }"
    refused_report("function f (n : num) x : num { if n <= 0 then 0 else f (n - 1) (x * 2) }\n" + use, "E0306")
    exactly("function f (n : num) (x : num) : num { if n <= 0 then 0 else f (n - 1) (x * 2) }\n" + use, 0, [0, 0])


def test_fr7_the_widening_note_is_attached_to_unrelated_errors():
    """Seventh review round (7b), FR7 (diagnostics): once any recursion had been widened, every
    E0209 of the program carried the note "the checker stopped unrolling f ...", also one about a
    released epsilon that has nothing to do with f (`checker.fail` read the global
    `self.widened`).  Suggested fix: attach the note only when the constant the mechanism needs
    comes from a widened parameter.  Fixed: a is not f's argument."""
    widened = "function f (i : int) (a : num) : num { if a > i then f (i + 1) a else i }\n"
    exactly(widened + MAIN + "{ sample a = laplace 1 (count db); laplace 1 (count db + clip 0 1 (f 0 a)) }", 2)
    r = refused_report(widened + MAIN + "{ sample a = laplace 1 (count db); let z = f 0 a; laplace a (count db) }", "E0209")
    d = next(d for d in r.diagnostics if d.code == "E0209")
    assert not any("stopped unrolling f" in n for n in d.notes)  # fixed: a is not f's argument
