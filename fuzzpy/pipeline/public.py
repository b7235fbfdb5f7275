"""Public tables in the run pipeline: which data each public table of the entry point reads, and
loading it against its public schema, before anything is charged (docs/data.md, "Public tables").

A public table is inspected, never charged: its rows are not private.  The checker trusted what
its schema declares (at most so many rows share a value of a key column); loading verifies it on
the rows the run will use, and refuses the run (E2303, nothing charged) when the data does not
hold it.  So the bound the checker proved with is a fact about the table the run joins with
(rule Public tables, docs/soundness.md).  Every interface goes through here: files on the
command line and on the Dask engine, DataFrames in the Python API, the curator's registered
public tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from ..diagnostics import Diagnostic, FuzzError
from .tables import _NAME, usage_error

NOTHING_CHARGED = "nothing was read from the private tables and nothing was charged"


def public_inputs(report: Any) -> dict[str, Any]:
    """The entry point's public tables: parameter name -> its public schema."""
    return dict(getattr(report, "public_tables", None) or {})


def parse_public(items: list[str]) -> dict[str, Path]:
    """`--public NAME=PATH` (repeatable), by entry parameter name."""
    out: dict[str, Path] = {}
    for item in items:
        name, sep, rest = item.partition("=")
        if not sep or not _NAME.fullmatch(name) or not rest:
            raise usage_error(f"--public takes NAME=PATH (the entry parameter of a public table), got '{item}'")
        if name in out:
            raise usage_error(f"--public {name}=... is given twice")
        out[name] = Path(rest)
    return out


def match_public(given: Mapping[str, Any], report: Any, how: str = "--public {name}=PATH") -> dict[str, Any]:
    """The data given for each public table of the entry point: every one given, none unknown."""
    names = public_inputs(report)
    known = ", ".join(names) or "(none)"
    diags = [Diagnostic("E0507", f"public data given for '{n}', which is not a public table of the entry point; its "
                                 f"public tables: {known}") for n in given if n not in names]
    diags += [Diagnostic("E0506", f"no data given for the public table '{n}'", None,
                         [f"pass {how.format(name=n)}"]) for n in names if n not in given]
    if diags:
        raise FuzzError(diags)
    return {n: given[n] for n in names}


# rule Public tables: every interface loads its public tables here, before the charge
def load_public(report: Any, spec: Mapping[str, Any], keep: Optional[frozenset], header: bool = False,
                read: Optional[Callable[..., Any]] = None) -> dict[str, Any]:
    """Each public table (a path, or a DataFrame) conformed to its public schema and verified
    against what the schema declares.  `keep`: the columns the program reads (runtime/columns.py);
    a declared key column is always kept, so that it is verified."""
    from ..runtime.data import load_frame, load_table

    out = {}
    for name, schema in public_inputs(report).items():
        source = spec[name]
        kept = None if keep is None else frozenset(keep) | {c for c, _ in schema.per_key}
        try:
            if read is not None:
                frame = read(name, source, schema, kept)
            elif isinstance(source, (str, Path)):
                frame = load_table(source, schema, table=name, header=header, keep=kept)
            else:
                frame = load_frame(source, schema, table=name, keep=kept)
        except FuzzError:
            raise
        except Exception:  # noqa: BLE001 - a loader bug: its text could quote the file
            raise FuzzError(Diagnostic("E0502", f"the data for public table '{name}' could not be loaded (internal "
                                                f"error); {NOTHING_CHARGED}")) from None
        verify_keys(frame, schema, name)
        out[name] = frame
    return out


# rule Public tables: what the schema declares holds of the rows the run uses, or nothing is charged
def verify_keys(frame: Any, schema: Any, table: str) -> None:
    """Refuse (E2303) a public table in which more rows share a value of a key column than its
    schema declares.  The message names the table, the schema and the column, never a value."""
    diags = []
    for column, most in schema.per_key:
        counts = frame[column].value_counts(dropna=True)
        if len(counts) and int(counts.max()) > most:
            declared = "unique" if most == 1 else f"at most {most} per value"
            rows = "row" if most == 1 else "rows"
            diags.append(Diagnostic("E2303", f"public table '{table}' has more than {most} {rows} with the same "
                                             f"value of column '{column}', which its schema {schema.name} declares "
                                             f"{declared}", None,
                                    ["the checker's bound relies on it; fix the data or the schema; "
                                     + NOTHING_CHARGED]))
    if diags:
        raise FuzzError(diags)
