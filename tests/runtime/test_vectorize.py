"""Row functions as column operations: what vectorises, what falls back, and that both agree."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import RunState, run_program
from fuzzpy.runtime.kernels.partitions import category_codes
from fuzzpy.runtime.samplers import RandomSource
from fuzzpy.runtime.values import MaskedBag, bag_from_rows, bag_rows
from fuzzpy.runtime.vectorize import NotVectorisable, Vec, to_frame, where

SCHEMA = 'schema T { x : num[0, 10], y : int[0, 5], k : cat{"a", "b"}, k2 : cat{"b", "a"}, s : string }\n'
CSV = "x,y,k,k2,s\n1.5,0,a,a,foo\n7,3,b,a,bar\n10,5,a,b,foo\n0,1,b,b,baz\n"


@pytest.fixture
def db(tmp_path) -> pd.DataFrame:
    (tmp_path / "t.csv").write_text(CSV)
    report = check_source(SCHEMA + "function main (db : bag T) : fuzzy num { return 0 }", "t.fz")
    return load_table(tmp_path / "t.csv", report.schemas["T"], table="db")


def run(body: str, db, ret: str = "fuzzy num", extra: str = "", vectorise: bool = True):
    report = check_source(SCHEMA + extra + f"\nfunction main (db : bag T) : {ret} {{ {body} }}", "t.fz")
    assert all(d.code == "E0302" for d in report.diagnostics), [d.message for d in report.diagnostics]
    return run_program(report.entry_instance, {"db": db}, RandomSource.seeded(0), vectorise=vectorise)


def agree(body: str, db, **kw):
    fast, slow = run(body, db, **kw), run(body, db, vectorise=False, **kw)
    assert fast.value == slow.value
    return fast


# ---- what vectorises --------------------------------------------------------------------------------

@pytest.mark.parametrize("body, expected", [
    ("return (sum (map (fun r -> r.x * 2 + 1) db))", 2 * 18.5 + 4),
    ("return (sum (map (fun r -> let a = r.x; let b = a - 1; clip 0 20 (a * b)) db))", 0.75 + 20 + 20 + 0),
    ("return (count (filter (fun r -> if r.y > 2 then r.s == \"foo\" else r.k == \"b\") db))", 2.0),
    ("return (sum (map (fun r -> (fun z -> z + r.y) r.x) db))", 18.5 + 9),
    ("return (sum (map (fun r -> (r.x, r.y).2) db))", 9.0),
    ("return (sum (map (fun r -> {a = r.x, b = 1}.b) db))", 4.0),
    ("return (count (filter (fun r -> true) db))", 4.0),
    ("return (sum (map (fun r -> abs (0 - r.x)) db))", 18.5),
])
def test_vectorised_constructs(db, body, expected):
    r = agree(body, db)
    assert r.fallbacks == 0
    assert r.value == expected


def test_records_and_tuples_become_frames(db):
    r = agree("return (sum (map (fun q -> clip 0 100 (q.a + q.c.1)) (map (fun r -> {a = r.x, b = r.s, c = (r.y, 2)}) db)))",
              db)
    # a tuple inside a record cannot be a column: that map falls back, and so does the one that
    # reads the resulting column of tuples (q.c.1); the frames they exchange are ordinary bags
    assert r.fallbacks == 2
    assert r.value == 18.5 + 9


def test_if_over_records_is_a_where_per_field(db):
    r = agree("return (sum (map (fun q -> q.u) (map (fun r -> if r.x > 5 then {u = r.x, v = 1} else {u = 0, v = 2}) db)))",
              db)
    assert r.fallbacks == 0 and r.value == 17.0


# ---- what falls back (docs/runtime.md lists these) --------------------------------------------------

@pytest.mark.parametrize("body, extra, expected", [
    ("return (sum (map (fun r -> case (inl r.x : num + num) of { inl a => clip 0 10 a | inr b => 0 }) db))", "", 18.5),
    ("return (sum (map (fun r -> clip 0 50 (tri r.y)) db))",
     "function tri (n : num) : num { if n <= 0 then 0 else n + tri (n - 1) }", 0 + 6 + 15 + 1),
    ("return (sum (map (fun r -> clip 0 50 (hd (r.x :: []))) db))",
     "function hd (l : list num) : num { case l of { [] => 0 | h :: t => h } }", 18.5),
])
def test_fallbacks_give_the_same_answer(db, body, extra, expected):
    r = agree(body, db, extra=extra)
    assert r.fallbacks >= 1
    assert r.value == expected


COUNTED = "function scale (x : num) (i : num) : num { if i <= 0 then x else scale (x / 2) (i - 1) }"


def test_a_recursion_on_a_public_counter_given_a_column_is_vectorised(db):
    """Rule Count checks `scale x 3` as one recursive instance; its `if` is on the public counter,
    not on the column, so it stops on columns as it does for each row: no fallback."""
    r = agree("return (sum (map (fun r -> clip 0 10 (scale r.x 3)) db))", db, extra=COUNTED)
    assert r.fallbacks == 0 and r.value == 18.5 / 8


def test_columns_past_the_call_budget_fall_back_to_rows_with_their_own(db, monkeypatch):
    from fuzzpy import limits

    monkeypatch.setattr(limits, "ROW_CALLS", 2)  # scale x 3 makes 4 calls: every row is missing
    r = agree("return (sum (map (fun r -> clip 0 10 (scale r.x 3)) db))", db, extra=COUNTED)
    assert r.fallbacks >= 1 and r.value == 0


def test_categories_with_different_declared_orders_compare_by_value(db):
    # Whichever path pandas allows, the answer is the row-by-row one.
    assert agree("return (count (filter (fun r -> r.k == r.k2) db))", db).value == 2.0


# ---- the pieces ---------------------------------------------------------------------------------------

def test_to_frame_shapes():
    col = Vec(pd.Series([1.0, 2.0]))
    assert to_frame(col, 2).tolist() == [1.0, 2.0]
    assert to_frame(3.0, 2).tolist() == [3.0, 3.0]
    assert to_frame("z", 2).tolist() == ["z", "z"]
    frame = to_frame({"a": col, "b": True}, 2)
    assert list(frame.columns) == ["a", "b"] and frame["b"].tolist() == [True, True]
    pairs = to_frame((col, Vec(np.array([5, 6]))), 2)
    assert list(pairs.columns) == [0, 1]
    assert bag_rows(pairs) == [(1.0, 5.0), (2.0, 6.0)]
    for bad in ({"a": {"b": col}}, (1.0, (col,)), [col], ()):
        with pytest.raises(NotVectorisable):
            to_frame(bad, 2)


def test_where_needs_matching_shapes():
    c = np.array([True, False])
    assert where(c, {"a": 1.0}, {"a": Vec(np.array([5.0, 6.0]))})["a"].data.tolist() == [1.0, 6.0]
    with pytest.raises(NotVectorisable):
        where(c, {"a": 1.0}, {"b": 1.0})
    with pytest.raises(NotVectorisable):
        where(c, (1.0,), (1.0, 2.0))


def test_rows_round_trip():
    for rows in ([{"a": 1.0, "b": "x"}, {"a": 2.0, "b": "y"}], [(1.0, True), (2.0, False)], [1.0, 2.0],
                 [("inl", 1.0), ("inr", "s")]):
        assert bag_rows(bag_from_rows(rows)) == rows
    assert bag_rows(bag_from_rows([])) == []


def test_category_codes_follow_the_declared_keys():
    keys = ("a", "b", "c")
    same = pd.Series(pd.Categorical.from_codes([0, 2, -1, 1], categories=["a", "b", "c"]))
    assert category_codes(same, keys).tolist() == [0, 2, -1, 1]
    other = pd.Series(pd.Categorical.from_codes([0, 1, 2], categories=["c", "z", "a"]))
    assert category_codes(other, keys).tolist() == [2, -1, 0]
    plain = pd.Series(["b", "zz", None, "a"], dtype=object)
    assert category_codes(plain, keys).tolist() == [1, -1, -1, 0]


@pytest.mark.parametrize("k", [3, 40])
def test_group_counts_ignore_rows_without_a_key(k):
    from fuzzpy.runtime.kernels.partitions import group_counts as _group_counts

    codes = np.array([0, 1, -1, 1, k - 1, -1, 0, 0], dtype=np.int8)
    expected = [3, 2] + [0] * (k - 3) + [1]
    assert _group_counts(codes, k).tolist() == expected


def test_groupby_of_a_filtered_bag_never_materialises_rows(db):
    from fuzzpy.runtime.evaluator import Interpreter
    from fuzzpy.runtime.kernels.partitions import _groupby as _run_groupby
    from fuzzpy.runtime.state import Context
    from fuzzpy.runtime.values import Closure

    report = check_source(SCHEMA + 'function main (db : bag T) : fuzzy (parts {"a", "b"} num) '
                          '{ return (pmap (fun g -> count g) (groupby (fun r -> r.k) db)) }', "t.fz")
    groupby = report.entry_instance.body.value.args[1]
    key = groupby.args[0]
    filtered = MaskedBag(db, db["x"].to_numpy() > 1)
    # batch=False: no remembered key codes, so the key runs on the filtered rows
    ctx = Context(Interpreter(RunState(RandomSource.seeded(0), batch=False)), groupby.info, None)
    parts = _run_groupby(ctx, Closure({}, key.params, key.body), filtered)
    assert list(parts) == ["a", "b"] and [len(p) for p in parts.values()] == [2, 1]
    assert all(p._frame is None and p._mask is None for p in parts.values())  # sizes from one bincount
    assert parts["b"].materialise()["x"].tolist() == [7.0]
    assert filtered._columns.keys() == {"k"}
    # with them (the default), the key's codes over the whole table are computed once and reused:
    # the filtered bag is not even read column by column
    state = RunState(RandomSource.seeded(0))
    ctx = Context(Interpreter(state), groupby.info, None)
    filtered = MaskedBag(db, db["x"].to_numpy() > 1)
    parts = _run_groupby(ctx, Closure({}, key.params, key.body), filtered)
    assert [len(p) for p in parts.values()] == [2, 1] and parts["b"].materialise()["x"].tolist() == [7.0]
    assert filtered._columns == {} and len(state.memo) == 1
    again = _run_groupby(ctx, Closure({}, key.params, key.body), MaskedBag(db, db["x"].to_numpy() <= 1))
    assert len(state.memo) == 1 and sum(len(p) for p in again.values()) == len(db) - 3
