"""The LSP feature handlers: hover, go to definition, completion, the privacy code lens and the
`fuzzpy.privacyReport` command.  Each answers a default (and logs) instead of raising;
`server.create_server` registers them."""

from __future__ import annotations

import logging
import re
import traceback
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Optional

from lsprotocol import types as T
from pygls.uris import from_fs_path

from ...diagnostics import Span
from ...primitives.registry import all_primitives
from ...syntax import ast as A
from .analysis import Analysis
from .hover import _hover_text, epsilon_summary
from .members import member_items, open_chain, receiver_types
from .navigation import KEYWORDS, _local_at, _locals_before, span_to_range, word_at

if TYPE_CHECKING:
    from .server import FuzzpyServer

log = logging.getLogger("fuzzpy.lsp")


# ---- feature handlers ---------------------------------------------------------------------------


def _safe(default: Any) -> Callable:
    """Handlers answer `default` (and log) instead of raising."""

    def wrap(fn: Callable) -> Callable:
        def handler(ls: FuzzpyServer, params: Any) -> Any:
            try:
                return fn(ls, params)
            except Exception:  # noqa: BLE001 - a request must never crash the server
                log.exception("%s failed", fn.__name__)
                ls.log_message(T.MessageType.Error, f"fuzzpy: {fn.__name__} failed:\n{traceback.format_exc()}")
                return default
        handler.__name__ = fn.__name__
        return handler

    return wrap


def hover(ls: FuzzpyServer, params: T.HoverParams) -> Optional[T.Hover]:
    uri = params.text_document.uri
    analysis = ls.analysis(uri)
    if analysis is None:
        return None
    line, col, text = ls.cursor(uri, params.position)
    word = word_at(text, col - 1) or _projection_at(text, col - 1)
    value = _hover_text(analysis, line, col, word, text)
    if value is None:
        return None
    rng = None
    if word is not None:
        rng = span_to_range(Span("", line, word[1] + 1, line, word[2] + 1), [""] * (line - 1) + [text], ls.codec())
    return T.Hover(contents=ls.markup(value, ls.hover_formats()), range=rng)


def _projection_at(line_text: str, col0: int) -> Optional[tuple[str, int, int]]:
    """The tuple position at the cursor (`t.1`), shown by hover like a field."""
    for m in re.finditer(r"[0-9]+", line_text):
        if m.start() <= col0 <= m.end() and re.search(r"(?<![0-9])[A-Za-z_][A-Za-z0-9_]*\s*\.$", line_text[:m.start()]):
            return m.group(0), m.start(), m.end()
    return None


def definition(ls: FuzzpyServer, params: T.DefinitionParams) -> Optional[list[T.Location]]:
    uri = params.text_document.uri
    analysis = ls.analysis(uri)
    if analysis is None:
        return None
    line, col, text = ls.cursor(uri, params.position)
    word = word_at(text, col - 1)
    if word is None or (word[1] > 0 and text[word[1] - 1] == "."):
        return None
    name = word[0]
    local = _local_at(analysis, line, col, name)
    if local is not None and local.binder is not None:
        return [_location(ls, analysis, local.binder)]
    for d in analysis.decls:
        if isinstance(d, (A.FunDecl, A.ParamDecl, A.SchemaDecl)) and d.name == name:
            return [_location(ls, analysis, d.name_span or d.span)]
    return None


def _location(ls: FuzzpyServer, analysis: Analysis, span: Span) -> T.Location:
    text = analysis.report.sources.get(span.file, "")
    uri = from_fs_path(span.file) if not span.file.startswith("<") and "://" not in span.file else span.file
    return T.Location(uri=uri or span.file, range=span_to_range(span, text.splitlines(True), ls.codec()))


def completion(ls: FuzzpyServer, params: T.CompletionParams) -> T.CompletionList:
    uri = params.text_document.uri
    analysis = ls.analysis(uri)
    doc = ls.workspace.get_text_document(uri)
    line, col, text = ls.cursor(uri, params.position)
    chain = open_chain(text[: col - 1]) if "#" not in text[: col - 1] else None
    if chain is not None:  # after `r.`: the fields of r, nothing else
        return _complete_members(ls, analysis, doc.source, line, col, chain)
    items: dict[str, T.CompletionItem] = {}
    for kw in KEYWORDS:
        items[kw] = T.CompletionItem(label=kw, kind=T.CompletionItemKind.Keyword)
    formats = ls.completion_formats()
    for name, prim in all_primitives().items():
        items[name] = T.CompletionItem(label=name, kind=T.CompletionItemKind.Function, detail=prim.signature,
                                       documentation=ls.markup(prim.doc, formats))
    if analysis is not None:
        _complete_declarations(analysis, items)
    for name in _locals_before(doc.source, params.position.line):
        items.setdefault(name, T.CompletionItem(label=name, kind=T.CompletionItemKind.Variable))
    _complete_stdlib(ls, doc.source, items)
    return T.CompletionList(is_incomplete=False, items=list(items.values()))


def _complete_members(ls: FuzzpyServer, analysis: Optional[Analysis], source: str, line: int, col: int,
                      chain: tuple[str, list[str], str, int]) -> T.CompletionList:
    base, path, _, start = chain
    lines = source.split("\n")
    known = analysis.known if analysis is not None else {}
    types = receiver_types(analysis, known, lines, line, start + 1, base)
    schemas = analysis.report.schemas if analysis is not None else {}
    formats = ls.completion_formats()
    items = [T.CompletionItem(label=label, kind=T.CompletionItemKind.Field, detail=detail,
                              documentation=ls.markup(doc, formats) if doc else None, sort_text=f"{i:04d}")
             for i, (label, detail, doc) in enumerate(member_items(types, path, schemas))]
    return T.CompletionList(is_incomplete=False, items=items)


def _complete_stdlib(ls: FuzzpyServer, source: str, items: dict[str, T.CompletionItem]) -> None:
    """Standard-library functions not in scope yet: choosing one also adds its import."""
    formats = ls.completion_formats()
    for name, file, doc in stdlib_functions():
        if name in items:
            continue
        imported = f'"{file}"' in source
        edit = None if imported else [T.TextEdit(T.Range(T.Position(0, 0), T.Position(0, 0)), f'import "{file}"\n')]
        items[name] = T.CompletionItem(label=name, kind=T.CompletionItemKind.Function,
                                       detail=f"{file}{'' if imported else ' (adds the import)'}",
                                       documentation=ls.markup(doc, formats) if doc else None,
                                       additional_text_edits=edit)


@lru_cache(maxsize=1)
def stdlib_functions() -> tuple[tuple[str, str, str], ...]:
    """(name, `stdlib/FILE.fz`, the comment above it) of every standard-library function."""
    from ...stdlib_location import STDLIB
    from ...syntax.parser import parse_module

    out = []
    for path in sorted(STDLIB.glob("*.fz")):
        text = path.read_text(encoding="utf-8")
        module, _ = parse_module(text, str(path))
        lines = text.split("\n")
        for d in module.decls:
            if isinstance(d, A.FunDecl) and d.span is not None:
                out.append((d.name, f"stdlib/{path.name}", _comment_above(lines, d.span.line)))
    return tuple(out)


def _comment_above(lines: list[str], line: int) -> str:
    """The comment lines right above 1-based `line`, without their `#`."""
    out: list[str] = []
    i = line - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        out.insert(0, lines[i].lstrip()[1:].strip())
        i -= 1
    return "\n".join(out)


def _complete_declarations(analysis: Analysis, items: dict[str, T.CompletionItem]) -> None:
    types = {f.name: f.type for f in analysis.report.functions}
    for d in analysis.decls:
        if isinstance(d, A.FunDecl):
            items[d.name] = T.CompletionItem(label=d.name, kind=T.CompletionItemKind.Function,
                                             detail=types.get(d.name, "function"))
        elif isinstance(d, A.ParamDecl):
            items[d.name] = T.CompletionItem(label=d.name, kind=T.CompletionItemKind.Constant,
                                             detail="param (public)")
        elif isinstance(d, A.SchemaDecl):
            items[d.name] = T.CompletionItem(label=d.name, kind=T.CompletionItemKind.Struct, detail="schema")


def code_lens(ls: FuzzpyServer, params: T.CodeLensParams) -> list[T.CodeLens]:
    uri = params.text_document.uri
    analysis = ls.analysis(uri)
    if analysis is None:
        return []
    report = analysis.report
    decl = next((d for d in analysis.own_decls if isinstance(d, A.FunDecl) and d.name == ls.settings.entry), None)
    if decl is None:
        return []
    title = epsilon_summary(report)
    if title is None:
        errors = sum(d.severity == "error" for d in report.diagnostics)
        title = f"epsilon: not proven ({errors} error{'s' if errors != 1 else ''})"
    lines = analysis.text.splitlines(True)
    return [T.CodeLens(range=span_to_range(decl.name_span, lines, ls.codec()),
                       command=T.Command(title=title, command="fuzzpy.privacyReport", arguments=[uri]))]


def privacy_report(ls: FuzzpyServer, *args: Any) -> Optional[dict]:
    """`fuzzpy.privacyReport uri`: the document's report as `fuzzpy check --format json` gives it."""
    from ...render.report import report_json

    try:
        analysis = ls.analysis(args[0]) if args and isinstance(args[0], str) else None
        return report_json(analysis.report) if analysis is not None else None
    except Exception:  # noqa: BLE001
        log.exception("privacyReport failed")
        return None
