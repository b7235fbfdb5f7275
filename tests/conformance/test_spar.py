"""Spar (Lobo-Vesga, Russo, Gaboardi, Tome Cortinas, OOPSLA 2024): sensitivities of its example
programs (dup 2, twice dup 4, insertion sort 1, map with a k-sensitive function k, fold, sum,
append, concat, zip 1, histogram 1) and the CDF over 8 buckets at eps 1/8 (1).

len: Spar's len over a bag is the size of a table, 1-sensitive (fuzzpy's count).  fuzzpy's
lists use Fuzz's metric, under which lists of different lengths are infinitely far apart; lists
at a finite distance have the same length, and the length of a list is 0-sensitive.  Both are
checked below; neither is faked."""

from fractions import Fraction as F

import pytest
from conformance_cases import PROGRAMS, cases, plist
from conformance_support import assert_conforms

from fuzzpy.checking.program import check_file, check_source
from fuzzpy.runtime.interpreter import RunState, evaluate_entry
from fuzzpy.runtime.samplers import RandomSource


@pytest.mark.parametrize("case", cases("Spar"), ids=lambda c: c.id)
def test_spar_program(case):
    assert_conforms(case)


def test_len_of_a_list_is_0_sensitive_and_the_size_of_a_bag_is_1_sensitive():
    r = check_file(PROGRAMS / "spar.fz")
    types = {f.name: f.type for f in r.functions}
    assert types["len"] == "list num -o[0] num"
    assert types["bag_len"] == "bag Row -o int[0, inf]"


@pytest.mark.parametrize("k", [F(1, 2), F(3), F(7)])
def test_map_with_a_k_sensitive_function_is_k_sensitive(k):
    src = (PROGRAMS / "spar.fz").read_text() + (
        f"\nfunction scalek (x : num) : num {{ ({k.numerator} / {k.denominator}) * x }}\n"
        "function map_k (xs : list num) { lmap scalek xs }\n")
    r = check_source(src, "spar_k.fz")
    assert {f.name: f.type for f in r.functions}["map_k"] == f"list num -o[{float(k):g}] list num"


@pytest.mark.parametrize("n", [1, 8, 16])
def test_cdf_costs_n_times_eps(n):
    r = check_file(PROGRAMS / "spar.fz", params={"eps": "1 / 8", "buckets": plist(range(10, 10 * n + 1, 10))})
    assert r.epsilon == F(n, 8)


def test_insertion_sort_sorts():
    """The 1-sensitive program really is a sort (its instance runs on a public list)."""
    src = (PROGRAMS / "spar.fz").read_text().replace(
        "function main (db : bag Row) : fuzzy (list num) { cdf eps buckets db }",
        "function main (xs : list num) : fuzzy (list num) { return (isort xs) }")
    r = check_source(src, "sort.fz")
    # Returning a private list: not DP, but runnable.  E0309 is a known false rejection: isort's
    # recursion is not unrolled (FAIL), and the unsolved sensitivity of its recursive result
    # counts as possibly infinite (docs/soundness.md, rule Instance).
    assert [d.code for d in r.diagnostics] == ["E0302", "E0309"]
    xs = (5.0, -1.0, 3.5, 3.5, 0.0, 10.0, 2.0)
    out = evaluate_entry(r.entry_instance, {"xs": xs}, RunState(RandomSource.seeded(0))).value
    assert list(out) == sorted(xs)
