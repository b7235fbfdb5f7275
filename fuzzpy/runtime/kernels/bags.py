"""Evaluators of the bag primitives `count`, `filter`, `map`, `sum`, `union`, `split` (declared in
fuzzpy/primitives/bags.py).

Bags are DataFrames, Series or lazily filtered MaskedBags (runtime/values.py).  Every evaluator
is total: a NaN or an odd value never raises.  `sum` is exact: each value is clamped and
rounded onto a grid fixed by the public bound, and the integers are summed exactly
(runtime/sums.py, which every other evaluator of a sum shares: lanes, Dask partitions, `vsum`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...primitives.registry import PER_LANE, kernel
from ...typesystem import ir as I
from .. import batch
from ..batch import (
    _FLOAT_EXACT_INT,
    LaneBag,
    LaneEvaluator,
    Lanes,
    ThresholdBags,
    _lane_sums,
    _read_names,
    has_lanes,
)
from ..engines.dask_tables import (
    KEPT,
    DaskBag,
    DaskRunFailure,
    SharedPass,
    Shipped,
    Step,
    TableUsedOnWorker,
    captured_table,
    need_bag,
    rows_of,
    take_rows,
)
from ..numbers import as_float
from ..sums import bounded_sum
from ..unit_rows import UnitRows, union_units
from ..values import Closure, MaskedBag, bag_from_rows, bag_rows, materialise, restrict
from ..vectorize import apply_rows, row_function


def truth(col):
    """A row function's booleans as a numpy mask; a missing value counts as false."""
    if isinstance(col, pd.Series):
        if col.dtype == np.bool_:
            return col.to_numpy()  # no copy
        return col.to_numpy(dtype=bool, na_value=False)
    return np.asarray(col, dtype=bool)


def _count(b):
    return len(b)  # an exact int: scalar arithmetic after it stays exact


def _filter(ctx, p, b):
    if isinstance(b, UnitRows):  # rule Units: each kept row keeps its unit
        return b.keep(truth(row_function(ctx.interp.state, p)(b.rows)))
    return restrict(b, truth(row_function(ctx.interp.state, p)(b)))


def _map(ctx, f, b):
    if isinstance(b, UnitRows):  # rule Units: rows map one to one, in order, each beside its unit
        return b.with_rows(row_function(ctx.interp.state, f)(b.rows))
    return row_function(ctx.interp.state, f)(b)


def numbers(b):
    """The values of a bag of numbers as a float64 array (NaN for anything unreadable)."""
    s = b.series() if isinstance(b, MaskedBag) else b
    try:
        return s.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError, OverflowError):
        # exact numbers (Fractions captured by a row function) beyond the float range saturate
        return np.array([_float_or_nan(as_float(x)) for x in s], dtype=np.float64)


def _float_or_nan(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _sum(ctx, b):
    return bounded_sum(numbers(b), ctx.info["bound"])


def _union(a, b):
    if isinstance(a, UnitRows) and isinstance(b, UnitRows):  # rule Units: the checker gave both one unit
        return union_units(a, b, _union(a.rows, b.rows))
    # No shortcut for an empty side: how the result is stored (its column dtypes) must not
    # depend on whether a bag happens to be empty.
    a, b = materialise(a), materialise(b)
    if isinstance(a, pd.DataFrame) != isinstance(b, pd.DataFrame):
        return bag_from_rows(bag_rows(a) + bag_rows(b))
    return pd.concat([a, b], ignore_index=True)


def _split(ctx, p, b):
    keep = truth(row_function(ctx.interp.state, p)(b))
    return restrict(b, keep), restrict(b, ~keep)


# ---- on lane values (runtime/batch.py) --------------------------------------------------------------

_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _b_count(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    (b,) = args
    if type(b) is LaneBag:
        if b.counts is not None:
            return Lanes(b.counts.copy())
        if b.blocks is not None and b._lanes is None:  # each block's parts counted on its own
            return Lanes(np.concatenate([np.bincount(codes.astype(np.intp, copy=False), minlength=m)
                                         for codes, _, m in b.blocks[1]]).astype(np.int64))
        return Lanes(np.bincount(b.lanes, minlength=b.n).astype(np.int64))
    if type(b) is ThresholdBags:
        return Lanes(b.counts())
    return NotImplemented


def _b_filter(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    p, b = args
    if isinstance(b, UnitRows):  # the reference, lane by lane
        return NotImplemented
    if not has_lanes(b) and type(p) is Closure:  # a predicate reading a candidate threshold
        pair = _thresholds(ev, p, b)
        if pair is not None:
            return pair[0] if prim.name == "filter" else pair
    lb = batch.product(ev, b)
    out = batch.lane_rows(ev, p, lb) if lb is not None else None
    if out is None:
        return NotImplemented
    keep = truth(out)
    return lb.sub(keep) if prim.name == "filter" else (lb.sub(keep), lb.sub(~keep))


def _thresholds(ev: LaneEvaluator, p: Closure, b: Any) -> Optional[tuple[ThresholdBags, ThresholdBags]]:
    """`fun r -> e OP c` (or `c OP e`) with e a numeric column not reading any lane value and c a
    variable holding a numeric lane value: the two sides of the split as threshold bags."""
    p = _unwrapped(ev, p)
    body, params = p.body, p.params
    if not isinstance(body, I.IPrim) or body.name not in _FLIP or len(body.args) != 2 or not params:
        return None
    row = params[0]
    lane_names = {k for k in _read_names(body) if k in p.env and has_lanes(p.env[k])}
    left, right = body.args
    op = body.name
    if _mentions(left, {row}) and not _mentions(right, {row}) and not _mentions(left, lane_names):
        col_ir, c_ir = left, right
    elif _mentions(right, {row}) and not _mentions(left, {row}) and not _mentions(right, lane_names):
        col_ir, c_ir, op = right, left, _FLIP[op]
    else:
        return None
    if not isinstance(c_ir, I.IVar):
        # Only the candidate itself: inside a row function `c + 0.1` is float arithmetic, which
        # the exact evaluation here would round differently.
        return None
    c = ev.eval(c_ir, p.env)  # evaluation reads an environment, never changes it
    ts = _threshold_floats(c.values()) if type(c) is Lanes else None
    if ts is None:
        return None
    col = apply_rows(ev.state, Closure(p.env, params, col_ir), b)
    if not isinstance(col, pd.Series):
        return None
    arr = col.to_numpy()
    if arr.dtype == np.int64:
        if arr.size and int(np.abs(arr).max()) >= _FLOAT_EXACT_INT:
            return None
        arr = arr.astype(np.float64)
    elif arr.dtype != np.float64:
        return None
    shared: list = [None, None]
    return (ThresholdBags(b, arr, op, ts, False, shared), ThresholdBags(b, arr, op, ts, True, shared))


def _threshold_floats(vals: list) -> Optional[list[float]]:
    """Each candidate as the float a row function compares it as (`as_float`), or None when one
    is not a number.  A Fraction's float is its numerator divided by its denominator (Python's
    correctly rounded int division, which is what float() of a Fraction computes), taken
    directly: float() goes through the numbers ABC, a third of a median's scoring."""
    out = []
    for v in vals:
        t = type(v)
        if t is float:
            out.append(v)
        elif t is Fraction:
            try:
                out.append(v.numerator / v.denominator)
            except OverflowError:
                out.append(as_float(v))
        elif _is_number(v):
            out.append(as_float(v))
        else:
            return None
    return out


def _unwrapped(ev: LaneEvaluator, p: Closure) -> Closure:
    """`fun x -> f x` as f itself (a lambda the checker made around a function's code)."""
    for _ in range(8):
        body = p.body
        if not (isinstance(body, I.IApply) and p.params and len(body.args) == 1
                and isinstance(body.args[0], I.IVar) and body.args[0].name == p.params[0]):
            return p
        if _mentions(body.fn, {p.params[0]}):
            return p
        fn = ev.eval(body.fn, p.env)
        if type(fn) is not Closure:
            return p
        if body.body is None:
            if fn.body is None or not fn.params or len(fn.params) != 1:
                return p
            p = fn
        else:
            if not body.params or len(body.params) != 1:
                return p
            p = Closure(fn.env, body.params, body.body)
    return p


def _is_number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float, Fraction, np.integer, np.floating))


def _mentions(node: Any, names: set[str]) -> bool:
    """Whether the IR reads one of `names` (conservatively: a name bound again inside counts)."""
    return bool(names) and not _read_names(node).isdisjoint(names)


def _b_map(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    f, b = args
    if isinstance(b, UnitRows):  # the reference, lane by lane
        return NotImplemented
    lb = batch.product(ev, b)
    out = batch.lane_rows(ev, f, lb) if lb is not None else None
    if out is None:
        return NotImplemented
    return LaneBag(out, np.arange(len(lb.rows)), lb.lanes, ev.n)


def _b_sum(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    (b,) = args
    if type(b) is not LaneBag:
        return NotImplemented
    out = _lane_sums(numbers(b.selected()), b.lanes, ev.n, node.info["bound"])
    return NotImplemented if out is None else out


# ---- on the Dask engine's tables (runtime/engines/) -------------------------------------------------
# Per-partition steps run on the workers; the client adds the exact partials.

def _p_select(part: Any, fn: Shipped, vectorise: bool, negate: bool) -> Any:
    keep = truth(rows_of(part, fn, vectorise))
    return take_rows(part, ~keep if negate else keep)


def _p_map(part: Any, fn: Shipped, vectorise: bool) -> Any:
    return rows_of(part, fn, vectorise)


def _p_count(part: Any) -> int:
    return len(part)


# rule Engines: each partition's exact sum, on the grid of runtime/sums.py
def _p_sum(part: Any, bound: Fraction) -> Any:
    return bounded_sum(numbers(part.reset_index(drop=True)), bound)


def _d_count(eng: Any, ctx: Any, vec: bool, b: Any) -> int:
    b = need_bag("count", b, ctx.span)
    if b.is_part():
        return b.group.count(b.part)
    shared = _shared(b, Step(("count",), _p_count, ()))
    return sum(int(n) for n in (shared if shared is not None else eng.partials(b.frame, _p_count)))


def _shared(b: DaskBag, aggregate: Step) -> Optional[list]:
    """The partials of `aggregate` on a table made from a part of a grouping, computed with its
    siblings' in one pass (dask_tables.SharedPass); None for any other table."""
    if b.group is None or not isinstance(b.group, SharedPass):
        return None
    return b.group.shared_partials(b.part, b.steps, aggregate)


def _row_step(f: Closure, fn: Any, *args: Any) -> Optional[Step]:
    """A per-row step of row function `f`, or None when what it computes is not known (its
    table is then aggregated on its own)."""
    ident = function_identity(f)
    return None if ident is None else Step((ident, *args[1:]), fn, args)


class _Same:
    """A value compared by identity (and kept alive, so that its id is never reused)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


def function_identity(f: Any, depth: int = 0) -> Optional[tuple]:
    """What a row function computes: its code (up to the names of its bound variables) and the
    values it reads from its scope, public constants by value, functions by their own identity,
    anything else as that very object.  Equal identities compute the same thing: the row
    function `fun r -> clip lo hi (value r)` made anew for every part of `each` has one identity
    for all of them.  None for something that is not a function of code."""
    if type(f) is not Closure or f.body is None or not f.params or depth > 4:
        return None
    params = tuple(f.params)
    read: list = []
    for name in batch._outer_reads(f.body, params):
        if name not in f.env:
            continue
        v = f.env[name]
        if batch._is_constant(v):
            read.append((name, type(v).__name__, v))
        else:
            inner = function_identity(v, depth + 1)
            read.append((name, inner if inner is not None else _Same(v)))
    return batch._code_identity(f.body, params, tuple(read))


def _d_filter(eng: Any, ctx: Any, vec: bool, p: Closure, b: Any) -> DaskBag:
    b = need_bag("filter", b, ctx.span)
    fn = Shipped(p)
    return b.stepped(b.frame.map_partitions(_p_select, fn, vec, False, meta=b.frame._meta),
                     _row_step(p, _p_select, fn, vec, False), b.unit)


def _d_split(eng: Any, ctx: Any, vec: bool, p: Closure, b: Any) -> tuple[DaskBag, DaskBag]:
    b = need_bag("split", b, ctx.span)
    fn = Shipped(p)
    return (b.stepped(b.frame.map_partitions(_p_select, fn, vec, False, meta=b.frame._meta),
                      _row_step(p, _p_select, fn, vec, False)),
            b.stepped(b.frame.map_partitions(_p_select, fn, vec, True, meta=b.frame._meta),
                      _row_step(p, _p_select, fn, vec, True)))


def _d_map(eng: Any, ctx: Any, vec: bool, f: Closure, b: Any) -> DaskBag:
    b = need_bag("map", b, ctx.span)
    if b.unit is not None:  # refused before the charge too (dask_engine.unsupported_primitives)
        raise DaskRunFailure("E2101", MAP_UNITS_REFUSED, ctx.span, KEPT)
    fn = Shipped(f)
    try:  # the result's kind (Series or frame, dtypes) from the row function on dask's sample rows
        meta = _p_map(b.frame._meta_nonempty, fn, vec).iloc[:0]
    except TableUsedOnWorker:
        raise captured_table() from None
    except Exception:  # noqa: BLE001 - on an empty frame instead
        meta = _p_map(b.frame._meta, fn, vec)
    return b.stepped(b.frame.map_partitions(_p_map, fn, vec, meta=meta), _row_step(f, _p_map, fn, vec))


# rule Engines: the partitions' exact sums added as Fractions
def _d_sum(eng: Any, ctx: Any, vec: bool, b: Any) -> Any:
    b = need_bag("sum", b, ctx.span)
    bound = ctx.info["bound"]
    partials = _shared(b, Step(("sum", bound), _p_sum, (bound,)))
    if partials is None:
        partials = eng.partials(b.frame, _p_sum, bound)
    exact = [p for p in partials if isinstance(p, Fraction)]
    # bounded_sum gives the float 0.0 for no rows: so does the pandas engine's whole table.
    return sum(exact, Fraction(0)) if exact else 0.0


# rule Columns kept: a union joins only the columns the program reads
def _d_union(eng: Any, ctx: Any, vec: bool, a: Any, b: Any) -> DaskBag:
    import dask.dataframe as dd

    a, b = need_bag("union", a, ctx.span), need_bag("union", b, ctx.span)
    fa, fb = a.frame, b.frame
    if isinstance(fa._meta, pd.DataFrame) and isinstance(fb._meta, pd.DataFrame) and eng.columns is not None:
        # A column the program never reads may be in one side only (left out of a table, built
        # by a `map`): only the columns it reads are joined.
        fa, fb = (f[[c for c in f.columns if c in eng.columns]] for f in (fa, fb))
    if isinstance(fa._meta, pd.DataFrame) != isinstance(fb._meta, pd.DataFrame) or (
            isinstance(fa._meta, pd.DataFrame) and list(fa.columns) != list(fb.columns)):
        raise DaskRunFailure("E2101", "primitive union cannot run on the Dask engine for tables whose rows are "
                                      "stored differently; run the program with --engine pandas", ctx.span, KEPT)
    return eng.bag(dd.concat([fa, fb]), unit=a.unit)


# rule Units: the Dask engine keeps a table's units as its column, which a map would lose
MAP_UNITS_REFUSED = ("map cannot run on the Dask engine on a table with a privacy unit (its rows would lose their "
                     "unit); bound the contributions first (bound_rows k t) and map the bounded rows, or run the "
                     "program with --engine pandas")


kernel("count", reference=_count, lazy_bags=True, batched=_b_count, dask=_d_count)
kernel("filter", reference=_filter, context=True, lazy_bags=True, batched=_b_filter, dask=_d_filter)
kernel("map", reference=_map, context=True, lazy_bags=True, batched=_b_map, dask=_d_map)
kernel("sum", reference=_sum, context=True, lazy_bags=True, batched=_b_sum, dask=_d_sum)
kernel("union", reference=_union, lazy_bags=True, batched=PER_LANE, dask=_d_union)
kernel("split", reference=_split, context=True, lazy_bags=True, batched=_b_filter, dask=_d_split)
