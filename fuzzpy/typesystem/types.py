"""Semantic types of fuzzpy, with the metric each one carries.

Metrics (as in Fuzz): numbers |x - y|; bool, string and categories discrete; tensor pairs add
their components' distances, with-pairs take the max; records add their fields; bags use the
size of the symmetric difference; `fuzzy T` uses max-divergence; functions carry their
sensitivity in the type.  Sensitivities inside function types are `Sens` values (exact).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Union

INF = float("inf")
# A sensitivity: an exact non-negative rational, or infinity.
Sens = Union[Fraction, float]


def fmt_sens(s: Sens) -> str:
    if s == INF:
        return "inf"
    f = Fraction(s)
    return str(f.numerator) if f.denominator == 1 else f"{float(f):g}" if _short(f) else str(f)


def _short(f: Fraction) -> bool:
    return Fraction(float(f)).limit_denominator(10**6) == f and len(f"{float(f):g}") <= 8


class Type:
    """Base of all types; subclasses are frozen dataclasses, so types compare structurally.

    A type's hash and size are computed once and kept in the instance (`_hash`, `_size`, not
    fields: equality, repr and replace ignore them). They are never pickled: a string's hash
    differs between processes, so a type unpickled elsewhere (the Dask engine's workers, the
    check cache) computes its own."""

    def __str__(self) -> str:  # pragma: no cover - overridden
        return self.__class__.__name__

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in _MEMO_SLOTS}


# Facts about a type kept in its instance after their first use (types are immutable): not fields.
_MEMO_SLOTS = ("_hash", "_size", "_tables", "_parts", "_units", "_fuzzy", "_choices", "_integral", "_tvars",
               "_holes")


def memoise_hash(cls: type) -> type:
    """Keep the dataclass-generated (structural, recursive) hash of each instance after its first
    use: types are hashed at every instance lookup and every memoised rule."""
    structural = cls.__dict__["__hash__"]

    def __hash__(self) -> int:
        d = self.__dict__
        h = d.get("_hash")
        if h is None:
            h = d["_hash"] = structural(self)  # __dict__ directly: the instance is frozen
        return h

    __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
    cls.__hash__ = __hash__  # type: ignore[method-assign]
    return cls


@dataclass(frozen=True)
class Num(Type):
    """`num`, `int`, or a bounded `num[lo, hi]` / `int[lo, hi]`; bounds are public."""

    lo: Fraction | None = None
    hi: Fraction | None = None
    integer: bool = False

    @property
    def bounded(self) -> bool:
        return self.lo is not None and self.hi is not None

    def __eq__(self, other: object) -> bool:
        """The dataclass equality (bounds and integer flag), without Fraction's own `==`, which asks
        `numbers.Rational` (an ABC) of every bound: numeric types are compared very often."""
        if other.__class__ is not Num:
            return NotImplemented
        if self.integer != other.integer:  # type: ignore[attr-defined]
            return False
        a, b = self.lo, other.lo  # type: ignore[attr-defined]
        if type(a) is Fraction and type(b) is Fraction:  # _same_bound, inline: types are compared very often
            if a.numerator != b.numerator or a.denominator != b.denominator:
                return False
        elif not a == b:
            return False
        return _same_bound(self.hi, other.hi)  # type: ignore[attr-defined]

    def __str__(self) -> str:
        base = "int" if self.integer else "num"
        if self.lo is None and self.hi is None:
            return base
        lo = "-inf" if self.lo is None else fmt_num(self.lo)
        hi = "inf" if self.hi is None else fmt_num(self.hi)
        return f"{base}[{lo}, {hi}]"


def _same_bound(a: Fraction | None, b: Fraction | None) -> bool:
    if type(a) is Fraction and type(b) is Fraction:  # numerator and denominator: what Fraction compares
        return a.numerator == b.numerator and a.denominator == b.denominator
    return a == b


def fmt_num(x: Fraction) -> str:
    x = Fraction(x)
    if x.denominator == 1:
        return str(x.numerator)
    return f"{float(x):g}" if Fraction(float(x)) == x else str(x)


@dataclass(frozen=True)
class Bool(Type):
    def __str__(self) -> str:
        return "bool"


@dataclass(frozen=True)
class Str(Type):
    def __str__(self) -> str:
        return "string"


@dataclass(frozen=True)
class Unit(Type):
    def __str__(self) -> str:
        return "unit"


@dataclass(frozen=True)
class Cat(Type):
    """A finite category with a public, declared set of values (a group-by key domain)."""

    values: tuple[str, ...]

    def __str__(self) -> str:
        return "cat{" + ", ".join(f'"{v}"' for v in self.values) + "}"


@dataclass(frozen=True)
class Tensor(Type):
    """`(A, B, ...)`: distances add (L1)."""

    items: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.items)) + ")"


MAX_VECTOR_SIZE = 4096  # vsum's float clipping is proven for at most this many coordinates


@dataclass(frozen=True)
class Vector(Type):
    """`vec[n]`: n numbers (public length) with the Euclidean metric: the distance of two vectors
    is the L2 norm of their difference.  At run time a tuple of n numbers."""

    size: int

    def __str__(self) -> str:
        return f"vec[{self.size}]"


@dataclass(frozen=True)
class With(Type):
    """`(|A, B, ...|)`: distance is the max of the components'."""

    items: tuple[Type, ...]

    def __str__(self) -> str:
        return "(|" + ", ".join(map(str, self.items)) + "|)"


@dataclass(frozen=True)
class SumT(Type):
    """`A + B` with `inl` / `inr` / `case`; values in different branches are infinitely far."""

    left: Type
    right: Type

    def __str__(self) -> str:
        return f"({self.left} + {self.right})"


@dataclass(frozen=True)
class Record(Type):
    """A row: named fields; distances add over fields."""

    fields: tuple[tuple[str, Type], ...]
    name: str | None = field(default=None, compare=False)

    def field_type(self, name: str) -> Type | None:
        for n, t in self.fields:
            if n == name:
                return t
        return None

    def __str__(self) -> str:
        if self.name:
            return self.name
        return "{" + ", ".join(f"{n}: {t}" for n, t in self.fields) + "}"


@dataclass(frozen=True)
class Bag(Type):
    """A multiset of rows; distance is the size of the symmetric difference."""

    elem: Type

    def __str__(self) -> str:
        return f"bag {_paren(self.elem)}"


# rule Public tables: a bag type with bounds on its keys (invariant I6)
@dataclass(frozen=True)
class KeyedBag(Bag):
    """A bag known to hold at most `most` rows for each value of some of its columns:
    `per_key` is ((column, most), ...), sorted by column.  A public table's declared keys
    (`unique`, `at most N per value`), verified when it is loaded, or a truncated table
    (`truncate`).  Only rules that keep or drop rows keep it; a value of it is a value of
    `bag elem` (rule Subtyping), never the other way round."""

    per_key: tuple[tuple[str, int], ...] = ()
    # Where each bound comes from, for people (hover): not part of the type.
    origin: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    def most(self, column: str) -> int | None:
        """The most rows sharing one value of `column`, or None when nothing bounds it."""
        return dict(self.per_key).get(column)

    def __str__(self) -> str:
        facts = "; ".join(f"unique {c}" if m == 1 else f"at most {m} per {c}" for c, m in self.per_key)
        return f"bag {_paren(self.elem)} ({facts})" if facts else super().__str__()


def keyed_bag(elem: Type, per_key: dict[str, int], origin: dict[str, str] | None = None) -> Bag:
    """`bag elem`, with the bounds `per_key` (column -> most rows per value) when there are any;
    `origin`: where each comes from (column -> text, shown in hover)."""
    if not per_key:
        return Bag(elem)
    why = tuple(sorted((c, w) for c, w in (origin or {}).items() if c in per_key))
    return KeyedBag(elem, tuple(sorted(per_key.items())), why)


def per_key_of(t: Type) -> dict[str, int]:
    """The bounds a bag's type states: column -> most rows sharing one value."""
    return dict(t.per_key) if isinstance(t, KeyedBag) else {}


def origin_of(t: Type) -> dict[str, str]:
    """Where the bounds of a bag's type come from: column -> text."""
    return dict(t.origin) if isinstance(t, KeyedBag) else {}


@dataclass(frozen=True)
class UnitBag(Type):
    """A table whose rows belong to individuals (its privacy unit: the column `unit` names the
    individual of each row).  Its distance counts units: the number of units whose rows differ,
    so neighbouring tables differ by all the rows of one unit.  Not a `Bag`: a primitive that
    reads rows (count, sum, groupby, ...) does not accept it until contributions are bounded
    (primitives/units.py; rule Units in docs/soundness.md)."""

    elem: Type
    unit: str

    def __str__(self) -> str:
        return f"bag {_paren(self.elem)} (unit {self.unit})"


@dataclass(frozen=True)
class ListT(Type):
    """A public-shape list: same length or infinitely far; elementwise distances add."""

    elem: Type

    def __str__(self) -> str:
        return f"list {_paren(self.elem)}"


@dataclass(frozen=True)
class Seq(Type):
    """An ordered table (the result of a stable sort); distance is the edit (LCS) distance,
    insertions plus deletions, as in PrivJail."""

    elem: Type

    def __str__(self) -> str:
        return f"seq {_paren(self.elem)}"


@dataclass(frozen=True)
class Parts(Type):
    """One component per public key: the bags of a partition (`parts K (bag T)`, from groupby)
    or per-part results (`parts K num`, from pmap / each).  `elem` is the component type;
    distances add over the parts."""

    keys: tuple[str, ...]
    elem: Type
    # The keys are a list released by the run (partition selection), known only when it runs:
    # `keys` is then empty, and every part is treated alike (rule Released keys).
    released: bool = field(default=False, repr=False)

    def __str__(self) -> str:
        if self.released:
            return f"parts released {_paren(self.elem)}"
        keys = ", ".join('"' + k + '"' for k in self.keys)
        return f"parts {{{keys}}} {_paren(self.elem)}"


@dataclass(frozen=True)
class Fuzzy(Type):
    """A distribution; distance is max-divergence, so an s-sensitive map into it is s-DP."""

    inner: Type

    def __str__(self) -> str:
        return f"fuzzy {_paren(self.inner)}"


@dataclass(frozen=True)
class Fun(Type):
    """`A -o[s] B`; s = 1 prints as `-o`, s = inf as `->`."""

    dom: Type
    sens: Sens
    cod: Type

    def __str__(self) -> str:
        dom = f"({self.dom})" if isinstance(self.dom, Fun) else str(self.dom)
        if self.sens == INF:
            arrow = "->"
        elif self.sens == 1:
            arrow = "-o"
        else:
            arrow = f"-o[{fmt_sens(self.sens)}]"
        return f"{dom} {arrow} {self.cod}"


@dataclass(frozen=True)
class TVar(Type):
    """A type variable in a declared signature (`'a`), instantiated at each call."""

    name: str

    def __str__(self) -> str:
        return f"'{self.name}"


@dataclass(frozen=True)
class Hole(Type):
    """The unknown half of an injection, or the element type of an empty list: fits anything."""

    def __str__(self) -> str:
        return "_"


def _paren(t: Type) -> str:
    s = str(t)
    return f"({s})" if " " in s and not isinstance(t, (Record, Tensor, With, Cat)) else s


def _dataclass_types(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += ([sub] if "__hash__" in sub.__dict__ and sub.__hash__ is not None else []) + _dataclass_types(sub)
    return out


for _cls in _dataclass_types(Type):
    memoise_hash(_cls)

NUM = Num()
INT = Num(integer=True)
BOOL = Bool()
STRING = Str()
UNIT = Unit()


# ---- schema of a private table -------------------------------------------------------------

MISSING_POLICIES = ("drop", "default")


@dataclass(frozen=True)
class Column:
    """A declared column: its type (Num / Bool / Str / Cat) and what to do with bad values.

    `on_invalid` applies to missing values and to categories outside the declared set:
    "drop" removes the row (the default), "default" replaces the value with `default`.
    Numbers outside declared bounds are always clamped to the bounds.
    """

    name: str
    type: Type
    on_invalid: str = "drop"
    default: object = None


@dataclass(frozen=True)
class Schema:
    name: str
    columns: tuple[Column, ...]
    unit: str | None = field(default=None, repr=False)  # the privacy unit's column (rule Units), or None

    @property
    def row_type(self) -> Record:
        """Built once (kept in the instance, not pickled): one object for every use, so that its
        memoised hash is computed once."""
        known = self.__dict__.get("_row_type")
        if known is None:
            known = self.__dict__["_row_type"] = Record(tuple((c.name, c.type) for c in self.columns), name=self.name)
        return known

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_row_type"}

    def column(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    def table_type(self) -> Type:
        """The type of a table of this schema: a bag of its rows, counted in units when it has one."""
        return UnitBag(self.row_type, self.unit) if self.unit else Bag(self.row_type)


@dataclass(frozen=True)
class PublicSchema(Schema):
    """The schema of a public table (`public schema`): its data is not private and is not charged;
    `per_key` are the bounds it declares, ((column, most rows per value), ...), which loading
    verifies before anything is charged (docs/data.md, "Public tables")."""

    per_key: tuple[tuple[str, int], ...] = ()

    def table_type(self) -> Type:
        """`bag Name` for this schema: its rows, with the bounds it declares (a public table has
        no privacy unit: its rows are not private)."""
        return keyed_bag(self.row_type, dict(self.per_key),
                         {c: f"declared in public schema {self.name}" for c, _ in self.per_key})


def components(t: Type) -> tuple[Type, ...] | None:
    """The component types of a structured value (tuple items, record fields, sum sides, list
    elements), or None for a type that is not a plain structure of values."""
    if isinstance(t, (Tensor, With)):
        return t.items
    if isinstance(t, Record):  # kept in the type: the walks of holds_* ask for it often
        known = t.__dict__.get("_parts")
        if known is None:
            known = t.__dict__["_parts"] = tuple(ft for _, ft in t.fields)
        return known
    if isinstance(t, SumT):
        return (t.left, t.right)
    if isinstance(t, ListT):
        return (t.elem,)
    return None


# rule Join: an upper bound of both types under rule Subtyping, or None
def join_types(a: Type, b: Type) -> Type | None:
    """A common supertype of two types (bounds widen), or None where it names none: not always the
    least one (rule Join)."""
    if a == b or isinstance(b, Hole):
        return a
    if isinstance(a, Hole):
        return b
    if isinstance(a, Num) and isinstance(b, Num):
        lo = None if a.lo is None or b.lo is None else min(a.lo, b.lo)
        hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
        return Num(lo, hi, a.integer and b.integer)
    if type(a) is type(b) and isinstance(a, (Tensor, With)) and len(a.items) == len(b.items):
        items = [join_types(x, y) for x, y in zip(a.items, b.items)]
        return None if any(i is None for i in items) else type(a)(tuple(items))
    if isinstance(a, SumT) and isinstance(b, SumT):
        left, right = join_types(a.left, b.left), join_types(a.right, b.right)
        return None if left is None or right is None else SumT(left, right)
    if isinstance(a, Record) and isinstance(b, Record):
        if [n for n, _ in a.fields] != [n for n, _ in b.fields]:
            return None
        fs = [(n, join_types(x, y)) for (n, x), (_, y) in zip(a.fields, b.fields)]
        return None if any(t is None for _, t in fs) else Record(tuple(fs), a.name)
    for wrap in (Bag, ListT, Fuzzy, Seq):
        if isinstance(a, wrap) and isinstance(b, wrap):
            inner = join_types(_inner(a), _inner(b))
            if inner is not None and wrap is Bag:  # the bounds both state, the larger of each
                pa, pb = per_key_of(a), per_key_of(b)
                return keyed_bag(inner, {c: max(m, pb[c]) for c, m in pa.items() if c in pb})
            return None if inner is None else wrap(inner)
    if isinstance(a, UnitBag) and isinstance(b, UnitBag) and a.unit == b.unit:
        inner = join_types(a.elem, b.elem)
        return None if inner is None else UnitBag(inner, a.unit)
    if isinstance(a, Fun) and isinstance(b, Fun) and a.dom == b.dom:
        cod = join_types(a.cod, b.cod)
        return None if cod is None else Fun(a.dom, max(a.sens, b.sens), cod)
    return None


def _inner(t: Type) -> Type:
    return t.inner if isinstance(t, Fuzzy) else t.elem  # type: ignore[attr-defined]


# rule Subtyping: a value of a is a value of b, at no larger a distance
def is_subtype(a: Type, b: Type) -> bool:
    """a can be used where b is expected (narrower bounds, smaller function sensitivity)."""
    if a is b or a == b or isinstance(a, Hole):  # (`is` first: a resolved type is met again as itself)
        return True
    if isinstance(a, Num) and isinstance(b, Num):
        if b.integer and not a.integer:
            return False
        lo_ok = b.lo is None or (a.lo is not None and a.lo >= b.lo)
        hi_ok = b.hi is None or (a.hi is not None and a.hi <= b.hi)
        return lo_ok and hi_ok
    if type(a) is type(b) and isinstance(a, (Tensor, With)):
        return len(a.items) == len(b.items) and all(map(is_subtype, a.items, b.items))
    if isinstance(a, SumT) and isinstance(b, SumT):
        return is_subtype(a.left, b.left) and is_subtype(a.right, b.right)
    if isinstance(a, Record) and isinstance(b, Record):
        return [n for n, _ in a.fields] == [n for n, _ in b.fields] and all(
            is_subtype(x, y) for (_, x), (_, y) in zip(a.fields, b.fields))
    if isinstance(a, Cat) and isinstance(b, Cat):
        return set(a.values) <= set(b.values)
    if isinstance(b, KeyedBag):  # every bound b states, a states at least as tightly
        pa = per_key_of(a)
        return isinstance(a, Bag) and is_subtype(a.elem, b.elem) and all(
            c in pa and pa[c] <= m for c, m in b.per_key)
    for wrap in (Bag, ListT, Fuzzy, Seq):
        if isinstance(a, wrap) and isinstance(b, wrap):
            return is_subtype(_inner(a), _inner(b))
    if isinstance(a, UnitBag) and isinstance(b, UnitBag):
        return a.unit == b.unit and is_subtype(a.elem, b.elem)
    if isinstance(a, Parts) and isinstance(b, Parts):
        return a.keys == b.keys and a.released == b.released and is_subtype(a.elem, b.elem)
    if isinstance(a, Fun) and isinstance(b, Fun):
        return is_subtype(b.dom, a.dom) and a.sens <= b.sens and is_subtype(a.cod, b.cod)
    return False


MAX_TYPE_SIZE = 256  # parts of one argument type (tuples of tuples of ...)


def type_size(t: Type, cap: int = MAX_TYPE_SIZE + 1) -> int:
    """The number of parts of a type, counted as a tree (shared parts once per use), up to cap:
    a recursion that pairs its argument with itself doubles it at each call.  With the default
    cap each part's size is kept in it (types are immutable), so a new type built around known
    parts (a bag of a schema's rows) costs one step."""
    if isinstance(t, (Num, Bool, Str, Cat, Unit)):  # the common case, without the walk
        return 1
    if cap == MAX_TYPE_SIZE + 1:
        return _kept_size(t)
    memo: dict[int, int] = {}

    def size(x: object) -> int:
        if not isinstance(x, Type):
            return 0
        if id(x) in memo:
            return memo[id(x)]
        memo[id(x)] = _size_step(x, size, cap)
        return memo[id(x)]

    return size(t)


def _kept_size(x: object) -> int:
    """type_size with the default cap, kept in each part."""
    if not isinstance(x, Type):
        return 0
    known = x.__dict__.get("_size")
    if known is None:
        known = x.__dict__["_size"] = _size_step(x, _kept_size, MAX_TYPE_SIZE + 1)
    return known


def _size_step(x: Type, size, cap: int) -> int:
    """1 + the sizes of x's parts (`size` of each), at most cap."""
    total = 1
    for k, v in vars(x).items():
        if k in _MEMO_SLOTS:
            continue
        for item in (v if isinstance(v, tuple) else (v,)):
            total += sum(size(y) for y in item) if isinstance(item, tuple) else size(item)
            if total > cap:
                break
    return min(total, cap)


def holds_tables(t: Type) -> bool:
    """Does a value of this type hold tables (whose rows rule Growth counts)?  Kept in the type."""
    if isinstance(t, (Bag, Seq, Parts, UnitBag)):
        return True
    known = t.__dict__.get("_tables")
    if known is None:
        parts = components(t)
        known = t.__dict__["_tables"] = parts is not None and any(holds_tables(p) for p in parts)
    return known


# Types with no parts (holds_* answer for them without the memo: they are often new instances).
_SCALARS = frozenset({Num, Bool, Str, Cat, Unit, Vector})


def _kept(t: Type, slot: str, compute: Callable[[Type], bool]) -> bool:
    """`compute(t)`, kept in the type's memo `slot` (types are immutable; the memo is not a field)."""
    known = t.__dict__.get(slot)
    if known is None:
        known = t.__dict__[slot] = compute(t)
    return known


def holds_fuzzy(t: Type) -> bool:
    """Does a value of this type hold distributions (whose cost a function's result carries)?
    Kept in the type."""
    if type(t) in _SCALARS:
        return False
    return _kept(t, "_fuzzy", _holds_fuzzy)


def _holds_fuzzy(t: Type) -> bool:
    if isinstance(t, Fuzzy):
        return True
    if isinstance(t, Fun):
        return holds_fuzzy(t.cod)
    if isinstance(t, (Bag, Seq, Parts, ListT, UnitBag)):
        return holds_fuzzy(t.elem)
    parts = components(t)
    return parts is not None and any(holds_fuzzy(p) for p in parts)


def holds_choices(t: Type) -> bool:
    """Can a branch choose on a value of this type directly (`if` on a bool, `case` on a sum or a
    list's shape), rather than through a comparison whose distance is already infinite?  Kept
    in the type."""
    if type(t) in _SCALARS:
        return type(t) is Bool
    return _kept(t, "_choices", _holds_choices)


def _holds_choices(t: Type) -> bool:
    if isinstance(t, (Bool, SumT, ListT, TVar, Hole)):
        return True
    if isinstance(t, (Bag, Seq, Parts, UnitBag)):  # a function given the container chooses on each element
        return holds_choices(t.elem)
    parts = components(t)
    return parts is not None and any(holds_choices(p) for p in parts)


def holds_type_variables(t: Type) -> bool:
    """Does this type mention a type variable (`'a`)?  Kept in the type (and in each of its
    parts): asked of every declared parameter and return type at each instance."""
    return _holds_kind(t, "_tvars", TVar)


def holds_holes(t: Type) -> bool:
    """Does this type mention a hole (`_`: an empty list's element type)?  Kept in the type."""
    return _holds_kind(t, "_holes", Hole)


def _holds_kind(t: Type, slot: str, kind: type) -> bool:
    """Is t, or a type among its fields, of this kind?  Kept in the type under `slot`."""
    if type(t) in _SCALARS:
        return False
    d = t.__dict__
    known = d.get(slot)
    if known is None:
        known = d[slot] = type(t) is kind or any(_holds_kind(x, slot, kind) for x in _field_types(t))
    return known


def _field_types(t: Type) -> list[Type]:
    """The types among t's fields: directly, in a tuple, or in a tuple of tuples (a record's)."""
    out = []
    for k, value in t.__dict__.items():
        if isinstance(value, Type):
            out.append(value)
        elif isinstance(value, tuple) and k not in _MEMO_SLOTS:
            for item in value:
                if isinstance(item, Type):
                    out.append(item)
                elif isinstance(item, tuple):
                    out.extend(x for x in item if isinstance(x, Type))
    return out


def holds_units(t: Type) -> bool:
    """Does a value of this type hold a table with a privacy unit (rule Units)?  Kept in the type."""
    if type(t) in _SCALARS:
        return False
    return _kept(t, "_units", _holds_units)


def _holds_units(t: Type) -> bool:
    if isinstance(t, UnitBag):
        return True
    if isinstance(t, (Bag, Seq, Parts, ListT)):
        return holds_units(t.elem)
    if isinstance(t, Fuzzy):
        return holds_units(t.inner)
    if isinstance(t, Fun):
        return holds_units(t.dom) or holds_units(t.cod)
    parts = components(t)
    return parts is not None and any(holds_units(p) for p in parts)
