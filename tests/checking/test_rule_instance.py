"""Rule Instance (docs/soundness.md): a function is checked once per instance key (its parameter
types with type variables instantiated, its constant and public arguments, its function
arguments), and a call maps the instance's summary onto the arguments: 0 times an infinite
distance is infinite, a risk on a parameter becomes the argument's presence, and the choice of a
bool, sum or list argument at infinite distance joins the risk when the instance may fail.
Partial applications are calls too.

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP); runs use the soundness oracle (`fuzzpy.audit.oracle.audit_pair`: the
checked program runs on two neighbouring tables with mechanisms replaced by identity + replay, and
the observed privacy loss, outcome and result are compared with the proven epsilon).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import (
    ROW_A,
    ROW_B,
    assert_accepted_exactly,
    assert_rejected,
    audit,
    check,
    exactly,
    kinds,
    make_tables,
    outcome,
    refused_report,
    violations,
)

from fuzzpy.audit.oracle import call_depth


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "
DEEP = "function deep (n : num) : num { if n <= 0 then 0 else 1 + deep (n - 1) }\n"
# A recursion that never reaches its base case: it always ends at the runtime's call-depth limit
# (E0604).  The checker gives it FAIL (it cannot unroll it), which alone is allowed (rule Entry).
SPIN = "function spin (n : num) : num { if n > 0 then spin n else 0 }\n"

REJECTED = {
    # first review round: 0 * inf at function application (the guarded paths of its finding 1)
    "zero-sensitive-function-on-private-bool": ("E0302", "function f (b : bool) : num { if b then 1 else 0 }\nfunction main (db : bag T) : fuzzy num { return (f (count db > 5)) }"),
    "zero-sensitive-opaque-on-private-bool": ("E0302", "function app (g : bool -o[0] num) (b : bool) : num { g b }\nfunction main (db : bag T) : fuzzy num { return (app (fun (b : bool) -> if b then 1 else 0) (count db > 5)) }"),
    # first review round: an annotated parameter's sensitivity
    "annotation-exceeded": ("E0301", "function f (x :[0.5] num) : num { x }\nfunction main (db : bag T) : fuzzy num { laplace 1 (f (count db)) }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_refused_with_the_exact_code(name):
    """First review round, handled: a 0-sensitive function still tells apart arguments that are
    infinitely far apart (E0302); an annotated sensitivity is enforced (E0301)."""
    assert_rejected(*REJECTED[name])


ACCEPTED = {
    # name: (program, total epsilon, [mechanism sensitivities in order]); first review round
    "generic-twice-dup": ("function dup (x : num) : num { x + x }\nfunction twice f (x : num) { f (f x) }\nfunction main (db : bag T) : fuzzy num { laplace 1 (twice dup (count db)) }", F(1), [4]),
    "partial-application-used-twice": ("function add (a : num) (b : num) : num { a + b }\nfunction main (db : bag T) : fuzzy num { let g = add (count db); laplace 1 (g 1 + g 2) }", F(1), [2]),
    # generic instances: one per distinct constant / argument type, never shared wrongly
    "generic-instances-per-constant": (
        "function sc c (x : num) { c * x }\n"
        "function main (db : bag T) : fuzzy (num, num) { sample a = laplace 1 (sc 2 (count db)); sample b = laplace 1 (sc 3 (count db)); return (a, b) }",
        F(2), [2, 3]),
    "generic-instances-per-bound": (
        "function prod x y { x * y }\n"
        "function main (db : bag T) : fuzzy (num, num) {\n"
        "  sample a = laplace 1 (prod (clip 0 2 (count db)) (clip 0 3 (count db)));\n"
        "  sample b = laplace 1 (prod (clip 0 5 (count db)) (clip 0 3 (count db))); return (a, b) }",
        F(2), [5, 8]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """First review round, handled: generic instances and partial applications charged exactly."""
    assert_accepted_exactly(*ACCEPTED[name])


# ---- a bool, sum or list argument decides which arm of the instance runs ----------------------------

H_BOOL = SPIN + "function h (b : bool) : num { if b then spin 1 else 0 }\n"
H_LIST = SPIN + "function h (xs : list num) : num { case xs of { [] => 0 | y :: t => spin 1 } }\n"
H_SUM = SPIN + "function h (s : num + num) : num { case s of { inl a => 0 | inr c => spin 1 } }\n"
LEN = "function len (xs : list num) : num { case xs of { [] => 0 | y :: t => 1 + len t } }\n"
LONG = "[" + ", ".join(["1"] * 60) + "]"

DISCRETE_PARAM_BRANCHES = {
    "bool": H_BOOL + MAIN + "{ let z = h (count db > 3); laplace 1 (count db) }",
    "list": H_LIST + MAIN + "{ let z = h (if count db > 3 then [1] else []); laplace 1 (count db) }",
    "sum": H_SUM + MAIN + "{ let z = h (if count db > 3 then (inl 1 : num + num) else (inr 1 : num + num)); "
                          "laplace 1 (count db) }",
    "closure": SPIN + MAIN + "{ let h = fun b -> if b then spin 1 else 0; let z = h (count db > 3); "
                             "laplace 1 (count db) }",
    "list-length": LEN + MAIN + f"{{ laplace 1 (count db + len (if count db > 3 then {LONG} else [1]) * 0) }}",
    "record-field": SPIN + "function h (p : { b : bool, v : num }) : num { if p.b then spin 1 else 0 }\n"
                    + MAIN + "{ let z = h { b = count db > 3, v = 1 }; laplace 1 (count db) }",
    "pmap-of-bools": SPIN + MAIN + "{ let bs = pmap (fun g -> count g > 3) (groupby (fun r -> r.k) db); "
                                   "let z = pmap (fun b -> if b then spin 1 else 0) bs; laplace 1 (count db) }",
}


@pytest.mark.parametrize("name", sorted(DISCRETE_PARAM_BRANCHES))
def test_a_branch_on_a_private_bool_passed_to_a_helper_is_a_risk(name):
    """Seventh review round (7a, the failure effect), finding 1 (high): rule Branch forgot the
    choice when the scrutinee was a parameter of a discrete type (bool, sum, list) -- a helper
    function that branches on its bool argument hid a data-dependent failure.

    expressions.branch_risk adds `r_presence(_branch_choice(scrutinee.dist))` only when an arm may
    fail, and `_branch_choice` keeps only the *infinite* entries of the scrutinee's distance.
    Inside an instance, a bool / sum / list parameter is the finite symbol {b: 1}: the choice was
    empty, so the instance's summary said "may fail (FAIL), whatever b is".  At the call
    `h (count db > 3)`, rule Instance mapped only the parameters that occur in the summary's risk
    (`map_summary`), so main's risk was {FAIL} alone, which rule Entry allows.  But the argument is
    at infinite distance (a bool on private data): which arm runs, hence whether the run ends at
    the depth limit, depends on db.  The distance side was sound (0 * inf = inf in `apply_scale`);
    only the risk side lost it.  The same hole accepted a recursion over a list whose *length*
    depends on private data (`len` below), the very thing rule Recursion says it refuses.
    Suggested fix (made: the choice term of rule Instance): record the choice of a bool, sum or
    list argument at infinite distance in the call's risk whenever the instance may fail (E0309)."""
    with call_depth(50):
        refused_report(DISCRETE_PARAM_BRANCHES[name], "E0309")


def test_the_same_branch_written_in_main_is_refused():
    """Seventh review round (7a), finding 1, the control: without the helper, rule Branch sees the
    comparison's infinite distance."""
    refused_report(SPIN + MAIN + "{ let z = if count db > 3 then spin 1 else 0; laplace 1 (count db) }", "E0309")


@pytest.mark.parametrize("name", sorted(DISCRETE_PARAM_BRANCHES))
def test_evidence_a_discrete_parameter_branch_fails_on_one_table_only(name, tables):
    """Seventh review round (7a), finding 1, the evidence: one run fails at the depth limit, its
    neighbour does not (evidence tests keep passing after a fix that refuses in rule Entry, since
    the entry instance is still built)."""
    r, pair = audit(DISCRETE_PARAM_BRANCHES[name], tables, ROW_A * 3, ROW_A * 4, depth=50)
    assert "outcome" in kinds(pair), pair.violations  # one run fails at the depth limit, not the other


def test_evidence_the_bool_helper_fails_at_the_real_call_depth(tables):
    """Seventh review round (7a), finding 1: no lowered limit: spin 1 meets limits.CALL_DEPTH
    (20,000) on the 4-row table only."""
    r = check(DISCRETE_PARAM_BRANCHES["bool"])
    assert outcome(r, tables(ROW_A * 3))[0] == "value"
    assert outcome(r, tables(ROW_A * 4)) == ("failed", "RunFailure")


# ---- partial applications keep the risk of the body ---------------------------------------------------

PARTIALS = {
    "let": DEEP + "function f (u : num) (n : num) : num { deep n }\n"
           + MAIN + "{ let g = f 0; let z = g (count db); laplace 1 (count db) }",
    "three-args": DEEP + "function f (u : num) (v : num) (n : num) : num { deep n }\n"
                  + MAIN + "{ let g = f 0; let k = g 1; let z = k (count db); laplace 1 (count db) }",
    "each": DEEP + "function f (u : num) (g : bag T) : fuzzy num { let z = deep (count g); laplace 1 (count g) }\n"
            + MAIN + "{ sample v = each (f 0) (groupby (fun r -> r.k) db); laplace 1 (count db) }",
    "inside-recursion": "function r (u : num) (n : num) : num { if n <= 0 then 0 else (let g = r 0; g (n - 1)) }\n"
                        + MAIN + "{ let z = r 0 (count db); laplace 1 (count db) }",
    "score-function": DEEP + "function f (n : num) (q : num) : num { clip 0 1 n + 0 * deep n }\n"
                      + MAIN + "{ exponential 1 [1, 2] (f (count db)) }",
}


@pytest.mark.parametrize("name", sorted(PARTIALS))
def test_a_partial_application_keeps_the_risk_of_the_body(name):
    """Seventh review round (7a), finding 2 (high): a partial application forgot the failure risk
    of the function's body.

    applications._apply_full, the `Partial` case, computed `inner = self.apply(fn.fn, given +
    args)` (whose risk holds the body's risk mapped onto the arguments) and returned
    `Val(inner.type, inner.dist, IApply(...), inner.const, inner.fn, inner.parts)` with no risk.
    `apply` then united only f.risk and the new arguments' risk.  So `let g = f 0; g (count db)`
    ran `deep (count db)` with risk {}: accepted, and failed at the depth limit on a large table
    only.  Through `each (f 0) ps`, through a declared function type (E0310 was skipped: the
    function "completes"), and inside a recursion (`let g = r 0; g (n - 1)`, whose FAIL and choice
    vanished).  Suggested fix (made): pass `risk=inner.risk` in the Partial case of `_apply_full`."""
    refused_report(PARTIALS[name], "E0309")


def test_a_partially_applied_function_given_a_declared_type_must_complete():
    """Seventh review round (7a), finding 2, through a declared function type (E0310)."""
    refused_report(DEEP + "function f (u : num) (n : num) : num { n + 0 * deep n }\n"
                   "function app (g : num -o num) (y : num) : num { g y }\n"
                   + MAIN + "{ laplace 1 (app (f 0) (count db)) }", "E0310")


def test_the_same_call_without_partial_application_is_refused():
    """Seventh review round (7a), finding 2, the control: the same call in full."""
    refused_report(DEEP + "function f (u : num) (n : num) : num { deep n }\n"
                   + MAIN + "{ let z = f 0 (count db); laplace 1 (count db) }", "E0309")


# With the call-depth limit at 5, the last table size whose run still completes.
PARTIAL_EDGE = {"let": 3, "three-args": 3, "each": 3, "inside-recursion": 4, "score-function": 3}


@pytest.mark.parametrize("name", sorted(PARTIALS))
def test_evidence_a_partial_application_fails_on_the_larger_table_only(name, tables):
    """Seventh review round (7a), finding 2, the evidence."""
    n = PARTIAL_EDGE[name]
    r, pair = audit(PARTIALS[name], tables, ROW_A * n, ROW_A * (n + 1), depth=5)
    assert pair.a.status == "ok" and pair.b.status == "failed" and "outcome" in kinds(pair)


RISKY2 = DEEP + "function risky (a : num) (b : num) : num { a + deep b }\n"


def test_a_risky_function_completed_from_a_partial_application_is_refused():
    """Seventh review round (7b), finding 4 (a) (high: whether a run completes depends on private
    data, accepted, at the default limits): completing a partial application dropped failure risk.

    `applications._apply_full` for a `Partial` checked `apply(fn.fn, given + args)` and returned
    `Val(inner.type, inner.dist, IApply(...), inner.const, inner.fn, inner.parts)`: inner.risk (the
    function's own risk on its arguments, and the given arguments', which the runtime evaluates at
    this application, inside the IApply body) was dropped.  `let p = risky 1; let z = p (count db
    * 100000)` was accepted although `risky 1 (count db * 100000)` is refused (E0309): with one row
    the run nests more than CALL_DEPTH calls and fails, with none it completes.  The same loss hid
    the risk of a partial application given to a primitive (`each (r2 1) parts`, refused when
    written `each (fun g -> r2 1 g) parts`) and made E0310 miss a partial application given a
    declared type (test_rule_declared.py).  Suggested fix (made): `return Val(...,
    risk=inner.risk)` (apply() then adds f.risk and the new arguments')."""
    refused_report(RISKY2 + MAIN + "{ let p = risky 1; let z = p (count db * 100000); laplace 1 (count db) }", "E0309")


def test_the_same_risky_function_applied_in_full_is_refused():
    """Seventh review round (7b), finding 4 (a), the control."""
    refused_report(RISKY2 + MAIN + "{ let z = risky 1 (count db * 100000); laplace 1 (count db) }", "E0309")


R2 = DEEP + "function r2 (a : num) (g : bag T) : fuzzy num { let z = deep (count g * 100000); laplace 1 (count g) }\n"
EACH_MAIN = 'function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) '


def test_a_risky_partial_application_given_to_each_is_refused():
    """Seventh review round (7b), finding 4 (a), given to a primitive."""
    refused_report(R2 + EACH_MAIN + "{ each (r2 1) (groupby (fun r -> r.k) db) }", "E0309")


def test_the_same_per_part_function_written_as_a_lambda_is_refused():
    """Seventh review round (7b), finding 4 (a), the control."""
    refused_report(R2 + EACH_MAIN + "{ each (fun g -> r2 1 g) (groupby (fun r -> r.k) db) }", "E0309")


# ---- an instance checked for a public argument is never used for a private one ----------------------

F_PUB = "function f (x : num) : num { if x > 3 then 1 else 0 }\n"
RELEASE_A = "sample a = laplace 1 (count db); "


def test_a_function_that_branches_on_a_released_argument_is_free():
    """Seventh review round (7b), handled: the instance key records a released (public) argument."""
    exactly(F_PUB + MAIN + "{ " + RELEASE_A + "laplace 1 (f a + count db) }", 2, [1, 1])


@pytest.mark.parametrize("prog", [
    F_PUB + MAIN + "{ " + RELEASE_A + "laplace 1 (f a + f (count db)) }",
    "function f x : num { if x > 3 then 1 else 0 }\n" + MAIN + "{ " + RELEASE_A + "laplace 1 (f a + f (count db)) }",
    "function f (x : num) (y : num) : num { if x > 3 then y else 0 }\n"
    + MAIN + "{ " + RELEASE_A + "let p = f a; let q = f (count db); laplace 1 (p 1 + q 1) }",
    "function f (x : num) (n : num) : num { if n <= 0 then (if x > 3 then 1 else 0) else f x (n - 1) }\n"
    + MAIN + "{ " + RELEASE_A + "sample n = laplace 1 3; laplace 1 (f a n + f (count db) n) }",
    MAIN + "{ " + RELEASE_A + "let g = fun x -> if x > 3 then 1 else 0; laplace 1 (g a + g (count db)) }",
    "function mk (k : num) { fun x -> if k > 3 then x else 0 }\n"
    + MAIN + "{ " + RELEASE_A + "let g = mk a; let h = mk (count db); laplace 1 (g 1 + h 1) }",
    F_PUB + MAIN + "{ sample c = exponential 1 [1, 5] (fun q -> f q + count db); laplace 1 (f (count db)) }",
], ids=["cached", "untyped", "partial", "recursion", "closure", "returned-closure", "score-candidate"])
def test_a_public_instance_is_not_reused_for_a_private_argument(prog):
    """Seventh review round (7b), handled: caching, partial application, recursion, closures,
    returned closures and score functions never reuse an instance checked for a public argument
    for a private one (E0305)."""
    refused_report(prog, "E0305")


def test_a_constant_widened_to_a_public_value_stays_apart_from_a_private_argument():
    """Seventh review round (7b), handled: a constant widened by rule Widen stays public in the
    key, apart from a private argument."""
    refused_report("function f (i : int) (x : num) (db : bag T) : fuzzy num {\n"
                   "  sample a = laplace 0.001 (count db);\n"
                   "  if a > 0 then f (i + 1) x db else return (if x > 3 then 1 else 0) }\n"
                   + MAIN + "{ f 0 (count db) db }", "E0302")


# ---- type variables --------------------------------------------------------------------------------------

P3 = 'parts {"a", "b", "c"}'


@pytest.mark.parametrize("prog, eps, sens", [
    ("function f (d : fuzzy 'a) : fuzzy 'a { d }\n"
     + MAIN + "{ sample x = f (laplace 1 (count db)); f (laplace 1 (count db)) }", 2, [1, 1]),
    ("function g (ps : " + P3 + " 'a) : 'a { ps.a }\n" + MAIN + "{ laplace 1 (count (g (groupby (fun r -> r.k) db))) }",
     1, [1]),
    ("function g (ps : " + P3 + " 'a) : ('a, 'a) { (ps.a, ps.a) }\n"
     + MAIN + "{ let (x, y) = g (groupby (fun r -> r.k) db); laplace 1 (count x + count y) }", 1, [2]),
    ("function pick (c : bool) (x : 'a) (y : 'a) : 'a { if c then x else y }\n"
     + MAIN + "{ " + RELEASE_A + "laplace 1 (pick (a > 0) (clip 0 1 (count db)) (clip 0 5 (count db))) }", 2, [1, 2]),
    ("function f (s : 'a + 'b) (d : 'a) : 'a { case s of { inl x => x | inr y => d } }\n"
     + MAIN + "{ laplace 1 (clip 0 1 (f (inr 3) (count db))) }", 1, [1]),
    ("function hd (xs : list 'a) (d : 'a) : 'a { case xs of { [] => d | h :: t => h } }\n"
     + MAIN + "{ laplace 1 (hd [] (clip 0 1 (count db))) }", 1, [1]),
    ("function len (xs : list 'a) : num { case xs of { [] => 0 | h :: t => 1 + len t } }\n"
     + MAIN + "{ laplace 1 (count db + len [1, 2, 3]) }", 1, [1]),
], ids=["fuzzy", "parts", "parts-twice", "join", "sum-hole", "list-hole", "public-list-recursion"])
def test_type_variables_are_instantiated_soundly(prog, eps, sens, tables):
    """Seventh review round (7b), handled: type variables in joins, holes, tuples, sums, fuzzy,
    parts and recursion are instantiated per call, and the oracle sees no violation."""
    r = exactly(prog, eps, sens)
    assert violations(r, tables, [("", ROW_A), (ROW_A, ROW_A + ROW_B)]) == []


@pytest.mark.parametrize("prog, code", [
    ("function f (x : 'a) : 'a { x + 1 }\n" + MAIN + "{ laplace 1 (f (clip 0 1 (count db))) }", "E0202"),
    ("function f (n : num) (x : 'a) (z : num[0, 1]) : 'a { if n <= 0 then x * 2 else f (n - 1) x z }\n"
     + MAIN + "{ sample n = laplace 1 3; laplace 1 (f n (clip 0 1 (count db)) 0) }", "E0202"),
    ("function last (n : num) (xs : list 'a) : list 'a { if n <= 0 then xs else last (n - 1) xs }\n"
     + MAIN + "{ sample n = laplace 1 3; return (last n []) }", "E0212"),
    ("function f (x : num) : 'a { x }\n" + MAIN + "{ laplace 1 (f (count db)) }", "E0212"),
    ("function app (g : 'a -o 'a) (x : 'a) : 'a { g x }\n"
     + MAIN + "{ laplace 1 (app (fun y -> y) (count db)) }", "E0202"),
], ids=["arithmetic-leaves-bounds", "recursive-base-leaves-bounds", "hole-recursion", "unfixed-return",
        "tvar-in-function-type"])
def test_type_variable_misuses_are_refused(prog, code):
    """Seventh review round (7b), handled: a body that leaves a type variable's bounds, a return
    type the arguments do not fix, a type variable in a function type."""
    refused_report(prog, code)
