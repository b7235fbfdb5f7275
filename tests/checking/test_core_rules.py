"""The Fuzz typing rules: programs that must check with an exact bound, and programs that must be
rejected with a specific error."""

from fractions import Fraction as F

import pytest
from conftest import check, codes, eps, fn_type

T = 'schema T { x : num[0, 10], k : cat{"a", "b", "c"}, flag : bool }\n'
MAIN1 = 'function main (db : bag T) : fuzzy num { sample c = laplace 1 (count db); return c }\n'


def types(src: str) -> dict[str, str]:
    r = check(T + src + MAIN1)
    assert r.ok, [d.message for d in r.diagnostics]
    return {f.name: f.type for f in r.functions}


def test_x_plus_x_is_2_sensitive():
    assert types("function f (x : num) { x + x }")["f"] == "num -o[2] num"


def test_scaling_by_a_constant_multiplies():
    assert types("function f (x : num) { 3 * x - x / 2 }")["f"] == "num -o[3.5] num"


def test_twice_dup_is_4_sensitive():
    t = types("function dup (x : num) : num { x + x }\n"
              "function twice f (x : num) { f (f x) }\n"
              "function jazz (x : num) { twice dup x }")
    assert t["dup"] == "num -o[2] num"
    assert t["jazz"] == "num -o[4] num"


def test_with_pair_costs_one_tensor_pair_costs_two():
    t = types("function w (x : num) { (|x, x|) }\nfunction p (x : num) { (x, x) }")
    assert t["w"] == "num -o (|num, num|)"
    assert t["p"] == "num -o[2] (num, num)"


def test_tensor_destructuring_takes_the_max_of_components():
    t = types("function f (p : (num, num)) { let (a, b) = p; a + b }\n"
              "function g (p : (num, num)) { let (a, b) = p; a + a + b }")
    assert t["f"] == "(num, num) -o num"
    assert t["g"] == "(num, num) -o[2] num"


def test_branches_take_the_max():
    t = types("function f (c : bool) (x : num) (y : num) { if c then x + x else y }")
    assert t["f"] == "bool -o[0] num -o[2] num -o num"


def test_unannotated_function_gets_least_sensitivity():
    t = types("function f (x : num) (y : num) { let z = x + y; z + 2 * y }")
    assert t["f"] == "num -o num -o[3] num"


def test_unused_parameter_is_0_sensitive():
    assert types("function f (x : num) (y : num) { y }")["f"] == "num -o[0] num -o num"


def test_fuzzi_arithmetic_z_is_4_sensitive():
    t = types("function z (x : num) (y :[2] num) { 2 * x + y }")
    assert t["z"] == "num -o[2] num -o num"
    # with y itself 2-sensitive in the input, z = 2x + y is 4-sensitive in that input
    t = types("function z (i : num) { let x = i; let y = 2 * i; 2 * x + y }")
    assert t["z"] == "num -o[4] num"


def test_two_laplace_releases_add():
    r = check(T + "function main (db : bag T) : fuzzy num { sample a = laplace 0.1 (count db); "
              "sample b = laplace 0.2 (count db); return a + b }")
    assert eps(r) == F(3, 10)
    scales = [(m.sensitivity, m.epsilon, m.scale) for m in r.mechanisms]
    assert scales == [(1, F(1, 10), 10), (1, F(1, 5), 5)]


def test_laplace_on_count_charges_eps_with_scale_sensitivity_over_eps():
    r = check(T + "function main (db : bag T) : fuzzy num { laplace 0.1 (count db) }")
    assert eps(r) == F(1, 10)
    (m,) = r.mechanisms
    assert (m.sensitivity, m.epsilon, m.scale) == (1, F(1, 10), 10)


def test_laplace_on_clipped_sum_uses_the_bound():
    r = check(T + "function main (db : bag T) : fuzzy num { laplace 0.5 (sum (map (fun r -> clip 2 5 r.x) db)) }")
    assert eps(r) == F(1, 2)
    (m,) = r.mechanisms
    assert (m.sensitivity, m.scale) == (5, 10)


def test_laplace_inside_a_function_is_calibrated_locally_and_charged_per_use():
    r = check(T + "function nc (b : bag T) { laplace 0.1 (count b) }\n"
              "function main (db : bag T) : fuzzy num { sample a = nc db; sample b = nc (filter (fun r -> r.flag) db);"
              " return a + b }")
    assert fn_type(r, "nc") == "bag T -o[0.1] fuzzy num"
    assert eps(r) == F(1, 5)


def test_public_parameters_are_instantiated_before_checking():
    src = T + "param e : num = 0.25;\nfunction main (db : bag T) : fuzzy num { laplace e (count db) }"
    assert eps(check(src)) == F(1, 4)
    assert eps(check(src, params={"e": "0.5"})) == F(1, 2)


def test_annotation_too_small_is_rejected_with_the_uses_listed():
    r = check(T + "function f (x :[2] num) : num { x + x + x }\n" + MAIN1)
    assert codes(r) == ["E0301"]
    d = r.diagnostics[0]
    assert "x is used with sensitivity 3, but its annotation allows 2" in d.message
    assert any("used 3 times" in n for n in d.notes)
    assert (d.span.line, d.span.col) == (2, 12)


def test_branching_on_a_private_number_to_choose_a_release_is_infinite():
    # Adaptive Fuzz's test: must be refused.
    r = check(T + "function main (db : bag T) : fuzzy num { if count db > 5 then laplace 1 (count db) "
              "else laplace 1 (count db) }")
    assert r.epsilon == float("inf")
    assert codes(r) == ["E0302"]
    d = r.diagnostics[0]
    assert "main is not differentially private in db" in d.message
    # The caret is on the condition (`count db > 5`), the reason the first note; main in another.
    assert "condition depends on private data" in d.notes[0]
    assert (d.span.file, d.span.line, d.span.col) == ("test.fz", 2, 45)
    assert any("main is declared at test.fz:2:" in n for n in d.notes)


def test_returning_a_private_value_without_noise_is_infinite():
    r = check(T + "function main (db : bag T) : fuzzy num { return count db }")
    assert r.epsilon == float("inf") and codes(r) == ["E0302"]
    assert "returned without noise" in r.diagnostics[0].notes[0]


def test_branching_on_a_released_value_is_free():
    r = check(T + "function main (db : bag T) : fuzzy num { sample c = laplace 1 (count db); "
              "if c > 5 then return 1 else return 0 }")
    assert eps(r) == 1


def test_ill_typed_application_is_rejected():
    r = check(T + "function f (x : num) : num { x }\n"
              'function main (db : bag T) : fuzzy num { laplace 1 (f "text") }')
    assert codes(r) == ["E0202"]
    assert "expected num" in r.diagnostics[0].message


def test_applying_a_non_function_is_rejected():
    r = check(T + "function main (db : bag T) : fuzzy num { laplace 1 (3 4) }")
    assert codes(r) == ["E0203"]


def test_missing_schema_column_is_rejected_with_the_columns_listed():
    r = check(T + "function main (db : bag T) : fuzzy num { laplace 1 (sum (map (fun r -> clip 0 1 r.age) db)) }")
    assert codes(r) == ["E0205"]
    assert "has no field 'age'" in r.diagnostics[0].message
    assert "x, k, flag" in r.diagnostics[0].notes[0]


def test_unknown_name_suggests_a_near_match():
    r = check(T + "function main (db : bag T) : fuzzy num { laplace 1 (cuont db) }")
    assert codes(r) == ["E0201"]
    assert "did you mean count" in r.diagnostics[0].notes[0]


def test_several_independent_errors_are_all_reported():
    r = check(T + "function a (x : num) { x + y }\nfunction b (x : num) { x + + }\n"
              "function c (x : num) { x + true }\n" + MAIN1)
    assert sorted(codes(r)) == ["E0101", "E0201", "E0202"]


def test_sum_of_unbounded_values_is_rejected_with_a_hint():
    r = check('schema U { v : num }\nfunction main (db : bag U) : fuzzy num { laplace 1 (sum (map (fun r -> r.v) db)) }')
    assert codes(r) == ["E0305"]
    assert "clip" in r.diagnostics[0].notes[0]


def test_private_epsilon_is_rejected():
    r = check(T + "function main (db : bag T) : fuzzy num { laplace (count db) (count db) }")
    assert codes(r) == ["E0209"]


def test_filter_predicate_capturing_private_data_is_rejected():
    r = check(T + "function main (db : bag T) : fuzzy num { let n = count db; "
              "laplace 1 (count (filter (fun r -> r.x < n) db)) }")
    assert codes(r) == ["E0305"]


def test_entry_point_must_return_a_distribution():
    r = check(T + "function main (db : bag T) : num { count db }")
    assert codes(r) == ["E0202"]
    assert "must return a distribution" in r.diagnostics[0].message


def test_missing_entry_point():
    r = check(T + "function f (x : num) { x }")
    assert codes(r) == ["E0207"]


def test_recursion_gets_least_sensitivity_from_the_lp():
    t = types("function sumlist (xs : list num) : num { case xs of { [] => 0 | h :: t => h + sumlist t } }\n"
              "function scaled (xs : list num) : num { case xs of { [] => 0 | h :: t => 2 * h + sumlist t } }")
    assert t["sumlist"] == "list num -o num"
    assert t["scaled"] == "list num -o[2] num"


def test_recursion_that_grows_without_bound_is_infinite():
    t = types("function grow (b : bag T) (xs : list num) : fuzzy num { case xs of { [] => return 0 "
              "| h :: t => sample c = laplace 1 (count b); grow b t } }")
    assert t["grow"].startswith("bag T -> list num")


def test_recursive_function_needs_a_return_type():
    r = check(T + "function f (x : num) (xs : list num) { case xs of { [] => x | h :: t => f x t } }\n" + MAIN1)
    assert codes(r) == ["E0212"]


def test_recursion_on_public_constants_is_unrolled_exactly():
    src = T + ("function cum (b : bag T) (bounds : list num) : fuzzy (list num) { case bounds of { [] => return [] "
               "| h :: t => sample c = laplace 1 (count (filter (fun r -> r.x < h) b)); sample rest = cum b t; "
               "return (c :: rest) } }\n"
               "function main (db : bag T) : fuzzy (list num) { cum db [1, 2, 3, 4, 5, 6, 7] }")
    assert eps(check(src)) == 7


def test_duplicate_declarations_are_rejected():
    r = check(T + "function f (x : num) { x }\nfunction f (x : num) { x }\n" + MAIN1)
    assert codes(r) == ["E0206"]


def test_unknown_cli_parameter_is_reported():
    r = check(T + "param e : num = 1;\n" + MAIN1, params={"eps": "1"})
    assert "E0211" in codes(r)


@pytest.mark.parametrize("bad", ["1 +", "fun", "(1, 2", '"unterminated', "let x = 3", "[1, 2", "{ a = 1"])
def test_malformed_parameter_values_are_diagnostics(bad):
    r = check(T + "param e : num = 1;\n" + MAIN1, params={"e": bad})
    assert [d.code for d in r.diagnostics] == ["E0702"]  # one error, no cascade into the program's uses
    assert r.diagnostics[0].message.startswith("malformed value for --param e: ")


def test_insertion_sort_with_conditional_swap_is_1_sensitive():
    # Spar / Fuzz: sorting is non-expansive; built from the 1-sensitive cswap.
    t = types("function insert (x : num) (xs : list num) : list num {\n"
              "  case xs of { [] => [x] | h :: t => let (a, b) = cswap (x, h); a :: insert b t } }\n"
              "function isort (xs : list num) : list num { case xs of { [] => [] | h :: t => insert h (isort t) } }")
    assert t["insert"] == "num -o list num -o list num"
    assert t["isort"] == "list num -o list num"


def test_branch_max_compares_a_part_with_its_whole():
    # One branch uses the parts of a split, the other the whole: the max is 1, not 2.
    t = types("function f (c : bool) (p : (num, num)) { if c then (let (a, b) = p; a + b) else p.1 }")
    assert t["f"] == "bool -o[0] (num, num) -o num"


def test_min_max_are_1_sensitive_in_each_argument():
    t = types("function f (x : num) (y : num) { max x y + min x 3 }")
    assert t["f"] == "num -o[2] num -o num"


def test_a_mistyped_argument_names_the_parameter_and_the_declaration_that_fixes_it():
    """Issue 38: `expected int, but this argument is num[9, 9]` named neither the parameter nor the
    fix; the error says which parameter of which function, and how to declare the program's
    parameter passed to it."""
    src = T + "param iters : num = 9;\n" + \
        "function loop (n : int) (db : bag T) : fuzzy num { laplace 1 (count db) }\n" + \
        "function main (db : bag T) : fuzzy num { loop iters db }\n"
    [d] = check(src).diagnostics
    assert d.code == "E0202" and d.message == "expected int for parameter n of loop, but this argument is num[9, 9]"
    assert d.notes == ["if this is the parameter 'iters', declare it as int: `param iters : int = 9`"]
    assert check(src.replace("param iters : num = 9", "param iters : int = 9")).ok
    [d] = check(src.replace("loop iters db", "loop 2.5 db")).diagnostics  # not a parameter: no declaration
    assert d.message.startswith("expected int for parameter n of loop") and d.notes == []
