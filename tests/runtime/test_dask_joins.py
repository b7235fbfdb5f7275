"""Joins on the Dask engine: the flights sample split into partitions, its public tables held by
the client; a join with a public table (a Dask merge) and a truncated private-private join (a
shuffle on the key, then the pandas engine's truncation per partition, then a Dask merge) release
what the pandas engine releases under the same seed, and a public table that breaks its declared
key is refused before the cluster reads a private row or anything is charged."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

distributed = pytest.importorskip("distributed")

from fuzzpy.interfaces.cli import app  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DATA = EXAMPLES / "data"
runner = CliRunner()


@pytest.fixture(scope="module")
def flights_parts(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("flights") / "csv"
    out.mkdir()
    frame = pd.read_csv(DATA / "flights_sample.csv", dtype=str, keep_default_na=False)
    size = -(-len(frame) // 4)
    for i in range(4):
        frame.iloc[i * size:(i + 1) * size].to_csv(out / f"part-{i:02d}.csv", index=False)
    return out


def _released(args: list) -> list:
    result = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [(r["label"], round(r["value"], 6)) for r in json.loads(result.stdout)["releases"]]


@pytest.mark.parametrize("name, tables", [
    ("seats_by_manufacturer", ["--public", f"planes={DATA / 'planes.csv'}"]),
    ("delay_by_airline", ["--public", f"airlines={DATA / 'airlines.csv'}"]),
    ("seats_by_manufacturer_private", ["--data", f"planes={DATA / 'planes.csv'}"]),
])
def test_a_join_on_dask_releases_what_pandas_releases(name, tables, flights_parts, dask_scheduler):
    common = [*tables, "--budget", "1.1", "--seed", "3", "--format", "json"]
    prog = EXAMPLES / f"{name}.fz"
    pandas_run = _released(["run", prog, "--data", f"flights={DATA / 'flights_sample.csv'}", *common])
    dask_run = _released(["run", prog, "--engine", "dask", "--scheduler", dask_scheduler,
                          "--data", f"flights={flights_parts}", *common])
    assert dask_run == pandas_run


def test_a_public_table_breaking_its_key_is_refused_on_dask_before_anything_is_charged(flights_parts, tmp_path,
                                                                                       dask_scheduler):
    doubled = tmp_path / "planes.csv"
    doubled.write_text((DATA / "planes.csv").read_text() + "N10156,EMBRAER,55\n")
    ledger = tmp_path / "ledger.sqlite"
    result = runner.invoke(app, ["run", str(EXAMPLES / "seats_by_manufacturer.fz"), "--engine", "dask",
                                 "--scheduler", dask_scheduler, "--data", f"flights={flights_parts}",
                                 "--public", f"planes={doubled}", "--budget", "1", "--ledger", str(ledger)],
                           catch_exceptions=False)
    assert result.exit_code != 0 and "E2303" in result.output and "'tailnum'" in result.output
    assert "N10156" not in result.output
    assert not ledger.exists() or "seats_by_manufacturer" not in runner.invoke(
        app, ["ledger", "show", "--ledger", str(ledger)]).output
