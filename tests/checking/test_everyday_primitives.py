"""range, sort, reverse, take, sort_by on lists, floor and bin (docs/soundness.md, rules Lists and
Bin): exact bounds and types next to programs that must be refused (code and message checked),
and runs on neighbouring tables through the soundness oracle."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import ROW_A, ROW_B, check, make_tables, refused, run

from fuzzpy import limits
from fuzzpy.audit.oracle import audit_pair

MAIN = "function main (db : bag T) : fuzzy "


def ok(src: str):
    r = check(src)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    return r


def const_list(expr: str, elem: str = "num"):
    """The list `expr` evaluates to, read back from a run of `return expr` (no data needed)."""
    r = ok(MAIN + f"(list {elem}) {{ return ({expr}) }}")
    return r


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


# ---- range -----------------------------------------------------------------------------------

def test_range_is_a_constant_list_with_exact_bounds(tables):
    r = ok(MAIN + "num { exponential 1 (range 0 10 (1 / 2)) (fun c -> 0 - abs (count db - c)) }")
    assert r.epsilon == 1
    (m,) = r.mechanisms
    assert (m.sensitivity, m.epsilon) == (1, 1)
    r = ok(MAIN + "(list num) { return (range 1 2 (1 / 3)) }")
    assert run(r, tables(ROW_A)) == (1, F(4, 3), F(5, 3), 2)   # exact, hi included
    r = ok(MAIN + "(list int) { return (range 3 1 1) }")
    assert run(r, tables(ROW_A)) == ()                          # empty when hi < lo


def test_range_element_type_is_bounded_by_the_grid():
    r = ok("function f (u : num) { range 17 90 5 }\n" + MAIN + "num { return 0 }")
    (f,) = [f for f in r.functions if f.name == "f"]
    assert "list (int[17, 87])" in f.type


def test_range_of_released_bounds_is_public(tables):
    # Released values are public: the list is computed at run time, costs nothing more.
    src = MAIN + """num {
  sample hi = laplace 1 (count db);
  exponential 1 (range 0 (clip 0 20 hi) 1) (fun c -> 0 - abs (count db - c))
}"""
    r = ok(src)
    assert r.epsilon == 2
    v = run(r, tables(ROW_A * 5))
    assert 0 <= v <= 20


def test_range_with_a_private_bound_is_refused():
    notes = refused(MAIN + "num { exponential 1 (range 0 (count db) 1) (fun c -> c) }", "E1501",
                    "the upper bound of range depends on private data")
    assert any("released by a mechanism" in n for n in notes)
    refused(MAIN + "num { let s = sum (map (fun r -> r.x) db); return (list_len (range s 10 1)) }\n"
            "function list_len (xs : list num) : num { 0 }", "E1501", "the lower bound of range")
    refused(MAIN + "num { laplace 1 (count (filter (fun r -> 0 < list_len (range 0 r.x 1)) db)) }\n"
            "function list_len (xs : list num) : num { 0 }", "E1501", "depends on private data")
    refused(MAIN + "num { exponential 1 (range 0 10 (count db)) (fun c -> c) }", "E1501", "the step of range")


def test_range_limits_and_domain():
    refused(MAIN + "num { exponential 1 (range 0 10 0) (fun c -> c) }", "E0213", "step of range must be positive")
    refused(MAIN + "num { exponential 1 (range 0 10 (0 - 1)) (fun c -> c) }", "E0213", "must be positive")
    refused(MAIN + f"num {{ exponential 1 (range 1 {limits.MAX_LIST + 1} 1) (fun c -> c) }}", "E1502",
            f"more than {limits.MAX_LIST} elements")
    ok(MAIN + f"num {{ exponential 1 (range 1 {limits.MAX_LIST} 1) (fun c -> c) }}")
    refused(MAIN + 'num { exponential 1 (range 0 "a" 1) (fun c -> c) }', "E0202", "must be a number")


def test_range_of_a_released_step_that_fails_fails_on_public_values_only(tables):
    # The step is released (public); a step <= 0 fails the run, which depends on no private data
    # (FAIL alone is allowed, rule Entry).  The failure is a coded error, E0604.
    from fuzzpy.diagnostics import FuzzError

    r = ok(MAIN + "num { sample s = laplace 1 (count db); return (len (range 0 10 (s - s))) }\n"
           "function len (xs : list num) : num { case xs of { [] => 0 | h :: t => 1 + len t } }")
    with pytest.raises(FuzzError) as e:
        run(r, tables(ROW_A))
    (d,) = e.value.diagnostics
    assert d.code == "E0604" and "range: the step is not positive" in d.message


def test_range_is_the_grid_a_quantile_needs():
    src = 'import "stdlib/stats.fz"\n' + MAIN + "num { quantile 1 (1 / 2) (range 0 10 1) (map (fun r -> r.x) db) }"
    r = ok(src)
    assert r.epsilon == 1


# ---- sort, reverse, take, sort_by on lists ------------------------------------------------------

def test_sort_take_reverse_on_constants_fold():
    r = ok(MAIN + "(list num) { return (take 2 (reverse (sort [3, 1, 2]))) }")
    assert r.epsilon == 0
    r2 = ok('function f (u : num) { sort ["b", "c", "a"] }\n' + MAIN + "num { return 0 }")
    assert r2.ok


def test_top_k_of_a_released_histogram(tables):
    src = MAIN + """(list (string, num)) {
  let g = groupby (fun r -> r.k) db;
  sample h = each (fun p -> laplace 1 (count p)) g;
  return (take 2 (sort_by (fun p -> 0 - p.2) (pairs (keys g) (values h))))
}
function pairs (ks : list string) (vs : list num) : list (string, num) {
  case ks of { [] => [] | k :: kt => case vs of { [] => [] | v :: vt => (k, v) :: pairs kt vt } }
}"""
    r = ok(src)
    assert r.epsilon == 1     # the sort and the cut are post-processing
    out = run(r, tables(ROW_A * 30 + ROW_B * 3), seed=3)
    assert [k for k, _ in out][0] == "a" and len(out) == 2 and out[0][1] >= out[1][1]


def test_sorting_private_values_is_refused():
    refused(MAIN + "(list num) { return (sort [count db, 1]) }", "E1501", "the list given to sort depends on private data")
    notes = refused(MAIN + "num { return (sort db) }", "E0202", "sort expects a list")
    assert any("sort_by" in n and "release" in n for n in notes)
    refused(MAIN + "(list num) { return (sort_by (fun x -> x) [count db, 1]) }", "E1501", "sort_by depends on private")
    refused(MAIN + "(list num) { return (sort_by (fun x -> x * count db) [2, 1]) }", "E1501",
            "key function of sort_by reads private data")
    refused(MAIN + "(list (num, num)) { return (sort [(1, 2)]) }", "E0202", "orders numbers, strings or categories")


def test_sort_categories_in_declared_order(tables):
    r = ok(MAIN + "(list string) { sample c = laplace 1 (count db); "
           "return (sort_by (fun r -> r) (keys (groupby (fun r -> r.k) db))) }")
    assert run(r, tables(ROW_A)) == ("a", "b", "c")


def test_take_and_reverse_are_one_sensitive_on_private_lists():
    r = ok(MAIN + "(num, num) { laplace 1 (first2 (take 2 (reverse [count db, count db, 5]))) }\n"
           "function first2 (xs : list num) : (num, num) { case xs of { [] => (0, 0) | a :: t => "
           "case t of { [] => (a, 0) | b :: u => (a, b) } } }")
    (m,) = r.mechanisms
    assert m.sensitivity == 2    # the list moves by 2 (two counts); take and reverse pass that on
    refused(MAIN + "(list num) { sample n = laplace 1 (count db); return (take n [1, 2]) }", "E0209",
            "take keeps must be a public constant")
    refused(MAIN + "(list num) { return (take (1 / 2) [1, 2]) }", "E0213", "whole number")


# ---- floor and bin -----------------------------------------------------------------------------

def test_bin_types_an_age_band_key():
    src = ('schema A { age : num[17, 90] }\n'
           'function band (r : A) { bin 10 r.age }\n'
           'function main (db : bag A) : fuzzy (parts {"1", "2", "3", "4", "5", "6", "7", "8", "9"} num) '
           '{ each (fun g -> laplace 1 (count g)) (groupby (fun r -> bin 10 r.age) db) }')
    from fuzzpy.checking.program import check_source
    r = check_source(src, "a.fz")
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    (band,) = [f for f in r.functions if f.name == "band"]
    assert "int[1, 9]" in band.type
    assert r.epsilon == 1   # disjoint bands: parallel composition


def test_floor_and_bin_bounds_exact():
    r = ok("function f (r : T) { (floor r.x, bin (1 / 3) r.x, bin 4 (r.x - 5), floor (r.x / 3)) }\n"
           + MAIN + "num { return 0 }")
    (f,) = [f for f in r.functions if f.name == "f"]
    assert "(int[0, 10], int[0, 30], int[-2, 1], int[0, 3])" in f.type


def test_bin_runs_exactly_and_clamps_to_its_bounds(tables):
    # 0.3 / 0.1 is 2.9999999999999996 in floats: the row function's float result is clamped into
    # the proven bounds, and exact values (outside rows) bin exactly.
    r = ok(MAIN + "(num, num, num) { sample n = laplace 1 (count db); "
           "return (bin (1 / 10) (3 / 10), floor (0 - 1 / 2), bin 3 9) }")
    assert run(r, tables(ROW_A)) == (3, -1, 3)
    r = ok(MAIN + "(list num) { sample h = each (fun g -> laplace 1 (count g)) "
           "(groupby (fun r -> bin (1 / 10) (r.x * 3 / 10)) db); return (values h) }")
    out = run(r, tables(ROW_A * 40 + "10,a,true,1\n" * 40), seed=1)  # 0.3 and 3 (0.3 / 0.1 is 2.999... in floats)
    assert len(out) == 31 and out[3] > 20 and out[30] > 20 and out[2] < 20, out
    r = ok(MAIN + "num { laplace 1 (sum (map (fun r -> bin 3 r.x) db)) }")
    (m,) = r.mechanisms
    assert m.sensitivity == 3    # x in [0, 10]: bins 0 .. 3


def test_bin_and_clip_on_columns_are_their_formulas_whatever_the_dtype():
    """The runtimes of bin and clip work in place on the one array they make; on every input
    kind they give what the plain formulas give (floats with NaN and infinities, ints, bools,
    a float32 column, scalars), ints included: their quotient is a new float array."""
    import numpy as np

    from fuzzpy.runtime.kernels.arith import clip as _clip_run
    from fuzzpy.runtime.kernels.binning import bin_of as _run_bin

    inputs = [np.array([0.3, 2.9999, 3.0, -5.0, np.nan, np.inf, -np.inf, 1e308]), np.array([5, 15, 27, -3]),
              np.array([5, 15, 27], dtype=np.int8), np.array([True, False]), np.array([0.3, 7.5], dtype=np.float32),
              0.3, 7, np.float64(2.5)]
    with np.errstate(all="ignore"):
        for x in inputs:
            for num, den, lo, hi in ((1, 10, 0, 5), (10, 1, 0, 9), (3, 2, -1, 100)):
                want = np.clip(np.floor(np.divide(np.multiply(x, den), num)), lo, hi)
                got = _run_bin(num, den, x, lo, hi)
                assert np.array_equal(got, want, equal_nan=True) and np.ndim(got) == np.ndim(want), (x, num, den)
                assert type(got) is (float if np.ndim(want) == 0 else np.ndarray)
            want = np.fmin(np.fmax(x, 0.0), 4.0)
            got = _clip_run(0, 4, x)
            assert np.array_equal(got, want) and np.asarray(got).dtype == np.asarray(want).dtype, x


def test_bin_is_not_lipschitz_on_private_values():
    refused(MAIN + "num { laplace 1 (bin 10 (count db)) }", "E0305")
    refused(MAIN + "num { laplace 1 (floor (count db)) }", "E0305")
    refused(MAIN + "num { laplace 1 (count (filter (fun r -> r.x > 1) db) + bin (count db) 3) }", "E0209",
            "width of bin must be a public constant")
    refused(MAIN + "num { laplace 1 (bin 0 3) }", "E0213", "must be positive")
    refused(MAIN + 'num { laplace 1 (floor "a") }', "E0202", "floor expects a number")


def test_bin_key_on_neighbours_matches_the_proof(tables):
    # The oracle runs the checked program on neighbouring tables with identity mechanisms and
    # compares the observed loss with the proven epsilon.
    r = ok(MAIN + "(parts {\"0\", \"1\", \"2\", \"3\"} num) "
           "{ each (fun g -> laplace 1 (count g)) (groupby (fun r -> bin 3 r.x) db) }")
    for x, y in ((ROW_A * 3, ROW_A * 3 + ROW_B), (ROW_B, "")):
        pr = audit_pair(r.entry_instance, r.epsilon, {"db": tables(x)}, {"db": tables(y)})
        assert not pr.violations, pr.violations


def test_range_in_a_helper_is_checked_at_each_use():
    # A helper whose range bound is its parameter is checked with each use's argument: a constant
    # or a released value passes, a private one is refused at that use.
    helper = ("function grid (hi : num) : list num { range 0 hi 1 }\n"
              "function pick (db : bag T) (hi : num) : fuzzy num { exponential 1 (grid hi) (fun c -> 0 - abs (count db - c)) }\n")
    r = ok(helper + MAIN + "num { sample m = laplace 1 (count db); sample a = pick db (clip 0 9 m); "
           "sample b = pick db 3; return (a + b) }")
    assert r.epsilon == 3
    assert [f.type for f in r.functions if f.name == "grid"] == ["uses constant arguments; checked at each use"]
    notes = refused(helper + MAIN + "num { pick db (count db) }", "E1501", "the upper bound of range depends on private data")
    assert any("in the use of grid" in n for n in notes)


def test_one_declaration_serves_the_editor_and_the_docs():
    from fuzzpy.interfaces.docgen import primitives_markdown
    from fuzzpy.interfaces.lsp.hover import hover_primitive

    doc = primitives_markdown()
    for name in ("range", "sort", "reverse", "take", "sort_by", "floor", "bin"):
        text = hover_primitive(name)
        assert text and f"{name} " in text, name
        assert f"### `{name}`" in doc
