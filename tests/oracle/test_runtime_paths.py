"""The runtime's fast paths (batched evaluation, vectorised row functions) compute what the
reference path computes, on generated programs (tests/oracle/runtime_diff.py): the checker's
proof is about the reference path, so a fast path that released anything else would release a
value whose sensitivity nobody proved.

The property test runs a fixed, derandomized number of programs (FUZZPY_RUNTIME_DIFF_EXAMPLES,
400 by default: about 10 s on one core); `python -m tests.oracle.runtime_diff` runs many more.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given

from .runtime_diff import FAST, REFERENCE, diff_case, run_with
from .strategies import cases, oracle_settings

N_PROGRAMS = int(os.environ.get("FUZZPY_RUNTIME_DIFF_EXAMPLES", "400"))


@pytest.mark.slow
@oracle_settings(N_PROGRAMS)
@given(cases(n_pairs=2))
def test_fast_paths_release_what_the_reference_path_releases(case):
    res = diff_case(case)
    if res.status == "internal":
        pytest.fail(f"the checker crashed (E0901) on:\n{case.program.text}", pytrace=False)
    if res.errors:
        pytest.fail(f"internal runtime error {res.errors[0]} on:\n{case.program.text}", pytrace=False)
    for d in res.differences:
        pytest.fail(f"{case.program.text}\n{d.side}\n  fast:      {d.fast.describe()}\n"
                    f"  reference: {d.reference.describe()}", pytrace=False)


# ---- the comparison itself sees a broken fast path ------------------------------------------------

PARTS = """schema P { age : num[0, 100], n : int[0, 5] }
function lsum (xs : list num) : num { case xs of { [] => 0 | h :: t => h + lsum t } }
function main (db : bag P) { laplace 1 (lsum (values (pmap (fun p -> count p) (groupby (fun r -> r.n) db)))) }
"""


def _frames(report, rows):
    import pandas as pd

    return {"db": pd.DataFrame(rows, columns=["age", "n"]).astype({"age": float, "n": "int64"})}


def test_the_paths_agree_on_a_batched_program_and_a_broken_batch_count_is_seen(monkeypatch):
    import fuzzpy.runtime.batch as B
    from fuzzpy.checking.program import check_source
    from fuzzpy.primitives.registry import lookup

    report = check_source(PARTS, "parts.fz")
    assert report.ok
    tables = _frames(report, [(30.0, 1), (40.0, 1), (50.0, 3)])
    counted = []
    count = lookup("count")
    real = count.batched

    def spy(*a):
        out = real(*a)
        counted.append(out is not NotImplemented)
        return out

    monkeypatch.setattr(count, "batched", spy)
    fast = run_with(report.entry_instance, tables, 5, 5.0, **FAST)
    ref = run_with(report.entry_instance, tables, 5, 5.0, **REFERENCE)
    assert any(counted)  # the fast run really counted the parts batched
    assert fast.status == "ok" and len(fast.releases) == 1 and fast.same_as(ref)

    def off_by_one(*a):
        out = real(*a)
        return out if out is NotImplemented else B.Lanes(out.data + 1)

    monkeypatch.setattr(count, "batched", off_by_one)
    broken = run_with(report.entry_instance, tables, 5, 5.0, **FAST)
    assert broken.status == "ok" and not broken.same_as(ref)
    assert broken.releases[0][1] == ref.releases[0][1] + 6  # one more row in each of the 6 parts
