"""A release in an `each` states its epsilon per group and the cost of all its groups together
(the checker's elimination of the parts): eps for a groupby of a row table (parallel
composition), eps*m*c for bound_groups; the same on every surface (text, JSON, CSV,
to_frame, notebook HTML).  A release outside an `each` states its own epsilon only."""

from __future__ import annotations

import csv
import io
import json
from fractions import Fraction
from pathlib import Path

import pandas as pd

import fuzzpy
from fuzzpy.render.notebook import result_html
from tests.cli_runs import data, fz, prog

ROOT = Path(__file__).resolve().parents[2]
PER_PLANE = ROOT / "examples" / "cookbook" / "per_plane.fz"
FLIGHTS = ROOT / "examples" / "data" / "flights_sample.csv"
RUN = ["run", PER_PLANE, "--data", FLIGHTS, "--budget", "1", "--seed", "1"]


def test_bounded_groups_lines_state_the_histograms_cost_m_times_c_eps_in_text():
    res = fz(*RUN)
    assert res.exit_code == 0, res.output
    lines = [line for line in res.stdout.splitlines() if line.strip().startswith("per_origin[")]
    assert len(lines) == 3
    for line in lines:
        assert "(epsilon 0.01 per group; the 3 groups cost epsilon 0.6 together;" in line
    delayed = next(line for line in res.stdout.splitlines() if line.strip().startswith("delayed ="))
    assert "(epsilon 0.1; within" in delayed


def test_json_gives_each_release_in_an_each_its_groups_cost_together():
    res = fz(*RUN, "--format", "json")
    releases = json.loads(res.stdout)["releases"]
    per_origin = [r for r in releases if r["label"].startswith("per_origin[")]
    assert [r["together"] for r in per_origin] == [{"groups": 3, "epsilon": 0.6, "epsilon_exact": "3/5"}] * 3
    assert all(r["epsilon_exact"] == "1/100" for r in per_origin)
    (delayed,) = [r for r in releases if r["label"] == "delayed"]
    assert delayed["together"] is None


def test_csv_column_epsilon_together_is_what_adds_up_to_the_runs_epsilon():
    res = fz(*RUN, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["epsilon_together"] for r in rows] == ["0.6", "0.6", "0.6", ""]
    # one histogram counted once, plus the release outside it: the run's epsilon 0.7
    histograms = {r["epsilon_together"] for r in rows if r["epsilon_together"]}
    outside = [Fraction(r["epsilon"]) for r in rows if not r["epsilon_together"]]
    assert sum(map(Fraction, histograms)) + sum(outside) == Fraction(7, 10)


def test_to_frame_and_notebook_html_state_the_same_cost_together():
    result = fuzzpy.run(str(PER_PLANE), data=pd.read_csv(FLIGHTS), budget=1, seed=1)
    frame = result.to_frame()
    assert list(frame["epsilon_together"][:3]) == [0.6] * 3 and pd.isna(frame["epsilon_together"][3])
    assert [r.epsilon_together for r in result.releases] == [Fraction(3, 5)] * 3 + [None]
    assert [r.groups for r in result.releases] == [3, 3, 3, None]
    html = result_html(result)
    assert html.count("epsilon 0.01 per group; the 3 groups cost epsilon 0.6 together") == 3


def test_a_groupby_of_a_row_table_costs_its_per_group_epsilon_in_all(tmp_path):
    src = prog(tmp_path, "function main (db : bag T) { sample h = each (fun g -> laplace 0.5 (count g)) "
                         "(groupby (fun r -> r.k) db); return h }")
    res = fz("run", src, "--data", data(tmp_path, "1,a,true,1\n9,b,false,3\n"), "--budget", "1", "--seed", "1",
             "--format", "json")
    body = json.loads(res.stdout)
    assert body["epsilon_exact"] == "1/2"
    assert [r["together"]["epsilon_exact"] for r in body["releases"]] == ["1/2"] * 3
    assert [r["together"]["groups"] for r in body["releases"]] == [3] * 3
