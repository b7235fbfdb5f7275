"""The abstract syntax of fuzzpy. Every node keeps its source span."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional, Union

from ..diagnostics import Span


@dataclass(eq=False)
class Node:
    span: Span = field(repr=False)


# ---- syntactic types (resolved to semantic types by the checker) ------------------------


@dataclass(eq=False)
class TypeExpr(Node):
    pass


@dataclass(eq=False)
class TNum(TypeExpr):
    lo: Optional[Fraction]
    hi: Optional[Fraction]
    integer: bool
    has_bounds: bool = False


@dataclass(eq=False)
class TSimple(TypeExpr):
    name: str  # "bool" | "string" | "unit"


@dataclass(eq=False)
class TVec(TypeExpr):
    size: Fraction  # `vec[n]`: a vector of n numbers with the L2 metric (n checked by the resolver)


@dataclass(eq=False)
class TCat(TypeExpr):
    values: list[str]


@dataclass(eq=False)
class TRecord(TypeExpr):
    fields: list[tuple[str, TypeExpr]]


@dataclass(eq=False)
class TProduct(TypeExpr):
    kind: str  # "tensor" | "with"
    items: list[TypeExpr]


@dataclass(eq=False)
class TSum(TypeExpr):
    left: TypeExpr
    right: TypeExpr


@dataclass(eq=False)
class TWrap(TypeExpr):
    kind: str  # "bag" | "fuzzy" | "list" | "seq"
    inner: TypeExpr


@dataclass(eq=False)
class TParts(TypeExpr):
    keys: list[str]
    elem: TypeExpr


@dataclass(eq=False)
class TFun(TypeExpr):
    dom: TypeExpr
    sens: Union[Fraction, float]  # float("inf") for `->`
    cod: TypeExpr


@dataclass(eq=False)
class TName(TypeExpr):
    name: str


@dataclass(eq=False)
class TVarExpr(TypeExpr):
    name: str


# ---- patterns -------------------------------------------------------------------------


@dataclass(eq=False)
class Pattern(Node):
    pass


@dataclass(eq=False)
class PVar(Pattern):
    name: str


@dataclass(eq=False)
class PWild(Pattern):
    pass


@dataclass(eq=False)
class PProduct(Pattern):
    kind: str  # "tensor" | "with"
    items: list[Pattern]


# ---- expressions ----------------------------------------------------------------------


@dataclass(eq=False)
class Expr(Node):
    pass


@dataclass(eq=False)
class Lit(Expr):
    """A literal: value is a Fraction (numbers), str, bool, or None (unit)."""

    value: object
    integer: bool = False


@dataclass(eq=False)
class Var(Expr):
    name: str


@dataclass(eq=False)
class Let(Expr):
    pattern: Pattern
    bound: Expr
    body: Expr


@dataclass(eq=False)
class Sample(Expr):
    pattern: Pattern
    bound: Expr
    body: Expr


@dataclass(eq=False)
class If(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(eq=False)
class Param(Node):
    name: str
    type: Optional[TypeExpr]
    sens: Optional[Union[Fraction, float]]


@dataclass(eq=False)
class Lambda(Expr):
    params: list[Param]
    body: Expr


@dataclass(eq=False)
class Return(Expr):
    value: Expr


@dataclass(eq=False)
class CaseArm(Node):
    kind: str  # "inl" | "inr" | "nil" | "cons"
    patterns: list[Pattern]
    body: Expr


@dataclass(eq=False)
class Case(Expr):
    scrutinee: Expr
    arms: list[CaseArm]


@dataclass(eq=False)
class BinOp(Expr):
    """Arithmetic, comparison and boolean operators; `op` is the source symbol."""

    op: str
    left: Expr
    right: Expr


@dataclass(eq=False)
class UnOp(Expr):
    op: str  # "-" | "!"
    operand: Expr


@dataclass(eq=False)
class Apply(Expr):
    fn: Expr
    arg: Expr


@dataclass(eq=False)
class Inject(Expr):
    side: str  # "inl" | "inr"
    value: Expr


@dataclass(eq=False)
class Field(Expr):
    value: Expr
    name: str
    name_span: Span = field(repr=False, default=None)  # type: ignore[assignment]


@dataclass(eq=False)
class Proj(Expr):
    value: Expr
    index: int  # 1-based


@dataclass(eq=False)
class Tuple(Expr):
    kind: str  # "tensor" | "with"
    items: list[Expr]


@dataclass(eq=False)
class ListLit(Expr):
    items: list[Expr]


@dataclass(eq=False)
class Cons(Expr):
    head: Expr
    tail: Expr


@dataclass(eq=False)
class RecordLit(Expr):
    fields: list[tuple[str, Expr]]


@dataclass(eq=False)
class Ascribe(Expr):
    value: Expr
    type: TypeExpr


# ---- declarations ---------------------------------------------------------------------


@dataclass(eq=False)
class Decl(Node):
    pass


@dataclass(eq=False)
class Import(Decl):
    path: str


@dataclass(eq=False)
class ParamDecl(Decl):
    name: str
    type: TypeExpr
    default: Optional[Expr]
    name_span: Span = field(repr=False, default=None)  # type: ignore[assignment]


@dataclass(eq=False)
class ColumnDecl(Node):
    name: str
    type: TypeExpr
    policy: str  # "drop" | "default"
    default: Optional[Lit]


@dataclass(eq=False)
class SchemaDecl(Decl):
    name: str
    columns: list[ColumnDecl]
    name_span: Span = field(repr=False, default=None)  # type: ignore[assignment]

    @property
    def unit(self) -> Optional[str]:
        return None


@dataclass(eq=False)
class UnitSchemaDecl(SchemaDecl):
    """A schema that declares its privacy unit, the column naming the individual a row belongs to
    (`schema Flight unit tailnum { ... }`; rule Units)."""

    unit: Optional[str] = None  # type: ignore[assignment]
    unit_span: Optional[Span] = field(repr=False, default=None)


@dataclass(eq=False)
class KeyedColumnDecl(ColumnDecl):
    """A column of a public schema declaring how many rows may share one of its values
    (`unique`: 1; `at most N per value`: N)."""

    most: Fraction = Fraction(1)
    key_span: Span = field(repr=False, default=None)  # type: ignore[assignment]


@dataclass(eq=False)
class PublicSchemaDecl(SchemaDecl):
    """`public schema Name { ... }`: the schema of a public table."""


@dataclass(eq=False)
class FunDecl(Decl):
    name: str
    params: list[Param]
    ret: Optional[TypeExpr]
    body: Expr
    name_span: Span = field(repr=False, default=None)  # type: ignore[assignment]


@dataclass(eq=False)
class Module:
    """A parsed file: its declarations and the diagnostics of the parts that failed."""

    file: str
    decls: list[Decl]
    source: str


def children(node: Node) -> list[Node]:
    """Direct sub-nodes of a node, for generic walks (name resolution, hover lookup, the checker's
    rules that read a body's shape)."""
    fields = _NODE_FIELDS.get(type(node))
    if fields is None:
        fields = _NODE_FIELDS[type(node)] = _fields_that_may_hold_nodes(type(node))
    out: list[Node] = []
    for value in map(node.__dict__.get, fields):
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Node):
                    out.append(item)
                elif isinstance(item, tuple):
                    out.extend(x for x in item if isinstance(x, Node))
    return out


# Field annotations that never hold a node: children skips those fields (the checker walks bodies
# thousands of times per check).
_LEAF_ANNOTATIONS = frozenset({"Span", "Optional[Span]", "str", "Optional[str]", "list[str]", "bool", "int",
                               "Fraction", "Optional[Fraction]", "Union[Fraction, float]",
                               "Optional[Union[Fraction, float]]"})
_NODE_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields_that_may_hold_nodes(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if str(f.type) not in _LEAF_ANNOTATIONS)
