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

import random
from fractions import Fraction

import pytest
from check_and_run import check, codes, exactly, make_tables, refused_report, violations

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


def test_a_range_is_never_charged_less_than_any_of_its_values_counted_as_a_constant():
    """The base level releases at 5 when its counter is below -1: from -3 and -2 the base releases,
    from 1 and 2 up to 2 levels of 1 do.  Each value counted as a constant (rule Count, or
    unrolled) is a lower bound of the range's charge; the range's is 7 (the body checked once sees
    both arms with n not a constant, as rule Count does for a constant counter past 1 level)."""
    src = LOOP.format(guard="n <= 0", rest="loop db (n - 1) (acc + x)").replace(
        "then return acc", "then (if n < -1 then laplace 5 (count db) else return acc)")
    r = exactly(src + main("loop db (floor (clip (-3) 2 m)) 0"), 7)
    for n in range(-3, 3):
        single = check(src + main(f"loop db ({n}) 0"))
        assert single.ok and single.epsilon <= r.epsilon, (n, single.epsilon)


def test_a_counter_whose_range_is_not_of_integers_stays_refused():
    """A counter of 2.5 makes other levels than 2 or 3: only integer ranges are enumerated."""
    src = DOWN.replace("(n : int)", "(n : num)")
    refused_report(src + main("loop db (clip 0 5 m) 0"), "E0302")
    exactly(src + main("loop db (floor (clip 0 5 m)) 0"), 6)


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



def _expected_levels(n: int, bound: int, k: int, up: bool) -> int:
    """The levels a run makes from counter n, counted by hand (the guard stops at the bound)."""
    levels = 0
    while (n < bound) if up else (n > bound):
        n, levels = n + k if up else n - k, levels + 1
    return levels


def _random_range_program(rng: random.Random) -> tuple[str, Fraction]:
    """A counted loop of releases over a clipped released counter, and its epsilon by hand."""
    up, k, eps = rng.random() < 0.5, rng.choice([1, 2, 3]), rng.choice([Fraction(1), Fraction(1, 2)])
    bound = rng.choice([6, 8, 10]) if up else rng.choice([0, 1, 2])
    lo = rng.randint(-3, 4)
    hi = lo + rng.randint(0, 6)
    guard = rng.choice(["n >= {b}", "{b} <= n"] if up else ["n <= {b}", "{b} >= n"]).format(b=bound)
    step = f"n {'+' if up else '-'} {k}"
    e = "1" if eps == 1 else "0.5"
    closure = rng.random() < 0.5
    pre = f"let f = fun t -> laplace {e} (count (filter (fun r -> r.x > n) t));\n  " if closure else ""
    release = "f db" if closure else f"laplace {e} (count (filter (fun r -> r.x > n) db))"
    rest = f"loop db ({step}) (acc + x)"
    if rng.random() < 0.4:
        rest = f"if x > 3 then return acc else {rest}"
    src = (f"function loop (db : bag T) (n : int) (acc : num) : fuzzy num {{\n  {pre}if {guard} then return acc\n"
           f"  else (sample x = {release};\n    {rest})\n}}\n")
    clip = f"clip ({lo}) ({hi}) m"
    most = max(_expected_levels(n, bound, k, up) for n in range(lo, hi + 1))
    return src + main(f"loop db (floor ({clip})) 0"), 1 + eps * most


def test_random_ranges_are_charged_the_levels_counted_by_hand(tables):
    """Directions, steps, bounds on either side, ranges that start past the bound, early stops and
    closures, drawn at random: the epsilon is the release of m plus the most levels any counter of
    the range makes, counted by hand; a few are run on neighbouring tables by the oracle."""
    rng = random.Random(37)
    for i in range(40):
        src, epsilon = _random_range_program(rng)
        r = exactly(src, epsilon)
        if i % 8 == 0:
            assert violations(r, tables) == [], src
