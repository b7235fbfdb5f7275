"""Diagnostics shared by every stage: stable error codes, source spans, rendering.

Every error a user can cause ends as a `Diagnostic` with a code from `CODES`; the CLI and the
language server render the same objects, so the message text is identical in both.
Messages must never contain private data (row numbers, cell values, counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

# The catalogue of stable codes. Codes are never reused or renumbered; docs/errors.md lists them.
CODES: dict[str, str] = {
    # E01xx: reading and parsing source
    "E0101": "syntax error",
    "E0102": "unexpected end of input",
    "E0103": "invalid literal",
    "E0104": "cannot read source file",
    "E0105": "import not found",
    "E0106": "import cycle",
    "E0107": "nesting too deep",
    # E02xx: names and types
    "E0201": "unknown name",
    "E0202": "type mismatch",
    "E0203": "not a function",
    "E0204": "wrong number of arguments",
    "E0205": "unknown field",
    "E0206": "duplicate definition",
    "E0207": "missing entry point",
    "E0208": "invalid type",
    "E0209": "not a compile-time constant",
    "E0210": "primitive must be fully applied",
    "E0211": "unknown parameter",
    "E0212": "missing type annotation",
    "E0213": "domain error",
    "E0214": "not a declared value of the category",
    # E03xx: sensitivity and privacy
    "E0301": "sensitivity exceeds annotation",
    "E0302": "unbounded sensitivity",
    "E0303": "private value released without noise",
    "E0304": "cannot infer sensitivity",
    "E0305": "mechanism argument not bounded",
    "E0306": "recursion cannot be bounded",
    "E0307": "not a partition of public keys",
    "E0308": "function passed to a bag operation not allowed (private data, or a table per row)",
    "E0309": "run may fail depending on private data",
    "E0310": "function of a declared type may not complete, or grows tables",
    "E0311": "table grows beyond the limit",
    "E0312": "noise scale beyond the supported range",
    "E0313": "Gaussian release whose cost cannot be accounted here",
    "E0314": "approximate differential privacy needs a delta",
    "E0330": "rows of a table with a privacy unit read before its contributions are bounded",
    "E0331": "tables with different privacy units combined",
    "E0332": "partition selection whose input moves by more than one unit",
    "E0333": "function given to subsample whose release cannot be amplified",
    # E04xx: budget
    "E0401": "privacy budget exceeded",
    "E0402": "invalid budget",
    # E05xx: data loading (runtime/data.py)
    "E0501": "data file not found",
    "E0502": "unsupported or unreadable data file",
    "E0503": "missing column",
    "E0504": "unparsable values",
    "E0505": "schema mismatch",
    "E0506": "no data given for a table",
    "E0507": "data given for an unknown table",
    "E0508": "row of a data file too long",
    "E0509": "table empty after loading (for the data's holder)",
    # E06xx: runs and the ledger (fuzzpy/ledger)
    "E0601": "ledger cap exceeded",
    "E0602": "ledger unavailable",
    "E0603": "seed used together with a ledger",
    "E0604": "runtime error in a checked program",
    "E0605": "invalid ledger argument",
    "E0606": "run does not fit the privacy notion of the cap",
    # E07xx: command line usage
    "E0701": "invalid command-line argument",
    "E0702": "invalid parameter value",
    # E08xx: auditing
    "E0801": "audit cannot be run",
    # E09xx: bugs in fuzzpy itself (reported, never a traceback)
    "E0901": "internal error",
    # E10xx: curator service (fuzzpy/serve, docs/serve.md)
    "E1001": "missing access token",
    "E1002": "access token not recognised",
    "E1003": "only the curator may do this",
    "E1004": "no such dataset available to this analyst",
    "E1005": "request too large",
    "E1006": "malformed request",
    "E1007": "program too large",
    "E1008": "checking took longer than the limit",
    "E1009": "run took longer than the limit",
    "E1010": "dataset file changed since it was registered",
    "E1011": "program schema does not fit the dataset's published schema",
    "E1012": "import not allowed in a served program",
    "E1013": "dataset budget exhausted",
    "E1014": "analyst cap exceeded",
    "E1015": "server busy",
    "E1016": "curator service unreachable or answered unexpectedly",
    "E1017": "invalid curator configuration or registration",
    "E1018": "no access token configured on the client",
    "E1019": "no such endpoint",
    "E1020": "the curator service is not installed",
    "E1021": "too many of this analyst's requests are waiting",
    "E1022": "a worker process of the service stopped unexpectedly",
    # E15xx: everyday primitives (public lists, binning; fuzzpy/primitives/lists.py, binning.py)
    "E1501": "public value expected, but this depends on private data",
    "E1502": "computed list too long",
    # the Dask engine (fuzzpy run --engine dask, docs/scale.md)
    "E2101": "primitive not supported by the Dask engine",
    "E2102": "row function reads a captured table on the Dask engine",
    "E2103": "Dask engine data files missing, mixed or unreadable",
    "E2104": "Dask cluster failed during the run",
    "E2106": "Dask cluster unreachable or the Dask engine not installed",
    "E2107": "a data file changed during a Dask run",
    # E23xx: joins and public tables (fuzzpy/primitives/joins.py, fuzzpy/pipeline/public.py)
    "E2301": "tables joined have a column of the same name",
    "E2302": "nothing bounds the rows per key of a joined table",
    "E2303": "public table does not hold what its schema declares",
    # E18xx: estimates from released values (fuzzpy/primitives/estimates.py)
    "E1801": "an estimate is computed from released (public) values only",
    "E1802": "an estimate's bound or level must be a public constant",
}


# A note that starts with HELP says how to fix the error (fuzzpy/hints.py); shown as "help:".
HELP = "help: "


def note_line(note: str) -> str:
    """One note as the outputs show it: "help: ..." for a hint, "note: ..." otherwise."""
    return note if note.startswith(HELP) else f"note: {note}"


@dataclass(frozen=True)
class Span:
    """A source range, 1-based lines and columns, end exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    @staticmethod
    def point(file: str, line: int, col: int) -> "Span":
        return Span(file, line, col, line, col + 1)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass
class Diagnostic:
    code: str
    message: str
    span: Span | None = None
    notes: list[str] = field(default_factory=list)
    severity: str = "error"

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unregistered diagnostic code {self.code}")

    @property
    def title(self) -> str:
        return CODES[self.code]

    def to_json(self) -> dict:
        out: dict = {"code": self.code, "severity": self.severity, "title": self.title,
                     "message": self.message, "notes": list(self.notes)}
        if self.span is not None:
            s = self.span
            out["location"] = {"file": s.file, "line": s.line, "col": s.col,
                               "end_line": s.end_line, "end_col": s.end_col}
        return out


class FuzzError(Exception):
    """Raised by any stage with one or more diagnostics; interfaces catch it and render."""

    def __init__(self, diagnostics: Diagnostic | Iterable[Diagnostic]):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics: list[Diagnostic] = list(diagnostics)
        super().__init__("; ".join(f"{d.code}: {d.message}" for d in self.diagnostics))


def error(code: str, message: str, span: Span | None = None, *notes: str) -> FuzzError:
    """Shorthand: `raise error("E0201", "unknown name x", span)`."""
    return FuzzError(Diagnostic(code, message, span, list(notes)))


def render(diag: Diagnostic, sources: dict[str, str] | None = None) -> str:
    """Render like rustc: header, location, the source line and a caret under the span."""
    lines = [f"{diag.severity}[{diag.code}]: {diag.message}"]
    span = diag.span
    if span is not None:
        lines.append(f"  --> {span}")
        text = (sources or {}).get(span.file)
        if text is not None:
            src_lines = text.splitlines()
            if 1 <= span.line <= len(src_lines):
                src = src_lines[span.line - 1]
                width = (span.end_col - span.col) if span.end_line == span.line else len(src) - span.col + 1
                gutter = str(span.line)
                pad = " " * len(gutter)
                lines.append(f"{pad} |")
                lines.append(f"{gutter} | {src}")
                lines.append(f"{pad} | {' ' * (span.col - 1)}{'^' * max(1, width)}")
    for note in diag.notes:
        lines.append(f"  = {note_line(note)}")
    return "\n".join(lines)
