"""Compiled functions share one code object per source text (runtime/compiled.py, `_code_of`):
a program checked again runs without compiling, with the same result, and the table of code
objects stays within its characters."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest

from fuzzpy.checking.program import check_file
from fuzzpy.runtime import compiled
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def compiles(monkeypatch):
    """The texts Python compiled for the runtime while the test ran."""
    texts: list[str] = []

    def spy(source, *args, **kw):
        texts.append(source)
        return builtins.compile(source, *args, **kw)

    monkeypatch.setattr(compiled, "compile", spy, raising=False)
    return texts


def tree_run(seed: int):
    report = check_file(ROOT / "examples" / "decision_tree.fz", params={"B": "0.5"})
    df = load_table(ROOT / "examples" / "data" / "adult_sample.csv", report.schemas["Adult"], table="db")
    r = run_program(report.entry_instance, {"db": df}, RandomSource.seeded(seed))
    return (r.value, [(x.name, x.value) for x in r.releases]), report.entry_instance


def test_a_program_checked_again_runs_without_compiling_and_releases_the_same(compiles, monkeypatch):
    monkeypatch.setattr(compiled, "_CODE", {})
    first, entry = tree_run(3)
    assert compiles and len(set(compiles)) == len(compiles)  # each text compiled once
    compiles.clear()
    again, checked_again = tree_run(3)  # a new check: new nodes, translated again, to the same texts
    assert checked_again is not entry and compiles == [] and again == first


def test_the_code_objects_kept_stay_within_their_characters(compiles, monkeypatch):
    monkeypatch.setattr(compiled, "_CODE", {})
    monkeypatch.setattr(compiled, "_code_chars", 0)
    monkeypatch.setattr(compiled, "CODE_CHARS", 30)
    texts = [f"x = {i}\n" * 2 for i in range(10, 16)]  # 12 characters each
    codes = [compiled._code_of(t) for t in texts]
    assert compiled._code_chars <= 30 and len(compiled._CODE) == 2  # cleared after the second and fourth
    assert compiled._code_of(texts[-1]) is codes[-1]  # still kept: not compiled again
    assert len(compiles) == len(texts)
    namespace: dict = {}
    exec(codes[0], namespace)
    assert namespace["x"] == 10
