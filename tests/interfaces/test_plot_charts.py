"""`--plot` draws what the analysis is about: means with their intervals (not the sums and
counts), quantiles with their accuracy in ranks, other releases one panel per name, with axes
named in the user's terms.  The chart's data is checked as computed before drawing, and the PNG
on its structure (size, not blank), never on a pixel hash."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuzzpy.interfaces import plot
from fuzzpy.interfaces.cli import app

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
DATA = EX / "data" / "adult_sample.csv"
runner = CliRunner()


def drawn(program: Path, png: Path, monkeypatch) -> plot.Chart:
    charts = []
    original = plot.plot_releases
    monkeypatch.setattr(plot, "plot_releases", lambda rows, path, title: charts.append(original(rows, path, title)))
    res = runner.invoke(app, ["run", str(program), "--data", str(DATA), "--budget", "1", "--seed", "1",
                              "--plot", str(png)])
    assert res.exit_code == 0, res.stderr
    (chart,) = charts
    return chart


def picture(png: Path) -> tuple[int, int]:
    import matplotlib.image

    pixels = matplotlib.image.imread(png)
    assert pixels.std() > 0.05  # something is drawn
    return pixels.shape[0], pixels.shape[1]


def test_grouped_means_are_drawn_alone_with_their_intervals(tmp_path, monkeypatch):
    chart = drawn(EX / "cookbook" / "grouped_means.fz", tmp_path / "m.png", monkeypatch)
    assert chart.kind == "means"
    (panel,) = chart.panels
    assert panel.ticks == ["Male", "Female"] and panel.xlabel == "sex"
    assert panel.ylabel == "hours: the mean of the values clipped to [1, 99]"
    for v, (low, high) in zip(panel.values, panel.intervals):
        assert 1 <= low < v < high <= 99 and high - low < 10
    assert picture(tmp_path / "m.png")[0] > 200


def test_quantiles_show_their_rank_accuracy_and_the_neighbouring_candidates(tmp_path, monkeypatch):
    chart = drawn(EX / "cookbook" / "quantiles.fz", tmp_path / "q.png", monkeypatch)
    assert chart.kind == "quantiles"
    (panel,) = chart.panels
    assert panel.ticks == ["quartiles #1 (q = 0.25)", "quartiles #2 (q = 0.5)", "quartiles #3 (q = 0.75)"]
    assert panel.values == sorted(panel.values)
    for v, (below, above), note in zip(panel.values, panel.grid, panel.notes):
        assert below == v - 2 and above == v + 2  # the grid is every second year
        assert note.startswith("rank error <= best + ") and note.endswith("(95%)")
    picture(tmp_path / "q.png")


def test_a_crosstab_is_drawn_with_its_key_columns_on_the_axis(tmp_path, monkeypatch):
    chart = drawn(EX / "cookbook" / "crosstab.fz", tmp_path / "c.png", monkeypatch)
    assert chart.kind == "bars"
    (panel,) = chart.panels
    assert panel.xlabel == "sex, income" and panel.ticks[0] == "Male, <=50K"
    assert all(low < v < high for v, (low, high) in zip(panel.values, panel.intervals))
    picture(tmp_path / "c.png")


def test_releases_of_different_names_get_their_own_axes(tmp_path, monkeypatch):
    chart = drawn(EX / "cookbook" / "counts.fz", tmp_path / "s.png", monkeypatch)
    assert chart.kind == "bars"
    assert [p.ylabel for p in chart.panels] == ["seniors (released)", "rich_women (released)",
                                                "long_weeks (released)"]
    height, _ = picture(tmp_path / "s.png")
    assert height > 800  # three panels, one above the other


def test_the_quickstarts_mean_is_drawn_with_its_interval(tmp_path, monkeypatch):
    chart = drawn(EX / "quickstart.fz", tmp_path / "q.png", monkeypatch)
    assert chart.kind == "means"
    (panel,) = chart.panels
    assert panel.ylabel == "total / n: the mean of the values clipped to [17, 90]"
    ((low, high),) = panel.intervals
    assert 17 < low < panel.values[0] < high < 90
    picture(tmp_path / "q.png")


def test_a_run_without_numbers_has_nothing_to_plot():
    with pytest.raises(plot.FuzzError, match="released no numbers"):
        plot.chart_of([{"label": "top", "value": ["Sales"], "low": "", "high": ""}], "t")


def test_a_cdf_is_drawn_as_cumulative_counts_over_the_boundaries_with_a_band(tmp_path, monkeypatch):
    chart = drawn(EX / "cookbook" / "cdf.fz", tmp_path / "d.png", monkeypatch)
    assert chart.kind == "cdf"
    (panel,) = chart.panels
    assert panel.positions == [30, 40, 50, 60, 70, 80] and panel.xlabel == "boundary"
    assert panel.ylabel == "below: number of values below the boundary"
    assert panel.values == sorted(panel.values)
    widths = [high - low for low, high in panel.intervals]
    assert widths == sorted(widths) and widths[0] > 0  # the k-th total carries k noises
    picture(tmp_path / "d.png")
