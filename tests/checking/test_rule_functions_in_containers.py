"""Rule Functions in containers (docs/soundness.md): a tuple, record or list keeps the function
values it is built of, so that a function stored in it and taken out again (a projection, a field,
a tuple pattern, the head of a list) is applied as the function itself; a function of a declared
type whose container lost it is applied by its type.

Issue 37 (false rejects): `let fs = (f, g); fs.1 x`, `{fit = f}.fit x` and the head of a list of
functions were E0203.  The attacks: a container whose function is swapped for a more sensitive one
in a branch (released or private), a closure that captures the table, a container given to a
function, a closure taken out of a tuple and used at every level of a recursion.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import exactly, make_tables, refused, refused_report, violations

MAIN = "function main (db : bag T) : fuzzy num "
F1 = "let f = fun t -> laplace 1 (count t); let g = fun t -> laplace 2 (count t); "
DECLARED = ("let f = (fun t -> laplace 1 (count t) : bag T -o[1] fuzzy num); "
            "let g = (fun t -> laplace 2 (count t) : bag T -o[2] fuzzy num); ")


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


@pytest.mark.parametrize("body, epsilon", [
    ("let fs = (f, g); fs.1 db", 1),
    ("let fs = (f, g); fs.2 db", 2),
    ("let fs = (|f, g|); fs.2 db", 2),
    ("let fs = {fit = f, other = g}; fs.fit db", 1),
    ("{fit = g}.fit db", 2),
    ("let (a, b) = (f, g); sample x = a db; b db", 3),
    ("let fs = [f, f]; case fs of { [] => return 0 | h :: t => h db }", 1),
], ids=["tuple", "tuple-second", "with-pair", "record", "record-literal", "pattern", "list-same"])
def test_a_closure_taken_out_of_a_container_is_charged_as_the_closure(body, epsilon, tables):
    r = exactly(MAIN + "{ " + F1 + body + " }", epsilon, None)
    assert violations(r, tables) == []


@pytest.mark.parametrize("body, epsilon", [
    ("let fs = [f, g]; case fs of { [] => return 0 | h :: t => h db }", 2),       # the join: the larger
    ("let fs = [f]; case fs of { [] => return 0 | h :: t => h db }", 1),
    ("let fs = f :: []; case fs of { [] => return 0 | h :: t => h db }", 1),
    ("let fs = (f, 0); fs.1 db", 1),
], ids=["list-join", "list-one", "cons", "tuple"])
def test_a_function_of_a_declared_type_in_a_container_keeps_its_type(body, epsilon, tables):
    r = exactly(MAIN + "{ " + DECLARED + body + " }", epsilon)
    assert violations(r, tables) == []


def test_a_closure_that_captures_the_table_is_charged_at_its_application():
    exactly(MAIN + "{ let h = fun t -> laplace 1 (count db + count t); let fs = (h, 0); fs.1 db }", 2, [1])
    exactly(MAIN + "{ let h = fun t -> laplace 1 (count db + count t); let fs = (h, h); sample a = fs.1 db; fs.2 db }",
            4)


def test_a_function_swapped_for_a_more_sensitive_one_in_a_released_branch_is_charged_the_larger():
    """1 for the released condition, then the larger of the two functions (2)."""
    exactly(MAIN + "{ sample c = laplace 1 (count db); " + DECLARED + "let fs = if c > 3 then (f, 0) else (g, 0); "
            "fs.1 db }", 3)
    exactly(MAIN + "{ sample c = laplace 1 (count db); " + DECLARED + "let fs = if c > 3 then (f, 0) else (f, 0); "
            "fs.1 db }", 2)


def test_a_function_swapped_in_a_private_branch_stays_refused():
    refused_report(MAIN + "{ " + DECLARED + "let fs = if count db > 3 then (f, 0) else (g, 0); fs.1 db }", "E0302")


def test_closures_without_a_declared_type_chosen_by_a_branch_stay_refused():
    """The branch keeps no closure: the component is known by no type either (E0203, with the fix)."""
    notes = refused(MAIN + "{ sample c = laplace 1 (count db); " + F1
                    + "let fs = if c > 3 then (f, 0) else (g, 0); fs.1 db }", "E0203")
    assert any("declared type" in n for n in notes)


def test_a_declared_function_in_a_tuple_given_to_a_function_is_applied_by_its_type(tables):
    use = "function use (fs : (bag T -o[1] fuzzy num, num)) (t : bag T) : fuzzy num { fs.1 t }\n"
    r = exactly(use + MAIN + "{ " + DECLARED + "use (f, 0) db }", 1)
    assert violations(r, tables) == []
    # The type allows 1: the more sensitive g does not fit it.
    refused(use + MAIN + "{ " + DECLARED + "use (g, 0) db }", "E0202")


def test_a_declared_function_capturing_the_table_in_a_tuple_given_to_a_function_pays_its_capture():
    use = "function use (fs : (bag T -o[1] fuzzy num, num)) (t : bag T) : fuzzy num { fs.1 t }\n"
    h = "let h = (fun t -> laplace 1 (count db + count t) : bag T -o[1] fuzzy num); "
    exactly(use + MAIN + "{ " + h + "use (h, 0) db }", 2)


def test_a_closure_in_a_tuple_given_to_a_function_says_to_declare_its_type():
    use = "function use fs (t : bag T) : fuzzy num { fs.1 t }\n"
    notes = refused(use + MAIN + "{ " + F1 + "use (f, 0) db }", "E0203")
    assert any("declared type" in n for n in notes)


def test_a_closure_taken_out_of_a_tuple_into_an_unbounded_recursion_stays_infinite():
    rep = "function rep f (n : num) : num { if n <= 0 then 0 else f 0 + rep f (n - 1) }\n"
    refused_report(rep + MAIN + "{ sample n = laplace 1 1000; let p = (fun x -> count db, 1); laplace 1 (rep p.1 n) }",
                   "E0305")


def test_a_closure_from_a_tuple_in_a_counted_loop_is_charged_per_level():
    loop = ("function loop (i : int) (fs : (bag T -o[1] fuzzy num, num)) (db : bag T) : fuzzy num {\n"
            "  if i <= 0 then return 0 else (sample v = fs.1 db; loop (i - 1) fs db) }\n")
    exactly(loop + MAIN + "{ " + DECLARED + "loop 3 (f, 0) db }", 3)


def test_the_exact_fraction_of_a_stored_function():
    exactly(MAIN + "{ let f = fun t -> laplace 0.3 (count t); let fs = { fit = f }; fs.fit db }", F(3, 10), [1])
