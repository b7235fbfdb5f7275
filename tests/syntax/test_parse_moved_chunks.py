"""A chunk whose text was parsed at another line is copied with its spans moved, not parsed again
(parser.parse_chunk): the copy must be exactly the tree a fresh parse at the new line gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.check_speed import program
from benchmarks.lsp_latency import generate
from fuzzpy.diagnostics import Span
from fuzzpy.syntax import ast as A
from fuzzpy.syntax import parser

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("examples/**/*.fz"), *ROOT.glob("stdlib/**/*.fz")])


def _dump(value: object) -> object:
    """Every attribute of the tree, spans included, with node classes named."""
    if isinstance(value, A.Node):
        return (type(value).__name__, {k: _dump(v) for k, v in vars(value).items()})
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_dump(v) for v in value])
    if isinstance(value, Span):
        return ("Span", value.file, value.line, value.col, value.end_line, value.end_col)
    return (type(value).__name__, value)


def _chunks() -> list[tuple[str, int, str]]:
    out = [(str(p), line, text) for p in SOURCES for line, text in parser.split_chunks(p.read_text())]
    out += [("gen.fz", line, text) for line, text in parser.split_chunks(generate(8) + program(200))]
    return [c for c in out if c[2].strip()]


def _fresh(file: str, line: int, text: str) -> tuple:
    parser.parse_chunk.cache_clear()
    parser._PARSED_TEXTS.clear()
    return parser.parse_chunk(file, line, text)


@pytest.mark.parametrize("shift", [1, 7, -1])
def test_a_chunk_parsed_at_another_line_is_the_fresh_parse_moved(shift: int) -> None:
    chunks = _chunks()
    assert len(chunks) > 100
    moved = 0
    for file, line, text in chunks:
        at = line + 5  # remembered (parsed below line 1), then asked for at another line
        first = _fresh(file, at, text)
        parser.parse_chunk.cache_clear()
        reused = parser.parse_chunk(file, at + shift, text)
        moved += (file, text) in parser._PARSED_TEXTS and not first[1]
        expected = _fresh(file, at + shift, text)
        assert _dump(reused) == _dump(expected), (file, line)
    assert moved > 100  # the moved copies were the ones compared, not fresh parses


def test_a_tree_with_a_span_outside_its_lines_is_parsed_again() -> None:
    parser._PARSED_TEXTS.clear()
    decl = A.Import(Span.point("f.fz", 1, 1), "x")  # like the builder's span of a rule with no children
    parser._remember_parse("f.fz", 5, "import \"x\"\n", (decl,))
    assert ("f.fz", "import \"x\"\n") not in parser._PARSED_TEXTS
