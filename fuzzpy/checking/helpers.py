"""Free helper functions of the checker's rules: distance scaling for applications and branch
choices, integral types, widening, instance keys, type variables, and small AST walks (the
spine of an application, free variables, pattern names)."""

from __future__ import annotations

import weakref
from fractions import Fraction
from typing import Any, Optional

from ..diagnostics import Span
from ..primitives.registry import NOCONST
from ..syntax import ast as A
from ..typesystem import ir as I
from ..typesystem.sens import INF, Coef, Dist, Lin, d_scale
from ..typesystem.types import (
    Bag,
    Bool,
    Cat,
    Num,
    Parts,
    Seq,
    Str,
    Type,
    Unit,
    UnitBag,
    components,
    holds_holes,
    holds_type_variables,
)
from .values import FnValue, Opaque, TopFn, Val


def _widen(v: Val, declared: Optional[Num] = None) -> Val:
    """A numeric constant forgotten (rule Widen): its declared type if it has one, else any number."""
    if v.is_const and isinstance(v.type, Num):
        t = declared if declared is not None else Num(None, None, v.type.integer)
        return Val(t, v.dist, v.ir, NOCONST, v.fn, v.parts)
    return v


def _integral_type(t: Type) -> bool:
    """Values of these types are at whole-number (or infinite) distances from each other.  Kept
    in the type (types are immutable: a parameter's type is asked at each of its symbols)."""
    if isinstance(t, Num):
        return t.integer
    known = t.__dict__.get("_integral")
    if known is None:
        known = t.__dict__["_integral"] = _integral_parts(t)
    return known


def _integral_parts(t: Type) -> bool:
    if isinstance(t, (Bag, Seq, Parts, Bool, Str, Cat, Unit, UnitBag)):
        return True
    parts = components(t)
    return parts is not None and all(_integral_type(p) for p in parts)


def maybe_infinite(c: Coef) -> bool:
    """Infinite, or not known yet: an unsolved sensitivity (inside an unfinished recursion) may
    turn out infinite, so the rules that must not miss an infinity treat it as one."""
    return type(c) is not Fraction and (c == INF or isinstance(c, Lin))  # an exact number is finite


def infinite_part(d: Dist) -> Dist:
    """The entries of d that are (or may be) infinite, as infinities."""
    return {s: INF for s, c in d.items() if maybe_infinite(c)}


def _branch_choice(scrutinee: Dist) -> Dist:
    """Which branch runs can change only where the scrutinee can move infinitely far: bools,
    sums and lists of different shapes are infinitely apart, so a finite move keeps the branch.
    Anything a private comparison decided is infinite, and so is what it controls."""
    return infinite_part(scrutinee)


def apply_scale(coef: Coef, arg: Dist) -> Dist:
    """coef * distance for a function application, with 0 * inf = inf: a 0-sensitive function
    may still tell apart arguments that are infinitely far apart (a branch on a bool)."""
    if coef == 0:
        return infinite_part(arg)
    return d_scale(coef, arg)


# An application's head and arguments, and the span of its primitive call, kept per node while
# the node lives, as its free names are: a node is never changed after parsing, and parsed chunks
# are reused between checks (the language server re-parses only what an edit touched).  One entry
# per node, in a dict keyed by weak references (a WeakKeyDictionary's Python-level get and set
# cost more than the walk they spare when the node is new): the callback drops the entry.
_APPLICATIONS: "dict[weakref.ref, list]" = {}


def _forget_application(node_ref: "weakref.ref", _drop=_APPLICATIONS.pop) -> None:
    _drop(node_ref, None)  # (bound here: a node may die while the interpreter clears this module)


def _application(e: A.Apply) -> list:
    """[head, args, cover]: e's head, its arguments in order (one tuple, never changed), and
    (n, span), the span of the primitive call of its first n arguments (None: not asked yet)."""
    kept = _APPLICATIONS.get(weakref.ref(e))
    if kept is None:
        head, args = _walk_spine(e)
        kept = _APPLICATIONS[weakref.ref(e, _forget_application)] = [head, args, None]
    return kept


def _spine(e: A.Apply) -> tuple[A.Expr, tuple[A.Expr, ...]]:
    """The head of an application and its arguments, in order."""
    kept = _application(e)
    return kept[0], kept[1]


def _walk_spine(e: A.Apply) -> tuple[A.Expr, tuple[A.Expr, ...]]:
    args = []
    node: A.Expr = e
    while isinstance(node, A.Apply):
        args.append(node.arg)
        node = node.fn
    return node, tuple(reversed(args))


def _primitive_cover(kept: list, arity: int) -> Span:
    """`_cover` of the head and first `arity` arguments of the application `kept` describes
    (`_application`), kept with it: a span is immutable, the same one serves every check."""
    cover = kept[2]
    if cover is None or cover[0] != arity:
        cover = kept[2] = (arity, _cover(kept[0], kept[1][:arity]))
    return cover[1]


def _cover(head: A.Expr, args: "tuple[A.Expr, ...] | list[A.Expr]") -> Span:
    first, last = head.span, (args[-1].span if args else head.span)
    # Span(...) without the frozen dataclass's __init__ (five object.__setattr__): one per
    # application checked; the instance is the same (the parser builds its spans so).
    span = object.__new__(Span)
    span.__dict__.update(file=first.file, line=first.line, col=first.col, end_line=last.end_line,
                         end_col=last.end_col)
    return span


def _hashable(v: Any):
    if type(v) is Fraction:  # hashing a Fraction costs a modular inverse; its parts hash fast
        return (v.numerator, v.denominator)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v


def _fn_identity(fn: Optional[FnValue]):
    if fn is None:
        return None
    if isinstance(fn, TopFn):
        return ("top", fn.decl.name)
    if isinstance(fn, Opaque):
        return ("opaque", fn.type)
    return ("id", fn)


# Kept in each type, not in a cache keyed by types: a type of this check hashed to an equal one
# of an earlier check and was compared with it field by field.
_has_tvar = holds_type_variables
_has_hole = holds_holes


# The free names of a node, kept per node and bound names while the node lives: parsed chunks
# are kept between checks (the language server re-parses only what an edit touched), and each
# check asks again for every lambda it meets.  A node is never changed after parsing.
_FREE_VARS: "weakref.WeakKeyDictionary[A.Node, dict[frozenset, set[str]]]" = weakref.WeakKeyDictionary()


def _free_vars(e: A.Node, bound: set[str]) -> set[str]:
    """The free names of e outside `bound`: the same set each time (callers only read it), built
    in the same order as a fresh walk would build it."""
    kept = _FREE_VARS.get(e)
    if kept is None:
        kept = _FREE_VARS[e] = {}
    key = frozenset(bound)
    out = kept.get(key)
    if out is None:
        out = kept[key] = set()
        _add_free_vars(e, bound, out)
    return out


def _add_free_vars(e: A.Node, bound: set[str], out: set[str]) -> None:
    """The free names of e, added to out (one set for the whole walk, not one per node)."""
    if isinstance(e, A.Var):
        if e.name not in bound:
            out.add(e.name)
        return
    if isinstance(e, (A.Let, A.Sample)):
        _add_free_vars(e.bound, bound, out)
        _add_free_vars(e.body, bound | _pattern_names(e.pattern), out)
        return
    if isinstance(e, A.Lambda):
        _add_free_vars(e.body, bound | {p.name for p in e.params}, out)
        return
    if isinstance(e, A.CaseArm):
        names = set().union(*[_pattern_names(p) for p in e.patterns]) if e.patterns else set()
        _add_free_vars(e.body, bound | names, out)
        return
    for child in A.children(e):
        _add_free_vars(child, bound, out)


def _pattern_names(p: A.Pattern) -> set[str]:
    if isinstance(p, A.PVar):
        return {p.name}
    if isinstance(p, A.PProduct):
        return set().union(*[_pattern_names(x) for x in p.items])
    return set()


def _rename_args(body: I.IR, args: list[Val], names: list[str]) -> I.IR:
    """The IR of a completed partial application refers to its new arguments by name."""
    if isinstance(body, I.ICall):
        n = len(names)
        body.args = body.args[:-n] + [I.IVar(x) for x in names] if n else body.args
    elif isinstance(body, I.IApply):
        n = len(names)
        body.args = body.args[:-n] + [I.IVar(x) for x in names] if n else body.args
    return body
