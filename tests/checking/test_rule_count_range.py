"""Rule Count over a range (docs/soundness.md): a counted recursion whose counter at the call is not a
constant but a public integer known to lie in [lo, hi] (a released value clipped, `floor (clip 0 5
m)`) is charged the most that any counter value in the range needs: the pointwise maximum of the
levels' summaries, each counted exactly as rule Count does for a constant.

A closure inside a recursion whose length is a released value was refused (issue 37, E0302,
E0305): the counter was not a constant, so the recursion was assumed unbounded.  The attacks keep
what must stay refused: a counter with no range, a counter from private data, a range past the cap,
and a finite bound reused for another range or for no range at all.
"""

from __future__ import annotations

import pytest
from check_and_run import codes, exactly, make_tables, refused_report, violations

from fuzzpy.checking.counting import MAX_COUNT_RANGE

LOOP = ("function loop (db : bag T) (n : int) (acc : num) : fuzzy num {{\n"
        "  if {guard} then return acc\n  else\n"
        "    sample x = laplace 1 (count (filter (fun r -> r.x > n) db));\n"
        "    {rest}\n}}\n")
DOWN = LOOP.format(guard="n <= 0", rest="loop db (n - 1) (acc + x)")


def main(body: str) -> str:
    return "function main (db : bag T) : fuzzy num {\n  sample m = laplace 1 (count db);\n  " + body + "\n}\n"


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


def test_a_released_counter_clipped_to_a_range_is_charged_its_most_levels(tables):
    """The issue's program: at most 5 levels of Laplace 1, plus the release of m: 6."""
    r = exactly(DOWN + main("loop db (floor (clip 0 5 m)) 0"), 6)
    assert violations(r, tables) == []


def test_a_released_counter_without_a_range_stays_refused():
    r = refused_report(DOWN + main("loop db (floor m) 0"), "E0302")
    assert any("privacy loss is unbounded" in d.message for d in r.diagnostics)


def test_a_range_that_starts_above_the_bound_is_charged_its_top_not_its_bottom():
    exactly(DOWN + main("loop db (floor (clip 2 5 m)) 0"), 6)


def test_a_range_that_reaches_past_the_bound_counts_the_values_that_stop_at_once():
    """-3..0 run no level (each its own base level), 1..5 run up to 5."""
    exactly(DOWN + main("loop db (floor (clip (-3) 5 m)) 0"), 6)


def test_a_step_of_two_reaches_two_base_levels_and_takes_the_most_levels():
    """From 5: 5, 3, 1 then -1 (3 levels); from 4: 4, 2 then 0 (2 levels)."""
    src = LOOP.format(guard="n <= 0", rest="loop db (n - 2) (acc + x)")
    exactly(src + main("loop db (floor (clip 0 5 m)) 0"), 4)


def test_counting_up_to_a_constant_bound_from_a_released_start():
    """From any start in [0, 5] up to 10: at most 10 levels, plus m."""
    src = LOOP.format(guard="n >= 10", rest="loop db (n + 1) (acc + x)")
    exactly(src + main("loop db (floor (clip 0 5 m)) 0"), 11)


def test_a_counter_from_private_data_stays_refused():
    r = refused_report(DOWN + main("loop db (clip 0 5 (count db)) 0"), "E0302")
    assert "E0309" in codes(r)  # the number of levels, hence whether the run completes, is private


def test_an_early_stop_on_a_released_value_is_charged_the_full_range(tables):
    src = LOOP.format(guard="n <= 0", rest="if x > 100 then return acc else loop db (n - 1) (acc + x)")
    r = exactly(src + main("loop db (floor (clip 0 5 m)) 0"), 6)
    assert violations(r, tables) == []


def test_a_closure_built_at_each_level_that_captures_the_counter_is_counted(tables):
    """Issue 37's E0305 shape: a function built at each level, capturing the counter, applied."""
    src = ("function loop (db : bag T) (n : int) (acc : num) : fuzzy num {\n"
           "  let f = fun t -> laplace 1 (count (filter (fun r -> r.x > n) t));\n"
           "  if n <= 0 then return acc else (sample x = f db; loop db (n - 1) (acc + x)) }\n")
    r = exactly(src + main("loop db (floor (clip 0 5 m)) 0"), 6)
    assert violations(r, tables) == []


def test_a_closure_that_captures_the_table_inside_a_released_length_recursion_is_counted():
    """The closure captures db (not a parameter of its own) and is applied to the counter."""
    src = ("function loop (db : bag T) (n : int) (acc : num) : fuzzy num {\n"
           "  let g = fun c -> count (filter (fun r -> r.x > c) db);\n"
           "  if n <= 0 then return acc else (sample x = laplace 1 (g n); loop db (n - 1) (acc + x)) }\n")
    exactly(src + main("loop db (floor (clip 0 5 m)) 0"), 6)
    refused_report(src + main("loop db (floor m) 0"), "E0302")


def test_two_ranges_are_each_charged_their_own_most_levels():
    """The summary of one range is not reused for another (it is kept under the range)."""
    exactly(DOWN + main("sample a = loop db (floor (clip 0 2 m)) 0; loop db (floor (clip 0 5 m)) 0"), 8)
    exactly(DOWN + main("sample a = loop db (floor (clip 0 5 m)) 0; loop db (floor (clip 0 2 m)) 0"), 8)


def test_a_range_counted_first_does_not_bound_a_counter_without_a_range():
    refused_report(DOWN + main("sample a = loop db (floor (clip 0 5 m)) 0; loop db (floor m) 0"), "E0302")


def test_a_range_of_more_than_the_cap_is_not_enumerated():
    """Past MAX_COUNT_RANGE values the rule does not apply and the recursion is unbounded, as before."""
    top = MAX_COUNT_RANGE - 1
    exactly(DOWN + main(f"loop db (floor (clip 0 {top} m)) 0"), top + 1)
    refused_report(DOWN + main(f"loop db (floor (clip 0 {top + 1} m)) 0"), "E0302")

