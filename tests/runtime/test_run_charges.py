"""What a run charges the ledger: a cap follows the dataset whatever its file is called or where
it lies, a run over several tables books all of them or none, a param changes the charge and the
program's hash, a seeded run never touches a ledger, a failure after the charge keeps it, the charge
names the bytes that were parsed, and an unusable or tampered ledger stops the run.

Findings of the second review round (the runtime), pinned as regression tests.  CLI runs always pass
a temporary --ledger (and FUZZPY_LEDGER points into tmp_path too).
"""

from __future__ import annotations

import json
import os
import sqlite3
from fractions import Fraction as F

import pytest
from check_and_run import ROW_A, ROW_B, T
from cli_runs import data, fz, prog, write

from fuzzpy.ledger import Ledger, dataset_identity, program_hash


@pytest.fixture(autouse=True)
def _never_the_default_ledger(tmp_path, monkeypatch):
    """Belt and braces: a run that forgot --ledger books into tmp_path, never ~/.fuzzpy."""
    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "env-ledger.sqlite"))


@pytest.mark.xfail(strict=True, reason="R7: the cap follows the file's bytes, so a trailing newline makes the "
                   "same table a new, uncapped dataset (ledger/ dataset_identity; documented in "
                   "docs/ledger.md).")
def test_a_cap_survives_a_re_serialisation_of_the_same_table(tmp_path):
    """Second review round, finding R7 (low; documented limitation, listed for the record): a
    dataset is the SHA-256 of the file's bytes, so the same table re-serialised (a trailing
    newline, CRLF line ends, a BOM, another column order, Parquet instead of CSV) is a new dataset
    without a cap: `echo >> f.csv` resets the budget although the conformed table, and every
    release, is identical.  Suggested fix: an identity over a canonical form of the parsed rows
    (normalised line ends, quoting, blank lines, BOM, column order, row order), or caps that the
    curator attaches to a folder / a name and that `run` enforces for every file in it."""
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    path = data(tmp_path, ROW_A + ROW_B)
    book = tmp_path / "l.sqlite"
    with Ledger(book) as ledger:
        ledger.set_cap(dataset_identity(path), F(1))
    assert fz("run", program, "--data", path, "--budget", "1", "--ledger", book).exit_code == 0
    again = write(tmp_path / "db2.csv", path.read_text() + "\n")  # the same rows
    res = fz("run", program, "--data", again, "--budget", "1", "--ledger", book)
    assert res.exit_code == 4 and "E0601" in res.stderr


def test_a_renamed_copy_a_symlink_and_a_hard_link_share_one_cap(tmp_path):
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 0.6 (count db) }")
    path = data(tmp_path, ROW_A + ROW_B)
    book = tmp_path / "l.sqlite"
    with Ledger(book) as ledger:
        ledger.set_cap(dataset_identity(path), F(1))
    assert fz("run", program, "--data", path, "--budget", "1", "--ledger", book).exit_code == 0
    (tmp_path / "sub").mkdir()
    copy = tmp_path / "sub" / "renamed.csv"
    copy.write_bytes(path.read_bytes())
    link = tmp_path / "link.csv"
    link.symlink_to(path)
    hard = tmp_path / "hard.csv"
    os.link(path, hard)
    for other in (copy, link, hard):
        res = fz("run", program, "--data", other, "--budget", "1", "--ledger", book)
        assert res.exit_code == 4 and "E0601" in res.stderr and "released" not in res.stdout
    with Ledger(book) as ledger:
        assert ledger.spent(dataset_identity(path)) == F(3, 5)
        assert [e.status for e in ledger.entries()] == ["released"]


def test_a_cap_on_one_table_stops_the_whole_run_and_books_nothing_elsewhere(tmp_path):
    program = prog(tmp_path, "function main (a : bag T) (b : bag T) : fuzzy num { laplace 0.5 (count a + count b) }")
    x, y = data(tmp_path, ROW_A, "x.csv"), data(tmp_path, ROW_B, "y.csv")
    book = tmp_path / "l.sqlite"
    with Ledger(book) as ledger:
        ledger.set_cap(dataset_identity(y), F(1, 2))  # the run needs the total, 1, on each dataset
    res = fz("run", program, "--data", f"a={x}", "--data", f"b={y}", "--budget", "1", "--ledger", book)
    assert res.exit_code == 4 and "E0601" in res.stderr and "released" not in res.stdout
    with Ledger(book) as ledger:
        assert ledger.entries() == []
    same = fz("run", program, "--data", f"a={x}", "--data", f"b={x}", "--budget", "1", "--ledger", book)
    assert same.exit_code == 0
    with Ledger(book) as ledger:
        assert [(e.dataset, e.epsilon) for e in ledger.entries()] == [(dataset_identity(x), F(1))]


def test_a_param_changes_the_charge_and_the_program_hash(tmp_path):
    text = T + "param eps : num = 0.5;\nfunction main (db : bag T) : fuzzy num { laplace eps (count db) }\n"
    program = write(tmp_path / "p.fz", text)
    path = data(tmp_path, ROW_A)
    book = tmp_path / "l.sqlite"
    assert fz("run", program, "--data", path, "--budget", "1", "--ledger", book).exit_code == 0
    assert fz("run", program, "--data", path, "--budget", "1", "--ledger", book, "--param", "eps=0.25").exit_code == 0
    over = fz("run", program, "--data", path, "--budget", "1", "--ledger", book, "--param", "eps=2")
    assert over.exit_code == 3 and "E0401" in over.stderr
    with Ledger(book) as ledger:
        entries = ledger.entries()
    assert [e.epsilon for e in entries] == [F(1, 2), F(1, 4)]
    assert [e.program_hash for e in entries] == [program_hash(text), program_hash(text, {"eps": "0.25"})]


def test_seeded_runs_never_touch_the_ledger_from_the_environment(tmp_path):
    book = tmp_path / "from-env.sqlite"
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    res = fz("run", program, "--data", data(tmp_path, ROW_A), "--budget", "1", "--seed", "0", "--format", "json",
             env={"FUZZPY_LEDGER": str(book)})
    assert res.exit_code == 0
    assert not book.exists()
    out = json.loads(res.stdout)
    assert out["seeded"] is True and out["ledger"] is None and "NOT differentially private" in out["warning"]
    assert "NOT differentially private" in res.stderr
    both = fz("run", program, "--data", data(tmp_path, ROW_A), "--budget", "1", "--seed", "0", "--ledger", book)
    assert both.exit_code == 2 and "E0603" in both.stderr and both.stdout == "" and not book.exists()


def test_a_run_that_fails_after_its_charge_keeps_it_failed(tmp_path, monkeypatch):
    from fuzzpy.primitives.registry import lookup

    def boom(b):
        raise RuntimeError("SECRET row 3")

    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 0.7 (count db) }")
    monkeypatch.setattr(lookup("count"), "run", boom)
    book = tmp_path / "l.sqlite"
    res = fz("run", program, "--data", data(tmp_path, ROW_A), "--budget", "1", "--ledger", book, "--format", "json")
    assert res.exit_code == 4 and "SECRET" not in res.stdout + res.stderr
    assert json.loads(res.stdout)["stage"] == "run"
    with Ledger(book) as ledger:
        assert [(e.status, e.epsilon) for e in ledger.entries()] == [("failed", F(7, 10))]


def test_the_charge_names_the_bytes_that_were_parsed_even_if_the_file_changes_later(tmp_path, monkeypatch):
    """The file is hashed as it is parsed: an edit after the read cannot move the charge to
    another identity (or leave the parsed bytes uncharged)."""
    import fuzzpy.runtime.data as loader

    real = loader.load_identified

    def racing(path, schema, **kw):
        out = real(path, schema, **kw)
        with open(path, "a") as fh:  # someone appends a row after the read
            fh.write(ROW_B)
        return out

    monkeypatch.setattr(loader, "load_identified", racing)
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    book = tmp_path / "l.sqlite"
    path = data(tmp_path, ROW_A)
    parsed = dataset_identity(path)
    res = fz("run", program, "--data", path, "--budget", "1", "--ledger", book)
    assert res.exit_code == 0, res.stderr
    assert dataset_identity(path) != parsed
    with Ledger(book) as ledger:
        assert [(e.dataset, e.epsilon) for e in ledger.entries()] == [(parsed, F(1))]


@pytest.mark.parametrize("where", ["folder", "missing-folder", "a-csv-file"])
def test_unusable_ledgers_are_refused_and_left_alone(where, tmp_path):
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    path = data(tmp_path, ROW_A)
    book = {"folder": tmp_path, "missing-folder": tmp_path / "nope" / "l.sqlite", "a-csv-file": path}[where]
    before = path.read_bytes()
    for env_or_flag in ("env", "flag"):
        args = ["run", program, "--data", path, "--budget", "1"]
        res = fz(*args, "--ledger", book) if env_or_flag == "flag" else fz(*args, env={"FUZZPY_LEDGER": str(book)})
        assert res.exit_code == 4 and "E0602" in res.stderr and "released" not in res.stdout
    assert path.read_bytes() == before
    assert not (tmp_path / "nope").exists()


def test_a_tampered_negative_charge_does_not_refund_a_capped_dataset(tmp_path):
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 0.6 (count db) }")
    path = data(tmp_path, ROW_A)
    book = tmp_path / "l.sqlite"
    with Ledger(book) as ledger:
        ledger.set_cap(dataset_identity(path), F(1))
    assert fz("run", program, "--data", path, "--budget", "1", "--ledger", book).exit_code == 0
    db = sqlite3.connect(book)
    db.execute("UPDATE charges SET epsilon = '-5'")
    db.commit()
    db.close()
    res = fz("run", program, "--data", path, "--budget", "1", "--ledger", book)
    assert res.exit_code == 4 and "E0602" in res.stderr and "corrupted" in res.stderr
    show = fz("ledger", "show", "--ledger", book)
    assert show.exit_code == 4 and "E0602" in show.stderr
    db = sqlite3.connect(book)
    assert db.execute("SELECT count(*) FROM charges").fetchone()[0] == 1
    db.close()


