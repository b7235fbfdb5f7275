"""Neighbouring synthetic tables: exactly the add/remove-one-row relation, from the schema only."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
from conftest import check

from fuzzpy.audit.neighbours import (
    base_tables,
    candidate_rows,
    column_values,
    edge_rows,
    make_frame,
    row_moves,
    string_literals,
)
from fuzzpy.audit.programs import program_pairs
from fuzzpy.runtime.data import load_table

SRC = '''schema T { x : num[-2.5, 10], n : int[1, 6], k : cat{"a", "b", "c"}, f : bool, s : string, u : num }
function main (db : bag T) : fuzzy num { laplace 0.5 (count (filter (fun r -> r.s == "yes") db)) }
'''


def schema():
    report = check(SRC)
    assert report.ok
    return report, report.schemas["T"]


def test_values_cover_bounds_midpoints_categories_and_literals():
    _, s = schema()
    x, n, k, f, st, u = (column_values(c, ["yes"]) for c in s.columns)
    assert x == [-2.5, 3.75, 10.0, 0.0]
    assert n == [1, 4, 6] and all(isinstance(v, int) for v in n)  # midpoint 3.5 rounds to a whole 4
    assert k == ["a", "b", "c"] and f == [False, True]
    assert st == ["yes", "x"]
    assert column_values(s.columns[4], [" pad", "NA", "", "ok"]) == ["ok", "x"]  # never loadable
    assert u == [-1000.0, 0.0, 1000.0]  # unbounded: a finite reach either side
    assert string_literals(SRC) == ["a", "b", "c", "yes"]


def test_rows_are_what_the_loader_can_produce(tmp_path):
    _, s = schema()
    rows = candidate_rows(s, ["yes"], np.random.default_rng(0))
    low, mid, high = edge_rows(s, ["yes"])
    assert low == (-2.5, 1, "a", False, "yes", -1000.0) and high == (10.0, 6, "c", True, "x", 1000.0)
    assert {low, mid, high} <= set(rows) and len(rows) == len(set(rows))
    frame = make_frame(s, rows)
    csv = tmp_path / "t.csv"
    frame.assign(f=frame.f.map({True: "true", False: "false"})).to_csv(csv, index=False)
    loaded = load_table(csv, s, table="db")
    pd.testing.assert_frame_equal(frame, loaded)  # same values, same dtypes: nothing clamped or dropped


def test_empty_frame_has_the_schema_dtypes():
    _, s = schema()
    empty = make_frame(s, [])
    assert list(empty.columns) == ["x", "n", "k", "f", "s", "u"] and len(empty) == 0
    text = "str" if int(pd.__version__.split(".")[0]) >= 3 else "object"  # pandas 2 has no `str` dtype
    assert [str(t) for t in empty.dtypes] == ["float64", "int64", "category", "bool", text, "float64"]


def test_every_pair_adds_exactly_one_row():
    report, s = schema()
    pairs = program_pairs(report, np.random.default_rng(0), 1000)
    assert len(pairs) > 50
    sizes = set()
    for p in pairs:
        a, b = p.a.rows("db"), p.b.rows("db")
        assert len(b) == len(a) + 1 and b[:-1] == a
        sizes.add(len(a))
        assert p.claimed == Fraction(1, 2)
    assert sizes == {0, 1, 2}
    assert len(base_tables(s, ["yes"])) == 5
    shown = pairs[0].shown(pairs[0].b)
    assert set(shown) == {"db"} and set(shown["db"][0]) == {"x", "n", "k", "f", "s", "u"}


def test_climb_moves_stay_in_the_domain():
    _, s = schema()
    _, mid, _ = edge_rows(s, ["yes"])
    moved = row_moves(s, mid, 0.5, ["yes"])
    xs = sorted({r[0] for r in moved if r[1:] == mid[1:]})
    assert xs == [-2.5, 10.0]  # mid 3.75 +- 0.5 * 12.5, clipped to the bounds
    small = row_moves(s, mid, 0.25, ["yes"])
    assert all(r[2] == mid[2] for r in small)  # discrete columns move only at the first step
    assert all(1 <= r[1] <= 6 and isinstance(r[1], int) for r in moved + small)
