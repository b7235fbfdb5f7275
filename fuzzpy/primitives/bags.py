"""Bag (private table) primitives.

A bag's distance is the size of the symmetric difference (add or remove one row).  Functions
given to `map` and `filter` run once per row, so anything private they capture would be read
once per row: their captured distance is multiplied by infinity (Fuzz's `!` on bag functions).
Runtime implementations receive pandas objects (a DataFrame for bags of records, a Series for
bags of scalars) and compiled, vectorised row functions.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from ..checking.sens import d_add, d_inf, d_scale
from ..checking.types import Bag, Bool, Num, Tensor, Type, holds_tables, join_types
from .registry import Arg, Result, primitive

_REF_FUZZ = "Reed & Pierce, ICFP 2010, section 4 (bag primitives)"


# ---- runtime implementations (pandas/numpy are imported only when a program runs) ---------------
# Bags are DataFrames, Series or lazily filtered MaskedBags (fuzzpy/runtime/values.py).  All of
# these are total: a NaN or an odd value never raises.

SUM_GRID_BITS = 24  # sum rounds each value onto a grid of 2**-24 of its bound (see _bounded_sum)
SUM_CHUNK_BITS = 18  # 2**18 values of at most 2**24 sum below 2**42 < 2**53: exact in float64


def _truth(col):
    """A row function's booleans as a numpy mask; a missing value counts as false."""
    import numpy as np
    import pandas as pd

    if isinstance(col, pd.Series):
        if col.dtype == np.bool_:
            return col.to_numpy()  # no copy
        return col.to_numpy(dtype=bool, na_value=False)
    return np.asarray(col, dtype=bool)


def _run_count(b):
    return len(b)  # an exact int: scalar arithmetic after it stays exact


def _run_filter(ctx, p, b):
    from ..runtime.values import restrict

    return restrict(b, _truth(ctx.vectorised(p)(b)))


def _run_map(ctx, f, b):
    return ctx.vectorised(f)(b)


def _numbers(b):
    """The values of a bag of numbers as a float64 array (NaN for anything unreadable)."""
    import numpy as np

    from ..runtime.values import MaskedBag

    s = b.series() if isinstance(b, MaskedBag) else b
    try:
        return s.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError, OverflowError):
        # exact numbers (Fractions captured by a row function) beyond the float range saturate
        from ..runtime.numbers import as_float

        return np.array([_float_or_nan(as_float(x)) for x in s], dtype=np.float64)


def _float_or_nan(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _float_at_most(q: Fraction) -> float:
    import math
    import sys

    try:
        f = float(q)
    except OverflowError:
        f = sys.float_info.max
    return math.nextafter(f, 0.0) if Fraction(f) > q else f


@functools.lru_cache(maxsize=256)
def sum_grid(bound: Fraction) -> tuple[int, float, float]:
    """(k, 2**-k, b * 2**-k) for a bound > 0: b is the largest float <= bound, and the sum's
    grid is 2**k with b < 2**(k + SUM_GRID_BITS) (see _bounded_sum).  Public, and computed once
    per bound: a gradient descent sums with the same bound at every step."""
    import math

    b = _float_at_most(Fraction(bound))
    k = max(math.frexp(b)[1] - SUM_GRID_BITS, -1000)  # b < 2**(k + 24); 2**-k stays finite
    inv = math.ldexp(1.0, -k)
    return k, inv, b * inv  # b * inv exact: scaling by a power of two


def _bounded_sum(x, bound: Fraction) -> float:
    """sum_i clamp(x_i) computed exactly, so one row moves it by at most `bound`.

    A float sum's rounding depends on every other row, so its sensitivity can exceed the bound
    (Casacuberta et al., CCS 2022).  Here each value is clamped to [-b, b] (b: the largest float
    <= bound; NaN counts as 0) and rounded toward zero onto the grid g = 2**k with b/g <= 2**24:
    |g * trunc(x/g)| <= b keeps one row's share within the bound, and g depends only on the
    bound (public).  A chunk of 2**SUM_CHUNK_BITS such integers sums exactly in float64, and the
    chunk sums add exactly as Python ints, so the total is exact at any size; working chunk by
    chunk in one small buffer also keeps it fast.  Integer data is unchanged when the bound is
    below 2**24.  A total beyond the float range saturates at the largest float."""
    import numpy as np

    n = len(x)
    if n == 0 or bound <= 0:
        return 0.0
    k, inv, lim = sum_grid(Fraction(bound))
    chunk = 1 << SUM_CHUNK_BITS
    buf = np.empty(min(n, chunk))
    total = 0
    for start in range(0, n, chunk):  # chunks of rows, not rows: O(n / 2**18) numpy calls
        part = x[start:start + chunk]
        y = buf[:len(part)]
        np.multiply(part, inv, out=y)
        np.clip(y, -lim, lim, out=y)
        np.trunc(y, out=y)
        s = y.sum()
        if s != s:  # NaN in this chunk
            np.nan_to_num(y, copy=False, nan=0.0)
            s = y.sum()
        total += int(s)
    return Fraction(total) * Fraction(2) ** k  # exact: a float could round one row's share away


def _run_sum(ctx, b):
    return _bounded_sum(_numbers(b), ctx.info["bound"])


def _run_union(a, b):
    import pandas as pd

    from ..runtime.values import bag_from_rows, bag_rows, materialise

    # No shortcut for an empty side: how the result is stored (its column dtypes) must not
    # depend on whether a bag happens to be empty.
    a, b = materialise(a), materialise(b)
    if isinstance(a, pd.DataFrame) != isinstance(b, pd.DataFrame):
        return bag_from_rows(bag_rows(a) + bag_rows(b))
    return pd.concat([a, b], ignore_index=True)


def _run_split(ctx, p, b):
    from ..runtime.values import restrict

    keep = _truth(ctx.vectorised(p)(b))
    return restrict(b, keep), restrict(b, ~keep)


def elem_type(ctx, arg: Arg, what: str) -> Type:
    if not isinstance(arg.type, Bag):
        raise ctx.fail("E0202", f"{what} expects a bag, but this is {arg.type}", arg.span)
    return arg.type.elem


def row_function(ctx, fn: Arg, elem: Type, span):
    """Check a per-row function; returns (instantiation, extra distance from its captures)."""
    inst = ctx.instantiate(fn, [elem], span, per_row=True)
    if holds_tables(inst.cod):  # one table per row, all alive at once: no growth bound holds
        raise ctx.fail("E0308", f"a function applied to every row may not return a table (it returns {inst.cod})",
                       fn.span)
    captured = d_inf(inst.captured)
    return inst, captured


@primitive("count", ("b",), "bag 'a -o int[0, inf]",
           "count b: the number of rows of b.",
           "Adding or removing one row changes the count by exactly 1. " + _REF_FUZZ,
           category="bag", run=_run_count)
def _count(ctx, args, span):
    (b,) = args
    elem_type(ctx, b, "count")
    return Result(Num(Fraction(0), None, True), b.dist)


@primitive("filter", ("p", "b"), "('a -> bool) -> bag 'a -o bag 'a",
           "filter p b: the rows of b for which the public predicate p holds.",
           "Each row is kept or dropped on its own, so a table at distance d stays within d. "
           "The predicate may not capture private values (they would be read once per row). " + _REF_FUZZ,
           category="bag", run=_run_filter, needs_context=True)
def _filter(ctx, args, span):
    p, b = args
    elem = elem_type(ctx, b, "filter")
    inst, captured = row_function(ctx, p, elem, span)
    if not isinstance(inst.cod, Bool):
        raise ctx.fail("E0202", f"filter expects a predicate returning bool, but it returns {inst.cod}", p.span)
    return Result(b.type, d_add(b.dist, captured), ir_args=[inst.code, b.ir])


@primitive("map", ("f", "b"), "('a -> 'b) -> bag 'a -o bag 'b",
           "map f b: apply the public row function f to every row of b.",
           "Rows map one to one, so the symmetric difference cannot grow. " + _REF_FUZZ,
           category="bag", run=_run_map, needs_context=True)
def _map(ctx, args, span):
    f, b = args
    elem = elem_type(ctx, b, "map")
    inst, captured = row_function(ctx, f, elem, span)
    return Result(Bag(inst.cod), d_add(b.dist, captured), ir_args=[inst.code, b.ir])


@primitive("sum", ("b",), "bag num[lo, hi] -o[max(|lo|, |hi|)] num",
           "sum b: the sum of a bag of bounded numbers (clip them first: map (fun x -> clip 0 100 x) b).",
           "One row added or removed changes the sum by at most max(|lo|, |hi|); the bounds come from "
           "the schema or a clip, never from the data (docs/data.md: loading clamps every value into "
           "its declared bounds).",
           category="bag", run=_run_sum, needs_context=True)
def _sum(ctx, args, span):
    (b,) = args
    t = elem_type(ctx, b, "sum")
    if not isinstance(t, Num):
        raise ctx.fail("E0202", f"sum expects a bag of numbers, but the rows are {t}", b.span)
    if not t.bounded:
        raise ctx.fail("E0305", f"sum needs bounded values, but the rows are {t}", b.span,
                       "clip the values first, e.g. sum (map (fun x -> clip 0 100 x) b), "
                       "or declare bounds in the schema (num[0, 100])")
    bound = max(abs(t.lo), abs(t.hi))
    return Result(Num(None, None, t.integer), d_scale(bound, b.dist), info={"bound": bound})


@primitive("union", ("a", "b"), "bag 'a -o bag 'a -o bag 'a",
           "union a b: all rows of a and of b (a bag sum, duplicates kept).",
           "The symmetric difference of a union is at most the sum of the two differences.",
           category="bag", run=_run_union)
def _union(ctx, args, span):
    a, b = args
    ta, tb = elem_type(ctx, a, "union"), elem_type(ctx, b, "union")
    joined = join_types(ta, tb)
    if joined is None:
        raise ctx.fail("E0202", f"union of bags with different rows: {ta} and {tb}", span)
    dist = d_add(a.dist, b.dist)
    ctx.note_growth(dist)  # the one primitive whose result can outgrow the tables it reads
    return Result(Bag(joined), dist)


@primitive("split", ("p", "b"), "('a -> bool) -> bag 'a -o (bag 'a, bag 'a)",
           "split p b: the pair (rows where p holds, rows where it does not); the parts are disjoint.",
           "Each row goes to exactly one side, so d(yes) + d(no) <= d(b): the two parts get distance "
           "variables d1 + d2 <= d (Spar; PrivJail section 4.3), which yields parallel composition.",
           category="partition", run=_run_split, needs_context=True)
def _split(ctx, args, span):
    p, b = args
    elem = elem_type(ctx, b, "split")
    inst, captured = row_function(ctx, p, elem, span)
    if not isinstance(inst.cod, Bool):
        raise ctx.fail("E0202", f"split expects a predicate returning bool, but it returns {inst.cod}", p.span)
    parent = d_add(b.dist, captured)
    parts = ctx.split(parent, ["yes", "no"])
    return Result(Tensor((b.type, b.type)), d_add(*parts), ir_args=[inst.code, b.ir], parts=parts)

