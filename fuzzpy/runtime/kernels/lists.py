"""Evaluators of the list primitives `range`, `sort`, `reverse`, `take` (declared in
fuzzpy/primitives/lists.py, with the exact `range_values` and `sort_key` both the checker and
these use)."""

from __future__ import annotations

from ... import limits
from ...primitives.lists import RangeTooLong, range_values, sort_key
from ...primitives.registry import NO_TABLE, PER_LANE, kernel
from ..state import RunFailure


def _range(lo, hi, step):
    try:
        return range_values(lo, hi, step)
    except RangeTooLong:
        # Reached only with released (public) arguments: the checker put FAIL in the risk.
        raise RunFailure(f"range: the step is not positive, a bound is not finite, or the list would have "
                         f"more than {limits.MAX_LIST} elements") from None


def _sort(ctx, xs):
    return tuple(sorted(xs, key=sort_key(ctx.info.get("categories"))))


def _reverse(xs):
    return tuple(reversed(tuple(xs)))


def _take(k, xs):
    return tuple(xs)[:int(k)]


kernel("range", reference=_range, batched=PER_LANE, dask=NO_TABLE)
kernel("sort", reference=_sort, context=True, batched=PER_LANE, dask=NO_TABLE)
kernel("reverse", reference=_reverse, batched=PER_LANE, dask=NO_TABLE)
kernel("take", reference=_take, batched=PER_LANE, dask=NO_TABLE)
