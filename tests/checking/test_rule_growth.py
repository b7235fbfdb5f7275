"""Rule Growth (docs/soundness.md): `union` is the only primitive that makes a table larger than the
tables it reads, so the checker records every union's size as a multiple of the input tables, and
rule Entry bounds the total (E0311): a run needs memory for a fixed multiple of its tables.

Attacks found by the review rounds and pinned as regression tests (the growth of functions of a
declared type is in test_rule_declared.py).
"""

from __future__ import annotations

import pytest
from check_and_run import check, refused_report

MAIN = "function main (db : bag T) : fuzzy num "


@pytest.mark.parametrize("src", [
    # union in a closure applied repeatedly, returned closure, partial application, nested pmap
    MAIN + "{ let f = fun b -> union b b; laplace 1 (count (f (f (f (f (f (f (f db)))))))) }",
    "function mk (u : num) { fun b -> union b b }\n"
    + MAIN + "{ let f = mk 0; laplace 1 (count (f (f (f (f (f (f (f db)))))))) }",
    "function dbl (u : num) (b : bag T) : bag T { union b b }\n"
    + MAIN + "{ let d = dbl 0; laplace 1 (count (d (d (d (d (d (d (d db)))))))) }",
    MAIN + "{ let t = fun g -> union g (union g g); let ps = groupby (fun r -> r.k) db; "
    "let q = pmap t (pmap t (pmap t (pmap t ps))); laplace 1 (count db) }",
    # union in a recursion on a released value, discarded
    "function grow (k : num) (b : bag T) : bag T { if k <= 0 then b else grow (k - 1) (union b b) }\n"
    + MAIN + "{ sample k = laplace 1 3; let z = grow k db; laplace 1 (count db) }",
])
def test_table_growth_through_functions_is_bounded(src):
    """Seventh review round (7a, resources), handled: doubling a table through a closure, a
    returned closure, a partial application, nested pmap or a released recursion is refused
    (E0311)."""
    refused_report(src, "E0311")


def test_false_rejection_growth_of_windows_is_reported_as_their_edit_distance():
    """Seventh review round (7a), a false rejection pinned as it is today: head/tail double the
    *distance* (edit distance), and growth is noted from the distance: a union of two 10-row windows
    is reported as 4 |db| rows (it has at most 2 |db|)."""
    r = check(MAIN + "{ let s = sort_by (fun r -> r.x) db; laplace 1 (count (union (head 10 s) (tail 10 s))) }")
    assert r.ok and r.growth == 4
