"""Rule Vector (docs/soundness.md): vec[n] carries the L2 metric.  Programs that must be refused
(code and message checked), programs that must pass with exact sensitivities and rho, and the
L1/L2 confusion that must not be writable in either direction."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import check, refused

from fuzzpy.primitives.vectors import sqrt_upper

VMAIN = "function main (db : bag T) : fuzzy vec[2] "
ROWVEC = "vsum 3 (fun r -> vec (r.x, r.n)) db"


def gauss(src: str) -> tuple:
    """(rho of the input, [(sensitivity, sigma^2) of every Gaussian release])."""
    r = check(src)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    (inp,) = r.inputs
    return inp.rho_gauss, [(m.sensitivity, m.extra["sigma2"]) for m in r.mechanisms if m.name == "gaussian"]


# ---- calibration to the L2 norm ----------------------------------------------------------------

def test_a_clipped_vector_sum_has_the_clip_norm_as_l2_sensitivity():
    assert gauss(VMAIN + f"{{ gaussian 0.5 ({ROWVEC}) }}") == (F(1, 2), [(3, 9)])


def test_a_tuple_made_a_vector_keeps_its_l1_bound_which_bounds_l2():
    # (count, sum x): L1 sensitivity 1 + 10 = 11; as a vector it is released at 11 (never less)
    assert gauss(VMAIN + "{ gaussian 0.5 (vec (count db, sum (map (fun r -> r.x) db))) }") == (F(1, 2), [(11, 121)])


@pytest.mark.parametrize("expr, sens", [
    (f"vadd ({ROWVEC}) ({ROWVEC})", 6),                       # triangle inequality
    (f"vsub ({ROWVEC}) (vsum 1 (fun r -> vec (1, r.x)) db)", 4),
    (f"vscale (0 - 2.5) ({ROWVEC})", F(15, 2)),               # |k| for a public k
])
def test_exact_sensitivities_of_the_vector_operations(expr, sens):
    rho, releases = gauss(VMAIN + f"{{ gaussian 1 ({expr}) }}")
    assert releases == [(sens, F(sens) ** 2 / 2)] and rho == 1


@pytest.mark.parametrize("body, typ", [
    ("vclip 1 v", "vec[2] -o vec[2]"),                 # clipping is 1-Lipschitz
    ("vscale 2 (vclip 100 v)", "vec[2] -o[2] vec[2]"),
    ("vget 1 (vadd v v)", "vec[2] -o[2] num"),
    ("vtuple v", f"vec[2] -o[{sqrt_upper(F(2))}] (num, num)"),
    ("vdot v v", "vec[2] -> num"),
])
def test_function_types_carry_the_l2_sensitivities(body, typ):
    r = check(f"function f (v : vec[2]) {{ {body} }}\nfunction main (db : bag T) : fuzzy num {{ return 0 }}")
    assert r.ok and [f.type for f in r.functions if f.name == "f"] == [typ]


def test_a_coordinate_and_a_dot_product_with_a_public_vector():
    rho, rel = gauss("function main (db : bag T) : fuzzy num "
                     f"{{ gaussian 1 (vget 2 ({ROWVEC})) }}")
    assert rel == [(3, F(9, 2))]
    # |c . v - c . v'| <= ||c|| ||v - v'||: ||(3, 4)|| = 5 exactly
    rho, rel = gauss("function main (db : bag T) : fuzzy num "
                     f"{{ gaussian 1 (vdot (vec (3, 4)) ({ROWVEC})) }}")
    assert rel == [(15, F(225, 2))]
    # an irrational norm is bounded above by a rational: sqrt 2 <= sqrt_upper(2)
    rho, rel = gauss("function main (db : bag T) : fuzzy num "
                     f"{{ gaussian 1 (vdot ({ROWVEC}) (vec (1, 1))) }}")
    assert rel[0][0] == 3 * sqrt_upper(F(2)) and 2 <= sqrt_upper(F(2)) ** 2 < 2 + F(1, 2 ** 30)


def test_a_released_vector_is_free_to_post_process_and_rho_adds_up():
    src = (VMAIN + "{ sample g = gaussian 0.25 (" + ROWVEC + "); "
           "sample h = gaussian 0.25 (vsum 1 (fun r -> vclip 1 (vscale (vdot g (vec (r.x, 1))) (vec (r.n, 1)))) db); "
           "return (vadd g (vclip 2 h)) }")
    assert gauss(src) == (F(1, 2), [(3, 18), (1, 2)])


def test_group_privacy_of_a_vector_is_quadratic():
    # the table enters the release twice: distance 2, so the cost is 2^2 of the same noise's rho
    r = check(VMAIN + f"{{ gaussian 1 (vadd ({ROWVEC}) ({ROWVEC})) }}")
    plain = check(VMAIN + f"{{ gaussian 1 ({ROWVEC}) }}")
    assert r.rho == plain.rho == 1  # calibrated to S = 6 vs S = 3: both cost rho
    union = check(VMAIN + "{ gaussian 1 (vsum 3 (fun r -> vec (r.x, r.n)) (union db db)) }")
    assert union.ok and union.mechanisms[0].sensitivity == 6 and union.rho == 1


# ---- L1 / L2 confusion cannot be written ---------------------------------------------------------

def test_laplace_refuses_a_vector_whose_l1_norm_can_exceed_its_l2_bound():
    notes = refused(VMAIN + f"{{ laplace 1 ({ROWVEC}) }}", "E0202", "laplace cannot release a vector")
    assert any("L2 does not bound L1" in n for n in notes)


def test_the_explicit_conversion_to_l1_costs_sqrt_n():
    r = check("function main (db : bag T) : fuzzy (num, num, num, num) "
              "{ laplace 1 (vtuple (vsum 2 (fun r -> vec (r.x, r.n, 1, 1)) db)) }")
    assert r.ok and r.mechanisms[0].sensitivity == 4 and r.epsilon == 1  # 2 * sqrt 4, exactly
    r = check("function main (db : bag T) : fuzzy (num, num) { laplace 1 (vtuple (" + ROWVEC + ")) }")
    assert r.ok and r.mechanisms[0].sensitivity == 3 * sqrt_upper(F(2)) > 3 * F(14142, 10000)


def test_a_with_pair_cannot_become_a_vector_or_be_released_with_gaussian():
    refused(VMAIN + "{ gaussian 1 (vec ((| count db, count db |))) }", "E0202", "vec expects a number or a tensor")
    refused("function main (db : bag T) : fuzzy (|num, num|) { gaussian 1 (| count db, count db |) }", "E0202")


def test_a_vector_is_not_a_tuple_and_not_a_number():
    refused(VMAIN + f"{{ gaussian 1 (vadd ({ROWVEC}) (count db, count db)) }}", "E0202", "expects a vector")
    refused("function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> vec (r.x, 1)) db)) }",
            "E0202", "sum expects a bag of numbers")
    refused(VMAIN + "{ let (a, b) = " + ROWVEC + "; return (vec (a, b)) }", "E0202")
    refused(VMAIN + f"{{ gaussian 1 (vadd ({ROWVEC}) (vsum 1 (fun r -> vec (r.x, r.n, 1)) db)) }}",
            "E0202", "same length")


@pytest.mark.parametrize("src, code, words", [
    (VMAIN + "{ gaussian 1 (vsum (count db) (fun r -> vec (r.x, r.n)) db) }", "E0209", "clip norm of vsum must be a public"),
    (VMAIN + "{ gaussian 1 (vsum 0 (fun r -> vec (r.x, r.n)) db) }", "E0213", "must be positive"),
    (VMAIN + "{ gaussian 1 (vsum 1 (fun r -> (r.x, r.n)) db) }", "E0202", "row function returning a vector"),
    (VMAIN + "{ gaussian 1 (vclip (count db) (" + ROWVEC + ")) }", "E0209", "norm of vclip"),
    ("function main (db : bag T) : fuzzy num { gaussian 1 (vget (count db) (" + ROWVEC + ")) }", "E0209", ""),
    ("function main (db : bag T) : fuzzy num { gaussian 1 (vget 3 (" + ROWVEC + ")) }", "E0213", "coordinates are 1 to 2"),
    ("function f (v : vec[0]) : num { 0 }\nfunction main (db : bag T) : fuzzy num { return 0 }", "E0208", ""),
    ("function f (v : vec[2.5]) : num { 0 }\nfunction main (db : bag T) : fuzzy num { return 0 }", "E0208", ""),
])
def test_bounds_and_coordinates_must_be_public_and_valid(src, code, words):
    refused(src, code, words)


@pytest.mark.parametrize("expr", [
    # a private scale or a product of two private vectors has no bound
    f"vscale (count db) ({ROWVEC})",
    f"vec (vdot ({ROWVEC}) ({ROWVEC}), 0)",
    # something private captured by the row function is read once per row
    "vsum 1 (fun r -> vec (r.x, count db)) db",
])
def test_unbounded_vector_sensitivity_is_refused(expr):
    refused(VMAIN + f"{{ gaussian 1 ({expr}) }}", "E0305", "unbounded sensitivity")


def test_a_private_clip_outside_a_row_function_is_a_failure_risk():
    # the exact clip's digits grow with the data (rule Exact): refused on private values, as x * y
    refused(VMAIN + f"{{ sample g = gaussian 1 (vclip 1 ({ROWVEC})); return g }}", "E0309")


def test_a_vector_parameter_with_a_declared_sensitivity_is_checked():
    ok = check("function f (v :[2] vec[2]) : vec[2] { vadd v v }\n" + VMAIN + f"{{ gaussian 1 (f ({ROWVEC})) }}")
    assert ok.ok and ok.mechanisms[0].sensitivity == 6
    refused("function f (v :[1] vec[2]) : vec[2] { vadd v v }\n" + VMAIN + f"{{ gaussian 1 (f ({ROWVEC})) }}",
            "E0301")


def test_a_gaussian_release_in_a_counted_loop_with_a_captured_released_vector():
    # rule Count: 200 steps, each capturing the released weights in its row function
    src = ("function loop (db : bag T) (w : vec[2]) (t : int) : fuzzy vec[2] {\n"
           "  if t <= 0 then return w else\n"
           "  sample g = gaussian 0.001 (vsum 1 (fun r -> vscale (vdot w (vec (r.x, 1))) (vec (r.x, 1))) db);\n"
           "  loop db (vsub w (vscale 0.01 g)) (t - 1) }\n" + VMAIN + "{ loop db (vec (0, 0)) 200 }")
    r = check(src)
    assert r.ok and r.rho == F(1, 5) and r.inputs[0].rho_gauss == F(1, 5)
