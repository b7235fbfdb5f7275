"""Which files are read as data, and the edges of well-formed CSV: only regular files (checked
before hashing or reading, so a FIFO or a device cannot hang a run), one-line files without a
final line break, and the documented limit on the text of one row."""

from __future__ import annotations

import os
import stat
import threading
from fractions import Fraction as F
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuzzpy.diagnostics import FuzzError
from fuzzpy.interfaces.cli import app
from fuzzpy.ledger import dataset_identity
from fuzzpy.runtime import files
from fuzzpy.runtime.data import MAX_ROW_BYTES, load_identified, load_table
from fuzzpy.typesystem.types import STRING, Column, Num, Schema

TWO = Schema("t", (Column("a", Num(F(0), F(100))), Column("b", Num(F(0), F(100)))))
TEXT = Schema("t", (Column("a", Num(F(0), F(100))), Column("b", STRING)))
MIB = 1024 * 1024
HANG_GUARD = 60
runner = CliRunner()


def write(tmp_path: Path, data: bytes | str, name: str = "d.csv") -> Path:
    p = tmp_path / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def error_of(fn, *args) -> tuple[str, str]:
    with pytest.raises(FuzzError) as e:
        fn(*args)
    (d,) = e.value.diagnostics
    return d.code, d.message + " " + " ".join(d.notes)


def finishes(fn, *args):
    """Run fn in a thread: a FIFO must not make it wait (the guard only catches a hang)."""
    box: dict = {}

    def work():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(HANG_GUARD)
    assert not t.is_alive(), f"{fn.__name__} blocked on a non-regular file"
    if "error" in box:
        raise box["error"]
    return box.get("value")


# ---- identity: the hash of exactly the bytes parsed -----------------------------------------------


@pytest.mark.parametrize("data", ["a,b\n1,2\n", "a,b\n1,2", "1,2\r", "", "\n\n", "| c\n" + "3,4\n" * 50000])
def test_the_identity_of_a_load_is_the_hash_of_the_whole_file(tmp_path, data):
    """Whatever the parser reads or skips (a missing final line break it adds, a header, blank
    lines, comments), the identity is the sha256 of the file's bytes, as `fuzzpy ledger` shows."""
    path = write(tmp_path, data)
    _, identity = load_identified(path, TWO)
    assert identity == dataset_identity(path)


def test_the_identity_of_a_parquet_load_is_the_hash_of_the_file(tmp_path):
    import pandas as pd

    path = tmp_path / "d.parquet"
    pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 250.0], "extra": ["x", "y"]}).to_parquet(path)
    frame, identity = load_identified(path, TWO)
    assert identity == dataset_identity(path)
    assert frame["b"].tolist() == [3.0, 100.0]


# ---- reading only the declared columns gives the same table ----------------------------------------


@pytest.mark.parametrize("data", [
    "z,b,a,y\n1, x ,2,3\n4,?,5,6\n",              # undeclared columns around the declared ones
    "\ufeffb,a\n1,2\n",                            # a byte-order mark before the header
    'z,"a",b\n"q\nr",1,2\n9,3,x\n',                # quotes, a quoted line break in an undeclared cell
    "a,b,a\n1,2,3\n",                               # a declared name twice: not pruned, refused as before
    "a\n1\n",                                       # no header naming every column: positional rules
])
def test_reading_only_declared_columns_changes_nothing(tmp_path, monkeypatch, data):
    import fuzzpy.runtime.data as loader

    path = write(tmp_path, data)

    def outcome():
        try:
            return ("ok", load_table(path, TEXT).to_dict("list"))
        except FuzzError as exc:
            return ("error", [d.code for d in exc.diagnostics])

    pruned = outcome()
    monkeypatch.setattr(loader, "_declared_fields", lambda *a: None)
    assert outcome() == pruned


# ---- --header: a missing column is named ----------------------------------------------------------


THREE = Schema("Adultish", (Column("age", Num(F(0), F(100))), Column("income", STRING), Column("sex", STRING)))


@pytest.mark.parametrize("data, missing", [
    ("age,incomee,sex\n30,x,Male\n", "'income'"),   # a typo in the header
    ("age,sex\n30,Male\n", "'income'"),             # a column left out
    ("Age,Income,Sex\n30,x,Male\n", "'age', 'income', 'sex'"),
    ("", "'age', 'income', 'sex'"),                 # no header at all
])
def test_with_header_a_missing_column_is_named_with_the_schema(tmp_path, data, missing):
    path = write(tmp_path, data)
    code, text = error_of(lambda p: load_table(p, THREE, header=True), path)
    assert code == "E0503"
    assert f"does not name column(s) {missing} of table 'Adultish' (schema Adultish: age, income, sex)" in text
    cells = text.replace(str(path), "")  # the file's own name may hold any digits (pytest-30/...)
    assert "incomee" not in cells and "Male" not in cells and "30" not in cells  # never the file's cells


def test_with_header_a_full_header_loads_by_name(tmp_path):
    df = load_table(write(tmp_path, "sex,age,income,extra\nMale,30,x,1\n"), THREE, header=True)
    assert list(df.itertuples(index=False, name=None)) == [(30.0, "x", "Male")]


def test_without_header_a_positional_failure_says_how_the_file_was_read(tmp_path):
    """The same typo'd header without --header is read as a row (the first row is never
    judged): the error notes the schema's columns and points to --header."""
    code, text = error_of(load_table, write(tmp_path, "age,incomee,sex\n30,x,Male\n"), THREE)
    assert code == "E0504"
    assert "read without a header" in text and "schema Adultish: age, income, sex" in text and "--header" in text
    assert "incomee" not in text


def test_run_header_flag_names_the_missing_column_and_charges_nothing(tmp_path):
    program = write(tmp_path, "schema Adultish { age : num[0, 100], income : string, sex : string }\n"
                              "function main (db : bag Adultish) : fuzzy num { laplace 1 (count db) }\n", "p.fz")
    data = write(tmp_path, "age,incomee,sex\n30,x,Male\n")
    book = tmp_path / "l.sqlite"
    res = runner.invoke(app, ["run", str(program), "--data", str(data), "--budget", "1", "--ledger", str(book),
                              "--header"])
    assert res.exit_code == 4 and "E0503" in res.output and "'income'" in res.output
    assert not book.exists()
    res = runner.invoke(app, ["data", "check", str(program), "--data", str(data), "--header"])
    assert res.exit_code == 4 and "E0503" in res.output and "'income'" in res.output


# ---- one line, no final line break ---------------------------------------------------------------------


@pytest.mark.parametrize("data, rows", [
    ("1,2", [(1.0, 2.0)]),                     # headerless, one row
    ("1,2\r", [(1.0, 2.0)]),
    ("1,2\r\n", [(1.0, 2.0)]),
    ("a,b", []),                               # a header alone
    ("\ufeffa,b", []),                         # with a byte-order mark
    ("a,b\n1,2", [(1.0, 2.0)]),
    ("b,a\n7,3", [(3.0, 7.0)]),                # header order differs from the schema's
    ("\n\n1,2", [(1.0, 2.0)]),                 # blank lines first
    ("| UCI comment\n1,2", [(1.0, 2.0)]),
])
def test_one_line_files_without_a_final_line_break_load(tmp_path, data, rows):
    df = load_table(write(tmp_path, data), TWO)
    assert list(df.itertuples(index=False, name=None)) == rows


def test_a_quoted_line_break_in_the_only_row(tmp_path):
    df = load_table(write(tmp_path, '5,"two\nlines"'), TEXT)
    assert df.b.tolist() == ["two\nlines"] and df.a.tolist() == [5.0]


def test_one_column_one_value_tab_and_semicolon_files(tmp_path):
    one = Schema("t", (Column("a", Num(F(0), F(100))),))
    assert load_table(write(tmp_path, "42"), one).a.tolist() == [42.0]
    assert load_table(write(tmp_path, "a\tb\n1\t2", "d.tsv"), TWO).b.tolist() == [2.0]
    assert load_table(write(tmp_path, "1;2"), TWO).a.tolist() == [1.0]


def test_ragged_one_line_files_are_still_refused(tmp_path):
    code, text = error_of(load_table, write(tmp_path, "1,2,3"), TWO)
    assert code == "E0505"
    code, _ = error_of(load_table, write(tmp_path, "a,b\n1,2,3"), TWO)
    assert code == "E0502"


# ---- the limit on one row --------------------------------------------------------------------------------


def test_rows_within_the_limit_load_whatever_their_position(tmp_path):
    big = "x" * (MAX_ROW_BYTES - 64)
    for before in (0, 1000, 40_000):
        data = "a,b\n" + "1,short\n" * before + f"2,{big}\n3,end"
        df = load_table(write(tmp_path, data), TEXT)
        assert len(df) == before + 2 and len(df.b.iloc[-2]) == len(big)


def test_a_row_of_escaped_quotes_counts_its_text_not_its_bytes_on_disk(tmp_path):
    quotes = '"' * (5 * MIB)  # written as 10 MiB of doubled quotes
    data = 'a,b\n1,"' + quotes.replace('"', '""') + '"\n'
    assert len(load_table(write(tmp_path, data), TEXT).b.iloc[0]) == 5 * MIB


@pytest.mark.parametrize("layout", ["one cell", "two cells", "a line Arrow cannot take"])
def test_a_row_over_the_limit_is_refused_with_its_own_code(tmp_path, layout):
    if layout == "one cell":
        data = "a,b\n1,2\n3," + "x" * (MAX_ROW_BYTES + 1) + "\n"
    elif layout == "two cells":
        half = "y" * (MAX_ROW_BYTES // 2 + 1)
        data = f"a,b\n{half},{half}\n"
    else:
        data = "a,b\n1," + "z" * (3 * MAX_ROW_BYTES) + "\n"
    code, text = error_of(load_table, write(tmp_path, data), TEXT)
    assert code == "E0508" and "more than 16 MiB" in text and "no budget has been spent" in text
    assert "xxx" not in text and "zzz" not in text


# ---- only regular files ----------------------------------------------------------------------------------


@pytest.fixture
def odd_files(tmp_path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    out = {"fifo": fifo, "folder": tmp_path / "folder.csv"}
    out["folder"].mkdir()
    for name, target in (("zero", "/dev/zero"), ("null", "/dev/null")):
        if os.path.exists(target):
            out[name] = tmp_path / f"{name}.csv"
            out[name].symlink_to(target)
    link = tmp_path / "link-to-fifo.csv"
    link.symlink_to(fifo)
    out["link"] = link
    return out


def test_hashing_refuses_anything_but_a_regular_file_before_opening_it(odd_files):
    for name, path in odd_files.items():
        with pytest.raises(FuzzError) as e:
            finishes(dataset_identity, path)
        assert e.value.diagnostics[0].code == "E0502", name
        assert "not a regular file" in e.value.diagnostics[0].message


def test_loading_refuses_anything_but_a_regular_file(odd_files):
    for name, path in odd_files.items():
        with pytest.raises(FuzzError) as e:
            finishes(load_table, path, TWO)
        assert e.value.diagnostics[0].code == "E0502", name


def test_a_fifo_swapped_in_after_the_check_is_still_refused_without_blocking(odd_files, tmp_path, monkeypatch):
    regular = write(tmp_path, "1,2\n")
    real_stat = os.stat

    def lying_stat(path, *args, **kwargs):  # the name was a regular file when it was checked
        return real_stat(regular) if Path(path) == odd_files["fifo"] else real_stat(path, *args, **kwargs)

    monkeypatch.setattr(files.os, "stat", lying_stat)
    with pytest.raises(files.NotARegularFile):
        finishes(files.open_regular, odd_files["fifo"])


def test_open_regular_reads_regular_files_and_links_to_them(tmp_path):
    target = write(tmp_path, "1,2\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    with files.open_regular(link) as fh:
        assert fh.read() == b"1,2\n"
    assert files.is_regular(link) and not files.is_regular(tmp_path)
    with pytest.raises(FileNotFoundError):
        files.open_regular(tmp_path / "missing.csv")


def test_run_with_a_fifo_as_data_ends_promptly_and_charges_nothing(odd_files, tmp_path):
    prog = tmp_path / "p.fz"
    prog.write_text("schema T { a : num[0, 100], b : num[0, 100] }\n"
                    "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n")
    book = tmp_path / "ledger.sqlite"
    for args in (["--ledger", str(book)], ["--seed", "1"]):
        res = finishes(runner.invoke, app, ["run", str(prog), "--data", str(odd_files["fifo"]), "--budget", "1",
                                            *args])
        assert res.exit_code == 4 and "E0502" in res.stderr and "not a regular file" in res.stderr
    assert not book.exists()
    device = odd_files.get("zero", odd_files["fifo"])
    cap = finishes(runner.invoke, app, ["ledger", "set-cap", "--data", str(device), "--cap", "1", "--ledger", str(book)])
    assert cap.exit_code == 2 and "E0502" in cap.stderr


def test_open_regular_refuses_a_fifo_without_opening_it_for_a_writer(odd_files):
    fifo = odd_files["fifo"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # no writer: a plain open() would block forever
    with pytest.raises(files.NotARegularFile):
        finishes(files.open_regular, fifo)
