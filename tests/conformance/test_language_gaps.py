"""Programs found while writing the standard library and the conformance suite that the checker
once refused (conservatively: a rejection or an infinite bound, never unsound).  Fixed ones are
plain tests now; those still open are marked xfail(strict=True) and listed in
docs/conformance.md, "Gaps found"."""

from fractions import Fraction as F

from fuzzpy.checking.program import check_source

T = "schema T { x : num[0, 10] }\n"
MAIN = "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n"


def check(src: str):
    return check_source(src, "gap.fz")


def errors(r):
    return [(d.code, d.message) for d in r.diagnostics if d.severity == "error"]


def test_a_score_closure_passed_to_a_library_function_costs_its_uses():
    r = check(T + "function sel (eps : num) score : fuzzy num { noisy_max eps [1, 2] score }\n"
                  "function main (db : bag T) : fuzzy num { sel 1 (fun c -> count (filter (fun r -> r.x < c) db)) }")
    assert errors(r) == []
    assert r.epsilon == 1


def test_recursive_function_with_a_type_variable_in_its_return_type():
    r = check(T + "function append (xs : list 'a) (ys : list 'a) : list 'a "
                  "{ case xs of { [] => ys | h :: t => h :: append t ys } }\n"
                  "function app (xs : list num) (ys : list num) { append xs ys }\n" + MAIN)
    assert errors(r) == []
    assert {f.name: f.type for f in r.functions}["app"] == "list num -o list num -o list num"


def test_a_curried_function_parameter_applied_to_two_arguments():
    r = check(T + "function ap2 (f : num -> num -o num) (x : num) : num { f 1 x }\n" + MAIN)
    assert errors(r) == []
    assert {f.name: f.type for f in r.functions}["ap2"].endswith(" num -o num")  # 1-sensitive in x


def test_a_two_parameter_function_for_a_curried_function_type():
    r = check(T + "function ap1 (f : num -> num -o num) (x : num) : num { x }\n"
                  "function add (a : num) (b : num) : num { a + b }\n"
                  "function main (db : bag T) : fuzzy num { laplace 1 (ap1 add (count db)) }")
    assert errors(r) == []
    assert r.epsilon == 1


def test_a_constant_counter_in_a_recursion_over_a_non_constant_list():
    r = check(T + "function idx (xs : list num) (i : int) : int { case xs of { [] => i | h :: t => idx t (i + 1) } }\n"
                  "function g (xs : list num) { idx xs 0 }\n" + MAIN)
    assert errors(r) == []
    assert {f.name: f.type for f in r.functions}["g"] == "list num -o[0] int"


def test_a_released_value_among_the_candidates_of_the_next_round():
    r = check(T + "function main (db : bag T) : fuzzy num {\n"
                  "  sample w = noisy_max 1 [1, 2, 3] (fun c -> count (filter (fun r -> r.x < c) db));\n"
                  "  noisy_max 1 [w, 4] (fun c -> count (filter (fun r -> r.x < c) db)) }")
    assert errors(r) == []
    assert r.epsilon == 2


def test_a_released_clip_bound_is_refused_and_the_library_cases_over_public_candidates():
    """Not a gap but a rule: clip bounds are check-time constants (the noise of a sum is calibrated to
    them by the checker).  stdlib/adaptive.fz picks among public candidates instead, one constant per
    branch, and is charged the most expensive branch."""
    r = check(T + "function main (db : bag T) : fuzzy num {\n"
                  "  sample u = laplace 1 (count db);\n"
                  "  laplace 1 (sum (map (fun r -> clip 0 u r.x) db)) }")
    assert errors(r) == [("E0209", "clip bounds must be public constants (literals or params)")]
    r = check(T + 'import "stdlib/adaptive.fz"\nfunction main (db : bag T) : fuzzy num {\n'
                  "  adaptive_mean 1 1 5 0 [1, 5, 10] (map (fun r -> r.x) db) }")
    assert errors(r) == []
    assert r.epsilon == 2
    sums = sorted(m.sensitivity for m in r.mechanisms if m.name == "laplace" and m.function == "noisy_sum")
    assert sums == [1, 5, 10]  # one calibration per candidate bound
    assert F(2) == r.epsilon
