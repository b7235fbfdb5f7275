"""Group key codes computed in each run (kernels/partitions.py, `int_codes` and `row_keys`): the
same codes, bit for bit, as the masked computation and the row function's Series give, and a
caller's table changed in place between runs grouped as it is now, not as it was."""

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
from fuzzpy.runtime.kernels.binning import bin_of
from fuzzpy.runtime.samplers import RandomSource
from fuzzpy.runtime.vectorize import row_function

ROOT = Path(__file__).resolve().parents[2]


def masked_int_codes(values, lo: int, k: int) -> np.ndarray:
    """The codes as a mask of rows in range computes them (the reference)."""
    r = np.rint(np.asarray(values, dtype=np.float64)) - lo
    ok = (r >= 0) & (r < k)
    small = np.int8 if k <= 127 else np.int16 if k <= 32767 else np.int64
    return np.atleast_1d(np.where(ok, r, -1).astype(small))


@pytest.mark.parametrize("values, lo, k", [
    (np.array([0.0, 3.0, 19.0, 7.4, 18.6]), 0, 20),       # every row in range
    (np.array([17.0, 90.0, 50.0]), 17, 74),                # an offset
    (np.array([0.0, np.nan, 5.0]), 0, 20),                 # a missing value: no part
    (np.array([np.nan, np.nan]), 0, 3),                    # nothing but missing values
    (np.array([-1.0, 0.0, 20.0, 19.0]), 0, 20),            # below and above the keys
    (np.array([np.inf, 2.0, -np.inf]), 0, 5),              # infinities
    (np.array([], dtype=np.float64), 0, 4),                # no row
    (np.array([3, 1, 2], dtype=np.int64), 1, 3),           # ints
    (np.array([True, False]), 0, 2),                       # booleans
    (pd.Series([1.0, 2.0, 300.0]), 0, 300),                # a Series, int16 codes
    (np.arange(0.0, 40000.0, 7.0), 0, 40000),              # int64 codes
    (np.float64(4.0), 0, 10),                              # one value
    (np.float64(np.nan), 0, 10),
])
def test_int_codes_are_the_masked_codes_with_their_dtype(values, lo, k):
    got = partitions.int_codes(values, lo, k)
    want = masked_int_codes(values, lo, k)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


@pytest.mark.parametrize("lo, hi", [(-np.inf, np.inf), (0, np.inf), (-np.inf, 3), (0, 3)])
def test_a_bin_of_a_column_is_the_clamped_floor_of_its_quotient_bit_for_bit(lo, hi):
    """A bound the checker left infinite is not applied (a pass that would change nothing):
    the same floats, NaN, infinities and negative zero included."""
    x = np.array([0.0, -0.0, 0.3, 7.5, 12.0, -4.0, np.nan, np.inf, -np.inf, 1e308])
    with np.errstate(over="ignore"):  # 1e308 * 10 is infinite, as in the kernel
        want = np.minimum(np.maximum(np.floor(x * 10 / 4), lo), hi)  # both bounds applied, NaN kept
    got = bin_of(4, 10, x, lo, hi)
    assert got.tobytes() == want.tobytes()


class Tree:
    """The decision tree example and the Adult sample (a short repr: a failing test prints its
    arguments, and the program's IR is large)."""

    def __init__(self, **params: str) -> None:
        report = check_file(ROOT / "examples" / "decision_tree.fz", params=params)
        self.entry = report.entry_instance
        self.df = load_table(ROOT / "examples" / "data" / "adult_sample.csv", report.schemas["Adult"], table="db")

    def __repr__(self) -> str:
        return "<examples/decision_tree.fz on examples/data/adult_sample.csv>"


@pytest.fixture(scope="module")
def tree():
    return Tree(B="0.1")


def run(entry, df, seed, **kw):
    r = run_program(entry, {"db": df}, RandomSource.seeded(seed), **kw)
    return r.value, [(x.name, x.value) for x in r.releases], r.fallbacks


def test_a_key_computed_as_one_column_gives_the_codes_of_the_row_function_series(tree, monkeypatch):
    """Every key of the tree (buckets of number columns, categories) coded from `row_keys`'
    array and from the row function's Series: the same codes, the same dtype."""
    real = partitions.row_keys
    compared = []

    def both(state, key, base):
        out = real(state, key, base)
        info = both.info
        via_series = partitions.key_codes(row_function(state, key)(base), info)
        codes = partitions.key_codes(out, info)
        compared.append(codes.dtype == via_series.dtype and np.array_equal(codes, via_series))
        return out

    real_kept = partitions._kept_or_computed

    def with_info(ctx, key, base, ident):
        both.info = ctx.info
        return real_kept(ctx, key, base, ident)

    monkeypatch.setattr(partitions, "row_keys", both)
    monkeypatch.setattr(partitions, "_kept_or_computed", with_info)
    run(tree.entry, tree.df, 0)
    assert len(compared) == 13 and all(compared)  # the twelve attributes and the class


def test_runs_with_and_without_kept_codes_release_the_same_values(tree):
    kept = {"db": KeptCodes()}
    fresh = [run(tree.entry, tree.df, seed) for seed in range(4)]
    held = [run(tree.entry, tree.df, seed, kept=kept) for seed in range(4)]
    assert len(kept["db"]) == 13 and held == fresh


BUCKETS = check_source(
    'schema T { x : num[0, 10], k : cat{"a", "b"} }\n'
    "function main (db : bag T) : fuzzy (num, num, num) {\n"
    "  let g = groupby (fun r -> clip 0 2 (bin 4 r.x)) db;\n"
    "  let h = groupby (fun r -> r.k) db;\n"
    "  laplace 1000000 (count (part g \"0\"), count (part g \"2\"), count (part h \"b\")) }", "t.fz")


def counts(df: pd.DataFrame, seed: int) -> list:
    """The three noisy counts (noise of scale 10^-6: each rounds to its count)."""
    r = run_program(BUCKETS.entry_instance, {"db": df}, RandomSource.seeded(seed))
    return [round(float(v)) for v in r.releases[0].value]


def test_a_caller_frame_changed_in_place_between_runs_is_grouped_as_it_is_now():
    assert not [d for d in BUCKETS.diagnostics if d.severity == "error"]
    df = pd.DataFrame({"x": [1.0, 2.0, 9.0, 9.5], "k": pd.Categorical(["a", "b", "b", "b"], ["a", "b"])})
    before = counts(df, 0)
    df.loc[:, "x"] = [9.0, 9.0, 9.0, 1.0]  # the same frame, changed in place
    df.loc[:, "k"] = ["a", "a", "a", "b"]
    after = counts(df, 0)
    assert before == [2, 2, 3]
    assert after == [1, 3, 1] == counts(df.copy(deep=True), 0)
