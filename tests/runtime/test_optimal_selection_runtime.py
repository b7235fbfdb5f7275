"""select_keys_optimal at run time (rule Optimal partition selection): on pandas and on the Dask
engine it releases the keys many units have and not a lone unit's, counting each unit in at most m
keys; its release record names it, with the units a key needs for a 95% chance."""

from __future__ import annotations

import json
from fractions import Fraction

import pandas as pd
import pytest

from fuzzpy.accounting.partition_selection import keep_curve
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource
from tests.conftest import check

SCHEMA = "schema F unit plane { plane : string, dest : string }\n"
SELECT = "select_keys_optimal 2 0.000001 2 (fun r -> r.dest) t"


def table() -> pd.DataFrame:
    """80 planes fly to D0 and D1 and one more destination each (D2 or D3); one plane alone flies
    30 times to LONE (a unit counted in at most 2 keys keeps 2 of its destinations)."""
    rows = [(f"P{i}", d) for i in range(80) for d in ("D0", "D1", f"D{2 + i % 2}")]
    rows += [("Z", "LONE")] * 30
    return pd.DataFrame(rows, columns=["plane", "dest"])


def test_pandas_releases_the_keys_many_units_have_and_records_the_release():
    report = check(SCHEMA + f"function main (t : bag F) {{ {SELECT} }}")
    assert report.ok, report.diagnostics
    for seed in range(5):
        result = run_program(report.entry_instance, {"t": table()}, RandomSource.seeded(seed))
        assert "LONE" not in result.value and {"D0", "D1"} <= set(result.value), result.value
        (release,) = result.releases
        assert release.mechanism == "select_keys_optimal" and release.extra["delta"] == pytest.approx(1e-6)
        assert release.accuracy.what == "units a key needs to be released"
        assert release.accuracy.bound == keep_curve(Fraction(2), Fraction(1, 10**6), 2, Fraction(1)).units_for(
            Fraction(19, 20))


def test_dask_selects_the_same_clear_keys_as_pandas(tmp_path, dask_scheduler):
    pytest.importorskip("distributed")
    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    data = tmp_path / "pq"
    data.mkdir()
    frame = table()
    for i in range(3):  # a unit's rows spread over several files: the engine brings them together
        frame.iloc[i::3].to_parquet(data / f"part-{i}.parquet", index=False)
    frame.to_csv(tmp_path / "flights.csv", index=False)
    prog = tmp_path / "p.fz"
    prog.write_text(SCHEMA + f"function main (t : bag F) {{ {SELECT} }}\n")
    outs = []
    for engine, source in ((["--engine", "dask", "--scheduler", dask_scheduler], data), ([], tmp_path / "flights.csv")):
        r = CliRunner().invoke(app, ["run", str(prog), *engine, "--data", str(source), "--budget", "3",
                                     "--delta", "1e-5", "--seed", "1", "--format", "json"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        outs.append(json.loads(r.stdout)["result"])
    for keys in outs:
        assert "LONE" not in keys and {"D0", "D1"} <= set(keys), keys
