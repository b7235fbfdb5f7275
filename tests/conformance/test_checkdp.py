"""CheckDP (Wang, Ding, Kifer, Zhang, CCS 2020): its correct algorithms check at their claimed
epsilon; its broken ones, written in fuzzpy as directly as the language allows, are rejected or
charged at least their true loss, never their claimed epsilon.

Why the bound of a broken program is at least its true loss: fuzzpy has no way to write noise
that the checker did not calibrate.  Noise is only added by a mechanism, whose scale is S/eps
with S the sensitivity the checker proved; so a program that wants a smaller scale must pass a
larger epsilon, and is charged it.  The mechanisms release only what their proofs cover
(noisy_max the candidate, above_threshold booleans); anything else must be released through
another mechanism, charged separately, and the charges add up by sequential composition.
Comparing or returning private values without noise is a branch on, or a release of, private
data: infinite (E0302), and dividing by a private number has unbounded sensitivity (E0305)."""

from fractions import Fraction as F

import pytest
from conformance_cases import PROGRAMS, cases
from conformance_support import assert_conforms, mechanisms

from fuzzpy.checking.program import check_file

CORRECT = [c for c in cases("CheckDP") if c.kind == "epsilon"]
BROKEN = [c for c in cases("CheckDP") if c.kind == "sound"]


@pytest.mark.parametrize("case", CORRECT, ids=lambda c: c.id)
def test_correct_algorithm_checks_at_its_claimed_epsilon(case):
    assert_conforms(case)


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c.id)
def test_broken_algorithm_is_rejected_or_charged_its_true_loss(case):
    outcome = assert_conforms(case)
    if outcome.bound is not None:
        assert outcome.bound > case.claimed


def test_correct_svt_and_noisy_max_release_only_booleans_and_the_candidate():
    svt = check_file(PROGRAMS / "checkdp_correct.fz", entry="svt")
    assert str(svt.entry_type) == "fuzzy (list bool)"
    nm = check_file(PROGRAMS / "checkdp_correct.fz", entry="noisy_max_name")
    assert nm.epsilon == F(1, 2)
    assert str(nm.entry_type) == "fuzzy string"  # the winning name, and nothing else


@pytest.mark.parametrize("file, code, message", [
    ("checkdp_bad_svt_no_noise.fz", "E0302", "main is not differentially private in db: its privacy loss is unbounded"),
    ("checkdp_bad_mean.fz", "E0302", "main is not differentially private in db: its privacy loss is unbounded"),
    ("checkdp_bad_mean_inside.fz", "E0305", "the argument of this mechanism has unbounded sensitivity in db"),
])
def test_rejections_name_the_cause(file, code, message):
    r = check_file(PROGRAMS / file)
    d = r.diagnostics[0]
    assert (d.code, d.message) == (code, message)
    # checkdp_bad_mean also divides by the exact count, whose digits (rule Exact) depend on the data.
    assert [x.code for x in r.diagnostics[1:]] == (["E0309"] if file == "checkdp_bad_mean.fz" else [])


def test_svt_without_noise_points_at_the_comparison():
    r = check_file(PROGRAMS / "checkdp_bad_svt_no_noise.fz")
    (d,) = r.diagnostics
    assert any("returned without noise" in n or "condition depends on private data" in n for n in d.notes)


def test_bad_histogram_is_charged_one_over_eps_with_noise_scale_eps():
    for eps in (F(1, 2), F(1, 5)):
        r = check_file(PROGRAMS / "checkdp_bad_histogram.fz", params={"eps": f"{eps.numerator} / {eps.denominator}"})
        assert r.epsilon == 1 / eps
        assert mechanisms(r) == [("laplace", 1, 1 / eps, eps)]  # scale eps, as the broken program wants


def test_bad_partial_sum_is_charged_2_eps_for_scale_1_over_2_eps():
    r = check_file(PROGRAMS / "checkdp_bad_partial_sum.fz")
    assert r.epsilon == 1
    assert mechanisms(r) == [("laplace", 1, 1, 1)]


@pytest.mark.parametrize("file, n", [("checkdp_bad_svt_unscaled.fz", 8), ("checkdp_bad_svt_release_value.fz", 8),
                                     ("checkdp_bad_gap_svt.fz", 8), ("checkdp_bad_noisy_max.fz", 5)])
def test_hand_written_variants_are_charged_every_noisy_query(file, n):
    r = check_file(PROGRAMS / file)
    per_query = F(1, 8) if "svt" in file else F(1, 4)
    assert r.epsilon == n * per_query
    assert [m for m in mechanisms(r) if m[1] != 0] == [("laplace", 1, per_query, 1 / per_query)]
