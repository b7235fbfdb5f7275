"""Evaluators of the arithmetic, comparison, boolean and numeric primitives (declared in
fuzzpy/primitives/arith.py).

Their reference evaluators work unchanged on Python scalars, numpy arrays and pandas Series, so
row functions built from them run as vectorised column operations.  Outside row functions the
evaluator computes them exactly with their declared folds instead (runtime/numbers.py); these
runs see floats.  None of them may raise on a data-dependent value: an error message would then
depend on private data.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any, Optional

import numpy as np

from ...primitives.registry import NO_TABLE, PER_LANE, kernel
from ...typesystem import ir as I
from ..batch import (
    _CMP_OPS,
    _FLOAT_EXACT_INT,
    _INT_SAFE,
    LaneEvaluator,
    Lanes,
    exact_args,
    has_lanes,
)
from ..numbers import as_float, exact_arg
from ..ratios import Ratios
from ..vectorize import remembered


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


# ---- on lane values (runtime/batch.py) --------------------------------------------------------------

_INT_OPS = {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum}
_CMP_FNS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
            "ne": operator.ne}


def _int_lanes(v: Any, n: int) -> Optional[tuple[np.ndarray, bool]]:
    """(int64 array, is-a-Fraction) for integer lanes or an integral constant; None otherwise."""
    if type(v) is Lanes:
        d = v._data  # None for exact rationals (not ints here)
        if isinstance(d, np.ndarray) and d.dtype == np.int64:
            return d, v.frac
        return None
    if isinstance(v, bool):
        return None
    if isinstance(v, int) or (isinstance(v, Fraction) and v.denominator == 1):
        q = int(v)
        if abs(q) < _INT_SAFE:
            return np.full(n, q, dtype=np.int64), isinstance(v, Fraction)
    return None


def _small(a: np.ndarray) -> bool:
    return a.size == 0 or int(np.abs(a).max()) < _INT_SAFE


def _b_arith(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """+, -, max, min, comparisons, neg, abs on integer lanes: numpy on int64 (exact below 2^61).
    The exact scalar semantics turn ints into Fractions, so the results are Fractions too."""
    ints = [_int_lanes(a, ev.n) for a in args]
    if any(x is None for x in ints) or not all(_small(a) for a, _ in ints):  # type: ignore[union-attr]
        return NotImplemented
    arrays = [a for a, _ in ints]  # type: ignore[misc]
    name = prim.name
    if name in _CMP_OPS:
        return Lanes(_CMP_OPS[name](*arrays))
    if name == "neg":
        return Lanes(-arrays[0], True)
    if name == "abs":
        return Lanes(np.abs(arrays[0]), True)
    if name == "mul":
        a, b = arrays
        if int(np.abs(a).max(initial=0)) * int(np.abs(b).max(initial=0)) >= _INT_SAFE:
            return NotImplemented
        return Lanes(a * b, True)
    return Lanes(_INT_OPS[name](*arrays), True)


def _ratios(v: Any, n: int) -> Optional[Ratios]:
    """The exact values of lanes of finite floats, ints and Fractions (or of such a constant);
    None for anything else (infinities and NaN keep the reference path).  A lane list's ratios
    are kept with it, for the next operation that reads them."""
    if type(v) is Lanes:
        if v.ratios is None:
            d = v.data
            if v.floats is not None:
                v.ratios = Ratios.of_floats(v.floats)  # None for an infinity or NaN, as of_values
            elif isinstance(d, np.ndarray):
                if d.dtype != np.int64:
                    return None
                v.ratios = Ratios.of_ints(d)
            else:
                v.ratios = Ratios.of_values(d)
        return v.ratios
    if isinstance(v, (int, float, Fraction)) and not isinstance(v, bool):
        return Ratios.constant(v, n)  # None for a numpy scalar or an infinity: the reference path
    return None


_RATIO_OPS = {"add": Ratios.add, "sub": Ratios.sub, "mul": Ratios.mul, "div": Ratios.div}


def _b_exact(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """+, -, *, /, max, min and comparisons on lanes of released floats and exact numbers: the
    exact scalar semantics (Fractions; 0 * x = 0, x / 0 = 0) on the lanes' integer ratios."""
    if len(args) != 2:
        return NotImplemented
    a, b = _ratios(args[0], ev.n), _ratios(args[1], ev.n)
    if a is None or b is None:
        return NotImplemented
    name = prim.name
    if name in _RATIO_OPS:
        return Lanes.of_ratios(_RATIO_OPS[name](a, b))
    if name in ("max", "min"):  # the fold's max(x, y): y where y > x (min: y < x), else x
        op = _CMP_FNS["gt" if name == "max" else "lt"]
        fa, fb = _exact_floats(args[0], ev.n), _exact_floats(args[1], ev.n)
        # finite floats (a and b are not None) compare exactly as floats: no cross-multiplying
        take = op(fb, fa) if fa is not None and fb is not None else b.compare(op, a)
        return Lanes.of_ratios(a.pick(np.asarray(take, dtype=bool), b))
    return Lanes(a.compare(_CMP_FNS[name], b))


def _b_numeric(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    # An operation on the same argument objects as its node's last evaluation gives the same
    # value (lane values are never changed once built, and arithmetic is a function of them):
    # `rate / max n 1` at every step of a gradient descent is computed once.
    return remembered(ev.numeric_memo, node, args, lambda: _numeric(ev, prim, node, args))


def _numeric(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    if any(type(a) is str for a in args):  # a string compared (`a == "age"`): no numeric path applies
        return NotImplemented
    out = _b_arith(ev, prim, node, args) if prim.name != "div" else NotImplemented
    if out is NotImplemented and prim.name in _CMP_OPS:
        out = _b_compare(ev, prim, args)
    if out is NotImplemented and prim.name not in ("neg", "abs"):
        out = _b_exact(ev, prim, node, args)
    return out


def _b_compare(ev: LaneEvaluator, prim: Any, args: list[Any]) -> Any:
    """Comparisons of released floats (and numbers a float holds exactly): comparing two floats
    is exact, so numpy gives the truth the exact fold gives (NaN is neither below nor above nor
    equal, in both)."""
    cols = [_exact_floats(a, ev.n) for a in args]
    if any(c is None for c in cols):
        return NotImplemented
    with np.errstate(invalid="ignore"):
        return Lanes(_CMP_OPS[prim.name](*cols))


def _exact_floats(v: Any, n: int) -> Optional[np.ndarray]:
    """A lane value of floats and small ints, or a number a float holds exactly, as float64;
    None otherwise."""
    if type(v) is Lanes:
        if v._data is None:
            return None  # exact rationals: compared exactly by _b_exact
        if v.floats is not None:
            return v.floats
        d = v.data
        if isinstance(d, np.ndarray):
            return None  # int lanes: the integer path
        if not all(type(x) is float or (type(x) is int and -_FLOAT_EXACT_INT < x < _FLOAT_EXACT_INT) for x in d):
            return None
        return np.array(d, dtype=np.float64)
    if type(v) is float:
        return np.full(n, v)
    if type(v) in (int, Fraction):
        f = as_float(v)
        if math.isfinite(f) and Fraction(f) == v:
            return np.full(n, f)
    return None


def _b_clip(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """clip lo hi x with public bounds a float holds exactly, on lanes of exact x: where float(x)
    lies strictly between the bounds, so does x (correct rounding is monotone and keeps the
    bounds), and the exact fold min(max(x, lo), hi) gives x itself; every other lane (near or
    past a bound, NaN) runs the exact fold."""

    lo, hi, x = args
    if has_lanes(lo) or has_lanes(hi):  # public constants (the checker's rule), never lane values
        return NotImplemented
    if type(x) is Lanes and x._data is None:
        return _clip_ratios(lo, hi, x.ratios, ev.n)  # type: ignore[arg-type]
    bounds = [_exact_floats(v, 1) for v in (lo, hi)]
    exact = [exact_args(v, 1) for v in (lo, hi)]
    if type(x) is not Lanes or type(x.data) is not list or any(b is None for b in bounds + exact):
        return NotImplemented
    flo, fhi = float(bounds[0][0]), float(bounds[1][0])
    elo, ehi = exact[0][0], exact[1][0]  # type: ignore[index]
    fold = prim.fold
    out = []
    for v in x.data:
        if type(v) is Fraction and flo < as_float(v) < fhi:
            out.append(v)
            continue
        q = exact_arg(v)
        if q is None:
            return NotImplemented
        out.append(fold(elo, ehi, q))
    return Lanes(out)


def _clip_ratios(lo: Any, hi: Any, x: Ratios, n: int) -> Any:
    """The fold min(max(x, lo), hi) on exact ratios: lo where lo > x, then hi where hi < that
    (Python's max and min keep their first argument on ties), all Fractions."""
    bounds = [Ratios.constant(exact_arg(v), n) if exact_arg(v) is not None else None for v in (lo, hi)]
    if bounds[0] is None or bounds[1] is None:
        return NotImplemented  # an infinite or non-numeric bound: the exact fold
    low, high = bounds
    m = x.pick(low.compare(operator.gt, x), low)
    return Lanes.of_ratios(m.pick(high.compare(operator.lt, m), high))


# Numbers on lanes: integer lanes in int64, released floats compared as floats, anything else
# exactly on the lanes' integer ratios (_b_numeric); clip on exact lanes (_b_clip).
for _name, _run, _batched in [
        ("add", operator.add, _b_numeric), ("sub", operator.sub, _b_numeric), ("mul", mul, _b_numeric),
        ("div", _div, _b_numeric), ("neg", operator.neg, _b_numeric), ("eq", operator.eq, _b_numeric),
        ("ne", operator.ne, _b_numeric), ("lt", operator.lt, _b_numeric), ("le", operator.le, _b_numeric),
        ("gt", operator.gt, _b_numeric), ("ge", operator.ge, _b_numeric), ("and", _np_and, PER_LANE),
        ("or", _np_or, PER_LANE), ("not", _np_not, PER_LANE), ("clip", clip, _b_clip), ("abs", _abs, _b_numeric),
        ("min", _min, _b_numeric), ("max", _max, _b_numeric), ("cswap", _cswap, PER_LANE)]:
    kernel(_name, reference=_run, batched=_batched, dask=NO_TABLE)
