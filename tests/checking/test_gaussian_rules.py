"""Rules Gauss and Rho (docs/soundness.md): Gaussian releases cost rho in zCDP, quadratic in the
distance their input moves.  Programs that must be refused (code and message checked) next to
programs that must pass with an exact rho; every group tries to make the checker under-charge."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import check, codes, refused

MAIN = "function main (db : bag T) : fuzzy num "


def costs(src: str, **kw) -> tuple:
    """(pure epsilon, Gaussian rho, zCDP rho of the pure releases) of the only input."""
    r = check(src, **kw)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    (inp,) = r.inputs
    return inp.epsilon, inp.rho_gauss, inp.rho_pure


# ---- rule Gauss: one release -------------------------------------------------------------------

def test_one_release_costs_its_rho_and_no_pure_epsilon():
    r = check(MAIN + "{ gaussian 0.5 (count db) }")
    assert r.ok and not r.is_pure
    assert costs(MAIN + "{ gaussian 0.5 (count db) }") == (0, F(1, 2), 0)
    (m,) = r.mechanisms
    assert (m.name, m.sensitivity, m.extra["rho"], m.extra["sigma2"]) == ("gaussian", 1, F(1, 2), 1)


def test_noise_is_calibrated_to_the_proven_sensitivity():
    # S = 2 (the table is used twice): sigma^2 = S^2 / (2 rho) = 4, and the cost stays rho.
    r = check(MAIN + "{ gaussian 0.5 (count db + count db) }")
    assert costs(MAIN + "{ gaussian 0.5 (count db + count db) }") == (0, F(1, 2), 0)
    assert r.mechanisms[0].extra["sigma2"] == 4


def test_a_clipped_sum_has_the_clip_width_as_sensitivity():
    r = check(MAIN + "{ gaussian 1 (sum (map (fun r -> r.x) db)) }")
    assert r.ok and r.mechanisms[0].sensitivity == 10 and r.inputs[0].rho_gauss == 1


@pytest.mark.parametrize("rho", ["count db", "count db / 100"])
def test_rho_from_private_data_is_refused(rho):
    refused(MAIN + f"{{ gaussian ({rho}) (count db) }}", "E0209", "rho must be a public constant")


@pytest.mark.parametrize("rho", ["0", "0 - 1"])
def test_rho_must_be_positive(rho):
    refused(MAIN + f"{{ gaussian ({rho}) (count db) }}", "E0213", "rho must be positive")


def test_a_with_pair_does_not_bound_the_l2_norm():
    # (| a, b |) moves by the max of its components' moves: its L2 move can be sqrt(2) times that.
    refused(MAIN + "{ sample v = gaussian 1 (| count db, count db |); return 0 }", "E0202", "gaussian expects")


def test_a_tensor_is_calibrated_to_its_l1_move_which_bounds_l2():
    r = check(MAIN + "{ sample v = gaussian 1 (count db, count db); return 0 }")
    assert r.ok and r.mechanisms[0].sensitivity == 2 and r.inputs[0].rho_gauss == 1


def test_an_unboundedly_sensitive_input_is_refused():
    refused(MAIN + "{ gaussian 1 (if count db > 3 then 1 else 0) }", "E0305", "unbounded sensitivity")


# ---- rule Rho: group privacy is quadratic -------------------------------------------------------

GAUSS_OF_T = "function g (t : bag T) : fuzzy num { gaussian 0.5 (count t) }\n"


def test_a_helper_applied_to_a_table_at_distance_two_costs_four_times_rho():
    # The helper's noise is calibrated to distance 1; its input moves by 2: (2)^2 * rho.
    assert costs(GAUSS_OF_T + MAIN + "{ g (union db db) }") == (0, 2, 0)


def test_a_closure_applied_to_a_table_at_distance_two_costs_four_times_rho():
    src = MAIN + "{ let f = fun t -> gaussian 0.5 (count t); sample a = f db; sample b = f (union db db); return a + b }"
    assert costs(src) == (0, F(5, 2), 0)


def test_two_parameters_given_the_same_table_move_together():
    # count t + count u moves by 2 when both are db; the noise is calibrated to 1 (its sensitivity
    # in each parameter alone), so the true cost is 2^2 * rho = 2, not rho + rho.
    src = "function g (t : bag T) (u : bag T) : fuzzy num { gaussian 0.5 (count t + count u) }\n" + MAIN + "{ g db db }"
    assert costs(src) == (0, 2, 0)


def test_two_parameters_given_different_tables_are_over_charged_by_the_cauchy_schwarz_bound():
    # Per input the truth is rho = 1/2; the bound (sum_u a_u) * sum_u a_u d_u^2 charges 2 * 1/2 each.
    src = ("function g (t : bag T) (u : bag T) : fuzzy num { gaussian 0.5 (count t + count u) }\n"
           "function main (a : bag T) (b : bag T) : fuzzy num { g a b }")
    r = check(src)
    assert r.ok and [i.rho_gauss for i in r.inputs] == [1, 1]


def test_a_returned_closure_is_checked_in_the_callers_symbols():
    src = ("function mk (t : bag T) { fun (r : num) -> gaussian r (count t) }\n"
           + MAIN + "{ let f = mk (union db db); f 0.5 }")
    r = check(src)
    # Re-checked where it is applied, the release's input moves by 2 and the noise is calibrated to 2.
    assert r.ok and r.inputs[0].rho_gauss == F(1, 2) and r.mechanisms[-1].sensitivity == 2


def test_a_scaled_argument_scales_rho_by_the_square():
    src = ("function g (x : num) : fuzzy num { gaussian 0.5 x }\n"
           + MAIN + "{ g (3 * count db) }")
    assert costs(src) == (0, F(9, 2), 0)


def test_a_declared_function_type_cannot_state_a_gaussian_cost():
    src = ("function app (f : bag T -o fuzzy num) (t : bag T) : fuzzy num { f t }\n"
           + MAIN + "{ app (fun t -> gaussian 0.5 (count t)) db }")
    refused(src, "E0313", "cannot make Gaussian releases on its arguments")


def test_a_row_function_cannot_make_gaussian_releases_on_its_row():
    refused(MAIN + "{ sample xs = gaussian 1 (count (map (fun r -> gaussian 1 r.x) db)); return xs }", "E0313",
            "cannot account for")


# ---- composition --------------------------------------------------------------------------------

def test_sequential_releases_add_rho_and_mixed_ones_keep_both_notions():
    src = MAIN + "{ sample a = gaussian 0.25 (count db); sample b = laplace 0.5 (count db); return a + b }"
    # The Laplace release is 0.5-DP, hence 0.5^2/2 = 1/8-zCDP.
    assert costs(src) == (F(1, 2), F(1, 4), F(1, 8))


def test_pure_releases_alone_are_pure_with_their_zcdp_alongside():
    r = check(MAIN + "{ sample a = laplace 0.5 (count db); sample b = laplace 0.5 (count db); return a + b }")
    assert r.ok and r.is_pure and r.epsilon == 1 and r.inputs[0].rho_pure == F(1, 4)


def test_releases_on_the_parts_of_a_partition_compose_in_parallel():
    src = "function main (db : bag T) { each (fun p -> gaussian 0.5 (count p)) (groupby (fun r -> r.k) db) }"
    assert costs(src) == (0, F(1, 2), 0)


def test_parts_of_a_table_at_distance_two_cost_four_times():
    src = ("function main (db : bag T) { each (fun p -> sample a = gaussian 0.5 (count p); "
           "sample b = laplace 0.5 (count p); return a + b) (groupby (fun r -> r.k) (union db db)) }")
    assert costs(src) == (1, 2, F(1, 2))


def test_a_branch_on_a_released_value_costs_the_more_expensive_arm():
    src = MAIN + ("{ sample c = laplace 1 (count db); if c > 10 then gaussian 0.5 (count db) "
                  "else gaussian 0.25 (count db) }")
    assert costs(src) == (1, F(1, 2), F(1, 2))


def test_a_branch_on_private_data_around_a_release_is_unbounded():
    refused(MAIN + "{ if count db > 10 then gaussian 0.5 (count db) else return 0 }", "E0302", "unbounded")


LOOP = ("function loop (t : bag T) (i : int) : fuzzy num {\n"
        "  if i <= 0 then return 0 else\n"
        "    sample c = gaussian 0.01 (count t);\n"
        "    sample r = loop t (i - 1);\n"
        "    return c + r\n}\n")


@pytest.mark.parametrize("n, rho", [(1, F(1, 100)), (100, 1), (10_000, 100)])
def test_releases_in_a_counted_loop_compose_with_the_exact_count(n, rho):
    assert costs(LOOP + MAIN + f"{{ loop db {n} }}") == (0, rho, 0)


def test_a_counted_loop_over_a_table_at_distance_two_costs_four_times():
    assert costs(LOOP + MAIN + "{ loop (union db db) 100 }") == (0, 4, 0)


def test_a_recursion_over_a_public_list_of_unknown_length_is_unbounded():
    src = ("function go (t : bag T) (xs : list num) : fuzzy num {\n"
           "  case xs of { [] => return 0 | h :: rest => sample c = gaussian 0.1 (count t); go t rest }\n}\n"
           + MAIN + "{ sample n = laplace 1 (count db); go db (if n > 3 then [1, 2] else [1]) }")
    r = check(src)
    # The list is released (public), but its length is not a constant: the recursion could run
    # any number of times, each costing rho.
    assert not r.ok and "E0302" in codes(r)


def test_a_recursion_over_a_constant_list_is_unrolled_exactly():
    src = ("function go (t : bag T) (xs : list num) : fuzzy num {\n"
           "  case xs of { [] => return 0 | h :: rest => sample c = gaussian 0.1 (count t); go t rest }\n}\n"
           + MAIN + "{ go db [1, 2, 3] }")
    rho = costs(src)[1]
    assert rho == F(3, 10)


def test_a_recursion_that_squares_its_argument_makes_no_release_and_costs_nothing():
    # Shadow unknowns exist only where a release may happen (rule Rho): an unknown times the
    # infinite distance of x * x would otherwise charge this release-free helper infinitely.
    src = ("function pow2 (x : num) (m : int) : num { if m <= 0 then x else pow2 (x * x) (m - 1) }\n"
           + MAIN + "{ gaussian 0.5 (sum (map (fun r -> clip 0 1 (pow2 r.x 5)) db)) }")
    assert costs(src) == (0, F(1, 2), 0)


# ---- functions of a declared type: their pure releases in zCDP ------------------------------------

def test_a_declared_function_type_bounds_the_zcdp_of_its_pure_releases():
    # A function of type bag T -o[2] fuzzy num is 2d-DP on a move d, hence (2d)^2/2-zCDP: 2 per unit.
    src = ("function app (f : bag T -o[2] fuzzy num) (t : bag T) : fuzzy num { f t }\n"
           + MAIN + "{ app (fun t -> sample a = laplace 1 (count t); sample b = laplace 1 (count t); "
                    "return a + b) db }")
    assert costs(src) == (2, 0, 2)


def test_a_curried_declared_type_charges_its_arguments_together():
    # (s1 d1 + s2 d2)^2 / 2 with s1 = s2 = 1 and both arguments the same table: 2, not 1/2 + 1/2.
    src = ("function app (f : bag T -o bag T -o fuzzy num) (t : bag T) : fuzzy num { f t t }\n"
           + MAIN + "{ app (fun a b -> laplace 1 (count a + count b)) db }")
    assert costs(src) == (2, 0, 2)


# ---- until (epsilon, delta) budgets exist, a pure budget refuses Gaussian releases -----------------

def test_a_pure_budget_refuses_a_gaussian_release_and_says_why():
    from fuzzpy.pipeline.budget import apply_budget

    r = check(MAIN + "{ gaussian 0.01 (count db) }")
    apply_budget(r, F(10))
    (d,) = [d for d in r.diagnostics if d.code == "E0314"]
    assert "not pure epsilon-DP" in d.message and any("rho = 0.01" in n for n in d.notes)


# ---- found by the soundness oracle: shadow entries in risks and captured symbols -------------------

def test_a_function_argument_capturing_a_release_cost_is_a_candidate_by_its_symbol():
    # The closures given to rep1 capture db with shadow entries; a recursion's candidates, and a
    # risk after eliminating split parts, are keyed by db itself.  This failed closed (E0901).
    src = ("function rep1 (f : num -> num) (n : num) : num { if n <= 0 then 1 else rep1 f (n - 1) + f 1 }\n"
           "function main (db : bag T) {\n"
           "  sample k5 = laplace 1 300;\n"
           "  let v2 = ((sum (map (fun r -> 2 * r.n) db)), (((fun y3 -> count db + 2) 3) * "
           "(rep1 (fun y4 -> count db) k5)));\n"
           "  let b6 = slice 1 2 (sort_by (fun r -> r.n) db);\n"
           "  sample s7 = laplace 2 (rep1 (fun y8 -> let (p9, q10) = (y8, 1); sum (map (fun r -> r.n) b6)) 0);\n"
           "  return 3\n}")
    r = check(src)
    assert "E0901" not in codes(r) and "E0309" in codes(r)
    helper = ("function twice (f : num -> fuzzy num) (n : int) : fuzzy num {\n"
              "  if n <= 0 then return 0 else sample a = f 1; sample b = twice f (n - 1); return a + b }\n")
    ok = check(helper + MAIN + "{ twice (fun x -> gaussian 0.5 (count db)) 4 }")
    assert ok.ok and ok.inputs[0].rho_gauss == 2
