"""Columns kept (runtime/columns.py, docs/data.md "Columns kept"): a run holds only the columns
its program reads, and releases exactly what it releases from the whole table.

The analysis must never name fewer columns than the program reads (a missing column would fail
the run after the budget is charged), a whole-record comparison must keep them all, and the rows
must be those of the whole table: an unread column with the `drop` policy still drops its rows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from fuzzpy.checking.program import check_file, check_source
from fuzzpy.diagnostics import FuzzError
from fuzzpy.pipeline.tables import table_inputs
from fuzzpy.runtime.columns import columns_read
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource
from fuzzpy.typesystem import ir as I

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SAMPLE = EXAMPLES / "data" / "adult_sample.csv"
POINTS = EXAMPLES / "data" / "points.csv"
DATA = {"kmeans": POINTS, "kmeans_gauss": POINTS,  # every other example runs on the Adult sample
        "flights_delay": EXAMPLES / "data" / "flights_sample.csv"}
FLIGHTS = {"flights": EXAMPLES / "data" / "flights_sample.csv", "airlines": EXAMPLES / "data" / "airlines.csv",
           "planes": EXAMPLES / "data" / "planes.csv"}  # the join examples' tables, by entry parameter

SCHEMA = 'schema T { x : num[0, 10], y : int[0, 5], k : cat{"a", "b"}, s : string, f : bool }\nparam eps : num = 1;\n'
ROWS = "x,y,k,s,f\n1.5,0,a,foo,true\n7,3,b,,false\n10,5,a,foo,false\n0,1,b,baz,true\n4.25,2,a,qux,true\n"


def report_of(body: str, extra: str = "", ret: str = "fuzzy num"):
    report = check_source(SCHEMA + extra + f"\nfunction main (db : bag T) : {ret} {{ {body} }}\n", "t.fz")
    assert report.ok, [f"{d.code} {d.message}" for d in report.diagnostics]
    return report


def read(body: str, extra: str = "", ret: str = "fuzzy num"):
    return columns_read(report_of(body, extra, ret).entry_instance)


# ---- what the analysis names -------------------------------------------------------------------

def test_no_checked_program_keeps_every_column() -> None:
    assert columns_read(None) is None


def test_a_program_reading_no_field_keeps_no_column() -> None:
    assert read("laplace eps (count db)") == frozenset()


def test_fields_read_in_helpers_lambdas_keys_and_mapped_records_are_all_named() -> None:
    extra = "function small (r : {x : num[0, 10], y : int[0, 5], k : cat{\"a\", \"b\"}, s : string, f : bool}) : bool { r.x < 5 }\n"
    body = ("let g = groupby (fun r -> r.k) (filter small db);"
            "let m = map (fun r -> {a = r.y}) (part g \"a\");"
            "laplace eps (sum (map (fun q -> clip 0 5 q.a) m))")
    assert read(body, extra) == {"x", "k", "y", "a"}


def test_fields_read_in_the_standard_library_are_named() -> None:
    src = 'import "stdlib/stats.fz";\n' + SCHEMA + "function main (db : bag T) { histogram eps (fun r -> r.k) db }\n"
    report = check_source(src, "t.fz")
    assert report.ok, [d.message for d in report.diagnostics]
    assert columns_read(report.entry_instance) == {"k"}


def test_a_scalar_equality_on_a_field_reads_that_field_only() -> None:
    assert read('laplace eps (count (filter (fun r -> r.k == "a" && r.s != "foo") db))') == {"k", "s"}


@pytest.mark.parametrize("cond", [
    "{x = r.x} == {x = 1}",          # records: compared field by field
    "(r.x, r.y) != (1, 2)",          # a tuple (it could hold a record: kept whole, conservatively)
])
def test_a_whole_value_comparison_keeps_every_column(cond: str) -> None:
    report = report_of(f"laplace eps (count (filter (fun r -> {cond}) db))")
    prims = [n for n in I.reachable(report.entry_instance) if isinstance(n, I.IPrim) and n.name in ("eq", "ne")]
    assert prims and all(p.info.get(I.WHOLE_VALUES) for p in prims)
    assert columns_read(report.entry_instance) is None


def test_a_comparison_of_whole_rows_keeps_every_column() -> None:
    report = check_source(SCHEMA + "function main (db : bag T) (other : bag T) : fuzzy num "
                                   "{ laplace eps (count (filter (fun r -> r == r) db)) }\n", "t.fz")
    assert report.ok, [d.message for d in report.diagnostics]
    assert columns_read(report.entry_instance) is None


# Every primitive that takes values of any type ('a), and why it reads a row's fields only through
# a function (so through field accesses) or not at all.  A new generic primitive must be reviewed
# against runtime/columns.py and added here: one that looks at whole values needs the
# WHOLE_VALUES flag, as eq and ne have.
GENERIC_REVIEWED = {
    "count": "counts rows", "filter": "a function", "map": "a function", "split": "a function",
    "groupby": "a key function", "sort_by": "a key function", "vsum": "a function",
    "union": "joins rows (the engines join the columns read)", "head": "positions", "tail": "positions",
    "slice": "positions", "part": "selects a part", "pmap": "a function", "each": "a function",
    "values": "the parts", "keys": "the keys", "reverse": "positions", "take": "positions",
    "eq": "whole values: flagged", "ne": "whole values: flagged",
    "lt": "numbers only (E0202 otherwise)", "le": "numbers only", "gt": "numbers only", "ge": "numbers only",
    "sort": "public scalars only", "exponential": "public candidates, a score function",
    "noisy_max": "public candidates, a score function", "above_threshold": "public queries, a score function",
    "rank_estimate": "public arguments only",
    "bound_rows": "the unit column (columns_read adds every unit)", "bound_groups": "a key function and the unit",
    "bound_groups_in": "a key function and the unit", "groupby_in": "a key function",
    "select_keys": "a key function and the unit",
    "select_keys_optimal": "a key function and the unit (the same evaluator as select_keys)",
    "truncate": "its key, named (READS_COLUMNS); the priorities hash whatever columns are kept, any serve",
    "join_public": "its keys, named (READS_COLUMNS)", "join_private": "its keys, named (READS_COLUMNS)",
    "values_of": "no rows: the values its key's column declares",
    "subsample": "a function (the sample keeps every column of the rows it keeps)",
}


def test_the_keys_a_join_or_truncation_names_are_kept() -> None:
    report = check_source("""schema F { tail : string, delay : num[0, 10], extra : num }
public schema P { tail2 : string unique, seats : int[0, 9], other : num }
function main (f : bag F) (p : bag P) : fuzzy num {
  laplace 1 (count (join_public "tail" "tail2" (truncate 2 "tail" f) p)) }
""", "t.fz")
    assert report.ok, [d.message for d in report.diagnostics]
    assert columns_read(report.entry_instance) == {"tail", "tail2"}


def test_every_generic_primitive_was_reviewed_for_the_columns_it_reads() -> None:
    from fuzzpy.primitives.registry import all_primitives

    generic = {n for n, p in all_primitives().items() if "'" in p.signature}
    assert generic - set(GENERIC_REVIEWED) == set(), "review runtime/columns.py for these primitives"
    assert set(GENERIC_REVIEWED) - generic == set()


def test_ordering_comparisons_refuse_records() -> None:
    report = check_source(SCHEMA + "function main (db : bag T) : fuzzy num "
                                   "{ laplace eps (count (filter (fun r -> {x = r.x} < {x = 1}) db)) }\n", "t.fz")
    assert not report.ok and "E0202" in [d.code for d in report.diagnostics]


# ---- what the loader keeps ---------------------------------------------------------------------

def _table(tmp_path: Path, rows: str = ROWS) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(rows)
    return path


def test_kept_columns_are_those_of_the_whole_table_and_unread_ones_still_drop_rows(tmp_path) -> None:
    schema = report_of("laplace eps (count db)").schemas["T"]
    path = _table(tmp_path)  # row 2 has an empty `s`: the `drop` policy removes it
    whole = load_table(path, schema)
    kept = load_table(path, schema, keep={"x", "k"})
    assert len(whole) == 4 and list(kept.columns) == ["x", "k"]
    pd.testing.assert_frame_equal(kept, whole[["x", "k"]])
    none = load_table(path, schema, keep=frozenset())
    assert none.shape == (4, 0) and none.index.equals(whole.index)


def test_an_unread_column_fails_the_load_as_it_would_whole(tmp_path) -> None:
    schema = report_of("laplace eps (count db)").schemas["T"]
    path = _table(tmp_path, "x,y,k,s\n1,0,a,foo\n")  # no column f
    codes = []
    for keep in (None, {"x"}):
        with pytest.raises(FuzzError) as err:
            load_table(path, schema, header=True, keep=keep)
        codes.append([(d.code, d.message) for d in err.value.diagnostics])
    assert codes[0] == codes[1] and codes[0]


@pytest.mark.parametrize("text_type", ["string", "large_string", "dictionary"])
def test_an_unread_text_column_drops_the_rows_it_drops_when_read(text_type) -> None:
    """Plain text is judged cell by cell when unread (runtime/data._parse_unread), by distinct
    values when read: the same rules, so the same rows go."""
    import pyarrow as pa

    from fuzzpy.runtime.data import load_arrow

    schema = report_of("laplace eps (count db)").schemas["T"]
    cells = ["foo", "  NA ", None, "?", "", "Null", "x y", "\tnan\n", "n/a", "nA", "  ", "na\u00a0"]
    n = len(cells)
    s = pa.array(cells, type=pa.large_string() if text_type == "large_string" else pa.string())
    if text_type == "dictionary":
        s = s.dictionary_encode()
    data = pa.table({"x": [float(i % 10) for i in range(n)], "y": [i % 6 for i in range(n)], "k": ["a", "b"] * (n // 2),
                     "s": s, "f": [True] * n})
    whole = load_arrow(data, schema)
    kept = load_arrow(data, schema, keep={"x"})
    assert 0 < len(whole) < n
    pd.testing.assert_frame_equal(kept, whole[["x"]])


def test_unread_parquet_columns_judged_by_row_group_drop_the_rows_they_drop_when_read(tmp_path) -> None:
    """A Parquet column the program does not read is decoded one row group at a time
    (runtime/data._unread_invalid): the same rows go as when every column is read whole, and an
    unparsable unread column fails the load as it would read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = report_of("laplace eps (count db)").schemas["T"]
    n = 103
    text = ["foo", "NA", None, "x y", "?", "ok"]
    data = pa.table({"x": [float(i % 10) for i in range(n)], "y": [i % 6 for i in range(n)],
                     "k": ["a", "b", "c"][:1] * n, "s": [text[i % len(text)] for i in range(n)],
                     "f": [None if i % 17 == 3 else bool(i % 2) for i in range(n)]})
    path = tmp_path / "t.parquet"
    pq.write_table(data, path, row_group_size=10)
    assert pq.ParquetFile(path).num_row_groups == 11
    whole = load_table(path, schema)
    assert 0 < len(whole) < n
    pd.testing.assert_frame_equal(load_table(path, schema, keep={"x"}), whole[["x"]])
    none = load_table(path, schema, keep=frozenset())
    assert none.shape == (len(whole), 0) and none.index.equals(whole.index)
    bad = tmp_path / "bad.parquet"
    pq.write_table(data.set_column(1, "y", pa.array([[i] for i in range(n)])), bad, row_group_size=10)
    codes = []
    for keep in (None, {"x"}):
        with pytest.raises(FuzzError) as err:
            load_table(bad, schema, keep=keep)
        codes.append([(d.code, d.message) for d in err.value.diagnostics])
    assert codes[0] == codes[1] and codes[0][0][0] == "E0504"


@pytest.mark.parametrize("vectorise", [True, False])
@pytest.mark.parametrize("body, ret", [
    ("laplace eps (count (filter (fun r -> true) db))", "fuzzy num"),
    ("laplace eps (sum (map (fun r -> 2) db))", "fuzzy num"),
    ("let (a, b) = split (fun r -> 1 > 0) db; laplace eps (count (union a b))", "fuzzy num"),
    ('laplace eps (count (filter (fun r -> r.s == "foo") db))', "fuzzy num"),
])
def test_runs_on_few_or_no_columns_release_what_the_whole_table_releases(tmp_path, body, ret, vectorise) -> None:
    report = report_of(body, ret=ret)
    path = _table(tmp_path)
    keep = columns_read(report.entry_instance)
    assert keep is not None
    outs = [run_program(report.entry_instance, {"db": load_table(path, report.schemas["T"], keep=k)},
                        RandomSource.seeded(3), vectorise=vectorise).value for k in (None, keep)]
    assert _same(outs[0], outs[1]), outs


# ---- every example, and the command line ---------------------------------------------------------

def _examples() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.fz"))


@pytest.mark.parametrize("name", _examples())
def test_each_example_releases_the_same_values_from_the_columns_it_reads(name: str) -> None:
    report = check_file(EXAMPLES / f"{name}.fz")
    assert report.ok
    keep = columns_read(report.entry_instance)
    schemas = dict(table_inputs(report)) | dict(report.public_tables)
    assert keep is not None and keep <= {c.name for s in schemas.values() for c in s.columns}
    files = {p: FLIGHTS.get(p, DATA.get(name, SAMPLE)) for p in schemas}
    whole = {p: load_table(files[p], s, table=p) for p, s in schemas.items()}
    kept = {p: load_table(files[p], s, table=p, keep=keep) for p, s in schemas.items()}
    for p in schemas:
        assert list(kept[p].columns) == [c for c in whole[p].columns if c in keep]
    for seed in (0, 1):
        outs = [run_program(report.entry_instance, t, RandomSource.seeded(seed)).value for t in (whole, kept)]
        assert _same(outs[0], outs[1]), (name, seed)


def test_fuzzpy_run_prints_the_same_as_with_every_column(monkeypatch) -> None:
    from fuzzpy.interfaces.cli import app
    from fuzzpy.runtime import columns

    args = ["run", str(EXAMPLES / "quickstart.fz"), "--data", str(SAMPLE), "--budget", "1", "--seed", "4",
            "--format", "json"]
    outs, kept = [], []
    for prune in (True, False):
        real = columns.columns_read
        monkeypatch.setattr(columns, "columns_read",
                            lambda entry: kept.append(real(entry) if prune else None) or kept[-1])
        result = CliRunner().invoke(app, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        out.pop("timings_ms", None)
        outs.append(out)
    assert kept == [{"age"}, None]  # the quickstart reads ages only
    assert outs[0] == outs[1]


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


# ---- the soundness oracle's generated programs ----------------------------------------------------

GENERATED = range(120)  # seeds; `python -m tests.runtime.test_columns N` runs N of them


def generated_agreement(seeds) -> tuple[int, int, list[str]]:
    """Run each accepted generated program on whole and on kept-column tables, with identity
    mechanisms: (programs compared, of which with columns left out, disagreements)."""
    from fuzzpy.audit.oracle import call_depth, run_identity
    from tests.oracle.choices import RandomChooser
    from tests.oracle.support import DEPTH_LIMIT, draw_case, pair_tables

    compared, pruned, bad = 0, 0, []
    for seed in seeds:
        case = draw_case(RandomChooser(seed))
        with call_depth(DEPTH_LIMIT):
            report = check_source(case.program.text, "gen.fz")
            if not report.ok:
                continue
            schemas = {inp.name: report.table_schema(inp) for inp in report.inputs}
            keep = columns_read(report.entry_instance)
            frames = pair_tables(case.pairs[0], schemas, list(schemas)).frames(schemas, "a")
            kept = frames if keep is None else {n: f[[c for c in f.columns if c in keep]] for n, f in frames.items()}
            runs = [run_identity(report.entry_instance, t, timeout=5.0) for t in (frames, kept)]
        if "timeout" in (runs[0].status, runs[1].status):
            continue
        compared += 1
        pruned += any(len(kept[n].columns) < len(frames[n].columns) for n in frames)
        seen = [(r.status, r.code, repr(r.result), [(c.mechanism, repr(c.observed)) for c in r.calls]) for r in runs]
        if seen[0] != seen[1]:
            bad.append(f"seed {seed}: {seen[0]} != {seen[1]}")
    return compared, pruned, bad


def test_generated_programs_compute_the_same_from_the_columns_they_read() -> None:
    compared, pruned, bad = generated_agreement(GENERATED)
    assert not bad, bad[:3]
    assert compared >= 30 and pruned >= compared // 3, (compared, pruned)


if __name__ == "__main__":
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    c, p, b = generated_agreement(range(10_000, 10_000 + n))
    print(f"{c} programs compared, {p} with columns left out, {len(b)} disagreements")
    print("\n".join(b[:10]))
    sys.exit(1 if b else 0)


def test_the_python_api_releases_the_same_from_the_columns_it_reads(monkeypatch) -> None:
    import fuzzpy
    from fuzzpy.runtime import columns

    df = pd.DataFrame({"x": [1.0, 2.0, 3.0, 50.0, 7.5], "y": [0, 1, 2, 3, 4], "k": ["a", "b", "a", "b", "a"],
                       "s": ["p", "", "r", "s", "t"], "f": [True, False, True, True, False]})  # "" drops a row
    prog = SCHEMA + "function main (db : bag T) : fuzzy num { laplace eps (sum (map (fun r -> r.x) db)) }\n"
    real, kept, values = columns.columns_read, [], []
    for prune in (True, False):
        monkeypatch.setattr(columns, "columns_read", lambda entry: kept.append(real(entry) if prune else None) or kept[-1])
        values.append(fuzzpy.run(prog, df, budget=1, seed=9).releases)
    assert kept == [{"x"}, None]
    assert repr(values[0]) == repr(values[1]) and values[0]
