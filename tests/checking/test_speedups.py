"""The checker's speed-ups keep their promises: kept hashes and sizes are the structural ones and
never travel in a pickle, fast paths compute what the general code computes."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from fractions import Fraction

from fuzzpy.diagnostics import Span
from fuzzpy.syntax import parser
from fuzzpy.typesystem.sens import INF, ONE, ZERO, ConstraintStore, Lin, c_add, c_mul, d_scale, is_inf, max_abs
from fuzzpy.typesystem.types import (
    MAX_TYPE_SIZE,
    Bag,
    Cat,
    Column,
    Fun,
    ListT,
    Num,
    Record,
    Schema,
    Tensor,
    holds_tables,
    type_size,
)

ROW = Record((("age", Num(Fraction(0), Fraction(90))), ("sex", Cat(("M", "F")))), name="P")


def test_kept_hash_is_the_structural_hash_and_not_pickled() -> None:
    t = Bag(ROW)
    assert "_hash" not in t.__dict__
    h = hash(t)
    assert t.__dict__["_hash"] == h == hash(Bag(Record(ROW.fields)))  # equal types, equal hashes
    assert Bag(ROW) == t and repr(Bag(ROW)) == repr(t)
    for other in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
        assert "_hash" not in other.__dict__ and other == t
    type_size(t), holds_tables(Tensor((t, t)))
    assert not {"_hash", "_size", "_tables"} & set(pickle.loads(pickle.dumps(Tensor((t, t)))).__dict__)


_PICKLE_TYPES = """
import pickle, sys
from fractions import Fraction
from fuzzpy.typesystem.types import Bag, Cat, Num, Record
keys = [Cat(("a", "b")), Bag(Record((("k", Cat(("x", "y"))), ("v", Num(Fraction(0), Fraction(1)))), name="T"))]
if sys.argv[1] == "write":
    for k in keys:
        hash(k)  # kept in the instance before pickling
    sys.stdout.buffer.write(pickle.dumps({k: i for i, k in enumerate(keys)}))
else:
    table = pickle.loads(sys.stdin.buffer.read())
    print([table.get(k) for k in keys])
"""


def test_types_pickled_in_one_process_are_found_in_another() -> None:
    """String hashes differ between processes: a hash kept in one must not be used in another."""
    env = dict(os.environ)
    written = subprocess.run([sys.executable, "-c", _PICKLE_TYPES, "write"], capture_output=True, check=True,
                             env={**env, "PYTHONHASHSEED": "1"}).stdout
    read = subprocess.run([sys.executable, "-c", _PICKLE_TYPES, "read"], input=written, capture_output=True,
                          check=True, env={**env, "PYTHONHASHSEED": "2"})
    assert read.stdout.decode().strip() == "[0, 1]"


def test_row_type_built_once_and_not_pickled() -> None:
    s = Schema("P", (Column("age", Num(Fraction(0), Fraction(90))), Column("sex", Cat(("M", "F")))))
    assert s.row_type is s.row_type and s.row_type == ROW and s.row_type.name == "P"
    back = pickle.loads(pickle.dumps(s))
    assert "_row_type" not in back.__dict__ and back == s and back.row_type == ROW


def test_kept_size_equals_the_walk() -> None:
    t = ListT(Tensor((Bag(ROW), Num())))
    assert type_size(t) == type_size(t, MAX_TYPE_SIZE + 2) == 7
    big = Num()
    for _ in range(10):  # 2^10 parts, shared: counted once per use, up to the cap
        big = Tensor((big, big))
    assert type_size(big) == MAX_TYPE_SIZE + 1 and type_size(big, 10) == 10
    assert type_size(Fun(big, ONE, Num())) == MAX_TYPE_SIZE + 1


def test_exact_fast_paths_agree_with_the_general_rules() -> None:
    u = Lin.unknown("u")
    half, two = Fraction(1, 2), Fraction(2)
    assert c_mul(ZERO, INF) == ZERO and c_mul(INF, ZERO) == ZERO and c_mul(half, INF) == INF
    assert c_mul(half, two) == ONE and type(c_mul(half, two)) is Fraction
    assert c_add(half, half) == ONE and c_add(half, INF) == INF and c_add(half, u) == Lin(half, (("u", ONE),))
    assert d_scale(ONE, {"a": two, "b": ZERO}) == {"a": two}
    assert d_scale(ZERO, {"a": two, "b": INF}) == {}  # 0 * inf = 0: does not depend on
    assert d_scale(half, {"a": two, "b": INF, "c": u}) == {"a": ONE, "b": INF, "c": Lin(ZERO, (("u", half),))}
    assert list(d_scale(two, {"z": ONE, "a": two})) == ["z", "a"]  # the order is kept
    assert is_inf(INF) and not is_inf(two) and not is_inf(u)


def test_unit_and_zero_operands_give_the_exact_product_and_sum() -> None:
    """c_mul's factor 1, c_add's term 0 and d_scale's coefficient 1 return the other number: the
    same value and type as Fraction's own arithmetic, for every pair of these numbers."""
    numbers = [ZERO, ONE, -ONE, Fraction(1, 2), Fraction(-7, 3), Fraction(10**20, 3)]
    for a in numbers:
        for b in numbers:
            product, total = c_mul(a, b), c_add(a, b)
            assert product == a * b and type(product) is Fraction
            assert total == a + b and type(total) is Fraction
        scaled = d_scale(a, {"x": ONE, "y": Fraction(3, 4)})
        assert scaled == {s: a * c for s, c in {"x": ONE, "y": Fraction(3, 4)}.items() if a * c != 0}

        assert d_scale(a, {"x": Fraction(1), "y": ZERO}) == d_scale(a, {"x": ONE})  # a 1 that is not ONE


def test_max_abs_and_c_max_of_exact_numbers_are_max_and_abs() -> None:
    """max_abs and ConstraintStore.c_max compare exact numbers by cross-multiplication: the value
    and type max(abs(a), abs(b)) and max(a, b) give, for every pair of these numbers."""
    numbers = [ZERO, ONE, -ONE, Fraction(1, 2), Fraction(-1, 2), Fraction(-7, 3), Fraction(10**20, 3)]
    store = ConstraintStore()
    for a in numbers:
        for b in numbers:
            bound, larger = max_abs(a, b), store.c_max(a, b)
            assert bound == max(abs(a), abs(b)) and type(bound) is Fraction
            assert larger == max(a, b) and type(larger) is Fraction
    assert max_abs(Fraction(-3), 2) == 3 and store.c_max(ONE, INF) == INF  # other numbers: the general path


def test_tool_hooks_are_unset_for_a_plain_check() -> None:
    """A check without a tool reads one class attribute per binding: the hooks default to None."""
    from fuzzpy.checking.checker import Checker

    code = "from fuzzpy.checking.checker import Checker; print(Checker.on_bind, Checker.on_call, Checker.on_primitive)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["None", "None", "None"]
    assert hasattr(Checker, "on_bind")  # declared on the class, whatever a tool in this process set


def test_parser_spans_are_ordinary_spans() -> None:
    s = parser._span("f.fz", 1, 2, 3, 4)
    assert s == Span("f.fz", 1, 2, 3, 4) and hash(s) == hash(Span("f.fz", 1, 2, 3, 4))
    assert repr(s) == repr(Span("f.fz", 1, 2, 3, 4)) and pickle.loads(pickle.dumps(s)) == s
    module, diags = parser.parse_module("function f (x : num) : num {\n  x + 1\n}\n", "f.fz")
    assert not diags and module.decls[0].body.span == Span("f.fz", 2, 3, 2, 8)


def test_numeric_type_equality_is_the_dataclass_equality() -> None:
    """Num's own `==` (bounds compared by numerator and denominator) agrees with comparing its
    fields, and equal numeric types hash alike."""
    bounds = [None, ZERO, Fraction(2, 2), Fraction(1, 3), Fraction(-5), 0, 1]
    types = [Num(lo, hi, integer) for lo in bounds for hi in bounds for integer in (False, True)]
    for a in types:
        for b in types:
            fields_equal = (a.lo, a.hi, a.integer) == (b.lo, b.hi, b.integer)
            assert (a == b) is fields_equal and (a != b) is not fields_equal
            if fields_equal:
                assert hash(a) == hash(b)
    assert Num(ONE, ONE) != Record((("x", Num(ONE, ONE)),)) and Num() != "num"
