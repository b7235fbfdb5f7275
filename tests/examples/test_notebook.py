"""examples/notebook.ipynb runs end to end in a real kernel: the venv's own Python (a kernel
spec written for this test), with the ledger in a temporary folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "notebook.ipynb"


def _kernel_spec(folder: Path) -> str:
    """A kernel spec that starts this interpreter, so the test never runs another Python."""
    spec = folder / "kernels" / "fuzzpy-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fuzzpy test", "language": "python"}))
    return "fuzzpy-test"


def _outputs(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        parts.extend(str(v) for v in out.get("data", {}).values())
    return "\n".join(parts)


def test_the_example_notebook_runs(tmp_path, monkeypatch):
    from fuzzpy.ledger import open_ledger

    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    ledger = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("FUZZPY_LEDGER", str(ledger))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=_kernel_spec(tmp_path), timeout=120,
                                     resources={"metadata": {"path": str(ROOT / "examples")}})
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert _outputs(code[0]).strip() == sys.executable
    report_html = _outputs(code[1])
    assert "fuzzpy: ok" in report_html and "epsilon = 0.2" in report_html and "laplace" in report_html
    assert "(Fraction(1, 5) ≈ 0.2, {'db': Fraction(1, 5) ≈ 0.2})" in _outputs(code[2])
    run_html = _outputs(code[3])
    assert "95% interval" in run_html and "epsilon 0.2 of budget 0.5" in run_html
    assert "has spent pure epsilon 0.2 in total, of its default cap 10" in run_html
    magic = _outputs(code[6])
    assert "epsilon = 0.5" in magic and "mean_age[Male]" in magic and "mean_age[Female]" in magic
    assert "Male" in _outputs(code[7]) and "Female" in _outputs(code[7])
    assert _outputs(code[8]).strip() == "['E0401']"
    # Both runs were charged on the one dataset (the same DataFrame): 0.2 + 0.5.
    book = open_ledger(ledger)
    try:
        (dataset,) = book.datasets()
        assert book.spent(dataset) == pytest.approx(0.7)
    finally:
        book.close()
