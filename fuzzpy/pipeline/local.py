"""Runs on the user's own data: tables from files or DataFrames, charged on the local ledger.

A local dataset's identity is the hash of exactly the bytes that were parsed (files) or of the
whole DataFrame, so two programs reading different columns of one file charge the same dataset
and an edited row is another dataset (docs/ledger.md).  Output names a dataset by its files,
never by its hash: a hash of private rows is not shown to whoever reads a run's output.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import Diagnostic, FuzzError
from .charge import charge
from .public import load_public, match_public, parse_public
from .session import Charge, Loaded
from .tables import match_data, table_inputs


# Empty tables (docs/data.md): the holder of the data is told, before the charge, that a table is empty
def refuse_empty(loaded: Loaded, report: Any, advice: "EmptyAdvice", empty: Optional[list[str]] = None) -> None:
    """E0509 for each table that loading left without a row (an empty file, or every row dropped
    by a column's policy; `empty` names them, default: the tables of length 0), unless
    `advice.allowed`.  Only for runs on the holder's own data (files, DataFrames): the refusal
    depends on the data, so it is shown to no one else (docs/data.md, "Empty tables"); it says
    neither how many rows were read nor which column dropped them."""
    if advice.allowed:
        return
    schemas = dict(table_inputs(report))  # the private tables (a public one is not the holder's secret)
    if empty is None:
        empty = [name for name, table in loaded.tables.items() if name in schemas and len(table) == 0]
    diags = [_empty_table(name, loaded.shown.get(name, name), schemas[name].name, report.file, advice)
             for name in empty if name in schemas]
    if diags:
        raise FuzzError(diags)


def _empty_table(name: str, source: str, schema: str, program: str, advice: "EmptyAdvice") -> Diagnostic:
    return Diagnostic(
        "E0509", f"table '{name}' is empty after loading {advice.source.format(source=source)} against schema "
                 f"{schema}: it has no rows, or a column's policy dropped every row (missing or undeclared values)",
        None, [advice.inspect.format(source=source, program=program),
               "nothing was charged or released (a run would release noise alone); " + advice.run_anyway,
               "this refusal is for the data's holder: it depends on the data (docs/data.md, \"Empty tables\")"])


@dataclass(frozen=True)
class EmptyAdvice:
    """How an interface tells the data's holder to inspect an empty table, or to run on it anyway."""

    allowed: bool = False
    source: str = "{source}"
    inspect: str = ("see which column drops the rows (counts for the data's holder only): "
                    "fuzzpy data check --data {source} {program}")
    run_anyway: str = "to run on an empty table anyway, pass --allow-empty"


FRAME_ADVICE = EmptyAdvice(
    source="the DataFrame for {source}",
    inspect="compare the DataFrame's values with the schema's categories (a label spelled differently, such as "
            "'<=50K.' for '<=50K', drops every row); fuzzpy.runtime.data.inspect_table(frame, schema) counts the "
            "rows each column drops",
    run_anyway="to run on an empty table anyway, pass allow_empty=True")


@dataclass
class FileTables:
    """`--data PATH` or `--data NAME=PATH`: CSV or Parquet files loaded with pandas; `--public
    NAME=PATH` for each public table (pipeline/public.py)."""

    data: list[str]
    header: bool = False  # text files start with a header naming every declared column
    public: list[str] = field(default_factory=list)
    empty: EmptyAdvice = EmptyAdvice()  # a table left without rows is refused unless allowed

    def match(self, report: Any) -> dict[str, Path]:
        spec = match_data(self.data, table_inputs(report))
        return {**spec, **match_public(parse_public(self.public), report)}

    # rule Known digests: the user's own run on files is the only one that may take a recorded identity
    def load(self, report: Any, spec: dict[str, Path], seeded: bool) -> Loaded:
        from ..runtime.columns import columns_read
        from ..runtime.data import load_identified

        schemas = dict(table_inputs(report))
        keep = columns_read(report.entry_instance)  # rule Columns kept: only what the program can read
        # Public tables first: what their schemas declare is verified before a private row is read.
        loaded = Loaded(load_public(report, spec, keep, self.header), {})
        for name, path in spec.items():
            if name not in schemas:
                continue  # a public table, loaded above
            try:
                loaded.tables[name], identity = load_identified(path, schemas[name], table=name, header=self.header,
                                                                keep=keep, known_digests=True)
            except FuzzError:
                raise
            except Exception:  # noqa: BLE001 - a loader bug: its text could quote the file
                raise FuzzError(Diagnostic("E0502", f"data file '{path}' for table '{name}' could not be loaded "
                                                    "(internal error); nothing was charged")) from None
            loaded.shown[name] = str(path)
            if not seeded:
                loaded.accounts[name] = identity
        refuse_empty(loaded, report, self.empty)
        return loaded

    def close(self) -> None:
        pass


@dataclass
class FrameTables:
    """The Python API's data: a DataFrame (a program with one table) or a mapping from the entry
    point's table parameters to DataFrames; `public`, a mapping from its public tables to
    DataFrames.  Refusals name tables and types, never a value."""

    data: Any
    public: Any = None
    empty: EmptyAdvice = FRAME_ADVICE  # a table left without rows is refused unless allowed

    def _public_frames(self, report: Any) -> dict[str, Any]:
        import pandas as pd

        given = dict(self.public or {})
        frames = match_public(given, report, "public={{'{name}': df}}")
        bad = [Diagnostic("E0502", f"the data for public table '{n}' is a {type(f).__name__}, not a pandas DataFrame")
               for n, f in frames.items() if not isinstance(f, pd.DataFrame)]
        if bad:
            raise FuzzError(bad)
        return frames

    def match(self, report: Any) -> dict[str, Any]:
        import pandas as pd

        self._public_frames(report)  # refused at the arguments stage, like the private tables
        inputs = [name for name, _ in table_inputs(report)]
        frames = self._frames(inputs, pd)
        diags = [Diagnostic("E0507", f"data given for unknown table '{n}'; the entry point's tables: "
                                     f"{', '.join(inputs)}") for n in frames if n not in inputs]
        diags += [Diagnostic("E0506", f"no DataFrame given for table '{n}'", None, [f"pass data={{'{n}': df}}"])
                  for n in inputs if n not in frames]
        diags += [Diagnostic("E0502", f"the data for table '{n}' is a {type(f).__name__}, not a pandas DataFrame")
                  for n, f in frames.items() if n in inputs and not isinstance(f, pd.DataFrame)]
        if diags:
            raise FuzzError(diags)
        return frames

    def _frames(self, inputs: list[str], pd: Any) -> dict[str, Any]:
        from collections.abc import Mapping

        data = self.data
        if isinstance(data, pd.DataFrame):
            if len(inputs) == 1:
                return {inputs[0]: data}
            raise FuzzError(Diagnostic("E0506", f"the entry point has {len(inputs)} tables; pass a mapping from "
                                                f"their names ({', '.join(inputs) or 'none'}) to DataFrames"))
        if not isinstance(data, Mapping):
            raise FuzzError(Diagnostic("E0502", f"data must be a pandas DataFrame or a mapping from table names to "
                                                f"DataFrames, not a {type(data).__name__}"))
        if not all(isinstance(k, str) for k in data):
            raise FuzzError(Diagnostic("E0502", "the keys of data must be table names (strings)"))
        return dict(data)

    def load(self, report: Any, spec: dict[str, Any], seeded: bool) -> Loaded:
        from ..runtime.columns import columns_read
        from ..runtime.data import load_frame

        keep = columns_read(report.entry_instance)  # rule Columns kept
        loaded = Loaded(load_public(report, self._public_frames(report), keep), {})
        for name, schema in table_inputs(report):
            loaded.tables[name] = load_frame(spec[name], schema, table=name, keep=keep)
            loaded.accounts[name] = frame_identity(spec[name])
            loaded.shown[name] = name
        refuse_empty(loaded, report, self.empty)
        return loaded

    def close(self) -> None:
        pass


def frame_identity(frame: Any) -> str:
    """"sha256:..." of the whole DataFrame (every column, as the command line hashes the whole
    file): two programs reading different columns of one DataFrame charge the same dataset; an
    edited row is another dataset."""
    import pandas as pd

    digest = hashlib.sha256("\0".join(map(str, frame.columns)).encode("utf-8"))
    hashed = pd.util.hash_pandas_object(frame.astype("string"), index=False)
    digest.update(hashed.to_numpy().tobytes())
    return "sha256:" + digest.hexdigest()


@dataclass
class LocalLedger:
    """The local SQLite ledger as a run's `Charger`: each distinct dataset is one account."""

    path: Path
    book: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        from ..ledger import open_ledger

        self.book = open_ledger(self.path)

    @property
    def where(self) -> str:
        return str(self.path)

    def charge(self, report: Any, loaded: Loaded, label: str, params: dict[str, str]) -> list[Charge]:
        """Book the run; a dataset without a cap gets its default one (docs/ledger.md, "The
        default cap"), and the ledger records the files each dataset was seen as."""
        from ..ledger.caps import default_cap

        datasets = list(dict.fromkeys(loaded.accounts.values()))
        shown = {d: tuple(loaded.shown[n] for n, dd in loaded.accounts.items() if dd == d) for d in datasets}
        ids = charge(self.book, datasets, report, params, label,
                     {d: "dataset " + ", ".join(files) for d, files in shown.items()},
                     default_cap=default_cap, seen_as=shown)
        return [Charge(d, i, shown[d]) for d, i in zip(datasets, ids)]

    def finish(self, charges: list[Charge], status: str) -> None:
        self.book.finish_many([c.id for c in charges], status)

    def usage(self, charge: Charge) -> Any:
        """The dataset's total spent and its cap, in the cap's notion (docs/ledger.md)."""
        return self.book.usage(charge.dataset)

    def close(self) -> None:
        self.book.close()


def ledger_path(path: Optional[Path]) -> Path:
    """The ledger a local run charges: the one given, else the default (docs/ledger.md)."""
    from ..ledger import default_ledger_path

    return Path(path).expanduser() if path is not None else default_ledger_path()
