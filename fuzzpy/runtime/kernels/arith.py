"""Evaluators of the arithmetic, comparison, boolean and numeric primitives (declared in
fuzzpy/primitives/arith.py).

Their reference evaluators work unchanged on Python scalars, numpy arrays and pandas Series, so
row functions built from them run as vectorised column operations.  Outside row functions the
evaluator computes them exactly with their declared folds instead (runtime/numbers.py); these
runs see floats.  None of them may raise on a data-dependent value: an error message would then
depend on private data.
"""

from __future__ import annotations

import operator

import numpy as np

from ...primitives.registry import kernel


def mul(x, y):
    """x * y, with 0 * anything = 0, inf and NaN included: the checker reasons over the reals,
    where scaling by 0 gives 0, so `(1 / count db) * 0` must be 0 on every table, not NaN on an
    empty one (a float NaN would reveal what the checker proved public)."""
    with np.errstate(invalid="ignore", over="ignore"):
        product = np.multiply(x, y)
        if type(product) is np.ndarray and product.ndim and _no_zero(x) and _no_zero(y):
            return product  # no zero operand (NaN is not zero): nothing to replace
        zero = np.logical_or(np.equal(x, 0), np.equal(y, 0))
        if np.ndim(product) == 0:
            return 0.0 if zero else float(product)
        return np.where(zero, 0.0, product)


def _no_zero(v) -> bool:
    return bool(v.all()) if type(v) is np.ndarray else bool(np.all(v))


def _div(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(x, y)


def _np_and(x, y):
    return np.logical_and(x, y)


def _np_or(x, y):
    return np.logical_or(x, y)


def _np_not(x):
    return np.logical_not(x)


def clip(lo, hi, x):
    # fmax/fmin ignore NaN, so NaN (e.g. 0/0 in a row function) becomes the lower bound and
    # infinities the bounds: clip is total, and one pass each is cheaper than nan_to_num.
    out = np.fmax(x, float(lo))
    return np.fmin(out, float(hi), out=out) if isinstance(out, np.ndarray) else np.fmin(out, float(hi))


def _abs(x):
    return np.abs(x)


def _min(x, y):
    return np.minimum(x, y)


def _max(x, y):
    return np.maximum(x, y)


def _cswap(p):
    x, y = p
    return (_min(x, y), _max(x, y))


for _name, _run in [("add", operator.add), ("sub", operator.sub), ("mul", mul), ("div", _div), ("neg", operator.neg),
                    ("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt), ("le", operator.le),
                    ("gt", operator.gt), ("ge", operator.ge), ("and", _np_and), ("or", _np_or), ("not", _np_not),
                    ("clip", clip), ("abs", _abs), ("min", _min), ("max", _max), ("cswap", _cswap)]:
    kernel(_name, reference=_run)
