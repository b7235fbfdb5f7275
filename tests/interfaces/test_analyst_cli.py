"""Readable results on the command line: labels from the user's code, relative locations,
--format csv, --plot, spending after each run, `fuzzpy data check`, --version, --param errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from typer.testing import CliRunner

from fuzzpy import __version__
from fuzzpy.interfaces.cli import app

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
DATA = EX / "data" / "adult_sample.csv"
runner = CliRunner()


def fz(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_version_and_help_examples():
    res = fz("--version")
    assert res.exit_code == 0 and res.stdout.strip() == f"fuzzpy {__version__}"
    res = fz("--help")
    assert res.exit_code == 0 and "fuzzpy run examples/quickstart.fz --data" in res.stdout
    assert "limits that run" in res.stdout
    run_help = fz("run", "--help").stdout
    assert "list[str]" not in run_help and "NAME=VALUE" in run_help


def test_malformed_param_says_so_without_cascade():
    res = fz("check", EX / "quickstart.fz", "--param", "eps=abc")
    assert res.exit_code == 2
    assert "E0702" in res.stderr and "malformed value for --param eps: 'abc' is not a num" in res.stderr
    assert "did you mean" not in res.stderr and "E0201" not in res.stderr


def test_releases_named_after_the_users_code(tmp_path):
    prog = tmp_path / "top.fz"
    prog.write_text('import "stdlib/select.fz"\n'
                    'schema Adult { sex : cat{"Male", "Female"}, age : num[17, 90] }\n'
                    'function main (db : bag Adult) : fuzzy (list string) {\n'
                    '  sample best = top_k 0.1 2 ["Male", "Female"] (fun r -> r.sex) db;\n'
                    '  return best\n}\n')
    res = fz("run", prog, "--data", DATA, "--budget", "1", "--seed", "3")
    assert res.exit_code == 0, res.stderr
    lines = [line.strip() for line in res.stdout.splitlines() if line.startswith("  ")]
    assert [line.split(" = ")[0] for line in lines] == ["best #1", "best #2"]
    assert all(line.endswith(f"[{prog}:4]") for line in lines)  # the user's call, not stdlib's path
    assert "stdlib" not in res.stdout


def test_csv_spending_and_plot(tmp_path):
    ledger, png = tmp_path / "l.sqlite", tmp_path / "h.png"
    res = fz("run", EX / "histogram.fz", "--data", DATA, "--budget", "1", "--ledger", ledger,
             "--format", "csv", "--plot", png)
    assert res.exit_code == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == 16 and rows[0]["label"] == "n[Bachelors]" and rows[0]["education"] == "Bachelors"
    for r in rows:
        assert float(r["low"]) < float(r["value"]) < float(r["high"]) and r["epsilon"] == "0.5"
    assert "has spent pure epsilon 0.5 in total, of its default cap 10 (9.5 left" in res.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fz("ledger", "set-cap", "--data", DATA, "--cap", "2", "--ledger", ledger)
    res = fz("run", EX / "quickstart.fz", "--data", DATA, "--budget", "1", "--ledger", ledger)
    assert "ledger: " in res.stdout and "has spent pure epsilon 0.7 in total, of its cap 2 (1.3 left)" in res.stdout
    res = fz("run", EX / "quickstart.fz", "--data", DATA, "--budget", "1", "--ledger", ledger, "--format", "json")
    assert json.loads(res.stdout)["spending"][0]["spent"] == "0.9"


def test_data_check_counts_each_policy(tmp_path):
    broken = tmp_path / "adult.test"
    text = DATA.read_text().replace("<=50K\n", "<=50K.\n").replace(">50K\n", ">50K.\n")
    broken.write_text(text)
    res = fz("data", "check", "--data", broken, EX / "quickstart.fz")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("PRIVATE:")
    assert "2000 rows read, 0 kept, 2000 dropped" in res.stdout
    assert "income: 2000 row(s)" in res.stdout and "every row was dropped" in res.stdout
    res = fz("data", "check", "--data", DATA, EX / "quickstart.fz")
    assert "every row was dropped" not in res.stdout and "income: 0 row(s)" in res.stdout


def test_data_check_missing_column_names_column_and_schema(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("age,sex\n30,Male\n")
    res = fz("data", "check", "--data", bad, EX / "quickstart.fz")
    assert res.exit_code == 4 and "E0505" in res.stderr and "schema Adult: age, workclass" in res.stderr
    shown = res.stderr.replace(str(bad), "<file>")  # the temporary path may itself contain "30"
    assert "30" not in shown and "Male" not in shown
