"""Rules Public tables and Table join for `join_public` (docs/soundness.md): a private table joined
with a public table whose key column its schema declares unique (or at most m rows per value) is
m times as far as the private table; the public table is public data, never charged, and only
tables whose type states the bound are accepted.  Each test names the attack it pins."""

from __future__ import annotations

from fractions import Fraction

from join_tables import accepted, check, frame, loss_violations, moved, refused

MAIN = "function main (f : bag F) (p : bag P) : fuzzy num "


def test_a_unique_public_key_keeps_the_private_distance():
    r = accepted(MAIN + '{ laplace 1 (count (join_public "tail" "tail" f p)) }')
    assert r.epsilon == 1 and [m.sensitivity for m in r.mechanisms] == [1]
    assert [i.name for i in r.inputs] == ["f"], "a public table is not an input: nothing is charged on it"
    assert list(r.public_tables) == ["p"] and r.public_tables["p"].per_key == (("tail", 1),)


def test_at_most_m_rows_per_value_multiplies_the_distance_by_m():
    r = accepted('function main (f : bag F) (m : bag Models) : fuzzy num '
                 '{ laplace 1 (count (join_public "maker" "maker" (map (fun r -> {maker = if r.delay > 5 then "A" '
                 'else "B", delay = r.delay}) f) m)) }')
    assert [m.sensitivity for m in r.mechanisms] == [3] and r.epsilon == 1


def test_a_groupby_on_a_public_category_composes_in_parallel():
    r = accepted('function main (f : bag F) (p : bag P) { each (fun g -> laplace 1 (count g)) '
                 '(groupby (fun r -> r.maker) (join_public "tail" "tail" f p)) }')
    assert r.epsilon == 1, "two groups of one join cost one epsilon, not two"


def test_a_private_table_given_as_the_public_side_is_refused_with_the_join_named():
    """Attack: pass a private table where join_public reads public data."""
    r = refused('function main (f : bag F) (q : bag Q) : fuzzy num '
                '{ laplace 1 (count (join_public "tail" "tail" f (truncate 1 "tail" q))) }', "E0302",
                "join_public reads its second table as public data")
    assert "q" in next(d.message for d in r.diagnostics if d.code == "E0302")


def test_a_public_key_without_a_declared_bound_is_refused():
    refused(MAIN + '{ laplace 1 (count (join_public "carrier" "maker" (map (fun r -> {carrier = r.carrier}) f) p)) }',
            "E2302", "'maker'")
    refused(MAIN + '{ laplace 1 (count (join_public "delay" "tail" f p)) }', "E0202", "can never be equal")
    refused('function main (f : bag F) (m : bag Models) : fuzzy num '
            '{ laplace 1 (count (join_public "tail" "model" f m)) }', "E2302", "'model'")


def test_a_union_of_public_tables_forgets_the_bound():
    """Attack: a union of a unique public table with itself has two rows per key: the bound must go."""
    refused(MAIN + '{ laplace 1 (count (join_public "tail" "tail" f (union p p))) }', "E2302")


def test_a_map_forgets_the_bound_and_a_filter_keeps_it():
    """Attack: a map can give every row the same key; a filter only drops rows."""
    refused(MAIN + '{ laplace 1 (count (join_public "tail" "tail" f (map (fun r -> {tail = "x", seats = r.seats, '
                   'maker = r.maker}) p))) }', "E2302")
    r = accepted(MAIN + '{ laplace 1 (count (join_public "tail" "tail" f (filter (fun r -> r.seats > 3) p))) }')
    assert r.epsilon == 1


def test_a_plain_bag_cannot_be_given_the_type_of_a_public_table():
    """Attack: ascribe a mapped table the public schema's type to borrow its declared key."""
    refused(MAIN + '{ let fake = (map (fun r -> {tail = "x", seats = 1, maker = "A"}) f : bag P); '
                   'laplace 1 (count (join_public "tail" "tail" f fake)) }', "E0202")
    refused('function use (t : bag P) (f : bag F) : fuzzy num { laplace 1 (count (join_public "tail" "tail" f t)) }\n'
            + MAIN + '{ use (map (fun r -> {tail = "x", seats = 1, maker = "A"}) f) f }', "E0202")


def test_a_helper_given_the_public_table_keeps_it_public():
    accepted('function named (t : bag P) (f : bag F) : bag {tail : string, carrier : string, delay : num[0, 10], '
             'seats : int[0, 10], maker : cat{"A", "B"}} { join_public "tail" "tail" f t }\n'
             + MAIN + '{ laplace 1 (count (named p f)) }')
    r = accepted('function cnt t f { laplace 1 (count (join_public "tail" "tail" f t)) }\n' + MAIN + '{ cnt p f }')
    assert r.epsilon == 1


def test_columns_of_both_sides_other_than_the_key_must_have_different_names():
    refused('function main (f : bag F) (p : bag P) : fuzzy num { laplace 1 (count (join_public "tail" "tail" '
            '(map (fun r -> {tail = r.tail, seats = r.delay}) f) p)) }', "E2301", "'seats'")


def test_keys_are_column_names_written_as_constants():
    refused(MAIN + '{ laplace 1 (count (join_public "nope" "tail" f p)) }', "E0205", "'nope'")
    refused(MAIN + '{ sample c = laplace 1 1; laplace 1 (count (join_public (if c > 0 then "tail" else "carrier") '
                   '"tail" f p)) }', "E0209")


def test_only_a_public_schema_declares_keys():
    r = check('schema Z { a : string unique }\nfunction main (z : bag Z) : fuzzy num { laplace 1 (count z) }')
    assert "E0208" in [d.code for d in r.diagnostics]
    r = check('public schema Z { a : string at most 0 per value }\n'
              'function main (z : bag Z) (f : bag F) : fuzzy num { laplace 1 (count f) }')
    assert "E0208" in [d.code for d in r.diagnostics]


def test_a_join_with_more_matches_than_the_growth_limit_is_refused():
    refused('public schema Many { maker : cat{"A", "B"} at most 65 per value }\n'
            'function main (f : bag F) (m : bag Many) : fuzzy num { laplace 1 (count (join_public "maker" "maker" '
            '(map (fun r -> {maker = "A"}) f) m)) }', "E0311")


def test_the_report_names_the_public_tables_and_what_they_declare():
    from fuzzpy.render.report import report_json, report_text

    r = accepted(MAIN + '{ laplace 1 (count (join_public "tail" "tail" f p)) }')
    assert "public tables (not charged): p (P: unique tail)" in [t for _, t in report_text(r).lines]
    assert report_json(r)["public_tables"] == [{"name": "p", "schema": "P", "keys": {"tail": 1}}]


def test_a_row_added_to_the_private_side_moves_the_join_by_one_row_per_public_match():
    r = accepted('function main (f : bag F) (m : bag Models) : fuzzy num '
                 '{ laplace 1 (count (join_public "maker" "maker" (map (fun r -> {maker = if r.delay > 5 then "A" '
                 'else "B"}) f) m)) }')
    models = frame(r, "Models", [("A", "x"), ("A", "y"), ("A", "z"), ("B", "w")], "m")
    a = frame(r, "F", [("t1", "UA", 1)], "f")
    b = frame(r, "F", [("t1", "UA", 1), ("t2", "UA", 9)], "f")
    assert moved(r, {"f": a}, {"f": b}, public={"m": models}) == 3
    assert loss_violations(r, {"f": a}, {"f": b}, "f", public={"m": models}) == []


def test_null_keys_match_nothing():
    r = accepted('function main (f : bag F) (p : bag P) : fuzzy num { laplace 1 (count (join_public "tail" "tail" '
                 '(map (fun r -> {tail = if r.delay > 5 then r.tail else r.tail}) f) p)) }')
    import pandas as pd

    from fuzzpy.runtime.kernels.joins import join_frames

    left = pd.DataFrame({"tail": ["t1", None, float("nan")], "x": [1, 2, 3]})
    right = pd.DataFrame({"tail": ["t1", None], "seats": [5, 6]})
    out = join_frames(left, right, "tail", "tail", True)
    assert out.to_dict("list") == {"tail": ["t1"], "x": [1], "seats": [5]}
    assert r.ok and Fraction(1) == r.epsilon
