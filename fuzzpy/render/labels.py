"""Released values named after the user's code (docs/runtime.md, "Reading the results").

A release made inside a standard library function is named by what the user wrote: the
`sample` variable of the user's program it was bound to, else the user's call that led to it;
its location is that call, relative to the program.  Several releases of one call with the same
name (the rounds of top_k) are numbered."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any, Optional

from .locations import relative_span


def _own(span: Any, program: str) -> bool:
    return span is not None and span.file == program


def base_label(r: Any, program: str, sources: dict[str, str]) -> str:
    from .released import source_text

    if r.user_name:
        return r.user_name
    if _own(r.span, program) or r.site is None:
        return r.name or source_text(r.span, sources)
    return source_text(r.site, sources)


def release_span(r: Any, program: str) -> Any:
    """Where to point for a release: the mechanism if it is the user's, else the user's call."""
    return r.span if _own(r.span, program) or r.site is None else r.site


def _keys(r: Any) -> str:
    return _keys_text(r.keys)


def _keys_text(keys: tuple) -> str:
    return "".join(f"[{key_text(k)}]" for k in keys)


def key_text(key: str) -> str:
    """A partition key as a person reads it: a bin as the interval it stands for (`[10, 20)` for
    the key "1" of `bin 10 r.age`), a crosstab's cell as its components (`Male, [10, 20)`)."""
    parts = getattr(key, "parts", None)
    if parts is None:
        return key
    return ", ".join(component_text(p, iv) for p, iv in zip(parts, key.intervals))


def component_text(part: str, interval: Any) -> str:
    if interval is None:
        return part
    low, high = interval
    return ("(-inf" if low is None else f"[{_edge(low)}") + ", " + ("inf)" if high is None else f"{_edge(high)})")


def _edge(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


def key_cells(keys: tuple) -> list[tuple[str, str]]:
    """(column, value) for each component of a release's keys, in order: the column is the field
    the key function read (`sex`, `age`), else `key`; a repeated name gets a number (`key 2`)."""
    cells: list[tuple[str, str]] = []
    for key in keys:
        parts = getattr(key, "parts", None)
        if parts is None:
            cells.append(("key", key))
            continue
        for part, column, interval in zip(parts, key.columns, key.intervals):
            cells.append((column or "key", component_text(part, interval)))
    seen: Counter = Counter()
    out = []
    for column, value in cells:
        seen[column] += 1
        out.append((column if seen[column] == 1 else f"{column} {seen[column]}", value))
    return out


def key_columns(rows: list[dict]) -> list[str]:
    """The key columns of a table of releases (each row's `dict(key_cells(keys))`): every column,
    in order of first use; `key` alone when no release has a key."""
    columns: dict[str, None] = {}
    for row in rows:
        for column in row:
            columns.setdefault(column)
    return list(columns) or ["key"]


def _role(r: Any) -> str:
    role = getattr(r, "role", None)
    return "" if not role else f".({role.replace(' and ', ', ')})" if " and " in role else f".{role}"


def labels(releases: list, program: str, sources: dict[str, str]) -> list[str]:
    """Each release's label with its part in an estimate (`.sum`, `.count`) and its partition
    keys; repeats numbered #1, #2, ... in order.  A library function's noisy count of rows among
    its other releases under one name (a regression's row count among its steps) is `.count`."""
    bases = [base_label(r, program, sources) for r in releases]
    mixed = {b for b, r in zip(bases, releases) if not _counts_rows(r, program)}
    inner = _inner_names(bases, releases, program)
    return _numbered([b + (".count" if b in mixed and _counts_rows(r, program)
                           else _role(r) or inner.get(id(r), "")) + _keys(r)
                      for b, r in zip(bases, releases)])


def _inner_names(bases: list[str], releases: list, program: str) -> dict[int, str]:
    """`.gradient`, `.loss`: a library function's own name for each of its releases, when the
    releases under one name of the user's program have several (a fit's steps and its loss)."""
    names: dict[str, set] = {}
    for b, r in zip(bases, releases):
        if _library_named(r, program):
            names.setdefault(b, set()).add(r.name)
    return {id(r): f".{r.name}" for b, r in zip(bases, releases)
            if _library_named(r, program) and len(names[b]) > 1}


def _library_named(r: Any, program: str) -> bool:
    """A release a library function named, bound to a name of the user's program."""
    return bool(r.user_name) and bool(r.name) and r.name != "_" and not getattr(r, "role", None) \
        and not _own(r.span, program)


def _counts_rows(r: Any, program: str) -> bool:
    """A library's release of a count of rows, bound to a name of the user's program."""
    extra = getattr(r, "extra", None) or {}
    return bool(extra.get("counts")) and not getattr(r, "role", None) and bool(r.user_name) \
        and not _own(r.span, program)


def estimate_labels(estimates: list, program: str, sources: dict[str, str]) -> list[str]:
    """An estimate is named after the release(s) it is computed from (`means[Female]` for the
    releases `means.sum[Female]` and `means.count[Female]`, `b.bound` for the answers `b.answers`)."""
    return _numbered([base_label(e.sources[0], program, sources) + e.suffix + _keys_text(estimate_keys(e))
                      for e in estimates])


def estimate_keys(e: Any) -> tuple:
    """An estimate's keys: its own (a CDF value's boundary), else those of its first source."""
    own = getattr(e, "keys", None)
    return e.sources[0].keys if own is None else own


def estimate_location(e: Any, program: str) -> Optional[str]:
    return location(e.sources[0], program)


def _numbered(raw: list[str]) -> list[str]:
    total, seen = Counter(raw), Counter()
    out = []
    for lab in raw:
        seen[lab] += 1
        out.append(f"{lab} #{seen[lab]}" if total[lab] > 1 else lab)
    return out


def readable_label(r: Any, report: Any, all_releases: Optional[list] = None) -> str:
    if all_releases is None:
        return labels([r], report.file, report.sources)[0]
    return labels(all_releases, report.file, report.sources)[all_releases.index(r)]


def location(r: Any, program: str) -> Optional[str]:
    span = release_span(r, program)
    return None if span is None else relative_span(span, program)
