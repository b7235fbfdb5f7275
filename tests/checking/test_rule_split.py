"""Rule Split (docs/soundness.md): a partition (`split`, `groupby`, tensor and list destructuring)
gives its parts fresh symbols whose sum is at most the parent's distance, each part also keeping
the parent's infinite entries; parts are eliminated at a mechanism by the exact optimum (parallel
composition).  Groupby keys must have a public, finite domain.

Attacks found by the review rounds and pinned as regression tests (everyday partitions are in
test_partitions.py).  Neighbouring tables differ by one row (unbounded DP); runs use
RandomSource.seeded (tests only).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import (
    ROW_A,
    assert_accepted_exactly,
    assert_rejected,
    check,
    codes,
    make_tables,
    outcome,
    run,
    same_release,
)

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.typesystem.sens import INF


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


# ---- a part keeps its parent's infinite entries -----------------------------------------------------

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
    """First review round, finding 1 (one root, several doors): a fresh part symbol hid an infinite
    parent.

    Tensor destructuring (`let (a, b) = e` with e not a literal tuple), list patterns (`h :: t`)
    and `part` of a partition known only by its type bound each component to a fresh split symbol
    with coefficient 1 (d_1 + d_2 <= d(parent)).  When the parent depends on the table
    *infinitely* (a private comparison), the component is a bool/sum/list at distance {part: 1}.
    `_branch_choice` (checker.py) only looked for INF coefficients, and `apply_scale(0, ...)` only
    kept INF entries, so a branch on that component, or a 0-sensitive function of it, was free.
    A sound checker rejects (E0302); if it accepts, the release must not differ."""
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
    """First review round, finding 1, the per-part door: a 0-sensitive function given to pmap or
    each over parts that depend infinitely on the table dropped the infinity."""
    r = check(PER_PART_LEAKS[name])
    if r.ok:
        assert r.epsilon == INF or same_release(run(r, tables("")), run(r, tables(ROW_A)))
    else:
        assert "E0302" in codes(r)


def test_destructuring_a_finite_pair_still_composes(tables):
    """First review round: the fix for finding 1 must keep finite splits: (a, b) of a pair at
    distance 2 costs 2."""
    r = check("function pr (db : bag T) : (num, num) { (count db, count db) }\n"
              "function main (db : bag T) : fuzzy num { let (a, b) = pr db; laplace 1 a }")
    assert r.ok and r.epsilon == 1 and [m.sensitivity for m in r.mechanisms] == [2]


# ---- keys ---------------------------------------------------------------------------------------------

def test_nested_crosstab_key_runs(tables):
    """First review round (crashes and checker/runtime mismatches): a crosstab on a nested tuple
    key runs."""
    r = check('function main (db : bag T) : fuzzy num {\n'
              '  let ps = groupby (fun r -> ((r.k, clip 0 1 r.n), r.k)) db;\n'
              '  laplace 1 (count (part ps "a, 0, a")) }')
    if r.ok:
        assert outcome(r, tables(ROW_A))[0] == "value"


def test_crosstab_keys_are_unique(tmp_path):
    """First review round: categories that hold ", " must not make two crosstab cells share a
    key."""
    src = ('schema U { p : cat{"a", "a, b"}, q : cat{"b, c", "c"} }\n'
           'function main (db : bag U) : fuzzy num {\n'
           '  let ps = groupby (fun r -> (r.p, r.q)) db;\n'
           '  laplace 1 (count (part ps "a, b, c")) }')
    r = check_source(src, "t.fz")
    if r.ok:
        (tmp_path / "u.csv").write_text("p,q\n" + "a,\"b, c\"\n" * 50)
        db = load_table(tmp_path / "u.csv", r.schemas["U"], table="db")
        assert run(r, db) > 25  # the 50 rows of cell ("a", "b, c"), key "a, b, c"


REJECTED = {
    # first review round: partitions need public keys
    "groupby-on-a-real-number": ("E0307", "function main (db : bag T) : fuzzy num { let ps = groupby (fun r -> r.x) db; return 1 }"),
    "groupby-on-a-huge-int-range": ("E0307", "function main (db : bag T) : fuzzy num { let ps = groupby (fun r -> clip 0 100000000 r.n) db; return 1 }"),
    # third review round: parts keep their parent's infinite entries: a record field of a returned record
    "field-of-a-returned-record": ("E0302", "function f (db : bag T) : { b : bool, n : num } { { b = count db > 0, n = 1 } }\n"
                                   "function main (db : bag T) : fuzzy num { if (f db).b then return 1 else return 0 }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_refused_with_the_exact_code(name):
    """First and third review rounds, handled: a key without a small public domain (E0307); a
    field of a returned record keeps the record's infinite entries (E0302)."""
    assert_rejected(*REJECTED[name])


def test_integer_division_cannot_be_a_groupby_key():
    """Fifth review round: `n / 2` is not an integer, so it is no key (E0307)."""
    r = check("function main (db : bag T) : fuzzy num { let ps = groupby (fun r -> clip 0 3 (r.n / 2)) db; return 1 }")
    assert not r.ok and "E0307" in codes(r)


# ---- parallel composition --------------------------------------------------------------------------

ACCEPTED = {
    # name: (program, total epsilon, [mechanism sensitivities in order]); first review round
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
    "destructured-finite-pair": ("function pr (db : bag T) : (num, num) { (count db, count db) }\nfunction main (db : bag T) : fuzzy num { let (a, b) = pr db; laplace 1 (a + b) }", F(1), [2]),
    "released-list-in-parallel": (
        "function sall (xs : list (fuzzy num)) : fuzzy (list num) { case xs of { [] => return [] | h :: t => sample a = h; sample rest = sall t; return (a :: rest) } }\n"
        'function main (db : bag T) : fuzzy (list num) { sall (values (pmap (fun g -> laplace 1 (count g)) (groupby (fun r -> r.k) db))) }', F(1), [1]),
    # fifth review round: ordered operations per part, lists of bags in recursion, crosstabs, keys, nested splits
    "head-per-part-in-each": (
        'function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) { let ps = groupby (fun r -> r.k) db; '
        'each (fun g -> laplace 1 (count (head 1 (sort_by (fun r -> r.x) g)))) ps }', F(1), [2]),
    "values-of-parts-through-recursion": (
        "function go (xs : list (bag T)) : num { case xs of { [] => 0 | h :: t => count h + go t } }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 (go (values (groupby (fun r -> r.k) db))) }", F(1), [1]),
    "values-recursion-doubling-plus-the-whole": (
        "function go (xs : list (bag T)) : num { case xs of { [] => 0 | h :: t => count h + count h + go t } }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 (go (values (groupby (fun r -> r.k) db)) + go [db]) }",
        F(1), [4]),
    "crosstab-each": (
        'function main (db : bag T) : fuzzy (parts {"a, 0", "a, 1", "b, 0", "b, 1", "c, 0", "c, 1"} num) { '
        'each (fun g -> laplace 1 (count g)) (groupby (fun r -> (r.k, clip 0 1 r.n)) db) }', F(1), [1]),
    "keys-as-candidates": (
        'function main (db : bag T) : fuzzy string { let ps = groupby (fun r -> r.k) db; '
        'exponential 1 (keys ps) (fun q -> count (part ps "a")) }', F(1), [1]),
    "split-inside-pmap": (
        'function main (db : bag T) : fuzzy num { let ps = pmap (fun g -> split (fun r -> r.flag) g) '
        '(groupby (fun r -> r.k) db); laplace 1 (count (part ps "a").1 + count (part ps "a").2 + '
        'count (part ps "b").1) }', F(1), [2]),
    "split-inside-recursion": (
        "function rec (n : num) (b : bag T) : num { if n > 0 then (let (x, y) = split (fun r -> r.flag) b; "
        "count x + rec (n - 1) y + rec (n - 1) x) else 0 }\n"
        "function main (db : bag T) : fuzzy num { laplace 1 (rec 2 db) }", F(1), [2]),
    "integer-division-is-not-an-int-key": (
        "function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> clip 0 3 (r.n / 2)) db) + "
        "count (filter (fun r -> r.n / 2 > 1) db)) }", F(1), [4]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """First and fifth review rounds, handled: parts of one split compose in parallel, two
    partitions of one table add, and so do a part and its whole."""
    assert_accepted_exactly(*ACCEPTED[name])
