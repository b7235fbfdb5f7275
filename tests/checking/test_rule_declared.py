"""Rule Declared (docs/soundness.md): a function given a declared type `A -o[s] B` (a parameter, an
ascription or a declared return type) is checked once at A: its sensitivity must be at most s
(E0301); the type carries no failure risk and no growth, so the function may hold no risk but FAIL
and add no rows (E0310); the value it stands for is computed once and keeps its own risk; and each
application costs its distance plus s times the argument's and nests its calls where it is applied.

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP).  Runs use RandomSource.seeded (tests only) or the soundness oracle
(`fuzzpy.audit.oracle.audit_pair`).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import (
    ROW_A,
    assert_accepted_exactly,
    assert_rejected,
    audit,
    check,
    codes,
    diags,
    exactly,
    kinds,
    make_tables,
    refused_report,
    run,
    violations,
)

from fuzzpy.audit.oracle import call_depth


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "
DEEP = "function deep (n : num) : num { if n <= 0 then 0 else 1 + deep (n - 1) }\n"

# ---- the declared sensitivity is enforced ------------------------------------------------------------

RECURSIVE_HOF = """
function app (g : num -o num) (y : num) : num { g (g y) }
function rec (n : num) (x : num) : num {
  if n > 0 then app (fun (z : num) -> rec (n - 1) z) x else x + x
}
function main (db : bag T) : fuzzy num {
  sample k = laplace 1 2;
  laplace 1 (rec k (count db))
}
"""


def test_recursive_closure_passed_as_declared_1_sensitive_function():
    """First review round, finding 3: a function-type annotation checked against an unknown of the
    recursion LP was never enforced.  Checker.to_opaque added `coef <= sens` to the constraint
    store when coef mentions an LP unknown, but only pending_checks were verified after solving,
    and lp._certify skipped every constraint whose right side is a constant."""
    r = check(RECURSIVE_HOF)
    # k = 2 (a public constant released unchanged): rec 2 x = app(rec 1)(x) = rec1(rec1 x),
    # rec 1 x = rec0(rec0 x) = 4x, so rec 2 x = 16x.
    assert not r.ok or max(m.sensitivity for m in r.mechanisms) >= 16


def test_recursive_closure_true_sensitivity_shown_by_a_run(tables):
    """First review round, finding 3, the runtime side: rec 2 (count db) = 16 count db (seeded runs
    of laplace add the same noise for the same seed, so the difference is exact)."""
    r = check(RECURSIVE_HOF)
    if not r.ok:
        pytest.skip("the checker now rejects the attack")
    a = run(r, tables(""), seed=3)
    b = run(r, tables(ROW_A * 4), seed=3)
    assert round(b - a) == 64  # 16 * 4 rows: a 16-sensitive query


def test_returned_closure_sensitivity_is_not_checked():
    """First review round, finding 4: a declared function return type was trusted for
    function-valued bodies.  Checker._check_return returned the declared `Fun` type as is when the
    body is a lambda, a partial application or a function name (FnT): its sensitivity was never
    checked."""
    r = check("function mk (u : num) : num -o num { fun (x : num) -> x + x + x + x }\n"
              "function main (db : bag T) : fuzzy num { laplace 1 ((mk 0) (count db)) }")
    assert not r.ok or max(m.sensitivity for m in r.mechanisms) >= 4


REJECTED = {
    # first review round: declared sensitivities
    "closure-exceeds-declared-argument-type": ("E0301", "function app (g : num -o num) (y : num) : num { g y }\nfunction main (db : bag T) : fuzzy num { laplace 1 (app (fun (z : num) -> z + z) (count db)) }"),
    "opaque-exceeds-declared-return-type": ("E0202", "function mk (g : num -o[2] num) : num -o num { g }\nfunction main (db : bag T) : fuzzy num { return 1 }"),
    # third review round: a curried declared type keeps 0 * inf = inf on its first argument
    "curried-bool-argument-at-sensitivity-0": (
        "E0302", "function app (g : bool -o[0] num -o[1] num) (b : bool) (y : num) : num { g b y }\n"
        "function main (db : bag T) : fuzzy num { return (app (fun (b : bool) (y : num) -> if b then y else 0) "
        "(count db > 3) 1) }"),
    "returned-closure-capturing-a-private-bool": (
        "E0302", "function mk (c : bool) : num -o[1] num { fun (x : num) -> if c then x else 0 }\n"
        "function main (db : bag T) : fuzzy num { return ((mk (count db > 2)) 1) }"),
    # third review round: returned functions are checked against their declared type, curried ones at every domain
    "returned-partial-application-too-sensitive": (
        "E0301", "function dup2 (a : num) (b : num) : num { b + b }\n"
        "function mk (u : num) : num -o[1] num { dup2 u }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 ((mk 0) (count db)) }"),
    "returned-two-parameter-lambda-too-sensitive": (
        "E0301", "function mk (u : num) : num -o[1] num -o[1] num { fun (x : num) (y : num) -> x + x + y }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 ((mk 0) (count db) 1) }"),
    "curried-argument-too-sensitive-in-its-second-parameter": (
        "E0301", "function app (g : num -o[1] num -o[1] num) (a : num) (b : num) : num { g a b }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 (app (fun (x : num) (y : num) -> x + y + y) 0 (count db)) }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_refused_with_the_exact_code(name):
    """First and third review rounds (returned and curried function types), handled: a function
    more sensitive than its declared type (E0301, E0202), and a 0-sensitive declared function of a
    private bool (E0302)."""
    assert_rejected(*REJECTED[name])


ACCEPTED = {
    # name: (program, epsilon, mechanism sensitivities in order); third review round
    "curried-partial-application-used-twice": (
        "function app (g : num -o[1] num -o[1] num) (a : num) : num { let h = g a; h 1 + h 2 }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 (app (fun (x : num) (y : num) -> x + y) (count db)) }",
        F(1), [2]),
    "curried-closure-capturing-the-table-used-twice": (
        "function mk (c : num) : num -o[1] num -o[1] num { fun (x : num) (y : num) -> x + y + c }\n"
        "function main (db : bag T) : fuzzy num { let g = mk (count db); laplace 1 (g 1 2 + g 3 4) }",
        F(1), [2]),
    "function-parameter-returned-at-its-declared-type": (
        "function mk (g : num -o[2] num) : num -o[2] num { g }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 ((mk (fun (x : num) -> x + x)) (count db)) }",
        F(1), [2]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """Third review round, handled: curried and returned declared functions charged exactly."""
    assert_accepted_exactly(*ACCEPTED[name])


# ---- an ascribed function expression keeps its risk ----------------------------------------------------

ASCRIBED = DEEP + MAIN + "{ let g = ((let z = deep (count db); fun (x : num) -> x) : num -o num); laplace 1 (g (count db)) }"
ASCRIBED_PARTIAL = (DEEP + "function f (a : num) (x : num) : num { x }\n"
                    + MAIN + "{ let g = (f (deep (count db)) : num -o num); let z = g 1; laplace 1 (count db) }")


@pytest.mark.parametrize("src, code", [(ASCRIBED, "E0309"), (ASCRIBED_PARTIAL, "E0310")], ids=["let", "partial"])
def test_an_ascribed_function_expression_keeps_its_risk(src, code):
    """Seventh review round (7a, the failure effect), finding 3 (high): ascribing a function type to
    an expression forgot the expression's risk, and deferred the risky computation to every
    application.

    expressions.x_Ascribe returned `self.to_opaque(v, t, span)` for a function value; to_opaque
    checked the *function's* risk (E0310) but built `Val(t, inst.captured, code, ...)` without
    v.risk, and its code was `fun x -> (<the whole expression>) x`: `((let z = deep (count db); fun
    (x : num) -> x) : num -o num)` evaluated `deep (count db)` at each application, with no risk
    anywhere (`_apply_opaque` assumes an opaque function completes).  (A function argument coerced
    by rule Instance was fine: `apply` unions the risk of the original argument.)  Suggested fix
    (made): keep v.risk on the result of the ascription, and bind the expression once (let f = e;
    fun x -> f x).  Fixed: the ascribed value keeps the expression's risk (E0309); a partial
    application whose given argument may not complete cannot be given a declared type at all
    (E0310)."""
    refused_report(src, code)


def test_the_same_expression_passed_to_a_declared_parameter_is_refused():
    """Seventh review round (7a), finding 3, the control: through a declared parameter."""
    refused_report(DEEP + "function app (g : num -o num) (y : num) : num { g y }\n"
                   + MAIN + "{ laplace 1 (app (let z = deep (count db); fun (x : num) -> x) (count db)) }", "E0309")


@pytest.mark.parametrize("src", [ASCRIBED, ASCRIBED_PARTIAL], ids=["let", "partial"])
def test_evidence_an_ascribed_function_fails_on_the_larger_table_only(src, tables):
    """Seventh review round (7a), finding 3, the evidence."""
    r, pair = audit(src, tables, ROW_A * 4, ROW_A * 5, depth=5)
    assert pair.a.status == "ok" and pair.b.status == "failed" and "outcome" in kinds(pair)


def test_a_declared_partial_application_that_may_not_complete_is_refused():
    """Seventh review round (7b), finding 4 (b) (high: whether a run completes depends on private
    data, accepted, at the default limits): ascribing a function type dropped failure risk.

    `x_Ascribe` of a function value to a function type returned `to_opaque(v, ...)`, which dropped
    `v.risk`; `instantiate` applied `Val(arg.type, arg.dist, arg.ir, arg.const, fn)` (no risk) and
    its code was `ILambda(names, IApply(arg.ir, ...))`, so the runtime re-evaluated the ascribed
    *expression* at every application: `((let z = deep (count db * 100000); fun x -> x) : num -o
    num)` ran `deep` at each application with no risk anywhere (E0310 not raised, E0309 not
    raised).  A partial application given a declared type lost its given arguments' risk the same
    way (finding 4 (a) is in test_rule_instance.py).  Suggested fix (made): give `fval` in
    `instantiate` the risk of the value (so E0310 refuses it), and bind the function value once
    (`ILet` around the `ILambda`) and keep `v.risk` on the ascription."""
    refused_report(DEEP + "function add (a : num) (b : num) : num { a + b }\n"
                   + MAIN + "{ let p = (add (deep (count db * 100000)) : num -o num); let z = p 1; laplace 1 (count db) }",
                   "E0310")


def test_an_ascribed_function_expression_that_may_not_complete_is_refused():
    """Seventh review round (7b), finding 4 (b)."""
    r = check(DEEP + MAIN + "{ let p = ((let z = deep (count db * 100000); fun x -> x) : num -o num); "
              "laplace 1 (p (count db)) }")
    assert not r.ok and codes(r) & {"E0309", "E0310"}, diags(r)


@pytest.mark.parametrize("prog", [
    DEEP + MAIN + "{ let p = (let z = deep (count db * 100000); fun x -> x); laplace 1 (p (count db)) }",
    DEEP + "function app (g : num -o num) (y : num) : num { g y }\n"
    + MAIN + "{ laplace 1 (app (let z = deep (count db * 100000); fun x -> x) (count db)) }",
], ids=["not-ascribed", "declared-parameter"])
def test_the_same_risky_function_expression_without_ascription_is_refused(prog):
    """Seventh review round (7b), finding 4 (b), the controls."""
    refused_report(prog, "E0309")


# ---- a declared function nests its calls where it is applied --------------------------------------

DEPTH_REC = "function rec (k : int) (g : num -o num) : num { if k <= 0 then g 0 else rec (k - 1) g }\n"
OPAQUE_DEPTH = (DEEP + DEPTH_REC + MAIN + "{ let g = (fun (z : num) -> z + deep 30); "
                "let v = if count db > 1 then rec 30 g else 0; laplace 1 (count db) }")
RETURNED_DEPTH = (DEEP + DEPTH_REC + "function mk (u : num) : num -o num { fun (z : num) -> z + deep 30 }\n"
                  + MAIN + "{ let v = if count db > 1 then rec 30 (mk 0) else 0; laplace 1 (count db) }")


@pytest.mark.parametrize("src", [OPAQUE_DEPTH, RETURNED_DEPTH], ids=["parameter", "returned"])
def test_a_declared_function_applied_deep_counts_its_depth_there(src):
    """Seventh review round (7a), finding 7 (medium): a function of a declared type was charged its
    call depth where it is created, not where it is applied: an unrolled recursion that applies it
    nested deeper than the runtime allows.

    applications.to_opaque checks the function once (instantiate), so its callees' depth went into
    the *current* instance's callee_depth; `_apply_opaque` added no depth.  `rec 30 g` (31 nested
    instances) applying g at the bottom, where g calls `deep 30` (31 more), nests 62 calls at run
    time, while the checker computed max(31, 32) + 1 for main: accepted with CALL_DEPTH = 40, and
    it always fails.  Under `if count db > 1` the arm had no risk (the declared function
    "completes"), so the outcome depended on the data.  The same held for a function returned
    through a declared return type (`_coerce_return`).  Suggested fix (made): keep the depth (and
    draw depth) of the checked function in the Opaque value, and in `_apply_opaque` add it to the
    applying instance like map_summary does (E0306)."""
    with call_depth(40):
        refused_report(src, "E0306")


@pytest.mark.parametrize("src", [OPAQUE_DEPTH, RETURNED_DEPTH], ids=["parameter", "returned"])
def test_evidence_a_declared_function_applied_deep_fails_on_one_table_only(src, tables):
    """Seventh review round (7a), finding 7, the evidence."""
    r, pair = audit(src, tables, ROW_A, ROW_A * 2, depth=40)
    assert r.ok and pair.a.status == "ok" and pair.b.status == "failed" and "outcome" in kinds(pair)


NEST = ("function nest (i : int) (g : num -o num) (b : bag T) : num {\n"
        "  if i <= 0 then (let z = if count b > 1 then g 0 else 0; count b) else nest (i - 1) g b }\n")
DECLARED_DEEP = DEEP + NEST + MAIN + "{ let g = (fun (x : num) -> x + deep 30 : num -o num); laplace 1 (nest 30 g db) }"


def test_a_declared_function_applied_deep_inside_a_recursion_is_refused():
    """Seventh review round (7b), finding 2 (high: whether a run completes depends on private data,
    accepted): the nesting depth of a function of a declared type was counted where it is created,
    not where it is applied.

    Rule Declared checks `(fun x -> x + deep 30 : num -o num)` once, in main (`to_opaque` ->
    `instantiate` -> `map_summary`), so main's depth includes the 31 nested calls of `deep 30`.
    `_apply_opaque` (each application of a value of a declared function type) added nothing to the
    depth of the instance that applies it: a helper `nest` that recurses 30 levels (unrolled,
    exactly) and applies g at the bottom was given depth 31, although at run time g's body then
    nests 31 more calls (62 in all).  With the runtime's limit at 50 (the oracle's way of making
    limits observable on small tables; the same happens at 20,000 with 10,001 + 10,001 levels),
    the check passed, and the run failed or not depending on whether `count b > 1`: rule Branch
    adds the condition to the failure risk only when an arm may fail (FAIL), and an application of
    a declared function was assumed to have no risk.  Observed: A (1 row) succeeds, B (2 rows)
    fails with E0604.  Suggested fix (made): carry the checked depth and draw depth in the Opaque
    value and add them at each `_apply_opaque` like `map_summary` does; for an Opaque *parameter*,
    add the function's depth at the call that passes it."""
    with call_depth(50):
        r = check(DECLARED_DEEP)
    assert not r.ok and codes(r) & {"E0306", "E0309"}, diags(r)


def test_the_same_function_untyped_is_applied_inline_and_refused():
    """Seventh review round (7b), finding 2, the control: untyped, the function is checked at its
    application, inside nest: depth 62 > 50."""
    with call_depth(50):
        r = check(DEEP + NEST.replace("(g : num -o num)", "g")
                  + MAIN + "{ let g = (fun (x : num) -> x + deep 30); laplace 1 (nest 30 g db) }")
    assert not r.ok and codes(r) == {"E0306"}, diags(r)


# ---- a declared function may not add rows -------------------------------------------------------------

APP7 = "function app (g : bag T -o[2] bag T) (b : bag T) : bag T { g (g (g (g (g (g (g b)))))) }\n"
DOUBLED = {
    "parameter": APP7 + MAIN + "{ laplace 1 (count (app (fun (x : bag T) -> union x x) db)) }",
    "returned": "function mk (u : num) : bag T -o[2] bag T { fun (x : bag T) -> union x x }\n"
                + MAIN + "{ let g = mk 0; laplace 1 (count (g (g (g (g (g (g (g db)))))))) }",
}


@pytest.mark.parametrize("name", sorted(DOUBLED))
def test_a_declared_bag_function_applied_seven_times_grows_128_times(name):
    """Seventh review round (7a), finding 8 (medium): a function of a declared type was charged its
    table growth once, however often it is applied (E0311 bypassed, (I3) false).

    to_opaque instantiates with record=False, so `_note_applied_growth` added the body's growth on
    its parameter *once*, as a multiple of the current instance's parameters (the comment there
    said "never met today"; it was met by every declared bag function), and `_apply_opaque` noted
    nothing.  `app` applies `fun (x : bag T) -> union x x` seven times: a table of 128 |db| rows,
    reported as growth 2 (and as 1 when the function comes back from `mk 0` through a declared
    return type: the growth landed on mk's `num` parameter, whose argument is a constant).  Twenty
    applications need a million times the table's memory: the run fails on a large table and not
    on a small one.  Suggested fix: keep the growth per unit of argument in the Opaque value and
    note `growth * arg.dist` in `_apply_opaque`.  Fixed: a function given a declared type may not
    add rows at all (E0310): its applications are not checked one by one, so their growth could
    not be counted."""
    refused_report(DOUBLED[name], "E0310")


def test_the_same_doubling_through_an_undeclared_closure_is_refused():
    """Seventh review round (7a), finding 8, the control: the undeclared closure is checked at each
    application (E0311)."""
    refused_report(MAIN + "{ let f = fun b -> union b b; laplace 1 (count (f (f (f (f (f (f (f db)))))))) }", "E0311")


def test_a_declared_function_that_does_not_grow_tables_is_accepted():
    """Seventh review round (7a), finding 8, the control: a declared bag function that only filters
    is applied seven times freely."""
    r = check("function app (g : bag T -o bag T) (b : bag T) : bag T { g (g (g (g (g (g (g b)))))) }\n"
              + MAIN + "{ laplace 1 (count (app (fun (x : bag T) -> filter (fun r -> r.x > 1) x) db)) }")
    assert r.ok and r.epsilon == 1 and r.growth == 1


DOUBLE = "(fun x -> union x x : bag T -o[2] bag T)"


def test_a_declared_function_that_doubles_its_table_seven_times_is_refused():
    """Seventh review round (7b), finding 3 (high: tables larger than rule Entry allows, so a memory
    failure that depends on the table's size): a function of a declared type that grows its
    argument was charged once.

    Rule Growth records tables built by `union` in the instance that builds them.  For a function
    of a declared type, `to_opaque` checked the body once and `_note_applied_growth`
    (record=False) attributed its growth relative to its argument (here 2) once, to the current
    instance's parameters.  `_apply_opaque` noted nothing, so `g (g (g ... db))` (7 applications)
    built a table of 128 |db| rows while main's growth was reported as 2 (the untyped closure is
    refused, E0311, 128 times).  With a released number of applications (`rep g n db`) the table
    has 2^n |db| rows for a public n: a run on an empty table always completes, one on a table with
    a row can exhaust memory; E0311 exists to refuse exactly that.  Suggested fix: at each
    `_apply_opaque` whose result type contains a bag, note the result's distance as growth.  Fixed
    (with the seventh round's 7a finding 8): a function given a declared type may not add rows at
    all (E0310)."""
    refused_report(MAIN + "{ let g = " + DOUBLE + "; laplace 1 (count (g (g (g (g (g (g (g db)))))))) }", "E0310")


def test_a_declared_parameter_that_doubles_its_table_is_refused():
    """Seventh review round (7b), finding 3, through a declared parameter."""
    refused_report("function dbl (g : bag T -o[2] bag T) (b : bag T) : bag T { g (g (g (g (g (g (g b)))))) }\n"
                   + MAIN + "{ laplace 1 (count (dbl " + DOUBLE + " db)) }", "E0310")


def test_a_declared_function_applied_a_released_number_of_times_is_refused():
    """Seventh review round (7b), finding 3.  Fixed: a function given a declared type may not add
    rows at all (E0310), whatever the LP makes of the recursion's unknowns."""
    refused_report("function rep (g : bag T -o[2] bag T) (n : num) (b : bag T) : bag T {\n"
                   "  if n <= 0 then b else rep g (n - 1) (g b) }\n"
                   + MAIN + "{ sample n = laplace 1 40; let z = count (rep " + DOUBLE + " n db); laplace 1 (count db) }",
                   "E0310")


def test_a_declared_function_doubling_a_discarded_table_a_released_number_of_times_is_refused():
    """Seventh review round (7b), finding 3: the table's distance is discarded at the base case
    (`count b * 0`), so its coefficient is 0 and the LP does not blow up; nothing recorded the
    doubling.  Before the fix: accepted, epsilon 1, growth 2; with the identity oracle a released
    n = 21 builds 2 million rows from one row (~60 MB more), n = 30 about 30 GB: the run on the
    empty neighbour always completes."""
    refused_report("function rep (g : bag T -o[2] bag T) (n : num) (b : bag T) : num {\n"
                   "  if n <= 0 then count b * 0 else rep g (n - 1) (g b) }\n"
                   + MAIN + "{ sample n = laplace 1 30; let z = rep " + DOUBLE + " n db; laplace 1 (count db + z) }",
                   "E0310")


def test_the_same_discarded_doubling_untyped_is_refused():
    """Seventh review round (7b), finding 3, the control: untyped, the union is checked inside rep:
    its growth unknown diverges (g >= 2 g, g >= 2); with FR1 (test_rule_recursion.py) every unknown
    becomes infinite, so the refusal is E0305 (E0311 once FR1 is fixed)."""
    r = check("function rep g (n : num) (b : bag T) : num { if n <= 0 then count b * 0 else rep g (n - 1) (g b) }\n"
              + MAIN + "{ sample n = laplace 1 30; let z = rep (fun x -> union x x) n db; laplace 1 (count db + z) }")
    assert not r.ok and codes(r) & {"E0305", "E0311"}, diags(r)


def test_the_same_doubling_untyped_is_refused():
    """Seventh review round (7b), finding 3, the controls: the untyped doubling, applied seven times
    and a released number of times (E0311)."""
    r = refused_report(MAIN + "{ let g = fun x -> union x x; laplace 1 (count (g (g (g (g (g (g (g db)))))))) }",
                       "E0311")
    assert any("128 times" in d.message for d in r.diagnostics)
    refused_report("function rep g (n : num) (b : bag T) : bag T { if n <= 0 then b else rep g (n - 1) (g b) }\n"
                   + MAIN + "{ sample n = laplace 1 40; let z = count (rep (fun x -> union x x) n db); laplace 1 (count db) }",
                   "E0311")


# ---- declared functions returned by recursions and composed at each level -------------------------

def test_a_declared_function_returned_by_a_recursion_is_charged_once_per_application(tables):
    """Seventh review round (7b), handled: a declared function returned by a recursion's assumed
    summary is charged once per application."""
    r = exactly("function mk (n : num) (b : bag T) : num -o num {\n"
                "  if n <= 0 then (fun z -> z + count b : num -o num) else mk (n - 1) b }\n"
                + MAIN + "{ sample n = laplace 1 3; let g = mk n db; laplace 1 (g 0 + g 1) }", 1, [0, 2])
    assert violations(r, tables) == []


COMPOSE = ("function f (n : num) (b : bag T) : num -o num {\n  if n <= 0 then (fun z -> z + count b : num -o num) "
           "else (let g = f (n - 1) b; (fun z -> g (g z) : num -o num)) }\n")


@pytest.mark.parametrize("use, sens", [("h 0", 8), ("h (count db)", 9)])
def test_a_declared_function_composed_at_each_unrolled_level_is_charged_exactly(use, sens, tables):
    """Seventh review round (7b), handled: composed at each unrolled level, charged exactly."""
    r = exactly(COMPOSE + MAIN + "{ let h = f 3 db; laplace 1 (" + use + ") }", 1, [sens])
    assert violations(r, tables) == []


def test_a_declared_function_composed_at_each_released_level_is_refused():
    """Seventh review round (7b), handled: its sensitivity (2^n) and its depth (n) are both
    unbounded: the composition, given a declared type, may not complete (E0310), which the checker
    meets first."""
    r = check(COMPOSE + MAIN + "{ sample n = laplace 1 3; let h = f n db; laplace 1 (h 0) }")
    assert not r.ok and codes(r) & {"E0305", "E0310"}, diags(r)
