"""Ordered operations, with PrivJail's edit (LCS) distance.

A stable sort by a public key maps tables at symmetric-difference distance d to sequences at
edit distance d: the rows the two tables share keep their relative order.  Taking rows by
position (head, tail, slice) doubles the distance: one added row can push one row into the
window and another out of it, so a window of the sequence moves by 2 per unit of edit distance.
The result of a window is a bag again (order forgotten).
"""

from __future__ import annotations

from fractions import Fraction

from ..typesystem.sens import d_add, d_scale
from ..typesystem.types import Bag, Cat, ListT, Num, Seq, Str
from .bags import elem_type, row_function
from .declarations import Result, primitive
from .lists import is_public, sortable

_REF = "PrivJail (seed 003) section 4.2: ordered operations use the edit distance"


def _seq_elem(ctx, arg, what: str):
    if not isinstance(arg.type, Seq):
        raise ctx.fail("E0202", f"{what} expects a sorted table (seq, from sort_by), but this is {arg.type}",
                       arg.span, "sort it first: sort_by (fun r -> r.age) b")
    return arg.type.elem


def _count_arg(ctx, arg, what: str) -> int:
    if not arg.is_const or not isinstance(arg.type, Num) or Fraction(arg.const).denominator != 1 \
            or arg.const < 0:
        raise ctx.fail("E0209", f"{what} needs a public, non-negative integer constant", arg.span)
    return int(arg.const)


@primitive("sort_by", ("key", "b"), "('a -> num | cat | string) -> bag 'a -o seq 'a",
           "sort_by key b: the rows of b in increasing order of the public key function (stable). On a "
           "public list (released values), the list in increasing order of the key: "
           "take 3 (sort_by (fun p -> 0 - p.2) pairs) is the top 3 of released (name, count) pairs.",
           "A stable sort keeps the relative order of shared rows, so tables at symmetric-difference "
           "distance d give sequences at edit distance d. " + _REF + ". On a list: the list and "
           "everything the key reads must be public (distance 0), so the result is public too "
           "(post-processing); a list that depends on private data is refused.",
           category="ordered")
def _sort_by(ctx, args, span):
    key, b = args
    if isinstance(b.type, ListT):
        return _sort_list_by(ctx, key, b, span)
    elem = elem_type(ctx, b, "sort_by")
    inst, captured = row_function(ctx, key, elem, span)
    if not isinstance(inst.cod, (Num, Cat, Str)):
        raise ctx.fail("E0202", f"sort_by needs a key that is a number, category or string, not {inst.cod}", key.span)
    info = {"categories": inst.cod.values} if isinstance(inst.cod, Cat) else {}
    return Result(Seq(elem), d_add(b.dist, captured), ir_args=[inst.code, b.ir], info=info)


def _sort_list_by(ctx, key, xs, span):
    """Rule Lists: sort_by on a public list, with a key function that reads nothing private."""
    if not is_public(xs):
        raise ctx.fail("E1501", "the list given to sort_by depends on private data", xs.span,
                       "only public values may be sorted: release them first (sample xs = ...), then sort "
                       "the released list")
    inst = ctx.instantiate(key, [xs.type.elem], span, public=True)
    if inst.captured:
        raise ctx.fail("E1501", "the key function of sort_by reads private data", key.span,
                       "a list is sorted by public keys only: the key may read the element and public values")
    info = sortable(ctx, inst.cod, key.span, "the key of sort_by")
    return Result(xs.type, {}, ir_args=[inst.code, xs.ir], info=info)


def _window(name: str, doc: str):
    def rule(ctx, args, span):
        *counts, s = args
        elem = _seq_elem(ctx, s, name)
        info = {"bounds": [_count_arg(ctx, c, name) for c in counts]}
        return Result(Bag(elem), d_scale(Fraction(2), s.dist), info=info)

    primitive(name, tuple([*(["i", "j"] if name == "slice" else ["n"]), "s"]),
              ("int -> int -> " if name == "slice" else "int -> ") + "seq 'a -o[2] bag 'a", doc,
              "One row added to the input can push one row into the window and another out of it: "
              "the window moves by 2 per unit of edit distance. " + _REF,
              category="ordered")(rule)


_window("head", "head n s: the first n rows of a sorted table (a bag).")
_window("tail", "tail n s: the last n rows of a sorted table (a bag).")
_window("slice", "slice i j s: the rows at positions i (inclusive) to j (exclusive) of a sorted table.")


