"""Partitions, parallel composition and ordered operations: exact bounds and rejections."""

from fractions import Fraction as F

import pandas as pd
import pytest
from conftest import check, codes, eps

EDU = ["Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
       "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"]
T = ('schema T { x : num[0, 100], k : cat{"a", "b", "c"}, note : string, '
     'edu : cat{' + ", ".join(f'"{e}"' for e in EDU) + '} }\n')


def test_interval_histogram_by_successive_splits_costs_eps_not_n_eps():
    # DFuzz's cdf example: split at each boundary, count the lower part, recurse on the rest.
    src = T + """
function intervals (b : bag T) (bounds : list num) : fuzzy (list num) {
  case bounds of {
    [] => return []
  | h :: t =>
      let (lo, hi) = split (fun r -> r.x < h) b;
      sample c = laplace 0.5 (count lo);
      sample rest = intervals hi t;
      return (c :: rest)
  }
}
function main (db : bag T) : fuzzy (list num) { intervals db [10, 20, 30, 40, 50, 60, 70, 80] }"""
    assert eps(check(src)) == F(1, 2)


def test_cumulative_histogram_costs_n_eps():
    src = T + """
function cumulative (b : bag T) (bounds : list num) : fuzzy (list num) {
  case bounds of {
    [] => return []
  | h :: t =>
      sample c = laplace 0.5 (count (filter (fun r -> r.x < h) b));
      sample rest = cumulative b t;
      return (c :: rest)
  }
}
function main (db : bag T) : fuzzy (list num) { cumulative db [10, 20, 30, 40, 50, 60, 70, 80] }"""
    assert eps(check(src)) == 4  # 8 boundaries x 0.5: it cannot be improved, and is not


def test_noisy_count_of_every_group_of_16_costs_eps():
    src = T + "function main (db : bag T) : fuzzy (parts {" + ", ".join(f'"{e}"' for e in EDU) + "} num) {\n" \
        "  each (fun g -> laplace 0.3 (count g)) (groupby (fun r -> r.edu) db) }"
    r = check(src)
    assert eps(r) == F(3, 10)
    (m,) = r.mechanisms
    assert (m.sensitivity, m.scale) == (1, F(10, 3))


def test_summing_the_counts_of_all_parts_is_as_sensitive_as_one_count():
    src = T + """
function main (db : bag T) : fuzzy num {
  let g = groupby (fun r -> r.k) db;
  laplace 1 (count g.a + count g.b + count g.c)
}"""
    r = check(src)
    assert eps(r) == 1 and r.mechanisms[0].sensitivity == 1


def test_union_of_parts_follows_generalised_parallel_composition():
    # PrivJail appendix B: the cost is the max over parts of the sum of what touched that part.
    src = T + """
function main (db : bag T) : fuzzy (num, num, num) {
  let g = groupby (fun r -> r.k) db;
  sample ab = laplace 1 (count (union g.a g.b));
  sample a = laplace 1 (count g.a);
  sample c = laplace 1 (count g.c);
  return (ab, a, c)
}"""
    assert eps(check(src)) == 2  # part a is touched twice


def test_two_groupbys_of_the_same_table_are_not_disjoint():
    src = T + """
function main (db : bag T) : fuzzy (num, num) {
  let g = groupby (fun r -> r.k) db;
  let h = groupby (fun r -> r.k) db;
  sample a = laplace 1 (count g.a);
  sample b = laplace 1 (count h.a);
  return (a, b)
}"""
    r = check(src)
    assert eps(r) == 2
    over = check(src.replace("function main", "# fuzzpy: budget 1\nfunction main"))
    from fuzzpy.pipeline.budget import apply_budget
    apply_budget(over, F(1))
    assert [d.code for d in over.diagnostics] == ["E0401"]


def test_a_part_and_its_whole_add_up():
    src = T + "function main (db : bag T) : fuzzy num { let g = groupby (fun r -> r.k) db; " \
              "laplace 1 (count g.a + count db) }"
    r = check(src)
    assert eps(r) == 1
    assert r.mechanisms[0].sensitivity == 2 and r.mechanisms[0].scale == 2


def test_groupby_on_a_column_without_a_finite_domain_is_rejected():
    r = check(T + "function main (db : bag T) : fuzzy (parts {\"a\"} num) { "
                  "each (fun g -> laplace 1 (count g)) (groupby (fun r -> r.note) db) }")
    assert codes(r) == ["E0307"]
    assert "finite, declared set of values" in r.diagnostics[0].message
    assert "cat{" in r.diagnostics[0].notes[0]


def test_nested_partitions_compose_in_parallel():
    src = T + """
function main (db : bag T) : fuzzy num {
  let g = groupby (fun r -> r.k) db;
  let (lo, hi) = split (fun r -> r.x < 50) g.a;
  sample x = laplace 1 (count lo);
  sample y = laplace 1 (count hi);
  sample z = laplace 1 (count g.b);
  return x + y + z
}"""
    assert eps(check(src)) == 1


def test_each_on_a_function_capturing_private_data_is_charged_once_per_part():
    """Rule Captured per part: each of the 3 parts releases count g + n, so n is paid 3 times and
    the parts once (parallel composition): 3 + 1 (it was refused as infinite)."""
    r = check(T + "function main (db : bag T) : fuzzy (parts {\"a\", \"b\", \"c\"} num) { let n = count db; "
                  "each (fun g -> laplace 1 (count g + n)) (groupby (fun r -> r.k) db) }")
    assert eps(r) == 4


# ---- ordered operations (PrivJail's edit distance) -------------------------------------------------

def test_sort_then_head_count_is_2_sensitive_charged_eps():
    r = check(T + "function main (db : bag T) : fuzzy num { laplace 0.5 (count (head 100 (sort_by (fun r -> r.x) db))) }")
    assert eps(r) == F(1, 2)
    (m,) = r.mechanisms
    assert (m.sensitivity, m.scale) == (2, 4)


def test_stable_sort_keeps_the_distance():
    r = check(T + "function f (db : bag T) : seq T { sort_by (fun r -> r.x) db }\n"
                  "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    assert [f.type for f in r.functions if f.name == "f"] == ["bag T -o seq T"]


def test_head_needs_a_sorted_table_and_a_constant():
    assert codes(check(T + "function main (db : bag T) : fuzzy num { laplace 1 (count (head 3 db)) }")) == ["E0202"]
    r = check(T + "function main (db : bag T) : fuzzy num { laplace 1 (count (head (count db) "
                  "(sort_by (fun r -> r.x) db))) }")
    assert codes(r) == ["E0209"]


def test_head_worst_case_moves_two_rows():
    """Adding one row to a table moves the first n rows of the sorted table by 2 (one in, one out):
    the doubling rule is tight."""
    base = pd.DataFrame({"x": [5.0, 6.0, 7.0, 8.0]})
    neighbour = pd.concat([base, pd.DataFrame({"x": [1.0]})], ignore_index=True)
    head = lambda df: df.sort_values("x", kind="stable").head(3)["x"].tolist()  # noqa: E731
    a, b = head(base), head(neighbour)
    sym_diff = len(set(a) ^ set(b))
    assert sym_diff == 2
    # and the sum of the window moves by 7 + ... : x=7 leaves and x=1 enters
    assert sum(a) - sum(b) == 6


@pytest.mark.parametrize("window", ["tail 2", "slice 1 3"])
def test_other_windows_double_too(window):
    r = check(T + f"function main (db : bag T) : fuzzy num {{ laplace 1 (count ({window} (sort_by (fun r -> r.x) db))) }}")
    assert eps(r) == 1 and r.mechanisms[0].sensitivity == 2


def test_crosstab_of_two_categories_is_a_partition_over_the_product():
    keys = ", ".join(f'"{a}, {b}"' for a in "abc" for b in ("yes", "no"))
    r = check(T + "function main (db : bag T) : fuzzy (parts {" + keys + "} num) {\n"
              "  each (fun g -> laplace 0.5 (count g)) (groupby (fun r -> (r.k, r.x > 50)) db) }".replace(
                  "r.x > 50", 'if r.x > 50 then (r.k == "a") else false'))
    # a bool key is not a declared category: rejected with what to declare
    assert codes(r) == ["E0307"]
    ok = check('schema U { a : cat{"p", "q"}, b : cat{"u", "v", "w"} }\n'
               'function main (db : bag U) : fuzzy (parts {"p, u", "p, v", "p, w", "q, u", "q, v", "q, w"} num) {\n'
               '  each (fun g -> laplace 0.5 (count g)) (groupby (fun r -> (r.a, r.b)) db) }')
    assert eps(ok) == F(1, 2)


def test_groupby_over_a_bounded_int_key():
    r = check(T + 'function main (db : bag T) : fuzzy (parts {"0", "1", "2", "3"} num) {\n'
              '  each (fun g -> laplace 1 (count g)) (groupby (fun r -> clip 0 3 (if r.x > 50 then 3 else 0)) db) }')
    assert eps(r) == 1
    r = check(T + "function main (db : bag T) : fuzzy num { laplace 1 (count (part (groupby (fun r -> 2) db) \"2\")) }")
    assert eps(r) == 1


def test_groupby_over_an_unbounded_int_is_rejected():
    r = check(T + 'function main (db : bag T) : fuzzy num {\n'
              '  let g = groupby (fun r -> if r.x > 50 then 3 else 0) db; laplace 1 (count db) }')
    assert eps(r) == 1  # constant keys 3 / 0 join to int[0, 3]: bounded
    r = check('schema V { n : int }\nfunction main (db : bag V) : fuzzy num {\n'
              '  let g = groupby (fun r -> r.n) db; laplace 1 (count db) }')
    assert codes(r) == ["E0307"] and "bounded int" in r.diagnostics[0].notes[0]


def test_group_aggregates_from_the_stdlib_compose_in_parallel():
    src = ('import "stdlib/groups.fz"\n' + T +
           'function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) {\n'
           '  sample c = group_count 0.1 (fun r -> r.k) db;\n'
           '  sample s = group_sum 0.2 (fun r -> r.k) (fun r -> r.x) 0 50 db;\n'
           '  group_mean 0.3 (fun r -> r.k) (fun r -> r.x) 0 100 db }')
    r = check(src)
    assert eps(r) == F(6, 10)
    scales = sorted((m.sensitivity, m.scale) for m in r.mechanisms)
    assert scales == [(1, F(20, 3)), (1, 10), (50, 250), (100, F(2000, 3))]
