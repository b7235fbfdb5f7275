"""The checker's second round of speed-ups (issue 38) compute what the general code computes:
facts kept in types equal a fresh walk and never travel in a pickle, `ast.children` finds every
sub-node, rule Count's early refusal refuses only what it refused before, and the cheaper
distance and shadow-key helpers give the same entries in the same order."""

from __future__ import annotations

import copy
import pickle
from fractions import Fraction
from pathlib import Path

from fuzzpy.checking import counting
from fuzzpy.checking.helpers import _free_vars, _integral_type
from fuzzpy.syntax import ast as A
from fuzzpy.syntax.parser import parse_module
from fuzzpy.typesystem import types as T
from fuzzpy.typesystem.quadratic import base_of, is_shadow, linear_part, pop_quad, shadow
from fuzzpy.typesystem.sens import INF, c_add, d_add

ROOT = Path(__file__).resolve().parents[2]
ROW = T.Record((("age", T.Num(Fraction(0), Fraction(90))), ("sex", T.Cat(("M", "F")))), name="P")
TYPES = [T.Num(), T.BOOL, T.STRING, T.UNIT, T.Vector(3), ROW, T.Bag(ROW), T.UnitBag(ROW, "age"),
         T.Tensor((T.Num(), T.Fuzzy(T.Num()))), T.ListT(T.SumT(T.BOOL, T.Num())),
         T.Fun(T.Num(), Fraction(1), T.Fuzzy(T.Bag(ROW))), T.Record((("r", T.UnitBag(ROW, "age")),)),
         T.Parts(("a",), T.Bag(ROW)), T.TVar("a"), T.Hole(), T.With((T.Num(integer=True), T.Cat(("x",))))]
FACTS = {"_units": (T.holds_units, T._holds_units), "_fuzzy": (T.holds_fuzzy, T._holds_fuzzy),
         "_choices": (T.holds_choices, T._holds_choices)}


def _fresh(t: T.Type) -> T.Type:
    return pickle.loads(pickle.dumps(t))  # an equal instance with nothing kept in it


def test_kept_type_facts_equal_a_fresh_walk_and_are_not_pickled() -> None:
    for t in TYPES:
        sizes = T.type_size(_fresh(t), cap=10_000)
        for kept, walk in FACTS.values():
            assert kept(t) == walk(_fresh(t)) and kept(t) == kept(_fresh(t)), t
        assert T.components(t) == T.components(_fresh(t)) and _integral_type(t) == _integral_type(_fresh(t))
        assert T.type_size(t, cap=10_000) == sizes  # kept facts are not parts of the type
        for other in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
            assert not set(T._MEMO_SLOTS) & set(other.__dict__) and other == t


def test_kept_type_facts_of_scalars_without_the_memo() -> None:
    assert T.holds_choices(T.BOOL) and not T.holds_choices(T.Num())
    assert not any(kept(t) for t in (T.Num(), T.STRING, T.Vector(2)) for kept, _ in FACTS.values())
    assert "_units" not in T.Num().__dict__


def _old_children(node: A.Node) -> list:
    """ast.children as it was: every attribute of the node, read generically."""
    out: list = []
    for value in vars(node).values():
        if isinstance(value, A.Node):
            out.append(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, A.Node):
                    out.append(item)
                elif isinstance(item, tuple):
                    out.extend(x for x in item if isinstance(x, A.Node))
    return out


def _programs():
    for path in sorted([*ROOT.glob("examples/**/*.fz"), *ROOT.glob("stdlib/*.fz")]):
        module, _ = parse_module(path.read_text(), str(path))
        yield path, module


def test_children_are_every_sub_node_of_every_example() -> None:
    seen = 0
    for path, module in _programs():
        todo: list = list(module.decls)
        while todo:
            node = todo.pop()
            expected = _old_children(node)
            got = A.children(node)
            assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected)), (path, node)
            todo += expected
            seen += 1
    assert seen > 5000


def _fun_decls():
    for _, module in _programs():
        yield from (d for d in module.decls if isinstance(d, A.FunDecl))
    yield from _fun_decls_of("""
function f (n : int) (acc : num) : num {
  let g = f (n - 1) acc;
  if n <= 0 then acc else g
}
function h (n : int) : num {
  let a = 1;
  let b = a + 1;
  if n > 0 then h (n - 1) + b else 0
}
""")


def _fun_decls_of(src: str):
    module, diagnostics = parse_module(src, "<test>")
    assert not diagnostics
    return [d for d in module.decls if isinstance(d, A.FunDecl)]


def test_rule_count_refuses_early_only_what_its_guard_refuses() -> None:
    shapes = 0
    for decl in _fun_decls():
        refused_early = not counting._guard_of(counting._after_lets(decl.body))
        if refused_early:  # _guarded stops at a let or at the same body: no `if` guard either way
            assert not counting._guard_of(counting._guarded(decl)[0]), decl.name
            assert counting.count_shape(decl) is None
        shapes += counting.count_shape(decl) is not None
    assert shapes >= 2  # stdlib's counted recursions and h above keep their shape


def test_free_names_of_a_body() -> None:
    (decl,) = _fun_decls_of("function f (x : num) : num { let y = x + z; (fun w -> w + y + q) 1 }")
    assert _free_vars(decl.body, set()) == {"x", "z", "q"}
    assert _free_vars(decl.body, {"x", "q"}) == {"z"}


def test_distance_and_shadow_helpers_as_the_general_rules() -> None:
    a = {"x": Fraction(1), shadow("x", "z"): Fraction(1, 2), "y": INF, shadow("xy", "g"): Fraction(3)}
    b = {"y": Fraction(2), "w": Fraction(5)}
    for ds in ([a, b], [{}, b, a], [b], [{}, {}], [a, {}, a]):
        expected: dict = {}
        for d in ds:
            for s, c in d.items():
                expected[s] = c_add(expected[s], c) if s in expected else c
        got = d_add(*ds)
        assert got == expected and list(got) == list(expected)
    assert list(linear_part(a)) == [s for s in a if not is_shadow(s)]
    d = dict(a)
    assert pop_quad(d, "x") == {"z": Fraction(1, 2)} and shadow("xy", "g") in d and shadow("x", "z") not in d
    assert pop_quad(dict(a), shadow("x", "z")) == {}  # not a symbol: nothing has it as its base
    assert all(base_of(k) != "x" for k in d if is_shadow(k))
