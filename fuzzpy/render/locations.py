"""Source locations as people read them: relative to the program, the standard library as
`stdlib/NAME.fz` wherever it is installed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional


def relative_file(file: str, program: Optional[str]) -> str:
    """`file` as seen from the program: the program's own name as given, the standard library
    as stdlib/NAME.fz, other files relative to the program's folder when they are below it."""
    from ..stdlib_location import STDLIB

    if file == program or file.startswith("<"):
        return file
    path = Path(file)
    try:
        return "stdlib/" + path.resolve().relative_to(STDLIB.resolve()).as_posix()
    except (ValueError, OSError):
        pass
    if program and not program.startswith("<"):
        base = Path(program).resolve().parent
        try:
            rel = os.path.relpath(path.resolve(), base)
            if not rel.startswith(".."):
                return str(Path(program).parent / rel) if Path(program).parent != Path(".") else rel
        except (ValueError, OSError):
            pass
    return file


def relative_span(span: Any, program: Optional[str]) -> str:
    """file:line:col with the file as `relative_file` shows it."""
    if span is None:
        return "?"
    return f"{relative_file(span.file, program)}:{span.line}:{span.col}"
