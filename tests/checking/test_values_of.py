"""values_of key b: the values the schema declares for a key, as a public constant list read at
check time (never from the rows); top_k_all chooses among them."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd

from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource
from tests.check_and_run import check


def _type_of(report, name: str) -> str:
    (fn,) = [f for f in report.functions if f.name == name]
    return fn.type


def test_values_of_a_category_is_its_declared_values_in_order_and_public():
    report = check('function vals (db : bag T) { values_of (fun r -> r.k) db }\n'
                   'function main (db : bag T) { sample n = laplace 1 (count db); return (n, vals db) }')
    assert report.ok, [(d.code, d.message) for d in report.diagnostics]
    assert _type_of(report, "vals") == "bag T -o[0] list string"
    assert report.epsilon == 1  # the list costs nothing
    out = run_program(report.entry_instance, {"db": pd.DataFrame({"x": [1.0], "k": ["a"], "flag": [True], "n": [1]})},
                      RandomSource.seeded(1))
    assert tuple(out.value[1]) == ("a", "b", "c")


def test_values_of_a_bounded_int_is_its_range():
    report = check("function vals (db : bag T) { values_of (fun r -> r.n) db }")
    assert _type_of(report, "vals") == "bag T -o[0] list (int[0, 5])"


def test_values_of_refuses_a_key_without_declared_values():
    report = check("function main (db : bag T) { values_of (fun r -> r.x) db }")
    assert [d.code for d in report.diagnostics if d.severity == "error"] == ["E0307"]


def test_values_of_refuses_a_tuple_key():
    report = check("function main (db : bag T) { values_of (fun r -> (r.k, r.n)) db }")
    errors = [d for d in report.diagnostics if d.severity == "error"]
    assert [d.code for d in errors] == ["E0307"] and "one category or bounded int" in errors[0].message


def test_top_k_all_chooses_among_every_declared_value_at_k_times_eps():
    report = check('import "stdlib/select.fz"\n'
                   "function main (db : bag T) { sample top = top_k_all 0.25 2 (fun r -> r.k) db; return top }")
    assert report.ok, [(d.code, d.message) for d in report.diagnostics]
    assert report.epsilon == Fraction(1, 2)
    rows = pd.DataFrame({"x": [1.0] * 6, "k": ["c"] * 5 + ["a"], "flag": [True] * 6, "n": [1] * 6})
    out = run_program(report.entry_instance, {"db": rows}, RandomSource.seeded(1))
    assert len(out.value) == 2 and set(out.value) <= {"a", "b", "c"}
