"""Labels in the user's terms: a bin's key shows the interval it stands for, each component of a
crosstab's key has its own CSV / DataFrame column named after the field the key function read."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import fuzzpy
from fuzzpy.interfaces.cli import app

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
DATA = EX / "data" / "adult_sample.csv"
runner = CliRunner()

BINNED = f"""import "{EX / 'schemas' / 'adult.fz'}"
param eps : num = 0.5;
function main (db : bag Adult) {{
  each (fun g -> sample h = laplace eps (count g); return h) (groupby (fun r -> bin 10 r.age) db)
}}
"""


def fz(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_a_bin_key_is_labelled_by_its_interval(tmp_path):
    prog = tmp_path / "binned.fz"
    prog.write_text(BINNED)
    res = fz("run", prog, "--data", DATA, "--budget", 1, "--seed", 1, "--format", "csv")
    assert res.exit_code == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["label"] for r in rows] == [f"h[[{10 * k}, {10 * k + 10})]" for k in range(1, 10)]
    assert [r["age"] for r in rows] == [f"[{10 * k}, {10 * k + 10})" for k in range(1, 10)]


def test_the_bins_result_keeps_the_programs_keys(tmp_path):
    prog = tmp_path / "binned.fz"
    prog.write_text(BINNED)
    result = fuzzpy.run(prog, data=pd.read_csv(DATA), budget=1, seed=1)
    assert list(result.value) == [str(k) for k in range(1, 10)]


def test_a_crosstab_has_one_csv_column_per_key_component():
    res = fz("run", EX / "cookbook" / "crosstab.fz", "--data", DATA, "--budget", 1, "--seed", 1, "--format", "csv")
    assert res.exit_code == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert list(rows[0])[:3] == ["label", "sex", "income"]
    assert [(r["label"], r["sex"], r["income"]) for r in rows] == [
        ("table[Male, <=50K]", "Male", "<=50K"), ("table[Male, >50K]", "Male", ">50K"),
        ("table[Female, <=50K]", "Female", "<=50K"), ("table[Female, >50K]", "Female", ">50K")]


def test_the_data_frame_has_the_same_key_columns_as_the_csv():
    result = fuzzpy.run(EX / "cookbook" / "crosstab.fz", data=pd.read_csv(DATA), budget=1, seed=1)
    frame = result.to_frame()
    assert list(frame.columns)[:3] == ["label", "sex", "income"]
    assert list(frame["sex"]) == ["Male", "Male", "Female", "Female"]


def test_a_cdfs_counts_are_labelled_by_their_intervals_and_its_totals_by_their_boundary():
    res = fz("run", EX / "cookbook" / "cdf.fz", "--data", DATA, "--budget", 1, "--seed", 1, "--format", "csv")
    assert res.exit_code == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["label"] for r in rows] == [
        "below[(-inf, 30)]", "below[[30, 40)]", "below[[40, 50)]", "below[[50, 60)]", "below[[60, 70)]",
        "below[[70, 80)]", "below[[80, inf)]",
        "below[< 30]", "below[< 40]", "below[< 50]", "below[< 60]", "below[< 70]", "below[< 80]"]
    assert rows[1]["interval"] == "[30, 40)" and rows[8]["interval"] == "< 40"


def test_a_cdfs_cumulative_counts_have_a_band_from_the_counts_accuracy():
    result = fuzzpy.run(EX / "cookbook" / "cdf.fz", data=pd.read_csv(DATA), budget=1, seed=1)
    totals = [e for e in result.estimates if e.kind == "cumulative"]
    assert [e.value for e in totals] == pytest.approx(list(result.value))
    running = 0.0
    for k, (e, count) in enumerate(zip(totals, result.releases), start=1):
        running += count.value
        low, high = e.interval
        half = (high - low) / 2
        assert low < e.value < high and e.value == pytest.approx(running)
        # each count within its bound at 0.05 / 6 (Laplace, scale 2): the k-th total within k of them
        assert k * 2 * math.log(6 / 0.05) <= half == pytest.approx(k * 2 * math.log(6 / 0.05), rel=1e-3)
        assert "95% band (all 6 at once)" in e.words


def test_the_quickstarts_mean_is_an_estimate_named_after_its_two_releases():
    res = fz("run", EX / "quickstart.fz", "--data", DATA, "--budget", 1, "--seed", 1)
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert any(line.startswith("  n = 1860.9  (epsilon 0.1; within +-29.96") for line in lines)
    assert any(line.startswith("  total = 73107  (epsilon 0.1; within +-2697") for line in lines)
    (mean,) = [line for line in lines if line.startswith("  total / n = ")]
    assert "(95% interval [36.77, 41.91] for the mean of the values clipped to [17, 90]; from total and n)" in mean


def test_every_surface_shows_a_bin_as_its_interval(tmp_path):
    prog = tmp_path / "binned.fz"
    prog.write_text(BINNED)
    result = fuzzpy.run(prog, data=pd.read_csv(DATA), budget=1, seed=1)
    assert result.releases[0].label == "h[[10, 20)]"
    frame = result.to_frame()
    assert list(frame["age"])[:2] == ["[10, 20)", "[20, 30)"]
    assert "h[[10, 20)]" in result._repr_html_()
    res = fz("run", prog, "--data", DATA, "--budget", 1, "--seed", 1, "--format", "json")
    rel = json.loads(res.stdout)["releases"][0]
    assert rel["label"] == "h[[10, 20)]" and rel["key_columns"] == {"age": "[10, 20)"} and rel["keys"] == ["1"]
