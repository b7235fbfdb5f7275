"""Released values named after the user's code (docs/runtime.md, "Reading the results").

A release made inside a standard library function is named by what the user wrote: the
`sample` variable of the user's program it was bound to, else the user's call that led to it;
its location is that call, relative to the program.  Several releases of one call with the same
name (the rounds of top_k) are numbered."""

from __future__ import annotations

from collections import Counter
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
    return "".join(f"[{k}]" for k in r.keys)


def _role(r: Any) -> str:
    role = getattr(r, "role", None)
    return "" if not role else f".({role.replace(' and ', ', ')})" if " and " in role else f".{role}"


def labels(releases: list, program: str, sources: dict[str, str]) -> list[str]:
    """Each release's label with its part in an estimate (`.sum`, `.count`) and its partition
    keys; repeats numbered #1, #2, ... in order."""
    return _numbered([base_label(r, program, sources) + _role(r) + _keys(r) for r in releases])


def estimate_labels(estimates: list, program: str, sources: dict[str, str]) -> list[str]:
    """An estimate is named after the release(s) it is computed from (`means[Female]` for the
    releases `means.sum[Female]` and `means.count[Female]`, `b.bound` for the answers `b.answers`)."""
    return _numbered([base_label(e.sources[0], program, sources) + e.suffix + _keys(e.sources[0])
                      for e in estimates])


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
