"""Evaluators of the vector primitives (declared in fuzzpy/primitives/vectors.py, with the exact
clip `clip_exact` and the exact products both the checker and these use).

A vector is a tuple of numbers.  Outside row functions its components are exact (Fractions) and
every evaluator computes exactly; in row functions they are floats, or whole columns (the
evaluators are numpy-generic, and the declarations' `structured=True` lets the column evaluator
hand them tuples of columns).  In floats the clip keeps a safety factor (`clip_rows`), so a
clipped vector's exact norm is always below the bound.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Optional

import numpy as np

from ...primitives.registry import NO_TABLE, PER_LANE, kernel
from ...primitives.vectors import clip_exact, exact_times, is_exact
from ...typesystem import ir as I
from .. import batch
from ..batch import LaneEvaluator, Lanes, _grid_integers, _lane_sizes, has_lanes
from ..engines.dask_tables import Shipped, need_bag, rows_of
from ..numbers import as_float
from ..ratios import Ratios
from ..sums import bounded_sum
from ..values import Closure
from ..vectorize import row_matrix, row_vectors
from .arith import mul

# Relative error of the float norm below (max-scaled sum of squares, then sqrt and a product):
# at most (n + 5) 2**-53 <= 2**-40 for n <= MAX_VECTOR_SIZE = 4096.  Scaling the rows that are
# not clearly inside the ball to c (1 - 2**-30) leaves room for it and for the product's own
# rounding: every clipped vector has exact norm < c.  Rows with a missing or infinite coordinate
# become 0 (as sum counts a missing value as 0).
_SAFETY = 1.0 - 2.0 ** -30


# rule Vector: each row clipped in floats to a norm below c
def clip_rows(x: Any, c: float) -> Any:
    """Clip each row of the float matrix x (rows x n) to L2 norm < c (see _SAFETY).

    Computed column by column, the squares summed in coordinate order: the result does not
    depend on the matrix's memory layout (numpy sums a row-major row of 8 or more pairwise, a
    column-major one in order), so the batched and the reference runtime, which build their
    matrices differently, clip to the same floats."""
    n = x.shape[1]
    if not n:
        return np.zeros(x.shape)
    with np.errstate(all="ignore"):
        cols = [x[:, j] for j in range(n)]
        finite = np.isfinite(cols[0])
        for col in cols[1:]:
            finite &= np.isfinite(col)
        if not finite.all():
            cols = [np.where(finite, col, 0.0) for col in cols]
        big = np.abs(cols[0])
        for col in cols[1:]:
            np.maximum(big, np.abs(col), out=big)
        safe = np.where(big > 0, big, 1.0)
        total = np.square(cols[0] / safe)
        for col in cols[1:]:
            total += np.square(col / safe)
        norm = big * np.sqrt(total)
        limit = c * _SAFETY
        factor = np.where(norm > limit, limit / np.where(norm > 0, norm, 1.0), 1.0)
        out = np.empty(x.shape)
        for j, col in enumerate(cols):
            np.multiply(col, factor, out=out[:, j])
        return out


def _clip_float(c: float, xs: tuple) -> tuple:
    cols = [np.asarray(x, dtype=np.float64) for x in xs]
    shape = np.broadcast_shapes(*(col.shape for col in cols))
    matrix = np.stack([np.broadcast_to(col, shape).reshape(-1) for col in cols], axis=1)
    out = clip_rows(matrix, c)
    if shape == ():
        return tuple(float(v) for v in out[0])
    return tuple(out[:, i].reshape(shape) for i in range(len(xs)))


# ---- the evaluators (structured: tuples of exact numbers, floats or columns) ----------------------

def _times(k: Any, x: Any) -> Any:
    if is_exact(k) and is_exact(x):
        return exact_times(k, x)
    return mul(as_float(k), as_float(x))


def _vec(x: Any) -> tuple:
    return tuple(x) if isinstance(x, tuple) else (x,)


def _vtuple(v: tuple) -> Any:
    return tuple(v) if len(v) > 1 else v[0]  # fuzzpy has no 1-tuples: vec[1] gives a number


def _vget(i: Any, v: tuple) -> Any:
    return v[int(i) - 1]


def _vadd(u: tuple, v: tuple) -> tuple:
    return tuple(a + b for a, b in zip(u, v))


def _vsub(u: tuple, v: tuple) -> tuple:
    return tuple(a - b for a, b in zip(u, v))


def _vscale(k: Any, v: tuple) -> tuple:
    return tuple(_times(k, x) for x in v)


def _vdot(u: tuple, v: tuple) -> Any:
    terms = [_times(a, b) for a, b in zip(u, v)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def _vclip(c: Any, v: tuple) -> tuple:
    if is_exact(c) and all(is_exact(x) for x in v):
        return clip_exact(Fraction(c), tuple(Fraction(x) for x in v))
    return _clip_float(float(as_float(c)), v)


# rule Vector: clipped rows, truncated onto a grid, summed exactly
def _vsum(ctx, c, f, b):
    """Each row's vector clipped in floats to norm < c, then each coordinate summed exactly as
    `sum` does (bags.bounded_sum: truncated toward zero onto a grid fixed by c, which only
    shrinks coordinates, so every row's share keeps norm < c, and summed exactly)."""
    n, bound = ctx.info["size"], ctx.info["bound"]
    if len(b) == 0:
        return tuple(Fraction(0) for _ in range(n))
    matrix = clip_rows(row_vectors(ctx.interp.state, f, b, n), float(bound))
    return tuple(Fraction(bounded_sum(matrix[:, i], bound)) for i in range(n))


# ---- on lane values (runtime/batch.py) --------------------------------------------------------------

_NUMBER = (int, float, Fraction)  # the exact and released numbers lane values hold


def _b_vsum(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    c, f, b = args
    lb = batch.product(ev, b)
    if has_lanes(c) or lb is None:
        return NotImplemented
    size, bound = node.info["size"], node.info["bound"]
    if not len(lb.rows):  # every lane's bag is empty: the reference gives 0s without calling f
        if not size:
            return Lanes([()] * ev.n)
        return tuple(Lanes.of_ratios(Ratios.of_scaled(np.zeros(ev.n), 0)) for _ in range(size))
    rows = batch.lane_rows(ev, f, lb, size)
    if rows is None:
        return NotImplemented
    if not size:
        return Lanes([()] * ev.n)
    if _lane_sizes(lb.lanes, ev.n) is None:
        return NotImplemented
    # the clipped rows on the sum's grid, all coordinates at once (elementwise: the same floats
    # as coordinate by coordinate), then each coordinate's lane sums by one bincount
    y, k = _grid_integers(clip_rows(rows, float(bound)), bound)
    # each coordinate a Fraction in every lane (0 for an empty lane, as the reference gives it):
    # the vectors as a tuple of coordinates, each held as exact ratios
    return tuple(Lanes.of_ratios(Ratios.of_scaled(np.bincount(lb.lanes, weights=y[:, i], minlength=ev.n), k))
                 for i in range(size))


def _b_vector(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """vadd, vsub, vscale on lanes where every coordinate's operation has a float operand (the
    released values of a gradient step): the float operations the scalar runs make (Python mixes
    an exact operand into a float operation as float(x); `vscale` multiplies as `_mul` does,
    0 * x = 0, after as_float), on numpy arrays of the same floats: the same IEEE results.  Any
    lane whose two operands are exact needs exact arithmetic: NotImplemented (once per lane)."""
    a, b = args
    scale = prim.name == "vscale"
    right = _vector_columns(b, ev.n, strict=not scale)
    if right is None:
        return NotImplemented
    if scale:
        k = _number_column(a, ev.n, strict=False)
        if k is None or not all(_float_operand(k[1], rf) for _, rf in right):
            return NotImplemented
        if not right:
            return ()
        # every coordinate at once (a d x n matrix): the same elementwise IEEE operations
        out = mul(k[0][None, :], np.stack([xv for xv, _ in right]))
    else:
        left = _vector_columns(a, ev.n, strict=True)
        if left is None or len(left) != len(right):
            return NotImplemented
        if not all(_float_operand(lf, rf) for (_, lf), (_, rf) in zip(left, right)):
            return NotImplemented
        if not right:
            return ()
        op = np.add if prim.name == "vadd" else np.subtract
        with np.errstate(invalid="ignore", over="ignore"):
            out = op(np.stack([xv for xv, _ in left]), np.stack([yv for yv, _ in right]))
    return tuple(Lanes.of_floats(row) for row in np.asarray(out, dtype=np.float64))


def _b_vec(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """vec x: the scalar run's tuple(x) for a tuple (of lane values: the lanes' tuples), (x,) for
    a number."""
    (x,) = args
    if type(x) is tuple:
        return x
    if type(x) is Lanes and (x._data is None or all(type(v) in _NUMBER for v in x.values())):
        return (x,)
    return NotImplemented


def _b_vget(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """vget i v with a public index: the i-th coordinate of every lane's vector (a vector is a
    tuple, of lane values or not, or lanes of tuples), as the scalar run's v[i - 1]."""
    i, v = args
    if has_lanes(i) or type(i) not in (int, Fraction):
        return NotImplemented
    k = int(i) - 1
    if type(v) is tuple and 0 <= k < len(v):
        return v[k]
    if type(v) is Lanes and type(v.data) is list and all(type(x) is tuple and 0 <= k < len(x) for x in v.data):
        return Lanes([x[k] for x in v.data])
    return NotImplemented


def _float_operand(lf: Any, rf: Any) -> bool:
    """Whether every lane's operation has a float operand (flags: arrays, or True for all)."""
    return lf is True or rf is True or bool((lf | rf).all())


def _vector_columns(v: Any, n: int, strict: bool) -> Optional[list[tuple[np.ndarray, Any]]]:
    """A vector lane value (a tuple of numbers or of lane values, or lanes of tuples) as its
    coordinates, each `_number_column`; None when the lanes' vectors are not numbers of one length."""
    if type(v) is Lanes:
        rows = v.data
        if type(rows) is not list or not rows or not all(type(r) is tuple and len(r) == len(rows[0]) for r in rows):
            return None
        v = tuple(Lanes(list(c)) for c in zip(*rows))
    if type(v) is not tuple:
        return None
    cols = [_number_column(c, n, strict) for c in v]
    return None if any(c is None for c in cols) else cols  # type: ignore[return-value]


def _number_column(v: Any, n: int, strict: bool) -> Optional[tuple[np.ndarray, Any]]:
    """(the values as floats, which lanes hold a float: a boolean array, or True for every lane)
    for lanes or a constant of numbers (not booleans).  An exact value becomes float(x), as
    Python mixes it into a float operation (None when that overflows), or with strict=False
    as_float's saturating float."""
    if type(v) is Lanes:
        if v._data is None:  # exact rationals
            r = v.ratios
            try:
                vals = r.quotients() if strict else r.floats()  # type: ignore[union-attr]
            except OverflowError:
                return None
            return vals, np.zeros(n, dtype=bool)
        if v.floats is not None:
            return v.floats, True
        d = v.data
        if isinstance(d, np.ndarray):  # int64 lanes (below 2**61): exact, converted as float(x) is
            return (d.astype(np.float64), np.zeros(n, dtype=bool)) if d.dtype == np.int64 else None
        kinds = set(map(type, d))
        if kinds == {float}:
            return np.asarray(d, dtype=np.float64), np.ones(n, dtype=bool)
        if not d or not kinds <= {float, int, Fraction}:
            return None
        try:
            vals = [x if type(x) is float else (float(x) if strict else as_float(x)) for x in d]
        except OverflowError:
            return None
        return np.asarray(vals, dtype=np.float64), np.array([type(x) is float for x in d])
    if type(v) not in _NUMBER or has_lanes(v):
        return None
    try:
        x = v if type(v) is float else (float(v) if strict else as_float(v))
    except OverflowError:
        return None
    return np.full(n, x, dtype=np.float64), np.full(n, type(v) is float)


# ---- on the Dask engine's tables (runtime/engines/) -------------------------------------------------

# rule Engines: each partition's exact vector sum
def _p_vsum(part: Any, fn: Shipped, vectorise: bool, n: int, bound: Fraction) -> tuple:
    if len(part) == 0:
        return tuple(Fraction(0) for _ in range(n))
    matrix = clip_rows(row_matrix(rows_of(part, fn, vectorise), n), float(bound))
    return tuple(Fraction(bounded_sum(matrix[:, i], bound)) for i in range(n))


# rule Engines: the partitions' exact vector sums added as Fractions
def _d_vsum(eng: Any, ctx: Any, vec: bool, c: Any, f: Closure, b: Any) -> tuple:
    b = need_bag("vsum", b, ctx.span)
    n, bound = ctx.info["size"], ctx.info["bound"]
    total = [Fraction(0)] * n
    for p in eng.partials(b.frame, _p_vsum, Shipped(f), vec, n, bound):
        total = [t + Fraction(x) for t, x in zip(total, p)]
    return tuple(total)


kernel("vec", reference=_vec, batched=_b_vec, dask=NO_TABLE)
kernel("vtuple", reference=_vtuple, batched=PER_LANE, dask=NO_TABLE)
kernel("vget", reference=_vget, batched=_b_vget, dask=NO_TABLE)
kernel("vadd", reference=_vadd, batched=_b_vector, dask=NO_TABLE)
kernel("vsub", reference=_vsub, batched=_b_vector, dask=NO_TABLE)
kernel("vscale", reference=_vscale, batched=_b_vector, dask=NO_TABLE)
kernel("vdot", reference=_vdot, batched=PER_LANE, dask=NO_TABLE)
kernel("vclip", reference=_vclip, batched=PER_LANE, dask=NO_TABLE)
kernel("vsum", reference=_vsum, context=True, lazy_bags=True, batched=_b_vsum, dask=_d_vsum)
