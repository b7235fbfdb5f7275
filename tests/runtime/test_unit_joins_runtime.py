"""Rule Unit join public at run time: join_public of a table with a privacy unit gives every result
row the unit of its row of the private table, so a bound after the join keeps at most k rows per
unit of the private table (not per row of it), on pandas and on Dask."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.kernels.joins import _join_units
from fuzzpy.runtime.samplers import RandomSource
from fuzzpy.runtime.unit_rows import UnitRows
from tests.conftest import check

SCHEMAS = ('schema F unit plane { plane : string, maker : cat{"A", "B"}, n : int[0, 9] }\n'
           'public schema Models { maker : cat{"A", "B"} at most 3 per value, model : string }\n')
MAIN = "function main (t : bag F) (m : bag Models) "
EXACT = "1000000"  # an epsilon so large that a count's noise rounds away


def flights(rows_per_plane: dict[str, int]) -> pd.DataFrame:
    rows = [(p, "AB"[i % 2], i % 10) for p, k in rows_per_plane.items() for i in range(k)]
    return pd.DataFrame(rows, columns=["plane", "maker", "n"])


MODELS = pd.DataFrame({"maker": ["A", "A", "A", "B"], "model": ["a1", "a2", "a3", "b1"]})


def run(body: str, table: pd.DataFrame, seed: int = 1):
    report = check(SCHEMAS + MAIN + "{ " + body + " }")
    assert report.ok, [(d.code, d.message) for d in report.diagnostics]
    return run_program(report.entry_instance, {"t": table, "m": MODELS}, RandomSource.seeded(seed))


def test_each_joined_row_keeps_the_unit_its_row_carries():
    rows = pd.DataFrame({"plane": ["x", "y", "z"], "maker": ["A", "B", "C"]})
    # the units travel beside the rows: a map may have rewritten the column, the unit stays
    out = _join_units(UnitRows(rows, np.array(["P1", "P2", "P3"], dtype=object)), MODELS, "maker", "maker", True)
    assert list(out.units) == ["P1", "P1", "P1", "P2"]
    assert list(out.rows.columns) == ["plane", "maker", "model"] and len(out.rows) == 4


@pytest.mark.parametrize("k", [1, 2, 5])
def test_bound_rows_after_the_join_keeps_at_most_k_rows_per_unit(k):
    # A: 4 flights (A, B, A, B) -> 3 + 1 + 3 + 1 = 8 joined rows; B: 1 flight (A) -> 3 rows; C: 2 -> 4 rows
    table = flights({"A": 4, "B": 1, "C": 2})
    value = run(f'laplace {EXACT} (count (bound_rows {k} (join_public "maker" "maker" t m)))', table).value
    assert round(value) == min(k, 8) + min(k, 3) + min(k, 4)


def test_a_filter_after_the_join_keeps_each_rows_unit():
    table = flights({"A": 4, "B": 1})
    value = run(f'laplace {EXACT} (count (bound_rows 1 (filter (fun r -> r.model == "a2") '
                '(join_public "maker" "maker" t m))))', table).value
    assert round(value) == 2, "each plane has a2 rows; one kept per plane"


def test_dask_joins_a_unit_table_with_a_public_one_like_pandas(tmp_path, dask_scheduler):
    pytest.importorskip("distributed")
    import json

    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    table = flights({f"P{i}": 1 + i % 4 for i in range(40)})
    data = tmp_path / "t"
    data.mkdir()
    for i in range(3):  # a unit's rows spread over several files
        table.iloc[i::3].to_parquet(data / f"part-{i}.parquet", index=False)
    MODELS.to_csv(tmp_path / "m.csv", index=False)
    prog = tmp_path / "p.fz"
    prog.write_text(SCHEMAS + MAIN + "{ laplace " + EXACT + ' (count (bound_rows 2 (join_public "maker" "maker" t m))) }\n')
    r = CliRunner().invoke(app, ["run", str(prog), "--engine", "dask", "--scheduler", dask_scheduler, "--data",
                                 str(data), "--public", f"m={tmp_path / 'm.csv'}", "--budget", "3000000", "--seed", "1",
                                 "--format", "json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert round(json.loads(r.stdout)["result"]) == 2 * 40, "every plane has at least 3 joined rows: 2 kept each"
