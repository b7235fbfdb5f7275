"""The interpreter: every IR construct and bag primitive on small tables, vectorised and row by row.

Programs that `return` private values are not differentially private (the checker says E0302),
but their instance is a fine way to test the evaluator's exact semantics without noise; the
noisy programs run with seeded randomness.
"""

from __future__ import annotations

import math
import statistics
import sys
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import RunFailure, RunState, evaluate_entry, run_program
from fuzzpy.runtime.samplers import RandomSource
from fuzzpy.runtime.sums import bounded_sum as _bounded_sum
from fuzzpy.runtime.values import MaskedBag

SCHEMA = '''schema T { x : num[0, 10], y : int[0, 5], k : cat{"a", "b", "c"}, s : string, f : bool }
'''
ROWS = [  # x, y, k, s, f
    (1.5, 0, "a", "foo", True), (7.0, 3, "b", "bar", False), (10.0, 5, "a", "foo", False),
    (0.0, 1, "b", "baz", True), (4.25, 2, "a", "foo", True), (9.0, 4, "b", "qux", False),
]


def write_table(path: Path, rows) -> Path:
    lines = ["x,y,k,s,f"] + [f"{x},{y},{k},{s},{str(f).lower()}" for x, y, k, s, f in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def db(tmp_path) -> pd.DataFrame:
    return load(tmp_path, ROWS)


def load(tmp_path: Path, rows) -> pd.DataFrame:
    report = check_source(SCHEMA + "function main (db : bag T) : fuzzy num { return 0 }", "t.fz")
    return load_table(write_table(tmp_path / "t.csv", rows), report.schemas["T"], table="db")


def instance(body: str, *, extra: str = "", ret: str = "fuzzy num", params=None):
    report = check_source(SCHEMA + extra + f"\nfunction main (db : bag T) : {ret} {{ {body} }}", "t.fz",
                          params=params)
    errors = [d for d in report.diagnostics if d.severity == "error" and d.code not in ("E0302", "E0309")]
    assert not errors, [f"{d.code} {d.message}" for d in errors]
    return report.entry_instance


def run(body: str, db, *, seed: int = 0, vectorise: bool = True, **kw):
    return run_program(instance(body, **kw), {"db": db}, RandomSource.seeded(seed), vectorise=vectorise)


def both(body: str, db, **kw):
    """The value computed column-at-a-time and row by row (they must agree)."""
    fast = run(body, db, **kw)
    slow = run(body, db, vectorise=False, **kw)
    assert _same(fast.value, slow.value), (fast.value, slow.value)
    return fast.value


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


XS = [r[0] for r in ROWS]


# ---- constants, arithmetic, let, if, tuples, records, sums, lists ---------------------------------

def test_constants_are_floats(db):
    assert both("return (1 / 4, true, \"s\", ())", db, ret="fuzzy (num, bool, string, unit)") == (0.25, True, "s", None)


def test_let_tuple_patterns_and_projection(db):
    v = both("let (a, b) = (count db, 2); let (|c, d|) = (|a + b, a * b|); return (c, d, (c, d).2)", db,
             ret="fuzzy (num, num, num)")
    assert v == (8.0, 12.0, 12.0)


def test_if_on_a_public_value_and_records(db):
    v = both("let r = {a = count db, b = \"z\"}; return (if r.a > 3 then r.b else \"small\")", db,
             ret="fuzzy string")
    assert v == "z"


def test_sum_case_and_list_case(db):
    src = ("let v = (if count db > 3 then inl (count db) else inr \"few\" : num + string);"
           "let w = case v of { inl n => n * 2 | inr s => 0 };"
           "let xs = [1, 2, 3];"
           "let h = case xs of { [] => 0 | a :: rest => a + len rest };"
           "return (w, h, 7 :: xs)")
    v = both(src, db, ret="fuzzy (num, num, list num)",
             extra="function len (l : list num) : num { case l of { [] => 0 | h :: t => 1 + len t } }")
    assert v == (12.0, 3.0, (7.0, 1.0, 2.0, 3.0))


def test_recursion_over_a_public_list(db):
    extra = """function counts (b : bag T) (bs : list num) : list num {
      case bs of { [] => [] | h :: t => count (filter (fun r -> r.x < h) b) :: counts b t } }"""
    v = both("return (counts db [1, 5, 9.5, 11])", db, extra=extra, ret="fuzzy (list num)")
    assert v == tuple(float(sum(x < h for x in XS)) for h in (1, 5, 9.5, 11))


def test_deep_recursion_runs_on_a_large_stack(db):
    extra = "function down (n : num) : num { if n <= 0 then 0 else 1 + down (n - 1) }"
    # count db is not a check-time constant, so the checker does not unroll the recursion.
    assert both("return (down (count db * 3000))", db, extra=extra) == 18000.0


def test_params_and_closures(db):
    extra = """param t : num = 5;
    function add (a : num) (b : num) : num { a + b }
    function twice (g) (v : num) : num { g (g v) }"""
    body = ("let c = 2; let inc = add c;"
            "return (count (filter (fun r -> r.x > t) db), sum (map (fun r -> clip 0 20 (inc r.x)) db),"
            " sum (map (fun r -> clip 0 20 (twice (fun z -> z + c) r.x)) db))")
    v = both(body, db, extra=extra, ret="fuzzy (num, num, num)")
    assert v == (3.0, sum(XS) + 12, sum(XS) + 24)
    v2 = both(body, db, extra=extra, ret="fuzzy (num, num, num)", params={"t": "8"})
    assert v2[0] == 2.0


def test_function_typed_parameter(db):
    extra = "function app (g : num -o num) (v : num) : num { g v }"
    assert both("return (sum (map (fun r -> clip 0 20 (app (fun z -> z + 2) r.x)) db))", db,
                extra=extra) == sum(XS) + 12


# ---- bag primitives ---------------------------------------------------------------------------------

def test_count_filter_map_sum(db):
    v = both("let big = filter (fun r -> r.x > 5 && !r.f) db;"
             "return (count db, count big, sum (map (fun r -> r.x) big), sum (map (fun r -> clip 0 3 r.x) db))", db,
             ret="fuzzy (num, num, num, num)")
    assert v == (6.0, 3.0, 26.0, sum(min(x, 3) for x in XS))


def test_strings_categories_and_booleans(db):
    v = both("return (count (filter (fun r -> r.s == \"foo\") db), count (filter (fun r -> r.k != \"a\") db),"
             " count (filter (fun r -> r.f || r.y >= 4) db))", db, ret="fuzzy (num, num, num)")
    assert v == (3.0, 3.0, 5.0)


def test_let_if_records_and_tuples_inside_row_functions(db):
    body = ("let m = map (fun r -> let z = r.x * 2; {a = if z > 10 then z else 0 - z, b = r.k, c = (r.y, 1)}) db;"
            "let firsts = map (fun q -> q.c.1) m;"
            "let pairs = map (fun r -> (r.x, r.y)) db;"
            "return (sum (map (fun q -> clip (0 - 20) 20 q.a) m), sum (map (fun p -> clip 0 5 p) firsts),"
            " sum (map (fun p -> let (u, w) = p; clip 0 20 (u + w)) pairs))")
    v = both(body, db, ret="fuzzy (num, num, num)")
    assert v == (sum(2 * x if 2 * x > 10 else -2 * x for x in XS), 15.0, sum(XS) + 15)


def test_union_and_split(db):
    body = ("let (lo, hi) = split (fun r -> r.x < 5) db;"
            "let both = union lo (filter (fun r -> r.y > 3) hi);"
            "return (count lo, count hi, count both, sum (map (fun r -> r.x) both))")
    v = both(body, db, ret="fuzzy (num, num, num, num)")
    assert v == (3.0, 3.0, 5.0, 1.5 + 0 + 4.25 + 10 + 9)


def test_groupby_parts_in_declared_order_with_empty_keys(db):
    body = "return (pmap (fun g -> count g) (groupby (fun r -> r.k) db))"
    v = both(body, db, ret='fuzzy (parts {"a", "b", "c"} num)')
    assert list(v) == ["a", "b", "c"] and v == {"a": 3.0, "b": 3.0, "c": 0.0}
    w = both("let g = groupby (fun r -> r.k) (filter (fun r -> r.x > 2) db);"
             "return (count g.a, sum (map (fun r -> r.x) g.b), count (union g.a g.c))", db,
             ret="fuzzy (num, num, num)")
    assert w == (2.0, 16.0, 2.0)


def test_groupby_key_computed_by_the_row_function(db):
    # numpy.where turns the categorical into plain strings: the codes come from the declared keys.
    body = "return (pmap (fun g -> count g) (groupby (fun r -> if r.x > 5 then r.k else r.k) db))"
    r = run(body, db, ret='fuzzy (parts {"a", "b", "c"} num)')
    assert r.fallbacks == 0 and r.value == {"a": 3.0, "b": 3.0, "c": 0.0}
    assert both(body, db, ret='fuzzy (parts {"a", "b", "c"} num)') == r.value


def test_groupby_over_a_bounded_int_key(db):
    body = "return (pmap (fun g -> count g) (groupby (fun r -> clip 1 3 r.y) db))"
    v = both(body, db, ret='fuzzy (parts {"1", "2", "3"} num)')
    assert v == {"1": 2.0, "2": 1.0, "3": 3.0}  # y = 0, 3, 5, 1, 2, 4 clipped into 1..3
    w = both("return (values (pmap (fun g -> count g) (groupby (fun r -> r.y) (filter (fun r -> r.f) db))))", db,
             ret="fuzzy (list num)")
    assert w == (1.0, 1.0, 1.0, 0.0, 0.0, 0.0)


def test_crosstab_of_a_category_and_a_bounded_int(db):
    keys = ", ".join(f'"{k}, {y}"' for k in "abc" for y in (0, 1))
    body = "return (pmap (fun g -> count g) (groupby (fun r -> (r.k, clip 0 1 r.y)) db))"
    v = both(body, db, ret="fuzzy (parts {" + keys + "} num)")
    # rows (k, min(y, 1)): (a,0) (b,1) (a,1) (b,1) (a,1) (b,1)
    assert v == {"a, 0": 1.0, "a, 1": 2.0, "b, 0": 0.0, "b, 1": 3.0, "c, 0": 0.0, "c, 1": 0.0}


def test_each_releases_every_part_in_key_order(db):
    r = run("each (fun g -> laplace 1000000 (count g)) (groupby (fun r -> r.k) db)", db,
            ret='fuzzy (parts {"a", "b", "c"} num)')
    assert list(r.value) == ["a", "b", "c"]
    assert [round(x) for x in r.value.values()] == [3, 3, 0]
    assert [rel.keys for rel in r.releases] == [("a",), ("b",), ("c",)]
    assert all(rel.epsilon == F(1000000) and rel.mechanism == "laplace" for rel in r.releases)


def test_samples_are_named_recorded_in_order_and_fresh_each_time(db):
    r = run("let d = laplace 1 (count db); sample a = d; sample b = d; sample c = laplace 2 (count db);"
            "return (a, b, c)", db, ret="fuzzy (num, num, num)")
    assert [rel.name for rel in r.releases] == ["a", "b", "c"]
    assert [rel.epsilon for rel in r.releases] == [1, 1, 2]
    assert [rel.scale for rel in r.releases] == [1, 1, F(1, 2)]
    assert r.value == tuple(rel.value for rel in r.releases)
    assert r.value[0] != r.value[1]  # a distribution sampled twice draws twice
    assert r.releases[0].span == r.releases[1].span != r.releases[2].span  # the mechanism call, not the sample


def test_seeded_runs_are_reproducible(db):
    body = "sample a = laplace 1 (count db); return a"
    assert run(body, db, seed=7).value == run(body, db, seed=7).value
    assert run(body, db, seed=7).value != run(body, db, seed=8).value


def test_noise_has_the_calibrated_scale(tmp_path):
    """Many seeded runs of a count: mean ~ the count, std ~ sqrt(2) * scale (scale = 1/eps)."""
    tiny = load(tmp_path, ROWS[:3])
    inst = instance("laplace 0.5 (count db)")
    draws = [evaluate_entry(inst, {"db": tiny}, RunState(RandomSource.seeded(s))).value for s in range(4000)]
    scale = 2.0
    assert abs(statistics.fmean(draws) - 3) < 0.15  # standard error sqrt(2)*2/sqrt(4000) = 0.045
    assert abs(statistics.stdev(draws) / (math.sqrt(2) * scale) - 1) < 0.06
    within = sum(abs(d - 3) <= scale * math.log(20) for d in draws) / len(draws)
    assert 0.93 < within < 0.97  # the stated 95% accuracy


# ---- totality: data never makes a run raise ---------------------------------------------------------

def test_nan_and_infinities_do_not_raise(db):
    body = ("let q = map (fun r -> r.x / (r.x - r.x)) db;"
            "return (sum (map (fun v -> clip 0 1 v) q), count (filter (fun v -> v > 0) q),"
            " count (filter (fun v -> v == v) q))")
    assert both(body, db, ret="fuzzy (num, num, num)") == (5.0, 5.0, 5.0)


def test_empty_tables(tmp_path):
    empty = load(tmp_path, [])
    body = ("let g = groupby (fun r -> r.k) (filter (fun r -> r.x > 2) db);"
            "return (count db, sum (map (fun r -> r.x) db), pmap (fun p -> count p) g,"
            " sum (map (fun v -> clip 0 1 v) (map (fun r -> case (inl r.x : num + num) of "
            "{ inl a => a | inr b => b }) db)))")
    v = both(body, empty, ret='fuzzy (num, num, parts {"a", "b", "c"} num, num)')
    assert v == (0.0, 0.0, {"a": 0.0, "b": 0.0, "c": 0.0}, 0.0)


def test_a_primitive_without_runtime_is_a_clean_failure(db, monkeypatch):
    from fuzzpy.primitives.registry import REGISTRY

    monkeypatch.setattr(REGISTRY["count"], "run", None)
    with pytest.raises(RunFailure) as err:
        run("return (count db)", db)
    assert err.value.diagnostics[0].code == "E0604" and "count" in err.value.diagnostics[0].message


# ---- the per-row fallback ---------------------------------------------------------------------------

def test_case_on_the_row_falls_back_with_the_same_result(db):
    body = ("return (sum (map (fun r -> clip 0 100 (case (if r.x > 5 then inl r.x else inr r.y : num + num) of "
            "{ inl a => a | inr b => b * 10 })) db))")
    r = run(body, db)
    assert r.fallbacks >= 1
    assert r.value == sum(x if x > 5 else y * 10 for x, y, *_ in ROWS)
    assert run(body, db, vectorise=False).value == r.value


def test_recursive_function_of_the_row_falls_back(db):
    extra = "function tri (n : num) : num { if n <= 0 then 0 else n + tri (n - 1) }"
    r = run("return (sum (map (fun r -> clip 0 100 (tri r.y)) db))", db, extra=extra)
    assert r.fallbacks >= 1
    assert r.value == sum(y * (y + 1) / 2 for _, y, *_ in ROWS)


def test_non_recursive_function_of_the_row_stays_vectorised(db):
    extra = "function dbl (n : num) : num { if n > 3 then n * 2 else n }"
    r = run("return (sum (map (fun r -> clip 0 100 (dbl r.x)) db))", db, extra=extra)
    assert r.fallbacks == 0
    assert r.value == sum(2 * x if x > 3 else x for x in XS)


# ---- the exact bounded sum ---------------------------------------------------------------------------

def test_bounded_sum_clamps_and_is_exact():
    x = np.array([1.0, -5.0, 200.0, np.nan, np.inf, -np.inf, 0.1])
    got = _bounded_sum(x, F(100))
    grid = 2.0 ** -17  # 100 < 2**7; 7 - 24
    assert got == 1 - 5 + 100 + 0 + 100 - 100 + math.trunc(0.1 / grid) * grid
    assert _bounded_sum(np.array([]), F(3)) == 0.0
    # beyond the float range the total stays exact (a Fraction): no rounding, no error
    share = (F(1e308) // 2 ** 1000) * 2 ** 1000  # each value truncated onto the grid 2**1000
    assert _bounded_sum(np.array([1e308, 1e308]), F(10) ** 400) == 2 * share > sys.float_info.max
    assert _bounded_sum(np.array([-1e308, -1e308]), F(10) ** 309) == -2 * share


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=200), st.floats(-1e9, 1e9),
       st.sampled_from([F(1), F(90), F(1, 3), F(10) ** 6]), st.randoms(use_true_random=False))
def test_bounded_sum_has_sensitivity_at_most_the_bound(xs, extra, bound, rnd):
    """Adding one row moves the sum by at most the bound, whatever the order of the rows."""
    a = _bounded_sum(np.array(xs), bound)
    shuffled = xs + [extra]
    rnd.shuffle(shuffled)
    b = _bounded_sum(np.array(shuffled), bound)
    assert F(abs(b - a)) <= bound
    rnd.shuffle(xs)
    assert _bounded_sum(np.array(xs), bound) == a  # exact: the order of rows does not matter


# ---- vectorised and row-by-row agree on random tables ---------------------------------------------

PROGRAMS = [
    "return (count (filter (fun r -> r.x > 3 || r.k == \"b\") db))",
    "return (sum (map (fun r -> if r.f then clip 0 10 (r.x * 0.5) else r.x) db))",
    "return (pmap (fun g -> sum (map (fun r -> r.x) g)) (groupby (fun r -> r.k) db))",
    "let (a, b) = split (fun r -> r.s == \"foo\") db; return (count a, sum (map (fun r -> clip 0 5 r.y) b))",
    "return (sum (map (fun r -> clip 0 9 (r.x / r.y)) (filter (fun r -> !r.f) db)))",
]
RETS = ["fuzzy num", "fuzzy num", 'fuzzy (parts {"a", "b", "c"} num)', "fuzzy (num, num)", "fuzzy num"]

row = st.tuples(st.sampled_from([0.0, 0.5, 3.0, 7.25, 10.0]), st.integers(0, 5), st.sampled_from("abc"),
                st.sampled_from(["foo", "bar"]), st.booleans())


@settings(max_examples=25, deadline=None)
@given(st.lists(row, max_size=12), st.integers(0, len(PROGRAMS) - 1))
def test_vectorised_equals_row_by_row(tmp_path_factory, rows, which):
    table = load(tmp_path_factory.mktemp("t"), rows)
    both(PROGRAMS[which], table, ret=RETS[which])


def test_lazy_bags_read_only_the_columns_they_use(db):
    from fuzzpy.runtime.values import Closure
    from fuzzpy.runtime.vectorize import row_function

    filtered = MaskedBag(db, db["x"].to_numpy() > 1)
    inst = instance("return (map (fun r -> r.y + 1) db)", ret="fuzzy (bag int)")
    fn = inst.body.value.args[0]  # the ILambda given to map
    out = row_function(RunState(RandomSource.seeded(0)), Closure({}, fn.params, fn.body))(filtered)
    assert list(out) == [1.0, 4.0, 6.0, 3.0, 5.0]
    assert list(filtered._columns) == ["y"]


def test_a_finished_run_holds_nothing_the_caller_dropped(db):
    """After run_program returns, nothing of the run is kept: the idle worker holds neither the
    tables nor the run, and the run leaves no reference cycle (a handle and its never-started
    thread were one), so the table and the result are freed when the caller drops them, with
    the garbage collector off."""
    import gc
    import weakref

    from fuzzpy.runtime.interpreter import start_run

    noisy = instance("let g = groupby (fun r -> r.k) db; sample n = laplace 1 (count db); return n")
    run_program(noisy, {"db": db}, RandomSource.seeded(0))  # the program's one-time caches made
    gc.collect()
    gc.disable()
    try:
        table = db.copy()
        result = run_program(noisy, {"db": table}, RandomSource.seeded(1))
        table_ref, record_ref = weakref.ref(table), weakref.ref(result.releases[0])
        del table, result
        assert table_ref() is None and record_ref() is None
        handle = start_run(noisy, {"db": db}, RandomSource.seeded(2))  # its own thread, as before
        assert handle.wait(60) and handle.result().releases
    finally:
        gc.enable()


def test_run_program_reuses_its_worker_thread_and_runs_concurrent_callers_apart(db, monkeypatch):
    """run_program runs on a reused large-stack worker: a deep recursion works on the reused
    thread, a failing run leaves the worker usable, and callers on several threads at once each
    get their own run (a busy worker is never shared), with the values of sequential runs."""
    import threading

    from fuzzpy.runtime import interpreter as IM

    extra = "function down (n : num) : num { if n <= 0 then 0 else 1 + down (n - 1) }"
    deep = instance("return (down (count db * 500))", extra=extra)  # beyond Python's default limit
    for _ in range(2):  # the second run is on the reused worker
        assert run_program(deep, {"db": db}, RandomSource.seeded(0)).value == 3000
    assert IM._Worker._idle  # a worker waits for the next run
    from fuzzpy import limits

    monkeypatch.setattr(limits, "CALL_DEPTH", 1000)
    with pytest.raises(RunFailure):  # deeper than the limit: the run fails, the worker survives
        run_program(deep, {"db": db}, RandomSource.seeded(0))
    monkeypatch.undo()
    noisy = instance("laplace 1 (count db)")
    expected = [run_program(noisy, {"db": db}, RandomSource.seeded(s)).value for s in range(6)]
    got = [None] * 6
    def go(s):
        got[s] = run_program(noisy, {"db": db}, RandomSource.seeded(s)).value
    threads = [threading.Thread(target=go, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected and len(set(expected)) == 6
    assert len(IM._Worker._idle) <= IM._Worker._KEEP


def _generic_fold(fold, args):
    """fold_exact's general path, written out: every argument made exact, then the fold."""
    from fuzzpy.runtime.numbers import exact_arg

    return fold(*[exact_arg(a) for a in args])


_WHOLE_OR_NOT = st.one_of(
    st.integers(-10**30, 10**30),
    st.integers(-10**30, 10**30).map(F),
    st.fractions(max_denominator=10**6),
    st.sampled_from([0, F(0), 1, F(-1), 2**64, F(-(2**80)), F(7, 1), F(1, 3), 2**53 + 1, F(2**53 + 1)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, 2.0**53, 2.0**1000, float("inf"), float("-inf"), float("nan")]),
)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["add", "sub", "mul", "div", "max", "min", "lt", "le", "gt", "ge", "eq", "ne"]),
       _WHOLE_OR_NOT, _WHOLE_OR_NOT)
def test_fold_on_two_exact_numbers_is_the_general_fold(name, a, b):
    """fold_exact's path for two exact numbers (integers taken directly for whole ones) gives the
    value and the type the general path gives, for every binary scalar primitive of the
    registry's arithmetic, min/max and comparisons."""
    from fuzzpy.primitives.registry import lookup
    from fuzzpy.runtime.numbers import fold_exact

    fold = lookup(name).fold
    got, want = fold_exact(fold, [a, b]), _generic_fold(fold, [a, b])
    assert _same(got, want)
    assert _same(fold_exact(fold, (a, b)), want)  # compiled code passes a tuple


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(-10**40, 10**40), st.sampled_from([0, 1, -1, 2**63, -(2**63) - 1, 2**53 + 1])))
def test_whole_fraction_is_the_constructors_fraction(n):
    """whole_fraction(n), built without the constructor's argument handling, is Fraction(n) in
    every way a run can see: value, type, parts, hash, text, arithmetic, comparison, pickling."""
    import pickle
    import platform

    from fuzzpy.runtime.numbers import _whole_by_slots, whole_fraction

    if platform.python_implementation() == "CPython":  # 3.10 to 3.13: the direct build is in use
        assert whole_fraction is _whole_by_slots
    got, want = whole_fraction(n), F(n)
    assert type(got) is F and got == want and hash(got) == hash(want)
    assert (got.numerator, got.denominator) == (n, 1) and type(got.numerator) is int
    assert (str(got), repr(got)) == (str(want), repr(want))
    assert got + F(1, 3) == want + F(1, 3) and got / 7 == want / 7 and (got < F(1, 2)) == (n < 1)
    assert pickle.loads(pickle.dumps(got)) == want and float(got) == float(want)


@pytest.mark.parametrize("ints", [[], [0, 1, 4095], [3, 4096], [-1, 2], [2**62, 5]])
def test_whole_fractions_are_the_fractions_of_the_ints(ints):
    """whole_fractions: small counts from one shared table, anything else made; either way the
    Fractions equal to the ints, in lowest terms (denominator 1), hashing as Fraction(v)."""
    from fuzzpy.runtime.numbers import whole_fractions

    got = whole_fractions(np.array(ints, dtype=np.int64))
    assert [type(g) for g in got] == [F] * len(ints) and got == [F(v) for v in ints]
    assert all(g.denominator == 1 and hash(g) == hash(F(v)) for g, v in zip(got, ints))
    assert whole_fractions(np.array([7]))[0] is whole_fractions(np.array([7, 8]))[0]  # the table's
    assert whole_fractions(np.arange(4096)) == [F(i) for i in range(4096)]  # the whole table


def _same(x, y) -> bool:
    """The same value and type (NaN is the same as NaN)."""
    if type(x) is not type(y):
        return False
    return (x != x and y != y) or x == y


def test_fold_keeps_booleans_strings_and_floats_on_the_general_path():
    from fuzzpy.primitives.registry import lookup
    from fuzzpy.runtime.numbers import fold_exact

    for name, a, b in [("eq", True, 1), ("eq", "a", "a"), ("add", 0.5, 1), ("max", F(1), 2.5),
                       ("lt", True, F(2)), ("add", float("inf"), 3)]:
        fold = lookup(name).fold
        got, want = fold_exact(fold, [a, b]), _generic_fold(fold, [a, b])
        assert got == want and type(got) is type(want)


def test_bag_only_primitives_are_the_lazy_ones_without_context_fold_or_vectors():
    """call_prim runs these on their arguments as they are (no as_float): they must be the
    primitives whose reference takes lazy bags, no context, and that have no fold and no vectors,
    and their declared arguments bags, partitions and strings (never numbers, which as_float
    converts)."""
    import re

    from fuzzpy.primitives.registry import all_primitives, lookup

    lazy = {n for n, p in all_primitives().items() if p.lazy_bags}
    assert lazy == {"count", "filter", "map", "sum", "union", "split", "groupby", "part", "values", "pmap", "each",
                    "vsum", "bound_rows", "bound_groups", "bound_groups_in", "groupby_in", "select_keys",
                    "select_keys_optimal", "truncate", "join_public", "join_private", "values_of", "subsample"}
    BAG_ONLY = {n for n, p in all_primitives().items() if p.bag_only}
    derived = {name for name in lazy
               if not lookup(name).needs_context and lookup(name).fold is None and not lookup(name).structured}
    assert BAG_ONLY == derived == {"count", "part", "values", "union"}

    for name in BAG_ONLY:
        prim = lookup(name)
        argument_types = re.split(r"-o|->", prim.signature)[:len(prim.params)]
        assert not any("num" in t or "int" in t for t in argument_types), prim.signature
