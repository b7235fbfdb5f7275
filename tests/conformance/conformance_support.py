"""Shared helpers of the conformance tests."""

from __future__ import annotations

from conformance_cases import Case, evaluate


def assert_conforms(case: Case):
    """The case's outcome, asserting it conforms (the verdict and the diagnostics on failure)."""
    outcome = evaluate(case)
    assert outcome.ok, (case.id, outcome.verdict, outcome.bound, outcome.codes, outcome.messages)
    return outcome


def mechanisms(report) -> list[tuple]:
    return sorted({(m.name, m.sensitivity, m.epsilon, m.scale) for m in report.mechanisms})
