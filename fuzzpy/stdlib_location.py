"""Where the standard library is: the top-level `stdlib/` folder of the repository, or in an
installed package (a wheel, `pip install .`) the copy `fuzzpy/_stdlib` (see pyproject.toml);
the variable FUZZPY_STDLIB, when set, names another folder.  A base module: the parser's
loader, the hints, the renderers and the check cache all need it."""

from __future__ import annotations

import os
from pathlib import Path


def stdlib_folder() -> Path:
    """$FUZZPY_STDLIB; else the copy inside an installed package; else the repository's stdlib/
    (a clone, or an editable install, whose package folder has no _stdlib)."""
    override = os.environ.get("FUZZPY_STDLIB", "").strip()
    if override:
        return Path(override)
    package = Path(__file__).resolve().parent
    installed = package / "_stdlib"
    return installed if installed.is_dir() else package.parent / "stdlib"


STDLIB = stdlib_folder()
