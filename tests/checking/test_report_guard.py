"""Performance work on the checker changes no checked result (tests/checking/report_guard.py).

The fixture was recorded with the checker before its speed-ups; every example, the benchmark's
generated program and the first generated programs of the oracle's generator must still give
exactly the same report (the script `python -m tests.checking.report_guard compare` checks all
of them)."""

from __future__ import annotations

import json

import pytest

from tests.checking import report_guard as guard

SAMPLE_SEEDS = 60  # of guard.SEEDS: the test's share (the script checks every seed)


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads(guard.FIXTURE.read_text())


def test_fixture_covers_every_guarded_input(expected: dict) -> None:
    names = [name for name, _, _ in guard.inputs()]
    assert sorted(names) == sorted(expected)
    assert sum(n.startswith("examples/") for n in names) >= 15
    assert sum(expected[n]["ok"] for n in names) > 100 and sum(not expected[n]["ok"] for n in names) > 100


def test_reports_identical_to_the_trusted_checker(expected: dict) -> None:
    keep = {f"oracle-{s}" for s in range(SAMPLE_SEEDS)}
    checked, differ = 0, []
    for name, file, text in guard.inputs():
        if name.startswith("oracle-") and name not in keep:
            continue
        got = guard.digest(name, file, text)
        assert got["source_sha256"] == expected[name]["source_sha256"], f"{name}: the input changed, re-record"
        if got != expected[name]:
            differ.append((name, expected[name], got))
        checked += 1
    assert not differ, differ[:3]
    assert checked >= SAMPLE_SEEDS + 16


def test_the_digest_sees_a_changed_answer() -> None:
    """The digest is of the answer: a different epsilon, type or diagnostic is a different digest."""
    base = "schema T { x : num[0, 1] }\nfunction main (db : bag T) : fuzzy num { laplace 0.5 (count db) }\n"
    a = guard.digest("a", "t.fz", base)
    assert a["ok"] and a["epsilon"] == "1/2"
    b = guard.digest("b", "t.fz", base.replace("0.5", "0.25"))
    assert b["epsilon"] == "1/4" and b["sha256"] != a["sha256"]
    c = guard.digest("c", "t.fz", base.replace("count db", "sum db"))  # a bag of records has no sum
    assert not c["ok"] and c["codes"] and c["sha256"] != a["sha256"]
    # the same program with a second mechanism in a helper: same total, different mechanism list
    d = guard.digest("d", "t.fz", base + "function f (db : bag T) : fuzzy num { laplace 0.5 (count db) }\n")
    assert d["epsilon"] == "1/2" and d["sha256"] != a["sha256"]
