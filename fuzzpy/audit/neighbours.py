"""Neighbouring synthetic tables, built from a program's schema alone.

The checker's privacy unit is one row: neighbouring tables differ by adding or removing one row
(docs/language.md).  Every pair here is (D, D + r): a small base table D and the same table with
one more row r.  Both directions of each event are tested, so removal is covered as well.

Rows are what `load_table` can produce for the schema (numbers inside their declared bounds,
integers whole, declared categories only), so every pair is one the checker's proof speaks about:
* values: each number's bounds and midpoint (and 0 when inside), both booleans, every declared
  category, and for strings the program's own string literals (what its filters compare with);
* rows: all-low, all-mid, all-high, the mid row with one column changed to each of its values,
  and a few random rows;
* bases: the empty table, one-row tables (low, mid, high) and the two-row table (low, high).
The tables are synthetic, never private, so they may be shown in a witness.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..runtime.data import (
    MISSING_MARKERS,
    float_bounds,  # the loader's own rule for what a number may be
)
from ..typesystem.types import Bool, Cat, Column, Num, Schema, Str
from .search import Pair

Row = tuple[Any, ...]           # one value per schema column, in order
UNBOUNDED_REACH = 1000.0        # how far to go on a side a number has no bound on
RANDOM_ROWS = 6
MAX_STRINGS = 6


# ---- synthetic inputs ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Tables:
    """One synthetic value for every private input of the entry point: name -> rows."""

    tables: tuple[tuple[str, tuple[Row, ...]], ...]

    def rows(self, name: str) -> tuple[Row, ...]:
        return dict(self.tables)[name]

    def replace(self, name: str, rows: tuple[Row, ...]) -> "Tables":
        return Tables(tuple((n, rows if n == name else r) for n, r in self.tables))

    def frames(self, schemas: dict[str, Schema]) -> dict[str, pd.DataFrame]:
        return {n: make_frame(schemas[n], rows) for n, rows in self.tables}

    def to_json(self, schemas: dict[str, Schema]) -> dict[str, list[dict]]:
        return {n: [_row_json(schemas[n], r) for r in rows] for n, rows in self.tables}


def make_frame(schema: Schema, rows: Sequence[Row]) -> pd.DataFrame:
    """A DataFrame exactly as `load_table` would return it for these rows."""
    cols: dict[str, Any] = {}
    for j, c in enumerate(schema.columns):
        vals = [r[j] for r in rows]
        t = c.type
        if isinstance(t, Num):
            cols[c.name] = np.array(vals, dtype=np.int64 if t.integer else np.float64)
        elif isinstance(t, Bool):
            cols[c.name] = np.array(vals, dtype=bool)
        elif isinstance(t, Str):
            cols[c.name] = pd.Series(vals, dtype="str")
        else:
            assert isinstance(t, Cat)
            codes = np.array([t.values.index(v) for v in vals], dtype=np.int64)
            cols[c.name] = pd.Categorical.from_codes(codes, categories=pd.Index(list(t.values)))
    return pd.DataFrame(cols, index=pd.RangeIndex(len(rows)))


def _row_json(schema: Schema, row: Row) -> dict:
    out = {}
    for c, v in zip(schema.columns, row):
        out[c.name] = int(v) if isinstance(c.type, Num) and c.type.integer else \
            float(v) if isinstance(c.type, Num) else v
    return out


# ---- values and rows ----------------------------------------------------------------------------

def string_literals(source: str) -> list[str]:
    """String literals of a program (its filters' constants): candidate values of string columns."""
    found = re.findall(r'"((?:[^"\\\n]|\\.)*)"', source)
    return list(dict.fromkeys(s for s in found if "\\" not in s))


def num_range(t: Num) -> tuple[float, float]:
    """The lowest and highest value a loaded table can hold (finite reach where unbounded)."""
    lo, hi = float_bounds(t, "audit")
    if lo is None and hi is None:
        lo, hi = -UNBOUNDED_REACH, UNBOUNDED_REACH
    elif lo is None:
        lo = hi - UNBOUNDED_REACH
    elif hi is None:
        hi = lo + UNBOUNDED_REACH
    return float(lo), float(hi)


def fit(t: Num, x: float) -> float | int:
    """x moved into the column's domain (and to a whole number for int columns)."""
    lo, hi = num_range(t)
    x = min(max(x, lo), hi)
    if t.integer:
        x = min(max(math.floor(x + 0.5), math.ceil(lo)), math.floor(hi))
        return int(x)
    return float(x)


def column_values(col: Column, strings: Sequence[str]) -> list[Any]:
    t = col.type
    if isinstance(t, Num):
        lo, hi = num_range(t)
        vals = [lo, (lo + hi) / 2, hi] + ([0.0] if lo < 0 < hi else [])
        return list(dict.fromkeys(fit(t, v) for v in vals))
    if isinstance(t, Bool):
        return [False, True]
    if isinstance(t, Cat):
        return list(t.values)
    loadable = [v for v in strings if v == v.strip() and v.lower() not in MISSING_MARKERS]
    return list(dict.fromkeys([*loadable[:MAX_STRINGS], "x"]))  # cells are stripped; markers are missing


def edge_rows(schema: Schema, strings: Sequence[str]) -> tuple[Row, Row, Row]:
    """All columns low, all middle, all high."""
    rows: list[list[Any]] = [[], [], []]
    for c in schema.columns:
        if isinstance(c.type, Num):
            lo, hi = num_range(c.type)
            picks = [fit(c.type, lo), fit(c.type, (lo + hi) / 2), fit(c.type, hi)]
        else:
            vals = column_values(c, strings)
            picks = [vals[0], vals[len(vals) // 2], vals[-1]]
        for row, v in zip(rows, picks):
            row.append(v)
    low, mid, high = (tuple(r) for r in rows)
    return low, mid, high


def candidate_rows(schema: Schema, strings: Sequence[str], rng: np.random.Generator,
                   random_rows: int = RANDOM_ROWS) -> list[Row]:
    low, mid, high = edge_rows(schema, strings)
    rows = [low, mid, high]
    for j, c in enumerate(schema.columns):
        for v in column_values(c, strings):
            rows.append(mid[:j] + (v,) + mid[j + 1:])
    rows += [random_row(schema, strings, rng) for _ in range(random_rows)]
    return list(dict.fromkeys(rows))


def random_row(schema: Schema, strings: Sequence[str], rng: np.random.Generator) -> Row:
    out = []
    for c in schema.columns:
        t = c.type
        if isinstance(t, Num):
            lo, hi = num_range(t)
            out.append(fit(t, float(rng.uniform(lo, hi))))
        else:
            vals = column_values(c, strings)
            out.append(vals[int(rng.integers(len(vals)))])
    return tuple(out)


def base_tables(schema: Schema, strings: Sequence[str]) -> list[tuple[Row, ...]]:
    low, mid, high = edge_rows(schema, strings)
    return list(dict.fromkeys([(), (mid,), (low,), (high,), (low, high)]))


# ---- pairs --------------------------------------------------------------------------------------

def table_pairs(inputs: Sequence[tuple[str, Schema, Fraction]], strings: Sequence[str],
                rng: np.random.Generator, max_pairs: int) -> list[Pair]:
    """(D, D + r) for every private input in turn (the others fixed at one middle row), every
    base D and every candidate row r; at most max_pairs, small bases first."""
    schemas = {name: schema for name, schema, _ in inputs}
    fixed = Tables(tuple((name, (edge_rows(s, strings)[1],)) for name, s, _ in inputs))
    per_input = []
    for name, schema, claimed in inputs:
        rows = candidate_rows(schema, strings, rng)
        pairs = [_pair(fixed, name, base, r, claimed, schemas, strings)
                 for base in base_tables(schema, strings) for r in rows]
        per_input.append(pairs)
    merged = [p for group in _interleave(per_input) for p in group]
    return merged[:max_pairs]


def _interleave(groups: list[list[Pair]]) -> list[list[Pair]]:
    """Round-robin over the inputs, so a cap keeps pairs for every table."""
    out, i = [], 0
    while any(i < len(g) for g in groups):
        out.append([g[i] for g in groups if i < len(g)])
        i += 1
    return out


def _pair(fixed: Tables, name: str, base: tuple[Row, ...], row: Row, claimed: Fraction,
          schemas: dict[str, Schema], strings: Sequence[str]) -> Pair:
    a = fixed.replace(name, base)
    b = fixed.replace(name, base + (row,))
    schema = schemas[name]
    label = f"{name}: {len(base)} row(s) vs the same plus {_row_text(schema, row)}"

    def moves(step: float) -> list[Pair]:
        return [_pair(fixed, name, base, r, claimed, schemas, strings)
                for r in row_moves(schema, row, step, strings)]

    return Pair(a, b, claimed, label, moves, lambda t: t.to_json(schemas))


def row_moves(schema: Schema, row: Row, step: float, strings: Sequence[str]) -> list[Row]:
    """Rows one coordinate step away: each number up and down by step * its range (within its
    bounds); at the first step also each other value of every discrete column."""
    out: list[Row] = []
    for j, c in enumerate(schema.columns):
        t = c.type
        if isinstance(t, Num):
            lo, hi = num_range(t)
            for sign in (1, -1):
                v = fit(t, row[j] + sign * step * (hi - lo))
                if v != row[j]:
                    out.append(row[:j] + (v,) + row[j + 1:])
        elif step >= 0.5:
            out += [row[:j] + (v,) + row[j + 1:] for v in column_values(c, strings) if v != row[j]]
    return list(dict.fromkeys(out))


def _row_text(schema: Schema, row: Row) -> str:
    parts = []
    for c, v in zip(schema.columns, row):
        if isinstance(v, str):
            parts.append(f'{c.name} = "{v}"')
        elif isinstance(v, bool):
            parts.append(f"{c.name} = {'true' if v else 'false'}")
        else:
            parts.append(f"{c.name} = {v:g}")
    return "{" + ", ".join(parts) + "}"


def describe_tables(t: Tables, schemas: dict[str, Schema]) -> str:
    """`db: 2 rows {x = 0, ...}, {x = 10, ...}` (synthetic data: safe to show)."""
    out = []
    for name, rows in t.tables:
        if not rows:
            out.append(f"{name}: empty")
        else:
            shown = ", ".join(_row_text(schemas[name], r) for r in rows)
            out.append(f"{name}: {len(rows)} row{'s' if len(rows) != 1 else ''} {shown}")
    return "; ".join(out)
