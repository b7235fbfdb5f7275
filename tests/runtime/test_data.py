"""Tests for fuzzpy.runtime.data: loading private tables and conforming them to a schema."""

from __future__ import annotations

import gzip
import math
import re
from collections import Counter
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzpy.checking.program import check_source
from fuzzpy.diagnostics import FuzzError
from fuzzpy.runtime.data import load_table, load_tables
from fuzzpy.typesystem.types import BOOL, STRING, Cat, Column, Num, Schema

REPO = Path(__file__).resolve().parents[2]
ADULT = Path("/work/shared/data/adult/adult.data")
ADULT_TEST = Path("/work/shared/data/adult/adult.test")
SAMPLE = REPO / "examples" / "data" / "adult_sample.csv"
needs_adult = pytest.mark.skipif(not ADULT.exists(), reason="UCI Adult files not available")
# A string column's dtype: pandas' `str` from pandas 3 on; pandas 2 (the newest on Python 3.10)
# has no such default and keeps Python strings in an `object` column.
STR = "str" if int(pd.__version__.split(".")[0]) >= 3 else "object"

# Categories from adult.names.
ADULT_CATS = {
    "workclass": "Private Self-emp-not-inc Self-emp-inc Federal-gov Local-gov State-gov "
                 "Without-pay Never-worked",
    "education": "Bachelors Some-college 11th HS-grad Prof-school Assoc-acdm Assoc-voc 9th "
                 "7th-8th 12th Masters 1st-4th 10th Doctorate 5th-6th Preschool",
    "marital_status": "Married-civ-spouse Divorced Never-married Separated Widowed "
                      "Married-spouse-absent Married-AF-spouse",
    "occupation": "Tech-support Craft-repair Other-service Sales Exec-managerial Prof-specialty "
                  "Handlers-cleaners Machine-op-inspct Adm-clerical Farming-fishing "
                  "Transport-moving Priv-house-serv Protective-serv Armed-Forces",
    "relationship": "Wife Own-child Husband Not-in-family Other-relative Unmarried",
    "race": "White Asian-Pac-Islander Amer-Indian-Eskimo Other Black",
    "sex": "Female Male",
}
ADULT_NAMES = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
               "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
               "hours_per_week", "native_country", "income"]


def adult_schema(income=("<=50K", ">50K"), age=Num(F(18), F(70), True)) -> Schema:
    def cat(name: str) -> Column:
        return Column(name, Cat(tuple(ADULT_CATS[name].split())))

    return Schema("adult", (
        Column("age", age), cat("workclass"), Column("fnlwgt", Num(F(0), None)),
        cat("education"), Column("education_num", Num(F(1), F(16), True)),
        cat("marital_status"), cat("occupation"), cat("relationship"), cat("race"), cat("sex"),
        Column("capital_gain", Num(F(0), F(100000))), Column("capital_loss", Num(F(0), F(5000))),
        Column("hours_per_week", Num(F(1), F(99), True)), Column("native_country", STRING),
        Column("income", Cat(tuple(income)))))


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def codes(exc: pytest.ExceptionInfo[FuzzError]) -> list[str]:
    return [d.code for d in exc.value.diagnostics]


def full_text(exc: pytest.ExceptionInfo[FuzzError]) -> str:
    return "\n".join(d.message + "\n" + "\n".join(d.notes) for d in exc.value.diagnostics)


NUM_SCHEMA = Schema("t", (Column("x", Num(F(0), F(10))),))
INT_SCHEMA = Schema("t", (Column("n", Num(F(0), F(100), True)),))


# ---- header, positions, delimiters ----------------------------------------------------------


def test_header_matched_by_name_extra_columns_ignored(tmp_path):
    p = write(tmp_path, "extra,name ,age,ok\n9, Ann ,34,yes\n9,Bob,51 , NO\n")
    s = Schema("people", (Column("age", Num(F(0), F(120), True)), Column("name", STRING),
                          Column("ok", BOOL)))
    df = load_table(p, s)
    assert list(df.columns) == ["age", "name", "ok"]
    assert df["age"].tolist() == [34, 51]
    assert df["name"].tolist() == ["Ann", "Bob"]  # stripped
    assert df["ok"].tolist() == [True, False]
    assert [str(t) for t in df.dtypes] == ["int64", STR, "bool"]
    assert isinstance(df.index, pd.RangeIndex) and df.index.start == 0


@pytest.mark.parametrize("sep,name", [(";", "t.csv"), ("\t", "t.tsv"), ("\t", "t.txt")])
def test_delimiters_are_sniffed(tmp_path, sep, name):
    p = write(tmp_path, f"a{sep}b\n1,5{sep}x\n2,5{sep}y\n", name)
    df = load_table(p, Schema("t", (Column("a", STRING), Column("b", STRING))))
    assert df["a"].tolist() == ["1,5", "2,5"] and df["b"].tolist() == ["x", "y"]


def test_quoted_fields_keep_their_delimiters(tmp_path):
    p = write(tmp_path, 'k,v\n"a, b",1\n" c ",2\n')
    df = load_table(p, Schema("t", (Column("k", STRING), Column("v", Num()))))
    assert df["k"].tolist() == ["a, b", "c"] and df["v"].tolist() == [1.0, 2.0]


def test_headerless_file_is_read_by_position(tmp_path):
    p = write(tmp_path, " 3, a\n 4, b\n")
    df = load_table(p, Schema("t", (Column("n", Num(integer=True)), Column("s", STRING))))
    assert df["n"].tolist() == [3, 4] and df["s"].tolist() == ["a", "b"]


def test_headerless_with_wrong_field_count_is_schema_mismatch(tmp_path):
    p = write(tmp_path, "1,2,3\n4,5,6\n")
    with pytest.raises(FuzzError) as e:
        load_table(p, Schema("t", (Column("a", Num()), Column("b", Num()))))
    assert codes(e) == ["E0505"]
    assert "3 fields" in full_text(e) and "declares 2 columns" in full_text(e)


def test_missing_column_names_column_and_table_but_not_the_first_row(tmp_path):
    # The first row may be data rather than a header: it is never echoed (tests/runtime/test_failures_reveal_nothing.py).
    p = write(tmp_path, "age,workclass\n30,Private\n")
    s = Schema("adult", (Column("age", Num()), Column("sex", Cat(("Female", "Male")))))
    with pytest.raises(FuzzError) as e:
        load_table(p, s)
    # No header naming every column: the field count decides (2 = 2: by position), so the
    # incomplete header row is read as data and "age" is not a number.
    assert codes(e) == ["E0504"]
    msg = " ".join([e.value.diagnostics[0].message, *e.value.diagnostics[0].notes])
    assert "'age'" in msg and "workclass" not in msg and "Private" not in msg and "30" not in msg


def test_duplicate_header_name_is_refused(tmp_path):
    p = write(tmp_path, "a,a\n1,2\n")
    with pytest.raises(FuzzError) as e:
        load_table(p, Schema("t", (Column("a", Num()),)))
    assert codes(e) == ["E0505"]


def test_ragged_rows_are_refused_without_line_numbers(tmp_path):
    p = write(tmp_path, "a,b\n1,2\n3,4\n5,6,7\n8,9\n")
    with pytest.raises(FuzzError) as e:
        load_table(p, Schema("t", (Column("a", Num()), Column("b", Num()))))
    assert codes(e) == ["E0502"]
    text = full_text(e).replace(str(p), "").replace("UTF-8", "")
    assert not re.search(r"\d", text) and "line" not in text


def test_short_rows_are_refused_but_blank_lines_skipped(tmp_path):
    s = Schema("t", (Column("a", Num()), Column("b", Num())))
    with pytest.raises(FuzzError) as e:
        load_table(write(tmp_path, "a,b\n1,2\n3\n"), s)
    assert codes(e) == ["E0502"]
    df = load_table(write(tmp_path, "a,b\n\n1,2\n  \n\t\n3,4\n\n"), s)
    assert df.to_dict("list") == {"a": [1.0, 3.0], "b": [2.0, 4.0]}


def test_quoted_newline_and_crlf(tmp_path):
    p = write(tmp_path, 'k,v\r\n"two\nlines",1\r\nb,2\r\n')
    df = load_table(p, Schema("t", (Column("k", STRING), Column("v", Num()))))
    assert df["k"].tolist() == ["two\nlines", "b"] and df["v"].tolist() == [1.0, 2.0]


def test_utf8_bom_and_unicode_whitespace(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes("\ufeffname,v\n\u00a0Åsa\u2003,1\n".encode())
    df = load_table(p, Schema("t", (Column("name", STRING), Column("v", Num()))))
    assert df.to_dict("list") == {"name": ["Åsa"], "v": [1.0]}


def test_numeric_looking_strings_stay_exact(tmp_path):
    p = write(tmp_path, "zip,c\n00501,007\n")
    df = load_table(p, Schema("t", (Column("zip", STRING), Column("c", Cat(("007",))))))
    assert df["zip"].tolist() == ["00501"] and df["c"].tolist() == ["007"]


# ---- the real Adult files --------------------------------------------------------------------


def _independent_adult(path: Path, schema: Schema) -> pd.DataFrame:
    """What the loader should keep, computed directly with pandas."""
    raw = pd.read_csv(path, header=None, names=ADULT_NAMES, dtype=str, keep_default_na=False,
                      skipinitialspace=True, comment=None, skiprows=1 if path == ADULT_TEST else 0)
    raw = raw.apply(lambda c: c.str.strip())
    keep = pd.Series(True, index=raw.index)
    for c in schema.columns:
        if isinstance(c.type, Cat):
            keep &= raw[c.name].isin(c.type.values)
    keep &= raw["native_country"] != "?"
    return raw[keep]


@needs_adult
def test_headerless_adult_data_positional():
    schema = adult_schema()
    df = load_table(ADULT, schema)
    expected = _independent_adult(ADULT, schema)
    assert len(df) == len(expected) == 30162
    assert list(df.columns) == ADULT_NAMES
    age = df["age"]
    assert age.dtype == np.int64 and age.min() >= 18 and age.max() <= 70
    # Clamping, checked against the raw ages.
    raw_age = expected["age"].astype(int)
    assert (age == 70).sum() == (raw_age >= 70).sum()
    assert (age == 18).sum() == (raw_age <= 18).sum()
    assert df["fnlwgt"].sum() == expected["fnlwgt"].astype(float).sum()
    assert df["workclass"].cat.categories.tolist() == ADULT_CATS["workclass"].split()
    assert "Never-worked" not in set(df["workclass"])  # absent after dropping, still a category
    assert df["income"].value_counts().to_dict() == {"<=50K": 22654, ">50K": 7508}


@needs_adult
def test_adult_test_skips_uci_comment_line():
    schema = adult_schema(income=("<=50K.", ">50K."))
    df = load_table(ADULT_TEST, schema)
    assert len(df) == len(_independent_adult(ADULT_TEST, schema)) == 15060


def test_example_sample_with_header():
    schema = adult_schema()
    df = load_table(SAMPLE, schema)
    raw = pd.read_csv(SAMPLE, dtype=str, keep_default_na=False)
    assert len(raw) == 2000 and (raw == "?").to_numpy().any()
    keep = ~(raw == "?").any(axis=1)
    assert len(df) == keep.sum()
    assert df["hours_per_week"].sum() == raw.loc[keep, "hours_per_week"].astype(int).sum()


# ---- numbers ---------------------------------------------------------------------------------


def test_clamping_to_bounds_including_infinities(tmp_path):
    p = write(tmp_path, "x\n-5\n3.5\n11\n1e400\ninf\n-Infinity\n10\n0\n")
    df = load_table(p, NUM_SCHEMA)
    assert df["x"].tolist() == [0.0, 3.5, 10.0, 10.0, 10.0, 0.0, 10.0, 0.0]
    assert df["x"].dtype == np.float64


def test_clamped_values_stay_inside_non_float_bounds(tmp_path):
    p = write(tmp_path, "x\n0\n1\n")
    lo, hi = F(1, 3), F(2, 3)
    df = load_table(p, Schema("t", (Column("x", Num(lo, hi)),)))
    a, b = df["x"].tolist()
    assert lo <= F(a) <= hi and lo <= F(b) <= hi


def test_integer_bounds_are_rounded_inwards(tmp_path):
    p = write(tmp_path, "n\n-3\n9\n")
    df = load_table(p, Schema("t", (Column("n", Num(F(1, 2), F(15, 2), True)),)))
    assert df["n"].tolist() == [1, 7]


def test_infinity_without_bound_on_its_side_is_missing(tmp_path):
    p = write(tmp_path, "x\n5\ninf\n-inf\n")
    df = load_table(p, Schema("t", (Column("x", Num(F(0), None)),)))
    assert df["x"].tolist() == [5.0, 0.0]  # +inf dropped, -inf clamped


def test_unparsable_number_message_has_no_value_and_no_row(tmp_path):
    rows = ["41"] * 8 + ["12abc"] + ["33"] * 4
    p = write(tmp_path, "age\n" + "\n".join(rows) + "\n")
    with pytest.raises(FuzzError) as e:
        load_table(p, Schema("adult", (Column("age", Num(F(0), F(120))),)))
    assert codes(e) == ["E0504"]
    text = full_text(e)
    assert "column 'age' of table 'adult'" in text and "not numbers" in text
    assert "12abc" not in text and "abc" not in text
    assert not re.search(r"\d", text)  # no row number, no count, no value


def test_non_integral_value_in_int_column(tmp_path):
    p = write(tmp_path, "n\n1\n2.5\n")
    with pytest.raises(FuzzError) as e:
        load_table(p, INT_SCHEMA)
    assert codes(e) == ["E0504"] and "2.5" not in full_text(e)


def test_integral_floats_are_accepted_in_int_column(tmp_path):
    p = write(tmp_path, "n\n1.0\n2e1\n-0\n")
    df = load_table(p, INT_SCHEMA)
    assert df["n"].tolist() == [1, 20, 0] and df["n"].dtype == np.int64


def test_huge_integer_without_bound_is_refused(tmp_path):
    p = write(tmp_path, "n\n1\n1e20\n")
    with pytest.raises(FuzzError) as e:
        load_table(p, Schema("t", (Column("n", Num(integer=True)),)))
    assert codes(e) == ["E0504"]


def test_extreme_numbers_are_clamped_or_missing_never_passed_through(tmp_path):
    """Second review round (the runtime; data at the edges), handled."""
    schema = check_source("schema U { x : num[0, 10], y : num }\n"
                          "function main (db : bag U) : fuzzy num { return 0 }", "u.fz").schemas["U"]
    path = tmp_path / "u.csv"
    path.write_text("x,y\ninf,1\n1e400,2\n-inf,3\nnan,4\n-1e-400,5\n5,inf\n7,-1e400\n4,1e308\n")
    df = load_table(path, schema, table="db")
    assert df["x"].tolist() == [10.0, 10.0, 0.0, 0.0, 4.0]  # nan row dropped; y = +-inf has no bound: missing
    assert df["y"].tolist() == [1.0, 2.0, 3.0, 5.0, 1e308]


def test_float32_parquet_values_stay_inside_exact_bounds(tmp_path):
    """Second review round (the runtime; data at the edges), handled: a float32 value rounded up
    past an exact bound is clamped to it."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    schema = check_source("schema U { x : num[0, 0.1] }\nfunction main (db : bag U) : fuzzy num { return 0 }",
                          "u.fz").schemas["U"]
    path = tmp_path / "u.parquet"
    pq.write_table(pa.table({"x": pa.array([0.1, 0.05, 3.0e38], pa.float32())}), path)
    values = load_table(path, schema, table="db")["x"].tolist()
    assert len(values) == 3 and all(0 <= F(v) <= F(1, 10) for v in values)


# ---- booleans, strings, categories -----------------------------------------------------------


def test_bool_words(tmp_path):
    p = write(tmp_path, "b\nTrue\nfalse\n1\n0\nYES\nno\n")
    df = load_table(p, Schema("t", (Column("b", BOOL),)))
    assert df["b"].tolist() == [True, False, True, False, True, False]
    assert df["b"].dtype == np.bool_


def test_bad_bool_is_unparsable(tmp_path):
    p = write(tmp_path, "b\ntrue\nmaybe\n")
    with pytest.raises(FuzzError) as e:
        load_table(p, Schema("t", (Column("b", BOOL),)))
    assert codes(e) == ["E0504"] and "maybe" not in full_text(e)


SEX = Cat(("Female", "Male", "Other"))


def test_invalid_category_drops_row(tmp_path):
    p = write(tmp_path, "sex,n\nMale,1\nmale,2\nX,3\nFemale,4\n")
    df = load_table(p, Schema("t", (Column("sex", SEX), Column("n", Num()))))
    assert df["sex"].tolist() == ["Male", "Female"] and df["n"].tolist() == [1.0, 4.0]
    assert df.index.tolist() == [0, 1]


def test_invalid_category_replaced_by_default(tmp_path):
    p = write(tmp_path, "sex\nMale\nmale\n?\nFemale\n")
    df = load_table(p, Schema("t", (Column("sex", SEX, "default", "Other"),)))
    assert df["sex"].tolist() == ["Male", "Other", "Other", "Female"]


def test_categorical_dtype_has_all_declared_categories_in_order(tmp_path):
    p = write(tmp_path, "sex\nMale\nMale\n")
    df = load_table(p, Schema("t", (Column("sex", SEX),)))
    assert isinstance(df["sex"].dtype, pd.CategoricalDtype)
    assert df["sex"].cat.categories.tolist() == ["Female", "Male", "Other"]
    assert df["sex"].value_counts(sort=False).tolist() == [0, 2, 0]


def test_declared_category_wins_over_missing_marker(tmp_path):
    p = write(tmp_path, "c\nNA\nUS\n?\n")
    df = load_table(p, Schema("t", (Column("c", Cat(("NA", "US"))),)))
    assert df["c"].tolist() == ["NA", "US"]


# ---- missing values --------------------------------------------------------------------------


MARKERS = ["", "?", "NA", "na", "NaN", "nan", "NULL", "null", "  ?  "]


def test_missing_markers_drop_rows(tmp_path):
    lines = ["x,s"] + [f"{m},a{i}" for i, m in enumerate(MARKERS)] + ["4,keep"]
    df = load_table(write(tmp_path, "\n".join(lines) + "\n"),
                    Schema("t", (Column("x", Num()), Column("s", STRING))))
    assert df.to_dict("list") == {"x": [4.0], "s": ["keep"]}


def test_missing_markers_replaced_by_defaults(tmp_path):
    p = write(tmp_path, "x,n,b,s\n?,NA,null,\n1.5,7,yes,z\n")
    s = Schema("t", (Column("x", Num(F(0), F(10)), "default", 20),  # default is clamped too
                     Column("n", Num(F(0), F(9), True), "default", 3),
                     Column("b", BOOL, "default", False),
                     Column("s", STRING, "default", "unknown")))
    df = load_table(p, s)
    assert df.to_dict("list") == {"x": [10.0, 1.5], "n": [3, 7], "b": [False, True],
                                  "s": ["unknown", "z"]}
    assert [str(t) for t in df.dtypes] == ["float64", "int64", "bool", STR]


def test_default_forms(tmp_path):
    p = write(tmp_path, "x,n,b\n?,?,?\n")
    s = Schema("t", (Column("x", Num(F(0), F(1)), "default", F(1, 3)),
                     Column("n", Num(F(0), F(9), True), "default", " 4 "),
                     Column("b", BOOL, "default", "Yes")))
    df = load_table(p, s)
    assert df.to_dict("list") == {"x": [float(F(1, 3))], "n": [4], "b": [True]}
    assert F(df["x"][0]) >= 0


def test_drop_in_one_column_and_default_in_another(tmp_path):
    p = write(tmp_path, "a,b\n?,1\n2,?\n3,3\n")
    s = Schema("t", (Column("a", Num()), Column("b", Num(), "default", 0)))
    assert load_table(p, s).to_dict("list") == {"a": [2.0, 3.0], "b": [0.0, 3.0]}


@pytest.mark.parametrize("column", [
    Column("c", SEX, "default", "Unknown"),
    Column("c", SEX, "default", None),
    Column("c", Num(F(0), F(5), True), "default", 1.5),
    Column("c", Num(), "default", float("nan")),
    Column("c", Num(), "default", True),
    Column("c", Num(), "default", F(10**400)),
    Column("c", Num(integer=True), "default", 2**60),
    Column("c", BOOL, "default", "maybe"),
    Column("c", STRING, "default", 3),
    Column("c", Num(), "sometimes"),
    Column("c", Num(F(5), F(1))),
    Column("c", Num(F(1, 3), F(2, 3), True)),
    Column("c", Cat((" Male", "Female"))),
    Column("c", Cat(("Male", "Male"))),
])
def test_bad_schema_is_refused_before_reading(tmp_path, column):
    with pytest.raises(FuzzError) as e:
        load_table(tmp_path / "does-not-exist.csv", Schema("t", (column,)))
    assert codes(e) == ["E0505"]


# ---- files -----------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(FuzzError) as e:
        load_table(tmp_path / "nope.csv", NUM_SCHEMA)
    assert codes(e) == ["E0501"]


def test_directory_and_unknown_extension(tmp_path):
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(FuzzError) as e:
        load_table(tmp_path / "d.csv", NUM_SCHEMA)
    assert codes(e) == ["E0502"]
    with pytest.raises(FuzzError) as e:
        load_table(write(tmp_path, "x\n1\n", "t.xlsx"), NUM_SCHEMA)
    assert codes(e) == ["E0502"]


@pytest.mark.parametrize("content", [
    bytes(range(256)) * 4,
    b"x\n1\n2\x003\n",
    gzip.compress(b"x\n1\n2\n", mtime=0),
    b"x\n\xff\xfe1\n",
])
def test_binary_named_csv_is_refused(tmp_path, content):
    p = tmp_path / "t.csv"
    p.write_bytes(content)
    with pytest.raises(FuzzError) as e:
        load_table(p, NUM_SCHEMA)
    assert codes(e) == ["E0502"]


def test_invalid_utf8_after_the_sniffed_prefix_is_refused(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(b"x\n" + b"1\n" * 50_000 + b"\xff\n")
    with pytest.raises(FuzzError) as e:
        load_table(p, NUM_SCHEMA)
    assert codes(e) == ["E0502"]


def test_parquet_and_csv_must_agree_with_their_names(tmp_path):
    pq_path = tmp_path / "t.parquet"
    pd.DataFrame({"x": [1.0]}).to_parquet(pq_path)
    renamed = tmp_path / "t.csv"
    renamed.write_bytes(pq_path.read_bytes())
    fake = write(tmp_path, "x\n1\n", "f.parquet")
    for p in (renamed, fake):
        with pytest.raises(FuzzError) as e:
            load_table(p, NUM_SCHEMA)
        assert codes(e) == ["E0502"]


def test_truncated_parquet_is_refused(tmp_path):
    p = tmp_path / "t.parquet"
    pd.DataFrame({"x": [1.0] * 100}).to_parquet(p)
    p.write_bytes(p.read_bytes()[:40])
    with pytest.raises(FuzzError) as e:
        load_table(p, NUM_SCHEMA)
    assert codes(e) == ["E0502"]


def test_parquet_round_trip(tmp_path):
    src = pd.DataFrame({
        "extra": [1, 2, 3, 4],
        "x": [-1.0, 5.0, np.nan, 50.0],
        "n": pd.array([1, None, 3, 400], dtype="Int64"),
        "b": [True, False, True, None],
        "c": pd.Categorical(["Male", "Female", "X", "Male"]),
        "s": [" a", "b", None, "d"],
    }, index=[10, 20, 30, 40])
    p = tmp_path / "t.pq"
    src.to_parquet(p)
    s = Schema("t", (Column("s", STRING, "default", "?"), Column("c", SEX, "default", "Other"),
                     Column("b", BOOL, "default", False), Column("n", Num(F(0), F(100), True)),
                     Column("x", Num(F(0), F(10)), "default", 0)))
    df = load_table(p, s)
    # The second row has no `n` (policy drop); the third gets every default.
    assert df.to_dict("list") == {"s": ["a", "?", "d"], "c": ["Male", "Other", "Male"],
                                  "b": [True, True, False], "n": [1, 3, 100],
                                  "x": [0.0, 0.0, 10.0]}
    assert [str(t) for t in df.dtypes] == [STR, "category", "bool", "int64", "float64"]
    assert df.index.tolist() == [0, 1, 2]


def test_parquet_missing_column(tmp_path):
    p = tmp_path / "t.parquet"
    pd.DataFrame({"y": [1.0]}).to_parquet(p)
    with pytest.raises(FuzzError) as e:
        load_table(p, NUM_SCHEMA)
    assert codes(e) == ["E0503"] and "'x'" in full_text(e) and "y" in full_text(e)


def test_parquet_text_column_is_parsed(tmp_path):
    p = tmp_path / "t.parquet"
    pd.DataFrame({"x": ["3", "?", "12"]}).to_parquet(p)
    assert load_table(p, NUM_SCHEMA)["x"].tolist() == [3.0, 10.0]


ALL_TYPES = Schema("t", (Column("x", Num(F(0), F(1))), Column("n", Num(integer=True)),
                         Column("b", BOOL), Column("s", STRING), Column("c", SEX)))
ALL_DTYPES = ["float64", "int64", "bool", STR, "category"]


@pytest.mark.parametrize("content", ["", "\n\n", "x,n,b,s,c\n", "| only a comment\n"])
def test_empty_file_gives_typed_empty_frame(tmp_path, content):
    df = load_table(write(tmp_path, content), ALL_TYPES)
    assert len(df) == 0 and list(df.columns) == ["x", "n", "b", "s", "c"]
    assert [str(t) for t in df.dtypes] == ALL_DTYPES
    assert df["c"].cat.categories.tolist() == ["Female", "Male", "Other"]


def test_all_rows_dropped_gives_typed_empty_frame(tmp_path):
    df = load_table(write(tmp_path, "x,n,b,s,c\n?,1,true,a,Male\n"), ALL_TYPES)
    assert len(df) == 0 and [str(t) for t in df.dtypes] == ALL_DTYPES


def test_empty_parquet(tmp_path):
    p = tmp_path / "t.parquet"
    pd.DataFrame({"x": pd.Series([], dtype=float)}).to_parquet(p)
    df = load_table(p, NUM_SCHEMA)
    assert len(df) == 0 and df["x"].dtype == np.float64


# ---- several tables --------------------------------------------------------------------------


def test_load_tables(tmp_path):
    a, b = write(tmp_path, "x\n1\n", "a.csv"), write(tmp_path, "x\n2\n", "b.csv")
    schemas = {"a": NUM_SCHEMA, "b": NUM_SCHEMA}
    out = load_tables({"b": b, "a": a}, schemas)
    assert list(out) == ["a", "b"] and out["b"]["x"].tolist() == [2.0]
    with pytest.raises(FuzzError) as e:
        load_tables({"a": a, "b": b, "c": a}, schemas)
    assert codes(e) == ["E0507"] and "a, b" in full_text(e)
    with pytest.raises(FuzzError) as e:
        load_tables({"a": a}, schemas)
    assert codes(e) == ["E0506"] and "'b'" in full_text(e)


def test_error_names_the_table_given(tmp_path):
    p = write(tmp_path, "x\nzz\n")
    with pytest.raises(FuzzError) as e:
        load_tables({"visits": p}, {"visits": NUM_SCHEMA})
    assert "table 'visits'" in full_text(e)


# ---- properties ------------------------------------------------------------------------------

CELL = st.one_of(st.integers(-50, 50).map(str), st.sampled_from(MARKERS[:-1]),
                 st.sampled_from(["inf", "-inf", "2.5", "1e9", " 7 "]))
ROW = st.tuples(CELL, st.sampled_from(["Female", "Male", "Other", "other", "?"]))
ROWS_SCHEMA = Schema("t", (Column("x", Num(F(-10), F(10))), Column("c", SEX)))


def _load_rows(tmp_path: Path, rows: list[tuple[str, str]]) -> pd.DataFrame:
    body = "".join(f"{x},{c}\n" for x, c in rows)
    return load_table(write(tmp_path, "x,c\n" + body), ROWS_SCHEMA)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(ROW, min_size=1, max_size=12), data=st.data())
def test_removing_a_row_changes_output_by_at_most_one_row(tmp_path_factory, rows, data):
    tmp = tmp_path_factory.mktemp("prop")
    i = data.draw(st.integers(0, len(rows) - 1))
    full = _load_rows(tmp, rows)
    less = _load_rows(tmp, rows[:i] + rows[i + 1:])
    a = Counter(map(tuple, full.astype(object).to_numpy().tolist()))
    b = Counter(map(tuple, less.astype(object).to_numpy().tolist()))
    assert sum(((a - b) + (b - a)).values()) <= 1
    assert full["x"].between(-10, 10).all() and not full["x"].isna().any()


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(ROW, max_size=12))
def test_matches_a_row_by_row_reference(tmp_path_factory, rows):
    def ref(x: str, c: str):
        x = x.strip()
        if x.lower() in {"", "?", "na", "nan", "null"} or c not in SEX.values:
            return None
        return (min(max(float(x), -10.0), 10.0), c)

    tmp = tmp_path_factory.mktemp("ref")
    out = _load_rows(tmp, rows)
    expected = [r for r in (ref(x, c) for x, c in rows) if r is not None]
    got = list(zip(out["x"].tolist(), out["c"].astype(str).tolist()))
    assert got == expected
    assert all(math.isfinite(x) for x, _ in got)


def test_parquet_unusual_column_types(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({
        "code": pa.array([1, 2, 1, 9]).dictionary_encode(),   # dictionary of ints
        "flag": pa.array([1, 0, 1, 0], type=pa.int8()),       # 0/1 as booleans
        "big": pa.array([2**60, 5, None, -3], type=pa.int64()),
        "amount": pa.array(["1.50", "2", "3", "4"]).cast(pa.decimal128(5, 2)),
    }), p)
    s = Schema("t", (Column("code", Cat(("1", "2"))), Column("flag", BOOL),
                     Column("big", Num(F(0), F(100), True), "default", 7),
                     Column("amount", Num(F(0), F(3)))))
    df = load_table(p, s)
    assert df.to_dict("list") == {"code": ["1", "2", "1"], "flag": [True, False, True],
                                  "big": [100, 5, 7], "amount": [1.5, 2.0, 3.0]}


@pytest.mark.parametrize("values", [
    [True, False],                                   # booleans are not numbers
    [[1, 2], [3]],                                   # lists are not numbers
])
def test_parquet_values_of_the_wrong_kind(tmp_path, values):
    p = tmp_path / "t.parquet"
    pd.DataFrame({"x": values}).to_parquet(p)
    with pytest.raises(FuzzError) as e:
        load_table(p, NUM_SCHEMA)
    assert codes(e) == ["E0504"]


def test_text_that_merely_starts_like_a_magic_number_is_text(tmp_path):
    p = write(tmp_path, "PAR1,x\nBZh,1\n")
    df = load_table(p, Schema("t", (Column("PAR1", STRING), Column("x", Num()))))
    assert df.to_dict("list") == {"PAR1": ["BZh"], "x": [1.0]}
