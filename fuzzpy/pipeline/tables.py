"""Which entry parameter reads which table: the entry point's private tables and their
schemas, and the data a user named for each (`--data PATH`, `--data NAME=PATH`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..diagnostics import Diagnostic, FuzzError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def usage_error(message: str) -> FuzzError:
    return FuzzError(Diagnostic("E0701", message))


def table_inputs(report: Any) -> list[tuple[str, Any]]:
    """(parameter, schema) for each entry parameter; every one must be `bag Schema`."""
    out = []
    for inp in report.inputs:
        schema = report.table_schema(inp)
        if schema is None:
            raise usage_error(f"entry parameter '{inp.name}' has type {inp.type}; fuzzpy run can only bind "
                               "parameters of type bag Schema to data files")
        out.append((inp.name, schema))
    return out


def match_data(items: list[str], inputs: list[tuple[str, Any]]) -> dict[str, Path]:
    """--data PATH (one table) or --data NAME=PATH (by entry parameter name)."""
    names = [n for n, _ in inputs]
    named: dict[str, Path] = {}
    plain: list[Path] = []
    for item in items:
        name, sep, rest = item.partition("=")
        if sep and _NAME.fullmatch(name) and not Path(item).exists():
            if name in named:
                raise usage_error(f"--data {name}=... is given twice")
            named[name] = Path(rest)
        else:
            plain.append(Path(item))
    if plain:
        if len(plain) > 1 or named or len(names) != 1:
            raise usage_error("give one --data PATH for a program with one table, or --data NAME=PATH for each "
                               f"of its tables ({', '.join(names) or 'none'})")
        named[names[0]] = plain[0]
    known = ", ".join(names) or "(none)"
    diags = [Diagnostic("E0507", f"data given for unknown table '{n}'; the entry point's tables: {known}")
             for n in named if n not in names]
    diags += [Diagnostic("E0506", f"no data file given for table '{n}'", None,
                         [f"pass --data {n}=PATH" if len(names) > 1 else "pass --data PATH"])
              for n in names if n not in named]
    if diags:
        raise FuzzError(diags)
    return {n: named[n] for n in names}
