"""Privacy units at run time (rules Units, Bound rows, Bounded groups, Released keys and Partition
selection): the bounds keep at most what they promise, per unit, with a random choice drawn from
the run's random source; filter, map and union keep each row's unit; select_keys releases the
keys many units have and not those one unit has; the Dask engine bounds and selects like pandas."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.kernels.units import bounded_parts, keep_at_most, unit_key_counts
from fuzzpy.runtime.samplers import RandomSource
from tests.conftest import check

SCHEMA = 'schema F unit plane { plane : string, dest : string, origin : cat{"EWR", "JFK", "LGA"}, n : int[0, 9] }\n'
EXACT = "1000000"  # an epsilon so large that a count's noise rounds away


def flights(rows_per_plane: dict[str, int], dests: int = 3) -> pd.DataFrame:
    """Each plane's flights: its i-th flight to dest i mod `dests`, from origin i mod 3, n = i mod 10."""
    rows = [(p, f"D{i % dests}", ("EWR", "JFK", "LGA")[i % 3], i % 10)
            for p, k in rows_per_plane.items() for i in range(k)]
    return pd.DataFrame(rows, columns=["plane", "dest", "origin", "n"])


def run(body: str, table: pd.DataFrame, seed: int = 1):
    report = check(SCHEMA + "function main (t : bag F) { " + body + " }")
    assert report.ok, [(d.code, d.message) for d in report.diagnostics]
    return run_program(report.entry_instance, {"t": table}, RandomSource.seeded(seed))


# ---- the random choice per unit ---------------------------------------------------------------------

def test_keep_at_most_keeps_k_rows_of_each_large_unit_and_all_of_a_small_one():
    group = np.array([0, 0, 0, 0, 0, 1, 1, 2, -1, 0, 2, 2, 2])
    keep = keep_at_most(group, 2, RandomSource.seeded(3))
    assert Counter(group[keep].tolist()) == {0: 2, 1: 2, 2: 2}
    assert not keep[8]  # no unit: dropped
    assert keep_at_most(group, 10, RandomSource.seeded(3)).tolist() == (group >= 0).tolist()


def test_keep_at_most_chooses_uniformly_among_a_units_rows():
    group = np.zeros(4, dtype=np.int64)
    rng = RandomSource.seeded(7)
    kept = Counter(int(np.flatnonzero(keep_at_most(group, 1, rng))[0]) for _ in range(4000))
    assert set(kept) == {0, 1, 2, 3} and all(850 < n < 1150 for n in kept.values()), kept


def test_the_choice_for_a_unit_draws_from_the_runs_random_source():
    group = np.array([0] * 50)
    a = keep_at_most(group, 5, RandomSource.seeded(1))
    assert np.array_equal(a, keep_at_most(group, 5, RandomSource.seeded(1)))
    assert not np.array_equal(a, keep_at_most(group, 5, RandomSource.seeded(2)))


def test_bounded_parts_keeps_m_parts_and_c_rows_per_unit_and_part():
    units = np.repeat(np.arange(4), 30)
    part = np.tile(np.arange(6), 20)
    out = bounded_parts(None, units, part, 2, 3, RandomSource.seeded(5))
    for u in range(4):
        mine = Counter(out[(units == u) & (out >= 0)].tolist())
        assert len(mine) == 2 and set(mine.values()) == {3}


def test_unit_key_counts_counts_each_unit_once_per_key_and_in_at_most_m_keys():
    units = np.array([0, 0, 0, 1, 1, 2])
    keys = np.array([0, 0, 1, 0, 0, 2])
    assert unit_key_counts(units, keys, 3, 5, RandomSource.seeded(1)).tolist() == [2, 1, 1]
    assert unit_key_counts(units, keys, 3, 1, RandomSource.seeded(1)).sum() == 3


# ---- whole programs on pandas ----------------------------------------------------------------------------

def test_bound_rows_counts_at_most_k_rows_per_unit():
    table = flights({"A": 10, "B": 1, "C": 4})
    assert round(run(f"laplace {EXACT} (count (bound_rows 3 t))", table).value) == 3 + 1 + 3


def test_filter_and_map_keep_each_rows_unit_before_bounding():
    table = flights({"A": 10, "B": 1, "C": 4})
    # rows with n >= 2: A has 8 (n = 2..9), B none, C 2 (n = 2, 3): at most 5 each
    value = run(f"laplace {EXACT} (count (bound_rows 5 (map (fun r -> r.n) (filter (fun r -> r.n >= 2) t))))", table)
    assert round(value.value) == 5 + 2


def test_union_keeps_the_units_of_both_sides():
    table = flights({"A": 3, "B": 2})
    assert round(run(f"laplace {EXACT} (count (bound_rows 4 (union t t)))", table).value) == 4 + 4


def test_bound_groups_histogram_keeps_m_groups_and_c_rows_per_unit():
    table = flights({"A": 30, "B": 30})  # each plane: 10 flights from each origin
    out = run(f"each (fun g -> laplace {EXACT} (count g)) (bound_groups 2 4 (fun r -> r.origin) t)", table).value
    counts = {k: round(v) for k, v in out.items()}
    assert sum(counts.values()) == 2 * 2 * 4 and all(v in (0, 4, 8) for v in counts.values())


def test_select_keys_releases_keys_many_units_have_and_not_a_single_units():
    planes = {f"P{i}": 3 for i in range(60)}  # 60 planes fly to D0, D1, D2
    table = pd.concat([flights(planes), pd.DataFrame([("LONE", "SECRET", "EWR", 0)] * 50, columns=["plane", "dest",
                                                                                                   "origin", "n"])])
    result = run("select_keys 2 0.000001 3 (fun r -> r.dest) t", table)
    assert result.value == ("D0", "D1", "D2")
    (release,) = result.releases
    assert release.value == ("D0", "D1", "D2")


def test_groupby_in_released_keys_counts_per_key_and_drops_other_keys():
    table = flights({f"P{i}": 3 for i in range(60)})
    out = run("sample ks = select_keys 2 0.000001 3 (fun r -> r.dest) t; "
              f"each (fun g -> laplace {EXACT} (count g)) (bound_groups_in ks 3 1 (fun r -> r.dest) t)", table).value
    assert {k: round(v) for k, v in out.items()} == {"D0": 60, "D1": 60, "D2": 60}
    out = run(f'each (fun g -> laplace {EXACT} (count g)) (bound_groups_in ["D1", "XX"] 1 5 (fun r -> r.dest) t)',
              table).value
    assert {k: round(v) for k, v in out.items()} == {"D1": 60, "XX": 0}


# ---- the Dask engine ----------------------------------------------------------------------------------------

def test_dask_bounds_rows_and_selects_keys_like_pandas(tmp_path, dask_scheduler):
    pytest.importorskip("distributed")
    import json

    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    planes = {f"P{i}": 3 + i % 4 for i in range(80)}
    table = flights(planes)
    data = tmp_path / "pq"
    data.mkdir()
    for i in range(3):  # a unit's rows spread over several files: the engine brings them together
        table.iloc[i::3].to_parquet(data / f"part-{i}.parquet", index=False)
    prog = tmp_path / "p.fz"
    prog.write_text(SCHEMA + "function main (t : bag F) { sample n = laplace " + EXACT + " (count (bound_rows 2 t)); "
                    "sample ks = select_keys 2 0.000001 3 (fun r -> r.dest) t; sample u = laplace " + EXACT + " (count "
                    "(bound_rows 1 (union (filter (fun r -> r.n >= 1) t) t))); return (n, ks, u) }\n")
    r = CliRunner().invoke(app, ["run", str(prog), "--engine", "dask", "--scheduler", dask_scheduler, "--data",
                                 str(data), "--budget", "3000000", "--delta", "1e-5", "--seed", "1", "--format", "json"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    n, keys, u = json.loads(r.stdout)["result"]
    assert round(n) == 2 * 80 and keys == ["D0", "D1", "D2"] and round(u) == 80


def run_on_dask(body: str, table: pd.DataFrame, tmp_path, scheduler: str, files: int = 3):
    """The program's result on the Dask engine, the table split row by row over `files` Parquet
    files (a unit's rows in several partitions)."""
    import json

    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    data = tmp_path / "pq"
    data.mkdir(exist_ok=True)
    for old in data.iterdir():
        old.unlink()
    for i in range(files):
        table.iloc[i::files].to_parquet(data / f"part-{i}.parquet", index=False)
    prog = tmp_path / "p.fz"
    prog.write_text(SCHEMA + "function main (t : bag F) { " + body + " }\n")
    r = CliRunner().invoke(app, ["run", str(prog), "--engine", "dask", "--scheduler", scheduler, "--data",
                                 str(data), "--budget", "100000000", "--delta", "1e-5", "--seed", "1", "--format",
                                 "json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["result"]


def rounded(v):
    """A released value with its (negligible) noise rounded away: dicts, tuples and lists inside."""
    if isinstance(v, dict):
        return {k: rounded(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return [rounded(x) for x in v]
    return round(v) if isinstance(v, float) else v


# Bounds loose enough that no unit needs a choice: both engines keep every row, so release the same.
UNCHOSEN = [
    f"each (fun g -> laplace {EXACT} (count g)) (bound_groups 3 30 (fun r -> r.origin) t)",
    f"each (fun g -> laplace {EXACT} (sum (map (fun r -> r.n) g))) (bound_groups 3 30 (fun r -> r.origin) t)",
    f'each (fun g -> laplace {EXACT} (count g)) (bound_groups_in ["D1", "D2", "XX"] 3 30 (fun r -> r.dest) t)',
    "sample ks = select_keys 2 0.000001 3 (fun r -> r.dest) t; "
    f"each (fun g -> laplace {EXACT} (count g)) (bound_groups_in ks 3 30 (fun r -> r.dest) t)",
    "sample ks = select_keys 2 0.000001 3 (fun r -> r.dest) t; "
    f"each (fun g -> laplace {EXACT} (count g)) (groupby_in ks (fun r -> r.dest) (bound_rows 30 t))",
    f'each (fun g -> laplace {EXACT} (count g)) (groupby_in ["D0", "XX"] (fun r -> r.dest) (bound_rows 11 t))',
]


@pytest.mark.parametrize("body", UNCHOSEN)
def test_dask_bound_groups_and_groupby_in_release_what_pandas_releases(body, tmp_path, dask_scheduler):
    table = flights({f"P{i}": 3 + i % 9 for i in range(70)})
    assert rounded(run_on_dask(body, table, tmp_path, dask_scheduler)) == rounded(run(body, table).value)


def test_dask_bound_groups_keeps_m_parts_and_c_rows_of_each_unit(tmp_path, dask_scheduler):
    table = flights({f"P{i}": 30 for i in range(20)})  # each plane: 10 flights from each origin
    body = f"each (fun g -> laplace {EXACT} (count g)) (bound_groups 2 4 (fun r -> r.origin) t)"
    counts = rounded(run_on_dask(body, table, tmp_path, dask_scheduler))
    assert sum(counts.values()) == 20 * 2 * 4 and all(v % 4 == 0 for v in counts.values())
    body = f'each (fun g -> laplace {EXACT} (count g)) (groupby_in ["D0", "D1", "D2"] (fun r -> r.dest) (bound_rows 2 t))'
    assert sum(rounded(run_on_dask(body, table, tmp_path, dask_scheduler)).values()) == 20 * 2


def test_dask_bound_groups_reads_the_same_choice_in_every_pass(tmp_path, dask_scheduler):
    """A part's size (one pass for every part) and its sum (a pass per part) see the same rows:
    a unit's parts are chosen once, however many passes read them."""
    table = flights({f"P{i}": 30 for i in range(20)})
    body = (f"each (fun g -> sample n = laplace {EXACT} (count g); sample s = laplace {EXACT} "
            "(sum (map (fun r -> 1) g)); return (n, s)) (bound_groups 1 3 (fun r -> r.origin) t)")
    out = rounded(run_on_dask(body, table, tmp_path, dask_scheduler))
    assert all(n == total for n, total in out.values()) and sum(n for n, _ in out.values()) == 20 * 3


@pytest.mark.parametrize("body, refused", [
    ("laplace 1 (count (bound_rows 2 (map (fun r -> r) t)))", "map"),
])
def test_dask_refuses_what_it_does_not_run_on_a_table_with_a_unit_before_reading(body, refused, tmp_path):
    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    prog = tmp_path / "p.fz"
    prog.write_text(SCHEMA + "function main (t : bag F) { " + body + " }\n")
    r = CliRunner().invoke(app, ["run", str(prog), "--engine", "dask", "--data", str(tmp_path / "nowhere"),
                                 "--budget", "10", "--ledger", str(tmp_path / "l.sqlite")], catch_exceptions=False)
    assert r.exit_code == 4 and "E2101" in r.output and f"primitive {refused}" in r.output, r.output
    assert not (tmp_path / "l.sqlite").exists()


def test_the_stdlib_one_liner_selects_keys_then_counts_per_key():
    from fuzzpy.checking.program import check_source

    table = flights({f"P{i}": 3 for i in range(60)})
    src = ('import "stdlib/units.fz"\n' + SCHEMA + "function main (t : bag F) { unit_keyed_counts 2 0.000001 "
           + EXACT + " 3 1 (fun r -> r.dest) t }\n")
    report = check_source(src, "k.fz")
    assert report.ok and report.approx_delta == pytest.approx(1e-6)
    out = run_program(report.entry_instance, {"t": table}, RandomSource.seeded(1)).value
    assert {k: round(v) for k, v in out.items()} == {"D0": 60, "D1": 60, "D2": 60}
