"""Empty tables (docs/data.md, "Empty tables"): a run on the holder's own data (files, DataFrames)
whose table is left without rows by loading is refused before the charge (E0509), so that noise about
an empty table is never released silently; `--allow-empty` / `allow_empty=True` runs it on purpose.

The refusal depends on the data, so the tests also pin what it may depend on: only whether the
conformed table has a row.  Its text is the same for every empty table (one dropped row or a thousand,
any values, an empty file), it quotes no value and no count, and one kept row among many dropped
ones is enough to run."""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest
from check_and_run import HEADER, ROW_A, T
from cli_runs import fz, prog, write

import fuzzpy

COUNT = "function main (db : bag T) : fuzzy num { laplace 1 (count db) }"
# Rows every column of T accepts except k, whose value is undeclared: the `drop` policy removes them.
SECRET_ROW = "7,Alice Smith has flu,true,2\n"
MISSPELLED_ROW = "3,a.,false,4\n"  # "a." for "a": the UCI adult.test pattern


@pytest.fixture(autouse=True)
def _never_the_default_ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "env-ledger.sqlite"))


def _run(tmp_path, rows: str, *extra: str, name: str = "db.csv"):
    path = write(tmp_path / name, rows)
    return fz("run", prog(tmp_path, COUNT), "--data", path, "--budget", "1", "--ledger", tmp_path / "l.sqlite",
              *extra), path


def _charges(tmp_path) -> int:
    book = tmp_path / "l.sqlite"
    if not book.exists():
        return 0
    with sqlite3.connect(book) as db:
        return db.execute("SELECT count(*) FROM charges").fetchone()[0]


def test_every_row_dropped_is_refused_before_the_charge(tmp_path):
    res, _ = _run(tmp_path, HEADER + MISSPELLED_ROW * 50)
    assert res.exit_code == 4 and "E0509" in res.stderr, res.output
    assert res.stdout == "" and _charges(tmp_path) == 0
    assert "fuzzpy data check --data" in res.stderr and "--allow-empty" in res.stderr


@pytest.mark.parametrize("rows", ["", HEADER, HEADER + "\n\n"])
def test_a_file_without_rows_is_refused(tmp_path, rows):
    res, _ = _run(tmp_path, rows)
    assert res.exit_code == 4 and "E0509" in res.stderr and _charges(tmp_path) == 0


def test_allow_empty_runs_on_purpose_and_charges(tmp_path):
    res, _ = _run(tmp_path, HEADER + MISSPELLED_ROW, "--allow-empty")
    assert res.exit_code == 0 and "released:" in res.stdout, res.output
    assert _charges(tmp_path) == 1


def test_one_kept_row_among_dropped_ones_runs(tmp_path):
    res, _ = _run(tmp_path, HEADER + MISSPELLED_ROW * 999 + ROW_A)
    assert res.exit_code == 0 and "E0509" not in res.stderr, res.output


def test_the_refusal_says_only_that_the_table_is_empty(tmp_path):
    """Hostile data: a secret in a dropped cell, one row or a thousand, an empty file.  The message is
    the same for all (once the file's name is taken out) and holds no value and no number of rows."""
    tables = {"one.csv": HEADER + SECRET_ROW, "many.csv": HEADER + (SECRET_ROW + MISSPELLED_ROW) * 500,
              "none.csv": HEADER, "blank.csv": ""}
    shown = set()
    for name, rows in tables.items():
        res, path = _run(tmp_path, rows, name=name)
        assert res.exit_code == 4, res.output
        text = res.stderr.replace(str(path), "FILE")
        assert "Alice" not in text and "'a.'" not in text and '"a."' not in text
        assert not any(n in text for n in ("500", "1000", "1001")), text
        shown.add(text)
    assert len(shown) == 1, shown


def test_a_seeded_run_is_refused_too(tmp_path):
    path = write(tmp_path / "seeded.csv", HEADER + MISSPELLED_ROW)
    res = fz("run", prog(tmp_path, COUNT), "--data", path, "--budget", "1", "--seed", "1")
    assert res.exit_code == 4 and "E0509" in res.stderr


def test_only_the_empty_table_of_several_is_named(tmp_path):
    program = prog(tmp_path, "function main (a : bag T) (b : bag T) : fuzzy num { laplace 1 (count a) }")
    full = write(tmp_path / "full.csv", HEADER + ROW_A)
    empty = write(tmp_path / "empty.csv", HEADER + MISSPELLED_ROW)
    res = fz("run", program, "--data", f"a={full}", "--data", f"b={empty}", "--budget", "1",
             "--ledger", tmp_path / "l.sqlite")
    assert res.exit_code == 4 and res.stderr.count("E0509") == 1 and "table 'b'" in res.stderr
    assert _charges(tmp_path) == 0


def test_the_python_api_refuses_an_empty_dataframe(tmp_path):
    frame = pd.DataFrame({"x": [1.0], "k": ["a."], "flag": [True], "n": [1]})
    book = tmp_path / "api.sqlite"
    with pytest.raises(fuzzpy.FuzzpyError) as err:
        fuzzpy.run(T + COUNT, frame, budget=1, ledger=book)
    assert err.value.codes == ["E0509"] and "allow_empty=True" in str(err.value)
    assert not book.exists()
    result = fuzzpy.run(T + COUNT, frame, budget=1, ledger=book, allow_empty=True)
    assert len(result.releases) == 1 and result.spending[0].spent > 0


def test_the_dask_engine_refuses_an_empty_table_before_the_charge(tmp_path, dask_scheduler):
    """Each partition's checking pass says whether it kept a row; none did: refused uncharged."""
    folder = tmp_path / "parts"
    folder.mkdir()
    write(folder / "a.csv", HEADER + MISSPELLED_ROW)
    write(folder / "b.csv", HEADER)
    common = ("--engine", "dask", "--scheduler", dask_scheduler, "--budget", "1", "--ledger", tmp_path / "l.sqlite")
    res = fz("run", prog(tmp_path, COUNT), "--data", folder, *common)
    assert res.exit_code == 4 and "E0509" in res.stderr and _charges(tmp_path) == 0, res.output
    write(folder / "c.csv", HEADER + ROW_A)  # one partition with a row: the table is not empty
    res = fz("run", prog(tmp_path, COUNT), "--data", folder, *common)
    assert res.exit_code == 0 and _charges(tmp_path) == 1, res.output
    res = fz("run", prog(tmp_path, COUNT), "--data", folder / "a.csv", *common, "--allow-empty")
    assert res.exit_code == 0 and _charges(tmp_path) == 2, res.output
