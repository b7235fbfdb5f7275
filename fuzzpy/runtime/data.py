"""Load private tables and make them conform to their declared schema.

The checker proves privacy bounds from the schema alone (bounds of numbers, sets of categories).
Those proofs only hold if the data really has that shape, so this module forces it to:
numbers are clamped into their declared bounds, and missing values or undeclared categories are
dropped or replaced by a public default.  Each input row yields at most one output row, so two
tables at distance d stay within distance d (see docs/data.md for the argument).

No message raised here depends on private data beyond "this column has at least one value that
cannot be parsed": never a row number, a cell value or a count.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
import numbers
import re
import time
import warnings
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO, Callable, Collection, Iterable, Iterator, Mapping, NamedTuple, Union

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from fuzzpy.diagnostics import Diagnostic, FuzzError, error
from fuzzpy.runtime.digest_cache import DigestCache, file_state, open_digest_cache, settled
from fuzzpy.runtime.files import (
    BackgroundIdentity,
    HashingReader,
    NotARegularFile,
    StreamedIdentity,
    open_regular,
    read_whole,
)
from fuzzpy.typesystem.types import (
    MISSING_POLICIES,
    Bool,
    Cat,
    Column,
    Num,
    Schema,
    Str,
)

CSV_SUFFIXES = (".csv", ".tsv", ".txt", ".data", ".test")
PARQUET_SUFFIXES = (".parquet", ".pq")
# Compared after stripping whitespace and lower-casing.
MISSING_MARKERS = frozenset({"", "?", "na", "nan", "null"})
TRUE_WORDS = frozenset({"true", "1", "yes"})
FALSE_WORDS = frozenset({"false", "0", "no"})
# Integers read through float64 are exact only up to this magnitude.
MAX_EXACT_INT = 2**53

_SNIFF_BYTES = 64 * 1024
# The text one row of a CSV file may hold, all its cells together (docs/data.md).  Arrow reads
# the file in blocks and always parses a row no longer than one block; a block of twice the
# limit (plus room for quotes and delimiters) reads every row within the limit, even one made
# of quoted, escaped characters.
MAX_ROW_BYTES = 16 * 1024 * 1024
MAX_ROW_TEXT = "16 MiB"
_BLOCK_BYTES = 2 * MAX_ROW_BYTES + 1024 * 1024
_SMALL_BLOCK = 4 * 1024 * 1024  # tried first: faster, and enough for all but very long rows
_SNIFF_LINES = 50
_DELIMITERS = (",", ";", "\t")
# Signatures of common binary formats (gzip, zip, xz, zstd, HDF5) that must never be parsed as
# text; other binary files are caught by the NUL-byte and UTF-8 checks.
_BINARY_MAGIC = (b"\x1f\x8b", b"PK\x03\x04", b"\xfd7zXZ", b"\x28\xb5\x2f\xfd", b"\x89HDF")
_TEXT = pa.dictionary(pa.int32(), pa.string())  # how CSV cells are read
# declared column name -> raw column, all of one length (a dict, or _ParquetColumns)
_Raw = Mapping[str, pa.ChunkedArray]
_FIX_NOTE = ("this is a statement about the file, not a privacy release: fix the file "
             "before running; no budget has been spent")


@dataclass(frozen=True)
class _Plan:
    """A column checked against the schema rules, ready to conform data."""

    column: Column
    lo: float | None  # effective float bounds, inside the declared ones
    hi: float | None
    default: object  # normalised default (float, bool, str or category code), or None


# ---- public API -----------------------------------------------------------------------------


def load_table(path: str | Path, schema: Schema, *, table: str | None = None,
               header: bool = False, keep: Collection[str] | None = None) -> pd.DataFrame:
    """Read a CSV or Parquet file and return it conformed to `schema`.

    The result has exactly the schema's columns, in order, with dtypes float64 / int64 / bool /
    str / category (declared categories, declared order) and a fresh RangeIndex.  With
    `header`, the first row of a text file must be a header naming every declared column.
    With `keep`, only the declared columns named in it are in the result; every declared
    column is still read and checked, and decides which rows are dropped, as without it
    (runtime/columns.py gives the names a program reads).
    """
    return load_identified(path, schema, table=table, header=header, keep=keep)[0]


def load_identified(path: str | Path, schema: Schema, *, table: str | None = None,
                    header: bool = False, keep: Collection[str] | None = None,
                    known_digests: bool = False) -> tuple[pd.DataFrame, str]:
    """`load_table`, and the file's identity ("sha256:<hex>", as `fuzzpy ledger` shows it) of
    exactly the bytes that were parsed: the file is read once, hashed on the way.

    With `known_digests` (runs on the user's own data only), a Parquet file whose state vouches
    for its bytes is parsed from the file itself, not from a snapshot, and one hashed before in
    the same state is not hashed again (docs/data.md, "Known digests")."""
    name = table or schema.name
    plans = _plan_schema(schema, name)  # schema errors come before any data is read
    if known_digests:
        by_state = _load_by_state(Path(path), schema, name, plans, keep, open_digest_cache())
        if by_state is not None:
            return by_state
    read = _read_raw(Path(path), schema, name, header)
    try:
        return _conform(read.raw, plans, name, keep), read.identity
    except FuzzError as exc:
        if read.by_position:
            _add_note(exc, _header_note(schema))
        raise


def _header_note(schema: Schema) -> str:
    names = ", ".join(c.name for c in schema.columns)
    return (f"the file was read without a header (its first row does not name every column of schema "
            f"{schema.name}: {names}); if its first row is a header, pass --header to have it "
            "checked by name")


def _add_note(exc: FuzzError, note: str) -> None:
    for d in exc.diagnostics:
        d.notes.append(note)


def load_frame(frame: pd.DataFrame, schema: Schema, *, table: str | None = None,
               keep: Collection[str] | None = None) -> pd.DataFrame:
    """A pandas DataFrame conformed to `schema` by the same rules as a file (the Python API;
    `keep`: as for `load_table`)."""
    name = table or schema.name
    plans = _plan_schema(schema, name)
    return _conform(_frame_raw(frame, schema, name), plans, name, keep)


def load_arrow(data: pa.Table, schema: Schema, *, table: str | None = None,
               keep: Collection[str] | None = None) -> pd.DataFrame:
    """An Arrow table holding the schema's columns (one Parquet row group, read by the Dask
    engine) conformed by the same rules as a whole file (`keep`: as for `load_table`)."""
    name = table or schema.name
    plans = _plan_schema(schema, name)
    return _conform({c.name: data.column(c.name) for c in schema.columns}, plans, name, keep)


@dataclass(frozen=True)
class ColumnEffect:
    """What a column's missing-value policy did to a table (`fuzzpy data check`): private to the
    data owner, never part of a release."""

    column: str
    policy: str   # "drop" or "default"
    affected: int  # rows whose value was missing, unparsable or undeclared


def inspect_table(source: str | Path | pd.DataFrame, schema: Schema, *, table: str | None = None,
                  header: bool = False) -> tuple[int, int, list[ColumnEffect]]:
    """(rows read, rows kept, per-column effects) of loading `source` against `schema`."""
    name = table or schema.name
    plans = _plan_schema(schema, name)
    raw = _frame_raw(source, schema, name) if isinstance(source, pd.DataFrame) else \
        _read_raw(Path(source), schema, name, header).raw
    rows = _row_count(raw, plans[0].column.name)
    drop = np.zeros(rows, dtype=bool)
    effects = []
    for plan in plans:
        invalid = _parser(plan.column.type)(raw[plan.column.name], plan, name).row_invalid()
        if invalid is None:
            invalid = np.zeros(rows, dtype=bool)
        if plan.column.on_invalid == "drop":
            drop |= invalid
        effects.append(ColumnEffect(plan.column.name, "drop" if plan.column.on_invalid == "drop" else "default",
                                    int(invalid.sum())))
    return rows, int((~drop).sum()), effects


@dataclass(frozen=True)
class _Read:
    raw: _Raw  # the declared columns as raw Arrow columns
    identity: str  # the file's identity
    by_position: bool  # a text file without a header: columns taken in declared order


def _read_raw(path: Path, schema: Schema, name: str, header: bool) -> _Read:
    with _open_data(path, name) as fh:
        kind, head, tail = _file_kind(fh, path, name)
        try:
            if kind == "parquet":
                fh.seek(0)
                return _read_parquet_identified(fh, path, schema, name)
            return _read_csv(fh, path, head, tail, schema, name, header)
        except OSError:
            raise error("E0502", f"data file '{path}' for table '{name}' cannot be read") from None


def _frame_raw(frame: pd.DataFrame, schema: Schema, table: str) -> _Raw:
    """The declared columns of a DataFrame as Arrow columns (mixed object columns as text)."""
    names = [c.name for c in schema.columns]
    present = [str(c) for c in frame.columns]
    missing = [n for n in names if n not in present]
    if missing:
        raise error("E0503", f"column(s) {', '.join(repr(n) for n in missing)} of table '{table}' (schema "
                             f"{schema.name}) not found in the DataFrame; its columns: {', '.join(present)}")
    dups = [n for n in names if present.count(n) > 1]
    if dups:
        raise error("E0505", f"the DataFrame for table '{table}' has column(s) {', '.join(dups)} more than once")
    out: _Raw = {}
    for n in names:
        col = frame.iloc[:, present.index(n)]
        try:
            out[n] = pa.chunked_array([pa.array(col, from_pandas=True)])
        except (pa.ArrowException, TypeError, ValueError):
            out[n] = pa.chunked_array([pa.array(col.astype("string"), from_pandas=True)])
    return out


def load_tables(spec: dict[str, Path], schemas: dict[str, Schema]) -> dict[str, pd.DataFrame]:
    """Load every declared private table; all tables must be given and none extra."""
    known = ", ".join(schemas) or "(none)"
    diags = [Diagnostic("E0507", f"data given for unknown table '{t}'; declared tables: {known}")
             for t in spec if t not in schemas]
    diags += [Diagnostic("E0506", f"no data file given for table '{t}'")
              for t in schemas if t not in spec]
    if diags:
        raise FuzzError(diags)
    return {t: load_table(spec[t], schemas[t], table=t) for t in schemas}


# ---- schema rules (checked before any data is touched) --------------------------------------


def _plan_schema(schema: Schema, table: str) -> list[_Plan]:
    if not schema.columns:
        raise error("E0505", f"table '{table}' declares no columns")
    names = [c.name for c in schema.columns]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise error("E0505", f"table '{table}' declares column(s) more than once: "
                             f"{', '.join(dups)}")
    return [_plan_column(c, table) for c in schema.columns]


def _plan_column(col: Column, table: str) -> _Plan:
    where = f"column '{col.name}' of table '{table}'"
    if col.on_invalid not in MISSING_POLICIES:
        raise error("E0505", f"{where} has on_invalid='{col.on_invalid}'; "
                             f"expected one of: {', '.join(MISSING_POLICIES)}")
    t = col.type
    lo = hi = None
    if isinstance(t, Num):
        lo, hi = float_bounds(t, where)
    elif isinstance(t, Cat):
        if not all(isinstance(v, str) for v in t.values) or len(set(t.values)) != len(t.values):
            raise error("E0505", f"{where}: categories must be distinct strings")
        if any(v != v.strip() for v in t.values):
            # Cells are stripped, so such a category could never match: every row would go.
            raise error("E0505", f"{where}: categories cannot start or end with whitespace")
    elif not isinstance(t, (Bool, Str)):
        raise error("E0505", f"{where} has type {t}; table columns must be numbers, booleans, "
                             "strings or categories")
    default = None
    if col.on_invalid == "default":
        default = _normalise_default(col, lo, hi, where)
    return _Plan(col, lo, hi, default)


def float_bounds(t: Num, where: str) -> tuple[float | None, float | None]:
    """Float bounds that lie inside the declared (exact) bounds, so clamped values satisfy them."""
    lo, hi = _exact_bound(t.lo, where), _exact_bound(t.hi, where)
    if t.integer:
        lo = None if lo is None else Fraction(math.ceil(lo))
        hi = None if hi is None else Fraction(math.floor(hi))
    if lo is not None and hi is not None and lo > hi:
        raise error("E0505", f"{where} has type {t}, which contains no value")
    return (None if lo is None else _float_inside(lo, up=True),
            None if hi is None else _float_inside(hi, up=False))


def _exact_bound(b: object, where: str) -> Fraction | None:
    if b is None or (isinstance(b, float) and math.isinf(b)):
        return None
    try:
        return Fraction(b)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise error("E0505", f"{where} has a bound that is not a number") from None


def _float_inside(q: Fraction, *, up: bool) -> float:
    """The float nearest to q on the inner side (rounding could otherwise leave the bounds)."""
    try:
        f = float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf
    if up and Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    elif not up and Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def _normalise_default(col: Column, lo: float | None, hi: float | None, where: str) -> object:
    t, d = col.type, col.default
    bad = error("E0505", f"{where} has on_invalid='default' but its default {d!r} "
                         f"is not a value of type {t}")
    if d is None:
        raise error("E0505", f"{where} has on_invalid='default' but no default value")
    if isinstance(t, Num):
        return _num_default(t, d, lo, hi, bad)
    if isinstance(t, Bool):
        if isinstance(d, (bool, np.bool_)):
            return bool(d)
        if isinstance(d, str) and d.strip().lower() in TRUE_WORDS | FALSE_WORDS:
            return d.strip().lower() in TRUE_WORDS
        raise bad
    if isinstance(t, Str):
        if isinstance(d, str):
            return d
        raise bad
    assert isinstance(t, Cat)
    if isinstance(d, str) and d in t.values:
        return t.values.index(d)  # stored as a category code
    raise bad


def _num_default(t: Num, d: object, lo: float | None, hi: float | None, bad: FuzzError) -> float:
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (numbers.Real, str)):
        raise bad
    try:
        q = Fraction(d.strip() if isinstance(d, str) else d)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise bad from None  # not a number, or inf / nan
    if t.integer and q.denominator != 1:
        raise bad
    try:
        x = float(q)
    except OverflowError:
        x = math.inf if q > 0 else -math.inf
    # Clamped like the data, to float bounds that lie inside the declared ones.
    x = min(max(x, -math.inf if lo is None else lo), math.inf if hi is None else hi)
    if not math.isfinite(x) or (t.integer and abs(x) > MAX_EXACT_INT):
        raise bad
    return x


# ---- reading files --------------------------------------------------------------------------


def _open_data(path: Path, table: str) -> io.BufferedReader:
    """The data file, opened only if it is a regular file with a supported extension (a FIFO
    or a device would block the read forever)."""
    where = f"data file '{path}' for table '{table}'"
    if not path.exists():
        raise error("E0501", f"{where} does not exist")
    if not path.is_file():
        raise error("E0502", f"{where} is a directory or not a regular file")
    suffix = path.suffix.lower()
    if suffix not in CSV_SUFFIXES + PARQUET_SUFFIXES:
        raise error("E0502", f"{where} has an unsupported extension '{suffix}'; supported: "
                             f"{', '.join(CSV_SUFFIXES + PARQUET_SUFFIXES)}")
    try:
        return open_regular(path)  # type: ignore[return-value]
    except FileNotFoundError:
        raise error("E0501", f"{where} does not exist") from None
    except NotARegularFile:
        raise error("E0502", f"{where} is a directory or not a regular file") from None
    except OSError:
        raise error("E0502", f"{where} cannot be read") from None


def _file_kind(f: BinaryIO, path: Path, table: str) -> tuple[str, bytes, bytes]:
    """Decide CSV or Parquet from the extension and the first bytes; both must agree.
    Returns the kind, the first bytes and the last (up to 4) bytes."""
    where = f"data file '{path}' for table '{table}'"
    suffix = path.suffix.lower()
    try:
        head = f.read(_SNIFF_BYTES)
        f.seek(max(0, f.seek(0, 2) - 4))
        tail = f.read(4)
    except OSError:
        raise error("E0502", f"{where} cannot be read") from None
    # A Parquet file starts and ends with PAR1; a CSV whose first column is PAR1... does not.
    is_parquet = head.startswith(b"PAR1") and tail == b"PAR1" and len(head) >= 8
    if suffix in PARQUET_SUFFIXES:
        if head and not is_parquet:
            raise error("E0502", f"{where} is named like a Parquet file but is not one")
        return "parquet", head, tail
    if is_parquet:
        raise error("E0502", f"{where} is a Parquet file named like a text file",
                    None, "rename it to end in .parquet")
    if head.startswith(_BINARY_MAGIC) or b"\x00" in head or not _is_utf8(head):
        raise error("E0502", f"{where} is not a UTF-8 text file",
                    None, "compressed and binary files are not supported; "
                          "give a plain CSV or a Parquet file")
    return "csv", head, tail


def _is_utf8(head: bytes) -> bool:
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(head, final=len(head) < _SNIFF_BYTES)  # a cut character may end the sample
    except UnicodeDecodeError:
        return False
    return True


class _EndsWithNewline(io.RawIOBase):
    """A file's bytes followed by one line break.  Arrow cannot read a file whose only line
    has no line break after it ("1,2" or a header alone); with one added, it reads it as the
    same one line, and a file that already ends in a line break is not wrapped."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._added = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = self._raw.readinto(buffer)
        if n or self._added or len(buffer) == 0:
            return n or 0
        self._added = True
        buffer[0] = 0x0A
        return 1


def _read_csv(f: BinaryIO, path: Path, head: bytes, tail: bytes, schema: Schema, table: str,
              header: bool) -> _Read:
    """Read the text file `f` (hashed on the way)."""
    truncated = len(head) >= _SNIFF_BYTES
    skip, delimiter, width = _csv_layout(head.decode("utf-8-sig", errors="ignore"),
                                         truncated=truncated,
                                         prefer_tab=path.suffix.lower() == ".tsv")
    if width == 0 and not truncated:  # nothing but blank lines and comments
        if header:
            raise _header_missing([c.name for c in schema.columns], schema, table, path)
        f.seek(0)
        return _Read(_empty_raw(schema), HashingReader(f).identity(), False)
    names = [c.name for c in schema.columns]
    # A header seen in the sampled head lets Arrow convert only the declared columns; if Arrow
    # reads the first row otherwise, the file is read again whole.
    fields = _declared_fields(head.decode("utf-8-sig", errors="ignore"), skip, delimiter, names)
    typed = _read_numbers_typed(path, head, tail, skip, delimiter, width, schema)
    if typed is not None:
        return typed
    parsed = _parse_file(path, tail, skip, delimiter, width, b'"' in head, fields)
    if fields is not None and parsed.body is not None and not _names_every(parsed.body.columns, names):
        parsed = _parse_file(path, tail, skip, delimiter, width, b'"' in head, None)
    body, identity = parsed.body, parsed.identity
    if body is None and _longest_line(f) > _BLOCK_BYTES:
        raise _row_too_long(path, table)
    if body is None or not all(t == _TEXT for t in body.schema.types):
        raise error("E0502", f"data file '{path}' for table '{table}' is not well-formed "
                             "delimited text (bad quoting, invalid UTF-8, rows with a "
                             "different number of fields than the first row, or a row longer "
                             "than the limit)", None, _FIX_NOTE)
    # Arrow completes a row across at most two blocks, so a file read in small blocks has no
    # row longer than 8 MiB: only a read in big blocks can hold one over the limit.
    if parsed.big_blocks and _longest_row(body.columns) > MAX_ROW_BYTES:
        raise _row_too_long(path, table)
    raw, by_position = _select_columns(body.columns, schema, table, path, header)
    return _Read(raw, identity, by_position)


def _read_numbers_typed(path: Path, head: bytes, tail: bytes, skip: int, delimiter: str, width: int,
                        schema: Schema) -> _Read | None:
    """The declared columns, numbers read by Arrow's float parser, or None to read all as text.

    Only for a file whose header (in the sampled head, without quotes, so split exactly as
    Arrow splits it) names every declared column once.  Arrow's float parser, after trimming
    spaces and tabs, gives exactly what the text rules give (trim, then the same parser) for
    every cell it accepts, except "nan" (a missing marker) and "-nan" (refused): any NaN, a
    refused cell (markers, other spaces, anything else) or any other trouble, and the file is
    read as text instead, with the text rules deciding."""
    text = head.decode("utf-8-sig", errors="ignore")
    where = _header_positions(text, skip, delimiter, [c.name for c in schema.columns])
    first = [ln for ln in re.split(r"\r\n|\n|\r", text)[skip:] if ln.strip()][:1]
    if where is None or not first or '"' in first[0]:
        return None
    numbers = {i for c, i in zip(schema.columns, where) if isinstance(c.type, Num)}
    if not numbers:
        return None
    quoted = b'"' in head
    parsed = _parse_text(path, tail, skip, delimiter, width, quoted, _SMALL_BLOCK, sorted(where),
                         {i: pa.float64() for i in numbers})
    body = parsed.body
    if body is None or (parsed.quote_seen and not quoted) or body.num_rows == 0:
        return None
    if any(pc.any(pc.is_nan(body.column(f"f{i}"))).as_py() for i in numbers):
        return None
    raw = {c.name: body.column(f"f{i}") for c, i in zip(schema.columns, where)}
    return _Read(raw, parsed.identity, False)


def _header_positions(text: str, skip: int, delimiter: str, names: list[str]) -> list[int] | None:
    """Each declared column's position if the head's first row is a header naming each once."""
    lines = [ln for ln in re.split(r"\r\n|\n|\r", text)[skip:] if ln.strip()]
    if len(lines) < 2:  # the only line of the sample may be cut short
        return None
    first = [cell.strip() for cell in next(csv.reader(lines[:1], delimiter=delimiter))]
    if not all(first.count(n) == 1 for n in names):
        return None
    return [first.index(n) for n in names]


def _declared_fields(text: str, skip: int, delimiter: str, names: list[str]) -> list[int] | None:
    """Positions of the declared columns if the head's first row is a header naming each once."""
    where = _header_positions(text, skip, delimiter, names)
    return None if where is None else sorted(where)


def _names_every(cols: list[pa.ChunkedArray], names: list[str]) -> bool:
    return bool(cols) and len(cols[0]) > 0 and set(names) <= {str(c[0].as_py()).strip() for c in cols}


class _Parsed(NamedTuple):
    body: pa.Table | None  # every field read (or those asked for) as text; None if Arrow refused
    identity: str | None   # the identity of the bytes parsed, when Arrow read the file
    quote_seen: bool       # whether a quote character occurred in what was read
    big_blocks: bool       # read in blocks that can hold a row over the limit (2 blocks)


def _parse_file(path: Path, tail: bytes, skip: int, delimiter: str, width: int, quoted: bool,
                fields: list[int] | None) -> _Parsed:
    """`_parse_text` in the cheapest mode that reads the file.

    Line breaks inside quoted cells cost Arrow a slower parse: allowed only where a quote
    occurs.  A file without one parses the same either way; one whose first quote comes after
    the sampled head is read again with them allowed.  Likewise blocks of the size a 16 MiB
    row needs cost more than small ones; the block size changes whether Arrow can read a row,
    never what it reads, so a refusal is retried with big blocks."""
    parsed = _parse_text(path, tail, skip, delimiter, width, quoted, _SMALL_BLOCK, fields)
    if parsed.quote_seen and not quoted:
        quoted = True
        parsed = _parse_text(path, tail, skip, delimiter, width, quoted, _SMALL_BLOCK, fields)
    if parsed.body is None:
        parsed = _parse_text(path, tail, skip, delimiter, width, quoted, _BLOCK_BYTES, fields)
    return parsed


def _parse_text(path: Path, tail: bytes, skip: int, delimiter: str, width: int, quoted: bool,
                block: int, fields: list[int] | None,
                typed: dict[int, pa.DataType] | None = None) -> _Parsed:
    """One attempt, on a handle of its own: after a refusal Arrow's read-ahead may still be
    reading, and must not move the position another attempt reads from."""
    with open_regular(path) as f:
        return _parse_handle(f, tail, skip, delimiter, width, quoted, block, fields, typed)


def _parse_handle(f: BinaryIO, tail: bytes, skip: int, delimiter: str, width: int, quoted: bool,
                  block: int, fields: list[int] | None,
                  typed: dict[int, pa.DataType] | None = None) -> _Parsed:
    """Every field (or those in `fields`) as text; with `typed`, the header row is skipped and
    those fields are read with the given types."""
    stream = HashingReader(f, watch=b'"')
    source = io.BufferedReader(stream if tail.endswith((b"\n", b"\r")) else _EndsWithNewline(stream),
                               _SNIFF_BYTES)
    names = [f"f{i}" for i in range(width)]
    read = pcsv.ReadOptions(autogenerate_column_names=True, skip_rows=skip, block_size=block) if typed is None \
        else pcsv.ReadOptions(column_names=names, skip_rows=skip + 1, block_size=block)
    parse = pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=quoted,
                              invalid_row_handler=_skip_blank_row)
    # Every column as exact text: our own rules decide what is missing and what is a number.
    # Dictionary-encoded, so those rules run once per distinct value (see _Distinct).
    convert = pcsv.ConvertOptions(column_types={f"f{i}": (typed or {}).get(i, _TEXT) for i in range(width)},
                                  null_values=[], strings_can_be_null=False,
                                  quoted_strings_can_be_null=False, check_utf8=True,
                                  include_columns=None if fields is None else [f"f{i}" for i in fields])
    try:
        with warnings.catch_warnings():  # a parser warning could quote a line of the file
            warnings.simplefilter("ignore")
            body = pcsv.read_csv(source, read_options=read, parse_options=parse, convert_options=convert)
    except (pa.ArrowException, OSError, ValueError):
        # Arrow's own message quotes the offending row: never pass it on.
        return _Parsed(None, None, stream.seen, 2 * block > MAX_ROW_BYTES)
    return _Parsed(body, stream.identity(), stream.seen, 2 * block > MAX_ROW_BYTES)


def _row_too_long(path: Path, table: str) -> FuzzError:
    return error("E0508", f"data file '{path}' for table '{table}' has a row holding more than "
                          f"{MAX_ROW_TEXT} of text (the limit for one row of a CSV file, all its "
                          "cells together)", None, _FIX_NOTE)


def _longest_row(cols: list[pa.ChunkedArray]) -> int:
    """Bytes of text in the fullest row (all its cells), 0 for no rows."""
    if not cols or len(cols[0]) == 0:
        return 0
    total = np.zeros(len(cols[0]), dtype=np.int64)
    for col in cols:
        coded = col.combine_chunks()
        total += _np(pc.binary_length(coded.dictionary)).astype(np.int64)[_np(coded.indices)]
    return int(total.max())


def _longest_line(f: BinaryIO) -> int:
    """The length of the longest physical line of the file (read once more, in chunks; only
    after Arrow refused it, to tell an overlong row from malformed text)."""
    try:
        f.seek(0)
        longest = run = 0
        while chunk := f.read(_SNIFF_BYTES * 16):
            lines = re.split(rb"\r\n|\n|\r", chunk)
            run += len(lines[0])
            if len(lines) > 1:
                longest = max(longest, run, *(len(x) for x in lines[1:-1]))
                run = len(lines[-1])
        return max(longest, run)
    except OSError:
        return 0


def _skip_blank_row(row: object) -> str:
    """Arrow calls this for rows of the wrong width: whitespace-only lines are skipped."""
    return "skip" if not getattr(row, "text", "x").strip() else "error"


def _csv_layout(text: str, *, truncated: bool, prefer_tab: bool) -> tuple[int, str, int]:
    """Leading lines to skip (blank, or UCI-style '|' comments), the delimiter, and the number
    of fields of the first row (0 if the sample has no row)."""
    lines = re.split(r"\r\n|\n|\r", text)
    if truncated:
        lines = lines[:-1]  # the last line of the sample may be cut
    skip = 0
    while skip < len(lines) and (not lines[skip].strip() or lines[skip].startswith("|")):
        skip += 1
    sample = [ln for ln in lines[skip:skip + _SNIFF_LINES] if ln.strip()]
    if not sample:
        return skip, ",", 0
    order = ("\t", ",", ";") if prefer_tab else _DELIMITERS

    def counts(d: str) -> list[int]:
        return [len(r) for r in csv.reader(sample, delimiter=d)]

    def score(d: str) -> tuple[bool, int]:
        c = counts(d)
        return c[0] > 1 and len(set(c)) == 1, c[0]

    best = max(order, key=score)  # ties go to the earlier delimiter in `order`
    return skip, best, counts(best)[0]


def _select_columns(cols: list[pa.ChunkedArray], schema: Schema, table: str, path: Path,
                    header: bool) -> tuple[_Raw, bool]:
    """Match declared columns by header name, or by position when there is no header."""
    names = [c.name for c in schema.columns]
    if not cols or len(cols[0]) == 0:
        if header:
            raise _header_missing(names, schema, table, path)
        return _empty_raw(schema), False
    first = [str(c[0].as_py()).strip() for c in cols]
    if set(names) <= set(first):
        dups = [n for n in names if first.count(n) > 1]
        if dups:
            raise error("E0505", f"the header of data file '{path}' names column(s) "
                                 f"{', '.join(dups)} more than once")
        return {n: cols[first.index(n)][1:] for n in names}, False
    if header:  # the user says the first row is a header: it is public, and may be compared
        raise _header_missing([n for n in names if n not in first], schema, table, path)
    # Without a header naming every column, the layout is decided by the field count alone:
    # whatever the first row says (it may be a private row) never changes the outcome or the
    # message.
    if len(first) == len(names):
        return dict(zip(names, cols)), True
    raise error("E0505", f"data file '{path}' has {len(first)} fields per row and no header "
                         f"naming all the columns of table '{table}' (schema {schema.name}: {', '.join(names)}), "
                         f"which declares {len(names)} columns",
                None, "give a header row with the column names (and pass --header to have it "
                      "checked by name), or exactly one field per declared column, in declared order")


def _header_missing(missing: list[str], schema: Schema, table: str, path: Path) -> FuzzError:
    names = ", ".join(c.name for c in schema.columns)
    return error("E0503", f"the header of data file '{path}' does not name column(s) "
                          f"{', '.join(repr(n) for n in missing)} of table '{table}' (schema {schema.name}: "
                          f"{names})", None,
                 "the header is compared with the schema because of --header; names are compared "
                 "after stripping spaces, and case matters")


def _read_parquet_identified(fh: BinaryIO, path: Path, schema: Schema, table: str) -> _Read:
    """Parquet needs random access: the file is read into memory once, and hashed on another
    thread while its declared columns are decoded from the same bytes."""
    snapshot = read_whole(fh)
    hashing = BackgroundIdentity(snapshot)
    try:
        raw = _read_parquet(snapshot, path, schema, table)
    finally:
        identity = hashing.result()
    return _Read(raw, identity, False)


# rule Known digests (docs/data.md): a file parsed from itself only while its state vouches for its bytes
def _load_by_state(path: Path, schema: Schema, table: str, plans: list[_Plan], keep: Collection[str] | None,
                   digests: DigestCache | None) -> tuple[pd.DataFrame, str] | None:
    """The table and identity of a Parquet file that only this user can write and that has not
    changed for SETTLE_NS, parsed from the file itself (Arrow reads only the declared columns'
    pages).  The identity is the one `digests` recorded for the file's state, or else hashed on
    another thread while the columns are decoded (and recorded).  None when the file does not
    qualify, or its state changed before the parse ended: the caller then parses a snapshot."""
    if path.suffix.lower() not in PARQUET_SUFFIXES:
        return None
    read_at = time.time_ns()  # before the state is taken: see settled()
    with _open_data(path, table) as fh:
        state = file_state(fh, path)
        if state is None or not settled(state, read_at):
            return None
        identity = digests.lookup(state) if digests is not None else None
        hashing = StreamedIdentity(fh.fileno()) if identity is None else None
        try:
            _file_kind(fh, path, table)
            fh.seek(0)
            frame = _conform(_read_parquet(fh, path, schema, table), plans, table, keep)
        except OSError:
            raise error("E0502", f"data file '{path}' for table '{table}' cannot be read") from None
        except FuzzError:
            if file_state(fh, path) != state:
                return None  # refused bytes of no single state: judged again from a snapshot
            raise
        finally:
            if hashing is not None:
                identity = hashing.result()
        if file_state(fh, path) != state or identity is None:
            return None
        if hashing is not None and digests is not None:
            digests.record(state, fh, identity)
    return frame, identity


def _read_parquet(source: bytearray | BinaryIO, path: Path, schema: Schema, table: str) -> _Raw:
    """The declared columns of a Parquet file, from a snapshot of its bytes or an open file."""
    names = [c.name for c in schema.columns]
    unreadable = error("E0502", f"data file '{path}' for table '{table}' is not a readable "
                                "Parquet file")
    f = pa.BufferReader(pa.py_buffer(source)) if isinstance(source, bytearray) else pa.PythonFile(source, mode="r")
    try:
        file_schema = pq.read_schema(f)
        in_file = list(file_schema.names)
        f.seek(0)
    except (pa.ArrowException, OSError, ValueError):
        raise unreadable from None
    missing = [n for n in names if n not in in_file]
    if missing:
        raise error("E0503", f"column(s) {', '.join(repr(n) for n in missing)} of table "
                             f"'{table}' not found in data file '{path}'; columns in the file: "
                             f"{', '.join(in_file)}")
    dups = [n for n in names if in_file.count(n) > 1]
    if dups:
        raise error("E0505", f"data file '{path}' has column(s) {', '.join(dups)} more than once")
    # Text columns dictionary-encoded as they are read (see _Distinct).
    text = [n for n in names if pa.types.is_string(file_schema.field(n).type)
            or pa.types.is_large_string(file_schema.field(n).type)]
    try:
        parquet = pq.ParquetFile(f, read_dictionary=text)
    except (pa.ArrowException, OSError, ValueError):
        raise unreadable from None
    return _ParquetColumns(parquet, names, unreadable)


class _ParquetColumns(Mapping[str, pa.ChunkedArray]):
    """A Parquet file's declared columns, each decoded when it is asked for and not kept: the
    conformance pass holds one column the program does not read at a time (its invalid cells
    decide which rows go), never the whole table."""

    def __init__(self, parquet: pq.ParquetFile, names: list[str], unreadable: FuzzError):
        self._parquet, self._names, self._unreadable = parquet, names, unreadable
        self.rows = parquet.metadata.num_rows

    def __getitem__(self, name: str) -> pa.ChunkedArray:
        if name not in self._names:
            raise KeyError(name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                data = self._parquet.read(columns=[name])
        except (pa.ArrowException, OSError, ValueError):
            raise self._unreadable from None
        return data.column(name)

    def row_groups(self, name: str) -> Iterator[pa.ChunkedArray]:
        """Column `name`, one row group at a time, in order."""
        for i in range(self._parquet.num_row_groups):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    data = self._parquet.read_row_group(i, columns=[name])
            except (pa.ArrowException, OSError, ValueError):
                raise self._unreadable from None
            yield data.column(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _row_count(raw: _Raw, first: str) -> int:
    rows = getattr(raw, "rows", None)
    return len(raw[first]) if rows is None else rows


def _empty_raw(schema: Schema) -> _Raw:
    return {c.name: pa.chunked_array([], type=pa.string()) for c in schema.columns}


# ---- conformance ----------------------------------------------------------------------------
# Parsers take a raw Arrow column and return its `_Cells` (values and which are invalid); they
# raise E0504 on text that cannot be read.  Everything is a whole-column Arrow or numpy
# operation, and a column is gathered once, after the rows to keep are known.

_Values = Union[np.ndarray, pa.Array]


@dataclass(frozen=True)
class _Cells:
    """A parsed column, in one of two forms.

    Dense: `values` and `invalid` (None: no cell is) are per row.  Coded (a column read as its
    distinct values, see `_Distinct`): `values` and `invalid` are per distinct value, `codes`
    gives each row's value (-1 for a null cell, whose value is `at_null` and which is invalid
    when `null_invalid`).  Invalid cells are missing, unparsable or undeclared; their values
    are never used (the row is dropped, or the cell set to the default)."""

    values: _Values
    invalid: np.ndarray | None
    codes: np.ndarray | None = None
    at_null: object = None
    null_invalid: bool = True
    has_null: bool = False

    def row_invalid(self) -> np.ndarray | None:
        """Per row, whether the cell is invalid; None when none is (nothing to compute)."""
        if self.codes is None:
            return self.invalid if self.invalid is not None and self.invalid.any() else None
        per_value = np.zeros(len(self.values), bool) if self.invalid is None else self.invalid
        if not per_value.any() and not (self.null_invalid and self.has_null):
            return None
        return np.append(per_value, self.null_invalid).take(self.codes)  # -1 picks the last entry

    def filled(self, default: object) -> "_Cells":
        """Invalid cells set to `default`."""
        if self.codes is None:
            if self.invalid is None or not self.invalid.any():
                return self
            return _Cells(_fill(self.values, self.invalid, default), None)
        values = self.values if self.invalid is None or not self.invalid.any() else \
            _fill(self.values, self.invalid, default)
        return _Cells(values, None, self.codes, default if self.null_invalid else self.at_null,
                      False, self.has_null)


# rule Columns kept: every column checked; only `keep_columns` gathered
def _conform(raw: _Raw, plans: list[_Plan], table: str,
             keep_columns: Collection[str] | None = None) -> pd.DataFrame:
    """Parse every column, then drop or fill its invalid cells by the column's policy.

    The rows to keep are decided over all columns first (a row goes if any `drop` column has an
    invalid cell in it), then each column is gathered once; when no row goes, not at all.  With
    `keep_columns`, the others are parsed and checked alike but never gathered."""
    rows = _row_count(raw, plans[0].column.name)
    drop: np.ndarray | None = None
    parsed = []
    for plan in plans:
        if keep_columns is not None and plan.column.name not in keep_columns:
            invalid = _unread_invalid(raw, plan, table)  # its cells are let go: only these mattered
            if invalid is not None and plan.column.on_invalid == "drop":
                drop = invalid if drop is None else np.logical_or(drop, invalid, out=drop)
            continue
        cells = _parser(plan.column.type)(raw[plan.column.name], plan, table)
        if plan.column.on_invalid == "drop":
            invalid = cells.row_invalid()
            if invalid is not None:
                drop = invalid.copy() if drop is None else np.logical_or(drop, invalid, out=drop)
            parsed.append((plan, cells))
        else:
            parsed.append((plan, cells.filled(plan.default)))
    keep = None if drop is None or not drop.any() else ~drop
    kept = rows if keep is None else int(np.count_nonzero(keep))
    cols = {p.column.name: _finish(c, keep, p.column.type) for p, c in parsed}
    # copy=False: the columns are fresh arrays; pandas keeps them as they are instead of
    # copying them into consolidated blocks.
    return pd.DataFrame(cols, index=pd.RangeIndex(kept), copy=False)


def _fill(values: _Values, invalid: np.ndarray, default: object) -> _Values:
    if isinstance(values, np.ndarray):
        return np.where(invalid, default, values)  # type: ignore[call-overload]
    return pc.if_else(pa.array(invalid), pa.scalar(default, type=values.type), values)


def _finish(cells: _Cells, keep: np.ndarray | None, t: object) -> object:
    """The kept rows of a column, as the type the interpreter works with."""
    if cells.codes is None:
        values = cells.values if keep is None else cells.values[keep]
        if isinstance(values, np.ndarray) and not values.flags.writeable:
            values = values.copy()  # a view of Arrow's memory: the table gets arrays of its own
        return _as_final(values, t)
    codes = cells.codes if keep is None else cells.codes[keep]
    if isinstance(t, Str):
        text = pa.concat_arrays([cells.values, pa.array([cells.at_null], type=cells.values.type)])
        at = np.where(codes < 0, np.int32(len(text) - 1), codes) if cells.has_null else codes
        # 32-bit indices: Arrow's take of text is several times faster with them than with 64.
        return pc.take(text, pa.array(at)).to_pandas().astype("str")
    table = np.append(cells.values, np.asarray([cells.at_null], dtype=cells.values.dtype))
    if isinstance(t, Cat):  # the codes' integer type chosen by pandas for these categories
        small = pd.Categorical.from_codes(table.astype(np.int64), categories=pd.Index(list(t.values)))
        return pd.Categorical.from_codes(small.codes.take(codes), dtype=small.dtype, validate=False)
    if isinstance(t, Num) and t.integer:
        # Invalid values (NaN, an unbounded infinity) are never gathered: any placeholder does.
        table = np.where(np.isfinite(table), table, 0)
    return _as_final(table, t).take(codes)


def _as_final(values: _Values, t: object) -> object:
    if isinstance(t, Str):
        assert isinstance(values, (pa.Array, pa.ChunkedArray))
        return values.to_pandas().astype("str")
    assert isinstance(values, np.ndarray)
    if isinstance(t, Num):
        return values.astype(np.int64 if t.integer else np.float64, copy=False)
    if isinstance(t, Bool):
        return values.astype(bool, copy=False)
    assert isinstance(t, Cat)
    return pd.Categorical.from_codes(values.astype(np.int64), categories=pd.Index(list(t.values)))


def _np(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(col, pa.Array):
        return np.asarray(col.to_numpy(zero_copy_only=False))
    if col.num_chunks > 1 and col.null_count == 0 and _is_plain_number(col.type):
        # One pass into an array of numpy's own (Arrow concatenates into its own, which the
        # table then copies).
        return np.concatenate([c.to_numpy(zero_copy_only=False) for c in col.chunks])
    return np.asarray(col.to_numpy())


def _is_plain_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _value_set(words: Iterable[str], like: pa.Array) -> pa.Array:
    return pa.array(sorted(words), type=like.type)


@dataclass(frozen=True)
class _Distinct:
    """A column as its distinct values and, per row, the index of its value (-1 for a null).

    Text rules (trimming, markers, parsing) run once per distinct value instead of once per
    cell: a column of a million cells usually holds a few hundred values.  Only values some
    row holds are ever judged, so an unused category of a pandas Categorical raises nothing."""

    values: pa.Array
    codes: np.ndarray
    has_null: bool

    def used(self) -> np.ndarray:
        seen = np.zeros(len(self.values) + 1, dtype=bool)
        seen[self.codes] = True  # a null's -1 marks the extra last entry
        return seen[:-1]

    def cells(self, values: _Values, invalid: np.ndarray | None, at_null: object) -> _Cells:
        """Per-value results, and `at_null` (always invalid) for null cells."""
        return _Cells(values, invalid, self.codes, at_null, True, self.has_null)


def _distinct_text(col: pa.ChunkedArray, plan: _Plan, table: str) -> _Distinct:
    """The column's distinct values as stripped text."""
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(_as_text(col, plan, table))
    coded = col.combine_chunks()  # one dictionary for all chunks
    values = _as_text(coded.dictionary, plan, table)
    has_null = coded.indices.null_count > 0
    indices = pc.fill_null(coded.indices, -1) if has_null else coded.indices
    # Kept 32-bit (Arrow's index type): half the bytes to filter, and no conversion pass.
    codes = _np(indices)
    if codes.dtype.itemsize < 4:  # a small Categorical's int8 codes: room for the null index
        codes = codes.astype(np.int32)
    return _Distinct(pc.utf8_trim_whitespace(pc.fill_null(values, "")), codes, has_null)


def _as_text(col: pa.ChunkedArray | pa.Array, plan: _Plan, table: str) -> pa.ChunkedArray | pa.Array:
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return col
    try:
        return pc.cast(col, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise _unparsable(plan, table, "text") from None


def _markers(text: pa.Array) -> np.ndarray:
    """Which stripped texts mean "missing"."""
    return _np(pc.is_in(pc.utf8_lower(text), value_set=_value_set(MISSING_MARKERS, text)))


def _unparsable(plan: _Plan, table: str, what: str) -> FuzzError:
    return error("E0504", f"column '{plan.column.name}' of table '{table}' has values that "
                          f"are not {what}", None, _FIX_NOTE)


def _is_number_type(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _parse_num(col: pa.ChunkedArray, plan: _Plan, table: str) -> _Cells:
    if _is_number_type(col.type):
        fast = _typed_in_range(col, plan)
        if fast is not None:
            return fast
        x = _np(pc.fill_null(pc.cast(col, pa.float64(), safe=False), math.nan))
        return _Cells(*_bounded(x, np.isnan(x), plan, table, None))
    d = _distinct_text(col, plan, table)
    used = d.used()
    missing = _markers(d.values)
    x = np.full(len(d.values), math.nan)
    parse = used & ~missing
    try:
        parsed = _np(pc.cast(pc.filter(d.values, pa.array(parse)), pa.float64()))
    except pa.ArrowInvalid:
        raise _unparsable(plan, table, "numbers") from None
    if np.isnan(parsed).any():  # e.g. "-nan": not a marker, not a number
        raise _unparsable(plan, table, "numbers")
    x[parse] = parsed
    x, missing = _bounded(x, missing, plan, table, used)
    return d.cells(x, missing, math.nan)


def _typed_in_range(col: pa.ChunkedArray, plan: _Plan) -> _Cells | None:
    """A typed column's values when they need none of `_bounded`'s per-cell checks, else None.

    Decided from the column's minimum and maximum: an integer column whose clamped values lie
    within 2^53 (so the float route of `_bounded` is exact and raises nothing), or a float
    column without NaN or infinities for a non-integer type.  The values are then those of
    `_bounded` (same clamping), computed in one pass, or none when nothing needs clamping."""
    t = plan.column.type
    assert isinstance(t, Num)
    if len(col) == 0 or col.null_count == len(col):
        return None
    if pa.types.is_integer(col.type):
        low, high = (pc.min_max(col)[k].as_py() for k in ("min", "max"))
        if t.integer:
            return _ints_in_range(col, low, high, plan)
        x = _np(pc.fill_null(col, 0) if col.null_count else col).astype(np.float64)  # rounds like Arrow's cast
        invalid = _np(col.is_null()) if col.null_count else None
        return _Cells(_clamped(x, float(low), float(high), plan.lo, plan.hi), invalid)
    if pa.types.is_floating(col.type) and col.null_count == 0:
        x = _np(col).astype(np.float64, copy=False)
        low, high = float(x.min()), float(x.max())
        if not (math.isfinite(low) and math.isfinite(high)):  # a NaN or an infinity
            return None
        if t.integer:
            return _integral_floats(x, low, high, plan)
        return _Cells(_clamped(x, low, high, plan.lo, plan.hi), None)
    return None


def _integral_floats(x: np.ndarray, low: float, high: float, plan: _Plan) -> _Cells | None:
    """Finite floats for an integer type, when `_bounded` would accept every one of them."""
    if not np.array_equal(np.floor(x), x):
        return None  # not integers: `_bounded` refuses the column
    lo, hi = -math.inf if plan.lo is None else plan.lo, math.inf if plan.hi is None else plan.hi
    if abs(min(max(low, lo), hi)) > MAX_EXACT_INT or abs(min(max(high, lo), hi)) > MAX_EXACT_INT:
        return None  # clamped values beyond 2^53: `_bounded` refuses the column
    return _Cells(_clamped(x, low, high, plan.lo, plan.hi).astype(np.int64), None)


def _ints_in_range(col: pa.ChunkedArray, low: int, high: int, plan: _Plan) -> _Cells | None:
    bounds = [plan.lo, plan.hi]
    if high > np.iinfo(np.int64).max or any(b is not None and not abs(b) <= MAX_EXACT_INT for b in bounds):
        return None  # an unsigned value int64 cannot hold, or bounds the float route rounds
    lo, hi = (None if b is None else int(b) for b in bounds)  # integers (float_bounds)
    clamped_low = min(max(low, lo), hi) if lo is not None and hi is not None else \
        max(low, lo) if lo is not None else min(low, hi) if hi is not None else low
    clamped_high = min(max(high, lo), hi) if lo is not None and hi is not None else \
        max(high, lo) if lo is not None else min(high, hi) if hi is not None else high
    if not (-MAX_EXACT_INT <= clamped_low and clamped_high <= MAX_EXACT_INT):
        return None  # the float route rounds or refuses these: left to `_bounded`
    v = _np(pc.fill_null(col, 0) if col.null_count else col).astype(np.int64, copy=False)
    if (lo is not None and low < lo) or (hi is not None and high > hi):
        v = np.clip(v, lo, hi)
    return _Cells(v, _np(col.is_null()) if col.null_count else None)


def _clamped(x: np.ndarray, low: float, high: float, lo: float | None,
             hi: float | None) -> np.ndarray:
    """x clamped into [lo, hi] (None: unbounded), given its finite minimum and maximum.

    Skipped only when it cannot change a bit: no value beyond a bound, and no zero at a bound
    of zero (whether clipping -0.0 to a bound of 0.0 gives -0.0 or 0.0 depends on the numpy
    version; calling it as `_bounded` does gives whatever `_bounded` gives)."""
    if (lo is not None and (low < lo or (lo == 0 and low <= 0))) or \
            (hi is not None and (high > hi or (hi == 0 and high >= 0))):
        return np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    return x


def _bounded(x: np.ndarray, missing: np.ndarray, plan: _Plan, table: str,
             used: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Numbers clamped into the column's bounds; `used` (None: all) limits what is judged."""
    t = plan.column.type
    assert isinstance(t, Num)
    # An infinity with no bound on its side has no value to be clamped to: treat it as missing.
    missing = missing | (np.isposinf(x) & (plan.hi is None)) | (np.isneginf(x) & (plan.lo is None))
    judged = np.isfinite(x) if used is None else np.isfinite(x) & used
    if t.integer and (x[judged] != np.floor(x[judged])).any():
        raise _unparsable(plan, table, "integers")
    x = np.clip(x, -np.inf if plan.lo is None else plan.lo, np.inf if plan.hi is None else plan.hi)
    present = ~missing if used is None else ~missing & used
    if t.integer and (np.abs(x[present]) > MAX_EXACT_INT).any():
        raise _unparsable(plan, table, "integers between -2^53 and 2^53")
    return x, missing


def _parse_bool(col: pa.ChunkedArray, plan: _Plan, table: str) -> _Cells:
    if pa.types.is_boolean(col.type):
        return _Cells(_np(pc.fill_null(col, False)).astype(bool),
                      _np(col.is_null()) if col.null_count else None)
    d = _distinct_text(col, plan, table)
    low = pc.utf8_lower(d.values)
    is_true = _np(pc.is_in(low, value_set=_value_set(TRUE_WORDS, low)))
    is_false = _np(pc.is_in(low, value_set=_value_set(FALSE_WORDS, low)))
    missing = _markers(d.values)
    if (~(is_true | is_false | missing) & d.used()).any():
        raise _unparsable(plan, table, "booleans (true/false, 1/0, yes/no)")
    return d.cells(is_true, missing, False)


# rule Columns kept: an unread column still applies its missing-value policy
def _unread_invalid(raw: _Raw, plan: _Plan, table: str) -> np.ndarray | None:
    """Per row, whether a column the program never reads has an invalid cell (None: none has),
    raising any error it would raise when read.  A Parquet column is judged one row group at a
    time (the rules are per cell), so that a run never holds the whole of it."""
    groups = getattr(raw, "row_groups", None)
    if groups is None:
        invalid = _parse_unread(raw[plan.column.name], plan, table).row_invalid()
        return None if invalid is None else invalid.copy()
    masks, found = [], False
    for col in groups(plan.column.name):
        invalid = _parse_unread(col, plan, table).row_invalid()
        found = found or invalid is not None
        masks.append(np.zeros(len(col), dtype=bool) if invalid is None else invalid)
    return np.concatenate(masks) if found else None


# rule Columns kept: an unread column is judged by the rules it would be read by
def _parse_unread(col: pa.ChunkedArray, plan: _Plan, table: str) -> _Cells:
    """A column the program never reads: only which cells are invalid matters (its `drop`
    policy), and any error it raises.  Plain text (not dictionary-encoded) is judged cell by
    cell with the same rules as `_parse_str`: encoding a million distinct strings (free text)
    costs several times the rules themselves.  Other columns are parsed as when read."""
    if isinstance(plan.column.type, Str) and not pa.types.is_dictionary(col.type):
        text = _as_text(col, plan, table)
        return _Cells(text, _markers(pc.utf8_trim_whitespace(pc.fill_null(text, ""))))
    return _parser(plan.column.type)(col, plan, table)


def _parse_str(col: pa.ChunkedArray, plan: _Plan, table: str) -> _Cells:
    d = _distinct_text(col, plan, table)
    return d.cells(d.values, _markers(d.values), "")  # a null cell reads as "", a marker


def _parse_cat(col: pa.ChunkedArray, plan: _Plan, table: str) -> _Cells:
    """Category codes; a declared value wins over a missing marker ("NA" may be a real key)."""
    t = plan.column.type
    assert isinstance(t, Cat)
    d = _distinct_text(col, plan, table)
    found = pc.index_in(d.values, value_set=pa.array(list(t.values), type=d.values.type))
    codes = _np(pc.fill_null(found, -1)).astype(np.int64)
    return d.cells(codes, codes < 0, -1)


_Parser = Callable[[pa.ChunkedArray, _Plan, str], _Cells]


def _parser(t: object) -> _Parser:
    parsers: tuple[tuple[type, _Parser], ...] = (
        (Num, _parse_num), (Bool, _parse_bool), (Str, _parse_str), (Cat, _parse_cat))
    for cls, parse in parsers:
        if isinstance(t, cls):
            return parse
    raise AssertionError("column types are checked by _plan_column")  # pragma: no cover
