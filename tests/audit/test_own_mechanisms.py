"""fuzzpy's own mechanisms, audited through the registry with the checker's calibration: no
violation at their epsilon, and (to show the audit is not vacuous) a violation as soon as the
claim is set below the mechanism's real loss.  Fixed seeds; sample sizes stated per test."""

from __future__ import annotations

from fractions import Fraction

import pytest

from fuzzpy.audit.auditor import NO_VIOLATION, audit_mechanism, mechanism_names
from fuzzpy.audit.mechanisms import TARGETS, calibration, calibration_report

HALF = Fraction(1, 2)


def test_every_registry_mechanism_has_an_audit_target():
    from fuzzpy.primitives.registry import all_primitives

    assert set(mechanism_names()) == set(TARGETS)
    registry = {n for n, p in all_primitives().items() if p.is_mechanism}
    # Every mechanism, the Gaussian one included (its claim is (epsilon, delta): tests/audit/test_gaussian.py),
    # but partition selection: its claim is eps-DP except on a bad event of probability delta (1e-6 and
    # below), which no affordable number of samples can see; its threshold is certified in interval
    # arithmetic instead (tests/checking/test_rule_partition_selection.py), and the optimal one's keep
    # probabilities are exact (tests/checking/test_rule_optimal_partition_selection.py).
    assert registry - {"select_keys", "select_keys_optimal"} == set(TARGETS)
    assert set(mechanism_names()) >= {"laplace", "exponential", "noisy_max", "above_threshold",
                                      "randomized_response", "gaussian"}


def test_calibration_comes_from_the_checker():
    info, eps = calibration(TARGETS["laplace"], HALF)
    assert (info["sensitivity"], info["epsilon"], info["scale"], eps) == (1, HALF, 2, HALF)
    info, eps = calibration(TARGETS["above_threshold"], Fraction(1, 4))
    assert (info["sensitivity"], info["cutoff"], info["threshold"], eps) == (1, 1, HALF, Fraction(1, 4))
    info, report = calibration_report(TARGETS["gaussian"], Fraction(1, 20))
    assert (info["sensitivity"], info["rho"], info["sigma2"], report.rho, report.epsilon) == (
        1, Fraction(1, 20), 10, Fraction(1, 20), 0)


# (mechanism, exact sampler?, fresh samples per side, the least lower bound we expect to see:
#  the real loss on the canonical inputs is 0.5 for laplace and randomized_response, about 0.33 for
#  the exponential mechanism on scores (1,0,0) vs (0,1,1), less for the others)
CASES = [
    ("laplace", False, 200_000, 0.45),
    ("laplace", True, 10_000, 0.3),
    ("randomized_response", False, 50_000, 0.4),
    ("exponential", False, 10_000, 0.15),
    ("noisy_max", False, 10_000, 0.15),
    ("above_threshold", False, 10_000, 0.05),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, exact, samples, least", CASES)
def test_no_violation_at_the_checked_epsilon(name, exact, samples, least):
    r = audit_mechanism(name, HALF, exact=exact, samples=samples, seed=11)
    assert r.claimed == HALF
    assert r.verdict == NO_VIOLATION and not r.violation
    assert least <= r.lower_bound <= 0.5
    assert r.tests >= 1 and all(t.n == samples for t in r.tested)


@pytest.mark.slow
@pytest.mark.parametrize("name, samples, claim", [("laplace", 200_000, "0.35"),
                                                  ("randomized_response", 50_000, "0.35")])
def test_a_claim_below_the_real_loss_is_caught(name, samples, claim):
    r = audit_mechanism(name, HALF, claimed=Fraction(claim), samples=samples, seed=12)
    assert r.violation
    assert Fraction(claim) < r.lower_bound <= 0.5
