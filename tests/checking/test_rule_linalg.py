"""The linear-algebra primitives (fuzzpy/primitives/linalg.py; rule Vector in docs/soundness.md):
`vouter` is folded exactly on constants, infinitely sensitive in a private vector outside a row
function and bounded by vsum's clip inside one; `vsize` is a constant; `sqrt`, `min_eigenvalue`
and `ridge_solve` are free on released values and infinite on private ones; shapes are checked."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import check, codes


def _errors(report) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in report.diagnostics if d.severity == "error"]


GRAM = "vsum 4 (fun r -> vouter (vec (r.x / 10, r.n / 5))) db"


def test_vouter_of_a_constant_is_folded_exactly():
    r = check("function main (db : bag T) : fuzzy vec[4] { return (vouter (vec (1/3, 2))) }")
    assert r.ok and r.inputs[0].epsilon == 0
    from fuzzpy.primitives.registry import lookup

    assert lookup("vouter").run((F(1, 3), F(2))) == (F(1, 9), F(2, 3), F(2, 3), F(4))


def test_a_gram_matrix_under_vsum_has_the_clip_bound_as_its_l2_sensitivity():
    r = check(f"function main (db : bag T) : fuzzy vec[4] {{ gaussian 1 ({GRAM}) }}")
    assert r.ok, _errors(r)
    assert [(m.name, m.sensitivity) for m in r.mechanisms] == [("gaussian", 4)] and r.rho == 1


def test_vouter_of_a_private_vector_outside_a_row_function_is_infinitely_sensitive():
    r = check("function main (db : bag T) : fuzzy vec[4] { gaussian 1 (vouter (vec (count db, 1))) }")
    assert _errors(r) == [("E0305", "the argument of this mechanism has unbounded sensitivity in db")]


def test_vouter_refuses_more_coordinates_than_a_vector_holds():
    ones = ", ".join(["1"] * 65)   # 65 * 65 = 4225 > 4096
    r = check(f"function main (db : bag T) : fuzzy num {{ return (vget 1 (vouter (vec ({ones})))) }}")
    assert ("E0208", "vouter of a vector of 65 gives 4225 coordinates; vectors have at most 4096") in _errors(r)


def test_vsize_is_a_constant_whatever_the_vector_holds():
    r = check(f"function main (db : bag T) : fuzzy num {{ return (vsize ({GRAM})) }}")
    assert r.ok and r.inputs[0].epsilon == 0 and r.rho == 0


@pytest.mark.parametrize("post", ["min_eigenvalue g", "vget 1 (ridge_solve 1 g (vec (1, 2)))", "sqrt (vget 1 g)"])
def test_post_processing_of_released_values_is_free(post):
    r = check(f"function main (db : bag T) : fuzzy num {{ sample g = gaussian 1 ({GRAM}); return ({post}) }}")
    assert r.ok, _errors(r)
    assert r.rho == 1   # the release alone


@pytest.mark.parametrize("post", ["min_eigenvalue g", "vget 1 (ridge_solve 1 g (vec (1, 2)))", "sqrt (vget 1 g)",
                                  "vget 1 (ridge_solve (vget 1 g) (vec (1, 0, 0, 1)) (vec (1, 2)))"])
def test_post_processing_primitives_on_private_values_are_infinitely_sensitive(post):
    r = check(f"function main (db : bag T) : fuzzy num {{ let g = {GRAM}; laplace 1 ({post}) }}")
    assert _errors(r) == [("E0305", "the argument of this mechanism has unbounded sensitivity in db")]


@pytest.mark.parametrize("expr, message", [
    ("min_eigenvalue (vec (1, 2, 3))", "min_eigenvalue expects a square matrix as a vector of n*n numbers"),
    ("vget 1 (ridge_solve 1 (vec (1, 0, 0, 1)) (vec (1, 2, 3)))",
     "ridge_solve expects two vectors of the same length, but they are vec[2] and vec[3]"),
    ("vget 1 (ridge_solve (vec (1)) (vec (1, 0, 0, 1)) (vec (1, 2)))", "ridge_solve expects a number (the ridge term)"),
    ("vget 1 (vouter (1, 2))", "vouter expects a vector"),
    ("sqrt (vec (1))", "sqrt expects a number"),
])
def test_shapes_are_checked(expr, message):
    r = check(f"function main (db : bag T) : fuzzy num {{ return ({expr}) }}")
    assert "E0202" in codes(r) and any(message in m for _, m in _errors(r)), _errors(r)
