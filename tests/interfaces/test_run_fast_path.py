"""`fuzzpy run` without typer (fuzzpy/interfaces/checkcmd.py, fast_run_plan): it takes only the
options it knows, and then prints exactly what the full command line prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuzzpy.interfaces import checkcmd
from fuzzpy.interfaces.cli import app

ROOT = Path(__file__).resolve().parents[2]
QUICK = str(ROOT / "examples" / "quickstart.fz")
SAMPLE = str(ROOT / "examples" / "data" / "adult_sample.csv")
DEFAULTS = {"data": [], "public": [], "param": [], "header": False, "allow_empty": False, "budget": None, "delta": None,
            "rho": None, "seed": None,
            "ledger": None, "fmt": "text", "entry": "main", "plot": None}
PROBE = ("import sys, runpy; sys.argv = ['fuzzpy'] + sys.argv[1:]\n"
         "import fuzzpy.interfaces.checkcmd as entry; entry.exit_process = sys.exit  # keep the process to look in it\n"
         "try:\n    runpy.run_module('fuzzpy', run_name='__main__')\n"
         "except SystemExit as e:\n    code = e.code\n"
         "print('loaded:', sorted(m for m in ('pydantic', 'click') if m in sys.modules), code, file=sys.stderr)\n")


@pytest.mark.parametrize("argv, changes", [
    (["run", "p.fz"], {}),
    (["run", "--data", "d.csv", "p.fz", "--budget=1", "--seed", "7", "--param", "eps=0.5", "--param=k=2",
      "--header", "--format", "json", "--ledger", "l.sqlite", "--plot", "x.png", "--entry", "go"],
     {"data": ["d.csv"], "budget": "1", "seed": 7, "param": ["eps=0.5", "k=2"], "header": True, "fmt": "json",
      "ledger": Path("l.sqlite"), "plot": Path("x.png"), "entry": "go"}),
    (["run", "--", "--odd.fz"], {"program": Path("--odd.fz")}),
])
def test_the_fast_run_plan_takes_what_it_knows(argv, changes):
    expected = {"program": Path("p.fz"), **DEFAULTS, **changes}
    assert checkcmd.fast_run_plan(argv) == expected


@pytest.mark.parametrize("argv", [
    ["run"], ["run", "a.fz", "b.fz"], ["run", "--help"], ["run", "a.fz", "--server", "http://x"],
    ["run", "a.fz", "--engine", "dask"], ["run", "a.fz", "--seed", "x"], ["run", "a.fz", "--budget", "-1"],
    ["run", "a.fz", "--budget"], ["run", "a.fz", "--header=yes"], ["check", "a.fz"], [],
])
def test_anything_else_goes_to_the_full_command_line(argv):
    assert checkcmd.fast_run_plan(argv) is None


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300)


def test_a_run_on_the_fast_path_prints_what_the_full_command_line_prints():
    args = ["run", QUICK, "--data", SAMPLE, "--budget", "1", "--seed", "3", "--format", "json"]
    fast = _script(*args)
    assert fast.stderr.strip().splitlines()[-1] == "loaded: [] 0", fast.stderr  # neither pydantic nor click
    full = CliRunner().invoke(app, args)
    assert full.exit_code == 0
    assert json.loads(fast.stdout) == json.loads(full.stdout)


@pytest.mark.parametrize("extra, code, text", [
    (["--budget", "0.1"], 3, "E0401"),
    (["--budget", "1", "--format", "xml"], 2, "E0701"),
    (["--budget", "1", "--data", "missing.csv"], 4, "E0501"),
])
def test_refusals_are_the_same_on_both_paths(extra, code, text):
    data = [] if "--data" in extra else ["--data", SAMPLE]
    args = ["run", QUICK, *data, "--seed", "1", *extra]
    fast = _script(*args)
    full = CliRunner().invoke(app, args)
    assert fast.stderr.strip().splitlines()[-1].endswith(f" {code}")
    assert full.exit_code == code and text in fast.stderr and text in full.stderr
