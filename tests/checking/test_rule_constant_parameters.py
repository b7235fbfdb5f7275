"""Rule Constant parameters (docs/soundness.md): a function whose body releases on a Poisson
sample, with the rate and the rho (or epsilon) as its own parameters, is checked exactly when it
is called with constants (literals, params or arithmetic of them): the recursion that counts its
steps counts the amplified releases in the channel of those constants.  A rate that is not
constant where the function is called is refused, naming the parameter."""

from __future__ import annotations

from fractions import Fraction as F

from fuzzpy.pipeline.guarantee import proven_loss
from tests.conftest import check

S = "schema T { age : num[17, 90] }\nparam q0 : num = 0.02;\nparam rho0 : num = 0.5;\n"
# steps q rho k db acc: k releases, each of rho on a fresh sample of rate q
STEPS = ("function steps (q : num) (rho : num) (k : int) (db : bag T) (acc : num) : fuzzy num {\n"
         "  if k <= 0 then return acc else\n"
         "  sample c = subsample q (fun s -> gaussian rho (count s)) db;\n"
         "  steps q rho (k - 1) db (acc + c) }\n")


def ok(src: str):
    r = check(S + src)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    return r


def sampled(src: str):
    return ok(src).inputs[0].subsampled


def test_literal_arguments_count_the_steps_in_the_channel_of_those_constants():
    got = sampled(STEPS + "function main (db : bag T) : fuzzy num { steps 0.02 0.5 5 db 0 }")
    assert got == (("gauss", F(1, 50), F(1, 2), 5),)


def test_params_and_arithmetic_at_the_call_give_the_same_channel_as_literals():
    by_params = sampled(STEPS + "function main (db : bag T) : fuzzy num { steps q0 rho0 5 db 0 }")
    by_arith = sampled(STEPS + "function main (db : bag T) : fuzzy num { steps (q0 / 2 * 2) (rho0 * 4 - 1.5) 5 db 0 }")
    assert by_params == by_arith == (("gauss", F(1, 50), F(1, 2), 5),)


def test_the_library_form_costs_exactly_what_the_hand_written_form_costs():
    by_hand = ok("function hand (k : int) (db : bag T) (acc : num) : fuzzy num {\n"
                 "  if k <= 0 then return acc else\n"
                 "  sample c = subsample q0 (fun s -> gaussian rho0 (count s)) db;\n"
                 "  hand (k - 1) db (acc + c) }\n"
                 "function main (db : bag T) : fuzzy num { hand 7 db 0 }")
    by_library = ok(STEPS + "function main (db : bag T) : fuzzy num { steps 0.02 0.5 7 db 0 }")
    assert proven_loss(by_library) == proven_loss(by_hand)
    assert by_library.inputs[0].subsampled == (("gauss", F(1, 50), F(1, 2), 7),)


def test_different_constants_at_two_call_sites_give_two_channels():
    got = sampled(STEPS + "function main (db : bag T) : fuzzy num { sample a = steps 0.02 0.5 3 db 0; "
                  "sample b = steps 0.1 0.25 4 db 0; return a + b }")
    assert sorted(got) == [("gauss", F(1, 50), F(1, 2), 3), ("gauss", F(1, 10), F(1, 4), 4)]


def test_the_same_constants_at_two_call_sites_add_their_counts():
    got = sampled(STEPS + "function main (db : bag T) : fuzzy num { sample a = steps 0.02 0.5 3 db 0; "
                  "sample b = steps 0.02 0.5 4 db 0; return a + b }")
    assert got == (("gauss", F(1, 50), F(1, 2), 7),)


def test_a_rate_that_is_not_constant_at_the_call_is_refused_naming_the_parameter():
    r = check(S + STEPS + "function main (db : bag T) : fuzzy num { sample n = laplace 1 (count db); "
              "steps (clip 0.01 0.5 (10 / n)) 0.5 3 db 0 }")
    found = [(d.code, d.message) for d in r.diagnostics]
    assert any(c == "E0209" and "public constant" in m and "q is not" in m for c, m in found), found


def test_a_partial_application_bound_to_a_name_keeps_its_constants():
    got = sampled(STEPS + "function main (db : bag T) : fuzzy num { let f = steps 0.02 0.5; f 6 db 0 }")
    assert got == (("gauss", F(1, 50), F(1, 2), 6),)


def test_a_partial_application_passed_to_another_function_keeps_its_constants():
    got = sampled(STEPS + "function twice f (db : bag T) : fuzzy num {\n"
                  "  sample a = f 2 db 0; f 3 db a }\n"
                  "function main (db : bag T) : fuzzy num { twice (steps 0.02 0.5) db }")
    assert got == (("gauss", F(1, 50), F(1, 2), 5),)


def test_the_call_inside_a_recursion_multiplies_the_counts():
    got = sampled(STEPS + "function outer (j : int) (db : bag T) (acc : num) : fuzzy num {\n"
                  "  if j <= 0 then return acc else\n"
                  "  sample c = steps 0.02 0.5 3 db acc; outer (j - 1) db c }\n"
                  "function main (db : bag T) : fuzzy num { outer 4 db 0 }")
    assert got == (("gauss", F(1, 50), F(1, 2), 12),)


def test_a_release_on_a_sample_in_a_helper_the_recursion_calls_is_counted():
    got = sampled("function step (q : num) (rho : num) (db : bag T) : fuzzy num {\n"
                  "  subsample q (fun s -> gaussian rho (count s)) db }\n"
                  "function walk (r : num) (k : int) (db : bag T) (acc : num) : fuzzy num {\n"
                  "  if k <= 0 then return acc else\n"
                  "  sample c = step (r / 10) r db; walk r (k - 1) db (acc + c) }\n"
                  "function main (db : bag T) : fuzzy num { walk 0.5 6 db 0 }")
    assert got == (("gauss", F(1, 20), F(1, 2), 6),)


def test_laplace_epsilon_as_a_parameter_is_counted_on_the_sample():
    got = sampled("function lsteps (q : num) (eps : num) (k : int) (db : bag T) (acc : num) : fuzzy num {\n"
                  "  if k <= 0 then return acc else\n"
                  "  sample c = subsample q (fun s -> laplace eps (count s)) db;\n"
                  "  lsteps q eps (k - 1) db (acc + c) }\n"
                  "function main (db : bag T) : fuzzy num { lsteps 0.05 1 4 db 0 }")
    assert got == (("laplace", F(1, 20), F(1), 4),)


def test_a_rate_that_changes_at_each_level_counts_each_rate_once():
    got = sampled("function halving (q : num) (k : int) (db : bag T) (acc : num) : fuzzy num {\n"
                  "  if k <= 0 then return acc else\n"
                  "  sample c = subsample q (fun s -> gaussian 0.5 (count s)) db;\n"
                  "  halving (q / 2) (k - 1) db (acc + c) }\n"
                  "function main (db : bag T) : fuzzy num { halving 0.4 3 db 0 }")
    assert sorted(got) == [("gauss", F(q), F(1, 2), 1) for q in (F(1, 10), F(1, 5), F(2, 5))]


def test_a_rate_shadowed_by_a_local_value_is_not_mistaken_for_the_parameter():
    # the scan guesses q's channel from the parameter; the body's check finds the local rate's
    # release and, with no unknown for it, folds it into the mark: not amplified, never undercounted
    r = ok("function shadowed (q : num) (k : int) (db : bag T) (acc : num) : fuzzy num {\n"
           "  if k <= 0 then return acc else\n"
           "  let q = 0.3;\n"
           "  sample c = subsample q (fun s -> gaussian 0.5 (count s)) db;\n"
           "  shadowed 0.1 (k - 1) db (acc + c) }\n"
           "function main (db : bag T) : fuzzy num { shadowed 0.1 4 db 0 }")
    inp = r.inputs[0]
    assert inp.rho_gauss == 2 and inp.subsampled is None  # 4 plain releases of rho 0.5
