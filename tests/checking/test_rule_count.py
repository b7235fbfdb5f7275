"""Rule Count (docs/soundness.md): a recursion over a public counter, `if n op c then BASE else STEP`
whose recursive calls all pass `n - k` (counting down) or all `n + k` (counting up), k > 0 a public
constant, called with a constant, is checked once and charged exactly once per level.  The bound c
is a public constant or a parameter that every recursive call passes on unchanged, given a constant.

A loop that counts up to a public bound with an early stop on a released value was refused with an
infinite epsilon (issue 37): the count-down form was counted, the count-up form was unrolled, and
its levels (reached under a branch on a released value) were widened after 256, forgetting the
counter.  The attacks keep what must stay refused: a bound that comes from data or from a release,
a bound that changes from level to level, a counter that moves away from its bound.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import check, codes, exactly, make_tables, refused_report, violations

MAIN = "function main (db : bag T) : fuzzy num "
UP = ("function loop (i : int) (n : int) (db : bag T) : fuzzy num {{\n"
      "  if {guard} then return 0 else\n  (sample v = laplace 0.01 (count db);\n"
      "  if v > 100 then return v else loop ({step}) {bound} db) }}\n")


def up(call: str, guard: str = "i >= n", step: str = "i + 1", bound: str = "n") -> str:
    return UP.format(guard=guard, step=step, bound=bound) + MAIN + "{ " + call + " }"


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


def test_counting_up_to_a_constant_bound_is_charged_once_per_level():
    """300 levels of 0.01, as counting down: 3 (it was E0302 past 256 levels)."""
    src = ("function loop (i : int) (db : bag T) : fuzzy num {\n  if i >= 300 then return 0 else\n"
           "  (sample v = laplace 0.01 (count db);\n  if v > 100 then return v else loop (i + 1) db) }\n")
    exactly(src + MAIN + "{ loop 0 db }", 3, [1])
    down = src.replace("i >= 300", "i <= 0").replace("i + 1", "i - 1")
    exactly(down + MAIN + "{ loop 300 db }", 3, [1])


def test_counting_up_to_a_bound_parameter_passed_on_unchanged_is_exact():
    exactly(up("loop 0 300 db"), 3, [1])
    exactly(up("loop 0 300 db", guard="n <= i"), 3, [1])      # the bound on either side
    exactly(up("loop 0 3000 db"), 30, [1])
    exactly(up("loop 0 300 db", step="i + 2"), F(3, 2), [1])  # 150 levels
    exactly(up("loop 7 300 db"), F(293, 100), [1])


def test_counting_down_to_a_bound_parameter_is_exact():
    exactly(up("loop 300 0 db", guard="i <= n", step="i - 1"), 3, [1])


def test_a_counted_loop_up_keeps_its_oracle_clean(tables):
    r = exactly(up("loop 0 5 db"), F(5, 100), [1])
    assert violations(r, tables) == []


def test_a_bound_that_comes_from_data_stays_refused():
    r = refused_report(up("loop 0 (count db) db"), "E0302")
    assert "E0309" in codes(r)  # the number of levels, hence whether the run completes, is private


def test_a_released_bound_stays_refused():
    """A release at each of a released, unbounded number of levels: unbounded loss."""
    refused_report(up("sample m = laplace 1 (count db); loop 0 (floor m) db"), "E0302")


def test_a_bound_that_moves_with_the_counter_stays_refused():
    refused_report(up("loop 0 300 db", bound="(n + 1)"), "E0302")


def test_a_counter_that_moves_away_from_its_bound_stays_refused():
    refused_report(up("loop 0 300 db", step="i - 1"), "E0302")


def test_a_counter_that_moves_both_ways_is_not_counted():
    src = ("function loop (i : int) (db : bag T) : fuzzy num {\n  if i >= 300 then return 0 else\n"
           "  (sample v = laplace 0.01 (count db);\n  if v > 100 then loop (i - 1) db else loop (i + 1) db) }\n")
    r = check(src + MAIN + "{ loop 0 db }")
    assert not r.ok and "E0302" in codes(r)


def test_a_closure_defined_before_the_guard_is_counted():
    """Issue 37 (a closure inside a recursion): `let f = fun t -> ...;` before the guard made the
    body no `if`, so the loop was unrolled, then widened past 256 levels (E0302).  The lets before
    the guard run at every level and are part of the body checked once: counted exactly."""
    closure = ("function loop (i : int) (db : bag T) : fuzzy num {{ let f = fun t -> laplace 0.01 (count t); "
               "if {guard} then return 0 else (sample v = f db; if v > 100 then return v else loop ({step}) db) }}\n")
    exactly(closure.format(guard="i >= 300", step="i + 1") + MAIN + "{ loop 0 db }", 3, [1])
    exactly(closure.format(guard="i <= 0", step="i - 1") + MAIN + "{ loop 300 db }", 3, [1])


def test_a_let_before_the_guard_that_recurses_or_rebinds_the_counter_is_not_counted():
    body = ("function loop (i : int) (db : bag T) : fuzzy num {{ {let} if i >= 300 then return 0 else "
            "(sample v = laplace 0.01 (count db); if v > 100 then return v else loop (i + 1) db) }}\n")
    refused_report(body.format(let="let x = loop 0 db;") + MAIN + "{ loop 0 db }", "E0302")  # never ends
    refused_report(body.format(let="let i = 3;") + MAIN + "{ loop 0 db }", "E0302")  # the counter stays 3


def test_a_bound_named_by_a_let_before_the_guard_is_not_taken_for_a_public_constant():
    """`let c = ...; if i >= c`: c is local, not the program's; the loop is not counted (refused
    here past 256 levels, where it is 3: a precision left for later, never a wrong bound)."""
    src = ("function loop (i : int) (db : bag T) : fuzzy num { let c = 300; if i >= c then return 0 else "
           "(sample v = laplace 0.01 (count db); if v > 100 then return v else loop (i + 1) db) }\n")
    refused_report("param c : num = 3;\n" + src + MAIN + "{ loop 0 db }", "E0302")
