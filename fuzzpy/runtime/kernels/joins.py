"""Evaluators of `truncate`, `join_public` and `join_private` (declared in
fuzzpy/primitives/joins.py): pandas `merge` on the pandas engine, a Dask merge on the Dask engine.

Truncation keeps, for every key, the k rows of smallest *priority*: a hash of the row's other
columns mixed with a secret drawn once per call from the run's secure random source, ties broken
by the rows' order in the table.  So which rows are kept depends only on the key's own rows and
the secret: adding a row never reorders the others (the proof of rule Truncate needs exactly
that), and a table recomputed by Dask (a later pass, a lost worker) keeps the same rows.  The
pandas and Dask engines compute the same priorities; they can differ only where two different
rows of one key tie on a priority's leading bits (rare), where each keeps its own table order.

A join pairs rows whose keys are equal; a missing key (a row function's missing value) matches
nothing, as in SQL, where pandas would match missing with missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...primitives.joins import KEY_LEFT, KEY_RIGHT, SHARED_KEY
from ...primitives.registry import PER_LANE, kernel
from ..engines.dask_tables import SHUFFLE, DaskBag, take_rows
from ..unit_rows import UnitRows
from ..values import materialise, restrict

_SPLITMIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))
_WORD = 64


def _mixed(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on a uint64 array, in place: every input bit moves every output bit."""
    m1, m2 = _SPLITMIX
    x ^= x >> np.uint64(30)
    x *= m1
    x ^= x >> np.uint64(27)
    x *= m2
    x ^= x >> np.uint64(31)
    return x


# rule Truncate: a row's priority is a function of the row and the secret alone
def row_priorities(frame: pd.DataFrame, key: str, secret: int) -> np.ndarray:
    """Each row's priority (uint64): a hash of its values other than the key (the key is the same
    within a group), mixed with the secret.  A function of the row alone."""
    others = [c for c in frame.columns if c != key]
    if others:
        h = pd.util.hash_pandas_object(frame[others], index=False).to_numpy(dtype=np.uint64, copy=True)
    else:
        h = np.zeros(len(frame), dtype=np.uint64)
    h ^= np.uint64(secret & (2 ** _WORD - 1))
    with np.errstate(over="ignore"):
        return _mixed(h)


# rule Truncate: per key, the first k rows by (priority, position)
def truncation_mask(frame: pd.DataFrame, key: str, k: int, secret: int) -> np.ndarray:
    """The rows truncation keeps: for every key value, its k rows of smallest (priority, position);
    every row of a value with at most k rows; no row with a missing key."""
    codes, _ = pd.factorize(frame[key], use_na_sentinel=True)
    keep = codes >= 0
    if not keep.any():
        return keep
    counts = np.bincount(codes[keep])
    crowded = keep.copy()
    crowded[keep] = counts[codes[keep]] > k
    rows = np.flatnonzero(crowded)
    if rows.size:
        keep[rows] = False
        keep[rows[_first_k(codes[rows], row_priorities(frame.take(rows), key, secret), k)]] = True
    return keep


# rule Truncate: ties broken by position, which adding a row does not reorder
def _first_k(codes: np.ndarray, priority: np.ndarray, k: int) -> np.ndarray:
    """Positions (into codes) of the k smallest (priority, position) of each code.  One sort of
    packed words (code, leading priority bits, position): sorting plain integers is several
    times faster than an argsort."""
    groups, dense = np.unique(codes, return_inverse=True)
    n = codes.size
    pos_bits = max(1, (n - 1).bit_length())
    code_bits = max(1, (groups.size - 1).bit_length())
    prio_bits = _WORD - pos_bits - code_bits
    if prio_bits < 16:  # too many rows to pack: sort by the three keys instead
        order = np.lexsort((np.arange(n), priority, dense))
        sorted_codes = dense[order]
    else:
        word = (dense.astype(np.uint64) << np.uint64(prio_bits + pos_bits)) \
            | ((priority >> np.uint64(_WORD - prio_bits)) << np.uint64(pos_bits)) \
            | np.arange(n, dtype=np.uint64)
        word.sort()
        order = (word & np.uint64((1 << pos_bits) - 1)).astype(np.int64)
        sorted_codes = (word >> np.uint64(prio_bits + pos_bits)).astype(np.int64)
    starts = np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    return order[np.arange(n) - first < k]


# rule Table join: pairs of rows with equal keys
def join_frames(a: pd.DataFrame, b: pd.DataFrame, key_a: str, key_b: str, shared: bool) -> pd.DataFrame:
    """The inner join of two frames on key_a == key_b: a's columns, then b's (its key left out
    when `shared`), with a fresh index."""
    a, b = _keyed(a, key_a), _keyed(b, key_b)
    a, b = _comparable_keys(a, b, key_a, key_b)
    if shared:
        out = a.merge(b, on=key_a, how="inner", sort=False)
    else:
        out = a.merge(b, left_on=key_a, right_on=key_b, how="inner", sort=False)
    return out.reset_index(drop=True)


# rule Table join: a missing key matches nothing
def _keyed(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """The rows whose key is not missing (pandas would match missing keys with each other)."""
    missing = frame[key].isna()
    return frame[~missing.to_numpy()] if missing.any() else frame


def _comparable_keys(a: Any, b: Any, key_a: str, key_b: str) -> tuple[Any, Any]:
    """The two key columns in one dtype (the checker made sure their values can be equal): numbers
    as float64 when they differ, anything else as Python objects."""
    ta, tb = a[key_a].dtype, b[key_b].dtype
    if ta == tb:
        return a, b
    numeric = pd.api.types.is_numeric_dtype
    bools = pd.api.types.is_bool_dtype
    common: Any = "float64" if numeric(ta) and numeric(tb) and not (bools(ta) or bools(tb)) else object
    return a.astype({key_a: common}), b.astype({key_b: common})


# ---- the reference evaluators (pandas) -----------------------------------------------------------

def _truncate(ctx: Any, k: Any, key: str, b: Any) -> Any:
    info = ctx.info
    frame = materialise(b)
    return restrict(frame, truncation_mask(frame, info["key"], info["k"], ctx.rng.secret()))


def _join(ctx: Any, key_a: str, key_b: str, a: Any, b: Any) -> Any:
    info = ctx.info
    if isinstance(a, UnitRows):
        return _join_units(a, materialise(b), info[KEY_LEFT], info[KEY_RIGHT], info[SHARED_KEY])
    return join_frames(materialise(a), materialise(b), info[KEY_LEFT], info[KEY_RIGHT], info[SHARED_KEY])


# rule Unit join public: every result row keeps the unit of its row of a
def _join_units(a: UnitRows, b: pd.DataFrame, key_a: str, key_b: str, shared: bool) -> UnitRows:
    """The join of a table with a unit: its rows joined as any frame's, each result row given the
    unit a's rows carry beside them (not read from a column: a map may have rewritten it)."""
    frame = materialise(a.rows)
    position = _free_name(frame, b)
    out = join_frames(frame.assign(**{position: np.arange(len(frame))}), b, key_a, key_b, shared)
    rows = out[position].to_numpy(dtype=np.int64)
    return UnitRows(out.drop(columns=[position]), a.units[rows])


def _free_name(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """A column name neither frame has."""
    taken = set(map(str, a.columns)) | set(map(str, b.columns))
    name = "__row_of_a"
    while name in taken:
        name += "_"
    return name


# ---- on the Dask engine ----------------------------------------------------------------------------
# Truncation moves every row of a key to one partition (a shuffle on the key), then truncates each
# partition by the pandas engine's own rule; a join is a Dask merge (a public table, held by the
# client, is sent to every partition of the private one).

def _p_truncate(part: pd.DataFrame, key: str, k: int, secret: int) -> pd.DataFrame:
    part = part.reset_index(drop=True)
    return take_rows(part, truncation_mask(part, key, k, secret))


def _d_truncate(eng: Any, ctx: Any, vec: bool, k: Any, key: str, b: Any) -> DaskBag:
    info = ctx.info
    column = info["key"]
    frame = b.frame.dropna(subset=[column]).shuffle(on=column, shuffle_method=SHUFFLE)
    return eng.bag(frame.map_partitions(_p_truncate, column, info["k"], ctx.rng.secret(), meta=b.frame._meta))


def _d_join(eng: Any, ctx: Any, vec: bool, key_a: str, key_b: str, a: Any, b: Any) -> DaskBag:
    info = ctx.info
    ka, kb, shared = info[KEY_LEFT], info[KEY_RIGHT], info[SHARED_KEY]
    fa, fb = _frame_of(a, ka), _frame_of(b, kb)
    fa, fb = _comparable_keys(fa, fb, ka, kb)
    on = {"on": ka} if shared else {"left_on": ka, "right_on": kb}
    if isinstance(a, DaskBag):
        out = fa.merge(fb, how="inner", shuffle_method=SHUFFLE, **on)
    else:  # a public table on the left: merged into each partition of the right, columns put back in order
        flipped = {"on": ka} if shared else {"left_on": kb, "right_on": ka}
        out = fb.merge(fa, how="inner", **flipped)
        out = out[list(fa.columns) + [c for c in fb.columns if not (shared and c == kb)]]
    # rule Unit join public: a's unit column is one of the result's (the checker made sure of it)
    return eng.bag(out, unit=a.unit if isinstance(a, DaskBag) else None)


def _frame_of(side: Any, key: str) -> Any:
    """A Dask frame, or the pandas frame of a table the client holds (a public table), with the
    rows whose key is missing left out."""
    if isinstance(side, DaskBag):
        return side.frame.dropna(subset=[key])
    return _keyed(materialise(side), key)


kernel("truncate", reference=_truncate, context=True, lazy_bags=True, batched=PER_LANE, dask=_d_truncate)
kernel("join_public", reference=_join, context=True, lazy_bags=True, batched=PER_LANE, dask=_d_join)
kernel("join_private", reference=_join, context=True, lazy_bags=True, batched=PER_LANE, dask=_d_join)
