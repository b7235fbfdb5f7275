"""Adaptive Fuzz (Winograd-Cort, Haeberlen, Roth, Pierce, ICFP 2017), examples/test-simple-red.fz:
seq (2.0), par on a pair (1.5) and the rejected `par 1.3 1.0 (add_noise 1.3) (add_noise 1.5)`.

What test #13 is: par's parameters are annotated f : num -o[[s]] fuzzy num and
g : num -o[[t]] fuzzy num with s = 1.3, t = 1.0, and g = add_noise 1.5 is 1.5-sensitive, so the
argument does not fit its parameter's type.  It is rejected for that annotation, not because
the program's loss exceeds 1.5: the same functions given to par with the sensitivities
inferred cost max(1.3, 1.5) = 1.5 on the pair (the halves of a tensor pair are disjoint).  The
two releases on one number (a sequential composition) would cost 2.8."""

from fractions import Fraction as F

import pytest
from conformance_cases import PROGRAMS, cases
from conformance_support import assert_conforms

from fuzzpy.checking.program import check_file
from fuzzpy.pipeline.budget import apply_budget


@pytest.mark.parametrize("case", cases("Adaptive Fuzz"), ids=lambda c: c.id)
def test_adaptive_fuzz_program(case):
    assert_conforms(case)


def test_13_is_rejected_at_the_call_with_the_annotation_named():
    r = check_file(PROGRAMS / "adaptive_fuzz_simple_red_13.fz", entry="test13")
    (d,) = r.diagnostics
    assert d.code == "E0301"
    assert d.message == "this function is 1.5-sensitive, but num -o fuzzy num allows 1"
    assert (d.span.line, d.span.col) == (17, 3)


def test_13_annotated_par_charges_the_max_of_its_annotations():
    r = check_file(PROGRAMS / "adaptive_fuzz_simple_red_13.fz", entry=None)
    (par,) = [f for f in r.functions if f.name == "par_13_10"]
    assert par.type == "(num -o[1.3] fuzzy num) -o (num -o fuzzy num) -o (num, num) -o[1.3] fuzzy (num, num)"


@pytest.mark.parametrize("entry, within", [("test11", False), ("test12", True), ("test13_inferred", True),
                                           ("test13_sequential", False)])
def test_against_a_budget_of_1_5(entry, within):
    r = check_file(PROGRAMS / "adaptive_fuzz_simple_red.fz", entry=entry)
    assert r.ok
    apply_budget(r, F(3, 2))
    diag = next((d for d in r.diagnostics if d.code == "E0401"), None)
    assert (diag is None) == within
    if diag is not None:
        assert diag.code == "E0401"
        assert diag.message == f"{entry} has epsilon {'2' if entry == 'test11' else '2.8'}, but the budget is 1.5"
