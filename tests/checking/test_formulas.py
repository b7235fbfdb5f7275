"""Costs as formulas of the public parameters (checking/formulas.py): each formula is compared
with the exact checker at random parameter values the derivation never saw; costs that are not
one polynomial get no formula, with the reason; the time limit ends a derivation gracefully."""

from __future__ import annotations

import random
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
import sympy

from fuzzpy.checking.formulas import candidates, derive
from fuzzpy.checking.program import check_source
from fuzzpy.typesystem.types import Num

ROOT = Path(__file__).resolve().parents[2]

# A tree as DiffPID3 grows one: each level costs 2 eps over disjoint parts, a leaf eps.
TREE = textwrap.dedent("""\
    schema R { a : cat{"x", "y"}, b : cat{"u", "v"} }
    param eps : num = 0.1;
    param depth : int = 2;
    function grow (db : bag R) (d : int) : fuzzy num {
      sample n = laplace eps (count db);
      if d <= 0 then return n
      else
        sample c = laplace eps (count db);
        sample subs = each (fun g -> grow g (d - 1)) (groupby (fun r -> r.a) db);
        return (n + c)
    }
    function main (db : bag R) : fuzzy num { grow db depth }
    """)

# Standard library functions in a loop: noisy_mean (eps) and noisy_count (eps / 4) T times,
# and a function whose sensitivity is a parameter (the clip bound).
STATS = textwrap.dedent("""\
    import "stdlib/stats.fz"
    schema R { x : num[0, 100] }
    param eps : num = 0.2;
    param hi : num = 50;
    param T : int = 3;
    function total (db : bag R) : num { sum (map (fun r -> clip 0 hi r.x) db) }
    function twice (db : bag R) : num { total db + hi * count db }
    function loop (db : bag R) (t : int) : fuzzy num {
      if t <= 0 then return 0
      else
        sample m = noisy_mean eps 0 hi (map (fun r -> r.x) db);
        sample c = noisy_count (eps / 4) db;
        sample rest = loop db (t - 1);
        return (m + c + rest)
    }
    function main (db : bag R) : fuzzy num { loop db T }
    """)

# Gaussian releases from the standard library: rho adds up over k releases.
GAUSS = textwrap.dedent("""\
    import "stdlib/stats.fz"
    schema R { x : num[0, 100] }
    param rho : num = 0.01;
    param k : int = 4;
    function loop (db : bag R) (t : int) : fuzzy num {
      if t <= 0 then return 0
      else
        sample s = gauss_sum rho 0 10 (map (fun r -> r.x) db);
        sample rest = loop db (t - 1);
        return (s + rest)
    }
    function main (db : bag R) : fuzzy num { loop db k }
    """)

PROGRAMS = {
    "kmeans": ((ROOT / "examples/kmeans.fz").read_text(), str(ROOT / "examples/kmeans.fz"),
               {"epsilon": "3*T*eps", "step.db": "3*eps"}),
    "histogram": ((ROOT / "examples/histogram.fz").read_text(), str(ROOT / "examples/histogram.fz"),
                  {"epsilon": "eps"}),
    "tree": (TREE, "tree.fz", {"epsilon": "eps*(2*depth + 1)"}),
    "stats": (STATS, str(ROOT / "stats_test.fz"), {"epsilon": "5*T*eps/4", "total.db": "hi", "twice.db": "2*hi"}),
    "gauss": (GAUSS, str(ROOT / "gauss_test.fz"), {"rho": "k*rho"}),
}


def _checker(source: str, file: str):
    return lambda params: check_source(source, file, params)


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def derived(request):
    source, file, expected = PROGRAMS[request.param]
    report = check_source(source, file)
    assert report.ok, [d.message for d in report.diagnostics]
    return request.param, source, file, expected, report, derive(report, _checker(source, file), {}, timeout=60)


def test_formulas_are_the_expected_ones(derived):
    name, _, _, expected, report, fr = derived
    assert fr.note == ""
    for cost, text in expected.items():
        f = fr.get(cost)
        assert f is not None and f.status == "checked", (name, cost, f)
        assert sympy.simplify(f.expr - sympy.sympify(text, locals={s.name: s for s in f.expr.free_symbols})) == 0
        assert f.value == (report.epsilon if cost == "epsilon" else report.rho if cost == "rho" else f.value)


def _random_value(rng: random.Random, v: Fraction, t) -> Fraction:
    if (isinstance(t, Num) and t.integer) or v.denominator == 1:
        return Fraction(rng.randint(max(1, int(v) - 2), int(v) + 2))
    return v * Fraction(rng.randint(1, 400), rng.choice([97, 101, 103]))


def test_formula_and_number_agree_on_random_parameter_values(derived):
    name, source, file, expected, report, fr = derived
    rng = random.Random(20261124)
    symbolic = [f for f in fr.formulas.values() if f.symbolic]
    assert symbolic
    for _ in range(3):
        values = {n: _random_value(rng, v, report.param_types[n]) for n, v in fr.params.items()}
        params = {n: str(x) if x.denominator == 1 else f"{x.numerator}/{x.denominator}" for n, x in values.items()}
        again = check_source(source, file, params)
        assert again.ok, (name, params, [d.message for d in again.diagnostics])
        exact = {"epsilon": again.epsilon, "rho": again.rho}
        for f in again.functions:
            for p, c, g in zip(f.param_names or [], f.coefs or [], f.rhos or []):
                exact[f"{f.name}.{p}"], exact[f"{f.name}.{p}.rho"] = c, g
        subs = {sympy.Symbol(n): sympy.Rational(x.numerator, x.denominator) for n, x in values.items()}
        for f in symbolic:
            got = f.expr.subs(subs)
            assert Fraction(int(got.p), int(got.q)) == exact[f.name], (name, f.name, str(f.expr), values)


def test_piecewise_cost_gets_no_formula_and_says_why():
    source = textwrap.dedent("""\
        schema R { x : num[0, 100] }
        param eps : num = 0.05;
        function main (db : bag R) : fuzzy num { laplace (max eps 0.1) (count db) }
        """)
    report = check_source(source, "max.fz")
    fr = derive(report, _checker(source, "max.fz"), {})
    f = fr.get("epsilon")
    assert f.value == Fraction(1, 10)  # the checker's number is untouched
    assert f.expr is None and f.status == "none"
    assert "not one polynomial" in f.reason and "eps = 0.15" in f.reason


def test_exact_on_finite_int_ranges():
    source = textwrap.dedent("""\
        schema R { x : num[0, 100] }
        param k : int[1, 4] = 2;
        param j : int[0, 2] = 1;
        function loop (db : bag R) (t : int) : fuzzy num {
          if t <= 0 then return 0
          else
            sample s = laplace (1/10) (count db);
            sample rest = loop db (t - 1);
            return (s + rest)
        }
        function main (db : bag R) : fuzzy num { sample a = loop db (k * j); sample b = laplace (1/2) (count db);
                                                 return (a + b) }
        """)
    report = check_source(source, "ranged.fz")
    fr = derive(report, _checker(source, "ranged.fz"), {})
    f = fr.get("epsilon")
    assert f.status == "exact" and str(f.expr) == "(j*k + 5)/10"
    assert fr.points >= 12  # every point of the ranges: 4 x 3


def test_time_limit_ends_gracefully():
    source, file, _ = PROGRAMS["tree"]
    report = check_source(source, file)
    fr = derive(report, _checker(source, file), {}, timeout=0)
    assert "time limit" in fr.note
    f = fr.get("epsilon")
    assert f.expr is None and "time limit" in f.reason and f.value == Fraction(1, 2)


def test_a_point_where_the_program_does_not_check_is_skipped_not_fitted():
    # clip 0 (k - 1) needs k >= 1: the sweep stays at 1 and above for a count given as 3.
    assert all(x >= 1 for x in candidates(Fraction(3), Num(integer=True)))
    assert candidates(Fraction(1, 20), Num())[:2] == [Fraction(1, 40), Fraction(3, 40)]
    assert all(1 <= x <= 4 for x in candidates(Fraction(2), Num(Fraction(1), Fraction(4), True)))
