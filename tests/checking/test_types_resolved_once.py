"""The checker's fourth round of speed-ups (issue 38) compute what the general code computes:
type variables and holes kept in types equal the generic walk they replace, a type expression
naming no schema resolves to one object in every check (one naming a schema, in each check),
and mechanism records are deduplicated as a set of their fields would."""

from __future__ import annotations

import pickle
from fractions import Fraction

from fuzzpy.checking.program import _unique
from fuzzpy.checking.records import MechanismRecord
from fuzzpy.checking.typeexpr import TypeResolver
from fuzzpy.diagnostics import Span
from fuzzpy.syntax import ast as A
from fuzzpy.typesystem import types as T

ROW = T.Record((("age", T.Num(Fraction(0), Fraction(90))), ("sex", T.Cat(("M", "F")))), name="P")
AT = Span("f.fz", 1, 1, 1, 2)
TYPES = [T.Num(), T.BOOL, T.Vector(3), ROW, T.Bag(ROW), T.TVar("a"), T.Hole(), T.ListT(T.Hole()),
         T.Tensor((T.Num(), T.Fuzzy(T.TVar("b")))), T.Record((("r", T.ListT(T.TVar("a"))),)),
         T.Fun(T.TVar("a"), Fraction(1), T.Fuzzy(T.Bag(ROW))), T.SumT(T.BOOL, T.Hole()),
         T.Parts(("k",), T.TVar("a")), T.UnitBag(ROW, "age"), T.With((T.Num(integer=True), T.Cat(("x",))))]


def _generic_walk(t: T.Type, kind: type) -> bool:
    """The walk the kept facts replace: t, or any type among its fields, is a `kind`."""
    if isinstance(t, kind):
        return True
    for value in vars(t).values():
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            inner = item if isinstance(item, tuple) else (item,)
            if any(isinstance(x, T.Type) and _generic_walk(x, kind) for x in inner):
                return True
    return False


def test_kept_type_variables_and_holes_equal_the_generic_walk_and_are_not_pickled() -> None:
    for t in TYPES:
        fresh = pickle.loads(pickle.dumps(t))
        assert T.holds_type_variables(t) == _generic_walk(fresh, T.TVar), t
        assert T.holds_holes(t) == _generic_walk(fresh, T.Hole), t
        assert "_tvars" not in pickle.loads(pickle.dumps(t)).__dict__


def _schema(name: str) -> T.Schema:
    return T.Schema(name, (T.Column("x", T.Num(Fraction(0), Fraction(1))),))


def test_a_type_naming_no_schema_resolves_to_one_object_in_every_check() -> None:
    num = A.TNum(AT, Fraction(0), Fraction(5), False)
    fun = A.TFun(AT, A.TWrap(AT, "list", num), Fraction(2),
                 A.TWrap(AT, "fuzzy", A.TProduct(AT, "tensor", [num, num])))
    first, second = TypeResolver({}), TypeResolver({})
    assert first.resolve(fun) is second.resolve(fun)
    assert first.resolve(fun) == T.Fun(T.ListT(T.Num(Fraction(0), Fraction(5))), Fraction(2),
                                       T.Fuzzy(T.Tensor((T.Num(Fraction(0), Fraction(5)),) * 2)))


def test_a_type_naming_a_schema_is_resolved_against_each_checks_schemas() -> None:
    table = A.TWrap(AT, "bag", A.TName(AT, "S"))
    pair = A.TProduct(AT, "tensor", [table, A.TWrap(AT, "bag", A.TName(AT, "S"))])
    old, new = TypeResolver({"S": _schema("S")}), TypeResolver({"S": T.Schema("S", ())})
    assert old.resolve(pair) == T.Tensor((T.Bag(_schema("S").row_type),) * 2)
    assert new.resolve(pair) == T.Tensor((T.Bag(T.Record((), name="S")),) * 2)
    assert old.resolve(pair).items[0] is old.resolve(pair).items[1]  # every `bag S` of a check: one object


def test_mechanism_records_deduplicated_as_a_set_of_their_fields() -> None:
    here, there = Span("f.fz", 1, 1, 1, 5), Span("f.fz", 2, 1, 2, 5)
    numbers = [(Fraction(1), Fraction(1, 10), Fraction(10)), (Fraction(2), Fraction(1, 10), Fraction(20)),
               (1, Fraction(1, 10), 10.0), (Fraction(1), Fraction(1, 10), Fraction(10))]
    records = [MechanismRecord(name, span, *n, "f") for span in (here, there) for name in ("laplace", "gauss")
               for n in numbers]
    seen, expected = set(), []
    for r in records:
        key = (r.span, r.name, r.sensitivity, r.epsilon, r.scale)
        if key not in seen:
            seen.add(key)
            expected.append(r)
    assert [id(r) for r in _unique(records)] == [id(r) for r in expected]
    assert len(expected) == 8
