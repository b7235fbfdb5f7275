"""Numbers as the runtime computes them (docs/runtime.md, "Values").

Outside row functions every number is exact: ints and Fractions, with the infinities and NaN of
saturated releases kept as floats (an extended real).  `fold_exact` applies a primitive's
check-time fold (its exact semantics, declared with the primitive) to such numbers; `as_float`
turns them into the floats numpy computes with inside row functions.  Whole numbers (counts and
their sums) are most of the Fractions a run makes, so they have fast paths of their own
(`whole_fraction`, the `_WHOLE` folds on their integers).  Shared by the evaluator and the
compiled code (compiled.py), which must agree on every value.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any, Callable, Optional

import numpy as np

from ..primitives.arith import fold_mul
from .node_memo import NodeMemo


def as_float(v: Any) -> Any:
    """An exact number as a float (saturating), for numpy; anything else unchanged."""
    t = type(v)
    if t is float:  # the common case first: a released value, a row function's float
        return v
    if t is Fraction or t is int or isinstance(v, Fraction) or (isinstance(v, int) and not isinstance(v, bool)):
        try:
            return float(v)
        except OverflowError:
            return float("inf") if v > 0 else float("-inf")
    return v


def exact_scalar(v: Any) -> Any:
    """A number as an exact Fraction (ints, finite floats, numpy scalars); an infinity or NaN
    stays a float (Python mixes it with Fractions as an extended real: min(q, inf) is q, exactly);
    None when it is not a number (an array, a string...)."""
    t = type(v)
    if t is float:  # the common case first: a released value
        return Fraction(v) if math.isfinite(v) else v
    if t is Fraction:
        return v
    if isinstance(v, bool):
        return None
    if isinstance(v, Fraction):
        return v
    if isinstance(v, (int, np.integer)):
        return whole_fraction(int(v))
    if isinstance(v, (float, np.floating)):
        return Fraction(float(v)) if np.isfinite(v) else float(v)
    return None


_NOT_EXACT = object()


def fold_exact(fold: Callable[..., Any], args: Any) -> Any:
    """Scalar arithmetic and comparisons in exact arithmetic (the checker's reals, extended with
    the infinities); booleans and strings pass through.  _NOT_EXACT when an argument is not a
    scalar."""
    if len(args) == 2:
        a, b = args
        ta, tb = type(a), type(b)
        if fold in _COMPARE and ta in _NUMBERS and tb in _NUMBERS:
            # Python compares ints, floats and Fractions with each other exactly (an infinity or
            # NaN as the extended real exact_arg keeps it as), so the comparison of the values
            # themselves is the comparison of their exact values.
            return fold(a, b)
        if (ta is Fraction or ta is int) and (tb is Fraction or tb is int):
            # Two exact numbers (exact_arg: an int is its Fraction).  On whole numbers (counts,
            # their sums, public integers) the fold's result comes from the integers directly:
            # the same value and type, without the Fraction protocol (`_WHOLE`).
            on_ints = _WHOLE.get(fold)
            if on_ints is not None and a.denominator == 1 and b.denominator == 1:
                return on_ints(a, b)
            return fold(a if ta is Fraction else whole_fraction(a),
                        b if tb is Fraction else whole_fraction(b))
        if (ta is str or ta is bool) and (tb is str or tb is bool):  # exact_arg keeps them as they are
            return fold(a, b)
    exact = []
    for a in args:
        q = exact_arg(a)
        if q is None:
            return _NOT_EXACT
        exact.append(q)
    return fold(*exact)


def _whole_by_slots(n: int) -> Fraction:
    f = _new_object(Fraction)
    f._numerator, f._denominator = n, 1  # type: ignore[attr-defined]
    return f


_new_object = object.__new__
# whole_fraction(n): Fraction(n) for a Python int n.  Whole numbers (counts and their sums) are
# most of the Fractions a run makes, and the constructor's argument handling is two thirds of
# making one; the Fraction built directly has the same value and state (lowest terms,
# denominator 1).  Only where fractions.Fraction keeps its value in exactly these two slots
# (CPython 3.10 to 3.13); anywhere else, the constructor.
whole_fraction: Callable[[int], Fraction] = (
    _whole_by_slots if getattr(Fraction, "__slots__", None) == ("_numerator", "_denominator")
    and _whole_by_slots(7) == Fraction(7) and hash(_whole_by_slots(7)) == hash(Fraction(7)) else Fraction)


SMALL_WHOLES = 4096
_SMALL: Optional[list[Fraction]] = None


def whole_fractions(ints: np.ndarray) -> list[Fraction]:
    """[whole_fraction(v) for v in ints] for an int array.  Counts are mostly small: those in
    [0, SMALL_WHOLES) are taken from one table of Fractions made once (Fractions are immutable,
    so one object can stand for every equal count; making one costs five times reading one)."""
    table = small_wholes()
    # a test per element, not a min and a max of the array: lanes are often a dozen candidates
    return [table[v] if 0 <= v < SMALL_WHOLES else whole_fraction(v) for v in ints.tolist()]


def small_wholes() -> list[Fraction]:
    """The table of whole_fraction(i) for i in [0, SMALL_WHOLES), made on first use."""
    global _SMALL
    table = _SMALL
    if table is None:  # built whole, then published: a thread sees the whole table or none
        table = _SMALL = [whole_fraction(i) for i in range(SMALL_WHOLES)]
    return table


def _whole_max(a: Any, b: Any) -> Fraction:
    """max(a, b) of whole numbers: the operand max returns (the first unless the second is
    larger), as a Fraction."""
    m = b if b.numerator > a.numerator else a
    return m if type(m) is Fraction else whole_fraction(m)


def _whole_min(a: Any, b: Any) -> Fraction:
    m = b if b.numerator < a.numerator else a
    return m if type(m) is Fraction else whole_fraction(m)


def _whole_folds() -> dict:
    """fold -> its value on two whole numbers (ints or Fractions with denominator 1), computed
    on their integers: what the fold computes on their Fractions (comparisons of whole numbers
    compare their numerators; +, -, * of them are whole; `mul`'s 0 * x = 0 is 0 too)."""
    out: dict = {
        operator.add: lambda a, b: whole_fraction(a.numerator + b.numerator),
        operator.sub: lambda a, b: whole_fraction(a.numerator - b.numerator),
        max: _whole_max,
        min: _whole_min,
    }
    for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
        out[op] = lambda a, b, op=op: op(a.numerator, b.numerator)
    out[fold_mul] = lambda a, b: whole_fraction(a.numerator * b.numerator)
    return out


def exact_arg(a: Any) -> Any:
    """An argument as `fold_exact` takes it: booleans and strings as they are, numbers exact
    (`exact_scalar`); None for anything else."""
    t = type(a)
    if t is Fraction or t is bool or t is str:
        return a
    if t is int:
        return whole_fraction(a)
    if isinstance(a, (bool, str)):
        return a
    return exact_scalar(a)


_WHOLE = _whole_folds()
_NUMBERS = frozenset({int, float, Fraction})  # by type: a bool is not one of them
_COMPARE = frozenset({operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne})


# ---- check-time constants ---------------------------------------------------------------------------

def runtime_const(v: Any, exact: bool = True) -> Any:
    """Check-time constants as runtime values: exact (Fractions) for scalar evaluation, floats
    for column evaluation (`exact=False`)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (Fraction, int)):
        return Fraction(v) if exact else as_float(v)
    if isinstance(v, (tuple, list)):
        return tuple(runtime_const(x, exact) for x in v)
    if isinstance(v, dict):
        return {k: runtime_const(x, exact) for k, x in v.items()}
    return v


# A constant's runtime value per IR node, shared by every interpreter (a program run many times,
# a lane evaluator per batch): converting a long public list to Fractions is otherwise repeated at
# every run.  Only immutable values are shared (no dicts), kept on the node (runtime/node_memo.py):
# they live as long as the checked program.
_CONSTS = NodeMemo("const")


def shared_const(node: Any, exact: bool) -> Any:
    pair = _CONSTS.get(node)
    if pair is None:
        pair = (_UNSET, _UNSET)
    v = pair[0 if exact else 1]
    if v is _UNSET:
        v = runtime_const(node.value, exact)
        if _immutable(v):
            _CONSTS[node] = (v, pair[1]) if exact else (pair[0], v)
    return v


_UNSET = object()


def _immutable(v: Any, depth: int = 0) -> bool:
    if type(v) is tuple:
        return depth < 16 and all(_immutable(x, depth + 1) for x in v)
    return v is None or isinstance(v, (bool, str, int, float, Fraction))
