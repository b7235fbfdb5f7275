"""Hints (fuzzpy/hints.py): each fires on the mistake it names, with its code and location, and
not on a near miss; E0302's caret is on the expression that makes main unbounded; an error in
the user's lambda given to a stdlib function is one error at the user's code."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import check
from typer.testing import CliRunner

from fuzzpy.diagnostics import HELP, render
from fuzzpy.hints import HINTS
from fuzzpy.interfaces.cli import app
from fuzzpy.render.sarif import message_text
from fuzzpy.stdlib_location import STDLIB

HEAD = ('import "stdlib/stats.fz"\n'
        'schema Adult { age : num[17, 90], sex : cat{"Male", "Female"}, hours : num[1, 99] }\n'
        'param eps : num = 0.1;\n')  # three lines: main starts on line 4


def main(*body: str, ret: str = "fuzzy num") -> str:
    return HEAD + f"function main (db : bag Adult) : {ret} {{\n" + "".join(f"  {b}\n" for b in body) + "}\n"


def helps(d) -> list[str]:
    return [n for n in d.notes if n.startswith(HELP)]


def only(src: str):
    r = check(src)
    assert len(r.diagnostics) == 1, [(d.code, d.message) for d in r.diagnostics]
    return r.diagnostics[0]


def at(d) -> tuple[int, int]:
    return d.span.line, d.span.col


# ---- `=` for `==` ------------------------------------------------------------------------------

def test_single_equals_in_a_comparison_gets_the_double_equals_hint():
    d = only(main('laplace eps (count (filter (fun r -> r.sex = "Male") db))'))
    assert d.code == "E0101" and at(d) == (5, 46)
    assert helps(d) == [HELP + HINTS["compare-with-=="].text] and "write `==`" in helps(d)[0]


@pytest.mark.parametrize("body", ["let = 3;", "let x == 3; x"])
def test_equals_that_is_not_a_comparison_gets_no_hint(body):
    d = only(HEAD + "function f (x : num) {\n  " + body + "\n}\n")
    assert d.code == "E0101" and helps(d) == []


# ---- a missing `;` -----------------------------------------------------------------------------

def test_missing_semicolon_after_sample_points_at_its_line():
    d = only(main("sample n = laplace eps (count db)", "return n"))
    assert d.code == "E0101" and at(d) == (7, 1)  # the parser stops at the closing brace...
    assert helps(d) == [HELP + "`let` and `sample` bindings and `param` declarations end with `;`: "
                        "add one at the end of line 5"]  # ...the help names the binding's line


def test_missing_semicolon_before_the_next_let_is_not_the_equals_hint():
    d = only(main("let a = count db", "let b = a + 1;", "laplace eps b"))
    assert d.code == "E0101" and at(d) == (6, 9)
    assert len(helps(d)) == 1 and helps(d)[0].endswith("add one at the end of line 5")


def test_missing_semicolon_after_a_multiline_binding_and_after_a_param():
    d = only(main("sample n = laplace eps (sum (map (fun r ->", "    r.age) db))", "return n"))
    assert helps(d)[0].endswith("at the end of line 6")
    d = only('param eps : num = 0.1\n\nschema A { a : num[0, 1] }\n'
             'function main (db : bag A) : fuzzy num { laplace 1 (count db) }\n')
    assert d.code == "E0102" and helps(d)[0].endswith("at the end of line 1")


@pytest.mark.parametrize("body", [("laplace eps (count db)",),           # a missing `}` only
                                  ("let y = (count db)); laplace eps y",)])  # one `)` too many
def test_other_syntax_errors_get_no_semicolon_hint(body):
    src = main(*body)
    if body[0].startswith("laplace"):
        src = src.rstrip().rstrip("}")
    d = only(src)
    assert d.code in ("E0101", "E0102") and helps(d) == []


# ---- a missing `sample` ------------------------------------------------------------------------

def test_let_bound_mechanism_used_as_a_number_gets_the_sample_hint():
    d = only(main("let n = laplace eps (count db);", "let t = laplace eps (sum (map (fun r -> r.age) db));",
                  "return (t / n)"))
    assert d.code == "E0202" and d.message == "operator / expects a number, but this is fuzzy num"
    assert at(d) == (7, 11)
    assert helps(d) == [HELP + HINTS["missing-sample"].text] and "`sample x = laplace" in helps(d)[0]
    d = only(main("let n = laplace eps (count db);", "if n > 5 then return 1 else return 0"))
    assert d.code == "E0202" and helps(d) == [HELP + HINTS["missing-sample"].text]


def test_a_distribution_given_to_laplace_or_returned_in_a_tuple_gets_the_sample_hint():
    d = only(main("let n = laplace eps (count db);", "laplace eps n"))
    assert d.code == "E0202" and at(d) == (6, 15) and helps(d) == [HELP + HINTS["missing-sample"].text]
    d = only(main("let n = laplace eps (count db);", "return (n, 1)", ret="fuzzy (num, num)"))
    assert d.code == "E0202" and "main returns fuzzy (fuzzy num" in d.message
    assert helps(d) == [HELP + HINTS["missing-sample"].text]
    d = only(main("laplace eps (count db, count db)", ret="fuzzy (num, num)").replace("(count db, count db)",
                                                                                      "(| count db, count db |)"))
    assert d.code == "E0202" and helps(d) == [] and "with-pairs" in d.notes[0]  # not a distribution


def test_a_boolean_used_as_a_number_gets_no_sample_hint():
    d = only(main("sample n = laplace eps (count db);", "return ((n > 5) / 2)"))
    assert d.code == "E0202" and "but this is bool" in d.message and helps(d) == []


# ---- dividing by a private count ---------------------------------------------------------------

def test_dividing_by_a_private_count_points_to_noisy_mean():
    d = only(main("laplace eps (sum (map (fun r -> r.age) db) / count db)"))
    assert d.code == "E0305" and at(d) == (5, 16)
    assert helps(d) == [HELP + "the divisor at line 5 is private: release the sum and the count with their own "
                        "mechanisms and divide the released values (noisy_mean in stdlib/stats.fz does this; "
                        "group_mean in stdlib/groups.fz per group)"]


def test_unbounded_for_another_reason_gets_no_divisor_hint():
    # A row function dividing by its own row is fine; the argument is unbounded by the branch.
    d = only(main("let q = count (filter (fun r -> r.age / r.hours > 1) db);",
                  "laplace eps (if count db > 5 then q else 0)"))
    assert d.code == "E0305" and helps(d) == []
    assert check(main("laplace eps (count db / 2)")).ok  # a public divisor: no error at all


# ---- clipping with a released bound ------------------------------------------------------------

def test_clipping_with_a_released_bound_points_to_adaptive():
    d = only(main("sample hi = laplace eps (count db);", "laplace eps (sum (map (fun r -> clip 0 hi r.age) db))"))
    assert d.code == "E0209" and at(d) == (6, 42)
    assert helps(d) == [HELP + HINTS["released-clip-bound"].text] and "stdlib/adaptive.fz" in helps(d)[0]


def test_clipping_with_a_private_bound_gets_no_adaptive_hint():
    d = only(main("laplace eps (sum (map (fun r -> clip 0 (count db) r.age) db))"))
    assert d.code == "E0209" and helps(d) == []


# ---- E0302: the caret on the offending expression ----------------------------------------------

UNBOUNDED = main("let old = filter (fun r -> if r.age > 50 then true else false) db;",  # a row branch: fine
                 "sample a = laplace eps (count old);",
                 "return (count db + a)")


def test_e0302_caret_is_on_the_expression_not_on_main():
    d = only(UNBOUNDED)
    assert d.code == "E0302" and at(d) == (7, 3) and (d.span.end_line, d.span.end_col) == (7, 23)
    assert d.notes[0] == "a private value is returned without noise"
    assert "main is declared at test.fz:4:10" in d.notes
    assert not any("5:" in n for n in d.notes)  # the row function's branch is no origin


def test_e0302_caret_is_never_in_a_function_main_does_not_use_that_way():
    # helper leaks, but main only uses it... not at all: the caret is on main's own condition.
    src = main("sample a = laplace eps (count db);", "if count db > 3 then return a else return 0")
    d = only(src.replace("function main", "function helper (b : bag Adult) : fuzzy num { return (count b) }\n"
                         "function main"))
    assert d.code == "E0302" and at(d) == (7, 6) and "condition depends on private data" in d.notes[0]


def test_e0302_location_in_cli_text_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    Path("unb.fz").write_text(UNBOUNDED)
    runner = CliRunner()
    text = runner.invoke(app, ["check", "unb.fz"])
    assert text.exit_code != 0
    assert "--> unb.fz:7:3\n" in text.output and "7 |   return (count db + a)\n" in text.output
    assert "  |   ^^^^^^^^^^^^^^^^^^^^\n" in text.output
    out = runner.invoke(app, ["check", "--format", "json", "unb.fz"]).stdout
    diag = json.loads(out)["diagnostics"][0]
    assert diag["code"] == "E0302"
    assert diag["location"] == {"file": "unb.fz", "line": 7, "col": 3, "end_line": 7, "end_col": 23}


def test_e0302_of_a_division_gets_the_divisor_hint():
    r = check(main("sample a = laplace eps (count db);", "return (a + sum (map (fun r -> r.age) db) / count db)"))
    d = next(d for d in r.diagnostics if d.code == "E0302")
    assert at(d) == (6, 15) and d.notes[0] == "dividing by a private value has unbounded sensitivity"
    assert len(helps(d)) == 1 and helps(d)[0].startswith(HELP + "the divisor at line 6 is private: release")


# ---- no notes into the stdlib for the user's own lambda ----------------------------------------

@pytest.mark.parametrize("body, code, where, note", [
    ("noisy_mean eps 0 100 (map (fun r -> r.agee) db)", "E0205", (5, 41), "did you mean age?"),
    ("laplace eps (count_where (fun r -> r.sexx == \"Male\") db)", "E0205", (5, 40), "did you mean sex?"),
    ("histogram eps (fun r -> agee) db", "E0201", (5, 27), "did you mean r.age?"),
])
def test_a_typo_in_a_lambda_given_to_the_stdlib_is_one_error_at_the_users_code(body, code, where, note):
    ret = "fuzzy num" if "histogram" not in body else 'fuzzy (parts {"Male", "Female"} num)'
    d = only('import "stdlib/bags.fz"\n' + main(body, ret=ret))  # one more line: main's body on line 6
    assert d.code == code and (d.span.file, d.span.line, d.span.col) == ("test.fz", where[0] + 1, where[1])
    # No "in the use of a function at .../stdlib/..." notes: one note, the suggestion (which may
    # also name a primitive spelled alike, e.g. `range` for `agee`).
    assert len(d.notes) == 1 and d.notes[0].removesuffix("?").startswith(note.removesuffix("?"))


def test_an_argument_that_does_not_fit_inside_the_stdlib_is_shown_at_the_users_call():
    d = only(main("sample m = noisy_mean eps 0 100 (map (fun r -> r.age) db);",
                  "noisy_mean eps 0 m (map (fun r -> r.age) db)"))
    assert d.code == "E0209" and (d.span.file, d.span.line, d.span.col) == ("test.fz", 6, 3)
    assert helps(d) == [HELP + HINTS["released-clip-bound"].text]
    inside = [n for n in d.notes if n.startswith("the error is at stdlib/bags.fz:")]
    assert len(inside) == 1 and inside[0].endswith("reached through noisy_mean")
    assert not any(str(STDLIB.resolve()) in n for n in d.notes)  # no absolute paths


# ---- every output carries the hint -------------------------------------------------------------

def test_hint_reaches_text_sarif_and_language_server():
    from fuzzpy.interfaces.lsp.server import create_server

    d = only(main("sample hi = laplace eps (count db);", "laplace eps (sum (map (fun r -> clip 0 hi r.age) db))"))
    assert "\n  = help: a released value is public" in render(d)
    assert "\nhelp: a released value is public" in message_text(d)
    server = create_server()
    lsp = server.to_lsp(d, SimpleNamespace(file="test.fz"), [""] * 10)
    assert "\nhelp: a released value is public" in lsp.message and "note: help" not in lsp.message


def test_budget_notes_show_stdlib_places_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    Path("bud.fz").write_text(main("noisy_mean 1 0 100 (map (fun r -> r.age) db)"))
    out = CliRunner().invoke(app, ["check", "--budget", "0.5", "bud.fz"]).output
    assert "error[E0401]" in out and "= note: laplace at stdlib/stats.fz:" in out
    assert " at /" not in out  # no absolute path into the installed standard library


def test_the_mechanism_list_shows_stdlib_places_relative_and_json_keeps_the_real_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    Path("mech.fz").write_text(main("noisy_mean 1 0 100 (map (fun r -> r.age) db)"))
    out = CliRunner().invoke(app, ["check", "--no-cache", "mech.fz"]).output
    lines = [x.strip() for x in out.splitlines() if ": sensitivity " in x]
    assert lines and all(x.startswith("stdlib/stats.fz:") for x in lines), out
    report = json.loads(CliRunner().invoke(app, ["check", "--no-cache", "--format", "json", "mech.fz"]).stdout)
    files = {m["location"]["file"] for m in report["mechanisms"]}
    assert files and all(Path(f).is_absolute() and Path(f).is_file() for f in files), files  # editors open it


def test_a_param_that_does_not_parse_is_one_error_not_unknown_names_at_its_uses():
    src = ('param eps : num = 0.1\nschema A { a : num[0, 1] }\n'
           'function main (db : bag A) : fuzzy num { laplace eps (count db) }\n')
    d = only(src)
    assert d.code == "E0102" and helps(d)[0].endswith("at the end of line 1")
    r = check(src.replace("laplace eps", "laplace epz"))  # a real unknown name is still reported
    assert [x.code for x in r.diagnostics] == ["E0102", "E0201"] and "'epz'" in r.diagnostics[1].message
