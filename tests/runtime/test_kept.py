"""Group key codes kept across runs (runtime/kept.py): computed once for a table its holder keeps,
the same runs as without them, and never read for a table they were not handed with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fuzzpy.checking.program import check_file, check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.kept import KeptCodes
from fuzzpy.runtime.kernels import partitions
from fuzzpy.runtime.samplers import RandomSource

ROOT = Path(__file__).resolve().parents[2]


class Tree:
    """The decision tree example and the Adult sample (a short repr: a failing test prints its
    arguments, and the program's IR is large)."""

    def __init__(self) -> None:
        report = check_file(ROOT / "examples" / "decision_tree.fz")
        self.entry = report.entry_instance
        self.df = load_table(ROOT / "examples" / "data" / "adult_sample.csv", report.schemas["Adult"], table="db")

    def __iter__(self):
        return iter((self.entry, self.df))

    def __repr__(self) -> str:
        return "<examples/decision_tree.fz on examples/data/adult_sample.csv>"


@pytest.fixture(scope="module")
def tree():
    return Tree()


@pytest.fixture
def computed(monkeypatch):
    """How many times a run computed a key's codes."""
    calls = []
    real = partitions.key_codes

    def spy(values, info):
        calls.append(info["keys"][0])
        return real(values, info)

    monkeypatch.setattr(partitions, "key_codes", spy)
    return calls


def run(entry, df, seed, **kw):
    r = run_program(entry, {"db": df}, RandomSource.seeded(seed), **kw)
    return r.value, [(x.name, x.value) for x in r.releases], r.fallbacks


def test_codes_kept_across_runs_are_computed_once_and_the_runs_are_the_same(tree, computed):
    entry, df = tree
    reference = [run(entry, df, seed) for seed in range(3)]
    per_run = len(computed) // 3
    assert per_run == 13  # the twelve attributes and the class, once each
    kept = {"db": KeptCodes()}
    computed.clear()
    first = run(entry, df, 0, kept=kept)
    assert len(computed) == per_run and len(kept["db"]) == per_run
    computed.clear()
    later = [run(entry, df, seed, kept=kept) for seed in range(3)]
    assert len(computed) == 0  # every key's codes were kept
    same = [first == reference[0]] + [a == b for a, b in zip(later, reference)]
    assert same == [True] * 4


def test_a_table_not_handed_with_the_store_computes_its_own_codes(tree, computed):
    entry, df = tree
    kept = {"db": KeptCodes()}
    run(entry, df, 0, kept=kept)
    other = df.iloc[::-1].reset_index(drop=True)  # the same rows in another order: other codes
    computed.clear()
    same = run(entry, other, 5) == run(entry, other, 5, kept={"elsewhere": kept["db"]})
    assert same and len(computed) == 2 * 13
    # A table handed with the store is read through it even as a shallow copy (fuzzpy serve
    # hands each run one): the holder promises the same rows.
    computed.clear()
    same = run(entry, df.copy(deep=False), 3, kept=kept) == run(entry, df, 3)
    assert same and len(computed) == 13  # the second run's only


def test_a_derived_table_is_not_read_through_the_store(computed):
    report = check_source('schema T { x : num[0, 10], k : cat{"a", "b"} }\n'
                          "function main (db : bag T) : fuzzy (num, num) {\n"
                          "  let g = groupby (fun v -> clip 0 1 (bin 5 v)) (map (fun r -> 10 - r.x) db);\n"
                          "  laplace 1 (count (part g \"0\"), count (part g \"1\")) }", "t.fz")
    assert not [d for d in report.diagnostics if d.severity == "error"]
    df = pd.DataFrame({"x": [1.0, 2.0, 8.0], "k": pd.Categorical(["b", "b", "b"], ["a", "b"])})
    kept = {"db": KeptCodes()}
    r = run_program(report.entry_instance, {"db": df}, RandomSource.seeded(0), kept=kept)
    ref = run_program(report.entry_instance, {"db": df}, RandomSource.seeded(0))
    assert [x.value for x in r.releases] == [x.value for x in ref.releases]
    assert len(kept["db"]) == 0  # the mapped table is a new table: its codes are not the input's


def test_a_key_that_ran_row_by_row_is_not_kept(tree, computed):
    entry, df = tree
    small = df.iloc[:300].reset_index(drop=True)
    kept = {"db": KeptCodes()}
    a = run(entry, small, 1, kept=kept, vectorise=False)
    b = run(entry, small, 1, kept=kept, vectorise=False)
    same, fallbacks = a == b, a[2]
    assert same and fallbacks > 0  # the same count of row-by-row functions in both runs
    assert len(kept["db"]) == 0


def test_the_store_keeps_read_only_arrays_within_its_bytes_least_recently_used_first():
    kept = KeptCodes(max_bytes=2 * 800)
    arrays = [np.arange(100, dtype=np.int64) + i for i in range(3)]
    kept.put("a", arrays[0])
    kept.put("b", arrays[1])
    assert not arrays[0].flags.writeable
    with pytest.raises(ValueError):
        arrays[0][0] = 5
    assert kept.get("a") is arrays[0]  # now the most recently used
    kept.put("c", arrays[2])
    assert kept.get("b") is None and kept.get("a") is arrays[0] and kept.get("c") is arrays[2]
    kept.put("big", np.zeros(300, dtype=np.int64))  # larger than the whole store: not kept
    assert kept.get("big") is None and len(kept) == 2
    kept.put("a", arrays[1])  # replacing a key frees its old bytes
    assert kept.get("a") is arrays[1] and kept.get("c") is arrays[2]
