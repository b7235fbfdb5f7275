"""`fuzzpy run --plot FILE.png`: released numbers as bars with their 95% accuracy intervals as
error bars (histograms, crosstabs, CDFs). matplotlib is an optional extra: pip install fuzzpy[plot]."""

from __future__ import annotations

from pathlib import Path

from ..diagnostics import Diagnostic, FuzzError


def plot_releases(rows: list[dict], path: Path, title: str) -> None:
    """rows: label, value, low, high (floats or ""), as in `--format csv`."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FuzzError(Diagnostic("E0701", "--plot needs matplotlib: pip install 'fuzzpy[plot]'")) from None
    nums = [r for r in rows if isinstance(r["value"], (int, float)) and not isinstance(r["value"], bool)]
    if not nums:
        raise FuzzError(Diagnostic("E0701", "--plot: this run released no numbers to plot"))
    labels = [r["label"] for r in nums]
    values = [r["value"] for r in nums]
    err = [[v - r["low"] if r["low"] != "" else 0 for v, r in zip(values, nums)],
           [r["high"] - v if r["high"] != "" else 0 for v, r in zip(values, nums)]]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.5 * len(nums) + 2), 4))
    ax.bar(range(len(nums)), values, yerr=err, capsize=3, color="#4c72b0")
    ax.set_xticks(range(len(nums)), labels, rotation=60, ha="right", fontsize=8)
    ax.set_title(title + " (error bars: 95% accuracy)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
