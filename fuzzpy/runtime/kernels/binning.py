"""Evaluators of `floor` and `bin` (declared in fuzzpy/primitives/binning.py).

Outside row functions the evaluator computes them exactly with their folds; these runs work on
floats, scalars or columns, and clamp the result into the bounds the checker proved (passed as
the last two arguments), so float rounding cannot give a key outside the declared ones.  A
missing value (NaN) stays missing.
"""

from __future__ import annotations

import numpy as np

from ...primitives.registry import NO_TABLE, PER_LANE, kernel


def floor(x, lo, hi):
    out = np.clip(np.floor(x), lo, hi)  # NaN stays NaN
    return float(out) if np.ndim(out) == 0 else out


# rule Bin: a column binned in floats, clamped into the bounds
def bin_of(num, den, x, lo, hi):
    """floor(x * den / num) for the width w = num / den: x * den is exact for the usual data
    (whole numbers, short decimals), and a correctly rounded quotient that is exactly a whole
    number k stays k, so a value on a bin edge lands in its bin (0.3 / 0.1 is 2.9999999999999996 in floats, but
    0.3 * 10 / 1 is 3)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        out = np.multiply(x, den)
        if type(out) is not np.ndarray or out.ndim == 0 or out.dtype.kind != "f":  # as before: no array
            # of floats to work in (a scalar, a Series, ints whose quotient is a new float array)
            out = np.clip(np.floor(np.divide(out, num)), lo, hi)
            return float(out) if np.ndim(out) == 0 else out
        # the steps in place on the one new array (a column of a large table: each step's own
        # array would be allocated and written again)
        np.divide(out, num, out=out)
        np.floor(out, out=out)
        # np.clip's result, NaN kept; an infinite bound (a bin the checker left unbounded, clipped
        # after) is no bound: each skipped pass would leave every value as it is
        if lo != -np.inf:
            np.maximum(out, lo, out=out)
        if hi != np.inf:
            np.minimum(out, hi, out=out)
    return out


kernel("floor", reference=floor, batched=PER_LANE, dask=NO_TABLE)
kernel("bin", reference=bin_of, batched=PER_LANE, dask=NO_TABLE)
