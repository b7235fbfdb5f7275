"""Gaussian releases through the command line: the guarantee in rho and in (epsilon, delta),
budgets in both, refusals that say why, machine-readable output that carries rho and delta, and
a run that charges the ledger the epsilon at its delta."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

from typer.testing import CliRunner

from fuzzpy.interfaces.cli import app
from fuzzpy.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data" / "adult_sample.csv"
SCHEMA = """schema Adult {
  age : num[17, 90], workclass : string, education_num : int[1, 16], sex : cat{"Male", "Female"},
  hours_per_week : num[1, 99], income : cat{"<=50K", ">50K"}
}
"""
GAUSS = SCHEMA + """function main (db : bag Adult) : fuzzy (num, num) {
  sample n = gaussian 0.5 (count db);
  sample h = gaussian 0.5 (sum (map (fun r -> clip 0 80 r.hours_per_week) db));
  return (n, h)
}"""
runner = CliRunner()


def fz(*args: object):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def program(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prog.fz"
    path.write_text(text)
    return path


def test_check_states_rho_and_asks_for_a_delta(tmp_path):
    res = fz("check", program(tmp_path, GAUSS))
    assert res.exit_code == 0
    assert "rho = 1 (zCDP); give a delta to state it as (epsilon, delta)" in res.stdout
    assert "gaussian: sensitivity 80, rho 0.5" in res.stdout


def test_an_epsilon_budget_without_a_delta_is_refused_with_the_reason(tmp_path):
    res = fz("check", program(tmp_path, GAUSS), "--budget", "10")
    assert res.exit_code == 1 and "E0314" in res.stderr
    assert "not pure epsilon-DP: an epsilon budget needs a delta" in res.stderr
    assert "--delta 1e-6" in res.stderr


def test_a_rho_budget_admits_or_refuses_without_a_delta(tmp_path):
    path = program(tmp_path, GAUSS)
    assert fz("check", path, "--rho", "1").exit_code == 0
    res = fz("check", path, "--rho", "0.99")
    assert res.exit_code == 3 and "main has rho 1 (zCDP), but the rho budget is 0.99" in res.stderr


def test_bad_delta_and_rho_values_are_usage_errors(tmp_path):
    path = program(tmp_path, GAUSS)
    for args, words in ((("--delta", "0"), "--delta expects a number strictly between 0 and 1"),
                        (("--delta", "1"), "--delta expects"), (("--delta", "abc"), "--delta expects"),
                        (("--rho", "-1"), "--rho expects a non-negative number")):
        res = fz("check", path, *args)
        assert res.exit_code == 2 and "E0701" in res.stderr and words in res.stderr, res.stderr


def test_a_malformed_delta_pragma_is_an_error_with_its_line(tmp_path):
    res = fz("check", program(tmp_path, "# fuzzpy: delta 2\n" + GAUSS))
    assert res.exit_code != 0 and "E0103" in res.stderr and "invalid delta pragma" in res.stderr


def test_the_delta_states_epsilon_and_the_budget_compares_it(tmp_path):
    path = program(tmp_path, GAUSS)
    res = fz("check", path, "--delta", "1e-5", "--format", "json")
    out = json.loads(res.stdout)
    assert res.exit_code == 0 and out["pure"] is False and out["rho_exact"] == "1"
    assert out["delta_exact"] == "1/100000" and out["epsilon"] is not None
    eps = Fraction(out["epsilon_exact"])
    # rho = 1 is mu = sqrt(2)-GDP for continuous Gaussians: about 5.2 at delta 1e-5; never below what
    # the zCDP bound alone can certify to within the RDP conversion (which is an upper bound).
    assert 4 < eps < 7
    assert fz("check", path, "--delta", "1e-5", "--budget", str(float(eps) * 1.01)).exit_code == 0
    res = fz("check", path, "--delta", "1e-5", "--budget", str(float(eps) * 0.99))
    assert res.exit_code == 3 and "at delta 1e-05, but the budget is" in res.stderr


def test_the_pragma_gives_the_delta(tmp_path):
    out = json.loads(fz("check", program(tmp_path, "# fuzzpy: delta 1e-5\n" + GAUSS), "--format", "json").stdout)
    assert out["delta_exact"] == "1/100000" and out["epsilon"] is not None


def test_sarif_carries_rho_and_delta(tmp_path):
    res = fz("check", program(tmp_path, GAUSS), "--delta", "1e-5", "--format", "sarif")
    log = json.loads(res.stdout)
    (bound,) = [r for r in log["runs"][0]["results"] if r["level"] == "note"]
    props = bound["properties"]
    assert props["pure"] is False and props["rhoExact"] == "1" and props["deltaExact"] == "1/100000"
    assert "rho = 1 (zCDP)" in bound["message"]["text"]


def test_a_pure_program_keeps_its_pure_report(tmp_path):
    pure = SCHEMA + "function main (db : bag Adult) : fuzzy num { laplace 0.5 (count db) }"
    out = json.loads(fz("check", program(tmp_path, pure), "--format", "json").stdout)
    assert (out["pure"], out["epsilon_exact"], out["delta"], out["rho_exact"]) == (True, "1/2", 0, "1/8")


def test_run_without_a_delta_is_refused_before_reading_data(tmp_path):
    res = fz("run", program(tmp_path, GAUSS), "--data", tmp_path / "missing.csv", "--rho", "1",
             "--ledger", tmp_path / "l.sqlite")
    assert res.exit_code == 1 and "E0314" in res.stderr and "E0501" not in res.stderr


def test_run_releases_with_rho_and_charges_epsilon_at_its_delta(tmp_path):
    ledger = tmp_path / "l.sqlite"
    res = fz("run", program(tmp_path, GAUSS), "--data", SAMPLE, "--delta", "1e-5", "--budget", "10",
             "--ledger", ledger, "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["pure"] is False and out["rho_exact"] == "1" and out["delta_exact"] == "1/100000"
    assert [r["mechanism"] for r in out["releases"]] == ["gaussian", "gaussian"]
    assert [r["rho_exact"] for r in out["releases"]] == ["1/2", "1/2"]
    with Ledger(ledger) as book:
        (entry,) = book.entries()
    assert entry.epsilon == Fraction(out["epsilon_exact"])
