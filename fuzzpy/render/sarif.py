"""SARIF 2.1.0 output for code review and CI (`fuzzpy check ... --format sarif`).

One run for all checked files.  Rules are the stable error codes of `fuzzpy.diagnostics.CODES`
plus one informational rule, `privacy-bound`: every program whose entry point was checked gets
a note-level result stating its epsilon, so a reviewer sees the proven bound next to the code
even when nothing is wrong.  Columns are Unicode code points (`columnKind`), 1-based, end
exclusive, exactly as the checker's spans.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from ..checking.program import CheckReport
from ..diagnostics import CODES, Diagnostic, Span, note_line
from ..typesystem.sens import INF
from .numbers import json_number
from .numbers import show as fmt_coef

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/os/schemas/sarif-schema-2.1.0.json"
BOUND_RULE = "privacy-bound"
SRCROOT = "%SRCROOT%"
_LEVELS = {"error": "error", "warning": "warning"}


def sarif_log(reports: list[CheckReport], root: Optional[Path] = None) -> dict:
    """A SARIF log with one run holding the results of all `reports`.

    `root` (default: the working directory) is the base that artifact URIs are made relative to,
    so that code-scanning services can map results onto the repository."""
    base = (root or _working_folder()).resolve()
    rules, index = _rules()
    results: list[dict] = []
    for report in reports:
        results.extend(_diagnostic_result(d, report, index, base) for d in report.diagnostics)
        bound = _bound_result(report, index, base)
        if bound is not None:
            results.append(bound)
    run = {
        "tool": {"driver": {"name": "fuzzpy", "version": _version(), "rules": rules}},
        "invocations": [{"executionSuccessful": True}],
        "originalUriBaseIds": {SRCROOT: {"uri": base.as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("fuzzpy")
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        return "0.0.0"


def _rules() -> tuple[list[dict], dict[str, int]]:
    rules = [{"id": code, "name": _rule_name(title), "shortDescription": {"text": title},
              "defaultConfiguration": {"level": "error"}} for code, title in CODES.items()]
    rules.append({"id": BOUND_RULE, "name": "PrivacyBound",
                  "shortDescription": {"text": "proven privacy loss (epsilon) of a program"},
                  "defaultConfiguration": {"level": "note"}})
    return rules, {r["id"]: i for i, r in enumerate(rules)}


def _rule_name(title: str) -> str:
    """SARIF rule names are identifiers: 'unknown name' -> 'UnknownName'."""
    words = ["".join(ch for ch in w if ch.isalnum()) for w in title.replace("-", " ").split()]
    return "".join(w[:1].upper() + w[1:] for w in words)


def message_text(d: Diagnostic) -> str:
    """The CLI's text: the message, then one line per note."""
    return "\n".join([d.message] + [note_line(n) for n in d.notes])


def _diagnostic_result(d: Diagnostic, report: CheckReport, index: dict[str, int], base: Path) -> dict:
    file = d.span.file if d.span is not None else report.file
    return {"ruleId": d.code, "ruleIndex": index[d.code], "level": _LEVELS.get(d.severity, "note"),
            "message": {"text": message_text(d)}, "locations": [_location(file, d.span, base)]}


def _bound_result(report: CheckReport, index: dict[str, int], base: Path) -> Optional[dict]:
    if report.entry is None or not report.inputs:
        return None
    fn = next((f for f in report.functions if f.name == report.entry), None)
    from .report import guarantee_text

    g = report.guarantee
    eps = g.epsilon if g is not None else (report.epsilon if report.is_pure else None)
    delta = g.stated_delta if g is not None else 0
    text = f"{report.entry}: {guarantee_text(report)}" + (", delta = 0" if delta == 0 else "")
    if report.budget is not None:
        text += f"; budget {fmt_coef(report.budget)}"
    props: dict[str, Any] = {"epsilon": _number(eps) if eps is not None else None,
                             "epsilonExact": _exact(eps) if eps is not None else None,
                             "delta": _number(delta), "deltaExact": _exact(delta), "pure": report.is_pure,
                             "rho": _number(report.rho), "rhoExact": _exact(report.rho),
                             "inputs": {i.name: _exact(i.epsilon) for i in report.inputs},
                             "inputsRho": {i.name: _exact(i.rho) for i in report.inputs}}
    if report.budget is not None:
        props["budget"] = _exact(report.budget)
    return {"ruleId": BOUND_RULE, "ruleIndex": index[BOUND_RULE], "level": "note", "kind": "informational",
            "message": {"text": text}, "locations": [_location(report.file, fn.span if fn else None, base)],
            "properties": props}


def _location(file: str, span: Optional[Span], base: Path) -> dict:
    physical: dict[str, Any] = {"artifactLocation": _artifact(file, base)}
    if span is not None:
        physical["region"] = {"startLine": span.line, "startColumn": span.col,
                              "endLine": span.end_line, "endColumn": max(span.end_col, 1)}
    return {"physicalLocation": physical}


def _artifact(file: str, base: Path) -> dict:
    """Relative to the working directory when the file lies inside it, else an absolute file URI."""
    if file.startswith("<"):
        return {"uri": quote(file.strip("<>"))}
    path = Path(file)
    absolute = path if path.is_absolute() else base / path
    try:
        rel = Path(os.path.normpath(absolute)).relative_to(base)
    except ValueError:
        return {"uri": Path(os.path.normpath(absolute)).as_uri()}
    return {"uri": quote(rel.as_posix()), "uriBaseId": SRCROOT}


def _working_folder() -> Path:
    """The working directory, or the root when it no longer exists (a process may outlive it)."""
    try:
        return Path.cwd()
    except OSError:
        return Path("/")


def _number(x: Any) -> Optional[float]:
    return json_number(x)


def _exact(x: Any) -> str:
    return "inf" if x == INF else str(Fraction(x))
