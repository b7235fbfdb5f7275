"""An application's head, arguments and primitive-call span are kept per syntax node while it
lives (checking/helpers.py `_application`): the same answer as a fresh walk, and no entry left
once the node is gone."""

import gc

from fuzzpy.checking import helpers as H
from fuzzpy.diagnostics import Span
from fuzzpy.syntax import ast as A
from fuzzpy.syntax.parser import parse_module


def _applications(src: str) -> list[A.Apply]:
    module, diags = parse_module(src, "kept.fz")
    assert not diags
    out, todo = [], list(module.decls)
    while todo:
        node = todo.pop()
        if isinstance(node, A.Apply):
            out.append(node)
        todo.extend(A.children(node))
    return out


SRC = "function f (a : num) (b : num) : num { clip 0 10 (a + f b (a * 2)) }\n"


def test_kept_spine_is_the_walked_spine_each_time():
    apps = _applications(SRC)
    assert apps
    for e in apps:
        first = H._spine(e)
        assert first == H._walk_spine(e)
        assert H._spine(e)[1] is first[1]  # kept: the same tuple


def test_kept_cover_is_the_cover_of_the_arguments_asked():
    for e in _applications(SRC):
        kept = H._application(e)
        head, args = kept[0], kept[1]
        for n in (len(args), 1, len(args)):
            assert H._primitive_cover(kept, n) == H._cover(head, list(args[:n]))


def test_entry_is_dropped_when_the_node_is_gone():
    span = Span.point("kept.fz", 1, 1)
    e = A.Apply(span, A.Apply(span, A.Var(span, "clip"), A.Var(span, "a")), A.Var(span, "b"))
    before = len(H._APPLICATIONS)
    assert H._spine(e)[1][1].name == "b"
    assert len(H._APPLICATIONS) == before + 1
    del e
    gc.collect()
    assert len(H._APPLICATIONS) == before
