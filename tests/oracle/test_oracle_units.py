"""The soundness oracle on partition selection (rule Partition selection): its noise-free model
of select_keys observes each key's number of units, measures a move as the L1 move of those
counts over m, and finds no violation on neighbouring tables (one unit, with all its rows, added),
but does find an understated sensitivity.  Tables with a unit run with their units, as in a run."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd

from fuzzpy.audit.oracle import UnitCounts, audit_pair, distance
from fuzzpy.checking.program import check_source

UNITS = "schema F unit plane { plane : string, dest : string }\n"
ROWS = "schema R { dest : string }\n"


def checked(schema: str, table: str, body: str):
    report = check_source(schema + f"function main (t : bag {table}) {{ {body} }}\n", "u.fz")
    assert report.ok, [(d.code, d.message) for d in report.diagnostics]
    return report


def planes(rows: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["plane", "dest"])


BASE = [("A", "BOS"), ("A", "SFO"), ("B", "BOS"), ("C", "LAX"), ("C", "LAX")]


def test_a_unit_added_with_rows_in_many_keys_moves_the_counts_by_at_most_m():
    report = checked(UNITS, "F", "select_keys 1 0.000001 2 (fun r -> r.dest) t")
    extra = [("Z", "BOS"), ("Z", "SFO"), ("Z", "ORD"), ("Z", "ORD")]  # three keys, two counted
    pr = audit_pair(report.entry_instance, report.epsilon, {"t": planes(BASE)}, {"t": planes(BASE + extra)})
    assert pr.violations == [] and pr.a.status == "ok"
    a, b = pr.a.calls[0].observed, pr.b.calls[0].observed
    assert a == UnitCounts(2, (("BOS", 2), ("LAX", 1), ("SFO", 1)))
    assert distance("select_keys", a, b) == 1 and pr.a.calls[0].sensitivity == 1
    assert pr.a.result == ("BOS", "LAX", "SFO")


def test_on_a_table_without_a_unit_each_row_is_a_unit():
    report = checked(ROWS, "R", "select_keys 1 0.000001 1 (fun r -> r.dest) (union t t)")
    rows = pd.DataFrame({"dest": ["BOS", "SFO", "BOS"]})
    more = pd.DataFrame({"dest": ["BOS", "SFO", "BOS", "NEW"]})
    pr = audit_pair(report.entry_instance, report.epsilon, {"t": rows}, {"t": more})
    assert pr.violations == []
    assert distance("select_keys", pr.a.calls[0].observed, pr.b.calls[0].observed) == 2


def test_an_understated_sensitivity_of_a_selection_is_found():
    report = checked(UNITS, "F", "select_keys 1 0.000001 2 (fun r -> r.dest) t")
    report.entry_instance.body.info["sensitivity"] = Fraction(1, 2)  # a checker that got it wrong
    extra = [("Z", "BOS"), ("Z", "SFO")]
    pr = audit_pair(report.entry_instance, report.epsilon, {"t": planes(BASE)}, {"t": planes(BASE + extra)})
    assert any(v.kind == "loss" for v in pr.violations), pr.violations


def test_the_bounds_run_under_the_oracle_and_keep_within_their_proof():
    # the oracle's choice per unit is its first rows (all random bits zero): one the rules cover
    body = ("sample n = laplace 1 (count (bound_rows 2 t)); "
            "sample h = each (fun g -> laplace 1 (count g)) "
            '(bound_groups_in ["BOS", "SFO", "LAX", "ORD"] 2 1 (fun r -> r.dest) t); return (n, h)')
    report = checked(UNITS, "F", body)
    extra = [("Z", "BOS"), ("Z", "SFO"), ("Z", "ORD"), ("Z", "ORD"), ("Z", "BOS")]
    pr = audit_pair(report.entry_instance, report.epsilon, {"t": planes(BASE)}, {"t": planes(BASE + extra)})
    assert pr.violations == [] and pr.a.status == "ok"
    assert [c.observed for c in pr.a.calls][0] == 2 + 1 + 2  # A: 2, B: 1, C: 2 rows kept
    assert distance("laplace", pr.a.calls[0].observed, pr.b.calls[0].observed) == 2
