"""A unit's cached check reused at other lines, its spans moved (lsp/incremental.py `moved`):
after any inserted line, the editor's analysis is the one a check of every unit at the new
layout gives, and a result that writes a line number into a message or a type is checked again."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from fuzzpy.interfaces.lsp import IncrementalChecker, Settings, make_executor

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# A lambda bound to a name (its type says where it is written), a recursion (its notes list the
# call sites), an error reached through a call (its note names the place), an unknown name.
PROGRAM = textwrap.dedent("""\
    # fuzzpy: budget 2
    schema Adult { age : num[17, 90], hours : num[1, 99] }
    param eps : num = 0.1;

    function clipped (db : bag Adult) {
      let f = fun r -> clip 0 50 r.hours;
      map f db
    }

    function total (db : bag Adult) : num {
      sum (clipped db)
    }

    function halves (x : num) (n : int) : num {
      if n <= 0 then x else halves (x / 2) (n - 1)
    }

    function leak (db : bag Adult) : num {
      count db + (count db)
    }

    function typo (db : bag Adult) : num {
      count dbb
    }

    function main (db : bag Adult) : fuzzy (num, num) {
      sample a = laplace eps (total db);
      sample b = laplace eps (halves (count db) 3);
      return (a, b)
    }
    """)


def _snapshot(analysis) -> dict:
    report = analysis.report
    return {
        "diagnostics": sorted((d.code, d.message, str(d.span), tuple(d.notes)) for d in report.diagnostics),
        "mechanisms": sorted((str(m.span), m.name, m.sensitivity, m.epsilon, m.scale) for m in report.mechanisms),
        "functions": sorted((f.name, str(f.span), f.type) for f in report.functions),
        "bindings": sorted({(str(b.span), b.name, b.type, b.sensitivity) for b in analysis.bindings}),
        "calls": sorted({(str(c.span), c.name, c.type, c.cost) for c in analysis.calls}),
        "epsilon": report.epsilon,
    }


def _inserted_lines(text: str, most: int) -> list[str]:
    """The text with a blank line inserted above a top-level declaration, one at a time (at
    most `most` of them, spread over the file)."""
    starts = [m.start() for m in re.finditer(r"^(function|schema|param|import)\b", text, re.M)]
    starts = starts[::max(1, -(-len(starts) // most))]
    return [text[:i] + "\n" + text[i:] for i in starts]


CASES = {"program": PROGRAM, **{p.name: p.read_text() for p in sorted(EXAMPLES.glob("*.fz"))}}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_moved_result_is_the_check_at_the_new_lines(name, tmp_path):
    file = str(tmp_path / "prog.fz")
    if name != "program":
        file = str(EXAMPLES / name)  # its imports resolve
    text, settings, executor = CASES[name], Settings(), make_executor()
    engine = IncrementalChecker(full_factor=100.0)
    executor.submit(engine.analyse, text, file, settings).result()
    while executor.submit(engine.warm, text, file, settings).result():
        pass
    for edited in _inserted_lines(text, 100 if name == "program" else 3):
        moved = executor.submit(engine.analyse, edited, file, settings).result()
        fresh = executor.submit(IncrementalChecker(full_factor=100.0).analyse, edited, file, settings).result()
        assert _snapshot(moved) == _snapshot(fresh)
        executor.submit(engine.analyse, text, file, settings).result()  # and back: moved again


def test_an_inserted_line_reuses_what_does_not_name_lines(tmp_path):
    """`clipped`'s lambda type names its line, so clipped and every unit whose closure holds it
    (total, main) are checked again when they move; halves, leak and typo are moved."""
    file, settings, executor = str(tmp_path / "prog.fz"), Settings(), make_executor()
    engine = IncrementalChecker(full_factor=100.0)
    executor.submit(engine.analyse, PROGRAM, file, settings).result()
    above_leak = PROGRAM.replace("function leak", "\nfunction leak")
    assert executor.submit(engine.analyse, above_leak, file, settings).result().runs == 1  # main
    above_clipped = PROGRAM.replace("function clipped", "\nfunction clipped")
    assert executor.submit(engine.analyse, above_clipped, file, settings).result().runs == 3


def test_merge_keys_are_made_once_and_made_again_for_a_moved_result(tmp_path):
    """A cached result's merge keys (incremental.merge_keys) are kept for the next merges; a
    moved result's are made from its moved spans, never copied from the result it moved."""
    from fuzzpy.interfaces.lsp.incremental import merge_keys

    file, settings, executor = str(tmp_path / "prog.fz"), Settings(), make_executor()
    engine = IncrementalChecker(full_factor=100.0)
    executor.submit(engine.analyse, PROGRAM, file, settings).result()
    cached = next(r for r in engine.cache.values() if any(f.name == "leak" for f in r.functions))
    keys = merge_keys(cached)
    assert merge_keys(cached) is keys and keys[0]
    above_leak = PROGRAM.replace("function leak", "\nfunction leak")
    executor.submit(engine.analyse, above_leak, file, settings).result()
    moved = next(r for r in engine.cache.values() if any(f.name == "leak" for f in r.functions))
    assert moved is not cached and moved.merge_keys is not keys
    leak = next(f for f in moved.functions if f.name == "leak")
    assert [k.key for k in merge_keys(moved)[0]] == [(f.name, f.span) for f in moved.functions]
    assert leak.span.line == next(f for f in cached.functions if f.name == "leak").span.line + 1
