"""No input, however malformed, may end in anything but the project's own diagnostics."""

from __future__ import annotations

import random

from conftest import check, codes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

GOOD = '''schema T { x : num[0, 10], k : cat{"a", "b"} }
param e : num = 0.5;
function dup (x : num) : num { x + x }
function main (db : bag T) : fuzzy (num, num) {
  let g = groupby (fun r -> r.k) db;
  sample a = laplace e (count (filter (fun r -> r.x > 3 && !(r.k == "a")) db));
  sample b = laplace 1 (sum (map (fun r -> clip 0 5 (dup r.x)) g.a));
  return (a, if b > 2 then b else -b)
}
'''
TOKENS = ["function", "schema", "param", "let", "sample", "return", "if", "then", "else", "fun", "case", "of",
          "inl", "inr", "(", ")", "{", "}", "[", "]", "(|", "|)", ",", ";", ":", "=", "->", "-o", "=>", "|",
          "+", "-", "*", "/", "<", "==", "&&", "||", "!", "::", ".", "x", "db", "main", "count", "laplace",
          "1", "0.5", '"s"', "bag", "num", "fuzzy", "T", "#c\n", "\n", " "]


def _no_crash(source: str) -> None:
    r = check(source)  # must return, never raise
    for d in r.diagnostics:
        assert d.code.startswith("E") and len(d.code) == 5


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_random_text_never_crashes(text):
    _no_crash(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=60))
def test_random_token_soup_never_crashes(tokens):
    _no_crash(" ".join(tokens))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=4))
def test_mutated_programs_never_crash(seed, n_mutations):
    rng = random.Random(seed)
    chars = list(GOOD)
    for _ in range(n_mutations):
        i = rng.randrange(len(chars))
        op = rng.randrange(3)
        if op == 0:
            del chars[i]
        elif op == 1:
            chars.insert(i, rng.choice("(){}[];:,.+-*/<>=!|&#\"'x0 \n"))
        else:
            j = rng.randrange(len(chars))
            chars[i], chars[j] = chars[j], chars[i]
    _no_crash("".join(chars))


def test_the_unmutated_program_checks():
    r = check(GOOD)
    assert r.ok and r.epsilon == 1.5


def test_empty_file_reports_a_missing_entry_point():
    assert codes(check("")) == ["E0207"]


def test_binary_garbage_is_a_syntax_error():
    r = check("\x00\x01\x02ELF\xff\xfe garbage")
    assert codes(r)[0] == "E0101"


def test_deep_nesting_is_a_diagnostic_not_a_crash():
    deep = "(" * 5000 + "1" + ")" * 5000
    r = check(f"function main (db : bag {{ x : num }}) : fuzzy num {{ return {deep} }}")
    assert all(c in ("E0107", "E0101") for c in codes(r)) or r.ok


def test_long_nested_lets_check():
    body = "".join(f"let v{i} = {i};\n" for i in range(3000)) + "return v2999"
    r = check(f"function main (db : bag {{ x : num }}) : fuzzy num {{ {body} }}")
    assert r.ok, codes(r)


def test_huge_literal_is_rejected():
    r = check("function main (db : bag { x : num }) : fuzzy num { return " + "9" * 5000 + " }")
    assert codes(r) == ["E0103"]


def test_huge_exponent_is_rejected():
    r = check("function main (db : bag { x : num }) : fuzzy num { return 1e999999999 }")
    assert codes(r) == ["E0103"]


def test_syntax_error_location_and_expected_tokens():
    r = check("function f (x : num) { x + + }\n")
    d = r.diagnostics[0]
    assert d.code == "E0101" and (d.span.line, d.span.col) == (1, 28)
    assert d.notes and d.notes[0].startswith("expected")


def test_unterminated_declaration_is_end_of_input():
    r = check("function f (x : num) { x + 1\n")
    assert codes(r)[0] == "E0102"
