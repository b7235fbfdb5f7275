"""The faster loader gives exactly what the loader before it gave, for every input.

`data_reference` is a frozen copy of the loader from before the speed work (every cell read as
text, conformed column by column); each adversarial file here is loaded by both and the outcomes
compared: the same table (columns, dtypes, category codes, the bits of every float, so -0.0 and
0.0 differ), the same file identity, or the same error (code, message and notes).  The cases
aim at what the new paths decide differently: numbers read by Arrow's float parser (odd spaces,
signs, exponents, infinities, hex, NaN spellings, missing markers), min/max fast paths for typed
columns (bounds, 2^53, -0.0, NaN, nulls), one keep-mask and gathers from per-value results
(drop and default policies, unknown categories, null cells), and the file layouts."""

from __future__ import annotations

import math
from fractions import Fraction as F
from pathlib import Path

import data_reference as ref
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fuzzpy.diagnostics import FuzzError
from fuzzpy.runtime import data
from fuzzpy.typesystem.types import BOOL, STRING, Cat, Column, Num, Schema

NUM_TYPES = {
    "int[1,5]": Num(F(1), F(5), integer=True),
    "num[0,10]": Num(F(0), F(10)),
    "num": Num(),
    "int": Num(integer=True),
    "int[-3,3]": Num(F(-3), F(3), integer=True),
}
GOOD = ["3", " 4 ", "05", "1e1", "-0", "+2", "2.5", "inf", "-inf", "1e400", "-7", "12", "0.1",
        "9007199254740993", "9007199254740995", "\u00a05", "\t6\t", "-0.0", "1E+0", "5."]
MARKERS = ["", " ", "?", "NA", " na ", "Null", "nan", "NaN", "NAN"]
BAD = ["abc", "0x1A", "-nan", "1_000", "5 5", "--1", "+nan", "1,5"]
LETTERS = Cat(("a", "b", "NA"))


def outcome(loader, *args, **kw):
    try:
        frame, identity = loader(*args, **kw)
    except FuzzError as exc:
        return "error", [(d.code, d.message, tuple(d.notes)) for d in exc.diagnostics]
    return "table", frame, identity


def assert_frames_identical(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    assert type(a.index) is type(b.index) and a.index.equals(b.index)
    for name in a.columns:
        x, y = a[name], b[name]
        assert x.dtype == y.dtype, (name, x.dtype, y.dtype)
        if isinstance(x.dtype, pd.CategoricalDtype):
            assert x.cat.codes.dtype == y.cat.codes.dtype
            assert np.array_equal(x.cat.codes.to_numpy(), y.cat.codes.to_numpy()), name
        elif x.dtype == np.float64:  # bit for bit: -0.0 is not 0.0
            assert np.array_equal(x.to_numpy().view(np.int64), y.to_numpy().view(np.int64)), name
        assert x.equals(y), name


def assert_same(path: Path, schema: Schema, *, header: bool = False) -> tuple:
    new = outcome(data.load_identified, path, schema, header=header)
    old = outcome(ref.load_identified, path, schema, header=header)
    assert new[0] == old[0], (new, old)
    if new[0] == "error":
        assert new[1] == old[1]
    else:
        assert_frames_identical(new[1], old[1])
        assert new[2] == old[2]
    return new


def two_columns(t: Num, *, extra: tuple[Column, ...] = ()) -> Schema:
    """x drops its invalid rows, y sets them to 2; s drops rows of undeclared letters."""
    return Schema("t", (Column("x", t), Column("y", t, "default", "2"), Column("s", LETTERS), *extra))


@pytest.fixture(scope="module")
def cell_files(tmp_path_factory) -> dict[tuple[str, bool], Path]:
    folder = tmp_path_factory.mktemp("cells")
    out = {}
    for i, cell in enumerate(GOOD + MARKERS + BAD):
        for quoted in (False, True):
            c = f'"{cell}"' if quoted else cell
            p = folder / f"c{i}{'q' if quoted else ''}.csv"
            p.write_text(f"x,y,s\n{c},{c},a\n3,4,b\n 2 , 1 ,c\n4,{c}, NA \n", encoding="utf-8")
            out[cell, quoted] = p
    return out


@pytest.mark.parametrize("type_name", list(NUM_TYPES))
def test_every_odd_number_cell_loads_as_before(cell_files, type_name):
    schema = two_columns(NUM_TYPES[type_name])
    kinds = {assert_same(path, schema)[0] for path in cell_files.values()}
    assert kinds == {"table", "error"}  # both outcomes occur for every type


def test_numbers_without_markers_take_the_typed_read_and_load_as_before(tmp_path, monkeypatch):
    taken = []
    typed = data._read_numbers_typed
    monkeypatch.setattr(data, "_read_numbers_typed", lambda *a: taken.append(typed(*a)) or taken[-1])
    rows = "".join(f"{c},{c},{'ab'[i % 2]}\n" for i, c in enumerate(GOOD))
    path = tmp_path / "good.csv"
    path.write_text("x,y,s\n" + rows, encoding="utf-8")
    for t in NUM_TYPES.values():
        assert_same(path, two_columns(t))
    # U+00A0 is not a space to Arrow's parser: that file went to the text rules
    assert taken and taken[-1] is None
    clean = tmp_path / "clean.csv"
    clean.write_text("x,y,s\n" + "".join(f"{c},{c},a\n" for c in GOOD if "\u00a0" not in c), encoding="utf-8")
    for t in NUM_TYPES.values():
        assert_same(clean, two_columns(t))
    assert taken[-1] is not None  # numbers read typed


LAYOUTS = {
    "empty": "",
    "blank lines": "\n\n  \n",
    "header only": "x,y,s\n",
    "header only, no line break": "x,y,s",
    "header and blank lines": "x,y,s\n\n\n",
    "no header": "3,4,a\n1,2,b\n",
    "one row, no line break": "x,y,s\n3,4,a",
    "comments first": "| a comment\n\n|another\nx,y,s\n3,4,a\n1,2,b\n",
    "crlf": "x,y,s\r\n3,4,a\r\nNA,2,b\r\n",
    "cr": "x,y,s\r3,4,a\r1,2,b\r",
    "bom": "\ufeffx,y,s\n3,4,a\n",
    "spaced header": " x , y ,s \n3,4,a\n",
    "quoted header": '"x","y","s"\n3,4,a\n',
    "extra columns": "w,x,q,y,s,z\n9,3,q,4,a,z\n8,1,q,2,b,\n",
    "reordered": "s,y,x\na,4,3\nb,2,1\n",
    "semicolons": "x;y;s\n3;4;a\n1,5;2;b\n",
    "tabs": "x\ty\ts\n3\t4\ta\n1\t2\tb\n",
    "quoted newline": 'x,y,s\n3,4,"a"\n"1",2,"b\nb"\n',
    "quoted number": 'x,y,s\n"3","4",a\n',
    "ragged": "x,y,s\n3,4,a\n1,2\n",
    "duplicate header": "x,x,y,s\n1,2,3,a\n",
    "header is not the first row": "3,4,a\nx,y,s\n",
    "number in a letters column": "x,y,s\n3,4,5\n",
    "blank line inside": "x,y,s\n3,4,a\n\n1,2,b\n",
    "whitespace line inside": "x,y,s\n3,4,a\n   \n1,2,b\n",
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("header", [False, True])
def test_file_layouts_load_as_before(tmp_path, layout, header):
    path = tmp_path / ("d.tsv" if layout == "tabs" else "d.csv")
    path.write_text(LAYOUTS[layout], encoding="utf-8")
    for t in (NUM_TYPES["int[1,5]"], NUM_TYPES["num"]):
        assert_same(path, two_columns(t), header=header)


def test_a_quote_after_the_sampled_head_loads_as_before(tmp_path):
    body = "3,4,a\n" * 20_000  # more than the 64 KiB sampled
    for tail in ('1,2,"b"\n', '1,2,"b\nb"\n', "NA,2,b\n"):
        path = tmp_path / "late.csv"
        path.write_text("x,y,s\n" + body + tail, encoding="utf-8")
        assert_same(path, two_columns(NUM_TYPES["int[1,5]"]))


def test_other_column_types_load_as_before(tmp_path):
    schema = Schema("t", (
        Column("n", NUM_TYPES["num[0,10]"]), Column("b", BOOL), Column("bd", BOOL, "default", "yes"),
        Column("t", STRING), Column("td", STRING, "default", "none"), Column("c", LETTERS),
        Column("cd", LETTERS, "default", "b")))
    rows = ["1,true,false, x ,y,a,a", "2, Yes ,NA,NA,,NA,zz", "3,0,maybe?,?, q ,b, b",
            "4,no,1,,,NA,?", "5,TRUE,0,a b,Null,b,NA"]
    path = tmp_path / "types.csv"
    path.write_text("n,b,bd,t,td,c,cd\n" + "\n".join(rows) + "\n", encoding="utf-8")
    assert_same(path, schema)  # "maybe?" is not a boolean: refused alike
    path.write_text("n,b,bd,t,td,c,cd\n" + "\n".join(r.replace("maybe?", "yes") for r in rows) + "\n",
                    encoding="utf-8")
    kind, frame, _ = assert_same(path, schema)
    assert kind == "table" and len(frame) == 2  # rows 2 and 4 go (b or t missing), 3 and 5 too


# ---- Parquet and in-memory tables --------------------------------------------------------------


PARQUET_COLUMNS = {
    "int64 in range": pa.array([1, 2, 3, 4, 5], pa.int64()),
    "int64 with nulls": pa.array([1, None, 3, None, 5], pa.int64()),
    "int64 out of range": pa.array([-100, 0, 3, 7, 10**6], pa.int64()),
    "int64 beyond 2^53": pa.array([1, 2, 2**53 + 1, 3, 4], pa.int64()),
    "int64 far beyond 2^53": pa.array([1, 2, 2**60, -(2**60), 4], pa.int64()),
    "int64 extremes": pa.array([2**63 - 1, -(2**63), 0, 1, 2], pa.int64()),
    "int8": pa.array([-5, 0, 1, 5, 100], pa.int8()),
    "uint64 huge": pa.array([2**64 - 1, 0, 1, 2, 3], pa.uint64()),
    "all null ints": pa.array([None] * 5, pa.int64()),
    "float64 plain": pa.array([0.5, 1.0, -0.0, 3.0, 9.75]),
    "float64 integral": pa.array([1.0, 2.0, -0.0, 4.0, 5.0]),
    "float64 with nan": pa.array([1.0, math.nan, 3.0, 4.0, 5.0]),
    "float64 with inf": pa.array([1.0, math.inf, -math.inf, 4.0, 5.0]),
    "float64 with nulls": pa.array([1.0, None, 3.0, 4.0, None]),
    "float64 huge": pa.array([1e300, -1e300, 2.0**53 + 2, 1.0, 2.0]),
    "float32": pa.array([1.5, 2.0, 3.0, 4.0, 5.0], pa.float32()),
    "decimal": pa.array([1, 2, 3, 4, 5], pa.int32()).cast(pa.decimal128(12, 2)),
    "text numbers": pa.array([" 1", "NA", "3", None, "5e0"]),
    "text refused": pa.array(["1", "two", "3", "4", "5"]),
}


@pytest.fixture(scope="module")
def parquet_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pq")
    out = {}
    letters = pa.array(["a", "b", "zz", None, "NA"]).dictionary_encode()
    for i, (name, col) in enumerate(PARQUET_COLUMNS.items()):
        p = folder / f"p{i}.parquet"
        pq.write_table(pa.table({"x": col, "y": col, "s": letters, "flag": pa.array([True, None, False, True, True])}),
                       p, row_group_size=2)  # several chunks
        out[name] = p
    empty = folder / "empty.parquet"
    pq.write_table(pa.table({"x": pa.array([], pa.int64()), "y": pa.array([], pa.int64()),
                             "s": pa.array([], pa.string()), "flag": pa.array([], pa.bool_())}), empty)
    out["empty"] = empty
    return out


@pytest.mark.parametrize("type_name", list(NUM_TYPES))
def test_parquet_columns_load_as_before(parquet_files, type_name):
    schema = two_columns(NUM_TYPES[type_name], extra=(Column("flag", BOOL, "default", "false"),))
    kinds = {assert_same(path, schema)[0] for path in parquet_files.values()}
    assert "table" in kinds


def test_dataframes_and_arrow_tables_conform_as_before():
    frame = pd.DataFrame({"x": [1, 7, None, -2], "y": [0.5, np.nan, -0.0, 3.0], "s": ["a", "b", "zz", None]})
    # Categoricals (int8 codes; unused categories, 300 of them: more than int8 can index)
    small = frame.assign(s=pd.Categorical(frame.s, categories=["zz", "b", "a", "unused"]))
    wide = frame.assign(s=pd.Categorical(frame.s, categories=[f"c{i}" for i in range(300)] + ["a", "b", "zz"]))
    for t, f in [(t, f) for t in NUM_TYPES.values() for f in (frame, small, wide)]:
        schema = two_columns(t)
        for load_new, load_old, arg in ((data.load_frame, ref.load_frame, f),
                                        (data.load_arrow, ref.load_arrow, pa.Table.from_pandas(f))):
            try:
                new = load_new(arg, schema)
            except FuzzError as exc:
                with pytest.raises(FuzzError) as old:
                    load_old(arg, schema)
                assert [d.message for d in exc.diagnostics] == [d.message for d in old.value.diagnostics]
                continue
            assert_frames_identical(new, load_old(arg, schema))


def test_data_check_counts_as_before(cell_files, parquet_files):
    schema = two_columns(NUM_TYPES["int[1,5]"])
    for path in [cell_files["NA", False], cell_files["3", True], parquet_files["int64 with nulls"]]:
        (rows, kept, effects), (rows_ref, kept_ref, effects_ref) = (
            data.inspect_table(path, schema), ref.inspect_table(path, schema))
        assert (rows, kept) == (rows_ref, kept_ref)
        assert [(e.column, e.policy, e.affected) for e in effects] == \
            [(e.column, e.policy, e.affected) for e in effects_ref]
