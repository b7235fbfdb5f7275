"""Rule Captured per part (docs/soundness.md): a function given to `each` or `pmap` over a partition
with declared keys runs once per key, so what it captures is paid once per key (a public number),
while the parts themselves still compose in parallel.

Issue 37 (false rejects): `each (fun p -> laplace 1 (count db)) ps` over 3 parts is 3-DP and
`pmap (fun p -> count db) ps` then `values` is a list 3 times as far as db, but what the function
captured was charged infinite.  The attacks: a captured table read twice per application, a
partition whose number of parts the data decides (released keys), nested applications, a part of
the same partition captured, a capture that is infinitely sensitive to begin with.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import codes, exactly, make_tables, refused_report, violations

PARTS = 'function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) '
MAIN = "function main (db : bag T) : fuzzy num "
GROUPS = "let ps = groupby (fun r -> r.k) db; "
TOTAL = "function total (xs : list num) : num { case xs of { [] => 0 | h :: t => h + total t } }\n"


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


def test_each_capturing_the_whole_table_pays_it_once_per_part(tables):
    r = exactly(PARTS + "{ each (fun p -> laplace 1 (count db)) (groupby (fun r -> r.k) db) }", 3, [1])
    assert violations(r, tables) == []


def test_each_capturing_the_table_next_to_its_part_pays_the_part_once():
    """Per part: the part (parallel composition, 1 in all) plus the captured count (1 per key)."""
    exactly(PARTS + "{ " + GROUPS + "each (fun p -> laplace 1 (count p + count db)) ps }", 4, [1])
    exactly(PARTS + "{ let n = count db; each (fun g -> laplace 1 (count g + n)) (groupby (fun r -> r.k) db) }", 4, [1])


def test_pmap_capturing_the_table_then_values_is_as_far_as_the_number_of_parts(tables):
    r = exactly(TOTAL + MAIN + "{ " + GROUPS + "laplace 1 (total (values (pmap (fun p -> clip 0 1 (count db)) ps))) }",
                1, [3])
    assert violations(r, tables) == []


def test_a_function_named_before_it_is_given_to_each_is_charged_alike():
    exactly(PARTS + "{ " + GROUPS + "let f = fun p -> laplace 1 (count db); each f ps }", 3, [1])


def test_a_captured_table_used_twice_per_application_is_paid_twice_per_part(tables):
    src = PARTS + "{ " + GROUPS + "each (fun p -> sample a = laplace 1 (count db); laplace 1 (count db + a)) ps }"
    r = exactly(src, 6, [1, 1])
    assert violations(r, tables) == []


def test_nested_applications_multiply_the_numbers_of_parts():
    exactly(PARTS + "{ " + GROUPS + "sample h = each (fun p -> each (fun q -> laplace 1 (count db)) ps) ps; "
            "return h.a }", 9, [1])


def test_a_part_of_the_same_partition_captured_is_paid_once_per_key():
    exactly(PARTS + "{ " + GROUPS + "each (fun p -> laplace 1 (count ps.a)) ps }", 3, [1])
    exactly(TOTAL + MAIN + "{ " + GROUPS + "laplace 1 (total (values (pmap (fun p -> clip 0 1 (count ps.a)) ps))) }",
            1, [3])


def test_gaussian_releases_on_a_captured_table_cost_once_per_part():
    r = exactly(PARTS + "{ " + GROUPS + "each (fun p -> gaussian 1 (count db)) ps }", 0)
    assert r.rho == 3


def test_released_keys_keep_a_captured_table_infinite():
    """The number of parts of a partition over released keys is what the data gave: refused."""
    src = (MAIN + "{ sample ks = select_keys 1 0.00001 1 (fun r -> r.k) db; "
           "sample h = each (fun p -> laplace 1 (count db)) (groupby_in ks (fun r -> r.k) db); return 0 }")
    refused_report(src, "E0302")
    exactly(src.replace("count db)) (groupby_in", "count p)) (groupby_in"), 2, [1, 1])


def test_an_infinitely_sensitive_capture_stays_refused():
    r = refused_report(PARTS + "{ " + GROUPS + "each (fun p -> laplace 1 (count (filter (fun r -> r.x > count db) p))) ps }",
                       "E0302")
    assert "E0302" in codes(r)


def test_a_capture_per_part_has_its_exact_fraction():
    exactly(PARTS + "{ " + GROUPS + "each (fun p -> laplace 0.1 (count db)) ps }", F(3, 10), [1])
