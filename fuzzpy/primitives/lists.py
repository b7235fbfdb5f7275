"""Public lists computed from public numbers, and post-processing of released lists.

`range lo hi step` makes a grid of candidates (a quantile's, a CDF's boundaries) from three
public numbers, where a program used to spell every number out.  `sort`, `reverse` and `take`
order and cut lists; with `sort_by` (primitives/ordered.py) on a released list of pairs they
give the top k of a released histogram.  Everything here either reads public values only (its
result is public: distance 0) or moves no further than its input (`take`, `reverse`), so none of
it costs privacy.  Sorting a list that depends on private data is refused: release it first.

The rules are docs/soundness.md's rule Lists; the length of a computed list is bounded by
`limits.MAX_LIST`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from .. import limits
from ..typesystem.effects import FAIL
from ..typesystem.sens import ONE
from ..typesystem.types import Cat, ListT, Num, Str
from .declarations import Arg, Result, primitive

_WHY_PUBLIC = ("A value at distance 0 is the same on every pair of neighbouring tables (invariant I1 with "
               "every coefficient 0), so any function of it is too: post-processing (Dwork & Roth 2014, "
               "Proposition 2.1).")


# rule Lists: a constant, or a value whose distance is empty
def is_public(arg: Arg) -> bool:
    """A constant, or a value whose distance mentions no symbol (a released value, a public
    parameter): the same on neighbouring tables."""
    return arg.is_const or not arg.dist


def _refuse_private(ctx, arg: Arg, what: str) -> None:
    raise ctx.fail("E1501", f"{what} depends on private data", arg.span,
                   "only public values may be used here: literals, params, arithmetic on them, or values "
                   "released by a mechanism (sample x = laplace eps (...); then use x)")


# ---- range --------------------------------------------------------------------------------------

class RangeTooLong(Exception):
    pass


def range_values(lo: Any, hi: Any, step: Any) -> tuple:
    """lo, lo + step, ... up to hi included, exactly (Fractions); RangeTooLong when step <= 0,
    an argument is not finite, or there would be more than limits.MAX_LIST elements."""
    try:
        lo, hi, step = Fraction(lo), Fraction(hi), Fraction(step)
    except (TypeError, ValueError, OverflowError):  # an infinity or NaN (a saturated release)
        raise RangeTooLong() from None
    if step <= 0:
        raise RangeTooLong()
    if hi < lo:
        return ()
    n = math.floor((hi - lo) / step) + 1
    if n > limits.MAX_LIST:
        raise RangeTooLong()
    return tuple(lo + i * step for i in range(n))


@primitive("range", ("lo", "hi", "step"), "num -> num -> num -> list num",
           "range lo hi step: the public list lo, lo + step, lo + 2 step, ... up to hi included (empty when "
           "hi < lo), computed exactly; e.g. range 17 90 1 as the candidates of a median, range 20 90 5 as "
           "the boundaries of a CDF. The arguments must be public (constants, params, or released values); "
           f"at most {limits.MAX_LIST} elements.",
           "The list is a function of public values only, so it is public (distance 0): "
           + _WHY_PUBLIC + " With constant arguments it is a constant, computed by the checker; with released "
           "arguments it is computed at run time, and whether that succeeds (the step may be 0, the list too "
           "long) depends on released values only: a failure risk that no private data decides.",
           category="list")
def _range(ctx, args: list[Arg], span) -> Result:
    for a, what in zip(args, ("the lower bound of range", "the upper bound of range", "the step of range")):
        if not isinstance(a.type, Num):
            raise ctx.fail("E0202", f"{what} must be a number, but this is {a.type}", a.span)
        if not is_public(a):
            _refuse_private(ctx, a, what)
    lo, hi, step = args
    integer = lo.type.integer and step.type.integer
    if all(a.is_const for a in args):
        if Fraction(step.const) <= 0:
            raise ctx.fail("E0213", f"the step of range must be positive, got {Fraction(step.const)}", step.span)
        try:
            values = range_values(lo.const, hi.const, step.const)
        except RangeTooLong:
            raise ctx.fail("E1502", f"this range would have more than {limits.MAX_LIST} elements", span,
                           "use a larger step, or a smaller interval") from None
        if not values:
            return Result(ListT(Num(None, None, integer)), {}, const=())
        return Result(ListT(Num(values[0], values[-1], integer)), {}, const=values)
    elem = Num(_const_or(lo, "lo"), _const_or(hi, "hi"), integer)
    # Released arguments: computed at run time; may fail on released values only (rule Lists).
    return Result(ListT(elem), {}, risk={FAIL: ONE})


def _const_or(arg: Arg, side: str):
    return Fraction(arg.const) if arg.is_const else getattr(arg.type, side)


# ---- sort, reverse, take ---------------------------------------------------------------------------

def _list_elem(ctx, arg: Arg, name: str):
    if not isinstance(arg.type, ListT):
        hint = ("to order the rows of a table use sort_by key b; to sort values computed from private data, "
                "release them first (sample xs = ...), then sort the released list")
        raise ctx.fail("E0202", f"{name} expects a list, but this is {arg.type}", arg.span, hint)
    return arg.type.elem


def sort_key(categories: tuple | None = None):
    """A total order on the values a public list can hold: numbers (NaN last), strings, and
    categories in their declared order."""
    if categories is not None:
        index = {v: i for i, v in enumerate(categories)}
        return lambda v: index.get(v, len(index))

    def key(v):
        if isinstance(v, str):
            return (0, v)
        return (1, 0) if v != v else (0, v)  # v != v: a NaN (a saturated release), last
    return key


def sortable(ctx, t, span, what: str) -> dict:
    """The info the runtime needs to sort values of type t (categories' declared order)."""
    if isinstance(t, Cat):
        return {"categories": tuple(t.values)}
    if isinstance(t, (Num, Str)):
        return {}
    raise ctx.fail("E0202", f"{what} orders numbers, strings or categories, not {t}", span,
                   "to order pairs by one component use sort_by (fun p -> p.2) xs")


# rule Lists: sort needs a public list, so its result is public
@primitive("sort", ("xs",), "list 'a -> list 'a",
           "sort xs: the elements of a public list (numbers, strings or categories) in increasing order "
           "(categories in their declared order); for decreasing order, reverse (sort xs). A list that "
           "depends on private data must be released first.",
           "The list must be public (distance 0), so its sorted copy is too: " + _WHY_PUBLIC +
           " Sorting private values is refused rather than typed: release them with a mechanism first.",
           category="list")
def _sort(ctx, args: list[Arg], span) -> Result:
    (xs,) = args
    elem = _list_elem(ctx, xs, "sort")
    if not is_public(xs):
        _refuse_private(ctx, xs, "the list given to sort")
    info = sortable(ctx, elem, xs.span, "sort")
    if xs.is_const:
        return Result(xs.type, {}, const=tuple(sorted(xs.const, key=sort_key(info.get("categories")))))
    return Result(xs.type, {}, info=info)


# rule Lists: reverse keeps the list's distance
@primitive("reverse", ("xs",), "list 'a -o list 'a",
           "reverse xs: the elements of a list in the opposite order.",
           "Lists at a finite distance have the same length, and reversing both pairs the same elements: "
           "the sum of the elementwise distances is unchanged, so reverse is 1-sensitive.",
           category="list")
def _reverse(ctx, args: list[Arg], span) -> Result:
    (xs,) = args
    _list_elem(ctx, xs, "reverse")
    if xs.is_const:
        return Result(xs.type, {}, const=tuple(reversed(xs.const)))
    return Result(xs.type, xs.dist)


# rule Lists: take k, k a public whole-number constant, keeps the list's distance
@primitive("take", ("k", "xs"), "int -> list 'a -o list 'a",
           "take k xs: the first k elements of a list (all of them if it is shorter); k a public whole "
           "number constant. take k (reverse (sort xs)) is the top k of a released list.",
           "Lists at a finite distance have the same length, so both prefixes hold the same positions, and "
           "the sum of the elementwise distances over a prefix is at most the sum over the whole list: "
           "1-sensitive in xs. k is a constant, the same on every table.",
           category="list")
def _take(ctx, args: list[Arg], span) -> Result:
    k, xs = args
    _list_elem(ctx, xs, "take")
    if not (k.is_const and isinstance(k.type, Num)):
        raise ctx.fail("E0209", "the number of elements take keeps must be a public constant (a literal or a "
                       "param)", k.span)
    n = Fraction(k.const)
    if n.denominator != 1 or n < 0:
        raise ctx.fail("E0213", f"take needs a whole number of elements, at least 0, got {n}", k.span)
    if xs.is_const:
        return Result(xs.type, {}, const=tuple(xs.const)[:int(n)])
    return Result(xs.type, xs.dist)
