"""A string constant compared with a category must be one of its declared values (E0214).

`filter (fun r -> r.sex == "female") db` with `sex : cat{"Male", "Female"}` used to check and
run, releasing noise around 0: "female" can never equal a value of the column.  The rule lives
in the eq/ne primitives (fuzzpy/primitives/arith.py); these tests try to get around it.
"""

from __future__ import annotations

import pytest
from conftest import check, codes, eps
from typer.testing import CliRunner

SCHEMA = ('schema A { sex : cat{"Male", "Female"}, race : cat{"White", "Black", "Other"}, '
          "age : num[0, 100], name : string }\n")
runner = CliRunner()


def program(body: str, ret: str = "fuzzy num") -> str:
    return SCHEMA + f"function main (db : bag A) : {ret} {{\n  {body}\n}}\n"


def count_where(pred: str) -> str:
    return program(f"laplace 1 (count (filter (fun r -> {pred}) db))")


def the_error(source: str, **kw):
    report = check(source, **kw)
    errors = [d for d in report.diagnostics if d.severity == "error"]
    assert [d.code for d in errors] == ["E0214"], [(d.code, d.message) for d in errors]
    return errors[0]


def text_at(source: str, span) -> str:
    line = source.splitlines()[span.line - 1]
    return line[span.col - 1:span.end_col - 1]


@pytest.mark.parametrize("pred", ['r.sex == "female"', '"female" == r.sex', '(r.sex == "female")',
                                  'r.age > 30 && r.sex == "female"', '!(r.sex == "female")'])
def test_a_misspelled_category_is_an_error_in_either_order(pred):
    source = count_where(pred)
    d = the_error(source)
    assert d.message == '"female" is not a value of the category cat{"Male", "Female"}, so this comparison never holds'
    assert 'did you mean "Female"?' in d.notes
    assert 'the declared values are "Male", "Female"' in d.notes
    assert text_at(source, d.span) == '"female"'


def test_not_equal_says_it_always_holds():
    d = the_error(count_where('r.sex != "female"'))
    assert d.message.endswith("so this comparison always holds")
    d = the_error(count_where('"femal" != r.sex'))
    assert 'did you mean "Female"?' in d.notes


@pytest.mark.parametrize("pred", ['r.sex == "Female"', '"Male" != r.sex', 'r.name == "female"',
                                  'r.sex == r.sex', '(r.sex, r.race) == ("Female", "Other")'])
def test_declared_values_and_strings_are_fine(pred):
    assert eps(check(count_where(pred))) == 1


def test_the_suggestion_prefers_the_same_word_in_another_case():
    d = the_error(count_where('r.race == "BLACK"'))
    assert d.notes[0] == 'did you mean "Black"?'
    d = the_error(count_where('r.race == "Whit"'))
    assert d.notes[0] == 'did you mean "White"?'


def test_no_suggestion_when_nothing_is_close():
    d = the_error(count_where('r.race == "Asian-Pac-Islander"'))
    assert not any(n.startswith("did you mean") for n in d.notes)
    assert 'the declared values are "White", "Black", "Other"' in d.notes


def test_a_long_category_is_shortened_in_the_message():
    values = ", ".join(f'"v{i}"' for i in range(30))
    source = (f"schema B {{ k : cat{{{values}}} }}\n"
              "function main (db : bag B) : fuzzy num { laplace 1 (count (filter (fun r -> r.k == \"v30\") db)) }\n")
    d = the_error(source)
    assert "cat{...}" in d.message and d.notes[-1].endswith(", ...")
    assert 'did you mean "v3"?' in d.notes


@pytest.mark.parametrize("body, ret", [
    ('let (f, m) = split (fun r -> r.sex == "female") db;\n  laplace 1 (count f + count m)', "fuzzy num"),
    ('each (fun g -> laplace 1 (count g)) (groupby (fun r -> if r.sex == "female" then "F" else r.race) db)',
     'fuzzy (parts {"White", "Black", "Other"} num)'),
    ('laplace 1 (sum (map (fun r -> if r.sex == "female" then 1 else 0) db))', "fuzzy num"),
])
def test_inside_split_groupby_and_map(body, ret):
    report = check(program(body, ret))
    assert "E0214" in codes(report), [(d.code, d.message) for d in report.diagnostics]


def test_inside_a_split_predicate():
    source = program('let (f, m) = split (fun r -> r.sex == "femme") db;\n  laplace 1 (count f)')
    d = the_error(source)
    assert text_at(source, d.span) == '"femme"'


def test_inside_a_groupby_key_and_a_partition():
    source = program("each (fun g -> laplace 1 (count (filter (fun r -> r.race == \"white\") g)))\n"
                     "    (groupby (fun r -> r.sex) db)", 'fuzzy (parts {"Male", "Female"} num)')
    assert 'did you mean "White"?' in the_error(source).notes


@pytest.mark.parametrize("pred, literal", [
    ('(r.sex, r.race) == ("Female", "white")', "white"),          # a constant tuple
    ('("male", "Other") == (r.sex, r.race)', "male"),             # the other order
    ('(r.sex, r.age) == ("female", r.age)', "female"),            # a tuple that is not constant
    ('(|r.sex, r.race|) == (|"Female", "black"|)', "black"),      # a with-pair
    ('{s = r.sex} == {s = "mal"}', "mal"),                        # a record
    ('[r.sex, r.sex] == ["Male", "fem"]', "fem"),                 # a list
    ('inl r.sex == inl "Femal"', "Femal"),                        # a sum
])
def test_inside_tuples_records_lists_and_sums(pred, literal):
    d = the_error(count_where(pred))
    assert d.message.startswith(f'"{literal}" is not a value of the category')


def test_a_param_or_a_constant_argument_is_checked_where_it_is_compared():
    source = SCHEMA + 'param who : string = "female";\n' + program_body('r.sex == who')
    d = the_error(source)
    assert 'did you mean "Female"?' in d.notes
    assert eps(check(source, params={"who": '"Female"'})) == 1
    helper = (SCHEMA + "function count_is (v : string) (db : bag A) : num { count (filter (fun r -> r.sex == v) db) }\n"
              'function main (db : bag A) : fuzzy num { laplace 1 (count_is "female" db) }\n')
    d = the_error(helper)
    assert any("in the use of count_is" in n for n in d.notes)


def program_body(pred: str) -> str:
    return f"function main (db : bag A) : fuzzy num {{ laplace 1 (count (filter (fun r -> {pred}) db)) }}\n"


def test_run_refuses_it_before_reading_data_or_charging(tmp_path):
    from fuzzpy.interfaces.cli import app

    prog = tmp_path / "p.fz"
    prog.write_text(count_where('r.sex == "female"'))
    data = tmp_path / "d.csv"
    data.write_text("sex,race,age,name\nFemale,White,30,x\n")
    book = tmp_path / "ledger.sqlite"
    res = runner.invoke(app, ["run", str(prog), "--data", str(data), "--budget", "1", "--ledger", str(book)])
    assert res.exit_code == 1 and "error[E0214]" in res.stderr and 'did you mean "Female"?' in res.stderr
    assert not book.exists()
