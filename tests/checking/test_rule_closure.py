"""Rule Closure (docs/soundness.md): a function value returned by an instance is, seen from the
call, the same function with its scope re-expressed: every value it can reach, in every scope of
its chain (a closure returned through two functions carries both), has each parameter symbol
replaced by the argument's distance; each application then checks its body in that scope.

Attacks found by the review rounds and pinned as regression tests; at the end, a false rejection
pinned as it is today.  Unsound acceptances are shown with the soundness oracle
(`fuzzpy.audit.oracle.audit_pair`).
"""

from __future__ import annotations

import pytest
from check_and_run import ROW_A, check, codes, diags, exactly, make_tables, refused_report, violations


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "
DEEP = "function deep (n : num) : num { if n <= 0 then 0 else 1 + deep (n - 1) }\n"
REP = "function rep f (n : num) : num { if n <= 0 then 0 else f 0 + rep f (n - 1) }\n"

# ---- a closure returned through two functions ---------------------------------------------------------

TWO_LEVELS = "function mk (k : num) { fun x -> x + k }\nfunction mk2 (k : num) { mk k }\n"


def test_a_closure_returned_through_two_functions_does_not_release_a_raw_count():
    """Seventh review round (7b), finding 1 (critical: a raw count released with a proven epsilon
    of 0): a function returned through two function instances kept the inner instance's parameter
    symbols.

    `function mk (k : num) { fun x -> x + k }` and `function mk2 (k : num) { mk k }`.  In mk2's
    body, the call `mk k` is rebound (rule Closure, `instances.rebind_returned`): `_Rebinder.env`
    rebuilt the chain of environments from the closure up to mk's parameter frame, substituting
    mk's parameter by mk2's `k`, and gave the rebuilt frame the parent `env.parent` (the globals).
    The rebound closure's environment was therefore no longer *inside* mk2's frame.  When main
    called `mk2 (count db)`, the second rebind (for mk2's instance) asked `_Rebinder._inside(env)`,
    got False, and left the environment untouched: the closure still said `k` is at distance
    {k (mk2's parameter symbol): 1}, a symbol that means nothing in main.  Applying the closure
    then gave `g 0` a distance on that stale symbol and none on db: rule Entry only read main's own
    parameter symbols, so the coefficient of db was 0 and `return (g 0)` released the exact count
    with epsilon 0.  The same escape hid failure risk (E0309) and table growth (E0311), and
    happened whenever a rebound closure was returned again: directly, let-bound, wrapped in a new
    lambda, through a closure instance, through a higher-order function that applies its argument,
    or with a split part.  (Partial applications were safe: their given arguments are Vals, which
    `_Rebinder.val` rewrites.)  Suggested fix (made): the rebinder rewrites every environment of
    the chain that mentions a substituted symbol; defence in depth: rule Entry refuses (E0901) any
    symbol in main's distance, risk or growth that is not one of its parameters or a part of
    their splits, instead of ignoring it."""
    refused_report(TWO_LEVELS + MAIN + "{ let g = mk2 (count db); return (g 0) }", "E0302")


def test_a_closure_returned_through_two_functions_is_charged(tables):
    """Seventh review round (7b), finding 1: the oracle sees no violation once charged."""
    r = check(TWO_LEVELS + MAIN + "{ let g = mk2 (count db); laplace 1 (g 0) }")
    assert violations(r, tables) == []  # before the fix: [('loss', 'observed privacy loss 1 > proven epsilon 0'), ...]


def test_the_same_closure_returned_through_one_function_is_charged():
    """Seventh review round (7b), finding 1, the control: the one-level case was right: E0302 for
    the raw release."""
    refused_report("function mk (k : num) { fun x -> x + k }\n" + MAIN + "{ let g = mk (count db); return (g 0) }",
                   "E0302")
    exactly("function mk (k : num) { fun x -> x + k }\n" + MAIN + "{ let g = mk (count db); laplace 1 (g 0) }",
            1, [1])


@pytest.mark.parametrize("src", [
    # three levels
    TWO_LEVELS + "function mk3 (k : num) { mk2 k }\n" + MAIN + "{ let g = mk3 (count db); return (g 0) }",
    # the rebound closure let-bound, then returned
    "function mk (k : num) { fun x -> x + k }\nfunction mk2 (k : num) { let h = mk (k * 2); h }\n"
    + MAIN + "{ let g = mk2 (count db); return (g 0) }",
    # wrapped in a new lambda (whose own environment is inside mk2's frame, but h's is not)
    "function mk (k : num) { fun x -> x + k }\nfunction mk2 (k : num) { let h = mk k; fun y -> h y }\n"
    + MAIN + "{ let g = mk2 (count db); return (g 0) }",
    # the outer function is a local closure (a closure instance)
    "function mk (k : num) { fun x -> x + k }\n" + MAIN + "{ let mk2 = fun (j : num) -> mk j; let g = mk2 (count db); "
    "return (g 0) }",
    # a higher-order function applies a closure that returns a closure
    "function app f (k : num) { f k }\n" + MAIN + "{ let g = app (fun j -> fun x -> x + j) (count db); return (g 0) }",
    # a higher-order function applies a top-level function that returns a closure
    "function mk (k : num) { fun x -> x + k }\nfunction app f (k : num) { f k }\n"
    + MAIN + "{ let g = app mk (count db); return (g 0) }",
    # the inner function captures a split part of the outer one's table
    "function mk (b : bag T) { fun x -> count b }\n"
    "function mk2 (b : bag T) { let (p, q) = split (fun r -> r.flag) b; mk p }\n"
    + MAIN + "{ let g = mk2 db; return (g 0) }",
], ids=["three-levels", "let-bound", "wrapped", "closure-instance", "higher-order", "higher-order-top",
     "split-part"])
def test_no_route_of_a_rebound_closure_releases_a_raw_count(src, tables):
    """Seventh review round (7b), finding 1: every route by which a rebound closure is returned
    again."""
    r = check(src)
    assert not r.ok and "E0302" in codes(r), (r.epsilon, violations(r, tables, [("", ROW_A)]) if r.ok else diags(r))


def test_a_closure_returned_through_two_functions_keeps_its_failure_risk():
    """Seventh review round (7b), finding 1: one level is refused (next test); two levels were
    accepted with epsilon 1 before the fix."""
    refused_report(DEEP + "function mk (k : num) { fun x -> deep k }\nfunction mk2 (k : num) { mk k }\n"
                   + MAIN + "{ let g = mk2 (count db); let z = g 0; laplace 1 (count db) }", "E0309")


def test_a_closure_returned_through_one_function_keeps_its_failure_risk():
    """Seventh review round (7b), finding 1, the control for the failure risk."""
    refused_report(DEEP + "function mk (k : num) { fun x -> deep k }\n"
                   + MAIN + "{ let g = mk (count db); let z = g 0; laplace 1 (count db) }", "E0309")


GROW8 = "union (union (union {0} {0}) (union {0} {0})) (union (union {0} {0}) (union {0} {0}))"


def test_a_closure_returned_through_two_functions_keeps_its_growth():
    """Seventh review round (7b), finding 1, table growth: 8 x 8 = 64 times the input is built and
    then doubled once more: 128 > MAX_GROWTH.  Before the fix: accepted with growth 1 and epsilon 0
    (the count's sensitivity 64 charged to the stale symbol)."""
    refused_report("function mk (b : bag T) { fun x -> " + GROW8.format("b") + " }\nfunction mk2 (b : bag T) { mk b }\n"
                   + MAIN + "{ let g = mk2 db; let h = fun t -> " + GROW8.format("t") + "; "
                   "laplace 1 (count (union (h (g 0)) (h (g 0)))) }", "E0311")


def test_the_same_growth_through_one_function_is_refused():
    """Seventh review round (7b), finding 1, the control for growth."""
    refused_report("function mk (b : bag T) { fun x -> " + GROW8.format("b") + " }\n"
                   + MAIN + "{ let g = mk db; let h = fun t -> " + GROW8.format("t") + "; "
                   "laplace 1 (count (union (h (g 0)) (h (g 0)))) }", "E0311")


def test_a_closure_returned_through_two_functions_and_applied_a_released_number_of_times_is_infinite():
    """Seventh review round (7b): finding 1's closure, rebound correctly, captures count db:
    applied n times for a released n, its sensitivity is unbounded (E0305), not a stale symbol's
    E0304."""
    refused_report(TWO_LEVELS + REP + MAIN + "{ sample n = laplace 1 3; let g = mk2 (count db); laplace 1 (rep g n) }",
                   "E0305")


# ---- one level: the instance's parameters re-expressed at each call ----------------------------------

def test_a_closure_returned_with_a_risky_body_is_charged_where_it_is_applied():
    """Seventh review round (7a, the failure effect), handled: the returned closure's risk is
    charged where it is applied, and never when it is not."""
    mk = DEEP + "function mk (n : num) { fun x -> x + deep n }\n"
    refused_report(mk + MAIN + "{ let g = mk (count db); laplace 1 (count db + 0 * g 1) }", "E0309")
    r = check(mk + MAIN + "{ let g = mk (count db); laplace 1 (count db) }")
    assert r.ok and r.epsilon == 1  # never applied: never run


@pytest.mark.parametrize("prog, eps, sens", [
    ("function mk (k : num) { fun x -> x + k }\n"
     + MAIN + "{ let g = mk (count db); let h = mk 5; laplace 1 (g 1 + h (count db) + g 2) }", 1, [3]),
    ("function add3 (a : num) (b : num) (c : num) : num { a + b + c }\nfunction mk (k : num) { add3 k k }\n"
     + MAIN + "{ let g = mk (count db); laplace 1 (g 1 + g 2) }", 1, [4]),
    ("function mk (k : num) { fun x -> (fun y -> x + y + k) }\n"
     + MAIN + "{ let g = mk (count db); let h = g (count db); laplace 1 (h 1 + h 2) }", 1, [4]),
    ("function mk (k : num) { let a = fun u -> u + k; fun x -> a x + a x }\n"
     + MAIN + "{ let g = mk (count db); laplace 1 (g 0) }", 1, [2]),
    ("function mk (k : num) { fun r -> clip 0 1 (r.x * k) }\n"
     + MAIN + "{ let g = mk 0.1; laplace 1 (sum (map g db)) }",
     1, [1]),
    ("function mk (n : num) (b : bag T) { fun u -> if n <= 0 then 0 else (mk (n - 1) b) u + count b }\n"
     + MAIN + "{ laplace 1 ((mk 3 db) 0) }", 1, [3]),
    ("function mk (b : bag T) { let (x, y) = split (fun r -> r.flag) b; fun (u : num) -> (x, y) }\n"
     + MAIN + "{ let f = mk db; let (p, q) = f 0; laplace 1 (count p + count q) }", 1, [2]),
    # a closure instance (not a top-level function) returning a closure, one level
    ("function mk2 (k : num) { let c = fun j -> fun x -> x + j + k; c 5 }\n"
     + MAIN + "{ let g = mk2 (count db); laplace 1 (g 0) }", 1, [1]),
], ids=["twice", "partial", "nested", "captures-closure", "map", "closure-recursion-const", "split-parts",
        "closure-instance-inside"])
def test_a_returned_closure_is_charged_at_each_application(prog, eps, sens, tables):
    """Seventh review round (7b), handled: rule Closure, one level."""
    r = exactly(prog, eps, sens)
    assert violations(r, tables) == []


def test_a_returned_closure_capturing_a_private_value_is_infinite_per_row():
    """Seventh review round (7b), handled: given to map, it is read once per row (rule Row)."""
    refused_report("function mk (k : num) { fun r -> clip 0 1 (r.x * k) }\n"
                   + MAIN + "{ let g = mk (count db); laplace 1 (sum (map g db)) }", "E0305")


def test_a_returned_closure_that_recurses_on_a_released_value_is_refused():
    """Seventh review round (7b), handled: the returned closure calls the function that made it:
    the cached instance is reused at each application and a new closure returned, unrolled until
    the check-time limit (about 4 s)."""
    refused_report("function mk (n : num) (b : bag T) { fun u -> if n <= 0 then 0 else (mk (n - 1) b) u + count b }\n"
                   + MAIN + "{ sample n = laplace 1 3; laplace 1 ((mk n db) 0) }", "E0306")


def test_fr4_a_returned_closure_over_a_groupby_is_charged_per_part():
    """Seventh review round (7b), false rejection FR4: a closure returned by a function loses
    parallel composition over the parts it captures: `_Rebinder.dist` eliminates each captured part
    separately (p_k -> parent), so `each` over a captured `groupby` is charged once per key (3)
    instead of once (1, as when written inline).  Suggested fix: re-express the instance's splits in
    the caller's symbols (fresh parts with sum <= the substituted parent) instead of eliminating
    them value by value."""
    main = 'function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) '
    per_part = "each (fun g -> laplace 1 (count g)) ps"
    exactly("function mk (b : bag T) { let ps = groupby (fun r -> r.k) b; fun (u : num) -> " + per_part + " }\n"
            + main + "{ let f = mk db; f 0 }", 3, [1])
    exactly(main + "{ let ps = groupby (fun r -> r.k) db; let f = fun (u : num) -> " + per_part + "; f 0 }", 1, [1])
