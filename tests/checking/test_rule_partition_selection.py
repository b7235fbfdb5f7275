"""Rule Partition selection (docs/soundness.md): select_keys costs its epsilon in the pure part and
its delta in channel D, which only moves to one symbol moving by at most 1; the accountant states
(eps + Delta/(1 - Delta), delta) at a delta above Delta; pure and rho budgets and caps refuse it."""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest

from fuzzpy.accounting import EpsilonCap, ProvenLoss, RhoCap, epsilon_at_delta, fits, rho_of
from fuzzpy.pipeline.budget import apply_budget
from fuzzpy.primitives.units import selection_threshold
from tests.conftest import check

U = ('schema F unit plane { plane : string, dest : string, n : int[0, 5] }\n'
     'schema R { dest : string, n : int[0, 5] }\n')
SELECT = "select_keys 1 0.000001 1 (fun r -> r.dest)"


def ok(src: str):
    r = check(U + src)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    return r


def refused(src: str, code: str, words: str = ""):
    r = check(U + src)
    found = [(d.code, d.message) for d in r.diagnostics]
    assert not r.ok and code in [c for c, _ in found], found
    assert any(words in m for c, m in found if c == code), found
    return r


def test_select_keys_costs_its_epsilon_and_its_delta():
    r = ok(f"function main (t : bag F) {{ {SELECT} t }}")
    assert r.epsilon == 1 and r.approx_delta == F(1, 10**6) and not r.is_pure
    assert r.inputs[0].delta == F(1, 10**6) and r.rho == math.inf
    m = r.mechanisms[0]
    assert m.name == "select_keys" and m.scale == 1 and m.extra["threshold"] == selection_threshold(F(1), F(1, 10**6), 1, F(1))


def test_two_selections_add_their_epsilons_and_deltas():
    r = ok(f"function main (t : bag F) {{ sample a = {SELECT} t; sample b = {SELECT} (filter (fun r -> r.n > 1) t); "
           "return (a, b) }")
    assert r.epsilon == 2 and r.approx_delta == F(2, 10**6)


def test_a_branch_takes_the_larger_delta():
    r = ok("function main (t : bag F) { sample c = laplace 1 (count (bound_rows 1 t)); "
           "if c > 3 then select_keys 1 0.000001 1 (fun r -> r.dest) t "
           "else select_keys 1 0.00001 1 (fun r -> r.dest) t }")
    assert r.approx_delta == F(1, 10**5) and r.epsilon == 2


def test_selections_on_the_parts_of_a_row_table_compose_in_parallel():
    r = ok("function main (t : bag R) { each (fun g -> select_keys 1 0.000001 1 (fun r -> r.dest) g) "
           "(groupby (fun r -> r.n) t) }")
    assert r.epsilon == 1 and r.approx_delta == F(1, 10**6)


@pytest.mark.parametrize("arg, s", [("(union t t)", 4), ("(bound_rows 2 t)", 2)])
def test_a_selection_is_calibrated_to_how_far_its_input_moves(arg, s):
    # union a b costs 2 per side (rule Units: a block added to one side may change the union's
    # block of that unit), so union t t moves by 4 units when t moves by 1; bound_rows 2 t by 2
    # rows (the units of a row table): noise and threshold for S, and the delta holds for a move
    # of t by 1
    r = ok(f"function main (t : bag F) {{ {SELECT} {arg} }}")
    m = r.mechanisms[0]
    assert m.sensitivity == s and m.scale == s and r.epsilon == 1 and r.approx_delta == F(1, 10**6)
    assert m.extra["threshold"] == selection_threshold(F(1), F(1, 10**6), 1, F(s))


def test_a_selection_whose_input_moves_by_more_than_its_calibration_is_refused():
    # in a helper the input moves by 1 per unit of its parameter; given union t t it moves by 2
    helper = "function sel (b) { select_keys 1 0.000001 1 (fun r -> r.dest) b }\n"
    refused(helper + "function main (t : bag F) { sel (union t t) }", "E0332", "more than one unit")
    # two tables that may move together
    refused("function main (a : bag F) (b : bag F) { select_keys 1 0.000001 1 (fun r -> r.dest) (union a b) }",
            "E0332")
    assert ok(helper + "function main (t : bag F) { sel (filter (fun r -> r.n > 1) t) }").approx_delta == F(1, 10**6)


def test_a_selection_on_bounded_groups_is_refused():
    refused("function main (t : bag F) { each (fun g -> select_keys 1 0.000001 1 (fun r -> r.dest) g) "
            "(bound_groups 2 1 (fun r -> r.n) t) }", "E0332")


def test_a_declared_function_may_not_select_keys_on_its_argument():
    refused("function main (t : bag F) { let f = ((fun b -> select_keys 1 0.000001 1 (fun r -> r.dest) b) "
            ": bag F -o fuzzy (list string)); f t }", "E0332", "declared type")
    refused("function main (t : bag R) { let f = ((fun b -> select_keys 1 0.000001 1 (fun r -> r.dest) b) "
            ": bag R -o fuzzy (list string)); f t }", "E0332", "declared type")


def test_a_recursion_that_selects_keys_on_its_parameter_is_refused():
    r = check(U + "function loop (i : num) (t : bag R) : fuzzy (list string) { "
              "if i < 1 then select_keys 1 0.000001 1 (fun r -> r.dest) t else "
              "sample x = laplace 1 0; if x > 0 then loop (i - 1) t else loop (i - 2) t }\n"
              "function main (t : bag R) { sample c = laplace 1 0; loop c t }")
    assert not r.ok and [d.code for d in r.diagnostics][0] == "E0304"


@pytest.mark.parametrize("eps, delta, delta_word", [("0", "0.1", "epsilon"), ("1", "0", "delta"), ("1", "1", "delta")])
def test_epsilon_and_delta_must_be_in_range(eps, delta, delta_word):
    refused(f"function main (t : bag F) {{ select_keys {eps} {delta} 1 (fun r -> r.dest) t }}", "E0213", delta_word)


def test_the_key_must_be_a_string_an_int_or_a_category():
    refused("schema X unit p { p : string, v : num }\nfunction main (t : bag X) "
            "{ select_keys 1 0.1 1 (fun r -> r.v) t }", "E0307")


def test_a_key_that_reads_private_data_is_refused():
    refused("function main (t : bag R) { select_keys 1 0.1 1 (fun r -> if count t > 3 then r.dest else \"x\") t }",
            "E0305")


# ---- thresholds ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("eps, delta, m", [(F(1), F(1, 10**6), 1), (F(1, 2), F(1, 10**9), 3), (F(2), F(1, 10), 10)])
def test_the_threshold_is_the_smallest_that_keeps_new_keys_within_delta(eps, delta, m):
    t = selection_threshold(eps, delta, m, F(1))
    q = math.exp(-float(eps) / m)
    assert m * q ** (t - 1) / (1 + q) <= float(delta) * (1 + 1e-9)
    assert t == 1 or m * q ** (t - 2) / (1 + q) > float(delta) * (1 - 1e-9)


# ---- the accountant --------------------------------------------------------------------------------------

def test_the_accountant_adds_delta_over_one_minus_delta_and_spends_the_rest_of_delta():
    loss = ProvenLoss(F(1), F(1, 2), delta=F(1, 10**6))
    conv = epsilon_at_delta(loss, F(1, 10**5))
    assert conv.epsilon >= 1 + F(1, 10**6) and conv.epsilon <= 1 + F(2, 10**6)
    assert "partition selection" in conv.method
    assert epsilon_at_delta(loss, F(1, 10**6)).epsilon == math.inf
    assert rho_of(loss) == math.inf and not loss.is_pure()


def test_caps_in_pure_epsilon_or_rho_never_admit_a_selection_and_epsilon_at_delta_caps_do():
    loss = ProvenLoss(F(1), F(1, 2), delta=F(1, 10**6))
    assert not fits([loss], EpsilonCap(F(100)))
    assert not fits([loss], RhoCap(F(100)))
    assert fits([loss], EpsilonCap(F(2), F(1, 10**5)))
    assert not fits([loss] * 10, EpsilonCap(F(100), F(1, 10**5)))  # ten runs spend the whole delta


def test_the_ledger_record_keeps_the_delta_and_old_records_read_as_before():
    loss = ProvenLoss(F(1), F(1, 2), delta=F(1, 10**6))
    assert ProvenLoss.from_dict(loss.to_dict()) == loss
    plain = ProvenLoss(F(1), F(1, 2))
    assert "delta" not in plain.to_dict() and ProvenLoss.from_dict(plain.to_dict()) == plain


def test_a_pure_budget_refuses_and_a_delta_above_the_selections_states_it():
    r = ok(f"function main (t : bag F) {{ {SELECT} t }}")
    apply_budget(r, F(5))
    assert [d.code for d in r.diagnostics] == ["E0314"] and "partition selection" in r.diagnostics[0].message
    r = ok(f"function main (t : bag F) {{ {SELECT} t }}")
    apply_budget(r, F(5), F(1, 10**5))
    assert r.ok and r.guarantee.epsilon <= F(11, 10) and r.guarantee.delta == F(1, 10**5)
    r = ok(f"function main (t : bag F) {{ {SELECT} t }}")
    apply_budget(r, F(5), F(1, 10**6))
    assert [d.code for d in r.diagnostics] == ["E0401"]
    r = ok(f"function main (t : bag F) {{ {SELECT} t }}")
    apply_budget(r, None, None, F(100))
    assert [d.code for d in r.diagnostics] == ["E0401"] and "rho" in r.diagnostics[0].message
