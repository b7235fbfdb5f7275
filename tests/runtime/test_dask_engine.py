"""The Dask engine on a real `dask.distributed` cluster (two in-process workers, one per module):
the examples release the same values as the pandas engine under the same seed, sums stay exact
across partitions, a bad file or an unsupported primitive is refused before anything is charged,
and nothing private reaches a message."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

distributed = pytest.importorskip("distributed")

from fuzzpy.interfaces.cli import app  # noqa: E402
from fuzzpy.ledger import Ledger, dataset_identity  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SAMPLE = EXAMPLES / "data" / "adult_sample.csv"
POINTS = EXAMPLES / "data" / "points.csv"
runner = CliRunner()


@pytest.fixture(scope="module")
def scheduler(dask_scheduler):
    return dask_scheduler  # the cluster of tests/conftest.py, shared with the generated programs' comparison


def _numeric(col: pd.Series) -> pd.Series:
    try:
        return pd.to_numeric(col)
    except ValueError:
        return col


def _split(src: Path, out: Path, parts: int, parquet: bool) -> Path:
    out.mkdir()
    frame = pd.read_csv(src, dtype=str, keep_default_na=False)
    size = -(-len(frame) // parts)
    for i in range(parts):
        chunk = frame.iloc[i * size:(i + 1) * size]
        if parquet:  # numbers typed, as a real Parquet export would have them
            typed = chunk.apply(_numeric)
            typed.to_parquet(out / f"part-{i:02d}.parquet", index=False)
        else:
            chunk.to_csv(out / f"part-{i:02d}.csv", index=False)
    return out


@pytest.fixture(scope="module")
def adult_parquet(tmp_path_factory):
    return _split(SAMPLE, tmp_path_factory.mktemp("adult") / "pq", 3, parquet=True)


@pytest.fixture(scope="module")
def adult_csv(tmp_path_factory):
    return _split(SAMPLE, tmp_path_factory.mktemp("adult") / "csv", 4, parquet=False)


@pytest.fixture(scope="module")
def points_parquet(tmp_path_factory):
    return _split(POINTS, tmp_path_factory.mktemp("points") / "pq", 3, parquet=True)


def fz(*args: object):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def released(result) -> tuple[list, object]:
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    return [(r["name"], r.get("keys"), r["value"]) for r in out["releases"]], out["result"]


def both(example: str, data: Path, dask_data: Path, scheduler: str, *extra: str, persist: bool = False):
    prog = EXAMPLES / f"{example}.fz"
    common = ["--seed", "11", "--format", "json", "--budget", "10", *extra]
    pandas_run = released(fz("run", prog, "--data", data, *common))
    dask_run = released(fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", dask_data, *common,
                           *(["--persist"] if persist else [])))
    return pandas_run, dask_run


# ---- the examples: the same released values on both engines --------------------------------------

@pytest.mark.parametrize("example, extra", [
    ("quickstart", ()),
    ("histogram", ()),
    ("cdf", ("--param", "bounds=[30, 50, 70]")),
    ("median", ("--param", "candidates=[30, 37, 45]")),
    ("logistic_regression", ("--param", "T=2")),
])
def test_examples_release_the_same_values_on_parquet(example, extra, scheduler, adult_parquet):
    pandas_run, dask_run = both(example, SAMPLE, adult_parquet, scheduler, *extra)
    assert pandas_run[0], "the example released nothing"
    assert dask_run == pandas_run


def test_csv_partitions_and_a_glob_release_the_same_values(scheduler, adult_csv):
    pandas_run, dask_run = both("quickstart", SAMPLE, Path(str(adult_csv) + "/part-*.csv"), scheduler)
    assert dask_run == pandas_run


def test_persisted_partitions_release_the_same_values(scheduler, adult_parquet):
    pandas_run, dask_run = both("histogram", SAMPLE, adult_parquet, scheduler, persist=True)
    assert dask_run == pandas_run
    pandas_run, dask_run = both("logistic_regression", SAMPLE, adult_parquet, scheduler, "--param", "T=1",
                                persist=True)
    assert dask_run == pandas_run


@pytest.mark.parametrize("example, extra", [
    ("kmeans", ("--param", "T=2")),
    ("kmeans_gauss", ("--param", "T=2", "--delta", "1e-6")),
])
def test_partition_examples_release_the_same_values(example, extra, scheduler, points_parquet):
    pandas_run, dask_run = both(example, POINTS, points_parquet, scheduler, *extra)
    assert pandas_run[0] and dask_run == pandas_run


# ---- exactness across partitions ------------------------------------------------------------------

EXACT_SUM = """schema T { x : num[-10000000000000000, 10000000000000000] }
function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> r.x) db)) }
"""


def test_sum_over_partitions_is_exact_whatever_the_order(tmp_path, scheduler):
    # Float addition of these values depends on the order (1e16 + 1 - 1e16 is 0 or 1); the exact
    # grid sum does not, so every partitioning releases what the single file releases.
    values = [1e16, 1.0, -1e16, 1.0, 3.0, -1e16, 1e16, 0.5] * 3
    single = tmp_path / "one.csv"
    pd.DataFrame({"x": values}).to_csv(single, index=False)
    (tmp_path / "parts").mkdir()
    for i in range(5):
        pd.DataFrame({"x": values[i::5]}).to_parquet(tmp_path / "parts" / f"p{i}.parquet", index=False)
    prog = tmp_path / "s.fz"
    prog.write_text(EXACT_SUM)
    common = ["--seed", "3", "--format", "json", "--budget", "1"]
    pandas_run = released(fz("run", prog, "--data", single, *common))
    dask_run = released(fz("run", prog, "--engine", "dask", "--scheduler", scheduler,
                           "--data", tmp_path / "parts", *common))
    assert dask_run == pandas_run


# ---- refusals before the charge, with nothing private in the message --------------------------------

COUNT_AGE = """schema A { age : num[17, 90] }
function main (db : bag A) : fuzzy num { laplace 0.5 (count (filter (fun r -> r.age >= 40) db)) }
"""


def test_bad_partition_is_refused_before_the_charge(tmp_path, scheduler):
    data = tmp_path / "d"
    data.mkdir()
    pd.DataFrame({"age": [30, 41, 52]}).to_parquet(data / "a.parquet", index=False)
    pd.DataFrame({"age": ["44", "secret-cell-77", "60"]}).to_parquet(data / "b.parquet", index=False)
    prog = tmp_path / "c.fz"
    prog.write_text(COUNT_AGE)
    ledger = tmp_path / "ledger.sqlite"
    r = fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", data, "--budget", "1",
           "--ledger", ledger)
    assert r.exit_code == 4
    assert "E0504" in r.output and "column 'age'" in r.output
    assert "secret-cell-77" not in r.output and "44" not in r.output
    assert not ledger.exists() or not Ledger(ledger).entries()


def test_unsupported_primitive_is_refused_before_anything_is_read(tmp_path):
    prog = tmp_path / "top.fz"
    prog.write_text("""schema A { age : num[17, 90] }
function youngest (db : bag A) : bag A { head 5 (sort_by (fun r -> r.age) db) }
function main (db : bag A) : fuzzy num {
  laplace 0.5 (count (youngest db))
}""")  # found inside the helper's instance too
    missing = tmp_path / "nowhere"  # never looked at, no cluster started: the refusal comes first
    ledger = tmp_path / "ledger.sqlite"
    r = fz("run", prog, "--engine", "dask", "--data", missing, "--budget", "10", "--ledger", ledger)
    assert r.exit_code == 4, r.output
    assert "E2101" in r.output and "primitive sort_by" in r.output and "primitive head" in r.output
    assert "E0501" not in r.output and not ledger.exists()
    # The same program runs on the pandas engine (the refusal is the engine's, not the checker's).
    r = fz("run", prog, "--data", SAMPLE, "--budget", "10", "--seed", "1")
    assert r.exit_code == 0, r.output


def test_each_csv_file_follows_the_pandas_engines_rules(tmp_path, scheduler):
    prog = tmp_path / "c.fz"
    prog.write_text(COUNT_AGE)
    data = tmp_path / "d"
    data.mkdir()
    (data / "a.csv").write_text("age\n31\n45\n")
    (data / "b.csv").write_text("52\n61\n")  # no header: one field per declared column, by position
    common = ["--budget", "1", "--seed", "1", "--format", "json"]
    whole = tmp_path / "whole.csv"
    whole.write_text("age\n31\n45\n52\n61\n")
    assert released(fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", data, *common)) == \
        released(fz("run", prog, "--data", whole, *common))
    (data / "c.csv").write_text("age\n33\n47,secret-99\n")  # ragged: refused as the pandas engine does
    for extra in (("--engine", "dask", "--scheduler", scheduler, "--data", data), ("--data", data / "c.csv")):
        r = fz("run", prog, *extra, "--budget", "1", "--seed", "1")
        assert r.exit_code == 4 and "E0502" in r.output and "secret-99" not in r.output, r.output


def test_header_applies_to_every_csv_file_on_the_dask_engine(tmp_path, scheduler):
    """`--header` reaches each partition's loader: a file whose header misses a declared column
    is E0503 naming it, before anything is charged; files with headers load as without it."""
    prog = tmp_path / "c.fz"
    prog.write_text(COUNT_AGE)
    data = tmp_path / "d"
    data.mkdir()
    (data / "a.csv").write_text("age\n31\n45\n")
    (data / "b.csv").write_text("agee\n52\n")
    ledger = tmp_path / "ledger.sqlite"
    r = fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", data, "--budget", "1",
           "--ledger", ledger, "--header")
    assert r.exit_code == 4 and "E0503" in r.output and "does not name column(s) 'age'" in r.output, r.output
    assert "agee" not in r.output and not (ledger.exists() and Ledger(ledger).entries())
    (data / "b.csv").write_text("age\n52\n")
    common = ["--budget", "1", "--seed", "1", "--format", "json", "--header"]
    whole = tmp_path / "whole.csv"
    whole.write_text("age\n31\n45\n52\n")
    assert released(fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", data, *common)) == \
        released(fz("run", prog, "--data", whole, *common))


def test_mixed_or_missing_files_are_refused(tmp_path, scheduler):
    prog = tmp_path / "c.fz"
    prog.write_text(COUNT_AGE)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "a.csv").write_text("age\n31\n")
    pd.DataFrame({"age": [40]}).to_parquet(mixed / "b.parquet")
    r = fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", mixed, "--budget", "1", "--seed", "1")
    assert r.exit_code == 4 and "E2103" in r.output
    r = fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", tmp_path / "empty*.parquet",
           "--budget", "1", "--seed", "1")
    assert r.exit_code == 4 and "E2103" in r.output
    pd.DataFrame({"years": [40]}).to_parquet(tmp_path / "other.parquet")
    r = fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", tmp_path / "other.parquet",
           "--budget", "1", "--seed", "1")
    assert r.exit_code == 4 and "E0503" in r.output


def test_engine_options_are_checked(tmp_path):
    prog = tmp_path / "c.fz"
    prog.write_text(COUNT_AGE)
    r = fz("run", prog, "--engine", "spark", "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert r.exit_code == 2 and "E0701" in r.output
    r = fz("run", prog, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1", "--workers", "2",
           "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert r.exit_code == 2 and "E0701" in r.output
    r = fz("run", prog, "--engine", "dask", "--workers", "0", "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert r.exit_code == 2 and "E0701" in r.output
    r = fz("run", prog, "--persist", "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert r.exit_code == 2 and "go with --engine dask" in r.output


# ---- the ledger ---------------------------------------------------------------------------------------

def test_a_dask_run_is_charged_once_per_dataset(tmp_path, scheduler, adult_parquet):
    ledger = tmp_path / "ledger.sqlite"
    r = fz("run", EXAMPLES / "quickstart.fz", "--engine", "dask", "--scheduler", scheduler,
           "--data", adult_parquet, "--ledger", ledger, "--format", "json")
    assert r.exit_code == 0, r.output
    entries = Ledger(ledger).entries()
    assert len(entries) == 1 and entries[0].status == "released"
    # A single file is the same dataset on both engines.
    one = sorted(adult_parquet.iterdir())[0]
    r = fz("run", EXAMPLES / "quickstart.fz", "--engine", "dask", "--scheduler", scheduler,
           "--data", one, "--ledger", ledger, "--format", "json")
    assert r.exit_code == 0, r.output
    assert Ledger(ledger).entries()[-1].dataset == dataset_identity(one)


# ---- what a worker may see ----------------------------------------------------------------------------

def test_a_captured_table_never_travels_to_a_worker():
    from fuzzpy.runtime.engines.dask_tables import DaskBag, TableUsedOnWorker

    bag = DaskBag(engine=None, frame=pd.DataFrame({"age": [1, 2, 3]}))  # type: ignore[arg-type]
    shipped = pickle.loads(pickle.dumps({"db": bag}))["db"]
    assert b"age" not in pickle.dumps(bag)
    with pytest.raises(TableUsedOnWorker):
        len(shipped)


CAPTURES_TABLE = """schema A { age : num[17, 90] }
function main (db : bag A) : fuzzy num {
  let x = %s;
  laplace 0.5 (count db)
}"""


@pytest.mark.parametrize("use", ["count (filter (fun r -> r.age < count db) db)",
                                 "sum (map (fun r -> clip 0 9 (count db)) db)"])
def test_a_row_function_reading_a_captured_table_stops_the_run(use, tmp_path, scheduler, adult_parquet):
    # The checker accepts it (x is never released); the pandas engine computes it; on Dask the
    # table is not on the worker, and computing something else instead would be wrong: E2102.
    prog = tmp_path / "cap.fz"
    prog.write_text(CAPTURES_TABLE % use)
    assert fz("run", prog, "--data", SAMPLE, "--budget", "1", "--seed", "1").exit_code == 0
    r = fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", adult_parquet, "--budget", "1",
           "--seed", "1")
    assert r.exit_code == 4 and "E2102" in r.output, r.output


def test_the_pandas_engine_does_not_import_dask():
    code = ("import sys; from typer.testing import CliRunner; from fuzzpy.interfaces.cli import app; "
            f"r = CliRunner().invoke(app, ['run', {str(EXAMPLES / 'quickstart.fz')!r}, '--data', {str(SAMPLE)!r}, "
            "'--seed', '1']); assert r.exit_code == 0, r.output; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ---- one read of each file: the charge names the bytes every pass uses ---------------------------

def _files_identity(files: list[Path]) -> str:
    import hashlib

    h = hashlib.sha256(b"fuzzpy-files\0")
    for f in files:
        h.update(dataset_identity(f).encode("ascii") + b"\n")
    return "sha256:" + h.hexdigest()


@pytest.mark.parametrize("kind", ["adult_parquet", "adult_csv"])
def test_the_charge_names_the_files_that_were_read(kind, tmp_path, scheduler, request):
    data = request.getfixturevalue(kind)
    ledger = tmp_path / "ledger.sqlite"
    r = fz("run", EXAMPLES / "quickstart.fz", "--engine", "dask", "--scheduler", scheduler,
           "--data", data, "--ledger", ledger, "--format", "json")
    assert r.exit_code == 0, r.output
    assert Ledger(ledger).entries()[-1].dataset == _files_identity(sorted(data.iterdir()))


def _engine_table(scheduler: str, files: list[Path], persist: bool = False):
    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.engines.dask_engine import DaskEngine

    report = check_source(COUNT_AGE, "c.fz")
    engine = DaskEngine.start(scheduler)
    bag, ident = engine.open_table([str(f) for f in files], report.table_schema(report.inputs[0]), "db",
                                   persist=persist)
    return engine, bag, ident


def _count(engine, bag) -> int:
    from fuzzpy.runtime.kernels.bags import _p_count

    return sum(engine.partials(bag.frame, _p_count))


def _write(kind: str, path: Path, ages: list[int]) -> Path:
    if kind == "csv":
        path.write_text("age\n" + "".join(f"{a}\n" for a in ages))
    else:
        pd.DataFrame({"age": ages}).to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_a_file_changed_during_the_run_never_gives_a_value(kind, tmp_path, scheduler):
    """Later passes compute only from the charged bytes: read again and stopped (E2107) when the
    file's hash differs, or, with --persist, never read again."""
    from fuzzpy.runtime.engines.dask_engine import DaskRunFailure

    files = [_write(kind, tmp_path / f"a.{kind}", [31, 45]), _write(kind, tmp_path / f"b.{kind}", [52])]
    engine, bag, ident = _engine_table(scheduler, files)
    try:
        assert ident == _files_identity(files) and _count(engine, bag) == 3  # read again, unchanged
        _write(kind, files[1], [52, 53])
        with pytest.raises(DaskRunFailure) as caught:
            _count(engine, bag)
        (d,) = caught.value.diagnostics
        assert d.code == "E2107" and "changed during the run" in d.message and "53" not in d.message
    finally:
        engine.close()
    engine, persisted, ident = _engine_table(scheduler, files, persist=True)  # kept: never read again
    try:
        assert ident == _files_identity(files)
        _write(kind, files[1], [1, 2, 3, 4])
        assert _count(engine, persisted) == 4 and _count(engine, persisted) == 4
    finally:
        engine.close()


def test_csv_partitions_persisted_release_the_same_values(scheduler, adult_csv):
    pandas_run, dask_run = both("histogram", SAMPLE, adult_csv, scheduler, persist=True)
    assert pandas_run[0] and dask_run == pandas_run


def test_an_unreadable_parquet_file_is_refused_before_the_charge(tmp_path, scheduler):
    data = tmp_path / "d"
    data.mkdir()
    pd.DataFrame({"age": [30, 41]}).to_parquet(data / "a.parquet", index=False)
    (data / "b.parquet").write_bytes(b"PAR1 secret-cell-31 not parquet PAR1")
    prog = tmp_path / "c.fz"
    prog.write_text(COUNT_AGE)
    ledger = tmp_path / "ledger.sqlite"
    r = fz("run", prog, "--engine", "dask", "--scheduler", scheduler, "--data", data, "--budget", "1",
           "--ledger", ledger)
    assert r.exit_code == 4 and "E0502" in r.output and "not a readable Parquet file" in r.output, r.output
    assert "secret-cell-31" not in r.output and not (ledger.exists() and Ledger(ledger).entries())


def test_a_partition_recomputed_from_other_bytes_is_refused(tmp_path):
    """Dask recomputes a kept partition lost with its worker from its task, reading the file
    again: it is used only if it comes from the charged bytes (else DataChanged: E2107 in a run)."""
    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.engines.dask_engine import DataChanged, _p_checked_group, _partition

    f = tmp_path / "a.parquet"
    pd.DataFrame({"age": [30, 41, 52]}).to_parquet(f, index=False)
    report = check_source(COUNT_AGE, "c.fz")
    schema = report.table_schema(report.inputs[0])
    checked = _p_checked_group((str(f), 0), schema, "db", True)
    charged = checked[1]
    assert charged == dataset_identity(f) and len(_partition(checked, charged)) == 3
    pd.DataFrame({"age": [20, 21]}).to_parquet(f, index=False)
    with pytest.raises(DataChanged):
        _partition(_p_checked_group((str(f), 0), schema, "db", True), charged)


def test_empty_parquet_files_are_read_and_hashed_too(tmp_path, scheduler):
    files = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    pd.DataFrame({"age": [30, 41]}).to_parquet(files[0], index=False)
    pd.DataFrame({"age": pd.Series([], dtype="int64")}).to_parquet(files[1], index=False)
    engine, bag, ident = _engine_table(scheduler, files)
    try:
        assert ident == _files_identity(files) and _count(engine, bag) == 2
    finally:
        engine.close()


def test_a_parquet_file_changed_to_bad_data_is_refused_by_its_hash(tmp_path, scheduler):
    """The hash is compared before the bytes are parsed: another file's cells are never conformed."""
    from fuzzpy.runtime.engines.dask_engine import DaskRunFailure

    files = [_write("parquet", tmp_path / "a.parquet", [31, 45])]
    engine, bag, _ = _engine_table(scheduler, files)
    try:
        pd.DataFrame({"age": ["secret-cell-5"]}).to_parquet(files[0], index=False)
        with pytest.raises(DaskRunFailure) as caught:
            _count(engine, bag)
        (d,) = caught.value.diagnostics
        assert d.code == "E2107" and "secret-cell-5" not in d.message
    finally:
        engine.close()


# ---- columns kept (docs/data.md): the Dask engine keeps only the columns the program reads -------

KEPT_SCHEMA = 'schema T { x : num[0, 10], s : string, k : cat{"a", "b"} }\n'
KEPT_PROGRAMS = [
    "laplace 1 (count db)",                                               # no column at all
    "laplace 1 (sum (map (fun r -> r.x) (filter (fun r -> r.k == \"a\") db)))",  # two of three
    # a table left with x only, joined with records built whole: only x is joined
    "laplace 1 (count (filter (fun r -> r.x > 2) (union db (map (fun r -> {x = r.x, s = \"z\", k = r.k}) db))))",
]


@pytest.mark.parametrize("kind", ["parquet", "csv"])
@pytest.mark.parametrize("body", KEPT_PROGRAMS)
def test_tables_with_columns_left_out_release_the_same_values(kind, body, tmp_path, scheduler):
    rows = pd.DataFrame({"x": [1.0, 3.0, 5.0, 9.5, 2.5, 7.0], "s": ["u", "v", "", "w", "u", "v"],
                         "k": ["a", "b", "a", "a", "b", "a"]})  # an empty s: the row is dropped
    single = tmp_path / "one.csv"
    rows.to_csv(single, index=False)
    (tmp_path / "parts").mkdir()
    for i in range(3):
        part = rows.iloc[i::3]
        if kind == "parquet":
            part.to_parquet(tmp_path / "parts" / f"p{i}.parquet", index=False)
        else:
            part.to_csv(tmp_path / "parts" / f"p{i}.csv", index=False)
    prog = tmp_path / "k.fz"
    prog.write_text(KEPT_SCHEMA + f"function main (db : bag T) : fuzzy num {{ {body} }}\n")
    common = ["--seed", "5", "--format", "json", "--budget", "1", "--header"]
    pandas_run = released(fz("run", prog, "--data", single, *common))
    dask_run = released(fz("run", prog, "--engine", "dask", "--scheduler", scheduler,
                           "--data", tmp_path / "parts", *common))
    assert pandas_run[0] and dask_run == pandas_run


def test_the_engine_keeps_only_the_columns_it_is_given(tmp_path, scheduler):
    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.engines.dask_engine import DaskEngine

    report = check_source(KEPT_SCHEMA + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n", "k.fz")
    path = tmp_path / "p.parquet"
    pd.DataFrame({"x": [1.0, 2.0], "s": ["u", ""], "k": ["a", "b"]}).to_parquet(path, index=False)
    engine = DaskEngine.start(scheduler)
    try:
        engine.columns = frozenset({"k"})
        bag, _ = engine.open_table([str(path)], report.table_schema(report.inputs[0]), "db")
        frame = bag.frame.compute()
        assert list(frame.columns) == ["k"] and list(frame["k"]) == ["a"]  # the row with an empty s is gone
    finally:
        engine.close()
