"""Privacy units through the Python API and `%%fuzzpy`: a program over a table with a unit that
selects keys (select_keys and select_keys_optimal) and counts per released key runs with
`fuzzpy.run(...)`, in the cell magic called directly, and in a real notebook executed by a kernel;
it needs a delta (E0314 without one), is charged its epsilon on the ledger, and never releases the
key of a lone unit, however many rows that unit has."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

import fuzzpy
from fuzzpy.ledger import Ledger

SELECT = "select_keys"
PROGRAM = """schema F unit plane {{ plane : string, dest : string, n : int[0, 5] }}
function main (t : bag F) {{
  sample ks = {select} 2 0.000001 3 (fun r -> r.dest) t;
  each (fun g -> laplace 1 (count g)) (bound_groups_in ks 3 1 (fun r -> r.dest) t)
}}
"""
# 60 planes fly to three destinations; one plane alone flies 40 times to a fourth
FLIGHTS = pd.DataFrame([(f"P{i}", f"D{j}", j) for i in range(60) for j in range(3)] + [("LONE", "SECRET", 1)] * 40,
                       columns=["plane", "dest", "n"])


@pytest.mark.parametrize("select", ["select_keys", "select_keys_optimal"])
def test_run_selects_keys_on_a_table_with_a_unit_and_charges_the_ledger(select, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    result = fuzzpy.run(PROGRAM.format(select=select), FLIGHTS, budget=6, delta=1e-5, ledger=ledger)
    assert set(result.value) == {"D0", "D1", "D2"}  # each counted once per plane: about 60
    assert all(abs(v - 60) < 30 for v in result.value.values())
    keys = result.releases[0]
    assert keys.mechanism == select and keys.value == ("D0", "D1", "D2") and keys.epsilon == 2
    # 2 for the keys, 1 per key and unit over 3 keys per unit, and Delta/(1 - Delta) for the delta 1e-6
    # of the selection, stated at the run's delta (rule Partition selection)
    assert 5 + 1e-6 < result.epsilon <= 5 + 1.01e-6
    (spent,) = result.spending
    assert spent.spent == pytest.approx(5)
    assert len(Ledger(ledger).entries()) == 1


def test_run_without_a_delta_is_refused_before_reading_the_data():
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(PROGRAM.format(select="select_keys_optimal"), FLIGHTS, budget=5, seed=1)
    assert "E0314" in exc.value.codes


def test_the_cell_magic_runs_a_selection_with_a_delta_line():
    from fuzzpy.interfaces.notebook import fuzzpy_cell

    cell = "# fuzzpy: delta 0.00001\n" + PROGRAM.format(select="select_keys_optimal")
    result = fuzzpy_cell("--data t=flights --budget 6 --seed 3", cell, {"flights": FLIGHTS})
    assert set(result.value) == {"D0", "D1", "D2"}
    assert result.releases[0].mechanism == "select_keys_optimal"


def test_the_cell_magic_takes_its_delta_as_an_option(tmp_path):
    from fuzzpy.interfaces.notebook import fuzzpy_cell

    ledger = tmp_path / "ledger.sqlite"
    result = fuzzpy_cell(f"--data t=flights --budget 6 --delta 1e-5 --ledger {ledger}",
                         PROGRAM.format(select="select_keys"), {"flights": FLIGHTS})
    assert set(result.value) == {"D0", "D1", "D2"} and 5 < result.epsilon <= 5 + 1.01e-6
    assert len(Ledger(ledger).entries()) == 1
    with pytest.raises(fuzzpy.FuzzpyError) as exc:  # no delta, no run, nothing charged
        fuzzpy_cell(f"--data t=flights --budget 6 --ledger {ledger}", PROGRAM.format(select="select_keys"),
                    {"flights": FLIGHTS})
    assert "E0314" in exc.value.codes and len(Ledger(ledger).entries()) == 1


nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def test_a_notebook_selects_keys_on_a_table_with_a_unit(tmp_path, monkeypatch):
    """The magic in a real kernel (this interpreter, as tests/examples/test_notebook.py starts it)."""
    spec = tmp_path / "kernels" / "fuzzpy-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fuzzpy test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "ledger.sqlite"))
    data = tmp_path / "flights.csv"
    FLIGHTS.to_csv(data, index=False)
    cell = "%%fuzzpy --data t=flights --budget 6\n# fuzzpy: delta 0.00001\n" + PROGRAM.format(
        select="select_keys_optimal")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(f"import pandas as pd\nflights = pd.read_csv({str(data)!r})"),
        nbformat.v4.new_code_cell("%load_ext fuzzpy"),
        nbformat.v4.new_code_cell(cell),
        nbformat.v4.new_code_cell("print(sorted(_.value), _.releases[0].mechanism)"),
    ])
    nbclient.NotebookClient(nb, kernel_name="fuzzpy-test", timeout=120,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = "\n".join(str(v) for out in nb.cells[2].outputs for v in out.get("data", {}).values())
    assert "select_keys_optimal" in shown and "epsilon = 5" in shown
    printed = "".join(out.get("text", "") for out in nb.cells[3].outputs)
    assert printed.strip() == "['D0', 'D1', 'D2'] select_keys_optimal"
    assert Path(tmp_path / "ledger.sqlite").exists()
