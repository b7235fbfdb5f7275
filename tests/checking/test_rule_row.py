"""Rule Row (docs/soundness.md): a function given to map, filter, split, groupby or sort_by runs
once per row.  Anything private it captures is charged infinity; what it computes for one row
depends on that row only (whatever the bag's representation, vectorised or row by row); a row
whose evaluation fails, or makes more than limits.ROW_CALLS calls, is a missing value, never a
failed or endless run; and its result may not hold a table (E0308).

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP); runs use RandomSource.seeded (tests only): the same seed draws the same
noise for the same calibration, so the difference of two Laplace releases is the difference of the
values the mechanism was handed.
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
    make_tables,
    moved,
    outcome,
    refused_report,
    run_result,
)

from fuzzpy import limits
from fuzzpy.checking.program import check_source


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "
DEEP = "function deep (n : num) : num { if n <= 0 then 0 else 1 + deep (n - 1) }\n"
FIB = "function fib (n : num) : num { if n <= 1 then n else fib (n - 1) + fib (n - 2) }\n"
FIVES = "0,a,true,5\n" * 20  # twenty rows with n = 5 and x = 0

# ---- what a row function may capture, and its bounds ---------------------------------------------

REJECTED = {
    # first review round: row functions capturing private data
    "filter-predicate-captures-count": ("E0305", "function main (db : bag T) : fuzzy num { let c = count db; laplace 1 (count (filter (fun r -> r.x < c) db)) }"),
    "map-captures-count": ("E0305", "function main (db : bag T) : fuzzy num { let c = clip 0 1 (count db); laplace 1 (sum (map (fun r -> clip 0 1 (r.x * c)) db)) }"),
    "sort-key-captures-count": ("E0305", "function main (db : bag T) : fuzzy num { let c = count db; laplace 1 (count (head 3 (sort_by (fun r -> r.x - c) db))) }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_refused_with_the_exact_code(name):
    """First review round, handled: a row function reads what it captures once per row, so a
    captured count is infinitely used (E0305)."""
    assert_rejected(*REJECTED[name])


ACCEPTED = {
    # first review round
    "row-product-bounds": ("function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> r.x * r.x) db)) }", F(1), [100]),
    "large-int-scaling-inside-a-row": ("function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> r.n * 1000000) db)) }", F(1), [5000000]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """First review round, handled: a row's value is bounded by its columns' intervals."""
    assert_accepted_exactly(*ACCEPTED[name])


# ---- a run's outcome never depends on a row ------------------------------------------------------

def test_returned_closure_makes_run_failure_depend_on_data(tables):
    """First review round (open findings: run outcome that depends on private data): a returned
    closure applied inside a row function must not make the run fail on one table only."""
    r = check("function mk (u : num) : num -o num { fun (x : num) -> x }\n"
              "function main (db : bag T) : fuzzy num {\n"
              "  laplace 1 (count (filter (fun r -> if r.x > 5 then (mk 0) r.x > 0 else true) db)) }")
    if r.ok:
        assert outcome(r, tables(ROW_A))[0] == outcome(r, tables(ROW_A + ROW_B))[0]


def test_constant_list_case_with_tuple_pattern_fails_depending_on_data(tables):
    """First review round: a case on a constant list with a tuple pattern inside a row function
    once failed on the rows that reached it."""
    r = check('function main (db : bag T) : fuzzy num {\n'
              '  let sel = filter (fun r -> r.k == "b") db;\n'
              '  laplace 1 (count (filter (fun r -> case [(1, 2)] of { [] => true | (a, b) :: t => r.x > a }) sel)) }')
    assert r.ok
    assert outcome(r, tables(ROW_A))[0] == outcome(r, tables(ROW_A + ROW_B))[0] == "value"


def test_recursion_depth_in_a_row_function_makes_failure_depend_on_data(tables):
    """First review round: a recursion as deep as a row's value, inside a row function, fails on
    that row only: a missing value, not a failed run."""
    r = check("function down (x : num) : num { if x > 0 then down (x - 1) else 0 }\n"
              "function main (db : bag T) : fuzzy num {\n"
              "  laplace 1 (count (filter (fun r -> down (r.x * 100000) == 0) db)) }")
    assert r.ok
    assert outcome(r, tables("0,a,true,1\n"))[0] == outcome(r, tables("0,a,true,1\n" + ROW_B))[0]


def test_a_sort_key_that_fails_on_one_row_does_not_fail_the_run(tables):
    """Third review round (per-row failures as missing values), handled.  The key of ROW_B
    recurses 900,000 times (RecursionError on the per-row path): that row gets a missing key
    (sorted last), the run goes on, and the head-1 window moves by at most 2."""
    r = check("function down (x : num) : num { if x > 0 then down (x - 1) else 0 }\n"
              "function main (db : bag T) : fuzzy num {\n"
              "  laplace 1 (count (filter (fun r -> r.k == \"a\") (head 1 (sort_by (fun r -> down (r.x * 100000)) db)))) }")
    assert r.ok and [m.sensitivity for m in r.mechanisms] == [2]
    rows = "0,a,true,1\n"
    assert outcome(r, tables(rows))[0] == outcome(r, tables(rows + ROW_B))[0] == "value"
    assert moved(r, tables(rows), tables(rows + ROW_B)) == 0


def test_an_int_key_that_fails_on_one_row_puts_it_in_no_part(tables):
    """Third review round (per-row failures as missing values), handled: a groupby key that fails
    on a row puts that row in no part."""
    r = check("function down (x : num) : int[0, 2] { if x > 0 then down (x - 1) else 0 }\n"
              "function main (db : bag T) : fuzzy num {\n"
              "  let ps = groupby (fun r -> down (r.x * 100000)) db;\n"
              '  laplace 1 (count (part ps "0")) }')
    assert r.ok and [m.sensitivity for m in r.mechanisms] == [1]
    rows = "0,a,true,1\n" * 4
    assert moved(r, tables(rows), tables(rows + ROW_B)) == 0   # ROW_B lands in no part
    assert moved(r, tables(rows), tables(rows + "0,c,false,2\n")) == 1


ROW_FIB = FIB + MAIN + "{ laplace 1 (count (filter (fun r -> fib (r.x * 10) > 0) db)) }"


def test_a_row_function_that_may_not_finish_gives_the_same_outcome_on_neighbours(tables, monkeypatch):
    """Seventh review round (7a), finding 6 (medium): rule Row absorbed a row's *failure*, not a
    row that never finishes.

    checker.instantiate drops a row function's risk (`per_row`), because runtime/vectorize.
    _row_by_row turns a row whose evaluation raises into a missing value.  A row function that did
    not finish on some rows was not absorbed: `fib (r.x * 10)` is instant for x = 1 and never ends
    for x = 9 (fib 90).  Outside a row function the same recursion on private data is FAIL +
    presence (E0309).  (The vectorised path also evaluates both arms of an `if` on columns, so an
    arm that is never taken row by row -- e.g. `if r.x > 100 then fib (count db) > 0 else true` --
    runs anyway.)  Suggested fix: give row-by-row evaluation a step budget per row (as the oracle's
    deadline does per run) and make an exhausted row a missing value like a failed one.

    Fixed: each row has a budget of calls (limits.ROW_CALLS, lowered here so that the run fits
    the oracle's deadline); a row past it is a missing value, like a row that fails."""
    monkeypatch.setattr(limits, "ROW_CALLS", 5_000)
    r, pair = audit(ROW_FIB, tables, ROW_A, ROW_A + ROW_B, timeout=5.0)
    ok, violations = r.ok, [v.detail for v in pair.violations]
    assert ok and violations == [] and pair.a.status == pair.b.status == "ok"
    assert pair.a.calls[0].observed == pair.b.calls[0].observed == 1  # fib 90's row is missing


def test_a_row_function_that_fails_on_its_row_is_absorbed(tables):
    """Seventh review round (7a), finding 6: the half of rule Row that holds: a row that *fails*
    (deep recursion) is a missing value."""
    r, pair = audit(DEEP + MAIN + "{ laplace 1 (count (filter (fun r -> deep (r.x * 10) > 2) db)) }",
                    tables, ROW_A, ROW_A + ROW_B, depth=40)
    assert r.ok and pair.violations == [] and pair.a.status == pair.b.status == "ok"


@pytest.mark.parametrize("expr", [
    "count (head 2 (sort_by (fun r -> deep (r.x * 10)) db))",
    "count (let (a, b) = split (fun r -> deep (r.x * 10) > 2) db; a)",
    "count (filter (fun r -> deep (r.x * 10) + deep (count db) > 2) db) * 0 + count db",
])
def test_row_functions_that_fail_per_row_give_the_same_outcome(expr, tables):
    """Seventh review round (7a), handled: sort keys, split predicates and filters that fail on
    some rows."""
    src = DEEP + MAIN + "{ laplace 1 (" + expr + ") }"
    r, pair = audit(src, tables, ROW_A, ROW_A + ROW_B, depth=40)
    assert r.ok and pair.violations == [] and pair.a.status == pair.b.status == "ok"


def test_a_groupby_key_that_fails_per_row_gives_the_same_outcome(tables):
    """Seventh review round (7a), handled: a groupby key that fails on some rows."""
    src = (DEEP + MAIN + "{ sample v = each (fun g -> laplace 1 (count g)) "
           "(groupby (fun r -> if deep (r.x * 10) > 5 then r.k else r.k) db); return 0 }")
    r, pair = audit(src, tables, ROW_A, ROW_A + ROW_B, depth=40)
    assert r.ok and pair.violations == [] and pair.a.status == pair.b.status == "ok"


# ---- one numeric semantics for a row, whatever the bag's representation --------------------------

DOUBLING = "".join(f"let v{i + 1} = v{i} + v{i}; " for i in range(61))  # v61 = v0 * 2^61


def test_union_with_an_empty_bag_does_not_change_integer_arithmetic(tables):
    """Third review round, finding 3 (critical, runtime): a bag's representation depended on the
    data, and row functions computed different values on different representations.

    `_run_union` (bags.py) returned `a` unchanged when `b` was empty, and otherwise `pd.concat`ed,
    which promotes dtypes: an int64 column (loaded `int` columns, and + - of them on columns)
    stayed int64 next to an empty bag, became float64 next to a non-empty float bag, and object
    next to per-row results.  Vectorised int64 arithmetic wraps at 2^63 (5 * 2^61 < 0), float64
    does not.  A categorical column stayed categorical next to an empty bag (sort_by orders it by
    the declared categories) and became object strings next to a non-empty mapped bag
    (lexicographic order).  So whether one row exists decided, for *every other row*, what a filter
    keeps or which rows `head` takes: the counts below moved by 22 (all rows) and by 5 (the window)
    with S = 2 and 4, although the representation should change speed, never results.  Suggested
    fix: give row functions one numeric semantics (cast integer columns to float64 in
    vectorize.row_value/_column, as bag_rows does), make union never shortcut and build its result
    with dtypes fixed by the static element type (categoricals with the declared categories), and
    sort categorical and textual keys by one canonical order whatever their dtype."""
    r = check("function main (db : bag T) : fuzzy num {\n"
              "  let ns = map (fun r -> r.n) db;\n"
              '  let bs = map (fun r -> r.x) (filter (fun r -> r.k == "b") db);\n'
              f"  laplace 1 (count (filter (fun v0 -> {DOUBLING} v61 > 0) (union ns bs))) }}")
    assert r.ok and r.epsilon == 1 and [m.sensitivity for m in r.mechanisms] == [2]
    assert moved(r, tables(FIVES), tables(FIVES + ROW_B)) <= 2


def test_union_with_an_empty_bag_does_not_change_the_sort_order(tables):
    """Third review round, finding 3: the categorical half (sort order of a union's keys)."""
    u = 'schema U { k : cat{"z", "a"}, x : num[0, 10] }\n'
    r = check_source(u + "function main (db : bag U) : fuzzy num {\n"
                     "  let extra = map (fun r -> { k = (if r.x > 100 then r.k else r.k), x = r.x }) "
                     "(filter (fun r -> r.x > 8) db);\n"
                     "  let top = head 5 (sort_by (fun r -> r.k) (union db extra));\n"
                     '  laplace 1 (count (filter (fun r -> r.k == "z") top)) }', "u.fz")
    assert r.ok and r.epsilon == 1 and [m.sensitivity for m in r.mechanisms] == [4]
    rows = "a,1\n" * 10 + "z,1\n" * 10
    db = tables(rows, r, "U", "k,x\n")
    assert moved(r, db, tables(rows + "a,9\n", r, "U", "k,x\n")) <= 4


def test_integer_arithmetic_on_one_representation_is_a_function_of_the_row(tables):
    """Third review round, finding 3, the control: without a union the same doubling program is
    fair: every row is judged alone (int64 on columns, consistently), so one row moves the count
    by at most 1."""
    r = check(f"function main (db : bag T) : fuzzy num {{ laplace 1 (count (filter (fun r -> let v0 = r.n; "
              f"{DOUBLING} v61 > 0) db)) }}")
    assert r.ok and [m.sensitivity for m in r.mechanisms] == [1]
    assert moved(r, tables(FIVES), tables(FIVES + ROW_B)) <= 1


def test_a_huge_exact_row_value_does_not_make_sum_fail(tables):
    """Third review round, finding 6 (medium, runtime): an exact value inside a bag made `sum` fail
    when the bag is not empty.

    A row function that returns a captured parameter (`fun r -> c`) is not vectorisable (_series
    accepted no Fraction), so it ran row by row, and the rows held the exact Fraction c.  `sum`
    converted with `Series.to_numpy(float64)`: float(Fraction(10^600)) raises OverflowError, which
    `_numbers` (bags.py) did not catch (only TypeError/ValueError).  An empty bag never converts
    anything, so the run failed exactly when some row satisfies the filter.  (`groupby` on such an
    int key failed too, but on every table: `int_codes` could not convert its own lower bound.)
    Suggested fix: `_row_by_row` should return numbers as floats (as_float, saturating) like the
    column path; and `_numbers` / `int_codes` should saturate instead of raising."""
    r = check("function f c (b : bag T) { sum (map (fun r -> c) b) }\n"
              "function main (db : bag T) : fuzzy num {\n"
              '  laplace 1 (f (1e300 * 1e300) (filter (fun r -> r.k == "b") db)) }')
    assert r.ok and r.epsilon == 1
    assert outcome(r, tables(ROW_A))[0] == outcome(r, tables(ROW_A + ROW_B))[0]


ROW_FNS = [
    "sum (map (fun r -> clip 0 1 (r.x / r.x)) db)",
    "sum (map (fun r -> clip 0 1 (r.x / 0)) db)",
    "sum (map (fun r -> clip 0 1 (0 - r.x / 0)) db)",
    "sum (map (fun r -> clip 0 1 ((r.x / 0) * 0)) db)",
    "sum (map (fun r -> clip 0 1 (exp (r.x * 100) - exp (r.x * 100))) db)",
    "sum (map (fun r -> clip 0 1 (abs (r.x / r.x))) db)",
    "sum (map (fun r -> if r.x / r.x > 0 then 1 else 0) db)",
    "count (filter (fun r -> r.x / r.x == r.x / r.x) db)",
    "count (filter (fun r -> !(r.x / r.x < 1)) db)",
    "count (filter (fun r -> clip 0 1 (r.x / r.x) >= 0) db)",
]


@pytest.mark.parametrize("expr", ROW_FNS)
def test_row_functions_agree_on_columns_and_per_row_and_move_by_at_most_one(expr, tables):
    """Sixth review round (exact scalars vs float row functions), handled: float row functions
    agree between the column and the per-row paths on NaN and infinity, and on neighbouring
    tables."""
    r = check(MAIN + f"{{ laplace 1000000000 ({expr}) }}")
    assert r.ok and [m.sensitivity for m in r.mechanisms] == [1]
    rows = ["", "0,a,true,1\n", "0,a,true,1\n1,a,true,1\n", "1,a,true,1\n"]
    vals = []
    for rw in rows:
        db = tables(rw)
        col, per_row = run_result(r, db, 0, True).value, run_result(r, db, 0, False).value
        assert col == per_row
        vals.append(col)
    assert all(abs(x - y) <= 1 + 1e-6 for x, y in [(vals[0], vals[1]), (vals[1], vals[2]), (vals[3], vals[2])])


def test_integer_columns_beyond_2_53_compare_the_same_on_both_paths(tmp_path):
    """Sixth review round, handled: int columns beyond float precision compare the same on the
    column and the per-row paths."""
    load = make_tables(tmp_path)
    src = "schema B { a : int, b : int }\nfunction main (db : bag B) : fuzzy num " \
          "{ laplace 1000000 (count (filter (fun r -> r.a == r.b) db) + count (filter (fun r -> r.a - r.b > 0) db)) }"
    r = check_source(src, "t.fz")
    assert r.ok
    db = load("9007199254740993,9007199254740992\n", report=r, schema="B", header="a,b\n")
    assert run_result(r, db, 0, True).value == run_result(r, db, 0, False).value


# ---- a row function may not return a table ----------------------------------------------------------

BAG_OF_BAGS = MAIN + "{ let bb = map (fun r -> union db db) db; laplace 1 (count db) }"


@pytest.mark.parametrize("src", [
    BAG_OF_BAGS,
    MAIN + "{ let bb = map (fun r -> filter (fun s -> s.x > r.x) db) db; laplace 1 (count db) }",
    MAIN + "{ let bb = map (fun r -> (r.x, db)) db; laplace 1 (count db) }",
], ids=["union", "filter", "pair"])
def test_a_row_function_returning_a_table_is_refused(src):
    """Seventh review round (7a), finding 9 (low): a row function could return a table: a bag of
    bags holds one table per row, so memory grew with |db|^2 whatever the growth bound said.

    Nothing refused a row function whose result type contains a bag: `map (fun r -> union db db)
    db` keeps |db| tables of 2|db| rows alive (reported growth: 2), `map (fun r -> filter p db) db`
    |db| masks of |db| rows (growth 1).  (I3) bounds each table, but the number of tables was now
    the data size, not a constant of the program: 100,000 rows need 10^10 rows of memory, and the
    run failed on a large table only.  Suggested fix (made): refuse row functions whose result type
    contains a bag, a partition or a function of bags.  Fixed: a row function may not return a
    table, or anything holding one (E0308)."""
    refused_report(src, "E0308")
