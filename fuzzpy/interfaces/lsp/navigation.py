"""Finding things in a document: LSP ranges of spans, the word at the cursor, the function
around a position, local names and their binding sites (from the AST), and the names bound
before the cursor (from the text, for completion while a declaration does not parse)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from lsprotocol import types as T

from ...diagnostics import Span
from ...syntax import ast as A
from ..textmate import grammar_keywords
from .analysis import Analysis

# The words of the lark grammar (so that completion cannot drift from the parser).
KEYWORDS = tuple(w for w in grammar_keywords() if w != "_")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DECL_NAME = re.compile(r"^function\s+([A-Za-z_][A-Za-z0-9_]*)")
_LOCAL_BINDERS = re.compile(r"\b(?:let|sample|inl|inr)\s+([A-Za-z_][A-Za-z0-9_]*)"
                            r"|\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*[:)]"
                            r"|\b([A-Za-z_][A-Za-z0-9_]*)\s*::\s*([A-Za-z_][A-Za-z0-9_]*)\s*=>"
                            r"|\bfun\s+([A-Za-z_][A-Za-z0-9_ ]*?)\s*->")


# ---- positions ----------------------------------------------------------------------------------


def span_to_range(span: Optional[Span], lines: list[str], codec: Any = None) -> T.Range:
    """1-based, end-exclusive code-point spans -> 0-based LSP ranges in the client's units."""
    if span is None:
        return T.Range(T.Position(0, 0), T.Position(0, 0))
    start = T.Position(max(0, span.line - 1), max(0, span.col - 1))
    end = T.Position(max(0, span.end_line - 1), max(0, span.end_col - 1))
    if codec is not None:
        return codec.range_to_client_units(lines, T.Range(start, end))
    return T.Range(start, end)


def _contains(span: Span, line: int, col: int) -> bool:
    """Whether 1-based (line, col) lies in the span; the end column is inclusive so a cursor just
    after a name still finds it."""
    return (span.line, span.col) <= (line, col) <= (span.end_line, span.end_col)


def word_at(line_text: str, col0: int) -> Optional[tuple[str, int, int]]:
    """The identifier at 0-based column `col0` and its 0-based [start, end)."""
    for m in _WORD.finditer(line_text):
        if m.start() <= col0 <= m.end():
            return m.group(0), m.start(), m.end()
    return None


# ---- scopes, for hover / definition of local names ----------------------------------------------


@dataclass
class _Hit:
    name: str
    binder: Optional[Span]  # where the name is bound; None: not a local name
    at_binder: bool


def _pattern_vars(p: A.Pattern) -> list[A.PVar]:
    if isinstance(p, A.PVar):
        return [p]
    if isinstance(p, A.PProduct):
        return [v for item in p.items for v in _pattern_vars(item)]
    return []


def find_local(decl: A.FunDecl, line: int, col: int, name: str) -> Optional[_Hit]:
    """Resolve `name` at (line, col) inside `decl` to its binding site (iterative walk)."""
    env0 = {p.name: p.span for p in decl.params}
    for p in decl.params:
        if p.name == name and _contains(p.span, line, col):
            return _Hit(name, p.span, True)
    todo: list[tuple[A.Node, dict[str, Span]]] = [(decl.body, env0)]
    while todo:
        node, env = todo.pop()
        if node.span is None or not _contains(node.span, line, col):
            continue
        if isinstance(node, A.Var):
            if node.name == name:
                return _Hit(name, env.get(name), False)
            continue
        todo.extend(_scoped_children(node, env, line, col, name))
        for binder in _binders_here(node):
            if binder[0] == name and _contains(binder[1], line, col):
                return _Hit(name, binder[1], True)
    return None


def _binders_here(node: A.Node) -> list[tuple[str, Span]]:
    if isinstance(node, (A.Let, A.Sample)):
        return [(v.name, v.span) for v in _pattern_vars(node.pattern)]
    if isinstance(node, A.Lambda):
        return [(p.name, p.span) for p in node.params]
    if isinstance(node, A.Case):
        return [(v.name, v.span) for arm in node.arms for p in arm.patterns for v in _pattern_vars(p)]
    return []


def _scoped_children(node: A.Node, env: dict[str, Span], line: int, col: int, name: str):
    if isinstance(node, (A.Let, A.Sample)):
        inner = dict(env, **{v.name: v.span for v in _pattern_vars(node.pattern)})
        return [(node.bound, env), (node.body, inner)]
    if isinstance(node, A.Lambda):
        return [(node.body, dict(env, **{p.name: p.span for p in node.params}))]
    if isinstance(node, A.Case):
        out = [(node.scrutinee, env)]
        for arm in node.arms:
            inner = dict(env, **{v.name: v.span for p in arm.patterns for v in _pattern_vars(p)})
            out.append((arm.body, inner))
        return out
    return [(child, env) for child in A.children(node) if isinstance(child, A.Expr)]


def enclosing_function(decls: Iterable[A.Decl], line: int, col: int) -> Optional[A.FunDecl]:
    for d in decls:
        if isinstance(d, A.FunDecl) and _contains(d.span, line, col):
            return d
    return None


def _local_at(analysis: Analysis, line: int, col: int, name: str) -> Optional[_Hit]:
    decl = enclosing_function(analysis.own_decls, line, col)
    return find_local(decl, line, col, name) if decl is not None else None


def _locals_before(source: str, line0: int) -> list[str]:
    """Names bound earlier in the declaration around the cursor (textual, so it works while the
    declaration does not parse yet)."""
    lines = source.split("\n")[: line0 + 1]
    start = 0
    for i in range(len(lines) - 1, -1, -1):
        if _DECL_NAME.match(lines[i]):
            start = i
            break
    names = _bare_params(lines[start]) if lines else []
    for m in _LOCAL_BINDERS.finditer("\n".join(lines[start:])):
        for group in m.groups():
            if group:
                names.extend(group.split())
    return [n for n in dict.fromkeys(names) if n not in KEYWORDS and n != "_"]


def _bare_params(header: str) -> list[str]:
    """The untyped parameters of `function f x (y : T) z : R {`: x and z."""
    m = _DECL_NAME.match(header)
    if m is None:
        return []
    rest = header[m.end():]
    while True:  # drop parenthesised parameters (found by _LOCAL_BINDERS), innermost first
        stripped = re.sub(r"\([^()]*\)", " ", rest)
        if stripped == rest:
            break
        rest = stripped
    rest = re.split(r"[:{]", rest, maxsplit=1)[0]
    return _WORD.findall(rest)
