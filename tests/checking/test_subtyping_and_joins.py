"""Rules Subtyping and Join (docs/soundness.md): `T <: U` holds in the documented cases only, the
join of two types is an upper bound of both, and programs see both where values of one type are
used as another (ascriptions, arguments, branches, lists).  A partial application of a curried
declared function joined at a branch, or given to a declared parameter, keeps the whole cost of its
release in rule Rho (more such programs: test_rule_rho_chain.py)."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest
from check_and_run import check, refused

from fuzzpy.typesystem.types import (
    BOOL,
    INF,
    INT,
    NUM,
    STRING,
    Bag,
    Cat,
    Fun,
    Fuzzy,
    Hole,
    ListT,
    Num,
    Parts,
    Record,
    Seq,
    SumT,
    Tensor,
    Vector,
    With,
    is_subtype,
    join_types,
)

MAIN = "function main (db : bag T) : fuzzy num "


def num(lo, hi, integer=False) -> Num:
    return Num(None if lo is None else F(lo), None if hi is None else F(hi), integer)


# ---- rule Subtyping: the cases, one by one --------------------------------------------------------

@pytest.mark.parametrize("sub, sup", [
    (num(0, 1), num(0, 5)),                              # narrower bounds
    (num(0, 1), num(None, 5)),                           # an unbounded side accepts anything
    (num(0, 1, True), num(0, 1)),                        # an integer is a number
    (Hole(), num(0, 1)),                                 # `_` has no values
    (Tensor((num(0, 1), BOOL)), Tensor((NUM, BOOL))),
    (With((num(0, 1), NUM)), With((NUM, NUM))),
    (SumT(num(0, 1), Hole()), SumT(NUM, STRING)),
    (Record((("a", num(0, 1)),), "R"), Record((("a", NUM),), "S")),  # names are only shown
    (Cat(("b",)), Cat(("a", "b"))),
    (Cat(("b", "a")), Cat(("a", "b"))),                  # in any order
    (Bag(num(0, 1)), Bag(NUM)), (ListT(num(0, 1)), ListT(NUM)),
    (Fuzzy(num(0, 1)), Fuzzy(NUM)), (Seq(num(0, 1)), Seq(NUM)),
    (Parts(("x", "y"), num(0, 1)), Parts(("x", "y"), NUM)),
    (Fun(NUM, F(1), num(0, 1)), Fun(num(0, 1), F(2), NUM)),  # contravariant domain, covariant codomain
    (Fun(NUM, F(1), NUM), Fun(NUM, INF, NUM)),
    (Vector(3), Vector(3)),
])
def test_subtyping_holds_in_the_documented_cases(sub, sup):
    assert is_subtype(sub, sup)


@pytest.mark.parametrize("sub, sup", [
    (num(0, 5), num(0, 1)),                              # wider bounds
    (num(None, 1), num(0, 1)),                           # unbounded where a bound is required
    (num(0, 1), num(0, 1, True)),                        # a number is not an integer
    (num(0, 1), Hole()),
    (Tensor((NUM, NUM)), With((NUM, NUM))),              # other kinds, other metrics
    (Tensor((NUM,)), Tensor((NUM, NUM))),
    (Record((("a", NUM), ("b", NUM))), Record((("b", NUM), ("a", NUM)))),  # fields in another order
    (Cat(("a", "c")), Cat(("a", "b"))),
    (Cat(("a",)), STRING), (INT, Cat(("1",))),
    (Parts(("y", "x"), NUM), Parts(("x", "y"), NUM)),
    (Bag(NUM), Seq(NUM)), (ListT(NUM), Bag(NUM)),
    (Fun(num(0, 1), F(1), NUM), Fun(NUM, F(1), NUM)),    # a smaller domain is a larger type
    (Fun(NUM, F(2), NUM), Fun(NUM, F(1), NUM)),          # a larger sensitivity
    (Vector(3), Vector(4)), (Vector(2), Tensor((NUM, NUM))), (BOOL, STRING),
])
def test_subtyping_fails_outside_the_documented_cases(sub, sup):
    assert not is_subtype(sub, sup)


# ---- rule Join: an upper bound of both ------------------------------------------------------------

SAMPLES = [
    num(0, 1), num(2, 5), num(None, 0), num(0, 3, True), NUM, INT, BOOL, STRING, Hole(),
    Cat(("a",)), Cat(("a", "b")), Vector(2),
    Tensor((num(0, 1), BOOL)), Tensor((num(1, 2), BOOL)), With((num(0, 1), NUM)), With((NUM, num(4, 4))),
    SumT(num(0, 1), Hole()), SumT(Hole(), BOOL), SumT(num(2, 3), BOOL),
    Record((("a", num(0, 1)),), "R"), Record((("a", num(5, 6)),), "S"), Record((("b", NUM),)),
    Bag(num(0, 1)), Bag(num(3, 4)), ListT(Hole()), ListT(num(0, 1, True)), ListT(num(1, 2)),
    Fuzzy(num(0, 1)), Fuzzy(NUM), Seq(num(0, 1)), Parts(("x",), NUM), Parts(("x",), num(0, 1)),
    Fun(NUM, F(1), num(0, 1)), Fun(NUM, F(3), num(2, 3)), Fun(num(0, 1), F(1), NUM),
]


def test_a_join_is_a_supertype_of_both_types():
    joined = 0
    for a, b in itertools.product(SAMPLES, repeat=2):
        j = join_types(a, b)
        if j is not None:
            joined += 1
            assert is_subtype(a, j) and is_subtype(b, j), (a, b, j)
    assert joined > len(SAMPLES)  # not only the pairs of equal types


@pytest.mark.parametrize("a, b, joined", [
    (num(0, 1), num(2, 5), num(0, 5)),
    (num(0, 1, True), num(2, 5, True), num(0, 5, True)),
    (num(0, 1, True), num(2, 5), num(0, 5)),             # int only if both are
    (num(None, 0), num(2, 5), num(None, 5)),             # an unbounded side stays so
    (ListT(Hole()), ListT(num(1, 2)), ListT(num(1, 2))),
    (SumT(num(0, 1), Hole()), SumT(Hole(), BOOL), SumT(num(0, 1), BOOL)),
    (Fun(NUM, F(1), num(0, 1)), Fun(NUM, F(3), num(2, 3)), Fun(NUM, F(3), num(0, 3))),
])
def test_join_in_the_documented_cases(a, b, joined):
    assert join_types(a, b) == joined


@pytest.mark.parametrize("a, b", [
    (Cat(("a",)), Cat(("a", "b"))),                      # a common supertype exists, but no join
    (Parts(("x",), NUM), Parts(("x",), num(0, 1))),
    (Fun(NUM, F(1), NUM), Fun(num(0, 1), F(1), NUM)),    # different domains
    (Vector(2), Vector(3)), (Tensor((NUM,)), With((NUM,))), (NUM, BOOL),
])
def test_join_is_refused_outside_the_documented_cases(a, b):
    assert join_types(a, b) is None


# ---- in programs ----------------------------------------------------------------------------------

def signature(src: str, name: str) -> str:
    r = check(src + MAIN + "{ return 0 }")
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    return next(f.type for f in r.functions if f.name == name)


def test_a_branch_has_the_join_of_its_arms():
    assert signature("function f (c : bool) { if c then 1 else 5 }", "f") == "bool -o[0] int[1, 5]"
    assert signature("function f (c : bool) { if c then [1] else [] }", "f") == "bool -o[0] list (int[1, 1])"


def test_arms_without_a_join_are_refused():
    refused("function f (c : bool) { if c then 1 else true }\n" + MAIN + "{ return 0 }", "E0202",
            "the branches have different types")


def test_an_ascription_may_widen_bounds_but_not_narrow_them():
    assert signature("function f (x : num[0, 1]) { (x : num[0, 5]) }", "f") == "num[0, 1] -o num[0, 5]"
    refused("function f (x : num[0, 5]) { (x : num[0, 1]) }\n" + MAIN + "{ return 0 }", "E0202",
            "does not fit the annotation")


def test_an_argument_of_a_declared_type_must_be_a_subtype():
    helper = "function h (x : num[0, 5]) : num { x }\n"
    assert check(helper + MAIN + "{ return (h 3) }").ok
    refused(helper + MAIN + "{ return (h 7) }", "E0202", "expected num[0, 5]")


def test_a_function_of_a_declared_type_is_a_subtype_by_its_sensitivity():
    apply2 = "function app2 (g : num -o[2] num) (x : num) : num { g x }\n"
    apply1 = "function app1 (g : num -o num) (x : num) : num { g x }\n"
    # A 1-sensitive function stands where a 2-sensitive one is expected, not the other way round.
    assert check(apply1 + apply2 + "function pass (g : num -o num) (x : num) : num { app2 g x }\n"
                 + MAIN + "{ return 0 }").ok
    refused(apply1 + apply2 + "function pass (g : num -o[2] num) (x : num) : num { app1 g x }\n"
            + MAIN + "{ return 0 }", "E0202", "expected num -o num")


# ---- rule Rho across joins and declared parameters: a partial application keeps its whole release ---

CURRIED = "(f : bag T -o bag T -o fuzzy num)"
LAMBDA = "(fun a b -> laplace 1 (count a + count b))"


def zcdp_of_pure(src: str):
    r = check(src)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    (inp,) = r.inputs
    return inp.epsilon, inp.rho_pure


def test_a_partial_application_applied_again_is_charged_its_whole_chain():
    # f t t releases with epsilon 2 (the same table twice): (I5) requires 2^2 / 2 = 2.
    src = (f"function app {CURRIED} (t : bag T) : fuzzy num {{ let g = f t; g t }}\n"
           + MAIN + f"{{ app {LAMBDA} db }}")
    assert zcdp_of_pure(src) == (2, 2)


def test_joined_partial_applications_keep_their_chain():
    src = (f"function app {CURRIED} (t : bag T) (c : bool) : fuzzy num {{ let g = if c then f t else f t; g t }}\n"
           + MAIN + f"{{ sample z = laplace 1 0; app {LAMBDA} db (z > 0) }}")
    assert zcdp_of_pure(src) == (2, 2)


def test_a_partial_application_given_to_a_declared_parameter_keeps_its_chain():
    src = ("function use (g : bag T -o fuzzy num) (t : bag T) : fuzzy num { g t }\n"
           f"function app {CURRIED} (t : bag T) : fuzzy num {{ use (f t) t }}\n"
           + MAIN + f"{{ app {LAMBDA} db }}")
    assert zcdp_of_pure(src) == (2, 2)
