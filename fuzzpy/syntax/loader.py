"""Read a program and the library files it imports (`import "stdlib/stats.fz"`).

An import path is looked up next to the importing file, then in the standard library folder
(also when given as `stdlib/NAME.fz`).  Each file is parsed once; cycles are an error.

The standard library is found where fuzzpy/stdlib_location.py says.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..diagnostics import Diagnostic, Span
from ..stdlib_location import STDLIB

if TYPE_CHECKING:  # the AST and the parser are imported when a file is read (not to resolve an import)
    from . import ast as A





def read_source(path: Path) -> tuple[str | None, Diagnostic | None]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, Diagnostic("E0104", f"cannot read {path}: no such file", None)
    except OSError as exc:
        return None, Diagnostic("E0104", f"cannot read {path}: {exc.strerror or 'unreadable'}", None)
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, Diagnostic("E0104", f"{path} is not UTF-8 text (is it a binary file?)",
                                Span.point(str(path), 1, 1))


def resolve_import(path: str, importer: str) -> Path | None:
    base = Path(importer).parent if importer and not importer.startswith("<") else Path.cwd()
    candidates = [base / path, STDLIB / path]
    if path.startswith("stdlib/"):
        candidates.append(STDLIB / path[len("stdlib/"):])
    for c in candidates:
        if c.is_file():
            return c.resolve()
    return None


def load_program(source: str, file: str, overlays: dict[str, str] | None = None,
                 virtual: dict[str, str] | None = None) -> tuple[list[A.Module], list[Diagnostic], dict[str, str]]:
    """Parse `source` (named `file`) and, transitively, its imports.

    `overlays` maps file paths to unsaved editor text.  `virtual` maps names (`<...>`, not
    paths) to the text of modules read as if the main file imported them first: the language
    server's schemas published by a curator service.  Returns the modules (the main file
    last), the diagnostics, and the texts of all files read (for rendering carets)."""
    from . import ast as A

    modules: list[A.Module] = []
    diags: list[Diagnostic] = []
    texts: dict[str, str] = {}
    visiting: list[str] = []
    done: set[str] = set()

    def visit(text: str, name: str) -> None:
        visiting.append(name)
        texts[name] = text
        from .library_cache import parse_module_cached  # lark: imported when a file is parsed

        module, errs = parse_module_cached(text, name)  # a standard-library file: read from disk if kept
        diags.extend(errs)
        for decl in module.decls:
            if isinstance(decl, A.Import):
                _load_import(decl, name)
        modules.append(module)
        visiting.pop()
        done.add(name)

    def _load_import(decl: A.Import, importer: str) -> None:
        if not decl.path.endswith(".fz"):
            # Never parse (and quote in errors) other files: a data file's rows are private.
            diags.append(Diagnostic("E0105", f"only fuzzpy files (.fz) can be imported, not \"{decl.path}\"",
                                    decl.span))
            return
        target = resolve_import(decl.path, importer)
        if target is not None and target.suffix != ".fz":  # a .fz link to a data file
            diags.append(Diagnostic("E0105", f"only fuzzpy files (.fz) can be imported: \"{decl.path}\" "
                                    "is a link to another kind of file", decl.span))
            return
        if target is None:
            diags.append(Diagnostic("E0105", f"cannot find the library file \"{decl.path}\"", decl.span,
                                    [f"looked next to {importer} and in {STDLIB}"]))
            return
        key = str(target)
        if key in visiting:
            diags.append(Diagnostic("E0106", f"import cycle: {decl.path} imports this file again", decl.span))
            return
        if key in done:
            return
        text = (overlays or {}).get(key)
        if text is None:
            text, err = read_source(target)
            if err is not None:
                err.span = decl.span
                diags.append(err)
                return
        visit(text, key)

    for name, text in (virtual or {}).items():
        visit(text, name)
    visit(source, file)
    return modules, diags, texts
