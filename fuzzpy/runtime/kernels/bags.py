"""Evaluators of the bag primitives `count`, `filter`, `map`, `sum`, `union`, `split` (declared in
fuzzpy/primitives/bags.py).

Bags are DataFrames, Series or lazily filtered MaskedBags (runtime/values.py).  Every evaluator
is total: a NaN or an odd value never raises.  `sum` is exact: each value is clamped and
rounded onto a grid fixed by the public bound, and the integers are summed exactly
(runtime/sums.py, which every other evaluator of a sum shares: lanes, Dask partitions, `vsum`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...primitives.registry import kernel
from ..numbers import as_float
from ..sums import bounded_sum
from ..values import MaskedBag, bag_from_rows, bag_rows, materialise, restrict
from ..vectorize import row_function


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
    return restrict(b, truth(row_function(ctx.interp.state, p)(b)))


def _map(ctx, f, b):
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
    # No shortcut for an empty side: how the result is stored (its column dtypes) must not
    # depend on whether a bag happens to be empty.
    a, b = materialise(a), materialise(b)
    if isinstance(a, pd.DataFrame) != isinstance(b, pd.DataFrame):
        return bag_from_rows(bag_rows(a) + bag_rows(b))
    return pd.concat([a, b], ignore_index=True)


def _split(ctx, p, b):
    keep = truth(row_function(ctx.interp.state, p)(b))
    return restrict(b, keep), restrict(b, ~keep)


kernel("count", reference=_count, lazy_bags=True)
kernel("filter", reference=_filter, context=True, lazy_bags=True)
kernel("map", reference=_map, context=True, lazy_bags=True)
kernel("sum", reference=_sum, context=True, lazy_bags=True)
kernel("union", reference=_union, lazy_bags=True)
kernel("split", reference=_split, context=True, lazy_bags=True)
