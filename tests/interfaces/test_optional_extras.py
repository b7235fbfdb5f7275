"""Optional extras are checked before anything is read or charged: `--plot` without matplotlib and
`--engine dask` without the `dask` extra say what to install, instead of failing after the charge or
ending in an internal error.  The extras are hidden by a meta-path hook in a subprocess, as on a
machine where they were never installed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import EXAMPLES

HIDE = """
import importlib.abc, sys
class Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {modules!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Hidden())
sys.argv = ["fuzzpy", *sys.argv[1:]]
from fuzzpy.interfaces.checkcmd import main
main()
"""


def _without(modules: set[str], *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HIDE.format(modules=modules), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "full command line"])
def test_plot_without_matplotlib_is_refused_before_the_charge(tmp_path, fast):
    ledger = tmp_path / "l.sqlite"
    extra = [] if fast else ["--header"]  # any option the fast path does not take sends it to typer
    out = _without({"matplotlib"}, "run", EXAMPLES / "histogram.fz", "--data", EXAMPLES / "data" / "adult_sample.csv",
                   "--budget", "1", "--ledger", ledger, "--plot", tmp_path / "h.png", *extra)
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert "error[E0701]: --plot needs matplotlib" in out.stderr and "pip install 'fuzzpy[plot]'" in out.stderr
    assert not ledger.exists() and "Traceback" not in out.stderr


def test_the_dask_engine_without_its_extra_says_what_to_install(tmp_path):
    ledger = tmp_path / "l.sqlite"
    out = _without({"dask", "distributed"}, "run", EXAMPLES / "quickstart.fz", "--engine", "dask",
                   "--data", EXAMPLES / "data" / "adult_sample.csv", "--budget", "1", "--ledger", ledger)
    assert out.returncode == 4 and out.stdout == "", out.stderr
    assert "error[E2106]: the Dask engine is not installed" in out.stderr
    assert "pip install 'fuzzpy[dask]'" in out.stderr
    assert "E0901" not in out.stderr and "Traceback" not in out.stderr and not ledger.exists()
