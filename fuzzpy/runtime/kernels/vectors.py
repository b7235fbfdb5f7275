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
from typing import Any

import numpy as np

from ...primitives.registry import kernel
from ...primitives.vectors import clip_exact, exact_times, is_exact
from ..numbers import as_float
from ..sums import bounded_sum
from ..vectorize import row_function, row_matrix
from .arith import mul

# Relative error of the float norm below (max-scaled sum of squares, then sqrt and a product):
# at most (n + 5) 2**-53 <= 2**-40 for n <= MAX_VECTOR_SIZE = 4096.  Scaling the rows that are
# not clearly inside the ball to c (1 - 2**-30) leaves room for it and for the product's own
# rounding: every clipped vector has exact norm < c.  Rows with a missing or infinite coordinate
# become 0 (as sum counts a missing value as 0).
_SAFETY = 1.0 - 2.0 ** -30


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


def _vsum(ctx, c, f, b):
    """Each row's vector clipped in floats to norm < c, then each coordinate summed exactly as
    `sum` does (bags.bounded_sum: truncated toward zero onto a grid fixed by c, which only
    shrinks coordinates, so every row's share keeps norm < c, and summed exactly)."""
    n, bound = ctx.info["size"], ctx.info["bound"]
    if len(b) == 0:
        return tuple(Fraction(0) for _ in range(n))
    matrix = clip_rows(row_matrix(row_function(ctx.interp.state, f)(b), n), float(bound))
    return tuple(Fraction(bounded_sum(matrix[:, i], bound)) for i in range(n))


kernel("vec", reference=_vec)
kernel("vtuple", reference=_vtuple)
kernel("vget", reference=_vget)
kernel("vadd", reference=_vadd)
kernel("vsub", reference=_vsub)
kernel("vscale", reference=_vscale)
kernel("vdot", reference=_vdot)
kernel("vclip", reference=_vclip)
kernel("vsum", reference=_vsum, context=True, lazy_bags=True)
