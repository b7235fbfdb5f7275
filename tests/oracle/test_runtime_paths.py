"""The runtime's fast paths (batched evaluation, vectorised row functions, compiled functions,
compiled effects, key codes kept across runs) compute what the reference path computes, and the
Dask engine what the pandas engine computes, on generated programs (tests/oracle/runtime_diff.py,
tests/oracle/dask_diff.py): the checker's proof is about the reference path, so a fast path or an
engine that released anything else would release a value whose sensitivity nobody proved.

The property test runs a fixed, derandomized number of programs (FUZZPY_RUNTIME_DIFF_EXAMPLES,
250 by default: about the CPU time 400 programs compared two ways took), each compared with every
fast path on and with a combination of them drawn for it.  The Dask test runs the programs of
seeds 0 to FUZZPY_RUNTIME_DIFF_DASK_PROGRAMS - 1 (40 by default, of which ten are accepted and use
only table primitives the Dask engine implements) on a local Dask cluster.
`python -m tests.oracle.runtime_diff` runs many more (`--dask` for the engines; docs/oracle.md).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given

from .choices import RandomChooser
from .runtime_diff import (
    COMBINATIONS,
    FAST,
    PATHS,
    REFERENCE,
    combination,
    describe_paths,
    diff_case,
    draw_diff_case,
    draw_paths,
    number_of,
    parse_paths,
    paths_option,
    run_with,
)
from .strategies import diff_cases, oracle_settings

N_PROGRAMS = int(os.environ.get("FUZZPY_RUNTIME_DIFF_EXAMPLES", "250"))
N_DASK_PROGRAMS = int(os.environ.get("FUZZPY_RUNTIME_DIFF_DASK_PROGRAMS", "40"))


@pytest.mark.slow
@oracle_settings(N_PROGRAMS)
@given(diff_cases(n_pairs=2))
def test_fast_paths_release_what_the_reference_path_releases(case_and_paths):
    case, paths = case_and_paths
    res = diff_case(case, paths=paths)
    shown = f"{case.program.text}\n(compared with: every fast path on, and {describe_paths(paths)}; " \
            f"replay a run with run_with(..., **{paths}))"
    if res.status == "internal":
        pytest.fail(f"the checker crashed (E0901) on:\n{shown}", pytrace=False)
    if res.errors:
        pytest.fail(f"internal runtime error {res.errors[0]} on:\n{shown}", pytrace=False)
    for d in res.differences:
        pytest.fail(f"{shown}\n{d.describe()}", pytrace=False)


# ---- the combinations of fast paths ---------------------------------------------------------------------

def test_every_combination_of_fast_paths_is_drawn():
    """The script's programs 0..399 (each drawn with its combination from one seed) reach all 32
    combinations, the same for the same seed."""
    drawn = {number_of(draw_diff_case(seed, n_pairs=1)[1]) for seed in range(400)}
    assert drawn == set(range(COMBINATIONS)) and COMBINATIONS == 2 ** len(PATHS) == 32
    assert draw_diff_case(123)[1] == draw_diff_case(123)[1]
    assert {number_of(draw_paths(RandomChooser(s))) for s in range(400)} == set(range(COMBINATIONS))


def test_a_combination_is_shown_as_the_option_that_replays_it():
    for number in range(COMBINATIONS):
        paths = combination(number)
        assert number_of(paths) == number and parse_paths(paths_option(paths)) == paths
    assert combination(0) == REFERENCE and combination(COMBINATIONS - 1) == FAST == parse_paths("all")
    assert describe_paths(parse_paths("batch,kept")) == "batch, kept on; vectorise, compiled, effects_compiled off"
    assert describe_paths(parse_paths("none")) == "every fast path off"
    with pytest.raises(ValueError, match="unknown fast path"):
        parse_paths("batch,turbo")


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


# ---- the Dask engine against the pandas engine ------------------------------------------------------

@pytest.fixture(scope="module")
def dask_engine(dask_scheduler):
    from .dask_diff import BudgetedDaskEngine

    engine = BudgetedDaskEngine.start(dask_scheduler)
    yield engine
    engine.close()


@pytest.mark.slow
def test_the_dask_engine_releases_what_the_pandas_engine_releases(dask_engine, tmp_path):
    from .dask_diff import dask_case

    compared = 0
    for seed in range(N_DASK_PROGRAMS):
        case, _ = draw_diff_case(seed, n_pairs=1)
        res = dask_case(case, dask_engine, tmp_path)
        compared += res.runs > res.timeouts
        replay = f"python -m tests.oracle.runtime_diff --programs 1 --seed {seed} --dask"
        if res.errors or res.differences:
            shown = "\n".join([f"internal runtime error {e}" for e in res.errors] + [d.describe() for d in res.differences])
            pytest.fail(f"seed {seed} (replay: {replay}):\n{case.program.text}\n{shown}", pytrace=False)
    assert compared or N_DASK_PROGRAMS < 10, "no generated program ran on the Dask engine"


def test_the_engine_comparison_sees_a_broken_dask_count(dask_engine, tmp_path, monkeypatch):
    """The comparison has power: a Dask `count` that adds one row per partition is seen."""
    import fuzzpy.runtime.kernels.bags as D  # where the Dask count's per-partition count is
    from fuzzpy.checking.program import check_source

    from .dask_diff import engine_tables

    report = check_source(PARTS.replace("lsum (values (pmap (fun p -> count p) (groupby (fun r -> r.n) db)))",
                                        "count db"), "count.fz")
    assert report.ok
    schema = report.table_schema(report.inputs[0])
    rows = {"db": [(30.0, 1), (40.0, 1), (50.0, 3)]}
    pandas_tables, dask_tables = engine_tables(rows, {"db": schema}, None, dask_engine, tmp_path)
    pandas_run = run_with(report.entry_instance, pandas_tables, 5, 5.0, **FAST)
    dask_engine.allow(10)
    assert run_with(report.entry_instance, dask_tables, 5, 5.0, **FAST).same_as(pandas_run)
    monkeypatch.setattr(D, "_p_count", lambda part: len(part) + 1)
    dask_engine.allow(10)
    broken = run_with(report.entry_instance, dask_tables, 5, 5.0, **FAST)
    assert broken.status == "ok" and broken.releases[0][1] == pandas_run.releases[0][1] + 2  # two partitions
