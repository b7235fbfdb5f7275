"""Resolve syntactic types (syntax/ast.py) to semantic types (types.py)."""

from __future__ import annotations

import weakref
from fractions import Fraction
from typing import Any

from ..diagnostics import Diagnostic, FuzzError
from ..syntax import ast as A
from ..typesystem.types import (
    BOOL,
    MAX_VECTOR_SIZE,
    STRING,
    UNIT,
    Bag,
    Cat,
    Fun,
    Fuzzy,
    KeyedBag,
    ListT,
    Num,
    Parts,
    Record,
    Schema,
    Seq,
    SumT,
    Tensor,
    TVar,
    Type,
    UnitBag,
    Vector,
    With,
)

# The type of a type expression that names no schema, kept per syntax node across checks (parsed
# chunks are reused between checks; a node is never changed after parsing): a check then meets
# the same type objects as the one before, whose kept hash and facts it reuses, and equal types
# are one object (`==` and dict lookups take their identity path).  A node naming a schema
# depends on this check's schemas: it maps to _NAMES_A_SCHEMA and is resolved in each check.
_NAMES_A_SCHEMA = object()
_SCHEMA_FREE: "weakref.WeakKeyDictionary[A.TypeExpr, Any]" = weakref.WeakKeyDictionary()


class TypeResolver:
    def __init__(self, schemas: dict[str, Schema]):
        self.schemas = schemas
        self._resolved: dict[int, tuple[A.TypeExpr, Type]] = {}  # id -> (node kept alive, its type)
        self._tables: dict[str, Type] = {}  # schema name -> the type of its tables, built once per check

    def resolve(self, t: A.TypeExpr) -> Type:
        hit = self._resolved.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        out = _SCHEMA_FREE.get(t)
        if out is None or out is _NAMES_A_SCHEMA:
            out = getattr(self, "t_" + type(t).__name__)(t)
            _SCHEMA_FREE[t] = _NAMES_A_SCHEMA if _names_a_schema(t) else out
        self._resolved[id(t)] = (t, out)
        return out

    def t_TNum(self, t: A.TNum) -> Type:
        if t.lo is not None and t.hi is not None and t.lo > t.hi:
            raise FuzzError(Diagnostic("E0208", f"empty interval: lower bound {t.lo} is above upper bound {t.hi}",
                                       t.span))
        return Num(t.lo, t.hi, t.integer)

    def t_TSimple(self, t: A.TSimple) -> Type:
        return {"bool": BOOL, "string": STRING, "unit": UNIT}[t.name]

    def t_TVec(self, t: A.TVec) -> Type:
        n = Fraction(t.size)
        if n.denominator != 1 or not 1 <= n <= MAX_VECTOR_SIZE:
            raise FuzzError(Diagnostic("E0208", f"the length of a vector must be a whole number from 1 to "
                                       f"{MAX_VECTOR_SIZE}, got {n}", t.span))
        return Vector(int(n))

    def t_TCat(self, t: A.TCat) -> Type:
        if len(set(t.values)) != len(t.values):
            raise FuzzError(Diagnostic("E0208", "a category lists the same value twice", t.span))
        return Cat(tuple(t.values))

    def t_TRecord(self, t: A.TRecord) -> Type:
        names = [n for n, _ in t.fields]
        if len(set(names)) != len(names):
            raise FuzzError(Diagnostic("E0208", "a record type lists the same field twice", t.span))
        return Record(tuple((n, self.resolve(x)) for n, x in t.fields))

    def t_TProduct(self, t: A.TProduct) -> Type:
        items = tuple(self.resolve(x) for x in t.items)
        return Tensor(items) if t.kind == "tensor" else With(items)

    def t_TSum(self, t: A.TSum) -> Type:
        return SumT(self.resolve(t.left), self.resolve(t.right))

    # rule Public tables: `bag S` of a public schema S states the bounds S declares
    def t_TWrap(self, t: A.TWrap) -> Type:
        inner = self.resolve(t.inner)
        if t.kind == "bag" and isinstance(t.inner, A.TName) and t.inner.name in self.schemas:
            # a table of a schema: in units if it has one; a public one with the keys it declares
            return self._table_type(t.inner.name)
        return {"bag": Bag, "fuzzy": Fuzzy, "list": ListT, "seq": Seq}[t.kind](inner)

    def _table_type(self, name: str) -> Type:
        """`bag S` of schema S: one object for every `bag S` of this check (its hash computed once)."""
        known = self._tables.get(name)
        if known is None:
            known = self._tables[name] = self.schemas[name].table_type()
        return known

    def t_TParts(self, t: A.TParts) -> Type:
        return Parts(tuple(t.keys), self.resolve(t.elem))

    def t_TFun(self, t: A.TFun) -> Type:
        sens = t.sens if t.sens == float("inf") else Fraction(t.sens)
        return Fun(self.resolve(t.dom), sens, self.resolve(t.cod))

    def t_TName(self, t: A.TName) -> Type:
        schema = self.schemas.get(t.name)
        if schema is None:
            import difflib
            close = difflib.get_close_matches(t.name, sorted(self.schemas), n=1)
            notes = [f"did you mean {close[0]}?"] if close else ["declare it with: schema Name { column : type, ... }"]
            raise FuzzError(Diagnostic("E0208", f"unknown type '{t.name}'", t.span, notes))
        return schema.row_type

    def t_TVarExpr(self, t: A.TVarExpr) -> Type:
        return TVar(t.name)


def _names_a_schema(t: A.TypeExpr) -> bool:
    """Does this type expression name a schema (a `TName`) anywhere in it?"""
    if isinstance(t, A.TName):
        return True
    if isinstance(t, A.TRecord):
        parts = [x for _, x in t.fields]
    elif isinstance(t, A.TProduct):
        parts = list(t.items)
    elif isinstance(t, A.TSum):
        parts = [t.left, t.right]
    elif isinstance(t, A.TWrap):
        parts = [t.inner]
    elif isinstance(t, A.TParts):
        parts = [t.elem]
    elif isinstance(t, A.TFun):
        parts = [t.dom, t.cod]
    else:
        parts = []
    return any(_names_a_schema(x) for x in parts)


def match_type(pattern: Type, actual: Type, binding: dict | None = None) -> bool:
    """Does `actual` have the shape of `pattern` (which may contain type variables)?"""
    binding = {} if binding is None else binding
    if isinstance(pattern, TVar):
        if pattern.name in binding:
            return binding[pattern.name] == actual
        binding[pattern.name] = actual
        return True
    if type(pattern) is not type(actual) and not _bag_of_bounds(pattern, actual):
        return False
    if isinstance(pattern, UnitBag) and pattern.unit != actual.unit:  # type: ignore[attr-defined]
        return False
    if isinstance(pattern, (Bag, ListT, Seq, UnitBag)):
        return match_type(pattern.elem, actual.elem, binding)  # type: ignore[attr-defined]
    if isinstance(pattern, Fuzzy):
        return match_type(pattern.inner, actual.inner, binding)  # type: ignore[attr-defined]
    if isinstance(pattern, Parts):
        return match_type(pattern.elem, actual.elem, binding)  # type: ignore[attr-defined]
    if isinstance(pattern, (Tensor, With)):
        return len(pattern.items) == len(actual.items) and all(  # type: ignore[attr-defined]
            match_type(p, a, binding) for p, a in zip(pattern.items, actual.items))  # type: ignore[attr-defined]
    if isinstance(pattern, SumT):
        return match_type(pattern.left, actual.left, binding) and match_type(pattern.right, actual.right, binding)  # type: ignore[attr-defined]
    if isinstance(pattern, Num):
        return True
    return pattern == actual


# rule Join: a type variable met several times is bound to the join
def bind_tvars(pattern: Type, actual: Type, binding: dict) -> bool:
    """Like `match_type`, but a type variable met several times is bound to the join of what it
    meets (an empty list's element type `_` joins with anything): the type an instance's
    parameters give it (rule Instance)."""
    from ..typesystem.types import join_types

    if isinstance(pattern, TVar):
        if pattern.name in binding:
            joined = join_types(binding[pattern.name], actual)
            if joined is None:
                return False
            binding[pattern.name] = joined
        else:
            binding[pattern.name] = actual
        return True
    if type(pattern) is not type(actual) and not _bag_of_bounds(pattern, actual):
        return False
    if isinstance(pattern, UnitBag) and pattern.unit != actual.unit:  # type: ignore[attr-defined]
        return False
    if isinstance(pattern, (Bag, ListT, Seq, Parts, UnitBag)):
        return bind_tvars(pattern.elem, actual.elem, binding)  # type: ignore[attr-defined]
    if isinstance(pattern, Fuzzy):
        return bind_tvars(pattern.inner, actual.inner, binding)  # type: ignore[attr-defined]
    if isinstance(pattern, (Tensor, With)):
        return len(pattern.items) == len(actual.items) and all(  # type: ignore[attr-defined]
            bind_tvars(p, a, binding) for p, a in zip(pattern.items, actual.items))  # type: ignore[attr-defined]
    if isinstance(pattern, SumT):
        return bind_tvars(pattern.left, actual.left, binding) and bind_tvars(pattern.right, actual.right, binding)  # type: ignore[attr-defined]
    return True


def _bag_of_bounds(pattern: Type, actual: Type) -> bool:
    """A bag with bounds on its keys (a public table, a truncated one) has the shape `bag T`."""
    return type(pattern) is Bag and isinstance(actual, KeyedBag)


def subst_tvars(t: Type, binding: dict) -> Type:
    """t with its type variables replaced by their bindings (unbound ones stay)."""
    if isinstance(t, TVar):
        return binding.get(t.name, t)
    if isinstance(t, (Bag, ListT, Seq)):
        return type(t)(subst_tvars(t.elem, binding))
    if isinstance(t, UnitBag):
        return UnitBag(subst_tvars(t.elem, binding), t.unit)
    if isinstance(t, Fuzzy):
        return Fuzzy(subst_tvars(t.inner, binding))
    if isinstance(t, Parts):
        return Parts(t.keys, subst_tvars(t.elem, binding), t.released)
    if isinstance(t, (Tensor, With)):
        return type(t)(tuple(subst_tvars(i, binding) for i in t.items))
    if isinstance(t, SumT):
        return SumT(subst_tvars(t.left, binding), subst_tvars(t.right, binding))
    if isinstance(t, Fun):
        return Fun(subst_tvars(t.dom, binding), t.sens, subst_tvars(t.cod, binding))
    if isinstance(t, Record):
        return Record(tuple((n, subst_tvars(x, binding)) for n, x in t.fields), t.name)
    return t
