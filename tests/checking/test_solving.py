"""The least-annotation solver: exact values, certification, caching, infinity."""

from fractions import Fraction as F

from conftest import check, fn_type

from fuzzpy.solving import lp
from fuzzpy.typesystem.sens import INF, Lin

u = Lin.unknown


def lin(const, *terms):
    return Lin(F(const), tuple(sorted((name, F(k)) for name, k in terms)))


def test_plain_iteration_finds_the_exact_least_solution():
    # s >= max(1, s)  ->  s = 1 (via m >= 1, m >= s, m <= s)
    values = lp.solve_least([(F(1), u("m")), (u("s"), u("m")), (u("m"), u("s"))], ["s", "m"])
    assert values == {"s": 1, "m": 1}


def test_a_limit_fixpoint_goes_to_the_lp_and_is_certified_exactly():
    before = lp.LP_STATS["solves"]
    # s >= 1 + s/2 converges only in the limit: the LP gives 2, certified exactly
    values = lp.solve_least([(lin(1, ("s", F(1, 2))), u("s"))], ["s"])
    assert values["s"] == 2 and isinstance(values["s"], F)
    assert lp.LP_STATS["solves"] == before + 1


def test_divergent_recursion_is_infinite():
    values = lp.solve_least([(lin(1, ("s", 1)), u("s"))], ["s"])
    assert values["s"] == INF


DIVERGENT_SYSTEMS = [
    [(lin(1, ("s", 1)), u("s"))],                                      # s >= 1 + s
    [(lin(1, ("s", 2)), u("s")), (u("s"), u("t"))],                     # s >= 1 + 2s, t >= s
    [(u("a"), u("b")), (lin(F(1, 100), ("b", 1), ("a", 1)), u("b"))],   # b >= a, b >= 1/100 + a + b
    [(F(3), lin(1))],                                                   # 3 <= 1, no unknown at all
]


def test_a_row_no_finite_values_satisfy_gives_the_lp_solvers_answer_without_it(monkeypatch):
    for system in DIVERGENT_SYSTEMS:
        names = sorted({n for a, b in system for c in (a, b) if isinstance(c, Lin) for n, _ in c.terms})
        key, _ = lp._canonical(system, names)
        assert any(lp._clearly_unsatisfiable(a, b) for a, b in key)
        assert lp._lp_guess(list(key), len(names), set()) is None  # what the solver says: infeasible
    monkeypatch.setattr(lp, "_lp_guess", lambda *a: (_ for _ in ()).throw(AssertionError("solver called")))
    lp._solve_canonical.cache_clear()
    assert lp.solve_least([(lin(1, ("s", 2)), u("s"))], ["s"]) == {"s": INF}


def test_a_row_that_some_values_satisfy_or_within_the_margin_still_goes_to_the_solver():
    for a, b in [(lin(1, ("s", F(1, 2))), u("s")),          # s >= 1 + s/2: s = 2
                 (lin(1, ("s", 1)), lin(0, ("s", 1), ("t", 1))),  # 1 + s <= s + t: t = 1
                 (lin(F(1, 10**6), ("s", 1)), u("s"))]:     # violated by less than the margin
        key, _ = lp._canonical([(a, b)], ["s", "t"])
        assert not any(lp._clearly_unsatisfiable(x, y) for x, y in key)


def test_infinity_propagates_through_constraints():
    values = lp.solve_least([(INF, u("a")), (lin(0, ("a", 1)), u("b")), (F(2), u("c"))], ["a", "b", "c"])
    assert values == {"a": INF, "b": INF, "c": 2}


def test_certification_lifts_a_value_that_the_solver_rounded_down():
    key, names = lp._canonical([(F(1, 3), u("s"))], ["s"])
    assert lp._certify(key, [F(333333, 1000000)]) == [F(1, 3)]


def test_equal_systems_are_solved_once():
    system = [(lin(F(1, 7), ("q", F(1, 2))), u("q"))]
    lp.solve_least(system, ["q"])
    hits = lp.LP_STATS["cache_hits"]
    renamed = [(lin(F(1, 7), ("other", F(1, 2))), u("other"))]
    assert lp.solve_least(renamed, ["other"]) == {"other": F(2, 7)}
    assert lp.LP_STATS["cache_hits"] == hits + 1


def test_recursive_function_with_halving_gets_the_limit_sensitivity():
    r = check('schema T { x : num }\n'
              'function h (x : num) (xs : list num) : num { case xs of { [] => x | y :: t => x + h (x / 2) t } }\n'
              'function main (db : bag T) : fuzzy num { laplace 1 (count db) }')
    assert fn_type(r, "h") == "num -o[2] list num -o[0] num"


def test_declared_annotation_is_checked_after_solving():
    r = check('schema T { x : num }\n'
              'function h (x :[1] num) (xs : list num) : num { case xs of { [] => x | y :: t => x + h x t } }\n'
              'function main (db : bag T) : fuzzy num { laplace 1 (count db) }')
    assert [d.code for d in r.diagnostics] == ["E0301"]


def test_many_lambdas_never_share_a_cached_instance():
    # Regression: closures were once keyed by id(), which Python reuses after collection.
    body = "".join(f"let b{i} = filter (fun r -> r.x < {i}) (map (fun r -> {{ x = clip 0 {i + 1} r.x }}) db);\n"
                   for i in range(200))
    r = check("schema T { x : num }\nfunction main (db : bag T) : fuzzy num {\n" + body +
              "laplace 1 (count b199) }")
    assert r.ok, [d.message for d in r.diagnostics][:3]
