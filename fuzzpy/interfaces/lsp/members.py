"""Fields of a value, for the editor: completion after `r.` and hover on `r.age`.

The type of the value before the dot is the one the checker gave the variable (its binding,
recorded through `Checker.on_bind`).  While the declaration around the cursor does not parse
(`r.` alone is never a complete expression), the types its variables had in the last version
of that declaration that was checked are used (`known_types`, kept per document by the server);
failing that, a parameter declared `(r : Adult)` in the text, and for a variable bound by
`fun r ->` the columns of the only schema in scope.  A field that is a schema's column shows the
column's type (its domain: bounds or categories) and its policy for missing and invalid values.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from fractions import Fraction
from typing import Any, Iterable, Optional

from ...render.numbers import show as fmt_coef
from ...syntax import ast as A
from ...typesystem.types import Record, Schema, Tensor, Type, With
from .analysis import Analysis
from .navigation import _DECL_NAME, _contains, _local_at

_ID = r"[A-Za-z_][A-Za-z0-9_]*"
# `base.f1.f2.partial` ending at the cursor (fields are names or tuple positions)
_CHAIN_OPEN = re.compile(rf"({_ID})((?:\s*\.\s*(?:{_ID}|[0-9]+))*)\s*\.\s*({_ID}|[0-9]*)$")
_PATH_ITEM = re.compile(rf"{_ID}|[0-9]+")

Known = dict[str, dict[str, list[Type]]]  # function name -> variable name -> types it had


# ---- the type of the value before the dot --------------------------------------------------------


def known_types(analysis: Analysis) -> Known:
    """For each function of the document that was checked: its variables' types (all instances).
    Each binding finds its function by bisection: this runs after every check."""
    decls = sorted((d for d in analysis.own_decls if isinstance(d, A.FunDecl) and d.span is not None),
                   key=lambda d: (d.span.line, d.span.col))
    starts = [(d.span.line, d.span.col) for d in decls]
    out: Known = {}
    for b in analysis.bindings:
        if b.value_type is None or b.span.file != analysis.file:
            continue
        i = bisect_right(starts, (b.span.line, b.span.col)) - 1
        if i < 0 or not _contains(decls[i].span, b.span.line, b.span.col):
            continue
        found = out.setdefault(decls[i].name, {}).setdefault(b.name, [])
        if b.value_type not in found:
            found.append(b.value_type)
    return out


def merge_known(old: Known, new: Known) -> Known:
    """The newest types of each function's variables; functions that did not parse keep theirs."""
    out = {fn: dict(names) for fn, names in old.items()}
    for fn, names in new.items():
        out.setdefault(fn, {}).update(names)
    return out


def receiver_types(analysis: Optional[Analysis], known: Known, lines: list[str], line: int, col: int,
                   base: str) -> list[Type]:
    """The types of variable `base` at 1-based (line, col) of the current text `lines`."""
    if analysis is not None:
        hit = _local_at(analysis, line, col, base)
        if hit is not None and hit.binder is not None:
            found = _unique(b.value_type for b in analysis.bindings
                            if b.span == hit.binder and b.value_type is not None)
            if found:
                return found
    header, body = _declaration_before(lines, line, col)
    if header is not None and known.get(header, {}).get(base):
        return list(known[header][base])
    schemas = analysis.report.schemas if analysis is not None else {}
    declared = re.search(rf"\(\s*{re.escape(base)}\s*:\s*({_ID})\s*\)", body)
    if declared and declared.group(1) in schemas:
        return [schemas[declared.group(1)].row_type]
    if re.search(rf"\bfun\b[^-]*\b{re.escape(base)}\b[^-]*->", body) and len(schemas) == 1:
        return [next(iter(schemas.values())).row_type]
    return []


def _declaration_before(lines: list[str], line: int, col: int) -> tuple[Optional[str], str]:
    """The name of the function declared above the cursor, and the text from there to the cursor."""
    upto = lines[: line - 1] + [lines[line - 1][: col - 1] if line - 1 < len(lines) else ""]
    for i in range(len(upto) - 1, -1, -1):
        m = _DECL_NAME.match(upto[i])
        if m:
            return m.group(1), "\n".join(upto[i:])
    return None, "\n".join(upto)


def _unique(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


# ---- fields of a type ----------------------------------------------------------------------------


def fields_of(t: Type) -> list[tuple[str, Type]]:
    """The members that may follow a dot: a record's fields, a tuple's positions."""
    if isinstance(t, Record):
        return list(t.fields)
    if isinstance(t, (Tensor, With)):
        return [(str(i), item) for i, item in enumerate(t.items, start=1)]  # projections are 1-based
    return []


def member(t: Type, name: str) -> Optional[Type]:
    return next((ft for n, ft in fields_of(t) if n == name), None)


def walk(types: list[Type], path: list[str]) -> list[tuple[Type, Optional[Record]]]:
    """Follow `path` from each type: the reached types, with the record holding the last field."""
    out = []
    for t in types:
        holder: Optional[Record] = None
        cur: Optional[Type] = t
        for name in path:
            holder = cur if isinstance(cur, Record) else None
            cur = member(cur, name) if cur is not None else None
        if cur is not None:
            out.append((cur, holder))
    return out


def column_of(schemas: dict[str, Schema], record: Optional[Record], name: str) -> Any:
    """The schema column behind field `name` of `record` (rows keep their schema's name)."""
    if record is None or not record.name or record.name not in schemas:
        return None
    return schemas[record.name].column(name)


def column_policy(column: Any) -> str:
    """`values outside [17, 90] are clamped to the bounds; a missing or invalid value drops the row`."""
    parts = []
    lo, hi = getattr(column.type, "lo", None), getattr(column.type, "hi", None)
    if lo is not None or hi is not None:
        shown = f"[{'-inf' if lo is None else fmt_coef(lo)}, {'inf' if hi is None else fmt_coef(hi)}]"
        parts.append(f"values outside {shown} are clamped to the bounds")
    if column.on_invalid == "default":
        parts.append(f"a missing or invalid value becomes {_literal(column.default)}")
    else:
        parts.append("a missing or invalid value drops the row")
    return "; ".join(parts)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (int, Fraction)):
        return fmt_coef(Fraction(value))
    return str(value)


def field_detail(t: Type, column: Any) -> str:
    """Completion detail: `num[17, 90], drop` (a column: its type and policy) or the field's type."""
    if column is None:
        return str(t)
    policy = "drop" if column.on_invalid != "default" else f"default {_literal(column.default)}"
    return f"{t}, {policy}"


# ---- completion and hover ------------------------------------------------------------------------


def open_chain(prefix: str) -> Optional[tuple[str, list[str], str, int]]:
    """For the text before the cursor ending in `r.a.` or `r.a.pa`: ("r", ["a"], "pa", where `r`
    starts, 0-based)."""
    m = _CHAIN_OPEN.search(prefix)
    if m is None or (m.start() > 0 and prefix[m.start() - 1] in "'."):
        return None
    return m.group(1), _PATH_ITEM.findall(m.group(2)), m.group(3), m.start()


def member_items(types: list[Type], path: list[str], schemas: dict[str, Schema]) -> list[tuple[str, str, str]]:
    """(label, detail, documentation) of the members after `base.path.`; fields are listed in
    declaration order, each once (the first instance's type wins)."""
    out: dict[str, tuple[str, str, str]] = {}
    for t, _ in walk(types, path):
        for name, ft in fields_of(t):
            if name in out:
                continue
            column = column_of(schemas, t if isinstance(t, Record) else None, name)
            doc = _column_doc(name, t, column) if column is not None else ""
            out[name] = (name, field_detail(ft, column), doc)
    return list(out.values())


def _column_doc(name: str, record: Record, column: Any) -> str:
    return f"Column `{name}` of schema `{record.name}`: {column_policy(column)}."


def hover_field(analysis: Analysis, known: Known, lines: list[str], line: int, end0: int) -> Optional[str]:
    """Hover text for the field name ending at 0-based column `end0` of `line` (`r.age`)."""
    text = lines[line - 1][:end0]
    m = re.search(rf"({_ID})((?:\s*\.\s*(?:{_ID}|[0-9]+))+)$", text)
    if m is None or (m.start() > 0 and text[m.start() - 1] in "'."):
        return None
    base, path = m.group(1), _PATH_ITEM.findall(m.group(2))
    types = receiver_types(analysis, known, lines, line, m.start() + 1, base)
    shown = []
    for t, holder in walk(types, path):
        column = column_of(analysis.report.schemas, holder, path[-1])
        entry = f"```fuzzpy\n{path[-1]} : {t}\n```"
        if column is not None:
            entry += "\n\n" + _column_doc(path[-1], holder, column)  # type: ignore[arg-type]
        if entry not in shown:
            shown.append(entry)
    return "\n\n".join(shown[:5]) or None
