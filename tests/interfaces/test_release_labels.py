"""Labels in the user's terms: a library function's noisy row count among its other releases
under one name of the user's program is NAME.count (a regression's row count is not numbered
like the weights); a library function's releases of several kinds carry its own names for them
(the steps' gradients, the final loss), while releases of one kind keep their numbers (top_k's
rounds)."""

from __future__ import annotations

from pathlib import Path

from tests.cli_runs import fz

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "data" / "adult_sample.csv"


def _released(example: str) -> list[str]:
    res = fz("run", ROOT / "examples" / "cookbook" / example, "--data", ADULT, "--budget", "1", "--seed", "1")
    assert res.exit_code == 0, res.output
    return [line.split(" = ")[0].strip() for line in res.stdout.splitlines() if line.startswith("  ")]


def test_a_regressions_row_count_is_labelled_count_and_its_steps_numbered():
    labels = _released("regression.fz")  # logistic_fit_checked: the count, 10 steps, then the noisy loss
    assert labels[0] == "fit.count" and labels[1:11] == [f"fit.gradient #{i}" for i in range(1, 11)]
    assert labels[11:] == ["fit.loss_sum"]


def test_releases_of_one_kind_under_one_name_keep_their_numbers():
    assert _released("top_k.fz") == ["top #1", "top #2", "top #3"]
