"""Batched evaluation (fuzzpy/runtime/batch.py): pmap over every part and selection scores over
every candidate in one evaluation.  It must change speed, never values: every test compares the
batched run with the unbatched one (`batch=False`: one call per part / candidate, no remembered
key codes) under the same seed, value for value, including the exact types (int, Fraction) of
what reaches a mechanism."""

from __future__ import annotations

import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fuzzpy.runtime.kernels.arith as KA
import fuzzpy.runtime.kernels.bags as KB
import fuzzpy.runtime.kernels.partitions as KP
import fuzzpy.runtime.kernels.vectors as KV
from fuzzpy.checking.program import check_file, check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import Interpreter, RunState, run_program
from fuzzpy.runtime.samplers import RandomSource
from fuzzpy.runtime.state import Context

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "data" / "adult_sample.csv"


def both(report, tables, seed=3):
    """(batched, unbatched) runs: released values with their types, and the result."""
    out = []
    for batch in (True, False):
        r = run_program(report.entry_instance, tables, RandomSource.seeded(seed), batch=batch)
        out.append(([(rec.keys, rec.value, type(rec.value)) for rec in r.releases], r.value))
    return out


@pytest.fixture
def adult_tables():
    def table(report):
        return {"db": load_table(ADULT, list(report.schemas.values())[0], table="db")}

    return table


@pytest.mark.parametrize("name,params", [
    ("median.fz", {}),
    ("histogram.fz", {}),
    ("quickstart.fz", {}),
    ("cdf.fz", {}),
])
def test_examples_release_the_same_values_batched_or_not(name, params, adult_tables):
    report = check_file(ROOT / "examples" / name, params=params)
    assert report.ok
    batched, unbatched = both(report, adult_tables(report))
    assert batched == unbatched and batched[0]  # something was released


@pytest.mark.parametrize("flat_pairs", [1 << 17, 100])  # no difference: blocks are not gathered
def test_the_decision_tree_batches_its_qualities_and_scores(adult_tables, monkeypatch, flat_pairs):
    """DiffPID3 releases the same tree batched or not, and its per-node qualities (pmap majority) really run batched, and remembered key
    codes replace the per-node evaluation of the bucketing functions."""
    import fuzzpy.runtime.batch as B

    seen = []
    real = B._run

    def spy(ctx, fn, arg, n):
        out = real(ctx, fn, arg, n)
        seen.append((type(arg).__name__, out is not None))
        return out

    monkeypatch.setattr(B, "_run", spy)
    monkeypatch.setattr(KP, "FLAT_PAIRS", flat_pairs)
    merged, flat = [], []
    real_call, real_flat = B.LaneEvaluator._one_call, KP._lanes_of_partitions

    def spy_call(self, env, branches, js, which, idx):
        merged.append(len(js))
        return real_call(self, env, branches, js, which, idx)

    def spy_flat(partitions):
        out = real_flat(partitions)
        flat.append((len(partitions), out is not None))
        return out

    real_blocks = KP._groupby_blocks
    blocks = []

    def spy_blocks(lb, full, keys):
        blocks.append(len(lb.blocks[1]))
        return real_blocks(lb, full, keys)

    monkeypatch.setattr(B.LaneEvaluator, "_one_call", spy_call)
    monkeypatch.setattr(KP, "_lanes_of_partitions", spy_flat)
    monkeypatch.setattr(KP, "_groupby_blocks", spy_blocks)
    report = check_file(ROOT / "examples" / "decision_tree.fz", params={"depth": "2", "B": "10"})
    batched, unbatched = both(report, adult_tables(report), seed=1)
    assert batched == unbatched and len(batched[0]) > 10  # the same tree, value for value
    # the attribute score starts with `if member x used`, which differs between candidates, and
    # `by`'s chain of ifs on the attribute: the ifs split their lanes, so the scores batch too
    assert ("Lanes", True) in seen and ("Lanes", False) not in seen
    # `by`'s twelve branches call `quality` (one instance per key type, the same code): one call
    assert merged and max(merged) == 12 and min(merged) >= 2
    # whose `pmap majority` runs once over every candidate's parts, however many rows they have
    # in all (FLAT_PAIRS bounds only gathered pairs): the candidates' partitions are of one
    # bag's rows, every row in a part, so they are blocks and `groupby income` a bincount each
    assert flat and all(ok for _, ok in flat)
    assert blocks == [n for n, _ in flat] and ("LaneBag", True) not in seen


SCHEMA = 'schema T { x : num[0, 10], n : int[0, 5], k : cat{"a", "b", "c"} }\n'


def frame(rows=40, seed=0, nan=True):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 11, rows).astype(float)
    if nan:
        x[::7] = np.nan
    return pd.DataFrame({"x": x, "n": rng.integers(0, 6, rows),
                         "k": pd.Categorical(rng.choice(["a", "b", "c"], rows), categories=["a", "b", "c"])})


PROGRAMS = {
    # the median's shape: a split on a candidate threshold, both sides counted
    "threshold split": SCHEMA + '''
function score (db : bag T) (c : num) : num {
  let (lo, hi) = split (fun r -> r.x < c) db;
  0 - abs (count lo - count hi)
}
function main (db : bag T) : fuzzy num { exponential 1 [0, 2.5, 3, 7, 10, 11] (fun c -> score db c) }''',
    # the candidate on the left, <= and >=, and a filter
    "flipped comparisons": SCHEMA + '''
function main (db : bag T) : fuzzy num {
  exponential 1 [0, 3, 3.5, 10] (fun c -> count (filter (fun r -> c <= r.x) db) - count (filter (fun r -> r.x >= c) db)
                                     + 2 * count (filter (fun r -> c > r.x) db))
}''',
    # stdlib quantile: a bag of numbers, Fraction arithmetic on the counts
    "stdlib quantile": 'import "stdlib/stats.fz"\n' + SCHEMA + '''
function main (db : bag T) : fuzzy num { quantile 1 (1 / 3) [0, 1, 2, 5, 9, 10] (map (fun r -> r.x) db) }''',
    # pmap over a groupby: nested groupby, max, arithmetic with Fractions and big constants
    "pmap qualities": SCHEMA + '''
function q (g : bag T) : num {
  let c = groupby (fun r -> r.n) g;
  max (count (part c "0") + 4611686018427387904) (count (part c "3") * 3) - count (filter (fun r -> r.x > 4) g) / 3
}
function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) {
  let qs = pmap q (groupby (fun r -> r.k) db);
  each (fun v -> laplace 1 v) (pmap (fun g -> count g) (groupby (fun r -> r.k) db))
}''',
    # a group of a lane bag read beyond its count: summed, filtered, grouped again, and a key
    # that leaves some rows in no group (NaN buckets)
    "pmap reads its groups": SCHEMA + '''
function q (g : bag T) : num {
  let c = groupby (fun r -> bin 3 r.x) g;
  count (part c "0") + sum (map (fun r -> clip 0 10 r.x) (part c "1")) / 2
    + count (filter (fun r -> r.n > 2) (part c "2")) * 3 + count (part (groupby (fun r -> r.k) (part c "1")) "b") * 5
}
function main (db : bag T) : fuzzy (parts {"0", "1", "2", "3", "4", "5"} num) {
  each (fun v -> laplace 1 v) (pmap q (groupby (fun r -> r.n) db))
}''',
    # exact arithmetic on the candidate (floats and Fractions) and a count, max, min, clip, and
    # an if on the candidate whose branches are put back together: lanes held as exact ratios
    "exact arithmetic on the candidate": SCHEMA + '''
function main (db : bag T) : fuzzy num {
  exponential 1 [0, 0.5, 1, 2.5, 3, 7] (fun c ->
    let s = count (filter (fun r -> r.x > 2) db) * (c / 3 - 1 / 7);
    let m = max (s - c) (c / 7) + min c (1 / 3);
    if c * 3 > 2 then clip 0 5 (m * 2 - c) else 0 - m / 4)
}''',
    # a threshold computed in the row function (float arithmetic there): not the threshold path
    "computed threshold": SCHEMA + '''
function main (db : bag T) : fuzzy num {
  exponential 1 [0.2, 2.2, 5.2] (fun c -> count (filter (fun r -> r.x / 10 < c + 0.1) db))
}''',
    # a score whose control flow differs between candidates: each branch runs on its own lanes
    "if on the candidate": SCHEMA + '''
function main (db : bag T) : fuzzy num {
  exponential 1 [1, 2, 3, 4] (fun c -> if c < 3 then count db else count (filter (fun r -> r.x < c) db))
}''',
    # nested ifs, each splitting its lanes again; branches of different kinds (an int count, a
    # Fraction, a threshold count) merged back per lane
    "nested ifs on the candidate": SCHEMA + '''
function main (db : bag T) : fuzzy num {
  exponential 1 [0, 1, 2, 3, 4, 5, 7, 9] (fun c ->
    if c < 4 then (if c < 2 then count db else count (filter (fun r -> r.x >= c) db) / 3)
    else (if c == 5 then 0 - count db else 2 * count (filter (fun r -> r.x < c) db) - c))
}''',
    # the tree's attribute score: a recursive membership test whose if differs between lanes at
    # every step, then a chain of ifs choosing a groupby per candidate
    "member chain": SCHEMA + '''
function mem (x : string) (xs : list string) : bool {
  case xs of { [] => false | h :: t => if h == x then true else mem x t }
}
function by (a : string) (b : bag T) : num {
  if a == "k" then count (part (groupby (fun r -> r.k) b) "a")
  else if a == "n" then count (part (groupby (fun r -> r.n) b) "3")
  else count (filter (fun r -> r.x > 5) b)
}
function main (db : bag T) : fuzzy string {
  exponential 1 ["k", "n", "f", "x"] (fun a -> if mem a ["n", "x"] then 0 - 1000 else by a db)
}''',
    # each branch runs on its own lanes only: `range` would refuse the step c - 3 on the lanes that
    # take the else branch, so this batches only if they never evaluate the then branch
    "branch on its own lanes": SCHEMA + '''
function len (xs : list num) : num { case xs of { [] => 0 | h :: t => 1 + len t } }
function main (db : bag T) : fuzzy num {
  exponential 1 [1, 2, 5, 7] (fun c -> if c > 3 then count db - len (range 0 (2 * (c - 3)) (c - 3)) else count db)
}''',
    # an if on released values inside pmap (an if on a part's own count is refused by the
    # checker: nothing public differs between the parts of a partition)
    "if in pmap": SCHEMA + '''
function lsum (xs : list num) : num { case xs of { [] => 0 | h :: t => h + lsum t } }
function main (db : bag T) : fuzzy num {
  sample ps = each (fun g -> laplace 1 (count g)) (groupby (fun r -> r.k) db);
  return (lsum (values (pmap (fun v -> if v > 12 then v * 2 else (if v > 9 then 0 - v else 1)) ps)))
}''',
    # pmap results released: sums of parts (exact bounded sums, per lane)
    "pmap sums released": SCHEMA + '''
function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) {
  each (fun s -> laplace 1 s) (pmap (fun g -> sum (map (fun r -> clip 0 10 r.x) g) + count g) (groupby (fun r -> r.k) db))
}''',
    # row functions that read the candidate: every (candidate, row) pair in one column evaluation
    "candidate in a map": SCHEMA + '''
function main (db : bag T) : fuzzy num {
  exponential 1 [0, 0.5, 2.25, 7, 10] (fun c -> sum (map (fun r -> clip 0 3 (r.x * c / 3 - c)) db))
}''',
    "candidate in a filter, a split and a groupby": SCHEMA + '''
function main (db : bag T) : fuzzy num {
  exponential 1 [1, 2, 3, 4] (fun c ->
    let (lo, hi) = split (fun r -> r.x * 2 < c + r.n) db;
    count (filter (fun r -> r.n >= c - 1 && r.k == "a") db) + count lo - count hi
      + count (part (groupby (fun r -> if r.x > c then 0 else r.n) db) "0"))
}''',
    "candidate tuple in a vsum": SCHEMA + '''
function main (db : bag T) : fuzzy (num, num) {
  exponential 1 [(1, 0), (0, 1), (0.5, 0.25)] (fun c ->
    let (a, b) = c;
    vget 1 (vsum 1 (fun r -> vec (a * r.x / 10, b - r.n / 5)) db))
}''',
    # the tree's score, small: `by`'s branches call one function (an instance per key type) on
    # partitions by different keys, of the table or of a part of it, some rows in no part (NaN
    # buckets); `pmap q` runs over every candidate's parts at once, and the qualities, lists of
    # different lengths, are summed by the compiled `lsum` once per candidate
    "one call for the branches": SCHEMA + '''
function lsum (xs : list num) : num { case xs of { [] => 0 | h :: t => h + lsum t } }
function q (g : bag T) : num { max (count (filter (fun r -> r.x > 4) g)) (count g - 3) }
function quality ps { lsum (values (pmap q ps)) }
function by (a : string) (b : bag T) f {
  if a == "k" then f (groupby (fun r -> r.k) b)
  else if a == "n" then f (groupby (fun r -> r.n) b)
  else if a == "x" then f (groupby (fun r -> bin 3 r.x) b)
  else f (groupby (fun r -> r.n) (filter (fun r -> r.x > 2) b))
}
function main (db : bag T) : fuzzy string {
  exponential 1 ["k", "n", "x", "f", "k"] (fun a -> by a db quality)
}''',
    # branches calling one public function on arguments of different kinds (an int count, a
    # Fraction), another function, and a function of a bag given a different bag per branch
    "calls with per-branch arguments": SCHEMA + '''
function g (v : num) : num { v * 3 - 1 / 2 }
function h (b : bag T) (t : num) : num { count (filter (fun r -> r.x > t) b) }
function main (db : bag T) : fuzzy num {
  exponential 1 [1, 2, 3, 4, 5, 6] (fun c ->
    if c < 2 then g (count db) else if c == 2 then g (c / 3) else if c == 3 then h db c
    else if c == 4 then h (filter (fun r -> r.n > 2) db) 3 else if c == 5 then 0 - g c else h db 0)
}''',
    # candidates that are lists of different lengths: public functions on them run compiled,
    # once per candidate
    "compiled per candidate": SCHEMA + '''
function lsum (xs : list num) : num { case xs of { [] => 0 | h :: t => h + lsum t } }
function len (xs : list num) : num { case xs of { [] => 0 | h :: t => 1 + len t } }
function main (db : bag T) : fuzzy (list num) {
  exponential 1 [[1], [2, 3], [], [4, 5, 0.5]] (fun xs -> count db + lsum xs - len xs / 3)
}''',
    # map and sum over the parts of a partition (a lane bag, a function without lane values)
    "pmap maps its parts": SCHEMA + '''
function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) {
  each (fun s -> laplace 1 s) (pmap (fun g -> sum (map (fun r -> r.x / 2) (filter (fun r -> r.n > 1) g))) (groupby (fun r -> r.k) db))
}''',
}


# What each program must exercise: (kind of lane argument, batched?) and whether the threshold
# split (one sort, a binary search per candidate) was used, so no test passes by falling back.
EXPECT = {
    "threshold split": ({("Lanes", True)}, True),
    "flipped comparisons": ({("Lanes", True)}, True),
    "stdlib quantile": ({("Lanes", True)}, True),
    "pmap qualities": ({("LaneBag", True)}, False),
    "pmap reads its groups": ({("LaneBag", True)}, False),
    "if on the candidate": ({("Lanes", True)}, True),
    "nested ifs on the candidate": ({("Lanes", True)}, True),
    "member chain": ({("Lanes", True)}, False),
    "if in pmap": ({("Lanes", True)}, False),
    "branch on its own lanes": ({("Lanes", True)}, False),
    "computed threshold": ({("Lanes", True)}, False),
    "exact arithmetic on the candidate": ({("Lanes", True)}, False),
    "pmap sums released": ({("LaneBag", True)}, False),
    "candidate in a map": ({("Lanes", True)}, False),
    "candidate in a filter, a split and a groupby": ({("Lanes", True)}, False),
    "candidate tuple in a vsum": ({("Lanes", True)}, False),
    "pmap maps its parts": ({("LaneBag", True)}, False),
    "one call for the branches": ({("Lanes", True)}, False),
    "calls with per-branch arguments": ({("Lanes", True)}, False),
    "compiled per candidate": ({("Lanes", True)}, False),
}
# Programs whose row functions run on (lane, row) pairs: how many such evaluations, at least
PAIRS = {"candidate in a map": 1, "candidate in a filter, a split and a groupby": 3, "candidate tuple in a vsum": 1,
         "pmap maps its parts": 2, "computed threshold": 1, "pmap sums released": 1, "pmap reads its groups": 2}


SPLITS = {"if on the candidate", "nested ifs on the candidate", "member chain", "if in pmap", "branch on its own lanes",
          "exact arithmetic on the candidate", "one call for the branches", "calls with per-branch arguments"}

RATIOS = {"exact arithmetic on the candidate"}  # programs whose lanes must be held as exact ratios


@pytest.mark.parametrize("compiled_lanes", [64, 0])
def test_branches_calling_one_function_are_one_call_over_their_lanes(compiled_lanes, monkeypatch):
    """`by`'s shape: the chain is decided for every lane first, the branches calling one
    function (the same code) make one call, `pmap` runs over every lane's partition at once, and
    public functions run compiled once per lane; without the compiled calls the qualities (lists
    of different lengths) do not batch, and the values are the same either way."""
    import fuzzpy.runtime.batch as B

    merged, flat, runs = [], [], []
    real_call, real_flat, real_run = B.LaneEvaluator._one_call, KP._lanes_of_partitions, B._run

    def spy_call(self, env, branches, js, which, idx):
        merged.append(len(js))
        return real_call(self, env, branches, js, which, idx)

    def spy_flat(partitions):
        out = real_flat(partitions)
        flat.append(out is not None)
        return out

    def spy_run(ctx, fn, arg, n):
        out = real_run(ctx, fn, arg, n)
        runs.append(out is not None)
        return out

    monkeypatch.setattr(B.LaneEvaluator, "_one_call", spy_call)
    monkeypatch.setattr(KP, "_lanes_of_partitions", spy_flat)
    monkeypatch.setattr(B, "_run", spy_run)
    monkeypatch.setattr(B, "COMPILED_LANES", compiled_lanes)
    report = check_source(PROGRAMS["one call for the branches"], "t.fz")
    assert report.ok, report.diagnostics
    batched, unbatched = both(report, {"db": frame(seed=5)}, 2)
    assert batched == unbatched
    assert merged == [4]  # five candidates taking four branches: one call
    assert flat == [True]
    # the scores batch only with compiled calls; without, each candidate's score runs alone
    # (its own pmap batched)
    assert runs == [True] if compiled_lanes else runs == [False] + [True] * 5


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("nan", [True, False])
def test_small_programs_release_the_same_values_batched_or_not(name, nan, monkeypatch):
    import fuzzpy.runtime.batch as B

    runs, thresholds = set(), []
    real_run, real_thresholds = B._run, KB._thresholds

    def run(ctx, fn, arg, n):
        out = real_run(ctx, fn, arg, n)
        runs.add((type(arg).__name__, out is not None))
        return out

    def split(*args):
        out = real_thresholds(*args)
        thresholds.append(out is not None)
        return out

    splits = []
    real_split, real_chain = B.LaneEvaluator._split, B.LaneEvaluator._split_chain

    def lane_split(self, node, env, truth):
        splits.append(int(truth.sum()))
        return real_split(self, node, env, truth)

    def lane_chain(self, node, env, truth):
        splits.append(int(truth.sum()))
        return real_chain(self, node, env, truth)

    pairs = []
    real_rows = B.lane_rows

    def lane_rows(ev, fn, b, size=None):
        out = real_rows(ev, fn, b, size)
        pairs.append(out is not None)
        return out

    ratios = []
    real_of_ratios = B.Lanes.of_ratios

    def of_ratios(r):
        ratios.append(len(r))
        return real_of_ratios(r)

    monkeypatch.setattr(B.Lanes, "of_ratios", staticmethod(of_ratios))
    monkeypatch.setattr(B, "_run", run)
    monkeypatch.setattr(KB, "_thresholds", split)
    monkeypatch.setattr(B.LaneEvaluator, "_split", lane_split)
    monkeypatch.setattr(B.LaneEvaluator, "_split_chain", lane_chain)
    monkeypatch.setattr(B, "lane_rows", lane_rows)
    report = check_source(PROGRAMS[name], "t.fz")
    assert report.ok, report.diagnostics
    for seed in (0, 1):
        tables = {"db": frame(seed=seed, nan=nan)}
        batched, unbatched = both(report, tables, seed)
        assert batched == unbatched
    assert (runs, all(thresholds) and bool(thresholds)) == EXPECT[name]
    assert bool(splits) == (name in SPLITS)  # an if whose condition differs between lanes was split
    assert all(pairs) and len(pairs) >= 2 * PAIRS.get(name, 0)  # per-lane row functions ran on pairs
    assert bool(ratios) or name not in RATIOS  # exact lane arithmetic ran on ratios


def test_threshold_counts_match_a_direct_count():
    from fuzzpy.runtime.batch import ThresholdBags

    col = np.array([1.0, 2.0, 2.0, np.nan, 5.0, -np.inf, np.inf])
    ts = [2.0, np.nan, np.inf, -np.inf, 0.0, 5.0]
    for op, fn in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)]:
        with np.errstate(invalid="ignore"):
            expected = [int(np.count_nonzero(fn(col, t))) for t in ts]
        assert ThresholdBags(pd.Series(col), col, op, ts, False).counts().tolist() == expected
        assert ThresholdBags(pd.Series(col), col, op, ts, True).counts().tolist() == [len(col) - e for e in expected]


@pytest.mark.parametrize("seed", range(48))
def test_threshold_counts_of_whole_numbers_without_a_sort_match_a_direct_count(seed):
    """Columns of whole numbers are counted per value (bincount, cumulative sum), others sorted:
    both must give every comparison's count exactly, at and between the values, at the
    infinities, NaN and -0.0, and far outside the column's range."""
    import fuzzpy.runtime.batch as B

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    kind = seed % 6
    if kind == 0:  # small whole numbers, some negative, and -0.0
        col = rng.integers(-20, 40, n).astype(float)
        col[: n // 3] = -0.0
    elif kind == 1:  # whole numbers spread too wide for a count per value: sorted
        col = rng.integers(-10**9, 10**9, n).astype(float)
    elif kind == 2:  # not whole: sorted
        col = rng.integers(0, 50, n) / 4
    elif kind == 3:  # an infinity among whole numbers: sorted
        col = rng.integers(0, 9, n).astype(float)
    elif kind == 4:  # whole numbers just below 2^52
        col = 2.0**51 + rng.integers(0, 30, n).astype(float)
    else:  # beyond 2^53, where t - 1 is not a float: sorted
        col = 2.0**53 + 2 * rng.integers(0, 20, n).astype(float)
    col[rng.random(n) < 0.1] = np.nan
    if kind == 3:
        col[0] = np.inf
    finite = col[~np.isnan(col)]
    ts = list(rng.choice(np.concatenate([finite, [0.0]]), 10)) if len(finite) else []
    ts += [t + d for t in ts[:5] for d in (0.5, -0.25, 1e-9)]
    ts += [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e300, -1e300, 2.0**53 + 2, 17.5, -3.0]
    counted = B._Below.of(finite)
    assert (counted._cum is not None) == (kind in (0, 4) and len(finite) > 0)
    for op, fn in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)]:
        with np.errstate(invalid="ignore"):
            expected = [int(np.count_nonzero(fn(col, t))) for t in ts]
        assert B.ThresholdBags(pd.Series(col), col, op, ts, False).counts().tolist() == expected, op
        assert B.ThresholdBags(pd.Series(col), col, op, ts, True).counts().tolist() == [n - e for e in expected]
        # the two sides of one split share the column's counts and the hits; a selection of
        # their lanes (an if on the candidate) counts its own thresholds
        shared: list = [None, None]
        sides = [B.ThresholdBags(pd.Series(col), col, op, ts, neg, shared) for neg in (False, True)]
        for _ in range(2):
            assert sides[0].counts().tolist() == expected and sides[1].counts().tolist() == [n - e for e in expected]
        idx = np.array([i for i in range(len(ts)) if i % 3 != 1])
        remap = np.full(len(ts), -1)
        remap[idx] = np.arange(len(idx))
        for neg, side in zip((False, True), sides):
            picked = B.select_lanes(side, idx, remap).counts().tolist()
            assert picked == [(n - expected[i]) if neg else expected[i] for i in idx.tolist()]


def test_integer_lanes_keep_the_exact_types_and_guard_overflow():
    from fuzzpy.runtime.batch import LaneEvaluator, Lanes
    from fuzzpy.runtime.kernels.arith import _b_arith

    class P:
        def __init__(self, name):
            self.name = name

    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), 3)
    counts = Lanes(np.array([1, 5, 0], dtype=np.int64))
    out = _b_arith(ev, P("add"), None, [counts, Fraction(2)])
    assert out.values() == [Fraction(3), Fraction(7), Fraction(2)] and all(type(v) is Fraction for v in out.values())
    assert counts.values() == [1, 5, 0] and all(type(v) is int for v in counts.values())
    assert _b_arith(ev, P("mul"), None, [counts, Fraction(2**62)]) is NotImplemented  # would overflow int64
    assert _b_arith(ev, P("add"), None, [counts, Fraction(1, 2)]) is NotImplemented   # not an integer


def test_pmap_of_parts_that_are_not_bags_and_of_one_part():
    src = SCHEMA + '''
function main (db : bag T) : fuzzy num {
  sample ps = each (fun g -> laplace 1 (count g)) (groupby (fun r -> r.k) db);
  return (lsum (values (pmap (fun v -> v * 2 + 1) ps)))
}
function lsum (xs : list num) : num { case xs of { [] => 0 | h :: t => h + lsum t } }'''
    report = check_source(src, "t.fz")
    assert report.ok, report.diagnostics
    batched, unbatched = both(report, {"db": frame()})
    assert batched == unbatched


def test_batching_is_off_inside_row_functions_and_without_a_run():
    from fuzzpy.runtime.batch import batched_pmap, batched_scores

    class NoRun:  # a context without an interpreter (the mechanism tests' fake)
        info = {}

    assert batched_scores(NoRun(), object(), [1, 2]) is None
    ctx = Context(Interpreter(RunState(RandomSource.seeded(0)), exact=False), {}, None)
    assert batched_pmap(ctx, object(), {"a": 1, "b": 2}) is None


@pytest.mark.parametrize("candidates", ["[1, 2, 3, 4]", "[1, 2, 3]"])  # the else branch: two lanes, one lane
def test_a_branch_that_fails_on_some_lanes_fails_the_run_as_unbatched(candidates, monkeypatch):
    """`range` refuses a step that is not positive: the else branch fails on the lanes that take
    it.  The batch is abandoned (nothing was drawn), the scores run one by one, and the run fails
    with the same coded error, after the same earlier release, batched or not."""
    from fuzzpy.diagnostics import FuzzError

    src = SCHEMA + f'''
function len (xs : list num) : num {{ case xs of {{ [] => 0 | h :: t => 1 + len t }} }}
function main (db : bag T) : fuzzy num {{
  sample n = laplace 1 (count db);
  exponential 1 {candidates} (fun c -> if c < 3 then count db else len (range 0 10 (3 - c)))
}}'''
    report = check_source(src, "t.fz")
    assert report.ok, report.diagnostics
    outcomes = []
    for batch in (True, False):
        state = RunState(RandomSource.seeded(4), batch=batch)
        from fuzzpy.runtime.interpreter import RunHandle

        handle = RunHandle(report.entry_instance, {"db": frame()}, state).start()
        handle.wait()
        with pytest.raises(FuzzError) as err:
            handle.result()
        d = err.value.diagnostics[0]
        outcomes.append((d.code, d.message, [(r.mechanism, r.value) for r in state.releases]))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == "E0604" and "range" in outcomes[0][1] and len(outcomes[0][2]) == 1


def test_lane_split_merges_values_with_their_exact_types():
    from fuzzpy.runtime.batch import LaneBag, Lanes, compact, select_lanes

    assert [type(v) for v in compact([Fraction(2), Fraction(-3)]).values()] == [Fraction, Fraction]
    assert compact([Fraction(2), Fraction(-3)]).values() == [2, -3]
    assert [type(v) for v in compact([1, 5]).values()] == [int, int]
    mixed = compact([1, Fraction(1), True, 0.5])  # kept as they are
    assert [type(v) for v in mixed.values()] == [int, Fraction, bool, float]
    assert compact([2**62, 1]).values() == [2**62, 1]  # beyond the int-lane bound: a list
    idx = np.array([2, 0])
    remap = np.array([1, -1, 0])
    assert select_lanes(Lanes(np.array([7, 8, 9])), idx, remap).values() == [9, 7]
    bag = LaneBag(frame(6), np.arange(6), np.array([0, 1, 2, 2, 0, 1]), 3)
    sub = select_lanes(bag, idx, remap)
    assert sub.n == 2 and sub.rows.tolist() == [0, 2, 3, 4] and sub.lanes.tolist() == [1, 0, 0, 1]


@pytest.mark.parametrize("bound", [Fraction(1), Fraction(5, 3), Fraction(1, 10**9), Fraction(10**30), Fraction(0)])
@pytest.mark.parametrize("empty_lane", [True, False])
def test_lane_sums_are_the_bounded_sum_of_each_lane(bound, empty_lane):
    """One bincount per lane bag gives, lane by lane, the value and type `sum` gives that lane's
    rows alone: clamping, the grid, NaN as 0, infinities clamped, empty lanes 0.0.  With no empty
    lane the sums are kept as exact ratios; read back, they are the same Fractions and floats."""
    from fuzzpy.runtime.batch import _lane_sums
    from fuzzpy.runtime.sums import bounded_sum as _bounded_sum

    rng = np.random.default_rng(7)
    x = rng.normal(0, 3, 500) * rng.choice([1e-12, 1, 1e6], 500)
    x[::11], x[5::13], x[7::17] = np.nan, np.inf, -np.inf
    lanes = rng.integers(0, 9, 500)
    if empty_lane:
        lanes[lanes == 4] = 3
    sums = _lane_sums(x, lanes, 9, bound)
    assert (sums.ratios is not None) == (not empty_lane and bound > 0)
    if sums.ratios is not None:
        assert sums.ratios.floats().tolist() == [float(_bounded_sum(x[lanes == i], bound)) for i in range(9)]
    want = [_bounded_sum(x[lanes == i], bound) for i in range(9)]
    one_by_one = [sums.at(i) for i in range(9)]  # read before the list is built
    assert len(sums) == 9
    got = sums.values()
    assert got == want and [type(v) for v in got] == [type(v) for v in want]
    assert one_by_one == want and [type(v) for v in one_by_one] == [type(v) for v in want]
    if empty_lane and bound > 0:  # Fractions and 0.0: every lane's exact value kept for mechanisms
        assert sums.exact is not None and sums.exact.fractions() == want


def test_lane_values_become_columns_only_for_numbers_booleans_and_tuples():
    from fuzzpy.runtime.batch import Lanes, _lane_columns

    lanes = np.array([1, 1, 0, 2])
    col = _lane_columns(Lanes([Fraction(1, 3), 2, 0.5]), lanes)
    assert col.data.tolist() == [2.0, 2.0, 1 / 3, 0.5]
    pair = _lane_columns(Lanes([(1, True), (Fraction(7, 2), False), (0, True)]), lanes)
    assert pair[0].data.tolist() == [3.5, 3.5, 1.0, 0.0] and pair[1].data.tolist() == [False, False, True, True]
    assert _lane_columns(Lanes(np.array([4, 5, 6])), lanes).data.tolist() == [5.0, 5.0, 4.0, 6.0]
    assert _lane_columns(Lanes(["a", "b", "c"]), lanes) is None  # strings: once per lane
    assert _lane_columns(Lanes([(1, 2), (3,), (4, 5)]), lanes) is None  # lists of different lengths
    assert _lane_columns(Lanes([("inl", 1), ("inr", 2), ("inl", 3)]), lanes) is None


def test_pairs_of_one_row_per_lane_read_lane_values_as_they_are():
    """When pair i is lane i (one row in every lane, in order), pair_lanes() is None and a lane
    value's column is its own values, bit for bit, as gathering by lane number gives them;
    anything else keeps the gather."""
    from fuzzpy.runtime.batch import LaneBag, Lanes, _lane_columns

    base = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    one_each = LaneBag(base, np.array([2, 0, 1]), np.array([0, 1, 2]), 3)
    assert one_each.pair_lanes() is None and one_each.pair_lanes() is None
    for other in (LaneBag(base, np.array([0, 1]), np.array([0, 2]), 3),
                  LaneBag(base, np.array([0, 1, 2]), np.array([1, 0, 2]), 3),
                  LaneBag(base, np.array([0, 1, 2, 0]), np.array([0, 1, 2, 2]), 3)):
        assert other.pair_lanes() is other.lanes
    floats = Lanes.of_floats(np.array([-0.0, np.nan, 1.5]))
    for v in (floats, Lanes([Fraction(1, 3), 2, 0.5]), Lanes(np.array([4, 5, 6])), Lanes([True, False, True]),
              Lanes([(1, True), (Fraction(7, 2), False), (0, True)])):
        got, want = _lane_columns(v, None), _lane_columns(v, np.arange(3))
        got, want = (got, want) if type(got) is tuple else ((got,), (want,))
        assert [g.data.tobytes() for g in got] == [w.data.tobytes() for w in want]
    assert _lane_columns(floats, None).data is floats.floats


def test_a_plain_bag_too_large_for_pairs_runs_once_per_lane(monkeypatch):
    """Past PRODUCT_CELLS gathered cells the pairs are not built: the same values, once per lane."""
    import fuzzpy.runtime.batch as B

    monkeypatch.setattr(B, "PRODUCT_CELLS", 50)
    report = check_source(PROGRAMS["candidate in a map"], "t.fz")
    seen = []
    real = B.product

    def spy(ev, b):
        out = real(ev, b)
        seen.append(out is None)
        return out

    monkeypatch.setattr(B, "product", spy)
    batched, unbatched = both(report, {"db": frame()})
    assert batched == unbatched and seen and all(seen)


@pytest.mark.parametrize("name", ["vadd", "vsub", "vscale"])
def test_vector_arithmetic_on_float_lanes_is_the_scalar_runs_arithmetic(name):
    """vadd, vsub, vscale on lanes with a float operand (released values): numpy on the same
    floats gives, lane by lane, the value and type the scalar run gives (0 * inf = 0, NaN, exact
    operands mixed in as float(x)); lanes whose operands are both exact are left to the scalar
    runs (NotImplemented)."""
    import math

    from fuzzpy.primitives.registry import lookup
    from fuzzpy.runtime.batch import LaneEvaluator, Lanes, unlane
    from fuzzpy.runtime.kernels.vectors import _b_vector

    rng = np.random.default_rng(3)
    pool = [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 1e308, 3e-310]

    def floats(n):
        return [float(rng.choice(pool)) if rng.random() < 0.4 else float(rng.normal(0, 1e3)) for _ in range(n)]

    def exacts(n):
        return [rng.choice([Fraction(1, 3), 0, 7, Fraction(-5, 2), 10**30]) for _ in range(n)]

    n = 60
    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), n)
    prim = lookup(name)
    u = tuple(Lanes(floats(n) if j != 1 else exacts(n)) for j in range(3))
    v = Lanes([tuple(f) for f in zip(floats(n), floats(n), exacts(n))])
    if name == "vscale":  # exact factors on released coordinates, float factors on exact ones
        k = exacts(n)[:n // 2] + floats(n)[:n - n // 2]
        args = [Lanes(k), Lanes([(f, g if i < n // 2 else e) for i, (f, g, e) in enumerate(zip(floats(n), floats(n), exacts(n)))])]
    else:
        args = [u, v]
    out = _b_vector(ev, prim, None, args)
    assert out is not NotImplemented
    got = unlane(out, n)
    want = [Interpreter.call_prim(ev, prim, None, [unlane(a, n)[i] for a in args]) for i in range(n)]
    for g, w in zip(got, want):
        assert [type(x) for x in g] == [type(x) for x in w]
        assert all((math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))
                   for x, y in zip(g, w))
    both_exact = [Lanes(exacts(n)), Lanes([(Fraction(1), 2, Fraction(3, 4))] * n)]
    if name != "vscale":
        both_exact = [Lanes([(Fraction(1), 2, 0)] * n), Lanes([(Fraction(1), 2, Fraction(3, 4))] * n)]
    assert _b_vector(ev, prim, None, both_exact) is NotImplemented


def test_comparisons_of_released_floats_are_the_exact_comparisons():
    """Comparing floats is exact: numpy on float lanes (and ints below 2**53, and constants a
    float holds exactly) gives the truth of the exact fold, NaN and infinities included; a
    constant no float holds exactly (1/3) is left to the exact fold."""
    import math

    from fuzzpy.primitives.registry import lookup
    from fuzzpy.runtime.batch import LaneEvaluator, Lanes, unlane
    from fuzzpy.runtime.kernels.arith import _b_compare

    n = 12
    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), n)
    xs = Lanes([0.5, -0.0, 1.0, math.nan, math.inf, -math.inf, 2**53 - 1, 3, 1e-300, 0.1, 7.0, -2.5])
    for name in ("lt", "le", "gt", "ge", "eq", "ne"):
        prim = lookup(name)
        for other in (Fraction(1), 0.1, Fraction(-5, 2), 2**52, Lanes([1.0] * 6 + [math.nan] * 6)):
            out = _b_compare(ev, prim, [xs, other])
            want = [Interpreter.call_prim(ev, prim, None, [x, unlane(other, n)[i]]) for i, x in enumerate(unlane(xs, n))]
            assert out.values() == want and all(type(v) is bool for v in out.values())
    assert _b_compare(ev, lookup("lt"), [xs, Fraction(1, 3)]) is NotImplemented
    assert _b_compare(ev, lookup("lt"), [Lanes([Fraction(1, 3)] * n), 1.0]) is NotImplemented


def test_clip_on_exact_lanes_is_the_exact_fold():
    """clip with public bounds on lanes of exact numbers: the float shortcut strictly inside the
    bounds, the exact fold elsewhere: the same values and types lane by lane, at a hair's
    breadth from either bound, past them, huge, NaN, floats and ints included."""
    import math

    from fuzzpy.primitives.registry import lookup
    from fuzzpy.runtime.batch import LaneEvaluator, Lanes, unlane
    from fuzzpy.runtime.kernels.arith import _b_clip

    eps = Fraction(1, 10**30)
    xs = [Fraction(5, 3), Fraction(0), eps, -eps, Fraction(10) - eps, Fraction(10) + eps, Fraction(10),
          Fraction(10**400), Fraction(-10**400, 3), 2.5, math.nan, math.inf, 7, -3, Fraction(1, 3)]
    n = len(xs)
    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), n)
    prim = lookup("clip")
    for lo, hi in ((Fraction(0), Fraction(10)), (Fraction(-1, 2), Fraction(1, 4)), (0, 0)):
        out = _b_clip(ev, prim, None, [lo, hi, Lanes(list(xs))])
        want = [Interpreter.call_prim(ev, prim, None, [lo, hi, x]) for x in xs]
        got = unlane(out, n)
        assert [type(v) for v in got] == [type(v) for v in want]
        assert all((isinstance(a, float) and math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, want))
    assert _b_clip(ev, prim, None, [Fraction(1, 3), Fraction(1), Lanes(list(xs))]) is NotImplemented


def test_lane_floats_are_as_float():
    """Lane values become the floats a row function sees: as_float's nearest float, saturating
    at the float range (huge Fractions and ints), the same sign of zero."""
    from fuzzpy.runtime.batch import Lanes, _lane_columns
    from fuzzpy.runtime.numbers import as_float

    values = [Fraction(1, 3), Fraction(-10**400, 7), Fraction(10**400), 10**400, -(10**400), 7, 0, -0.0, 2.5,
              Fraction(2**1023) * 2 - 1, Fraction(1, 10**400)]
    col = _lane_columns(Lanes(values), np.arange(len(values)))
    want = [float(as_float(v)) for v in values]
    assert [str(x) for x in col.data.tolist()] == [str(x) for x in want]
    assert want[1] == float("-inf") and want[2] == want[3] == float("inf") and str(want[7]) == "-0.0"


def test_float_lanes_keep_their_array_and_read_as_the_list_reads():
    """Lanes of released floats keep a float64 array next to their list (Lanes.of_floats): every
    reader that uses the array (columns, comparisons, exact ratios, lane selection, the auditor's
    per-run inputs) gets what it gets from the list alone, bit for bit (-0.0, NaN, infinities,
    subnormals), and the values stay Python floats."""
    import math
    import struct

    import fuzzpy.runtime.batch as B
    from fuzzpy.audit.batched import _input_ratios, _released
    from fuzzpy.runtime.batch import Lanes, _lane_columns, select_lanes
    from fuzzpy.runtime.kernels.arith import _exact_floats, _ratios
    from fuzzpy.runtime.kernels.vectors import _number_column

    def bits(xs):
        return [struct.pack("<d", x) for x in xs]

    rng = np.random.default_rng(5)
    special = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1e308, -2.5]
    finite = rng.normal(0, 1e6, 40)
    for arr in (np.concatenate([finite, special]), finite, np.concatenate([finite, [-0.0]])):
        held, plain = Lanes.of_floats(arr), Lanes(arr.tolist())
        n = len(arr)
        # the list is built only when read: one lane, or the length, does not build it
        assert len(held) == n and bits([held.at(i) for i in range(n)]) == bits(arr.tolist())
        assert held._data is B._UNBUILT
        assert all(type(v) is float for v in held.values()) and bits(held.values()) == bits(arr.tolist())
        assert bits(held.data) == bits(arr.tolist()) and held.data is held.data
        held = Lanes.of_floats(arr)  # unbuilt again, for the readers below
        idx = rng.permutation(n)[: n // 2]
        remap = np.full(n, -1)
        remap[idx] = np.arange(len(idx))
        sub = select_lanes(held, idx, remap)
        assert sub.floats is not None and bits(sub.values()) == bits([arr[i] for i in idx.tolist()])
        # _number_column: the values and which lanes hold floats (every lane: True or all ones)
        for read in (lambda v: _number_column(v, n, strict=True), lambda v: (_exact_floats(v, n), True)):
            (got, got_float), (want, want_float) = read(held), read(plain)
            assert bits(got.tolist()) == bits(want.tolist())
            assert np.broadcast_to(got_float, n).all() and np.broadcast_to(want_float, n).all()
        lanes = np.repeat(np.arange(n), 2)
        assert bits(_lane_columns(held, lanes).data.tolist()) == bits(_lane_columns(plain, lanes).data.tolist())
        r_held, r_plain = _ratios(held, n), _ratios(Lanes(arr.tolist()), n)
        assert (r_held is None) == (r_plain is None) == (not np.isfinite(arr).all())
        if r_held is not None:
            assert r_held.fractions() == r_plain.fractions() == [Fraction(x) for x in arr.tolist()]
        assert (_input_ratios(held) is None) == (_input_ratios(plain) is None)
        if _input_ratios(held) is not None:
            assert _input_ratios(held).fractions() == _input_ratios(plain).fractions()
    # -0.0 is given back as it is by a noiseless release: never an exact input
    assert _input_ratios(Lanes.of_floats(np.array([1.0, -0.0]))) is None
    # the auditor's per-run releases: float64 columns become float lanes, other columns lists
    one, pair = _released(finite), _released((finite, finite[::-1]))
    assert one.floats is not None and one.values() == finite.tolist()
    assert [c.values() for c in pair] == [finite.tolist(), finite[::-1].tolist()]
    assert _released([1, 2]).values() == [1, 2] and _released([1, 2]).floats is None


@pytest.mark.parametrize("name", ["vadd", "vsub", "vscale"])
def test_vector_arithmetic_chained_on_float_lanes_is_the_scalar_runs_arithmetic(name):
    """The result of vector arithmetic on float lanes (float lanes with their array) fed to the
    next operation, as a gradient step feeds the next one: lane by lane, the scalar runs' values
    and types."""
    import math

    from fuzzpy.primitives.registry import lookup
    from fuzzpy.runtime.batch import LaneEvaluator, Lanes, unlane
    from fuzzpy.runtime.kernels.vectors import _b_vector

    rng = np.random.default_rng(8)
    n = 50
    pool = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1e308, 5e-324])

    def column():
        x = rng.normal(0, 100, n)
        pick = rng.random(n) < 0.3
        x[pick] = rng.choice(pool, int(pick.sum()))
        return x

    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), n)
    w = tuple(Lanes.of_floats(column()) for _ in range(3))
    g = tuple(Lanes.of_floats(column()) for _ in range(3))
    k = Fraction(-3, 7)
    step = _b_vector(ev, lookup("vscale"), None, [k, g])
    assert all(c.floats is not None for c in step)
    args = [Lanes.of_floats(column()), w] if name == "vscale" else [w, step]
    out = _b_vector(ev, lookup(name), None, args)
    assert out is not NotImplemented and all(c.floats is not None for c in out)
    prim = lookup(name)
    for i, got in enumerate(unlane(out, n)):
        mid = Interpreter.call_prim(ev, lookup("vscale"), None, [k, unlane(g, n)[i]])
        lane_args = [unlane(args[0], n)[i], unlane(w, n)[i]] if name == "vscale" else [unlane(w, n)[i], mid]
        want = Interpreter.call_prim(ev, prim, None, lane_args)
        assert [type(x) for x in got] == [type(x) for x in want] == [float] * 3
        assert all((math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))
                   for x, y in zip(got, want))


def test_the_pairs_of_a_plain_bag_are_built_once_per_evaluator():
    """An iterative program reads the same table at every step: its (lane, row) pairs and their
    gathered rows are built once per evaluator and bag object, never shared with another bag."""
    from fuzzpy.runtime.batch import LaneEvaluator, product

    ev = LaneEvaluator(RunState(RandomSource.seeded(0)), 3)
    db, other = frame(4), frame(4)
    first = product(ev, db)
    assert product(ev, db) is first and first.selected() is first.selected()
    assert product(ev, other) is not first
    assert product(LaneEvaluator(RunState(RandomSource.seeded(0)), 3), db) is not first
    rows = first.selected().materialise()
    assert rows.equals(pd.concat([db] * 3, ignore_index=True))
    assert first.lanes.tolist() == [0] * 4 + [1] * 4 + [2] * 4


@pytest.mark.parametrize("name", ["max", "min", "div", "lt"])
def test_an_operation_on_the_same_lane_objects_is_computed_once_per_node(name, monkeypatch):
    """`rate / max n 1` at every step of a gradient descent: a node evaluated again on the same
    argument objects gives its last result without computing it again; other arguments (equal
    values in new objects, another node) compute again.  max and min of floats against an exact
    constant compare as floats, and every lane's value and type is the scalar fold's."""
    import math

    import fuzzpy.runtime.batch as B
    from fuzzpy.primitives.registry import lookup
    from fuzzpy.typesystem import ir as I

    rng = np.random.default_rng(3)
    n = 40
    x = rng.normal(1, 2, n)
    x[:6] = [0.0, -0.0, 1.0, 5e-324, -1e300, 1 - 2**-53]
    ev = B.LaneEvaluator(RunState(RandomSource.seeded(0)), n)
    prim, one = lookup(name), Fraction(1)
    node, other = I.IPrim(name, []), I.IPrim(name, [])
    computed = []  # one entry per call of the three computing paths

    def spy(real):
        def counted(*a):
            computed.append(real)
            return real(*a)
        return counted

    for fn in ("_b_arith", "_b_compare", "_b_exact"):
        monkeypatch.setattr(KA, fn, spy(getattr(KA, fn)))
    lanes = B.Lanes.of_floats(x)
    first = KA._b_numeric(ev, prim, node, [lanes, one])
    k = len(computed)
    assert k > 0 and KA._b_numeric(ev, prim, node, [lanes, one]) is first and len(computed) == k
    again = KA._b_numeric(ev, prim, node, [B.Lanes.of_floats(x.copy()), one])
    assert again is not first and len(computed) == 2 * k
    assert KA._b_numeric(ev, prim, other, [lanes, one]) is not first and len(computed) == 3 * k
    for i, got in enumerate(B.unlane(first, n)):
        want = Interpreter.call_prim(ev, prim, node, [float(x[i]), one])
        assert type(got) is type(want) and got == want
    if name in ("max", "min"):  # the picked operand's exact value: the float's, or 1
        assert all(v == (max if name == "max" else min)(Fraction(f), one) for v, f in zip(B.unlane(first, n), x))
        assert math.copysign(1, float(B.unlane(first, n)[1])) == 1  # -0.0 as an exact 0


def test_a_vsum_over_empty_bags_is_zero_in_every_lane_without_running_its_row_function(monkeypatch):
    """Every lane's bag empty (an audit's empty table): each coordinate is the exact 0 the
    reference gives (it does not call the row function on an empty bag), in every lane, with
    the same releases batched or not; a row function is still run on pairs when a row exists."""
    import fuzzpy.runtime.batch as B

    pairs = []
    real_rows = B.lane_rows

    def lane_rows(ev, fn, b, size=None):
        pairs.append(len(b.rows))
        return real_rows(ev, fn, b, size)

    monkeypatch.setattr(B, "lane_rows", lane_rows)
    report = check_source(PROGRAMS["candidate tuple in a vsum"], "t.fz")
    assert report.ok
    for rows in (0, 1):
        pairs.clear()
        batched, unbatched = both(report, {"db": frame(rows=rows, nan=False)}, 2)
        assert batched == unbatched and batched[0]
        assert pairs == ([] if rows == 0 else [3])  # 3 candidates x 1 row
    pairs.clear()
    ev = B.LaneEvaluator(RunState(RandomSource.seeded(0)), 4)
    empty = B.LaneBag(frame(rows=3), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 4)
    node = type("Node", (), {"info": {"size": 2, "bound": Fraction(1)}})()
    out = KV._b_vsum(ev, None, node, [Fraction(1), B.Closure({}, ["r"], None), empty])
    assert [B.unlane(c, 4) for c in out] == [[Fraction(0)] * 4] * 2
    assert all(type(v) is Fraction for c in out for v in B.unlane(c, 4)) and pairs == []


# ---- generated score chains ---------------------------------------------------------------------------
#
# Scores shaped like the tree's: an `else if` chain on the candidate whose branches call one
# function on different arguments (partitions by different keys, different bags, numbers of
# different kinds), mixed with branches of other shapes and conditions that end the chain.

CHAIN_HELPERS = SCHEMA + '''
function lsum (xs : list num) : num { case xs of { [] => 0 | h :: t => h + lsum t } }
function q (g : bag T) : num { max (count (filter (fun r -> r.x > 4) g)) (count g - 3) }
function quality ps { lsum (values (pmap q ps)) }
function h (b : bag T) (t : num) : num { count (filter (fun r -> r.x > t) b) }
function g (v : num) : num { v * 3 - 1 / 2 }
'''


def _score_chain(rng: random.Random) -> str:
    def bag() -> str:
        return rng.choice(["db", "(filter (fun r -> r.x > 3) db)", "(filter (fun r -> r.n < c) db)"])

    def num(public: bool = False) -> str:
        return rng.choice(["c", "c / 3", "2", "0.5"] + ([] if public else ["count db"]))

    def branch() -> str:
        key = rng.choice(["r.k", "r.n", "bin 3 r.x", "if r.x > c then 0 else r.n"])
        return rng.choice([f"quality (groupby (fun r -> {key}) {bag()})"] * 3 + [f"h {bag()} ({num(True)})"] * 2
                          + [f"g ({num()})", f"count {bag()}", num()])

    def cond() -> str:
        k = rng.choice(["0", "1", "2", "3", "5", "2.5"])
        return rng.choice([f"c == {k}", f"c < {k}", f"c >= {k}", f"{k} == c", f"c != {k}", f"c * 2 < {k}"])

    chain = branch()
    for _ in range(rng.randint(1, 6)):
        chain = f"if {cond()} then {branch()} else {chain}"
    return chain


def _chain_program(seed: int) -> tuple[str, random.Random]:
    rng = random.Random(seed)
    cands = rng.choice(["[0, 1, 2, 3, 4, 5, 7]", "[1, 2, 2.5, 3]", "[5, 0, 3, 1, 2]"])
    chain = _score_chain(rng)
    return CHAIN_HELPERS + f"function main (db : bag T) : fuzzy num {{ exponential 1 {cands} (fun c -> {chain}) }}", rng


CHAIN_SEEDS = range(60)


@pytest.mark.parametrize("seed", CHAIN_SEEDS)
def test_generated_score_chains_release_the_same_values_batched_or_not(seed, monkeypatch):

    source, rng = _chain_program(seed)
    report = check_source(source, "t.fz")
    assert report.ok, (source, report.diagnostics)
    monkeypatch.setattr(KP, "FLAT_PAIRS", rng.choice([KP.FLAT_PAIRS, 30]))
    for table_seed in (seed, seed + 100):
        batched, unbatched = both(report, {"db": frame(seed=table_seed, nan=bool(table_seed % 2))}, seed)
        assert batched == unbatched, source


def test_a_chain_is_decided_alike_on_lists_and_on_arrays(monkeypatch):
    """`_chain_branches` decides a few lanes on Python lists and many on numpy arrays: on the
    generated chains both give every lane the same branch."""
    import fuzzpy.runtime.batch as B

    real = B.LaneEvaluator._chain_branches
    compared = []

    def both_ways(self, node, env, truth):
        monkeypatch.setattr(B, "COMPILED_LANES", 10**6)
        on_lists = real(self, node, env, truth)
        monkeypatch.setattr(B, "COMPILED_LANES", 0)
        on_arrays = real(self, node, env, truth)
        monkeypatch.setattr(B, "COMPILED_LANES", 64)
        assert on_lists[0].tolist() == on_arrays[0].tolist() and on_lists[1] == on_arrays[1]
        compared.append(len(on_lists[1]))
        return on_lists

    monkeypatch.setattr(B.LaneEvaluator, "_chain_branches", both_ways)
    for seed in CHAIN_SEEDS:
        report = check_source(_chain_program(seed)[0], "t.fz")
        both(report, {"db": frame(seed=seed, nan=bool(seed % 2))}, seed)
    assert len(compared) >= 30 and max(compared) >= 4


def _string_chain_program(seed: int) -> str:
    """A score whose chain compares the candidate with strings, over candidates in some order."""
    rng = random.Random(seed)
    cands = ["a", "b", "c", "d", "e"]
    rng.shuffle(cands)
    branches = ["quality (groupby (fun r -> r.k) db)", "quality (groupby (fun r -> r.n) db)", "h db 2",
                "count db", "g (count db)", "3"]
    chain = rng.choice(branches)
    for _ in range(rng.randint(1, 5)):
        k = rng.choice("abcdez")
        cond = rng.choice([f'c == "{k}"', f'"{k}" == c', f'c != "{k}"'])
        chain = f"if {cond} then {rng.choice(branches)} else {chain}"
    listed = ", ".join(f'"{c}"' for c in cands[:rng.randint(2, 5)])
    return CHAIN_HELPERS + f"function main (db : bag T) : fuzzy string {{ exponential 1 [{listed}] (fun c -> {chain}) }}"


def test_a_chain_on_strings_is_remembered_as_its_own_decision(monkeypatch):
    """A chain comparing the candidate with strings is decided once for the strings it reads
    (`_CHAINS`): whenever it is decided from the table, deciding it afresh gives every lane the
    same branch, whatever order and subset of candidates came before; runs agree unbatched."""
    import fuzzpy.runtime.batch as B

    B._CHAINS.clear()
    real = B.LaneEvaluator._chain_branches
    checked = []

    def checking(self, node, env, truth):
        hit = B._CHAINS.get(self._chain_key(node, env, truth.tolist()) or ())
        got = real(self, node, env, truth)
        if hit is not None and self.n <= B.COMPILED_LANES:
            fresh = self._decide_chain(node, env, truth.tolist())
            assert got[0].tolist() == fresh[0].tolist() and got[1] == fresh[1]
            checked.append(len(got[1]))
        return got

    monkeypatch.setattr(B.LaneEvaluator, "_chain_branches", checking)
    for seed in range(40):
        report = check_source(_string_chain_program(seed), "t.fz")
        assert report.ok, report.diagnostics
        for table_seed in (seed, seed + 1):
            batched, unbatched = both(report, {"db": frame(seed=table_seed)}, seed)
            assert batched == unbatched
    assert len(checked) >= 20 and max(checked) >= 3


def test_generated_score_chains_reach_the_merged_paths(monkeypatch):
    """The generated chains are not all decided by the fallback: many batch, and among them
    many merge branches into one call, run `pmap` over every lane's partition and call compiled
    functions per lane."""
    import fuzzpy.runtime.batch as B

    seen = {"batched": 0, "one call": 0, "flat": 0, "blocks": 0, "gathered": 0}
    real_call, real_flat, real_run = B.LaneEvaluator._one_call, KP._lanes_of_partitions, B._run

    def spy_call(self, *args):
        seen["one call"] += 1
        return real_call(self, *args)

    def spy_flat(partitions):
        out = real_flat(partitions)
        seen["flat"] += out is not None
        seen["blocks"] += out is not None and out.blocks is not None
        seen["gathered"] += out is not None and out.blocks is None
        return out

    def spy_run(ctx, fn, arg, n):
        out = real_run(ctx, fn, arg, n)
        seen["batched"] += out is not None and type(arg) is B.Lanes
        return out

    monkeypatch.setattr(B.LaneEvaluator, "_one_call", spy_call)
    monkeypatch.setattr(KP, "_lanes_of_partitions", spy_flat)
    monkeypatch.setattr(B, "_run", spy_run)
    for seed in CHAIN_SEEDS:
        report = check_source(_chain_program(seed)[0], "t.fz")
        both(report, {"db": frame(seed=seed, nan=bool(seed % 2))}, seed)
    assert seen["batched"] >= 45 and seen["one call"] >= 10 and seen["flat"] >= 10, seen
    assert seen["blocks"] >= 2 and seen["gathered"] >= 10, seen  # both kinds of flattened bags


BLOCKS_PROGRAM = CHAIN_HELPERS + '''
function p (g : bag T) : num { let c = groupby (fun r -> r.k) g; max (count (part c "a")) (count (part c "c")) + count g }
function qual ps { lsum (values (pmap p ps)) }
function score (db : bag T) (c : num) : num {
  if c == 0 then qual (groupby (fun r -> r.k) db)
  else if c == 1 then qual (groupby (fun r -> r.n) db)
  else if c == 2 then qual (groupby (fun r -> bin 3 r.x) db)
  else quality (groupby (fun r -> r.n) (filter (fun r -> r.n > 0) db))
}
function main (db : bag T) : fuzzy num {
  let b = filter (fun r -> r.n != 2) db;
  exponential 1 [0, 1, 2, 3] (fun c -> score b c)
}'''


@pytest.mark.parametrize("one_pass", [1 << 16, 0])  # the blocks grouped in one bincount, or one each
@pytest.mark.parametrize("nan", [False, True])
def test_partitions_of_one_bag_are_flattened_as_blocks(nan, one_pass, monkeypatch):
    """The candidates' partitions of one bag, every row in a part, are one lane bag of blocks
    (`LaneBag.of_blocks`): grouping it is a bincount per block, and counting, filtering and
    reading its groups give what the gathered pairs give.  With a key that leaves rows out (NaN
    in x: `bin 3 r.x` has no part for them) the pairs are gathered as before."""

    kinds, grouped = [], []
    real_flat, real_blocks = KP._lanes_of_partitions, KP._groupby_blocks

    def spy_flat(partitions):
        out = real_flat(partitions)
        kinds.append(None if out is None else out.blocks is not None)
        return out

    def spy_blocks(lb, full, keys):
        grouped.append(len(lb.blocks[1]))
        return real_blocks(lb, full, keys)

    monkeypatch.setattr(KP, "_lanes_of_partitions", spy_flat)
    monkeypatch.setattr(KP, "_groupby_blocks", spy_blocks)
    monkeypatch.setattr(KP, "ONE_PASS_PAIRS", one_pass)
    report = check_source(BLOCKS_PROGRAM, "t.fz")
    assert report.ok, report.diagnostics
    for seed in range(4):
        batched, unbatched = both(report, {"db": frame(rows=60, seed=seed, nan=nan)}, seed)
        assert batched == unbatched
    # the three `qual` candidates are one call; the fourth's partition is of another bag
    assert kinds == [not nan] * 4 and grouped == ([] if nan else [3] * 4)


@pytest.mark.parametrize("one_pass", [1 << 16, 0])
def test_a_lane_bag_of_blocks_reads_as_its_pairs(one_pass, monkeypatch):
    """rows, lanes, counts and the groups of `_groupby_blocks` are those of the same pairs
    gathered: block by block, in row order within a block (the blocks grouped in one bincount
    or in one each)."""
    from fuzzpy.runtime.batch import LaneBag
    from fuzzpy.runtime.kernels.bags import _b_count
    from fuzzpy.runtime.kernels.partitions import _groupby_blocks

    monkeypatch.setattr(KP, "ONE_PASS_PAIRS", one_pass)

    rng = np.random.default_rng(4)
    base = pd.DataFrame({"x": np.arange(50)})
    rows = np.sort(rng.choice(50, 30, replace=False))
    sizes = [3, 1, 4]
    codes = [rng.integers(0, m, len(rows)).astype(np.int8) for m in sizes]
    codes[2][codes[2] == 3] = 0  # the last block's last part is empty: counted 0, not left out
    firsts = np.cumsum([0] + sizes[:-1]).tolist()
    blocks = LaneBag.of_blocks(base, rows, [(c, f, m) for c, f, m in zip(codes, firsts, sizes)], sum(sizes))
    counts = _b_count(None, None, None, [blocks]).data
    gathered = LaneBag(base, np.concatenate([rows] * 3), np.concatenate([c + f for c, f in zip(codes, firsts)]), 8)
    assert counts.tolist() == np.bincount(gathered.lanes, minlength=8).tolist()
    assert blocks.rows.tolist() == gathered.rows.tolist() and blocks.lanes.tolist() == gathered.lanes.tolist()
    full = rng.integers(0, 3, 50)
    blocks = LaneBag.of_blocks(base, rows, [(c, f, m) for c, f, m in zip(codes, firsts, sizes)], sum(sizes))
    groups = _groupby_blocks(blocks, full, ("u", "v", "w"))
    assert blocks._lanes is None  # grouping read the blocks, not the pairs
    pair_codes = full[gathered.rows]
    for j, key in enumerate(("u", "v", "w")):
        keep = pair_codes == j
        want = np.bincount(gathered.lanes[keep], minlength=8)
        assert groups[key].counts.tolist() == want.tolist()
        assert groups[key].rows.tolist() == gathered.rows[keep].tolist()
        assert groups[key].lanes.tolist() == gathered.lanes[keep].tolist()


@pytest.mark.parametrize("one_pass", [1 << 16, 0])
def test_blocks_with_more_cells_than_int16_holds_are_counted_exactly(one_pass, monkeypatch):
    """Many parts over a few rows: (lane, key) cells past 2^15 are counted in a wider type."""
    from fuzzpy.runtime.batch import LaneBag
    from fuzzpy.runtime.kernels.partitions import _groupby_blocks

    monkeypatch.setattr(KP, "ONE_PASS_PAIRS", one_pass)
    rng = np.random.default_rng(7)
    base = pd.DataFrame({"x": np.arange(40)})
    rows = np.arange(0, 40, 2)
    sizes = [9000, 2, 9000]  # 18,002 lanes x 3 keys: 54,006 cells
    codes = [rng.integers(m - 20 if m > 20 else 0, m, len(rows)).astype(np.int16) for m in sizes]
    firsts = np.cumsum([0] + sizes[:-1]).tolist()
    full = rng.integers(0, 3, 40)
    groups = _groupby_blocks(LaneBag.of_blocks(base, rows, list(zip(codes, firsts, sizes)), sum(sizes)), full,
                             ("u", "v", "w"))
    lanes = np.concatenate([c.astype(np.int64) + f for c, f in zip(codes, firsts)])
    keys = np.tile(full[rows], 3)
    for j, key in enumerate(("u", "v", "w")):
        assert groups[key].counts.tolist() == np.bincount(lanes[keys == j], minlength=sum(sizes)).tolist()


def test_threshold_floats_are_the_floats_a_row_function_compares():
    """_threshold_floats gives as_float of every candidate, bit for bit: Fractions rounded as
    float() rounds them (huge ones saturating, tiny ones to subnormals or zero), ints, floats,
    numpy numbers; a bool or anything else is not a threshold."""
    from fuzzpy.runtime.kernels.bags import _threshold_floats
    from fuzzpy.runtime.numbers import as_float

    vals = [Fraction(1, 3), Fraction(-2, 7), Fraction(10**400, 3), Fraction(-(10**400), 7), Fraction(1, 10**400),
            Fraction(3, 2**1074 * 4), Fraction(2**53 + 1), Fraction(10**17 + 1, 10), 5, -(10**400), 2**53 + 1,
            0.1, -0.0, float("inf"), float("nan"), np.float64(2.5), np.int64(7), Fraction(0)]
    rng = random.Random(3)  # ratios of large ints: rounding the two ints first would round twice
    vals += [Fraction(rng.getrandbits(90) + 1, rng.getrandbits(60) + 1) for _ in range(300)]
    got = _threshold_floats(vals)
    want = [as_float(v) for v in vals]
    assert [np.float64(g).tobytes() for g in got] == [np.float64(w).tobytes() for w in want]
    assert _threshold_floats([Fraction(1), True]) is None and _threshold_floats([1, "a"]) is None


def test_chain_truths_are_remembered_for_strings_only():
    """An else-if chain on the candidates remembers its comparisons' truths for the same strings
    (the same truths again at the next node); a chain comparing numbers on lanes (which may come
    from private counts) leaves nothing in the process-wide table.  Values are the unbatched run's."""
    import fuzzpy.runtime.batch as B

    src = SCHEMA + """function s (b : bag T) (c : string) : num {
      if c == "a" then count b else if c == "b" then 2 * count b else if c == "c" then 3 else 4 }
    function t (b : bag T) (n : num) : num {
      if n == 0 then count b else if n == 1 then 2 * count b else if n == 2 then 3 else 4 }
    function main (db : bag T) : fuzzy (string, num) {
      sample a = exponential 1 ["a", "b", "c", "d"] (fun c -> s db c);
      sample m = exponential 1 [0, 1, 2, 3] (fun n -> t db n);
      return (a, m) }"""
    report = check_source(src, "t.fz")
    tables = {"db": frame()}
    B._TRUTHS.clear()
    B._CHAINS.clear()
    chains = []
    real = B.LaneEvaluator._simple_truth
    B.LaneEvaluator._simple_truth = lambda self, cond, env: chains.append(cond.args[0].name) or real(self, cond, env)
    try:
        batched, unbatched = both(report, tables)
        assert batched == unbatched
        assert sorted(set(chains)) == ["c", "n"]  # both chains were decided lane by lane
        chains.clear()
        assert list(both(report, tables)) == [batched, unbatched]
    finally:
        B.LaneEvaluator._simple_truth = real
    # the next time, the chain on strings is decided at once from what it read, the other again
    assert sorted(set(chains)) == ["n"]
    assert B._TRUTHS and all(all(type(x) is str for lane in key[1] for x in lane) for key in B._TRUTHS)
    assert B._CHAINS and all(type(x) is str for key in B._CHAINS for lanes in key[1:][1] for x in lanes)
    remembered = dict(B._TRUTHS), dict(B._CHAINS)
    assert both(report, tables)[0] == batched
    assert (dict(B._TRUTHS).keys(), dict(B._CHAINS).keys()) == (remembered[0].keys(), remembered[1].keys())
