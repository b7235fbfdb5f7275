"""The rules of docs/soundness.md, one group per rule: programs that must be refused (with their
code and message) next to programs that must pass with an exact bound, and, where the rule is about
what a run does, runs on neighbouring tables."""

from __future__ import annotations

import time
from fractions import Fraction as F

import pytest
from check_and_run import ROW_A, ROW_B, check, make_tables, outcome, refused


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


DEEP = "function deep (n : num) : num { if n <= 0 then 0 else 1 + deep (n - 1) }\n"
MAIN = "function main (db : bag T) : fuzzy num "


def exactly(src: str, epsilon, sensitivities=None, **kw):
    r = check(src, **kw)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    assert r.epsilon == epsilon
    if sensitivities is not None:
        assert [m.sensitivity for m in r.mechanisms] == sensitivities
    return r


# ---- the reproducers --------------------------------------------------------------------

def test_a_closure_argument_of_a_recursion_is_charged_per_use():
    """Class 1: `rep f n` applies f once per level; n is released, so the number of levels is not
    bounded: what f captures is infinitely used."""
    refused("function rep f (n : num) : num { if n <= 0 then 0 else f 0 + rep f (n - 1) }\n"
            + MAIN + "{ sample n = laplace 1 1000; laplace 1 (rep (fun x -> count db) n) }",
            "E0305", "unbounded sensitivity in db")


def test_the_same_recursion_on_a_constant_is_unrolled_and_charged_exactly():
    exactly("function rep f (n : num) : num { if n <= 0 then 0 else f 0 + rep f (n - 1) }\n"
            + MAIN + "{ laplace 1 (rep (fun x -> count db) 1000) }", 1, [1000])


def test_a_thousand_releases_through_a_closure_cost_a_thousand():
    """Class 1b: no longer charged 257 (widening after 256 levels)."""
    exactly("function repeat f (n : num) : fuzzy num { if n <= 0 then return 0 else "
            "(sample u = f 0; repeat f (n - 1)) }\n"
            + MAIN + "{ repeat (fun u -> laplace 1 (count db)) 1000 }", 1000)


def test_a_recursive_type_variable_return_is_checked_against_the_body():
    """Class 2: the base case returns 100, which is not an 'a = num[0, 1]."""
    refused("function f (n : num) (x : 'a) (z : num[0, 1]) : 'a {\n"
            "  if n <= 0 then 100 else (f (n - 1) x (clip 0 1 n)) * z }\n"
            + MAIN + "{ sample k = laplace 1 1; sample w = laplace 1 0;\n"
            "  laplace 1 (f k (clip 0 1 w) (clip 0 1 (count db / 1000))) }",
            "E0202", "f returns num[0, 100], but its declared return type is num[0, 1]")


def test_a_type_variable_instantiated_consistently_checks():
    exactly("function pick (c : bool) (x : 'a) (y : 'a) : 'a { if c then x else y }\n"
            + MAIN + "{ laplace 1 (pick true (clip 0 1 (count db)) (clip 0 2 (count db))) }", 1, [1])


@pytest.mark.parametrize("body", [
    "return ((deep (count db), 0).2)",                                  # a projection
    "return ((|deep (count db), 0|).2)",                                # a with-pair
    "let z = deep (count db); laplace 1 (count db)",                   # an unused let
    "return (deep (count db) * 0)",                                     # scaling by a zero bound
    "let (a, b) = split (fun r -> r.flag) (let z = deep (count db); db); laplace 1 (count a)",
    "let p = (deep (count db), 1); laplace 1 (count db)",
    "return ({ a = deep (count db), b = 1 }.b)",
    "sample x = laplace 1 (count db); let z = deep (count db); return x",
])
def test_a_data_dependent_failure_is_refused_whatever_discards_it(body):
    """Class 3: recursion as deep as the count, discarded in every way the issue lists."""
    refused(DEEP + MAIN + "{ " + body + " }", "E0309", "may depend on private data in db")


def test_the_refusal_says_where_the_data_decides_the_recursion():
    r = check(DEEP + MAIN + "{ return ((deep (count db), 0).2) }")
    d = next(d for d in r.diagnostics if d.code == "E0309")
    assert any("t.fz:2:" in n and "decides whether a part that may not complete" in n for n in d.notes), d.notes


def test_such_a_program_really_fails_on_one_table_and_not_on_its_neighbour(tables, monkeypatch):
    """Why E0309 matters: with the checks turned into a run, the outcome tells the tables apart."""
    from fuzzpy import limits

    r = check(DEEP + MAIN + "{ return ((deep (count db), 0).2) }")
    monkeypatch.setattr(limits, "CALL_DEPTH", 3)  # deep n nests n + 1 calls
    assert outcome(r, tables(ROW_A * 2))[0] == "value" and outcome(r, tables(ROW_A * 3))[0] == "failed"


@pytest.mark.parametrize("n, eps", [(300, F(3)), (10_000, F(100))])
def test_a_loop_of_any_public_length_checks_exactly_and_fast(n, eps):
    """Class 4: a 300- or 10,000-step loop of releases is unrolled to the end (exact epsilon), not
    widened after 256 steps into an unbounded or wrong bound."""
    src = ("function loop (i : int) (db : bag T) : fuzzy num {\n"
           "  if i <= 0 then return 0 else (sample x = laplace 0.01 (count db); loop (i - 1) db) }\n"
           + MAIN + f"{{ loop {n} db }}")
    t0 = time.perf_counter()
    exactly(src, eps, [1])
    assert time.perf_counter() - t0 < 60  # a hang guard only; benchmarks/check_speed.py measures speed


def test_a_loop_keeps_its_epsilon_when_its_counter_is_computed():
    exactly("function loop (eps : num) (i : int) (db : bag T) : fuzzy num {\n"
            "  if i <= 0 then return 0 else (sample x = laplace eps (count db); loop eps (i - 1) db) }\n"
            + MAIN + "{ loop (3 / 300) 300 db }", 3)


# ---- rule Const ------------------------------------------------------------------------------------

def test_a_constant_hides_nothing_because_it_is_never_computed(tables):
    r = exactly(DEEP + MAIN + "{ laplace (let z = deep (count db); 1) (count db) }", 1)
    assert outcome(r, tables(""))[0] == outcome(r, tables(ROW_A * 5))[0] == "value"


# ---- rule Branch ----------------------------------------------------------------------------------

def test_a_branch_on_private_data_around_code_that_cannot_fail_is_not_a_failure_risk():
    """Which arm runs is private, but neither arm can fail: accepted (the value is released)."""
    exactly(DEEP + MAIN + "{ let z = if count db > 3 then deep 5 else 0; laplace 1 (count db) }", 1)


def test_a_branch_on_private_data_around_a_recursion_that_may_not_end_is_refused():
    """The recursion's depth is public (a released value) but whether it runs is private."""
    refused(DEEP + MAIN + "{ sample n = laplace 1 (count db); "
            "let z = if count db > 3 then deep n else 0; laplace 1 (count db) }", "E0309")


def test_a_recursion_on_released_values_alone_is_accepted():
    """FAIL alone: a recursion whose end depends only on released values reveals nothing more."""
    exactly(DEEP + MAIN + "{ sample n = laplace 1 (count db); return (deep n) }", 1)


# ---- rule Row ------------------------------------------------------------------------------------

def test_a_row_function_that_may_fail_on_its_row_is_not_a_run_failure(tables):
    r = exactly(DEEP + MAIN + "{ laplace 1 (count (filter (fun r -> deep (r.x * 1000) > 2) db)) }", 1)
    assert outcome(r, tables(ROW_A))[0] == outcome(r, tables(ROW_A + ROW_B))[0] == "value"


# ---- rule Primitive (functions a primitive applies) -----------------------------------------------

def test_a_per_part_function_that_may_fail_on_its_part_is_a_risk_on_the_table():
    refused(DEEP + MAIN + "{ sample v = each (fun g -> let z = deep (count g); laplace 1 (count g)) "
            "(groupby (fun r -> r.k) db); return 0 }", "E0309")


def test_a_score_function_on_public_candidates_is_no_risk():
    exactly(DEEP + MAIN + "{ exponential 1 [1, 2] (fun q -> clip 0 1 (deep q) + count db) }", 1)


# ---- rule Exact ----------------------------------------------------------------------------------

def test_squaring_a_private_number_is_a_failure_risk():
    refused("function pow2 (x : num) (m : int) : num { if m <= 0 then x else pow2 (x * x) (m - 1) }\n"
            + MAIN + "{ let z = pow2 (count db) 40; laplace 1 (count db) }", "E0309")


def test_a_product_of_bounded_integers_is_no_risk():
    exactly(MAIN + "{ let c = clip 0 10 (count db); laplace 1 (c * c) }", 1, [20])


def test_squaring_inside_a_row_function_is_no_risk():
    exactly("function pow2 (x : num) (m : int) : num { if m <= 0 then x else pow2 (x * x) (m - 1) }\n"
            + MAIN + "{ laplace 1 (sum (map (fun r -> clip 0 1 (pow2 r.x 40)) db)) }", 1)


POW2 = "function pow2 (x : num) (m : int) : num { if m <= 0 then x else pow2 (x * x) (m - 1) }\n"
RELEASED_A = "sample a = laplace 1 (count db); "


@pytest.mark.parametrize("call", ["a * a", "pow2 a 1", "pow2 a 2", "pow2 a 40"])
def test_products_of_released_numbers_may_not_finish_so_a_private_branch_may_not_decide_them(call):
    """Released values are exact too: squaring one 40 times needs 2^40 times its digits (FAIL).
    A counted recursion (rule Count) keeps the FAIL of its levels."""
    refused(POW2 + MAIN + "{ " + RELEASED_A + f"let z = if count db > 1 then {call} else 0; laplace 1 (count db) }}",
            "E0309", "may depend on private data")


def test_products_of_released_numbers_on_their_own_are_accepted():
    """FAIL alone depends on released values only (rule Entry)."""
    exactly(POW2 + MAIN + "{ " + RELEASED_A + "let z = pow2 a 40; laplace 1 (count db) }", 2, [1, 1])


@pytest.mark.parametrize("expr", ["x * 3", "x / 4", "3 / 4 * x", "x / clip 1 10 x", "x * clip 0 10 x"])
def test_a_product_with_a_constant_or_a_bounded_integer_is_no_risk(expr):
    """Such a factor adds a bounded number of digits each time, whatever the data."""
    exactly(MAIN + "{ let x = count db; let z = if count db > 1 then " + expr + " else 0; laplace 1 (count db) }",
            1, [1])


# ---- rule Growth ---------------------------------------------------------------------------------

def test_a_table_doubled_seven_times_is_refused():
    refused("function grow (k : int) (b : bag T) : bag T { if k <= 0 then b else grow (k - 1) (union b b) }\n"
            + MAIN + "{ laplace 1 (count (grow 7 db)) }", "E0311", "128 times the rows")


def test_a_table_doubled_six_times_is_accepted_with_its_growth_reported():
    r = exactly("function grow (k : int) (b : bag T) : bag T { if k <= 0 then b else grow (k - 1) (union b b) }\n"
                + MAIN + "{ laplace 1 (count (grow 6 db)) }", 1, [64])
    assert r.growth == 64


def test_growth_inside_a_discarded_computation_still_counts():
    refused("function grow (k : int) (b : bag T) : bag T { if k <= 0 then b else grow (k - 1) (union b b) }\n"
            + MAIN + "{ let n = count (grow 10 db); laplace 1 (count db) }", "E0311")


def test_growth_in_a_recursion_on_released_values_is_unbounded():
    refused("function grow (k : num) (b : bag T) : bag T { if k <= 0 then b else grow (k - 1) (union b b) }\n"
            + MAIN + "{ sample k = laplace 1 3; laplace 1 (count (grow k db)) }", "E0305")


def test_growth_of_disjoint_parts_is_none():
    r = exactly(MAIN + "{ let (a, b) = split (fun r -> r.flag) db; laplace 1 (count (union a b)) }", 1, [1])
    assert r.growth == 1


# ---- rule Unroll and the runtime's depth ----------------------------------------------------------

def test_an_unrolled_recursion_deeper_than_the_runtime_allows_is_refused(monkeypatch):
    from fuzzpy import limits

    monkeypatch.setattr(limits, "CALL_DEPTH", 50)
    refused(DEEP + MAIN + "{ laplace 1 (count db + deep 60) }", "E0306", "nested more than 50 deep at run time")
    exactly(DEEP + MAIN + "{ laplace 1 (count db + deep 40) }", 1)


@pytest.mark.parametrize("arm", [
    "deep 10 + deep 10 + deep 10",                                       # siblings, each within budget
    "(let p = pmap (fun g -> deep 10) (groupby (fun r -> r.k) db); 0)",  # once per key (3 keys)
])
def test_an_arm_making_more_calls_than_the_budget_may_not_finish(arm, monkeypatch):
    """The call budget holds per arm of a private branch too, and a function given to pmap counts
    once per key: 3 x 11 calls of deep 10 against a budget of 30 (lowered here) is FAIL there."""
    from fuzzpy import limits

    src = DEEP + MAIN + "{ let z = if count db > 1 then " + arm + " else 0; laplace 1 (count db) }"
    exactly(src, 1, [1])
    monkeypatch.setattr(limits, "MAX_CALLS", 30)
    refused(src, "E0309", "may depend on private data")


def test_a_counted_recursion_deeper_than_the_runtime_allows_is_refused_in_linear_time(monkeypatch):
    """Rule Count's depth is an upper bound; past the limit the recursion is unrolled, without a
    count attempt at every level (which was quadratic: 15 s for 1,000 levels)."""
    from fuzzpy import limits

    monkeypatch.setattr(limits, "CALL_DEPTH", 30)
    t0 = time.perf_counter()
    refused(DEEP + MAIN + "{ laplace 1 (count db + deep 1000 * 0) }", "E0306", "nested more than 30 deep")
    assert time.perf_counter() - t0 < 60  # a hang guard only


def test_a_counted_recursion_whose_bound_overestimates_its_depth_is_unrolled_and_accepted():
    """Each level calls deep 20 and then recurses: rule Count bounds 1,000 levels by 22,000 calls
    deep, over the limit; unrolled, they nest 1,021."""
    exactly(DEEP + "function f (n : num) : num { if n <= 0 then 0 else deep 20 + f (n - 1) }\n"
            + MAIN + "{ laplace 1 (count db + f 1000 * 0) }", 1, [1])


def test_a_loop_of_releases_does_not_nest_at_run_time(tables, monkeypatch):
    from fuzzpy import limits

    monkeypatch.setattr(limits, "CALL_DEPTH", 50)
    src = ("function loop (i : int) (db : bag T) : fuzzy num {\n"
           "  if i <= 0 then return 0 else (sample x = laplace 0.01 (count db); loop (i - 1) db) }\n"
           + MAIN + "{ loop 200 db }")
    r = exactly(src, 2)
    assert outcome(r, tables(ROW_A))[0] == "value"


# ---- rule Widen ----------------------------------------------------------------------------------

def test_widening_a_speculative_counter_keeps_the_epsilon():
    """After 256 levels under a released condition the counter is forgotten, epsilon kept: the
    loop's releases are then unbounded (E0302), never E0209 for a lost epsilon."""
    refused("function f (eps : num) (i : int) (db : bag T) : fuzzy num {\n"
            "  sample a = laplace eps (count db);\n"
            "  if a > 0 then f eps (i + 1) db else return i }\n"
            + MAIN + "{ f 0.5 0 db }", "E0302")


def test_a_widened_constant_that_a_mechanism_needs_says_so():
    r = check("function f (i : int) (db : bag T) : fuzzy num {\n"
              "  sample a = laplace (1 / (i + 1)) (count db);\n"
              "  if a > 0 then f (i + 1) db else return i }\n" + MAIN + "{ f 0 db }")
    d = next(d for d in r.diagnostics if d.code == "E0209")
    assert any("stopped unrolling f" in n for n in d.notes), d.notes


def test_a_recursion_given_a_new_function_at_each_released_level_is_refused_quickly():
    """No instance key repeats (each level's closure is new): refused, not unrolled to the limit."""
    t0 = time.perf_counter()
    refused("function rep f (n : num) (b : bag T) : num { if n <= 0 then f 0 else rep (fun y -> f y + count b) "
            "(n - 1) b }\n" + MAIN + "{ sample n = laplace 1 10; laplace 1 (rep (fun x -> count db) n db) }",
            "E0306", "given a new function at each level")
    assert time.perf_counter() - t0 < 60  # a hang guard only


def test_a_new_function_at_each_constant_level_is_unrolled_and_charged_exactly():
    exactly("function rep f (n : num) (b : bag T) : num { if n <= 0 then f 0 else rep (fun y -> f y + count b) "
            "(n - 1) b }\n" + MAIN + "{ laplace 1 (rep (fun x -> count db) 4 db) }", 1, [5])


# ---- rule Closure: functions returned by functions ------------------------------------------------

def test_a_returned_function_can_be_applied_without_a_declared_type(tables):
    src = ("function adder (k : num) { fun x -> x + k }\n"
           "function scaler (k : num) { let two = 2 * k; fun x -> x * 3 + two }\n"
           + MAIN + "{ laplace 1 ((adder 3) (count db) + (scaler (count db)) 5) }")
    r = exactly(src, 1, [3])
    assert outcome(r, tables(""))[0] == "value"


def test_a_returned_function_is_charged_for_what_it_captures_at_each_application():
    exactly("function const_of (k : num) { fun x -> k }\n"
            + MAIN + "{ let f = const_of (count db); laplace 1 (f 1 + f 2 + f 3) }", 1, [3])


# ---- rule Declared --------------------------------------------------------------------------------

APP = "function app (g : num -o num) (y : num) : num { g y }\n"


def test_a_function_of_a_declared_type_must_complete_whatever_its_argument():
    refused(DEEP + APP + MAIN + "{ laplace 1 (app (fun (z : num) -> z + deep z) (count db)) }",
            "E0310", "must complete on every argument")


def test_a_declared_function_that_may_fail_whatever_its_argument_carries_fail_to_each_application():
    """FAIL alone (deep n for a released n) does not depend on the argument: the function keeps its
    declared type, and each application may fail, which a private branch may not decide."""
    use = "sample n = laplace 1 (count db); let g = (fun (z : num) -> z + deep n : num -o num); "
    exactly(DEEP + APP + MAIN + "{ " + use + "laplace 1 (app g (count db)) }", 2, [1, 1])
    refused(DEEP + APP + MAIN + "{ " + use + "let w = if count db > 1 then app g 0 else 0; laplace 1 (count db) }",
            "E0309", "may depend on private data")
    refused(DEEP + MAIN + "{ " + use + "let w = if count db > 1 then g 0 else 0; laplace 1 (count db) }",
            "E0309", "may depend on private data")


# ---- rule Recursion: the assumed summary ----------------------------------------------------------

def test_a_recursion_that_shrinks_its_argument_gets_its_least_sensitivity():
    exactly("function half (n : num) (x : num) : num { if n <= 0 then x else half (n - 1) (x / 2) }\n"
            + MAIN + "{ sample n = laplace 1 3; laplace 1 (half n (count db)) }", 1, [0, 1])


def test_a_recursion_returning_a_type_variable_given_only_by_empty_lists_is_refused():
    refused("function build (n : num) (acc : list 'a) : list 'a { if n <= 0 then acc else build (n - 1) acc }\n"
            + MAIN + "{ sample n = laplace 1 3; return (build n []) }", "E0212", "only given by empty lists")
