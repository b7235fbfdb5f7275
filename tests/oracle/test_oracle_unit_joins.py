"""The soundness oracle on rule Unit join public: a table with a privacy unit joined with a public
table, then bounded or selected on, run on hand-made neighbours (all the rows of one unit added or
removed) with identity mechanisms.  No violation in either direction; the move is exactly the
proven sensitivity where the pair attains it (the unit's joined rows are m times its rows, yet the
result moves by one unit); a checker that understated it would be caught."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

from fuzzpy.audit.oracle import audit_pair, distance
from fuzzpy.checking.program import check_source

SCHEMAS = ('schema F unit plane { plane : string, maker : string }\n'
           'public schema Models { maker : string at most 3 per value, model : string }\n')
MODELS = pd.DataFrame({"maker": ["A", "A", "A", "B"], "model": ["a1", "a2", "a3", "b1"]})
BASE = [("P", "A"), ("P", "B"), ("Q", "B"), ("R", "A"), ("R", "A")]
NEIGHBOURS = [
    [("Z", "A"), ("Z", "A")],              # 6 joined rows of one unit
    [("Z", "B")],                          # 1 joined row
    [("Z", "C"), ("Z", "A"), ("Z", "B")],  # a row that matches nothing, and 4 that do
]


def checked(body: str):
    report = check_source(SCHEMAS + f"function main (t : bag F) (m : bag Models) {{ {body} }}\n", "u.fz")
    assert report.ok, [(d.code, d.message) for d in report.diagnostics]
    return report


def planes(rows: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["plane", "maker"])


def both_ways(report, extra: list[tuple[str, str]]):
    """The pair (BASE, BASE + one unit's rows) audited in both directions."""
    small, large = planes(BASE), planes(BASE + extra)
    out = []
    for a, b in ((small, large), (large, small)):
        pr = audit_pair(report.entry_instance, report.epsilon, {"t": a, "m": MODELS}, {"t": b, "m": MODELS})
        assert pr.a.status == "ok" and pr.b.status == "ok", (pr.a, pr.b)
        out.append(pr)
    return out


@pytest.mark.parametrize("extra", NEIGHBOURS)
@pytest.mark.parametrize("k", [1, 2, 10])
def test_bound_rows_after_the_join_moves_by_at_most_k_rows_per_unit(k, extra):
    report = checked(f'laplace 1 (count (bound_rows {k} (join_public "maker" "maker" t m)))')
    assert [c.sensitivity for c in report.mechanisms] == [k]
    for pr in both_ways(report, extra):
        assert pr.violations == [], pr.violations
        joined = sum(3 if mk == "A" else 1 if mk == "B" else 0 for _, mk in extra)
        assert distance("laplace", pr.a.calls[0].observed, pr.b.calls[0].observed) == min(k, joined)


def test_the_move_attains_k_not_k_times_m():
    # one unit added with 2 rows of maker A: 6 joined rows, bound to 2: the count moves by 2 = k
    report = checked('laplace 1 (count (bound_rows 2 (join_public "maker" "maker" t m)))')
    pr = both_ways(report, NEIGHBOURS[0])[0]
    assert pr.a.calls[0].sensitivity == 2
    assert distance("laplace", pr.a.calls[0].observed, pr.b.calls[0].observed) == 2


def test_selecting_keys_of_the_public_side_counts_a_unit_once_per_key():
    report = checked('select_keys 1 0.000001 2 (fun r -> r.model) (join_public "maker" "maker" t m)')
    for extra in NEIGHBOURS:
        for pr in both_ways(report, extra):
            assert pr.violations == [], pr.violations


def test_an_understated_sensitivity_after_the_join_is_found():
    report = checked('laplace 1 (count (bound_rows 2 (join_public "maker" "maker" t m)))')
    report.entry_instance.body.info["sensitivity"] = Fraction(1)  # a checker that got it wrong
    prs = both_ways(report, NEIGHBOURS[0])
    assert any(v.kind == "loss" for pr in prs for v in pr.violations)
