"""Rule Unit join public (docs/soundness.md, "Privacy units through joins"): a table with a privacy
unit joined with a public table keeps its unit and its distance in units, whatever the public
table's bound per key; the unit must survive the join, a table with a unit is never the public
side, and every other join of a unit table stays refused with the way to bound it.  Each test
names the attack it pins."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tests.conftest import check

SCHEMAS = """schema F unit plane { plane : string, tail : string, maker : cat{"A", "B"}, delay : num[0, 10] }
schema G unit plane { plane : string, crew : int[0, 9] }
schema R { tail : string, year : int[1990, 2020] }
public schema P { tail : string unique, seats : int[0, 10] }
public schema Models { maker : cat{"A", "B"} at most 3 per value, model : string }
public schema Planes { plane : string unique, built : int[1950, 2020] }
"""
MAIN = "function main (f : bag F) (p : bag P) (m : bag Models) (q : bag Planes) "


def accepted(body: str, params: str = MAIN):
    r = check(SCHEMAS + params + "{ " + body + " }")
    assert r.ok, [(d.code, d.message, d.notes) for d in r.diagnostics]
    return r


def refused(body: str, code: str, words: str, params: str = MAIN):
    r = check(SCHEMAS + params + "{ " + body + " }")
    found = [(d.code, d.message) for d in r.diagnostics]
    assert not r.ok and code in [c for c, _ in found], found
    d = next(d for d in r.diagnostics if d.code == code)
    assert words in d.message + " ".join(d.notes), (d.message, d.notes)
    return d


def sensitivities(r) -> list[Fraction]:
    return [m.sensitivity for m in r.mechanisms]


# ---- what the join gives --------------------------------------------------------------------------

def test_join_public_of_a_unit_table_keeps_the_unit_in_the_type():
    r = accepted('let j = join_public "tail" "tail" f p; laplace 1 (count (bound_rows 2 j))')
    assert r.ok and r.epsilon == 1
    joined = check(SCHEMAS + 'function main (f : bag F) (p : bag P) : bag {plane : string, tail : string, '
                   'maker : cat{"A", "B"}, delay : num[0, 10], seats : int[0, 10]} '
                   '{ join_public "tail" "tail" f p }')
    assert not joined.ok and any("(unit plane)" in d.message for d in joined.diagnostics), \
        "the result is a unit table, not a row-level bag"


@pytest.mark.parametrize("k", [1, 2, 7])
def test_a_key_with_m_rows_does_not_multiply_the_distance_in_units(k):
    """Attack: a checker charging m*delta (3 per unit) or forgetting the bound after the join."""
    r = accepted(f'laplace 1 (count (bound_rows {k} (join_public "maker" "maker" f m)))')
    assert sensitivities(r) == [k] and r.epsilon == 1
    assert [i.epsilon for i in r.inputs] == [1], "only f is an input; the public table is not charged"


def test_a_unique_key_gives_the_same_distance():
    r = accepted('laplace 1 (count (bound_rows 3 (join_public "tail" "tail" f p)))')
    assert sensitivities(r) == [3]


def test_joined_on_the_unit_with_a_public_table_keyed_by_it():
    r = accepted('laplace 1 (count (bound_rows 1 (join_public "plane" "plane" f q)))')
    assert sensitivities(r) == [1]


def test_filter_and_map_before_and_after_the_join_keep_the_unit():
    r = accepted('let g = map (fun r -> {plane = r.plane, maker = r.maker}) (filter (fun r -> r.delay > 2) f); '
                 'let j = filter (fun r -> r.model == "x") (join_public "maker" "maker" g m); '
                 'laplace 1 (count (bound_rows 4 j))')
    assert sensitivities(r) == [4]


def test_a_joined_unit_table_used_twice_adds_up():
    r = accepted('let j = join_public "tail" "tail" f p; laplace 1 (count (bound_rows 2 (union j j)))')
    assert sensitivities(r) == [8], "a union of two unit tables costs 2 per side (rule Units), then k = 2"


def test_select_keys_on_a_public_column_of_the_join():
    r = accepted('select_keys 1 0.000001 1 (fun r -> r.model) (join_public "maker" "maker" f m)')
    assert r.epsilon == 1, "each unit counts once per released key, however many rows the join gave it"


# ---- what stays refused -------------------------------------------------------------------------

def test_reading_the_joined_rows_without_bounding_is_refused():
    """Attack: the join's result is a unit table; count would read a unit's many rows."""
    refused('laplace 1 (count (join_public "tail" "tail" f p))', "E0330", "privacy unit is plane")


def test_a_join_that_would_lose_the_unit_column_is_refused():
    """Attack: map the unit column away (or rename it), so that no row of the result names its unit."""
    d = refused('laplace 1 (count (bound_rows 1 (join_public "tail" "tail" (map (fun r -> {tail = r.tail}) f) p)))',
                "E0330", "have no column 'plane', their privacy unit")
    assert any("keep the column plane" in n for n in d.notes)
    refused('laplace 1 (count (bound_rows 1 (join_public "tail" "tail" '
            '(map (fun r -> {tail = r.tail, who = r.plane}) f) p)))', "E0330", "no column 'plane'")


def test_a_public_table_with_a_column_named_as_the_unit_is_refused():
    """Attack: a public column with the unit's name would replace (or shadow) the unit."""
    schemas = 'public schema Owners { tail : string unique, plane : string }\n'
    r = check(SCHEMAS + schemas + 'function main (f : bag F) (o : bag Owners) '
              '{ laplace 1 (count (bound_rows 1 (join_public "tail" "tail" f o))) }')
    assert not r.ok and [d.code for d in r.diagnostics][:1] == ["E2301"], r.diagnostics
    assert "'plane'" in r.diagnostics[0].message


def test_a_unit_table_as_the_public_side_is_refused():
    """Attack: give the table with a unit where join_public reads public data."""
    refused('laplace 1 (count (bound_rows 1 (join_public "tail" "tail" p f)))', "E0330",
            "reads its second table as public data, but this is a private table whose privacy unit is plane")


@pytest.mark.parametrize("body, words", [
    ('laplace 1 (count (join_private "tail" "tail" (truncate 1 "tail" f) (truncate 1 "tail" r)))', "truncate"),
    ('laplace 1 (count (truncate 1 "tail" f))', "truncate"),
    ('laplace 1 (count (bound_rows 1 (join_private "tail" "tail" f r)))', "join_private"),
])
def test_other_joins_of_a_unit_table_stay_refused_with_how_to_bound(body, words):
    d = refused(body, "E0330", words, params="function main (f : bag F) (r : bag R) ")
    assert any("bound_rows k t" in n for n in d.notes)


def test_bounded_first_the_row_level_rules_apply_as_before():
    r = accepted('laplace 1 (count (join_public "maker" "maker" (bound_rows 2 f) m))')
    assert sensitivities(r) == [6], "bound_rows 2, then 3 rows per maker: 6 rows per unit"


def test_a_join_of_two_unit_tables_on_their_unit_is_refused_with_why():
    """Attack: join two tables on their unit, whose result rows per unit (all pairs) nothing bounds."""
    d = refused('laplace 1 (count (bound_rows 1 (join_private "plane" "plane" f g)))', "E0330",
                "join_private cannot take a table whose privacy unit is plane",
                params="function main (f : bag F) (g : bag G) ")
    assert any("a join of two tables on their plane is not accepted" in n for n in d.notes)
    assert any("bound_rows k t first, then truncate and join" in n for n in d.notes)
    assert any("join_public keeps the plane" in n for n in d.notes)


def test_the_join_notes_are_only_for_joins():
    d = refused("laplace 1 (count f)", "E0330", "count cannot take", params="function main (f : bag F) ")
    assert not any("join" in n for n in d.notes)
