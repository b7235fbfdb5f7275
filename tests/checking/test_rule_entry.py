"""Rule Entry (docs/soundness.md): main's parameters are the private tables; a table's coefficient
in main's distance is its epsilon (every use of it counts), and the program's epsilon is the sum
over its tables (a person may be in several).

Attacks found by the first review round and pinned as regression tests.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import assert_accepted_exactly

ACCEPTED = {
    # name: (program, total epsilon, [mechanism sensitivities in order]); first review round
    "table-used-twice": ("function main (db : bag T) : fuzzy num { laplace 1 (count db + count db) }", F(1), [2]),
    "two-inputs-sum-their-losses": ("function main (a : bag T) (b : bag T) : fuzzy num { laplace 1 (count a + count (union a b)) }", F(3, 2), [2]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """First review round, handled: a table used twice costs twice; two tables each pay their own
    coefficient, and the program's epsilon is their sum."""
    assert_accepted_exactly(*ACCEPTED[name])
