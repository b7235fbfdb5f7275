"""Rule Exact (docs/soundness.md): outside row functions numbers are computed exactly, as the checker
reasons (over the reals), so a release moves by exactly what the proof says, through every kind of
value and next to public infinities and NaN; and since exact numbers grow, a product or quotient
whose size may grow without bound is a failure risk (FAIL, and the presence of its private
operands).

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP).  Runs use RandomSource.seeded (tests only): the same seed draws the same
noise for the same calibration, and a value on the noise grid (an integer here) consumes no
rounding coin, so the difference of two Laplace releases is exactly the difference of the values
the mechanism was handed.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import (
    ROW_A,
    ROW_B,
    check,
    codes,
    make_tables,
    moved,
    refused_report,
    run,
    run_result,
    same_release,
)

from fuzzpy.audit.oracle import run_identity
from fuzzpy.primitives.registry import lookup
from fuzzpy.typesystem.sens import INF


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "
K = 2**82                # a constant far beyond float precision
HALF = 2**60 + 128       # exactly half an ulp above 2^60: float(HALF + c) jumps by 256 between c = 0 and 1
TWO60 = 2**60

# ---- the runtime computes what the checker reasons about: exact reals, not floats ----------------------

FLOAT_LEAKS = {
    # count db = 0 gives 1/0 = inf, inf * 0 = nan; one row gives 1 * 0 = 0.
    "private-division-times-zero": "function main (db : bag T) : fuzzy num { return ((1 / count db) * 0) }",
    # No infinite sensitivity at all: count * 1e200 * 1e200 overflows to inf as soon as count >= 1.
    "overflow-times-zero": ("function main (db : bag T) : fuzzy num { return (count db * 1e200 * 1e200 * 0) }"),
    # The NaN-or-zero bit then steers a public branch: a clean 0/1 release of "db is non-empty".
    "nan-steers-a-branch": ("function main (db : bag T) : fuzzy num {\n"
                            "  let z = (1 / count db) * 0; if z == 0 then return 1 else return 0 }"),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(FLOAT_LEAKS))
def test_float_semantics_differ_from_the_checkers_reals(name, tables):
    """First review round, finding 2: the checker reasons in exact reals, the runtime (then) in
    IEEE floats.  `x * 0` is public for the checker (d_scale(0, .) drops every dependence, even
    infinite ones), but in float64 inf * 0 and nan * 0 are NaN, and infinities come from a
    division by a private zero or from plain overflow of a finite-sensitivity value."""
    r = check(FLOAT_LEAKS[name])
    if r.ok:
        assert r.epsilon == INF or same_release(run(r, tables("")), run(r, tables(ROW_A)))
    else:
        assert codes(r)


def test_zero_times_a_finite_value_is_public_and_really_zero(tables):
    """First review round: the part of finding 2 that is right: 0 * (a finite private value) is 0
    at run time too."""
    r = check("function main (db : bag T) : fuzzy num { return (count db * 0) }")
    assert r.ok and r.epsilon == 0
    assert run(r, tables("")) == run(r, tables(ROW_A)) == 0


FLOAT_RUNTIME_LEAKS = {
    "cancellation-against-a-huge-constant": (
        'laplace 1 (((count (filter (fun r -> r.k == "b") db) + 536870912) + 4835703278458516698824704)'
        ' - 4835703278458516698824704)'),  # 2^29, 2^82
    "folded-constants-beyond-the-float-range": (
        'laplace 1 ((count (filter (fun r -> r.k == "b") db) * (1e-200 * 1e-120)) * (1e200 * 1e120))'),
}


@pytest.mark.parametrize("name", sorted(FLOAT_RUNTIME_LEAKS))
def test_float_arithmetic_breaks_the_proven_sensitivity(name, tables):
    """Second review round (the runtime), finding R1 (critical): the checker proves sensitivities
    over the exact reals (constants are Fractions, `c + K - K` moves exactly as c does), but the
    interpreter evaluated the same arithmetic in float64 (runtime_const turned every constant into
    a float, arith.py used operator.add / numpy).

    Rounding against a huge constant turns a 1-sensitive count into a step function with jumps of
    ulp(K) = 2^30, and constants folded beyond the float range become inf / subnormal, so 0 rows
    give 0 and 1 row gives the largest float.  The mechanism then adds noise of scale 1 to a value
    that moved by 2^30 or 1.8e308: one release shows whether the row is present, with a secure
    source and a real ledger charge of 1.  The same held for the scores of exponential / noisy_max
    and the queries of above_threshold.  Suggested fix (made: rule Exact): evaluate everything
    outside row functions (aggregates, released values, the values handed to mechanisms) in exact
    arithmetic: count is an int, `sum` computes the exact total, constants are Fractions, and
    + - * and division by constants stay exact; only row functions need floats."""
    r = check(f"function main (db : bag T) : fuzzy num {{ {FLOAT_RUNTIME_LEAKS[name]} }}")
    if not r.ok:  # refusing the program is a fix too
        assert codes(r)
        return
    (mech,) = r.mechanisms  # today: sensitivity 1, epsilon 1, noise scale 1
    without, with_row = run(r, tables(ROW_A), seed=5), run(r, tables(ROW_A + ROW_B), seed=5)
    assert abs(with_row - without) <= mech.sensitivity  # same seed, same noise: the input moved by <= S


NONFINITE = {
    "min-with-exp-1000": "laplace 1 (min (count db + HALF) (exp 1000) - TWO60)",
    "max-with-a-released-minus-inf": ("sample low = laplace 1 (0 - 1e300 * 1e300);\n"
                                      "  laplace 1 (max (count db + HALF) low - TWO60)"),
}


@pytest.mark.parametrize("name", sorted(NONFINITE))
def test_a_public_infinity_does_not_round_the_private_operand(name, tables):
    """Third review round, finding 2 (critical, runtime): one non-finite public operand turned the
    exact operands into floats.

    `fold_exact` (interpreter.py) returned _NOT_EXACT as soon as one argument was not a finite
    scalar, and `call_prim` then ran the float primitive on *all* arguments (`as_float`).  A public
    infinity is easy to make: `exp 1000` (exp is never folded, its run gives inf) or a Laplace
    release of a huge public constant (saturated to -inf).  `min`/`max` are 1-sensitive in the
    private argument, but `max (count db + 2^60 + 128) (-inf)` rounded count + 2^60 + 128 to a
    float: 2^60 for 0 rows, 2^60 + 256 for 1 row.  laplace is calibrated for S = 1 and the value
    moved by 256: epsilon 1 claimed, 256 true (and 2^(e-52) for a constant near 2^e: unbounded).
    Suggested fix: in fold_exact, keep non-finite values as extended reals instead of leaving the
    exact world: max(x, -inf) = x, min(x, +inf) = x, x +- inf = +-inf (x unused), ... (or saturate
    +-inf / NaN to exact Fractions like noise._exact_value does); never convert an exact argument
    with as_float outside row functions."""
    body = NONFINITE[name].replace("HALF", str(HALF)).replace("TWO60", str(TWO60))
    r = check(f"function main (db : bag T) : fuzzy num {{\n  {body} }}")
    assert r.ok and r.epsilon == 1
    s = max(m.sensitivity for m in r.mechanisms)
    assert s == 1
    assert moved(r, tables(""), tables(ROW_A)) <= s


def test_a_public_clip_on_the_float_path_stays_inside_its_exact_bounds(tables):
    """Third review round, finding 2: a public infinity clipped stays inside the exact bounds."""
    r = check("function main (db : bag T) : fuzzy num { return (clip 0 0.1 (exp 1000)) }")
    assert r.ok and r.epsilon == 0
    assert F(run(r, tables(""))) <= F(1, 10)


def test_max_with_a_finite_public_operand_stays_exact(tables):
    """Third review round, finding 2, the control: a finite public operand keeps the arithmetic
    exact."""
    r = check(f"function main (db : bag T) : fuzzy num {{ laplace 1 (max (count db + {HALF}) 5 - {TWO60}) }}")
    assert r.ok and r.epsilon == 1 and [m.sensitivity for m in r.mechanisms] == [1]
    assert moved(r, tables(""), tables(ROW_A)) == 1


# Each program hides count db next to 2^82 (beyond float precision) and takes it back out through a
# closure, a tuple, a list pattern, a partition, `values`, a released float, a fraction, cswap:
# the release must move by exactly the proven sensitivity.
EXACT = {
    "closure": f"let f = fun (y : num) -> y + {K}; laplace 1 (f (count db) - {K})",
    "tuple": f"laplace 1 ((count db + {K}, 1).1 - {K})",
    "list-pattern": f"case [count db + {K}] of {{ [] => return 0 | h :: t => laplace 1 (h - {K}) }}",
    "part-of-pmap": (f'let ps = pmap (fun g -> count g + {K}) (groupby (fun r -> r.k) db); '
                     f'laplace 1 (part ps "b" - {K})'),
    "values-of-pmap": (f"case values (pmap (fun g -> count g + {K}) (groupby (fun r -> r.k) db)) of {{ [] => return 0 "
                       f"| h :: t => case t of {{ [] => return 0 | h2 :: t2 => laplace 1 (h2 - {K}) }} }}"),
    "released-float-times-huge": f"sample a = laplace 1 5; laplace 1 (count db + a * {K} - a * {K})",
    "thirds": "laplace 1 (count db * (1/3) * 3)",
    "sum-is-exact": f"laplace 1 (sum (map (fun r -> clip 0 8 r.x) db) + {K} - {K})",
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_arithmetic_survives_every_container(name, tables):
    """Third review round (exact scalar arithmetic at run time), handled: a count hidden next to
    2^82 in any kind of value comes back out exactly."""
    r = check(f"function main (db : bag T) : fuzzy num {{ {EXACT[name]} }}")
    assert r.ok and r.epsilon == 1
    (s,) = [m.sensitivity for m in r.mechanisms if m.epsilon]
    assert moved(r, tables(ROW_A * 3), tables(ROW_A * 3 + ROW_B)) == min(s, 8)


def test_cswap_keeps_exact_values(tables):
    """Third review round, handled: cswap moves exact values unrounded."""
    r = check(f"function main (db : bag T) : fuzzy (num, num) {{ let p = cswap (count db + {K}, {K} - 1); "
              f"laplace 1 (p.1 - {K}, p.2 - {K}) }}")
    assert r.ok and r.epsilon == 1 and [m.sensitivity for m in r.mechanisms] == [2]
    a, b = run(r, tables(ROW_A * 3), 2), run(r, tables(ROW_A * 3 + ROW_B), 2)
    assert (F(b[0]) - F(a[0]), F(b[1]) - F(a[1])) == (0, 1)


def test_public_nan_and_zero_division_are_the_same_on_every_table(tables):
    """Third review round, handled: a public NaN and a public division by zero are the same value
    on every table."""
    r1 = check("function main (db : bag T) : fuzzy num { let big = exp 1000; laplace 1 (count db * 0 + (big - big)) }")
    r2 = check("function main (db : bag T) : fuzzy num { let z = count db * 0; return (z / z) }")
    assert r1.ok and r1.epsilon == 0 and r2.ok and r2.epsilon == 0
    assert run(r1, tables("")) == run(r1, tables(ROW_A + ROW_B)) == 0.0
    assert run(r2, tables("")) == run(r2, tables(ROW_A + ROW_B)) == 0


def test_exact_arithmetic_keeps_a_count_moving_by_exactly_one(tables):
    """Sixth review round (exact scalars reach mechanisms), handled."""
    r = check(MAIN + "{ laplace 1 (count db / 3 * 3 * (1 / 10) * 10) }")
    assert r.ok and [m.sensitivity for m in r.mechanisms] == [1]
    a, b = run_result(r, tables(ROW_A * 7), 5).value, run_result(r, tables(ROW_A * 7 + ROW_B), 5).value
    assert F(b) - F(a) == 1


def test_zero_times_an_overflow_stays_zero_and_nan_never_reaches_a_release(tables):
    """Second review round (the runtime), handled: the fixed half of the float story: 0 * inf, NaN
    and inf saturate instead of leaking or failing."""
    r = check("function main (db : bag T) : fuzzy (num, num) {\n"
              "  sample a = laplace 1 (count db * 0 * (1e300 * 1e300));\n"
              "  sample b = laplace 1 (sum (map (fun r -> clip 0 1 ((r.x - r.x) / (r.x - r.x))) db));\n"
              "  return (a, b) }")
    assert r.ok and r.epsilon == 1
    a, b = run(r, tables(""), seed=2), run(r, tables(ROW_A + ROW_B), seed=2)
    assert a == b and all(v == v for v in a)


def test_the_exact_sum_moves_by_at_most_the_bound_on_adversarial_floats():
    """Second review round (the runtime), handled: Casacuberta et al.'s attack on float sums: here
    one row moves the sum by at most B, whatever the other rows (NaN, infinities, huge and tiny
    values, 2^18 + 5 rows: several chunks), and the order of the rows does not matter."""
    import numpy as np

    from fuzzpy.runtime.sums import bounded_sum as _bounded_sum

    bound = F(2**30)
    base = np.array([2.0**30] * 3 + [1.0] * (2**18 + 5) + [np.nan, np.inf, -np.inf, 5e-324, -2.0**30, 0.1])
    total = _bounded_sum(base, bound)
    assert total == _bounded_sum(base[::-1].copy(), bound)
    for y in (2.0**30, -2.0**30, 1e300, -np.inf, 0.5, np.nan, 2.0**-40):
        moved = F(_bounded_sum(np.append(base, y), bound)) - F(total)
        assert abs(moved) <= bound


# ---- exact numbers grow: products and quotients that may not finish ---------------------------------

ITERATE = "function it (x : num) (m : int) : num { if m <= 0 then x else it (x + 1 / x) (m - 1) }\n"
NEWTON = "function nt (x : num) (m : int) : num { if m <= 0 then x else nt ((x + 2 / x) / 2) (m - 1) }\n"


@pytest.mark.parametrize("src", [
    ITERATE + MAIN + "{ let z = it (count db) 40; laplace 1 (count db) }",
    NEWTON + MAIN + "{ let z = nt (count db) 40; laplace 1 (count db) }",
], ids=["x+1/x", "newton"])
def test_iterating_x_plus_one_over_x_on_a_count_is_a_risk(src):
    """Seventh review round (7a), finding 4 (high): rule Exact only looked at products and
    quotients of *two* private numbers; `x + 1 / x` doubles the digits of an exact rational at
    every step just as well.

    primitives/arith._exact_size_risk: `private = [x for x in (a, b) if x.dist and not x.is_const]`
    and a risk only when len(private) == 2.  `1 / x` has one private operand (no risk), and so has
    `x + ...` (addition never has one).  But p/q + q/p = (p^2 + q^2) / (pq): the iteration
    x -> x + 1/x squares the numerator and denominator at each step.  Starting from count db, a
    count of 0 stays 0 (x / 0 = 0) while a count of 1 gives 2, 5/2, 29/10, 941/290, ...: 2^m
    digits after m steps.  With m = 40 the run on the empty table ends at once and the run on one
    row never does (it needs ~2^40 digits; m = 24 already takes a minute).  Newton's iteration
    (x + c / x) / 2 with a constant c is the same shape.  Suggested fix (made): make the risk about
    the *size* of exact values, not the operator: any `*` / `/` whose operands are both
    non-constant, and any `/` by a non-constant, unless the result is a bounded integer (E0309)."""
    refused_report(src, "E0309")


def test_squaring_the_same_count_is_refused():
    """Seventh review round (7a), finding 4, the control: x * x is the case rule Exact was written
    for."""
    refused_report("function sq (x : num) (m : int) : num { if m <= 0 then x else sq (x * x) (m - 1) }\n"
                   + MAIN + "{ let z = sq (count db) 40; laplace 1 (count db) }", "E0309")


def _largest_exact_sum(report, db, monkeypatch) -> int:
    """Run `report` on `db`, recording the bit size of every exact number `+` produces."""
    prim = lookup("add")
    fold, seen = prim.fold, [0]

    def recording(x, y):
        out = fold(x, y)
        if isinstance(out, F):
            seen[0] = max(seen[0], out.numerator.bit_length(), out.denominator.bit_length())
        return out

    monkeypatch.setattr(prim, "fold", recording)
    run_identity(report.entry_instance, {"db": db})
    return seen[0]


def test_evidence_x_plus_one_over_x_grows_with_the_data_only(tables, monkeypatch):
    """Seventh review round (7a), finding 4, the evidence: with m = 14 (fast), the exact numbers
    built are 0 bits on the empty table and thousands of bits with one row: the size (time,
    memory) of the run doubles per step on one table only."""
    r = check(ITERATE + MAIN + "{ let z = it (count db) 14; laplace 1 (count db) }")
    empty = _largest_exact_sum(r, tables(""), monkeypatch)
    one = _largest_exact_sum(r, tables(ROW_A), monkeypatch)
    assert empty <= 1 and one > 2 ** 12


@pytest.mark.parametrize("body", [
    "let z = count db / (count db + 1); laplace 1 (count db)",
    "let z = (count db + 1) * (count db + 2); laplace 1 (count db)",
    "let z = (1 / (count db + 1)) * (1 / (count db + 2)); laplace 1 (count db)",
])
def test_exact_products_and_quotients_of_two_private_numbers_are_refused(body):
    """Seventh review round (7a), handled."""
    refused_report(MAIN + "{ " + body + " }", "E0309")


def test_false_rejection_a_single_product_of_two_bounded_private_numbers():
    """Seventh review round (7a), a false rejection pinned as it is today: rule Exact refuses a
    product of two private non-integers, even one product of bounded values (two rates), whose
    size cannot grow: only *repeated* products can.  A size budget (digits of the operands) would
    accept it.  A rate times a bounded integer is accepted: the integer adds a bounded number of
    digits."""
    exactly = check(MAIN + "{ let w = clip 0 1 (count db / 100); laplace 1 (w * clip 0 10 (count db)) }")
    assert exactly.ok and exactly.epsilon == 1
    refused_report(MAIN + "{ let w = clip 0 1 (count db / 100); laplace 1 (w * clip 0 1 (count db / 50)) }", "E0309")

