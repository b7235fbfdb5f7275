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


# ---- every part's aggregate in one pass (dask_tables.SharedPass) ----------------------------------

PER_PART = """schema Flight { carrier : string, tailnum : string, arr_delay : num[-60, 240], distance : num[0, 5000] }
public schema Plane {
  tailnum : string unique,
  manufacturer : cat{"BOEING", "AIRBUS", "AIRBUS INDUSTRIE", "BOMBARDIER INC", "EMBRAER",
                     "MCDONNELL DOUGLAS", "MCDONNELL DOUGLAS AIRCRAFT CO", "OTHER"} default "OTHER",
  seats : int[2, 450],
}
param lo : num = 100;
function main (flights : bag Flight) (planes : bag Plane) {
  let parts = groupby (fun r -> r.manufacturer) (join_public "tailnum" "tailnum" flights planes);
  each (fun g ->
    let (late, early) = split (fun r -> r.arr_delay > 0) g;
    sample n = laplace 1 (count (filter (fun r -> r.seats >= lo) g));
    sample s = laplace 1 (sum (map (fun r -> clip 0 5000 r.distance) late));
    sample e = laplace 1 (count early);
    return (n, s, e)) parts
}
"""


@pytest.fixture()
def passes(monkeypatch) -> list:
    """The per-partition function of every pass the Dask engine makes over a table."""
    from fuzzpy.runtime.engines.dask_engine import DaskEngine

    seen: list = []
    partials = DaskEngine.partials

    def counted(self, frame, fn, *args):
        seen.append(fn.__name__)
        return partials(self, frame, fn, *args)

    monkeypatch.setattr(DaskEngine, "partials", counted)
    return seen


@pytest.mark.parametrize("name, tables", [
    ("seats_by_manufacturer", ["--public", f"planes={DATA / 'planes.csv'}"]),
    ("seats_by_manufacturer_private", ["--data", f"planes={DATA / 'planes.csv'}"]),
])
def test_each_sum_over_the_parts_of_a_join_is_one_pass(name, tables, flights_parts, dask_scheduler, passes):
    """group_sum over 8 manufacturers: the join (and the truncations' shuffles) computed once for
    the 8 sums, which release what the pandas engine releases under the same seed."""
    common = [*tables, "--budget", "1.1", "--seed", "5", "--format", "json"]
    prog = EXAMPLES / f"{name}.fz"
    pandas_run = _released(["run", prog, "--data", f"flights={DATA / 'flights_sample.csv'}", *common])
    assert passes == []
    dask_run = _released(["run", prog, "--engine", "dask", "--scheduler", dask_scheduler,
                          "--data", f"flights={flights_parts}", *common])
    assert dask_run == pandas_run and len(dask_run) == 8
    assert passes == ["_shared_partials"]


def test_aggregates_of_steps_from_each_part_are_one_pass_each(flights_parts, dask_scheduler, passes, tmp_path):
    """A filtered count, a sum of a mapped split and a count of the split's other side per part: one
    pass for each of the three, every part's released values those of the pandas engine."""
    prog = tmp_path / "per_part.fz"
    prog.write_text(PER_PART)
    common = ["--public", f"planes={DATA / 'planes.csv'}", "--budget", "100", "--seed", "9", "--format", "json"]
    pandas_run = _released(["run", prog, "--data", f"flights={DATA / 'flights_sample.csv'}", *common])
    dask_run = _released(["run", prog, "--engine", "dask", "--scheduler", dask_scheduler,
                          "--data", f"flights={flights_parts}", *common])
    assert dask_run == pandas_run and len(dask_run) == 24
    assert passes == ["_shared_partials"] * 3


def test_a_part_whose_row_function_differs_from_its_siblings_has_its_own_pass():
    """Row functions made anew per part share an identity when they compute the same thing (the
    same code reading the same constants and functions), never when a value they read differs."""
    from fuzzpy.runtime.kernels.bags import function_identity
    from fuzzpy.runtime.values import Closure
    from fuzzpy.typesystem import ir as I

    inner = I.IVar("x")
    body = I.IPrim("add", [I.IApply(I.IVar("f"), [I.IVar("r")]), I.IVar("c")])

    def made(c, f):  # as `each` makes it for a part: its own environment, its own part `g`
        return Closure({"c": c, "g": object(), "f": f}, ["r"], body)

    table = object()
    one = function_identity(made(1, Closure({}, ["x"], inner)))
    assert one is not None
    assert one == function_identity(made(1, Closure({}, ["x"], inner)))  # the same function, made anew
    assert one != function_identity(made(2, Closure({}, ["x"], inner)))  # another constant
    assert function_identity(made(1, table)) == function_identity(made(1, table))  # the same value read
    assert function_identity(made(1, table)) != function_identity(made(1, object()))  # another value read


def _halves(partition):
    return [partition.iloc[:1], partition.iloc[1:]]


def _stop_on_negative(rows):
    if (rows["x"] < 0).any():
        raise ValueError("a row function stopping on these rows")
    return rows


def _rows(rows):
    return len(rows)


def test_a_sibling_failing_in_the_shared_pass_is_computed_on_its_own():
    """The asked part fails as its own pass would; a sibling that fails is left to its own pass
    (None), its siblings' partials kept."""
    from fuzzpy.runtime.engines.dask_tables import SharedPass, Step

    class Engine:
        passes = 0

        def partials(self, frame, fn, *args):
            Engine.passes += 1
            return [fn(p, *args) for p in frame]

    class Halves(SharedPass):
        engine, k = Engine(), 2
        frame = [pd.DataFrame({"x": [1, -1]}), pd.DataFrame({"x": [2, 3, 4]})]

        def splitter(self):
            return Step(None, _halves, ())

    steps, count = (Step("stop", _stop_on_negative, ()),), Step("rows", _rows, ())
    halves = Halves()
    assert halves.shared_partials(0, steps, count) == [1, 1]
    assert halves.shared_partials(1, steps, count) is None  # its own pass will stop the run
    assert Engine.passes == 1
    with pytest.raises(ValueError):
        Halves().shared_partials(1, steps, count)
