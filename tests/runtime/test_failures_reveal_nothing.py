"""Whether a run fails, and what its errors and warnings show, reveals nothing about the private
data: a checked program runs on every table (its primitives are total), a failure that depends on
the data is either refused by the checker or absorbed, and messages about a data file name no row,
value or count.

Findings of the review rounds (the round and what broke are in each docstring), pinned as
regression tests.  Neighbouring tables differ by one row (unbounded DP); library runs use
RandomSource.seeded (tests only).  CLI runs always pass a temporary --ledger (and FUZZPY_LEDGER
points into tmp_path too).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from check_and_run import ROW_A, ROW_B, check, codes, make_tables, outcome, run
from cli_runs import cli_subprocess, data, fz, prog, write

from fuzzpy.diagnostics import FuzzError
from fuzzpy.ledger import Ledger
from fuzzpy.runtime.data import load_table


@pytest.fixture(autouse=True)
def _never_the_default_ledger(tmp_path, monkeypatch):
    """Belt and braces: a run that forgot --ledger books into tmp_path, never ~/.fuzzpy."""
    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "env-ledger.sqlite"))


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


# ---- what a run prints ----------------------------------------------------------------------------

def test_numpy_warnings_on_stderr_do_not_depend_on_the_data(tmp_path):
    """Second review round (the runtime), finding R2 (high): numpy's RuntimeWarnings reached stderr,
    and whether one is raised depends on the rows: `(if r.x > 5 then 10 else 0) / 1e-308`
    overflows only when some row has x > 5 (np.where returns an ndarray, so pandas' own errstate
    does not apply, and `_div` silenced only divide/invalid, not overflow).  The probe below
    releases nothing and is charged epsilon 0, yet the curator's stderr showed "RuntimeWarning:
    overflow encountered in divide" exactly when the predicate holds for some row: an arbitrary
    predicate, unlimited times, at epsilon 0.  Any numpy operation on ndarrays can do the same.
    Suggested fix: run the interpreter under `np.errstate(all="ignore")` and with Python warnings
    suppressed while the run thread is alive; add a test that runs the stdlib and examples with
    warnings turned into errors."""
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num {\n"
                             "  let probe = count (filter (fun r -> (if r.x > 5 then 10 else 0) / 1e-308 > 1) db);\n"
                             "  return 0 }\n")
    observed = []
    for i, rows in enumerate([ROW_A, ROW_A + ROW_B]):
        res = cli_subprocess(["run", program, "--data", data(tmp_path, rows, f"d{i}.csv"), "--budget", "0",
                              "--ledger", tmp_path / "l.sqlite"], timeout=120)
        observed.append((res.returncode, res.stderr))
    assert observed[0][0] == 0
    assert observed[0] == observed[1]


# ---- a checked program runs on every table ---------------------------------------------------------

CROSSTAB_CRASHES = {
    "empty-bag": (
        "function down (v : int[0, 5]) : int[0, 5] { if v > 0 then down (clip 0 5 (v - 1)) else 0 }\n"
        "function main (db : bag T) : fuzzy num {\n"
        "  let ps = groupby (fun r -> (r.k, down r.n)) (filter (fun r -> r.x > 5) db);\n"
        '  laplace 1 (count (part ps "a, 0")) }', ROW_A, ROW_A + ROW_B),
    "one-failing-row": (
        "function down (x : num) : num { if x > 0 then down (x - 1) else 0 }\n"
        "function main (db : bag T) : fuzzy num {\n"
        "  let ps = groupby (fun r -> (r.k, if down (r.x * 100000) == 0 then 0 else 1)) db;\n"
        '  laplace 1 (count (part ps "a, 0")) }', "0,a,true,1\n", "0,a,true,1\n" + ROW_B),
}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("name", sorted(CROSSTAB_CRASHES))
def test_crosstab_with_a_row_by_row_key_does_not_fail_depending_on_data(name, tables):
    """Second review round (the runtime), finding R3 (high): a crosstab groupby whose key function
    runs row by row (here: a recursive helper, which never vectorises) crashed the run when the bag
    is empty, or when the key of any one row fails: `_row_by_row` -> `bag_from_rows` returned
    `pd.Series([], dtype=object)` for no rows and a Series of tuples/None when a row failed, but
    `key_codes` (partitions.py) did `values.iloc[:, j]`, which only works on a DataFrame.  The run
    then ended in E0604 / exit 4, and whether it did depended on the data (is any row > 5? does
    some row make the key fail?): the exit code released a bit with infinite privacy loss (the
    charge stays, but the bit is not noised).  Suggested fix: make key_codes accept a Series of
    tuples (None -> no part), or have _row_by_row build a DataFrame of the right width (missing
    rows as all-None tuples)."""
    src, rows, neighbour = CROSSTAB_CRASHES[name]
    r = check(src)
    assert r.ok and r.epsilon == 1  # a fair program: the fix belongs in the runtime
    assert outcome(r, tables(rows))[0] == outcome(r, tables(neighbour))[0] == "value"


EMPTY_RELEASED_LISTS = {
    "above_threshold": ("list bool", "above_threshold 1 1 0 xs (fun q -> count (filter (fun r -> r.x < q) db))"),
    "noisy_max": ("num", "noisy_max 1 xs (fun c -> count (filter (fun r -> r.x < c) db))"),
    "exponential": ("num", "exponential 1 xs (fun c -> count (filter (fun r -> r.x < c) db))"),
}


@pytest.mark.parametrize("name", sorted(EMPTY_RELEASED_LISTS))
def test_an_empty_released_candidate_list_is_not_an_internal_error(name, tables):
    """Second review round (the runtime), finding R10 (low; no leak): the candidates of exponential /
    noisy_max and the queries of above_threshold may be released values, so the list can be empty
    at run time although the program checked.  noise._scores then raised ValueError("no
    candidates") and svt_accuracy took log(0): the run ended in the generic E0604 "internal error",
    with its epsilon charged.  The emptiness is post-processing of released values, so nothing
    leaks, but docs/runtime.md promises that primitives are total and that a checked program does
    not fail.  Suggested fix: above_threshold on no queries answers () (guard svt_accuracy for
    k = 0); for the selection mechanisms either require a non-empty list in the checker or raise a
    RunFailure whose message names the mechanism and the empty list (safe to show: the list is
    public)."""
    from fuzzpy.runtime.interpreter import RunFailure

    result, call = EMPTY_RELEASED_LISTS[name]
    r = check(f"function main (db : bag T) : fuzzy {result} {{\n"
              "  sample k = laplace 1 5;\n"          # a public constant: released unchanged, k = 5
              "  let xs = if k > 10 then [1] else [];\n"
              f"  {call} }}")
    if not r.ok:  # a checker that demands a non-empty list is a fix too
        assert codes(r)
        return
    try:
        value = run(r, tables(ROW_A))
    except RunFailure:  # a failure whose message is fixed by the program text is acceptable
        return
    assert name == "above_threshold" and value == ()


def test_every_bag_primitive_runs_on_an_empty_table(tables):
    """Second review round (the runtime), handled: every bag primitive runs on an empty table, one
    row and two."""
    r = check("""function main (db : bag T) : fuzzy (num, num, string, string, list bool, bool, parts {"a", "b", "c"} num, num) {
      let (yes, no) = split (fun r -> r.flag) db;
      let ps = groupby (fun r -> r.k) (union yes no);
      let qs = groupby (fun r -> (r.k, clip 0 1 r.n)) db;
      let is = groupby (fun r -> clip 0 2 r.n) db;
      let top = head 2 (sort_by (fun r -> r.x) db);
      let low = tail 1 (sort_by (fun r -> r.k) (filter (fun r -> r.x < 5) db));
      let mid = slice 1 2 (sort_by (fun r -> r.x / (r.x - r.x)) db);
      sample a = laplace 1 (count top + count low + count mid);
      sample s = laplace 1 (sum (map (fun r -> clip 0 1 (r.x / (r.x - r.x))) db));
      sample b = exponential 1 ["a", "b"] (fun c -> count (filter (fun r -> r.k == c) db));
      sample c = noisy_max 1 (keys ps) (fun c -> count (filter (fun r -> r.k == c) db));
      sample d = above_threshold 1 1 0 [1, 2] (fun q -> count (filter (fun r -> r.x < q) db));
      sample e = randomized_response 1 (count db > 3);
      sample f = each (fun g -> laplace 1 (count g)) ps;
      sample h = laplace 1 (count (part qs "b, 1") + count (part is "2") + part (pmap (fun g -> clip 0 1 (count g)) ps) "a");
      return (a, s, b, c, d, e, f, h) }""")
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    for rows in ("", ROW_A, ROW_A + ROW_B):
        kind, value = outcome(r, tables(rows))
        assert kind == "value", (rows, value)


# ---- messages about a data file name no row ------------------------------------------------------------

def test_an_unparsable_cell_is_a_format_error_that_names_no_row(tmp_path):
    """First review round.  A decision, not an oversight: unparsable values must give a clear error
    before any budget is spent.  That error is one bit about the file ("some cell of column x is
    not an int"), seen by the curator who runs the program; it names no row, value or count, and
    spends nothing.  The review's point stands (an analyst-written schema could probe it), so
    docs/data.md tells curators to review load errors before passing them on."""
    from fuzzpy.typesystem.types import Column, Num, Schema

    schema = Schema("t", (Column("x", Num(None, None, True)),))
    (tmp_path / "a.csv").write_text("x\n1\n2\n")
    (tmp_path / "b.csv").write_text("x\n1\n2\n2.5\n")
    assert len(load_table(tmp_path / "a.csv", schema, table="t")) == 2
    with pytest.raises(FuzzError) as err:
        load_table(tmp_path / "b.csv", schema, table="t")
    d = err.value.diagnostics[0]
    assert d.code == "E0504" and "2.5" not in d.message + " ".join(d.notes)
    assert not any(ch.isdigit() for ch in d.message)


def test_an_incomplete_header_error_does_not_quote_a_data_row(tmp_path):
    """Second review round (the runtime), finding R4 (medium-high): a headerless text file whose
    first data row happens to contain a declared column name was taken for an incomplete header,
    and E0503 printed that row verbatim ("columns in the file: Alice Smith, Flu").  The schema is
    the analyst's, so the analyst picks column names that are likely values: the message quoted a
    private row, and whether the load failed at all depended on the content of the first row (the
    same bag with its rows permuted loaded fine).  docs/data.md promises that messages never
    contain a cell value or a row.  Suggested fix (runtime/data.py _select_columns): never echo the
    first row's fields; decide header vs positional from public facts only."""
    program = write(tmp_path / "p.fz", 'schema P { name : string, Flu : string }\n'
                                       'function main (db : bag P) : fuzzy num { laplace 1 (count db) }\n')
    first = write(tmp_path / "h1.csv", "Alice Smith,Flu\nBob Jones,HIV\n")
    permuted = write(tmp_path / "h2.csv", "Bob Jones,HIV\nAlice Smith,Flu\n")  # the same bag
    a = fz("run", program, "--data", first, "--budget", "1", "--seed", "1")
    b = fz("run", program, "--data", permuted, "--budget", "1", "--seed", "1")
    assert "Alice" not in a.stderr + a.stdout
    assert a.exit_code == b.exit_code


def _parquet(kind: str, path: Path) -> Path:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    column = {"list": pa.array([[1.0], [2.0]]), "struct": pa.array([{"a": 1}, {"a": 2}]),
              "binary": pa.array([b"\xff\xfe", b"1"], pa.binary())}[kind]
    pq.write_table(pa.table({"x": column, "k": ["a", "a"], "flag": [True, True], "n": [1, 1]}), path)
    return path


@pytest.mark.parametrize("kind", ["list", "struct", "binary"])
def test_unusual_parquet_columns_are_a_clean_data_error(kind, tmp_path):
    """Second review round (the runtime), handled: data at the edges."""
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    book = tmp_path / "l.sqlite"
    res = fz("run", program, "--data", _parquet(kind, tmp_path / "d.parquet"), "--budget", "1", "--ledger", book)
    assert res.exit_code == 4 and "E0504" in res.stderr and "column 'x'" in res.stderr
    assert not book.exists() or Ledger(book).entries() == []


@pytest.mark.parametrize("name, content, code", [
    ("nul-byte", b"x,k,flag,n\n1,a,true,1\nSECRET\x00,a,true,1\n", "E0502"),
    ("gzip", b"\x1f\x8b\x08\x00SECRET", "E0502"),
    ("parquet-named-csv", b"PAR1SECRET\x00\x00PAR1", "E0502"),
    ("short-row", b"x,k,flag,n\n1,a,true,1\nSECRET,a\n", "E0502"),
    ("unterminated-quote", b'x,k,flag,n\n1,a,true,1\n"SECRET,a,true,1\n', "E0502"),
    ("invalid-utf8-late", b"x,k,flag,n\n" + b"1,a,true,1\n" * 7000 + b"2,a,true,\xffSECRET\n", "E0502"),
    ("duplicated-declared-column", b"x,k,flag,n,x\n1,a,true,1,SECRET\n", "E0505"),
    ("not-a-number", b"x,k,flag,n\nSECRET,a,true,1\n", "E0504"),
])
def test_malformed_csv_is_one_coded_error_that_quotes_nothing(name, content, code, tmp_path):
    """Second review round (the runtime), handled: data at the edges."""
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    path = tmp_path / "d.csv"
    path.write_bytes(content)
    book = tmp_path / "l.sqlite"
    res = fz("run", program, "--data", path, "--budget", "1", "--ledger", book)
    assert res.exit_code == 4 and code in res.stderr
    assert "SECRET" not in res.stderr + res.stdout and "Traceback" not in res.stderr
    assert not book.exists() or Ledger(book).entries() == []
