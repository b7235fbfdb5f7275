"""Estimates in the user's units (fuzzpy/primitives/estimates.py, docs/mechanisms.md "Accuracy in
the user's units"): a group mean with an interval from its sum's and count's releases, a quantile
restated in ranks, an adaptively chosen clip bound as a value; refused on private inputs."""

from __future__ import annotations

import csv
import io
import json
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import fuzzpy
from fuzzpy.runtime.kernels.estimates import first_selected, interval_text, ratio_interval

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

# A Laplace release at epsilon 1/2 has the grid step S/2048 and 8193/2 steps of scale
# (docs/noise.md); at beta = 1/40 its bound is S * (ceil(8193/2 * ln 40) + 1) / 2048 =
# S * 15113/2048 (8193/2 * ln 40 = 15111.49...).
COUNT_BOUND = F(15113, 2048)      # sensitivity 1, epsilon 1/2, at 97.5%
SUM_BOUND = 10 * COUNT_BOUND      # sensitivity 10 (values clipped to [0, 10])

GROUP_MEAN = '''import "stdlib/groups.fz"
schema T { x : num[0, 10], k : cat{"a", "b"} }
function main (db : bag T) { sample m = group_mean 1 (fun r -> r.k) (fun r -> r.x) 0 10 db; return m }
'''


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 400
    return pd.DataFrame({"x": rng.uniform(0, 10, n).round(2), "k": np.where(np.arange(n) < 300, "a", "b")})


def test_ratio_interval_exact_corners():
    # S in [90, 110], N in [18, 22]: S/N from 90/22 to 110/18
    assert ratio_interval(F(0), F(10), F(100), F(10), F(20), F(2)) == (F(45, 11), F(55, 9))
    # clamped into [lo, hi]
    assert ratio_interval(F(0), F(5), F(100), F(10), F(20), F(2)) == (F(45, 11), F(5))
    # the count's interval reaches 0: unbounded
    assert ratio_interval(F(0), F(10), F(100), F(10), F(2), F(2)) is None
    assert ratio_interval(F(0), F(10), F(100), F(10), F(2), F(3)) is None
    # a negative sum: the extremes are still at the corners
    assert ratio_interval(F(-10), F(10), F(-50), F(10), F(10), F(5)) == (F(-10), F(-8, 3))


def test_interval_text_rounds_outwards():
    assert interval_text(F(390752, 10000), F(419057, 10000)) == "[39.07, 41.91]"
    assert interval_text(F(-1, 3), F(1, 3)) == "[-0.3334, 0.3334]"
    assert interval_text(F(1234567), F(2345678)) == "[1234567, 2345678]"


def test_first_selected_is_the_stdlib_rule():
    c = (F(1), F(2), F(3))
    assert first_selected(c, (False, True)) == (F(2), 1)
    assert first_selected(c, (False, False, False)) == (F(3), None)
    assert first_selected(c, (False, False, True)) == (F(3), 2)
    assert first_selected(c, (True,)) == (F(1), 0)
    assert first_selected(c, ()) == (F(3), None)


def test_group_mean_interval_from_its_releases(table):
    res = fuzzpy.run(GROUP_MEAN, table, budget=1, seed=3)
    assert [r.label for r in res.releases] == ["m.sum[a]", "m.count[a]", "m.sum[b]", "m.count[b]"]
    assert [e.label for e in res.estimates] == ["m[a]", "m[b]"]
    for k, est in zip("ab", res.estimates):
        s, n = (r.value for r in res.releases if r.keys == (k,))
        low, high = ratio_interval(F(0), F(10), F(s), SUM_BOUND, F(n), COUNT_BOUND)
        # the exact figures, as floats rounded outwards (never narrower)
        assert F(est.interval[0]) <= low and F(est.interval[1]) >= high
        assert est.interval == pytest.approx((float(low), float(high)), rel=1e-15, abs=0)
        assert est.value == res.value[k] == pytest.approx(s / n)
        assert est.words == f"95% interval {interval_text(low, high)} for the mean of the values clipped to [0, 10]"
        truth = table[table.k == k].x.mean()
        assert low <= truth <= high
        assert est.sources == [f"m.sum[{k}]", f"m.count[{k}]"] and est.location == "<cell>:3:41"


def test_group_mean_intervals_cover_the_truth(table):
    """Over 40 seeds, at least 95% of the intervals hold the exact mean (all do, in practice:
    the union bound and the tail bounds are conservative)."""
    truth = table.groupby("k").x.mean()
    hits = 0
    for seed in range(20):
        for e in fuzzpy.run(GROUP_MEAN, table, budget=1, seed=seed).estimates:
            hits += e.interval[0] <= truth[e.keys[0]] <= e.interval[1]
    assert hits >= 38


def test_a_tiny_group_has_no_bounded_interval(table):
    tiny = table.copy()
    tiny["k"] = np.where(np.arange(len(tiny)) < 3, "b", "a")  # 3 rows: the count's interval reaches 0
    res = fuzzpy.run(GROUP_MEAN, tiny, budget=1, seed=1)
    b = res.estimates[1]
    assert b.label == "m[b]" and not b.bounded and b.interval == (0.0, 10.0)
    assert b.words.startswith("unbounded: the count's 97.5% interval reaches 0")


def test_csv_json_and_text_show_the_estimates(table, tmp_path):
    data = tmp_path / "t.csv"
    table.to_csv(data, index=False)
    prog = tmp_path / "gm.fz"
    prog.write_text(GROUP_MEAN)
    from fuzzpy.interfaces.cli import app

    base = ["run", str(prog), "--data", str(data), "--budget", "1", "--seed", "3"]
    js = json.loads(runner.invoke(app, base + ["--format", "json"]).stdout)
    api = fuzzpy.run(GROUP_MEAN, table, budget=1, seed=3)
    assert [(e["label"], e["value"], e["low"], e["high"]) for e in js["estimates"]] == \
        [(e.label, e.value, *e.interval) for e in api.estimates]
    assert js["estimates"][0]["from"] == ["m.sum[a]", "m.count[a]"] and js["estimates"][0]["kind"] == "mean"
    rows = list(csv.DictReader(io.StringIO(runner.invoke(app, base + ["--format", "csv"]).stdout)))
    assert [r["label"] for r in rows] == ["m.sum[a]", "m.count[a]", "m.sum[b]", "m.count[b]", "m[a]", "m[b]"]
    assert rows[4]["epsilon"] == "0" and float(rows[4]["low"]) == api.estimates[0].interval[0]
    text = runner.invoke(app, base).stdout
    assert "estimated from the releases (post-processing, no further cost):" in text
    assert "  m[a] = " in text and "from m.sum[a] and m.count[a])" in text
    assert "<td>m[b]</td>" in api._repr_html_()
    frame = api.to_frame()
    assert list(frame["mechanism"])[-2:] == ["estimate: mean"] * 2 and list(frame["epsilon"])[-2:] == [0, 0]


def test_the_mean_is_the_value_the_stdlib_computed_before():
    """mean_estimate computes `if n < 1 then (lo + hi) / 2 else clip lo hi (s / n)` exactly."""
    old = '''schema T { x : num[0, 10] }
function main (db : bag T) : fuzzy num {
  sample s = laplace 0.5 (sum (map (fun r -> clip 0 10 r.x) db));
  sample n = laplace 0.5 (count db);
  return (if n < 1 then (0 + 10) / 2 else clip 0 10 (s / n))
}'''
    new = old.replace("(if n < 1 then (0 + 10) / 2 else clip 0 10 (s / n))", "(mean_estimate 0 10 s n)")
    for rows in (pd.DataFrame({"x": [1.5, 2.25, 9.0]}), pd.DataFrame({"x": [4.0] * 50}), pd.DataFrame({"x": []})):
        for seed in range(4):
            a = fuzzpy.run(old, rows, budget=1, seed=seed, allow_empty=True).value
            b = fuzzpy.run(new, rows, budget=1, seed=seed, allow_empty=True)
            assert a == b.value
            assert [e.value for e in b.estimates] == [a]


def test_mean_of_values_not_released_has_no_statement():
    prog = '''schema T { x : num[0, 10] }
function main (db : bag T) : fuzzy num {
  sample s = laplace 0.5 (count db);
  return (mean_estimate 0 10 (s + 1) 4)
}'''
    res = fuzzpy.run(prog, pd.DataFrame({"x": [1.0]}), budget=1, seed=0)
    assert res.estimates == [] and res.releases[0].label == "s"


def test_noisy_mean_pair_uses_one_release():
    prog = '''import "stdlib/stats.fz"
schema T { x : num[0, 10] }
function main (db : bag T) : fuzzy num { sample m = noisy_mean_pair 1 0 10 (map (fun r -> r.x) db); return m }
'''
    res = fuzzpy.run(prog, pd.DataFrame({"x": [5.0] * 300}), budget=1, seed=0)
    (rel,), (est,) = res.releases, res.estimates
    assert rel.label == "m.(sum, count)" and est.sources == ["m.(sum, count)"]
    assert est.words.startswith("95% interval") and est.interval[0] <= 5 <= est.interval[1]


# ---- quantiles: the exponential mechanism's statement in ranks ----------------------------------

MEDIAN = '''import "stdlib/stats.fz"
schema T { x : num[0, 100] }
function main (db : bag T) : fuzzy num { sample med = median 1 [10, 20, 30, 40, 50] (map (fun r -> r.x) db); return med }
'''


def test_a_quantile_is_stated_in_ranks_with_its_neighbours(tmp_path):
    df = pd.DataFrame({"x": np.arange(100, dtype=float)})
    res = fuzzpy.run(MEDIAN, df, budget=1, seed=2)
    (rel,) = res.releases
    assert rel.label == "med" and rel.mechanism == "exponential" and res.estimates == []
    c = rel.value
    # 2S/eps ln(5/beta) = ln 100: quantile_score moves by max(q, 1 - q) = 1/2 per row, as the mechanism states
    assert rel.accuracy.bound == pytest.approx(np.log(100))
    grid = [10, 20, 30, 40, 50]
    below = max((g for g in grid if g < c), default=None)
    above = min((g for g in grid if g > c), default=None)
    near = ", ".join(f"{side} {v:g}" for side, v in (("below", below), ("above", above)) if v is not None)
    assert rel.accuracy.words == (f"rank error |#(values < {c:g}) - 0.5 n| at most the best candidate's + "
                                  f"{np.log(100):.4g} with 95% probability; next candidates: {near}")
    # what it claims holds here: the chosen rank error is within the bound of the best one
    err = lambda v: abs(int((df.x < v).sum()) - 50)  # noqa: E731
    assert err(c) <= min(err(g) for g in grid) + rel.accuracy.bound
    from fuzzpy.interfaces.cli import app

    prog = tmp_path / "m.fz"
    prog.write_text(MEDIAN)
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    js = json.loads(runner.invoke(app, ["run", str(prog), "--data", str(data), "--budget", "1", "--seed", "2",
                                        "--format", "json"]).stdout)
    acc = js["releases"][0]["accuracy"]
    assert acc["quantile"] == 0.5 and acc["neighbours"] == [below, above]


def test_a_quantile_at_the_end_of_the_grid_has_one_neighbour():
    df = pd.DataFrame({"x": np.full(200, 3.0)})  # every value below every candidate but the first
    res = fuzzpy.run(MEDIAN.replace("[10, 20, 30, 40, 50]", "[1, 5]"), df, budget=1, seed=0)
    (rel,) = res.releases
    assert rel.value == 5 and rel.accuracy.words.endswith("next candidates: below 1")


# ---- adaptively chosen clip bounds ------------------------------------------------------------

ADAPTIVE = '''import "stdlib/adaptive.fz"
schema T { x : num[0, 100] }
param cands : list num = [10, 20, 40, 80];
function main (db : bag T) : fuzzy (num, num) {
  sample b = clip_bound 1 5 cands (map (fun r -> r.x) db);
  sample am = adaptive_mean 1 1 5 0 cands (map (fun r -> r.x) db);
  return (b, am)
}
'''


def test_the_chosen_clip_bound_is_a_value_of_the_results():
    df = pd.DataFrame({"x": np.r_[np.full(500, 15.0), np.full(2, 90.0)]})
    res = fuzzpy.run(ADAPTIVE, df, budget=3, seed=0)
    assert [r.label for r in res.releases] == ["b.answers", "am.answers", "am.sum", "am.count"]
    assert [e.label for e in res.estimates] == ["b.bound", "am.bound", "am"]
    bound, abound, mean = res.estimates
    answers = res.releases[0].value
    assert bound.value == res.value[0] == first_selected((10, 20, 40, 80), answers)[0]
    alpha = res.releases[0].accuracy.bound
    assert bound.kind == "clip bound" and bound.interval is None
    assert bound.words == (f"chosen by the sparse vector: at most {5 + alpha:.4g} values above it, "
                           "with 95% probability")  # 5 - alpha < 0: the no answers say nothing
    assert abound.value == first_selected((10, 20, 40, 80), res.releases[1].value)[0]
    # the mean was clipped to [0, the chosen bound]
    assert mean.words.endswith(f"clipped to [0, {abound.value:g}]") and mean.value == res.value[1]


def test_no_yes_means_the_largest_candidate_without_a_statement():
    df = pd.DataFrame({"x": np.full(300, 99.0)})
    res = fuzzpy.run(ADAPTIVE.replace("[10, 20, 40, 80]", "[10, 20]"), df, budget=3, seed=0)
    bound = res.estimates[0]
    assert res.releases[0].value == (False, False) and bound.value == 20
    assert bound.words.startswith("chosen by the sparse vector: no candidate was answered yes: the largest one")


# ---- red team: estimates take public values only ---------------------------------------------------

@pytest.mark.parametrize("body, code, words", [
    ("return (mean_estimate 0 10 (count db) 3)", "E1801", "its sum must be public"),
    ("sample s = laplace 1 (count db); return (mean_estimate 0 10 s (count db))", "E1801", "its count must be public"),
    ("return (rank_estimate 0.5 (count db))", "E1801", "its candidate must be public"),
    ("return (chosen_bound 5 [1, 2] (map (fun r -> r.x > 1) [1]))", None, None),
    ("sample s = laplace 1 (count db); return (mean_estimate s 10 s s)", "E1802", "lower bound of mean_estimate"),
    ("sample s = laplace 1 (count db); return (rank_estimate s s)", "E1802", "quantile level of rank_estimate"),
    ("sample s = laplace 1 (count db); return (chosen_bound s [1, 2] [true])", "E1802", "slack of chosen_bound"),
])
def test_estimates_refuse_private_or_non_constant_arguments(body, code, words):
    prog = f"schema T {{ x : num[0, 10] }}\nfunction main (db : bag T) : fuzzy num {{ {body} }}\n"
    report = fuzzpy.check(prog)
    if code is None:
        assert not report.ok  # ill-typed in any case (a map over a list), never accepted
        return
    assert not report.ok and [d.code for d in report.errors] == [code], report.text
    assert words in report.errors[0].message


def test_a_row_value_cannot_reach_an_estimate():
    """Inside a row function the row is private: its values would be displayed by the estimate."""
    prog = '''schema T { x : num[0, 10], y : num[0, 10] }
function main (db : bag T) : fuzzy num {
  sample s = laplace 1 (count db);
  laplace 1 (sum (map (fun r -> clip 0 1 (mean_estimate 0 10 r.x s)) db))
}'''
    report = fuzzpy.check(prog)
    assert [d.code for d in report.errors] == ["E1801"]


def test_gauss_mean_interval_uses_the_gaussian_bounds_at_half_the_failure_probability():
    prog = '''import "stdlib/stats.fz"
schema T { x : num[0, 10] }
function main (db : bag T) : fuzzy num { sample g = gauss_mean 0.5 0 10 (map (fun r -> r.x) db); return g }
'''
    res = fuzzpy.run(prog, pd.DataFrame({"x": np.linspace(0, 10, 500)}), budget=6, delta=1e-6, seed=0)
    (est,) = res.estimates
    s, n = res.releases
    assert (s.label, n.label, est.label) == ("g.sum", "g.count", "g")
    # at 97.5% each, the bounds are wider than the releases' own 95% ones
    inner = ratio_interval(F(0), F(10), F(s.value), F(s.accuracy.bound), F(n.value), F(n.accuracy.bound))
    assert est.interval[0] < inner[0] and est.interval[1] > inner[1]
    assert est.interval[0] <= 5 <= est.interval[1]


def test_only_the_release_made_just_before_is_restated():
    """An estimate is made right after its releases: an older release is never attributed."""
    prog = '''schema T { x : num[0, 10] }
function main (db : bag T) : fuzzy num {
  sample c = exponential 1 [1, 2] (fun k -> count db);
  sample n = laplace 1 (count db);
  return (rank_estimate 0.5 c)
}'''
    res = fuzzpy.run(prog, pd.DataFrame({"x": [1.0, 2.0]}), budget=2, seed=0)
    c, n = res.releases
    assert c.accuracy.what == "best score - score of the chosen candidate" and res.value == c.value
    assert res.estimates == []


def test_a_run_that_fails_after_a_group_mean_still_shows_its_estimates(table, tmp_path, monkeypatch):
    """The releases before a failure are charged and printed; their estimates are post-processing of
    them, so they are printed too (text and JSON), and nothing of the failure's text."""
    from fuzzpy.interfaces.cli import app
    from fuzzpy.primitives.registry import lookup

    def boom(*args):
        raise ValueError("row 17 has SECRET value 123")

    data = tmp_path / "t.csv"
    table.to_csv(data, index=False)
    prog = tmp_path / "gm_fail.fz"
    prog.write_text(GROUP_MEAN.replace("return m }", "sample t = laplace 1 (count (filter (fun r -> r.x > 5) db));\n"
                                       "  return (m, t) }"))
    monkeypatch.setattr(lookup("filter"), "run", boom)  # used only after the group mean
    base = ["run", str(prog), "--data", str(data), "--budget", "2", "--seed", "3"]
    text = runner.invoke(app, base)
    assert text.exit_code == 4 and "E0604" in text.stderr and "SECRET" not in text.stdout + text.stderr
    head, _, rest = text.stdout.partition("released before the failure (charged):")
    assert "m.count[a] = " in rest and "estimated from the releases (post-processing, no further cost):" in rest
    assert "  m[a] = " in rest and "from m.sum[a] and m.count[a])" in rest
    js = json.loads(runner.invoke(app, base + ["--format", "json"]).stdout)
    assert js["ok"] is False and js["stage"] == "run"
    assert [e["label"] for e in js["estimates"]] == ["m[a]", "m[b]"] and js["estimates"][0]["from"] == ["m.sum[a]", "m.count[a]"]
