"""Exact sums of bounded values: what `sum` and `vsum` release before the noise (docs/runtime.md,
"Sums").

A float sum's rounding depends on every other row, so its sensitivity can exceed the bound
(Casacuberta et al., CCS 2022).  Every evaluator of a sum (the reference, lanes, Dask
partitions) clamps each value, rounds it toward zero onto a grid fixed by the public bound,
and adds the grid's integers exactly, here.
"""

from __future__ import annotations

import functools
import math
import sys
from fractions import Fraction

import numpy as np

SUM_GRID_BITS = 24  # sum rounds each value onto a grid of 2**-24 of its bound (see bounded_sum)
SUM_CHUNK_BITS = 18  # 2**18 values of at most 2**24 sum below 2**42 < 2**53: exact in float64


def _float_at_most(q: Fraction) -> float:
    try:
        f = float(q)
    except OverflowError:
        f = sys.float_info.max
    return math.nextafter(f, 0.0) if Fraction(f) > q else f


@functools.lru_cache(maxsize=256)
def sum_grid(bound: Fraction) -> tuple[int, float, float]:
    """(k, 2**-k, b * 2**-k) for a bound > 0: b is the largest float <= bound, and the sum's
    grid is 2**k with b < 2**(k + SUM_GRID_BITS) (see bounded_sum).  Public, and computed once
    per bound: a gradient descent sums with the same bound at every step."""
    b = _float_at_most(Fraction(bound))
    k = max(math.frexp(b)[1] - SUM_GRID_BITS, -1000)  # b < 2**(k + 24); 2**-k stays finite
    inv = math.ldexp(1.0, -k)
    return k, inv, b * inv  # b * inv exact: scaling by a power of two


def bounded_sum(x, bound: Fraction) -> float:
    """sum_i clamp(x_i) computed exactly, so one row moves it by at most `bound`.

    A float sum's rounding depends on every other row, so its sensitivity can exceed the bound
    (Casacuberta et al., CCS 2022).  Here each value is clamped to [-b, b] (b: the largest float
    <= bound; NaN counts as 0) and rounded toward zero onto the grid g = 2**k with b/g <= 2**24:
    |g * trunc(x/g)| <= b keeps one row's share within the bound, and g depends only on the
    bound (public).  A chunk of 2**SUM_CHUNK_BITS such integers sums exactly in float64, and the
    chunk sums add exactly as Python ints, so the total is exact at any size; working chunk by
    chunk in one small buffer also keeps it fast.  Integer data is unchanged when the bound is
    below 2**24.  A total beyond the float range saturates at the largest float."""
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
