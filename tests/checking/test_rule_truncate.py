"""Rule Truncate (docs/soundness.md): `truncate k "c" b` keeps at most k rows per value of c and is
2-stable (one row in, one row out), or the identity when b's type already bounds c by k.  The
runtime's choice of rows must keep the proof's premise: which rows are kept depends only on the
key's own rows and the secret, so adding a row never reorders the others."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pandas as pd
import pytest
from join_tables import accepted, frame, loss_violations, moved, refused

from fuzzpy.runtime.kernels.joins import truncation_mask

MAIN = "function main (f : bag F) (p : bag P) : fuzzy num "


def test_a_truncated_table_is_twice_as_far():
    r = accepted(MAIN + '{ laplace 1 (count (truncate 3 "tail" f)) }')
    assert [m.sensitivity for m in r.mechanisms] == [2] and r.epsilon == 1


def test_the_result_states_its_bound_and_keeps_the_bounds_it_had():
    r = accepted('function main (f : bag F) : fuzzy num { let t = truncate 2 "carrier" (truncate 3 "tail" f); '
                 'laplace 1 (count t) }')
    assert [m.sensitivity for m in r.mechanisms] == [4]
    from join_tables import check

    r = check('function main (f : bag F) : fuzzy num { let t = (truncate 2 "carrier" (truncate 3 "tail" f) : bag F); '
              'laplace 1 (count t) }')
    assert r.ok, "a bounded bag is a bag"


def test_truncating_a_table_already_bounded_by_k_is_the_identity():
    r = accepted(MAIN + '{ laplace 1 (count (truncate 5 "tail" (truncate 3 "tail" f))) }')
    assert [m.sensitivity for m in r.mechanisms] == [2], "the outer truncate keeps every row: 2, not 4"
    r = accepted(MAIN + '{ laplace 1 (count (truncate 2 "tail" (truncate 3 "tail" f))) }')
    assert [m.sensitivity for m in r.mechanisms] == [4]
    r = accepted(MAIN + '{ laplace 1 (count (join_public "tail" "tail" f (truncate 1 "tail" p))) }')
    assert r.epsilon == 1


@pytest.mark.parametrize("k", ["0", "1.5", "100000", "(count f)"])
def test_k_is_a_public_whole_number(k):
    refused(MAIN + '{ laplace 1 (count (truncate ' + k + ' "tail" f)) }', "E0209")


def test_the_key_is_a_column():
    refused(MAIN + '{ laplace 1 (count (truncate 2 "wing" f)) }', "E0205", "'wing'")
    refused(MAIN + '{ laplace 1 (count (truncate 2 "x" (map (fun r -> r.delay) f))) }', "E0202")


# ---- the runtime's choice of rows -----------------------------------------------------------------

def _kept(frame_: pd.DataFrame, k: int, secret: int) -> list:
    return sorted(map(tuple, frame_[truncation_mask(frame_, "key", k, secret)].itertuples(index=False)))


def _table(rng: random.Random, n: int) -> pd.DataFrame:
    return pd.DataFrame({"key": [rng.choice("abc") for _ in range(n)], "v": [rng.randrange(4) for _ in range(n)]})


@pytest.mark.parametrize("seed", range(40))
def test_one_added_row_changes_at_most_two_kept_rows_and_never_more_than_k_per_key(seed):
    rng = random.Random(seed)
    base = _table(rng, rng.randrange(0, 14))
    k = rng.randrange(1, 4)
    secret = rng.getrandbits(64)
    kept = _kept(base, k, secret)
    assert max([sum(1 for r in kept if r[0] == v) for v in "abc"] + [0]) <= k
    for position in range(len(base) + 1):  # the new row anywhere in the table
        row = pd.DataFrame({"key": [rng.choice("abc")], "v": [rng.randrange(4)]})
        bigger = pd.concat([base.iloc[:position], row, base.iloc[position:]], ignore_index=True)
        after = _kept(bigger, k, secret)
        removed = len(list((_multiset(kept) - _multiset(after)).elements()))
        added = len(list((_multiset(after) - _multiset(kept)).elements()))
        assert removed + added <= 2, (base, row, position)


def _multiset(rows):
    from collections import Counter

    return Counter(rows)


def test_rows_are_chosen_by_the_rows_and_the_secret_not_by_their_order():
    rng = random.Random(3)
    base = pd.DataFrame({"key": ["a"] * 30, "v": list(range(30))})
    for secret in (1, 2, 3):
        kept = _kept(base, 5, secret)
        shuffled = base.sample(frac=1, random_state=secret).reset_index(drop=True)
        assert _kept(shuffled, 5, secret) == kept, "distinct rows: the same choice in any order"
    choices = {tuple(_kept(base, 5, s)) for s in range(12)}
    assert len(choices) > 6, "another secret, another choice"
    assert rng is not None


def test_missing_keys_are_dropped_and_small_keys_kept_whole():
    t = pd.DataFrame({"key": ["a", None, "b", "b", float("nan")], "v": [1, 2, 3, 4, 5]})
    assert _kept(t, 2, 7) == [("a", 1), ("b", 3), ("b", 4)]


def test_equal_rows_are_interchangeable():
    t = pd.DataFrame({"key": ["a"] * 6, "v": [1, 1, 1, 2, 2, 2]})
    for secret in range(5):
        kept = _kept(t, 4, secret)
        assert len(kept) == 4 and set(kept) <= {("a", 1), ("a", 2)}


def test_many_rows_fall_back_to_a_three_key_sort_with_the_same_result():
    from fuzzpy.runtime.kernels import joins as J

    n = 3000
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 40, n)
    priority = rng.integers(0, 2 ** 63, n, dtype=np.int64).astype(np.uint64)
    fast = sorted(J._first_k(codes, priority, 7))
    old = J._WORD
    try:
        J._WORD = 20  # too few bits to pack: the three-key sort
        slow = sorted(J._first_k(codes, priority, 7))
    finally:
        J._WORD = old
    # The packed sort compares the priorities' leading bits only (ties by position): with 64-bit
    # words and 3000 rows that leaves 40 bits, so here both orders agree.
    assert fast == slow


@pytest.mark.parametrize("secret", [0, 1, 2 ** 64 - 1])
def test_the_oracle_sees_no_violation_on_neighbours_through_truncation(secret):
    r = accepted('function main (f : bag F) : fuzzy num { laplace 1 (count (truncate 2 "tail" f)) }')
    rows = [("t1", "UA", 1), ("t1", "UA", 2), ("t2", "DL", 3)]
    for extra in itertools.product(["t1", "t2", "t3"], [0, 9]):
        a = frame(r, "F", rows, "f")
        b = frame(r, "F", rows + [(extra[0], "UA", extra[1])], "f")
        assert moved(r, {"f": a}, {"f": b}, secret) <= 2
        assert loss_violations(r, {"f": a}, {"f": b}, "f", secret) == []
