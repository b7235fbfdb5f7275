"""Rules Units, Bound rows, Bounded groups and Released keys (docs/soundness.md, "Privacy units"):
programs that try to read a table with a unit as if one row were one individual, refused with the
message that says how to bound it, next to programs that pass with an exact bound."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from tests.conftest import check

U = ('schema F unit plane { plane : string, dest : string, origin : cat{"EWR", "JFK", "LGA"}, '
     'delay : num[-10, 100], n : int[0, 5] }\n'
     'schema G unit plane { plane : string, dest : string, origin : cat{"EWR", "JFK", "LGA"}, '
     'delay : num[-10, 100], n : int[0, 5] }\n'
     'schema H unit pilot { pilot : string, dest : string, origin : cat{"EWR", "JFK", "LGA"}, '
     'delay : num[-10, 100], n : int[0, 5] }\n'
     'schema R { plane : string, dest : string, origin : cat{"EWR", "JFK", "LGA"}, '
     'delay : num[-10, 100], n : int[0, 5] }\n')
MAIN = "function main (t : bag F) "
RELEASED_KEYS = 'sample ks = select_keys 1 0.000001 1 (fun r -> r.dest) t; '


def ok(src: str, **kw):
    r = check(U + src, **kw)
    assert r.ok, [(d.code, d.message, d.notes) for d in r.diagnostics]
    return r


def refused(src: str, code: str, words: str = ""):
    r = check(U + src)
    found = [(d.code, d.message) for d in r.diagnostics]
    assert not r.ok and code in [c for c, _ in found], found
    d = next(d for d in r.diagnostics if d.code == code)
    assert words in d.message, d.message
    return d


# ---- rule Units: the schema, the type, and what may read it -------------------------------------

def test_a_table_of_a_schema_with_a_unit_has_the_unit_in_its_type():
    r = ok(MAIN + "{ laplace 1 (count (bound_rows 3 t)) }")
    assert r.inputs[0].type == "bag F (unit plane)"
    assert r.entry_instance.units == {"t": "plane"}


def test_a_schema_without_a_unit_keeps_row_semantics():
    r = ok("function main (t : bag R) { laplace 1 (count t) }")
    assert r.epsilon == 1 and r.inputs[0].type == "bag R"


@pytest.mark.parametrize("decl, words", [
    ("schema X unit who { x : num }", "not one of its columns"),
    ("schema X unit x { x : num }", "a unit column must be a string, an int or a category"),
    ("schema X unit x { x : bool }", "a unit column must be"),
])
def test_the_unit_must_be_a_string_int_or_category_column(decl, words):
    r = check(decl + "\nfunction main (t : bag X) { laplace 1 0 }\n")
    assert not r.ok and any(d.code == "E0208" and words in d.message for d in r.diagnostics)


@pytest.mark.parametrize("body", [
    "laplace 1 (count t)",
    "laplace 1 (sum (map (fun r -> r.delay) t))",
    "each (fun g -> laplace 1 (count g)) (groupby (fun r -> r.origin) t)",
    "laplace 1 (count (fst (split (fun r -> r.n > 2) t)))",
    "laplace 1 (count (union t (bound_rows 1 t)))",
    "gaussian 1 (count (filter (fun r -> r.n > 2) t))",
    "laplace 1 (count (map (fun r -> r.delay) t))",
])
def test_reading_rows_of_a_table_with_a_unit_is_refused_with_how_to_bound(body):
    if "fst" in body:
        body = "let (a, b) = split (fun r -> r.n > 2) t; laplace 1 (count a)"
    r = check(U + MAIN + "{ " + body + " }")
    assert not r.ok
    d = r.diagnostics[0]
    assert d.code in ("E0330", "E0331"), (d.code, d.message)
    if d.code == "E0330":
        assert "privacy unit is plane" in d.message
        assert any("bound_rows k t" in n for n in d.notes)


def test_a_function_cannot_launder_a_table_with_a_unit():
    # an untyped helper is checked at the use, with the unit table's type: count refuses it there
    d = refused("function c (b) { count b }\n" + MAIN + "{ laplace 1 (c t) }", "E0330", "count")
    assert "plane" in d.message
    # a declared row-level parameter does not accept it (bag F is the table with its unit)
    refused("function c (b : bag {plane : string, dest : string, origin : cat{\"EWR\", \"JFK\", \"LGA\"}, "
            "delay : num[-10, 100], n : int[0, 5]}) : num { count b }\n" + MAIN + "{ laplace 1 (c t) }", "E0202")


def test_a_tuple_holding_a_table_with_a_unit_is_refused_by_other_primitives():
    refused(MAIN + "{ let (a, b) = (t, t); laplace 1 (count a) }", "E0330", "count")
    refused(MAIN + "{ let xs = take 1 [t]; laplace 1 0 }", "E0330", "take")


def test_rule_units_scalar_arguments_never_hold_a_unit():
    # A primitive call asks rule Units only of its structured arguments (units.SCALAR_TYPES).
    from fuzzpy.primitives.units import SCALAR_TYPES
    from fuzzpy.typesystem.types import BOOL, STRING, UNIT, Bool, Cat, Num, Str, Unit, holds_units

    samples = {Num: Num(F(0), F(1), True), Bool: BOOL, Str: STRING, Cat: Cat(("a", "b")), Unit: UNIT}
    assert set(samples) == SCALAR_TYPES
    assert not any(holds_units(t) for t in samples.values())


def test_rule_units_answers_kept_per_type_agree_with_holds_units():
    from fuzzpy.primitives.units import _holds_units
    from fuzzpy.typesystem.types import Bag, Num, Record, Tensor, UnitBag, holds_units

    row = Record((("plane", Num()), ("delay", Num(F(-10), F(100)))))
    types = [UnitBag(row, "plane"), Tensor((Num(), UnitBag(row, "plane"))), Bag(row), Tensor((Num(), Bag(row)))]
    for _ in range(2):  # asked again: the kept answer
        assert [_holds_units(t) for t in types] == [holds_units(t) for t in types] == [True, True, False, False]


def test_filter_and_map_keep_the_unit_and_the_distance():
    r = ok(MAIN + "{ laplace 1 (count (bound_rows 4 (map (fun r -> r.delay) (filter (fun r -> r.n > 1) t)))) }")
    assert r.epsilon == 1 and [m.sensitivity for m in r.mechanisms] == [4]


def test_union_of_two_tables_with_the_same_unit_costs_twice():
    # a unit added to one side changes the union's block of that unit: 2 per side
    r = ok("function main (a : bag F) (b : bag G) { laplace 1 (count (bound_rows 1 (union a b))) }")
    assert [i.epsilon for i in r.inputs] == [1, 1]
    assert [m.sensitivity for m in r.mechanisms] == [2]


def test_union_of_different_units_or_of_a_unit_and_rows_is_refused():
    refused("function main (a : bag F) (b : bag H) { laplace 1 (count (bound_rows 1 (union a b))) }", "E0202")
    # bounded first, the union is of two row-level tables
    r = ok("function main (a : bag F) (b : bag R) { laplace 1 (count (union (bound_rows 1 a) b)) }")
    assert [i.epsilon for i in r.inputs] == [1, 1]
    refused("function main (a : bag F) (b : bag R) { laplace 1 (count (bound_rows 1 (union a b))) }", "E0331")


# ---- rule Bound rows ------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 3, 50])
def test_bound_rows_k_gives_a_row_table_at_distance_k(k):
    r = ok(MAIN + f"{{ laplace 1 (count (bound_rows {k} t)) }}")
    assert r.epsilon == 1 and r.mechanisms[0].sensitivity == k and r.mechanisms[0].scale == k
    r = ok(MAIN + f"{{ laplace 1 (sum (map (fun r -> r.delay) (bound_rows {k} t))) }}")
    assert r.mechanisms[0].sensitivity == 100 * k


def test_bounded_rows_used_twice_and_bounded_twice_add_up():
    r = ok(MAIN + "{ let b = bound_rows 2 t; laplace 1 (count b + count (bound_rows 3 t)) }")
    assert r.mechanisms[0].sensitivity == 5 and r.epsilon == 1


@pytest.mark.parametrize("k, code", [("0", "E0213"), ("2.5", "E0213"), ("1000000001", "E0213")])
def test_bound_rows_needs_a_positive_whole_constant(k, code):
    refused(MAIN + f"{{ laplace 1 (count (bound_rows {k} t)) }}", code)


def test_bound_rows_needs_a_public_constant():
    refused(MAIN + "{ sample c = laplace 1 (count (bound_rows 1 t)); laplace 1 (count (bound_rows c t)) }",
            "E0209")


def test_bound_rows_of_a_table_without_a_unit_is_refused():
    refused("function main (t : bag R) { laplace 1 (count (bound_rows 3 t)) }", "E0202", "privacy unit")


def test_bound_rows_gaussian_costs_k_squared():
    r = ok(MAIN + "{ gaussian 1 (count (bound_rows 3 t)) }", )
    assert r.mechanisms[0].sensitivity == 3 and r.inputs[0].rho_gauss == 1


# ---- rule Bounded groups ----------------------------------------------------------------------------

def test_bound_groups_histogram_costs_m_c_with_laplace():
    r = ok(MAIN + "{ each (fun g -> laplace 1 (count g)) (bound_groups 2 3 (fun r -> r.origin) t) }")
    assert r.epsilon == 6  # L1: m * c


def test_bound_groups_histogram_costs_m_c_squared_with_gaussian():
    r = ok(MAIN + "{ each (fun g -> gaussian 1 (count g)) (bound_groups 2 3 (fun r -> r.origin) t) }")
    assert r.inputs[0].rho_gauss == 2 * 9  # L2^2: m * c^2, not (m c)^2 = 36


def test_bound_groups_one_group_costs_c():
    r = ok(MAIN + "{ laplace 1 (count (part (bound_groups 2 3 (fun r -> r.origin) t) \"JFK\")) }")
    assert r.mechanisms[0].sensitivity == 3 and r.epsilon == 1


def test_bound_groups_takes_the_m_largest_coefficients():
    # per-key epsilons 3, 2, 1 with m = 2: the unit is in at most 2 groups, c = 1 row each -> 3 + 2
    body = ('let ps = bound_groups 2 1 (fun r -> r.origin) t; '
            'sample a = laplace 3 (count ps.EWR); sample b = laplace 2 (count ps.JFK); '
            'sample c = laplace 1 (count ps.LGA); return (a, b, c)')
    assert ok(MAIN + "{ " + body + " }").epsilon == 5


def test_bound_groups_m_larger_than_the_keys_is_all_of_them():
    # three keys, so at most three groups of one row: 3, not m c = 10 (the knapsack over 3 parts)
    r = ok(MAIN + "{ each (fun g -> laplace 1 (count g)) (bound_groups 10 1 (fun r -> r.origin) t) }")
    assert r.epsilon == 3


def test_bound_groups_needs_a_declared_key():
    refused(MAIN + "{ each (fun g -> laplace 1 (count g)) (bound_groups 1 1 (fun r -> r.dest) t) }", "E0307")


def test_bound_groups_in_released_keys_costs_m_c_and_m_c_squared():
    lap = ok(MAIN + "{ " + RELEASED_KEYS + "each (fun g -> laplace 1 (count g)) "
             "(bound_groups_in ks 2 3 (fun r -> r.dest) t) }")
    assert lap.epsilon == 1 + 6 and lap.approx_delta == F(1, 10**6)
    gau = ok(MAIN + "{ " + RELEASED_KEYS + "each (fun g -> gaussian 1 (count g)) "
             "(bound_groups_in ks 2 3 (fun r -> r.dest) t) }")
    assert gau.inputs[0].rho_gauss == 18


def test_bound_groups_in_a_constant_list_is_a_partition_of_declared_keys():
    r = ok(MAIN + '{ laplace 1 (count (bound_groups_in ["BOS", "SFO"] 2 3 (fun r -> r.dest) t).BOS) }')
    assert r.mechanisms[0].sensitivity == 3


# ---- rule Released keys --------------------------------------------------------------------------------

RELEASED_ROWS = 'sample ks = select_keys 1 0.000001 1 (fun r -> r.dest) t; '


def test_groupby_in_released_keys_is_parallel_composition():
    r = ok("function main (t : bag R) { " + RELEASED_ROWS
           + "each (fun g -> laplace 0.5 (count g)) (groupby_in ks (fun r -> r.dest) t) }")
    assert r.epsilon == F(3, 2) and r.approx_delta == F(1, 10**6)
    assert "parts released num" in str(r.entry_type)


def test_a_released_partition_cannot_name_a_part():
    refused("function main (t : bag R) { " + RELEASED_ROWS
            + "laplace 1 (count (part (groupby_in ks (fun r -> r.dest) t) \"BOS\")) }", "E0205", "released")
    refused("function main (t : bag R) { " + RELEASED_ROWS
            + "let ps = groupby_in ks (fun r -> r.dest) t; return (keys ps) }", "E0202", "released")


def test_groupby_in_refuses_private_keys():
    refused("function main (t : bag R) { each (fun g -> laplace 1 (count g)) "
            "(groupby_in (if count t > 3 then [\"a\"] else [\"b\"]) (fun r -> r.dest) t) }", "E0209", "public")


def test_groupby_in_refuses_a_table_with_a_unit():
    refused(MAIN + "{ " + RELEASED_KEYS + "each (fun g -> laplace 1 (count g)) (groupby_in ks (fun r -> r.dest) t) }",
            "E0330", "groupby_in")


def test_the_values_of_a_released_partition_add_up():
    r = ok("function main (t : bag R) { " + RELEASED_ROWS
           + "let ps = pmap (fun g -> count g) (groupby_in ks (fun r -> r.dest) t); "
           "laplace 1 (case values ps of { [] => 0 | h :: rest => h }) }")
    assert r.epsilon == 2  # the head of the list moves by at most the whole list: 1, plus the selection
