"""`fuzzpy run --plot FILE.png`: a chart of what the analysis is about, chosen from what the run
released (pipeline/output.py `release_rows`).  matplotlib is an optional extra: pip install fuzzpy[plot].

* estimated means (`group_mean`, `noisy_mean`): the means alone, each with its 95% interval
  (not the sums and counts they come from, which are on another scale);
* cumulative counts (`cdf_by_intervals`): the cumulative distribution as a step line with its 95% band;
* quantiles (`quantile`, `quantiles`, `median`): each chosen value with its neighbouring
  candidates (the grid's resolution) and its accuracy in ranks, the unit the mechanism bounds;
* anything else: the released numbers as bars with their 95% intervals, one panel per released
  name (a count and a sum are never drawn on one axis).

`chart_of` computes what is drawn (testable without matplotlib), `plot_releases` draws it."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import Diagnostic, FuzzError

MAX_PANELS = 6


@dataclass
class Panel:
    """One axis: a point (or bar) per value, with its interval (None: the release states none)."""

    ticks: list[str]
    values: list[float]
    intervals: list[Optional[tuple[float, float]]]
    xlabel: str
    ylabel: str
    notes: list[str] = field(default_factory=list)   # per value, written beside it (a quantile's rank accuracy)
    grid: list[Optional[tuple[float, float]]] = field(default_factory=list)  # a quantile's neighbouring candidates
    positions: list[float] = field(default_factory=list)  # x of each value on a numeric axis (a CDF's boundaries)


@dataclass
class Chart:
    kind: str            # "means", "cdf", "quantiles", "bars"
    title: str
    panels: list[Panel]


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _interval(r: dict) -> Optional[tuple[float, float]]:
    return None if r["low"] == "" or r["high"] == "" else (float(r["low"]), float(r["high"]))


def _tick(r: dict) -> str:
    keys = r.get("keys") or {}
    return ", ".join(keys.values()) if keys else r["label"]


def _key_axis(rows: list[dict]) -> str:
    columns = list(dict.fromkeys(c for r in rows for c in (r.get("keys") or {})))
    return ", ".join(columns)


def _what(r: dict) -> str:
    """The quantity an interval is about, from the statement (`the mean of the values clipped to [1, 99]`)."""
    words = r.get("accuracy") or ""
    return words.split(" for ", 1)[1] if " for " in words else ""


def _means(rows: list[dict]) -> list[Panel]:
    panels = []
    for name, group in _by_name(rows):
        what = _what(group[0])
        panels.append(Panel([_tick(r) for r in group], [float(r["value"]) for r in group],
                            [_interval(r) for r in group], _key_axis(group),
                            f"{name}: {what}" if what else f"{name} (mean)"))
    return panels


def _cdf(rows: list[dict]) -> list[Panel]:
    """The boundary of each total is its key (`< 30`): the x axis is the boundaries' scale."""
    panels = []
    for name, group in _by_name(rows):
        ticks = [_tick(r).removeprefix("< ") for r in group]
        panels.append(Panel(ticks, [float(r["value"]) for r in group], [_interval(r) for r in group],
                            "boundary", f"{name}: number of values below the boundary",
                            positions=[float(t) for t in ticks]))
    return panels


def _quantiles(rows: list[dict]) -> list[Panel]:
    ticks, values, notes, grid = [], [], [], []
    for r in rows:
        rank = r["rank"]
        ticks.append(f"{r['label']} (q = {rank['quantile']:g})")
        values.append(float(r["value"]))
        below, above = rank.get("neighbours") or (None, None)
        grid.append(tuple(float(r["value"] if c is None else c) for c in (below, above)))
        notes.append(f"rank error <= best + {rank['bound']:.0f} ({100 * (1 - rank['beta']):g}%)")
    name = rows[0]["name"]
    return [Panel(ticks, values, [None] * len(rows), f"{name}: chosen value (bracket: neighbouring candidates)",
                  "", notes, grid)]


def _ticks(group: list[dict]) -> list[str]:
    """Each value's key, or its whole label when keys repeat (the rounds of k-means: `n #2[0]`)."""
    ticks = [_tick(r) for r in group]
    return [_short(t) for t in (ticks if len(set(ticks)) == len(ticks) else [r["label"] for r in group])]


def _bars(rows: list[dict]) -> list[Panel]:
    """A value without an interval (an exponential mechanism's choice) is noted with its statement."""
    return [Panel(_ticks(group), [float(r["value"]) for r in group], [_interval(r) for r in group],
                  _key_axis(group), f"{_short(name, 28)} (released)",
                  [r.get("accuracy") or "" if _interval(r) is None else "" for r in group])
            for name, group in _by_name(rows)][:MAX_PANELS]


def _short(name: str, width: int = 40) -> str:
    """A name that fits an axis: a long one (the source of an unnamed call) cut with an ellipsis."""
    return name if len(name) <= width else name[:width - 3] + "..."


def _by_name(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r.get("name") or r["label"], []).append(r)
    return list(groups.items())


def chart_of(rows: list[dict], title: str) -> Chart:
    """The chart for a run's rows (`release_rows`): what the analysis released, in the user's terms."""
    nums = [r for r in rows if _number(r["value"])]
    if not nums:
        raise FuzzError(Diagnostic("E0701", "--plot: this run released no numbers to plot"))
    kinds = {r.get("kind", "release") for r in nums}
    for kind, chart, make in (("mean", "means", _means), ("cumulative", "cdf", _cdf),
                              ("quantile", "quantiles", _quantiles)):
        if kind in kinds:
            return Chart(chart, title, make([r for r in nums if r.get("kind") == kind]))
    return Chart("bars", title, _bars(nums))


def plot_releases(rows: list[dict], path: Path, title: str) -> Chart:
    """Draws the run's chart into `path` (PNG); returns what it drew."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FuzzError(Diagnostic("E0701", "--plot needs matplotlib: pip install 'fuzzpy[plot]'")) from None
    chart = chart_of(rows, title)
    wide = chart.kind == "quantiles" or any(n for p in chart.panels for n in p.notes)
    width = 7.0 if wide else max(4.5, max(0.55 * len(p.values) + 2.5 for p in chart.panels))
    fig, axes = plt.subplots(len(chart.panels), 1, figsize=(width, 3.4 * len(chart.panels)), squeeze=False,
                             layout="constrained")  # room for the two-line title and a panel's note
    draw = {"means": _draw_means, "cdf": _draw_cdf, "quantiles": _draw_quantiles, "bars": _draw_bars}[chart.kind]
    for ax, panel in zip(axes[:, 0], chart.panels):
        draw(ax, panel)
        ax.grid(axis="y" if chart.kind != "quantiles" else "x", alpha=0.3)
    fig.suptitle(f"{title}\n{_CAPTIONS[chart.kind]}", fontsize=9)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return chart


_CAPTIONS = {"means": "means with their 95% intervals", "cdf": "cumulative counts with their 95% band",
             "quantiles": "quantiles with their accuracy in ranks",
             "bars": "released values with their 95% intervals (where they state one)"}


def _errors(panel: Panel) -> list[list[float]]:
    return [[v - iv[0] if iv else 0 for v, iv in zip(panel.values, panel.intervals)],
            [iv[1] - v if iv else 0 for v, iv in zip(panel.values, panel.intervals)]]


def _labels(ax: Any, panel: Panel) -> None:
    ax.set_xticks(range(len(panel.ticks)), panel.ticks, rotation=0 if len(panel.ticks) <= 4 else 45,
                  ha="center" if len(panel.ticks) <= 4 else "right", fontsize=8)
    ax.set_xlabel(panel.xlabel, fontsize=8)
    ax.set_ylabel(textwrap.fill(panel.ylabel, 34), fontsize=8)


def _draw_means(ax: Any, panel: Panel) -> None:
    ax.errorbar(range(len(panel.values)), panel.values, yerr=_errors(panel), fmt="o", capsize=6, color="#4c72b0")
    for x, (v, iv) in enumerate(zip(panel.values, panel.intervals)):
        ax.annotate(f"{v:.4g}" + (f"\n[{iv[0]:.4g}, {iv[1]:.4g}]" if iv else ""), (x, v), xytext=(10, 0),
                    textcoords="offset points", va="center", fontsize=7)
    ax.set_xlim(-0.5, len(panel.values) - 0.5)
    _labels(ax, panel)


def _draw_cdf(ax: Any, panel: Panel) -> None:
    xs = panel.positions
    lows = [iv[0] if iv else v for v, iv in zip(panel.values, panel.intervals)]
    highs = [iv[1] if iv else v for v, iv in zip(panel.values, panel.intervals)]
    ax.fill_between(xs, lows, highs, color="#4c72b0", alpha=0.25, label="95% band")
    ax.plot(xs, panel.values, "o-", color="#4c72b0", label="cumulative count")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_ylim(bottom=min(0.0, *lows))
    ax.set_xticks(xs, panel.ticks, fontsize=8)
    ax.set_xlabel(panel.xlabel, fontsize=8)
    ax.set_ylabel(textwrap.fill(panel.ylabel, 34), fontsize=8)


def _draw_quantiles(ax: Any, panel: Panel) -> None:
    ys = range(len(panel.values))
    for y, v, (lo, hi), note in zip(ys, panel.values, panel.grid, panel.notes):
        ax.plot([lo, hi], [y, y], "|-", color="#999999", markersize=12)
        ax.plot([v], [y], "o", color="#4c72b0")
        ax.annotate(f"{v:g}: {note}", (v, y), xytext=(0, 9), textcoords="offset points", ha="center", fontsize=7)
    ax.set_yticks(list(ys), panel.ticks, fontsize=8)
    ax.set_ylim(-0.6, len(panel.values) - 0.4)
    lo, hi = min(g[0] for g in panel.grid), max(g[1] for g in panel.grid)
    pad = max(hi - lo, 1.0) * 0.15
    ax.set_xlim(lo - pad, hi + pad)
    ax.invert_yaxis()
    ax.set_xlabel(panel.xlabel, fontsize=8)


def _draw_bars(ax: Any, panel: Panel) -> None:
    if any(iv is None for iv in panel.intervals):  # no interval to draw: the values as points, with their statement
        ax.plot(range(len(panel.values)), panel.values, "o", color="#4c72b0")
        notes = sorted({n for n in panel.notes if n})
        if notes:
            ax.set_title("no interval: " + "; ".join(notes)[:160], fontsize=7, wrap=True)
    else:
        ax.bar(range(len(panel.values)), panel.values, yerr=_errors(panel), capsize=3, color="#4c72b0")
    _labels(ax, panel)
