"""benchmarks/conformance_report.py prints the conformance table, and docs/conformance.md shows
that same table (regenerate it with the script when a case changes)."""

import contextlib
import importlib.util
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def report_output(*argv: str) -> tuple[int, str]:
    spec = importlib.util.spec_from_file_location("conformance_report", ROOT / "benchmarks" / "conformance_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = module.main(list(argv))
    return code, out.getvalue()


def test_every_program_conforms_and_the_doc_shows_the_same_table():
    code, out = report_output()
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(rows) > 40
    assert "DOES NOT CONFORM" not in out
    doc = (ROOT / "docs" / "conformance.md").read_text()
    doc_rows = [line for line in doc.split("## The table", 1)[1].split("## Notes", 1)[0].splitlines()
                if line.startswith("| ")]
    assert doc_rows == rows


def test_one_source():
    code, out = report_output("--source", "spar")
    rows = [line for line in out.splitlines() if line.startswith("| ") and "Spar" in line]
    assert code == 0 and len(rows) == 13
    assert all("| exact |" in row for row in rows)
