"""Red-team attacks on the checker, the solver and the runtime.

Each test is one small attack program.  The ones marked xfail(strict=True) are open findings:
today the checker accepts them with an epsilon below their true privacy loss (or crashes, or the
run's outcome depends on private data); each asserts what a sound system must do, so it starts
passing (and the strict xfail turns red, asking for the marker to be removed) once fixed.
The unmarked ones are attacks the system already handles; they pin the exact rejection code or
the exact bound as regression tests.

Neighbouring tables below differ by one row (unbounded DP).  Runs use a seeded source
(RandomSource.seeded), which is for tests only.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from fuzzpy.checking.program import check_source
from fuzzpy.checking.sens import INF
from fuzzpy.diagnostics import FuzzError
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource
from red_team_support import (HEADER, ROW_A, ROW_B, T, assert_accepted_exactly, assert_rejected,  # noqa: F401
                              check, codes, make_tables, outcome, run)


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


def same_release(a, b) -> bool:
    """Equal released values, NaN included (NaN != NaN, but it is the same observation)."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_release(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_release(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


# =============================================================================================
# Open findings: unsound acceptance (claimed epsilon below the true loss)
# =============================================================================================

# Finding 1 (one root, several doors): a fresh part symbol hides an infinite parent.
# Tensor destructuring (`let (a, b) = e` with e not a literal tuple), list patterns (`h :: t`)
# and `part` of a partition known only by its type bind each component to a fresh split
# symbol with coefficient 1 (d_1 + d_2 <= d(parent)).  When the parent depends on the table
# *infinitely* (a private comparison), the component is a bool/sum/list at distance {part: 1}.
# `_branch_choice` (checker.py) only looks for INF coefficients, and `apply_scale(0, ...)` only
# keeps INF entries, so a branch on that component, or a 0-sensitive function of it, is free.

DESTRUCTURING_LEAKS = {
    "let-tensor-then-if": (
        "function pair (db : bag T) : (bool, num) { (count db > 0, 1) }\n"
        "function main (db : bag T) : fuzzy num { let (a, b) = pair db; return (if a then 1 else 0) }"),
    "let-tensor-then-0-sensitive-function": (
        "function pair (db : bag T) : (bool, num) { (count db > 0, 1) }\n"
        "function ind (b : bool) : num { if b then 1 else 0 }\n"
        "function main (db : bag T) : fuzzy num { let (a, b) = pair db; return (ind a) }"),
    "part-of-returned-partition": (
        'function f (db : bag T) : parts {"a", "b", "c"} bool { pmap (fun g -> count g > 0) (groupby (fun r -> r.k) db) }\n'
        'function main (db : bag T) : fuzzy num { let ps = f db; return (if part ps "a" then 1 else 0) }'),
    "list-case-on-component": (
        "function f (db : bag T) : (list num, num) { (if count db > 0 then [1] else [], 0) }\n"
        "function main (db : bag T) : fuzzy num { let (xs, y) = f db; case xs of { [] => return 0 | h :: t => return 1 } }"),
    "sum-case-on-component": (
        "function f (db : bag T) : (num + num, num) { (if count db > 0 then inl 1 else inr 1, 0) }\n"
        "function main (db : bag T) : fuzzy num { let (s, y) = f db; case s of { inl a => return 1 | inr b => return 0 } }"),
}


@pytest.mark.parametrize("name", sorted(DESTRUCTURING_LEAKS))
def test_destructured_component_hides_a_private_branch(name, tables):
    r = check(DESTRUCTURING_LEAKS[name])
    if r.ok:  # a sound checker rejects (E0302); if it accepts, the release must not differ
        assert r.epsilon == INF or same_release(run(r, tables("")), run(r, tables(ROW_A)))
    else:
        assert "E0302" in codes(r)


PER_PART_LEAKS = {
    "pmap": (
        'function main (db : bag T) : fuzzy (list num) {\n'
        '  let bs = pmap (fun g -> count g > 0) (groupby (fun r -> r.k) db);\n'
        '  return (values (pmap (fun (b : bool) -> if b then 1 else 0) bs)) }'),
    "each": (
        'function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) {\n'
        '  let bs = pmap (fun g -> count g > 0) (groupby (fun r -> r.k) db);\n'
        '  each (fun (b : bool) -> if b then return 1 else return 0) bs }'),
}


@pytest.mark.parametrize("name", sorted(PER_PART_LEAKS))
def test_zero_sensitive_per_part_function_drops_infinity(name, tables):
    r = check(PER_PART_LEAKS[name])
    if r.ok:
        assert r.epsilon == INF or same_release(run(r, tables("")), run(r, tables(ROW_A)))
    else:
        assert "E0302" in codes(r)


# Finding 2: the checker reasons in exact reals, the runtime in IEEE floats.  `x * 0` is
# public for the checker (d_scale(0, .) drops every dependence, even infinite ones), but in
# float64 inf * 0 and nan * 0 are NaN, and infinities come from a division by a private zero
# or from plain overflow of a finite-sensitivity value.

FLOAT_LEAKS = {
    # count db = 0 gives 1/0 = inf, inf * 0 = nan; one row gives 1 * 0 = 0.
    "private-division-times-zero": "function main (db : bag T) : fuzzy num { return ((1 / count db) * 0) }",
    # No infinite sensitivity at all: count * 1e200 * 1e200 overflows to inf as soon as count >= 1.
    "overflow-times-zero": ("function main (db : bag T) : fuzzy num { return (count db * 1e200 * 1e200 * 0) }"),
    # The NaN-or-zero bit then steers a public branch: a clean 0/1 release of "db is non-empty".
    "nan-steers-a-branch": ("function main (db : bag T) : fuzzy num {\n"
                            "  let z = (1 / count db) * 0; if z == 0 then return 1 else return 0 }"),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(FLOAT_LEAKS))
def test_float_semantics_differ_from_the_checkers_reals(name, tables):
    r = check(FLOAT_LEAKS[name])
    if r.ok:
        assert r.epsilon == INF or same_release(run(r, tables("")), run(r, tables(ROW_A)))
    else:
        assert codes(r)


# Finding 3: a function-type annotation checked against an unknown of the recursion LP is
# never enforced.  Checker.to_opaque adds `coef <= sens` to the constraint store when coef
# mentions an LP unknown, but only pending_checks are verified after solving, and
# lp._certify skips every constraint whose right side is a constant.

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
    r = check(RECURSIVE_HOF)
    # k = 2 (a public constant released unchanged): rec 2 x = app(rec 1)(x) = rec1(rec1 x),
    # rec 1 x = rec0(rec0 x) = 4x, so rec 2 x = 16x.
    assert not r.ok or max(m.sensitivity for m in r.mechanisms) >= 16


def test_recursive_closure_true_sensitivity_shown_by_a_run(tables):
    """The runtime side of the previous finding: rec 2 (count db) = 16 count db (seeded runs
    of laplace add the same noise for the same seed, so the difference is exact)."""
    r = check(RECURSIVE_HOF)
    if not r.ok:
        pytest.skip("the checker now rejects the attack")
    a = run(r, tables(""), seed=3)
    b = run(r, tables(ROW_A * 4), seed=3)
    assert round(b - a) == 64  # 16 * 4 rows: a 16-sensitive query


# Finding 4: a declared function return type is trusted for function-valued bodies.
# Checker._check_return returns the declared `Fun` type as is when the body is a lambda, a
# partial application or a function name (FnT): its sensitivity is never checked.

def test_returned_closure_sensitivity_is_not_checked():
    r = check("function mk (u : num) : num -o num { fun (x : num) -> x + x + x + x }\n"
              "function main (db : bag T) : fuzzy num { laplace 1 ((mk 0) (count db)) }")
    assert not r.ok or max(m.sensitivity for m in r.mechanisms) >= 4


# =============================================================================================
# Open findings: run outcome (error, exit code) that depends on private data
# =============================================================================================

def test_returned_closure_makes_run_failure_depend_on_data(tables):
    r = check("function mk (u : num) : num -o num { fun (x : num) -> x }\n"
              "function main (db : bag T) : fuzzy num {\n"
              "  laplace 1 (count (filter (fun r -> if r.x > 5 then (mk 0) r.x > 0 else true) db)) }")
    if r.ok:
        assert outcome(r, tables(ROW_A))[0] == outcome(r, tables(ROW_A + ROW_B))[0]


def test_constant_list_case_with_tuple_pattern_fails_depending_on_data(tables):
    r = check('function main (db : bag T) : fuzzy num {\n'
              '  let sel = filter (fun r -> r.k == "b") db;\n'
              '  laplace 1 (count (filter (fun r -> case [(1, 2)] of { [] => true | (a, b) :: t => r.x > a }) sel)) }')
    assert r.ok
    assert outcome(r, tables(ROW_A))[0] == outcome(r, tables(ROW_A + ROW_B))[0] == "value"


def test_recursion_depth_in_a_row_function_makes_failure_depend_on_data(tables):
    r = check("function down (x : num) : num { if x > 0 then down (x - 1) else 0 }\n"
              "function main (db : bag T) : fuzzy num {\n"
              "  laplace 1 (count (filter (fun r -> down (r.x * 100000) == 0) db)) }")
    assert r.ok
    assert outcome(r, tables("0,a,true,1\n"))[0] == outcome(r, tables("0,a,true,1\n" + ROW_B))[0]


def test_import_of_a_data_file_does_not_show_its_rows(tmp_path):
    data = tmp_path / "adult.data"
    data.write_text("39, State-gov, 77516, SECRET_ALICE\nfunction 28, Private, 1234, SECRET_BOB\n")
    r = check_source(f'import "{data}";\n' + T + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }",
                     str(tmp_path / "t.fz"))
    shown = " ".join(d.message + " ".join(d.notes) for d in r.diagnostics)
    shown += " ".join(r.sources.values())
    assert "SECRET" not in shown


def test_an_unparsable_cell_is_a_format_error_that_names_no_row(tmp_path):
    """A decision, not an oversight: issue 3 asks that unparsable values give a clear error before
    any budget is spent.  That error is one bit about the file ("some cell of column x is not an
    int"), seen by the curator who runs the program; it names no row, value or count, and spends
    nothing.  The red team's point stands (an analyst-written schema could probe it), so
    docs/data.md tells curators to review load errors before passing them on."""
    from fuzzpy.checking.types import Column, Num, Schema

    schema = Schema("t", (Column("x", Num(None, None, True)),))
    (tmp_path / "a.csv").write_text("x\n1\n2\n")
    (tmp_path / "b.csv").write_text("x\n1\n2\n2.5\n")
    assert len(load_table(tmp_path / "a.csv", schema, table="t")) == 2
    with pytest.raises(FuzzError) as err:
        load_table(tmp_path / "b.csv", schema, table="t")
    d = err.value.diagnostics[0]
    assert d.code == "E0504" and "2.5" not in d.message + " ".join(d.notes)
    assert not any(ch.isdigit() for ch in d.message)


# =============================================================================================
# Open findings: crashes and checker/runtime mismatches without a direct leak
# =============================================================================================

@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_pmap_inside_a_recursive_group_is_a_diagnostic_not_a_crash():
    src = """
function rec (n : num) (b : bag T) (x : num) : num {
  if n > 0 then
    let ps = pmap (fun g -> rec (n - 1) g 0) (groupby (fun r -> r.k) b);
    let qs = pmap (fun (y : num) -> rec (n - 1) b y) ps;
    x
  else x
}
function main (db : bag T) : fuzzy num { laplace 1 (count db) }
"""
    r = check(src)  # must return a report (E0304 is the expected code)
    assert "E0304" in codes(r)


def test_nested_crosstab_key_runs(tables):
    r = check('function main (db : bag T) : fuzzy num {\n'
              '  let ps = groupby (fun r -> ((r.k, clip 0 1 r.n), r.k)) db;\n'
              '  laplace 1 (count (part ps "a, 0, a")) }')
    if r.ok:
        assert outcome(r, tables(ROW_A))[0] == "value"


def test_crosstab_keys_are_unique(tmp_path):
    src = ('schema U { p : cat{"a", "a, b"}, q : cat{"b, c", "c"} }\n'
           'function main (db : bag U) : fuzzy num {\n'
           '  let ps = groupby (fun r -> (r.p, r.q)) db;\n'
           '  laplace 1 (count (part ps "a, b, c")) }')
    r = check_source(src, "t.fz")
    if r.ok:
        (tmp_path / "u.csv").write_text("p,q\n" + "a,\"b, c\"\n" * 50)
        db = load_table(tmp_path / "u.csv", r.schemas["U"], table="db")
        assert run(r, db) > 25  # the 50 rows of cell ("a", "b, c"), key "a, b, c"


# =============================================================================================
# Attacks the checker handles: regression tests (exact codes, exact bounds)
# =============================================================================================

REJECTED = {
    # private control flow and direct release
    "branch-on-private-comparison": ("E0302", "function main (db : bag T) : fuzzy num { if count db > 5 then return 1 else return 0 }"),
    "return-private-value": ("E0302", "function main (db : bag T) : fuzzy num { return (count db) }"),
    "case-on-private-sum": ("E0302", "function main (db : bag T) : fuzzy num { case (if count db > 3 then inl 1 else inr 2) of { inl a => return 0 | inr b => return 1 } }"),
    "case-on-private-length-list": ("E0302", "function main (db : bag T) : fuzzy num { case (if count db > 3 then [1] else []) of { [] => return 0 | h :: t => return 1 } }"),
    "closure-capturing-db-released": ("E0302", "function main (db : bag T) : fuzzy (num -o num) { return (fun (x : num) -> count db : num -o num) }"),
    "tuple-holding-a-capturing-closure-released": ("E0302", "function main (db : bag T) : fuzzy num { let p = (fun (x : num) -> count db, 1); sample q = return p; return 1 }"),
    # 0 * inf at function application (the guarded paths of finding 1)
    "zero-sensitive-function-on-private-bool": ("E0302", "function f (b : bool) : num { if b then 1 else 0 }\nfunction main (db : bag T) : fuzzy num { return (f (count db > 5)) }"),
    "zero-sensitive-opaque-on-private-bool": ("E0302", "function app (g : bool -o[0] num) (b : bool) : num { g b }\nfunction main (db : bag T) : fuzzy num { return (app (fun (b : bool) -> if b then 1 else 0) (count db > 5)) }"),
    # row functions capturing private data
    "filter-predicate-captures-count": ("E0305", "function main (db : bag T) : fuzzy num { let c = count db; laplace 1 (count (filter (fun r -> r.x < c) db)) }"),
    "map-captures-count": ("E0305", "function main (db : bag T) : fuzzy num { let c = clip 0 1 (count db); laplace 1 (sum (map (fun r -> clip 0 1 (r.x * c)) db)) }"),
    "sort-key-captures-count": ("E0305", "function main (db : bag T) : fuzzy num { let c = count db; laplace 1 (count (head 3 (sort_by (fun r -> r.x - c) db))) }"),
    "each-function-captures-count": ("E0302", 'function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) { let c = count db; each (fun g -> laplace 1 (count g + c)) (groupby (fun r -> r.k) db) }'),
    # unbounded arithmetic
    "division-by-private": ("E0305", "function main (db : bag T) : fuzzy num { laplace 1 (100 / (count db + 1)) }"),
    "exp-of-private": ("E0305", "function main (db : bag T) : fuzzy num { laplace 1 (exp (count db)) }"),
    "sum-of-unclipped": ("E0305", "function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> r.x - r.n * r.x + exp r.x) db)) }"),
    # mechanisms' public arguments
    "with-pair-to-laplace": ("E0202", "function main (db : bag T) : fuzzy (num, num) { laplace 1 (| count db, count db |) }"),
    "private-epsilon": ("E0209", "function main (db : bag T) : fuzzy num { laplace (clip 0.5 1 (count db)) (count db) }"),
    "released-epsilon": ("E0209", "function main (db : bag T) : fuzzy num { sample e = laplace 1 1; laplace e (count db) }"),
    "zero-epsilon": ("E0213", "function main (db : bag T) : fuzzy num { laplace 0 (count db) }"),
    "svt-cutoff-zero": ("E0213", "function main (db : bag T) : fuzzy (list bool) { above_threshold 1 0 5 [1, 2] (fun q -> count db) }"),
    "noisy-max-private-candidates": ("E0209", "function main (db : bag T) : fuzzy num { noisy_max 1 [count db, 1] (fun c -> c) }"),
    # randomized response on a helper's num parameter (it may move by fractions)
    "rr-on-fractional-helper-parameter": ("E0302", "function f (x : num) : fuzzy bool { randomized_response 1 (x > 0) }\nfunction main (db : bag T) : fuzzy bool { f (count db / 2) }"),
    # the sparse vector's rounding on a helper's num parameter
    "svt-on-fractional-helper-parameter": ("E0302", "function f (x : num) : fuzzy (list bool) { above_threshold 1 1 0 [1] (fun q -> x) }\nfunction main (db : bag T) : fuzzy (list bool) { f (count db / 2) }"),
    # recursion and the solver
    "recursion-doubling-on-a-released-depth": ("E0305", "function loop (n : num) (x : num) : num { if n > 0 then loop (n - 1) (x + x) else x }\nfunction main (db : bag T) : fuzzy num { sample k = laplace 1 3; laplace 1 (loop k (count db)) }"),
    "recursive-main-releasing-forever": ("E0302", "function main (db : bag T) : fuzzy num { sample a = laplace 1 (count db); if a > 100 then return a else main db }"),
    # declared sensitivities
    "closure-exceeds-declared-argument-type": ("E0301", "function app (g : num -o num) (y : num) : num { g y }\nfunction main (db : bag T) : fuzzy num { laplace 1 (app (fun (z : num) -> z + z) (count db)) }"),
    "opaque-exceeds-declared-return-type": ("E0202", "function mk (g : num -o[2] num) : num -o num { g }\nfunction main (db : bag T) : fuzzy num { return 1 }"),
    "annotation-exceeded": ("E0301", "function f (x :[0.5] num) : num { x }\nfunction main (db : bag T) : fuzzy num { laplace 1 (f (count db)) }"),
    # partitions need public keys
    "groupby-on-a-real-number": ("E0307", "function main (db : bag T) : fuzzy num { let ps = groupby (fun r -> r.x) db; return 1 }"),
    "groupby-on-a-huge-int-range": ("E0307", "function main (db : bag T) : fuzzy num { let ps = groupby (fun r -> clip 0 100000000 r.n) db; return 1 }"),
    "comparing-distributions": ("E0202", "function main (db : bag T) : fuzzy num { let d = laplace 1 (count db); if d == d then return 1 else return 0 }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejected_attack(name):
    assert_rejected(*REJECTED[name])


ACCEPTED = {
    # name: (program, total epsilon, [laplace/exponential/... sensitivities in order])
    "table-used-twice": ("function main (db : bag T) : fuzzy num { laplace 1 (count db + count db) }", F(1), [2]),
    "head-doubles-the-edit-distance": ("function main (db : bag T) : fuzzy num { laplace 1 (count (head 10 (sort_by (fun r -> r.x) db))) }", F(1), [2]),
    "two-groupbys-of-one-table-add": (
        'function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num, parts {"a", "b", "c"} num) {\n'
        '  sample a = each (fun g -> laplace 1 (count g)) (groupby (fun r -> r.k) db);\n'
        '  sample b = each (fun g -> laplace 1 (count g)) (groupby (fun r -> r.k) db); return (a, b) }', F(2), [1, 1]),
    "split-composes-in-parallel": (
        "function main (db : bag T) : fuzzy (num, num) { let (a, b) = split (fun r -> r.flag) db;\n"
        "  sample x = laplace 1 (count a); sample y = laplace 1 (count b); return (x, y) }", F(1), [1, 1]),
    "union-of-parts-charged-per-part": (
        'function main (db : bag T) : fuzzy num { let ps = groupby (fun r -> r.k) db;\n'
        '  laplace 1 (count (union (part ps "a") (part ps "b")) + count (part ps "a")) }', F(1), [2]),
    "tensor-tuple-is-l1": ("function main (db : bag T) : fuzzy (num, num) { laplace 1 (count db, count (filter (fun r -> r.flag) db)) }", F(1), [2]),
    "score-capturing-db-twice": ('function main (db : bag T) : fuzzy string { exponential 1 ["a", "b"] (fun c -> count db + count (filter (fun r -> r.k == c) db)) }', F(1), [2]),
    "product-of-clipped-counts": ("function main (db : bag T) : fuzzy num { let c = clip 0 10 (count db); laplace 1 (c * c) }", F(1), [20]),
    "row-product-bounds": ("function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> r.x * r.x) db)) }", F(1), [100]),
    "unrolled-recursion-on-a-constant": ("function f (i : num) (x : num) : num { if i > 0 then f (i - 1) (x + x) else x }\nfunction main (db : bag T) : fuzzy num { laplace 1 (f 3 (count db)) }", F(1), [8]),
    "generic-twice-dup": ("function dup (x : num) : num { x + x }\nfunction twice f (x : num) { f (f x) }\nfunction main (db : bag T) : fuzzy num { laplace 1 (twice dup (count db)) }", F(1), [4]),
    "partial-application-used-twice": ("function add (a : num) (b : num) : num { a + b }\nfunction main (db : bag T) : fuzzy num { let g = add (count db); laplace 1 (g 1 + g 2) }", F(1), [2]),
    "closure-applied-twice": ("function main (db : bag T) : fuzzy num { let g = fun (u : num) -> count db; laplace 1 (g 1 + g 2) }", F(1), [2]),
    "destructured-finite-pair": ("function pr (db : bag T) : (num, num) { (count db, count db) }\nfunction main (db : bag T) : fuzzy num { let (a, b) = pr db; laplace 1 (a + b) }", F(1), [2]),
    "two-inputs-sum-their-losses": ("function main (a : bag T) (b : bag T) : fuzzy num { laplace 1 (count a + count (union a b)) }", F(3, 2), [2]),
    "a-distribution-sampled-twice": ("function main (db : bag T) : fuzzy (num, num) { let d = laplace 1 (count db); sample x = d; sample y = d; return (x, y) }", F(2), [1]),
    "released-list-in-parallel": (
        "function sall (xs : list (fuzzy num)) : fuzzy (list num) { case xs of { [] => return [] | h :: t => sample a = h; sample rest = sall t; return (a :: rest) } }\n"
        'function main (db : bag T) : fuzzy (list num) { sall (values (pmap (fun g -> laplace 1 (count g)) (groupby (fun r -> r.k) db))) }', F(1), [1]),
    "sparse-vector": ("function main (db : bag T) : fuzzy (list bool) { above_threshold 1 2 5 [1, 2, 3] (fun q -> count (filter (fun r -> r.x < q) db)) }", F(1), [1]),
    "randomized-response-on-a-comparison": ("function main (db : bag T) : fuzzy bool { randomized_response 0.5 (count db > 5) }", F(1, 2), [1]),
    "division-by-a-constant-bounds": ("function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> clip 0 5 r.x / 2) db)) }", F(1), [F(5, 2)]),
    "max-of-two-uses": ("function main (db : bag T) : fuzzy num { laplace 1 (max (count db) (count db)) }", F(1), [2]),
    "product-with-negative-bounds": ("function main (db : bag T) : fuzzy num { let c = clip (0 - 3) 2 (count db); laplace 1 (c * c) }", F(1), [6]),
    "large-int-scaling-inside-a-row": ("function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> r.n * 1000000) db)) }", F(1), [5000000]),
    "tail-of-a-union": ('function main (db : bag T) : fuzzy num { laplace 1 (count (tail 2 (sort_by (fun r -> r.k) (union db db)))) }', F(1), [4]),
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
    "public-component-of-a-tuple-holding-a-closure": ("function main (db : bag T) : fuzzy num { let p = (fun (x : num) -> count db, 1); return p.2 }", F(0), []),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    assert_accepted_exactly(*ACCEPTED[name])


def test_negative_epsilon_from_the_command_line_is_rejected():
    r = check("param e : num = 1;\nfunction main (db : bag T) : fuzzy num { laplace e (count db) }", params={"e": "-0"})
    assert "E0213" in codes(r)


def test_destructuring_a_finite_pair_still_composes(tables):
    """The fix for finding 1 must keep finite splits: (a, b) of a pair at distance 2 costs 2."""
    r = check("function pr (db : bag T) : (num, num) { (count db, count db) }\n"
              "function main (db : bag T) : fuzzy num { let (a, b) = pr db; laplace 1 a }")
    assert r.ok and r.epsilon == 1 and [m.sensitivity for m in r.mechanisms] == [2]


def test_laplace_noise_follows_the_reported_calibration(tables):
    """The runtime reads the checker's calibration: a 2-sensitive query moves by exactly 2 per
    row under the same seed, and the release records the reported scale."""
    r = check("function main (db : bag T) : fuzzy num { laplace 1 (count db + count db) }")
    a = run_program(r.entry_instance, {"db": tables("")}, RandomSource.seeded(7))
    b = run_program(r.entry_instance, {"db": tables(ROW_A)}, RandomSource.seeded(7))
    assert round(b.value - a.value) == 2
    assert a.releases[0].scale == r.mechanisms[0].scale == 2


def test_zero_times_a_finite_value_is_public_and_really_zero(tables):
    """The part of finding 2 that is right: 0 * (a finite private value) is 0 at run time too."""
    r = check("function main (db : bag T) : fuzzy num { return (count db * 0) }")
    assert r.ok and r.epsilon == 0
    assert run(r, tables("")) == run(r, tables(ROW_A)) == 0


def test_a_deterministic_300_level_recursion_is_unrolled_with_its_exact_doubling():
    """Once widened after 256 levels (and refused); a recursion on public constants is now
    unrolled to the end: x doubles 300 times, so the count is 2^300-sensitive, exactly."""
    from red_team_support import assert_accepted_exactly

    assert_accepted_exactly("function f (i : num) (x : num) : num { if i > 0 then f (i - 1) (x + x) else x }\n"
                            "function main (db : bag T) : fuzzy num { laplace 1 (f 300 (count db)) }",
                            1, [2 ** 300])
