"""Binning a number into a bounded integer: `floor x` and `bin w x`.

The everyday use is a group-by key: `groupby (fun r -> bin 10 r.age) db` on ages in [17, 90]
gives the decades 1 .. 9 as keys "1" .. "9", with no chain of ifs.  Neither is Lipschitz (a
tiny move of x can cross a bin edge), so, like a comparison, the result is infinitely sensitive
in anything private it reads: free inside a row function (map, filter, split, groupby are
1-sensitive in the bag whatever the row function computes, rule Row), and exact on public values.

Rule Bin (docs/soundness.md).  The result's bounds are the bins of the argument's public bounds, computed exactly by the
checker.  In a row function (floats) x / w may round across an edge; the runtime clamps the
result into the proven bounds (fuzzpy/runtime/kernels/binning.py), so every value keeps its
type (invariant I4).  A missing value
(NaN) stays missing.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..typesystem import ir as I
from ..typesystem.sens import d_inf
from ..typesystem.types import Num
from .declarations import Arg, Result, primitive

_WHY = ("floor is not Lipschitz (x and x + 1/1000 can lie in different bins), so the rule charges infinity on "
        "every private input, as a comparison does (Reed & Pierce, ICFP 2010, section 3: discrete results); "
        "row functions may be infinitely sensitive in their row, because map, filter, split and groupby are "
        "1-sensitive in the bag whatever the row function computes (section 4). The bounds come from the "
        "argument's public bounds, never from the data; the runtime clamps into them, so float rounding in a "
        "row function cannot produce a key outside the declared ones.")


def _floor_of(q):
    """floor on an exact number; an infinity or NaN (a saturated release) is passed on."""
    if isinstance(q, float) and not math.isfinite(q):
        return q
    return Fraction(math.floor(Fraction(q)))


def _clamp(v, lo, hi):
    if v != v:  # NaN: a missing value stays missing
        return v
    return min(max(v, lo), hi)


def _fold_floor(x, lo, hi):
    return _clamp(_floor_of(x), lo, hi)


# rule Bin: a constant or row value binned exactly, clamped into the bounds
def _fold_bin(num, den, x, lo, hi):
    if isinstance(x, float) and not math.isfinite(x):
        return _clamp(x, lo, hi)
    return _clamp(Fraction(math.floor(Fraction(x) * Fraction(den) / Fraction(num))), lo, hi)


def _bounds_ir(lo, hi, span) -> list[I.IR]:
    """The proven bounds as IR constants for the runtime's clamp (infinite when unbounded)."""
    return [I.IConst(float("-inf") if lo is None else lo, span=span),
            I.IConst(float("inf") if hi is None else hi, span=span)]


def _number(ctx, arg: Arg, name: str) -> Num:
    if not isinstance(arg.type, Num):
        raise ctx.fail("E0202", f"{name} expects a number, but this is {arg.type}", arg.span)
    return arg.type


# rule Bin: bounds from the argument's bounds; infinite distance unless constant
def _binned(x: Arg, t: Num, width: Fraction, span, extra: list[I.IR]) -> Result:
    def edge(v):
        return None if v is None else Fraction(math.floor(Fraction(v) / width))
    if x.is_const:
        v = edge(x.const)
        return Result(Num(v, v, True), {}, const=v)
    lo, hi = edge(t.lo), edge(t.hi)
    return Result(Num(lo, hi, True), d_inf(x.dist), ir_args=[*extra, x.ir, *_bounds_ir(lo, hi, span)])


@primitive("floor", ("x",), "num -> int[floor lo, floor hi]",
           "floor x: the largest whole number at most x; for x in num[lo, hi] an int[floor lo, floor hi]. "
           "Not Lipschitz: use it in row functions (a group-by key) or on released values.",
           _WHY, category="numeric", vectorised=True, fold=_fold_floor)
def _floor(ctx, args: list[Arg], span) -> Result:
    (x,) = args
    t = _number(ctx, x, "floor")
    return _binned(x, t, Fraction(1), span, [])


@primitive("bin", ("w", "x"), "num -> num -> int[floor(lo/w), floor(hi/w)]",
           "bin w x: the number of the bin of width w that holds x, floor(x / w), with w a positive public "
           "constant; for x in num[lo, hi] an int[floor(lo/w), floor(hi/w)]: bin 10 r.age for ages in [17, 90] "
           "is 1 .. 9, so groupby (fun r -> bin 10 r.age) db has the keys \"1\" .. \"9\". The bin's lower edge "
           "is w * bin w x. Not Lipschitz: use it in row functions (a group-by key) or on released values.",
           _WHY, category="numeric", vectorised=True, fold=_fold_bin)
def _bin(ctx, args: list[Arg], span) -> Result:
    w, x = args
    if not (w.is_const and isinstance(w.type, Num)):
        raise ctx.fail("E0209", "the width of bin must be a public constant (a literal or a param)", w.span)
    width = Fraction(w.const)
    if width <= 0:
        raise ctx.fail("E0213", f"the width of bin must be positive, got {width}", w.span)
    t = _number(ctx, x, "bin")
    extra = [I.IConst(width.numerator, span=w.span), I.IConst(width.denominator, span=w.span)]
    return _binned(x, t, width, span, extra)
