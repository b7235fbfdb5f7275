"""Evaluators of the ordered primitives `sort_by`, `head`, `tail`, `slice` (declared in
fuzzpy/primitives/ordered.py).

A sort is stable and by the public key alone (a category in its declared order, however the
column is stored), so the order of the rows never depends on anything but the key.
"""

from __future__ import annotations

import pandas as pd

from ...primitives.lists import sort_key
from ...primitives.registry import PER_LANE, Refused, kernel
from ..vectorize import row_function
from .partitions import category_codes


def _sort_by(ctx, key, b):
    if isinstance(b, tuple):  # a public list (post-processing): stable, by the key's value
        order = sort_key(ctx.info.get("categories"))
        keys = [order(ctx.call(key, x)) for x in b]
        return tuple(x for _, x in sorted(zip(keys, b), key=lambda p: p[0]))
    keys = row_function(ctx.interp.state, key)(b)
    if "categories" in ctx.info:
        # A category sorts in its declared order, however the column is stored (categorical or
        # plain strings): the order must not depend on the data.
        keys = category_codes(pd.Series(keys).reset_index(drop=True), ctx.info["categories"])
    order = pd.Series(keys).reset_index(drop=True).sort_values(kind="stable").index
    return b.iloc[order].reset_index(drop=True)


def _head(ctx, n, s):
    return s.head(int(n)).reset_index(drop=True)


def _tail(ctx, n, s):
    return s.tail(int(n)).reset_index(drop=True) if int(n) > 0 else s.iloc[0:0]


def _slice(ctx, i, j, s):
    return s.iloc[int(i):int(j)].reset_index(drop=True)


# An order over a whole table, and windows of it, cannot be computed partition by partition.
_WHOLE_TABLE = Refused("orders a whole table, or takes rows by their position in one: not computable partition "
                       "by partition; run with --engine pandas")

kernel("sort_by", reference=_sort_by, context=True, batched=PER_LANE, dask=_WHOLE_TABLE)
kernel("head", reference=_head, context=True, batched=PER_LANE, dask=_WHOLE_TABLE)
kernel("tail", reference=_tail, context=True, batched=PER_LANE, dask=_WHOLE_TABLE)
kernel("slice", reference=_slice, context=True, batched=PER_LANE, dask=_WHOLE_TABLE)
