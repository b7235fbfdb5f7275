"""Generate docs/primitives.md and docs/errors.md from the registry and the code catalogue, and the
TextMate grammar editors/textmate/fuzzpy.tmLanguage.json (fuzzpy/interfaces/textmate.py).

    python -m fuzzpy.interfaces.docgen        # rewrite the files
    python -m fuzzpy.interfaces.docgen --check  # exit 1 if they are stale (used by the tests)
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..diagnostics import CODES
from ..hints import HINTS
from ..primitives.registry import all_primitives

DOCS = Path(__file__).resolve().parents[2] / "docs"
CATEGORIES = ["arithmetic", "comparison", "boolean", "numeric", "bag", "partition", "units", "join", "ordered", "list",
              "mechanism", "other"]


def primitives_markdown() -> str:
    prims = all_primitives()
    lines = ["# Primitives", "",
             "Generated from the registry (`fuzzpy/primitives/`) by `python -m fuzzpy.interfaces.docgen`;",
             "the checker, the interpreter and the language server read the same declarations.", "",
             "Signatures give sensitivities: `A -o[s] B` is s-sensitive, `A -o B` 1-sensitive, `A -> B`",
             "unbounded. Operators are listed under their primitive names (`+` is `add`).", ""]
    cats = sorted({p.category for p in prims.values()}, key=lambda c: CATEGORIES.index(c) if c in CATEGORIES else 99)
    for cat in cats:
        lines += [f"## {cat}", ""]
        for p in sorted((p for p in prims.values() if p.category == cat), key=lambda p: p.name):
            lines += [f"### `{p.name}`", "", f"`{p.name} {' '.join(p.params)}` : `{p.signature}`", "", p.doc, "",
                      f"*Why it is sound:* {p.justification}", ""]
            flags = []
            if p.is_mechanism:
                flags.append("mechanism (charges epsilon, noise calibrated by the checker)")
            if p.vectorised:
                flags.append("runs vectorised on whole columns")
            if flags:
                lines += [f"*Runtime:* {'; '.join(flags)}.", ""]
    return "\n".join(lines).rstrip() + "\n"


def errors_markdown() -> str:
    lines = ["# Error codes", "", "Generated from `fuzzpy/diagnostics.py` by `python -m fuzzpy.interfaces.docgen`.",
             "Codes are stable: never reused or renumbered.", "", "| code | meaning |", "| --- | --- |"]
    lines += [f"| {code} | {title} |" for code, title in CODES.items()]
    lines += ["", "## Hints", "",
              "Some mistakes are recognised and the error says how to fix them, in a note that starts with",
              "`help:` (in the text output `= help: ...`; in JSON, SARIF and the editor the same line among the",
              "notes). Generated from `fuzzpy/hints.py`.", "", "| code | when | help |", "| --- | --- | --- |"]
    lines += [f"| {h.code} | {h.when} | {h.text.replace('{line}', 'N').replace('|', chr(92) + '|')} |"
              for h in HINTS.values()]
    return "\n".join(lines) + "\n"


def outputs() -> dict[Path, str]:
    from .textmate import PATH as TEXTMATE
    from .textmate import grammar_json

    return {DOCS / "primitives.md": primitives_markdown(), DOCS / "errors.md": errors_markdown(),
            TEXTMATE: grammar_json()}


def main(argv: list[str]) -> int:
    stale = [p for p, text in outputs().items() if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"{p} is out of date: run python -m fuzzpy.interfaces.docgen", file=sys.stderr)
        return 1 if stale else 0
    for p, text in outputs().items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
