"""Rule Table join for `join_private` (docs/soundness.md): two private tables, each bounded on its
key (by `truncate`, or a public schema's declared key), joined; the result is m_b times as far as
the first plus m_a times as far as the second.  A table on both sides (a self-join, a join with a
filtered copy of itself) moves on both sides at once: its distance counts twice, 4k per row with
`truncate k` on both sides.  Each test names the attack it pins, and the soundness oracle runs
neighbouring tables (a row added to either private table) through the checked program."""

from __future__ import annotations

import itertools
from collections import Counter

import pandas as pd
import pytest
from join_tables import accepted, frame, loss_violations, moved, refused

from fuzzpy.runtime.kernels.joins import join_frames, truncation_mask

MAIN = "function main (f : bag F) (q : bag Q) : fuzzy num "
COPY = 'truncate 2 "t2" (map (fun r -> {t2 = r.tail, d2 = r.delay}) f)'  # f's rows, renamed, truncated


def _sensitivities(r) -> list:
    return [m.sensitivity for m in r.mechanisms]


def test_two_truncated_tables_move_by_each_sides_bound_times_the_other():
    r = accepted(MAIN + '{ laplace 1 (count (join_private "tail" "tail" (truncate 3 "tail" f) (truncate 1 "tail" q))) }')
    # f: truncate 2 x m_q 1 = 2; q: truncate 2 x m_f 3 = 6; laplace calibrates to the larger
    assert _sensitivities(r) == [6]
    assert {i.name: i.epsilon for i in r.inputs} == {"f": pytest.approx(1 / 3), "q": 1}


def test_a_self_join_counts_the_table_on_both_sides():
    """Attack: join a table with itself, so that one added row lands on both sides."""
    r = accepted(MAIN + '{ let t = truncate 2 "tail" f; laplace 1 (count (join_private "tail" "t2" t '
                        '(truncate 2 "t2" (map (fun r -> {t2 = r.tail, d2 = r.delay}) f)))) }')
    assert _sensitivities(r) == [8], "k = 2 on both sides: 2 x 2 + 2 x 2 = 4k"
    assert [i.name for i in r.inputs] == ["f", "q"] and r.inputs[0].epsilon == 1


def test_a_join_with_a_filtered_copy_of_itself_counts_the_table_on_both_sides():
    """Attack: a filter drops rows but keeps the table's distance and bound: both sides still move."""
    r = accepted(MAIN + '{ laplace 1 (count (join_private "tail" "t2" (truncate 2 "tail" f) '
                        f'(filter (fun r -> r.d2 > 3) ({COPY})))) }}')
    assert _sensitivities(r) == [8]


def test_an_untruncated_private_table_is_refused_naming_the_key_and_the_side():
    r = refused(MAIN + '{ laplace 1 (count (join_private "tail" "tail" f (truncate 1 "tail" q))) }', "E2302",
                "the first table")
    assert any("'tail'" in d.message and "truncate" in " ".join(d.notes) for d in r.diagnostics)
    refused(MAIN + '{ laplace 1 (count (join_private "tail" "tail" (truncate 1 "tail" f) q)) }', "E2302",
            "the second table")


def test_a_bound_on_another_column_does_not_bound_the_key():
    """Attack: truncate on one column, join on another."""
    refused(MAIN + '{ laplace 1 (count (join_private "carrier" "tail" (truncate 1 "tail" f) (truncate 1 "tail" q))) }',
            "E2302", "'carrier'")


def test_keys_with_many_matches_beyond_the_growth_limit_are_refused():
    refused(MAIN + '{ laplace 1 (count (join_private "tail" "tail" (truncate 100 "tail" f) '
                   '(truncate 100 "tail" q))) }', "E0311")


def test_the_result_bounds_its_keys_by_the_product():
    """The join's key has at most m_a * m_b rows per value: a second join needs no new truncation."""
    r = accepted(MAIN + '{ let j = join_private "tail" "tail" (truncate 2 "tail" f) (truncate 3 "tail" q); '
                        'laplace 1 (count (truncate 6 "tail" j)) }')
    assert _sensitivities(r) == [6], "truncate 6 of a table bounded by 2 x 3 is the identity: f moves it by 2 x 3"


# ---- the soundness oracle on neighbouring tables -------------------------------------------------

SELF = MAIN + ('{ let t = truncate 2 "tail" f; laplace 1 (count (join_private "tail" "t2" t '
               '(truncate 2 "t2" (map (fun r -> {t2 = r.tail, d2 = r.delay}) f)))) }')
TWO = MAIN + '{ laplace 1 (count (join_private "tail" "tail" (truncate 2 "tail" f) (truncate 1 "tail" q))) }'
F_ROWS = [("t1", "UA", 1), ("t1", "UA", 2), ("t2", "DL", 3), ("t1", "DL", 4)]
Q_ROWS = [("t1", 2001), ("t1", 2002), ("t2", 2003)]


@pytest.mark.parametrize("secret", [0, 5, 2 ** 63 + 11])
def test_the_oracle_finds_no_violation_when_a_row_is_added_to_either_table(secret):
    r = accepted(TWO)
    q = frame(r, "Q", Q_ROWS, "q")
    f = frame(r, "F", F_ROWS, "f")
    for tail, delay in itertools.product(["t1", "t2", "t3"], [0, 9]):
        bigger = frame(r, "F", F_ROWS + [(tail, "AA", delay)], "f")
        assert moved(r, {"f": f, "q": q}, {"f": bigger, "q": q}, secret) <= 2
        assert loss_violations(r, {"f": f, "q": q}, {"f": bigger, "q": q}, "f", secret) == []
    for tail in ("t1", "t2", "t3"):
        bigger = frame(r, "Q", Q_ROWS + [(tail, 1999)], "q")
        assert moved(r, {"f": f, "q": q}, {"f": f, "q": bigger}, secret) <= 4
        assert loss_violations(r, {"f": f, "q": q}, {"f": f, "q": bigger}, "q", secret) == []


def _rows(frame_) -> Counter:
    return Counter(map(tuple, frame_.itertuples(index=False)))


def _self_join(f: pd.DataFrame, k: int, secrets: tuple[int, int]) -> Counter:
    """What the runtime computes for join_private "tail" "t2" (truncate k "tail" f) (truncate k "t2" f')."""
    left = f[truncation_mask(f, "tail", k, secrets[0])]
    copy = f.rename(columns={"tail": "t2", "delay": "d2"})
    right = copy[truncation_mask(copy, "t2", k, secrets[1])]
    return _rows(join_frames(left.reset_index(drop=True), right.reset_index(drop=True), "tail", "t2", False))


def test_a_self_join_moves_by_nearly_4k_rows_and_never_more():
    """The proof's extreme case: a key with k rows, and a new row first in the truncation's order
    on both sides: 4k - 2 result rows differ.  Over many secrets the runtime reaches it, never more."""
    k = 2
    f = pd.DataFrame({"tail": ["t1", "t1", "t2"], "delay": [1.0, 2.0, 3.0]})
    bigger = pd.concat([f, pd.DataFrame({"tail": ["t1"], "delay": [9.0]})], ignore_index=True)
    seen = set()
    for secrets in itertools.product(range(8), range(8)):
        a, b = _self_join(f, k, secrets), _self_join(bigger, k, secrets)
        seen.add(sum(((a - b) + (b - a)).values()))
    assert max(seen) == 4 * k - 2 and max(seen) <= 4 * k, seen


def test_the_oracle_finds_no_violation_in_a_self_join():
    r = accepted(SELF)
    q = frame(r, "Q", Q_ROWS, "q")
    f = frame(r, "F", [("t1", "UA", 1), ("t1", "UA", 2)], "f")
    bigger = frame(r, "F", [("t1", "UA", 1), ("t1", "UA", 2), ("t1", "UA", 9)], "f")
    for secret in range(8):
        assert moved(r, {"f": f, "q": q}, {"f": bigger, "q": q}, secret) <= 8
        assert loss_violations(r, {"f": f, "q": q}, {"f": bigger, "q": q}, "f", secret) == []
