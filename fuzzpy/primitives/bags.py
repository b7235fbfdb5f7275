"""Bag (private table) primitives.

A bag's distance is the size of the symmetric difference (add or remove one row).  Functions
given to `map` and `filter` run once per row, so anything private they capture would be read
once per row: their captured distance is multiplied by infinity (Fuzz's `!` on bag functions).
Their evaluators are in fuzzpy/runtime/kernels/bags.py.
"""

from __future__ import annotations

from fractions import Fraction

from ..typesystem.sens import d_add, d_inf, d_scale, max_abs
from ..typesystem.types import INT, NUM, Bag, Bool, Num, Tensor, Type, UnitBag, holds_tables, join_types
from .declarations import Arg, Result, primitive

_REF_FUZZ = "Reed & Pierce, ICFP 2010, section 4 (bag primitives)"


def elem_type(ctx, arg: Arg, what: str, units: bool = False) -> Type:
    """The row type of a bag; with `units`, also of a table with a privacy unit (rule Units)."""
    if not isinstance(arg.type, Bag) and not (units and isinstance(arg.type, UnitBag)):
        raise ctx.fail("E0202", f"{what} expects a bag, but this is {arg.type}", arg.span)
    return arg.type.elem


# rule Units: a primitive that keeps each row with its unit keeps the unit
def same_kind(t: Type, elem: Type) -> Type:
    """A table of `elem` rows of the same kind as t: with t's unit if it has one."""
    return UnitBag(elem, t.unit) if isinstance(t, UnitBag) else Bag(elem)


# rule Row: captures charged infinitely; no table in the result (E0308)
def row_function(ctx, fn: Arg, elem: Type, span):
    """Check a per-row function; returns (instantiation, extra distance from its captures)."""
    inst = ctx.instantiate(fn, [elem], span, per_row=True)
    if holds_tables(inst.cod):  # one table per row, all alive at once: no growth bound holds
        raise ctx.fail("E0308", f"a function applied to every row may not return a table (it returns {inst.cod})",
                       fn.span)
    captured = d_inf(inst.captured)
    return inst, captured


@primitive("count", ("b",), "bag 'a -o int[0, inf]",
           "count b: the number of rows of b.",
           "Adding or removing one row changes the count by exactly 1. " + _REF_FUZZ,
           category="bag")
def _count(ctx, args, span):
    (b,) = args
    elem_type(ctx, b, "count")
    return Result(_COUNT, b.dist)


_COUNT = Num(Fraction(0), None, True)  # int[0, inf]: one type for every count (it keeps its hash)


@primitive("filter", ("p", "b"), "('a -> bool) -> bag 'a -o bag 'a",
           "filter p b: the rows of b for which the public predicate p holds.",
           "Each row is kept or dropped on its own, so a table at distance d stays within d. "
           "The predicate may not capture private values (they would be read once per row). On a table with "
           "a privacy unit each row keeps its unit, and a unit's rows are kept or dropped by themselves: the "
           "unit distance cannot grow either. " + _REF_FUZZ,
           category="bag", units=True)
def _filter(ctx, args, span):
    p, b = args
    elem = elem_type(ctx, b, "filter", units=True)
    inst, captured = row_function(ctx, p, elem, span)
    if not isinstance(inst.cod, Bool):
        raise ctx.fail("E0202", f"filter expects a predicate returning bool, but it returns {inst.cod}", p.span)
    return Result(b.type, d_add(b.dist, captured), ir_args=[inst.code, b.ir])


@primitive("map", ("f", "b"), "('a -> 'b) -> bag 'a -o bag 'b",
           "map f b: apply the public row function f to every row of b.",
           "Rows map one to one, so the symmetric difference cannot grow; on a table with a privacy unit each "
           "row keeps its unit, so the units whose rows differ are the same. " + _REF_FUZZ,
           category="bag", units=True)
def _map(ctx, args, span):
    f, b = args
    elem = elem_type(ctx, b, "map", units=True)
    inst, captured = row_function(ctx, f, elem, span)
    info = {"unit": b.type.unit} if isinstance(b.type, UnitBag) else {}
    return Result(same_kind(b.type, inst.cod), d_add(b.dist, captured), ir_args=[inst.code, b.ir], info=info)


@primitive("sum", ("b",), "bag num[lo, hi] -o[max(|lo|, |hi|)] num",
           "sum b: the sum of a bag of bounded numbers (clip them first: map (fun x -> clip 0 100 x) b).",
           "One row added or removed changes the sum by at most max(|lo|, |hi|); the bounds come from "
           "the schema or a clip, never from the data (docs/data.md: loading clamps every value into "
           "its declared bounds).",
           category="bag")
def _sum(ctx, args, span):
    (b,) = args
    t = elem_type(ctx, b, "sum")
    if not isinstance(t, Num):
        raise ctx.fail("E0202", f"sum expects a bag of numbers, but the rows are {t}", b.span)
    if not t.bounded:
        raise ctx.fail("E0305", f"sum needs bounded values, but the rows are {t}", b.span,
                       "clip the values first, e.g. sum (map (fun x -> clip 0 100 x) b), "
                       "or declare bounds in the schema (num[0, 100])")
    bound = max_abs(t.lo, t.hi)
    return Result(INT if t.integer else NUM, d_scale(bound, b.dist), info={"bound": bound})


# rule Growth: union adds its operands' distances and notes the table it builds
@primitive("union", ("a", "b"), "bag 'a -o bag 'a -o bag 'a",
           "union a b: all rows of a and of b (a bag sum, duplicates kept).",
           "The symmetric difference of a union is at most the sum of the two differences. For two tables with "
           "the same privacy unit it is twice that: a unit added to one side may change the rows the union has "
           "for that unit (its block), which counts as one block removed and one added (docs/soundness.md, "
           "rule Units).",
           category="bag", units=True)
def _union(ctx, args, span):
    a, b = args
    ta, tb = elem_type(ctx, a, "union", units=True), elem_type(ctx, b, "union", units=True)
    joined = join_types(ta, tb)
    if joined is None:
        raise ctx.fail("E0202", f"union of bags with different rows: {ta} and {tb}", span)
    unit_a, unit_b = (getattr(x.type, "unit", None) for x in (a, b))
    if unit_a != unit_b:  # rule Units: a unit's rows are only found in a table that names it
        raise ctx.fail("E0331", f"union of {_unit_words(unit_a)} and {_unit_words(unit_b)}", span,
                       "both tables must have the same privacy unit: bound the contributions of a table with a "
                       "unit first (bound_rows k t) to union it with a table without one")
    dist = d_add(a.dist, b.dist)
    ctx.note_growth(dist)  # the one primitive whose result can outgrow the tables it reads
    if unit_a is not None:  # rule Units: a unit added to one side changes the union's block of that unit
        dist = d_scale(Fraction(2), dist)
    return Result(same_kind(a.type, joined), dist)


def _unit_words(unit) -> str:
    return "a table without a privacy unit" if unit is None else f"a table whose privacy unit is {unit}"


@primitive("split", ("p", "b"), "('a -> bool) -> bag 'a -o (bag 'a, bag 'a)",
           "split p b: the pair (rows where p holds, rows where it does not); the parts are disjoint.",
           "Each row goes to exactly one side, so d(yes) + d(no) <= d(b): the two parts get distance "
           "variables d1 + d2 <= d (Spar; PrivJail section 4.3), which yields parallel composition.",
           category="partition")
def _split(ctx, args, span):
    p, b = args
    elem = elem_type(ctx, b, "split")
    inst, captured = row_function(ctx, p, elem, span)
    if not isinstance(inst.cod, Bool):
        raise ctx.fail("E0202", f"split expects a predicate returning bool, but it returns {inst.cod}", p.span)
    parent = d_add(b.dist, captured)
    parts = ctx.split(parent, ["yes", "no"])
    return Result(Tensor((b.type, b.type)), d_add(*parts), ir_args=[inst.code, b.ir], parts=parts)

