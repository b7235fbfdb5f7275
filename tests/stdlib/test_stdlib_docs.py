"""docs/stdlib.md is checked against the library: every function it lists exists, every
function of stdlib/*.fz is listed, and every `Checked:` line's type is exactly what the checker
infers (for releases, also the exact epsilon)."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from stdlib_support import ROOT, ROW, STDLIB, probe

DOC = ROOT / "docs" / "stdlib.md"
CHECKED = re.compile(r"^Checked: `(?P<expr>[^`]+)` with `(?P<params>[^`]+)` : `(?P<type>[^`]+)`$", re.M)
HEADING = re.compile(r"^### (\w+)$", re.M)
FUNCTION = re.compile(r"^function (\w+)", re.M)


def doc_sections() -> dict[str, str]:
    text = DOC.read_text()
    parts = HEADING.split(text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def stdlib_functions() -> dict[str, str]:
    """function name -> file, for every stdlib/*.fz."""
    out: dict[str, str] = {}
    for path in sorted(STDLIB.glob("*.fz")):
        for name in FUNCTION.findall(path.read_text()):
            assert name not in out, f"{name} is declared in {out[name]} and {path.name}"
            out[name] = path.name
    return out


def checked_lines() -> list[tuple[str, str, str, str]]:
    return [(name, m["params"], m["expr"], m["type"])
            for name, body in doc_sections().items() for m in CHECKED.finditer(body)]


def coefficients(t: str) -> list[Fraction | float]:
    """The sensitivity of every top-level arrow of a function type string."""
    out, depth, i = [], 0, 0
    while i < len(t):
        ch = t[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and t.startswith("->", i):
            out.append(float("inf"))
        elif depth == 0 and t.startswith("-o", i):
            if t.startswith("-o[", i):
                j = t.index("]", i)
                # `-o[c; rho r]` / `-o[rho r]`: the linear part c (0 when only a rho is shown).
                linear = t[i + 3:j].split(";")[0].strip()
                out.append(Fraction(0) if linear.startswith("rho") else Fraction(linear))
                i = j
            else:
                out.append(Fraction(1))
        i += 1
    return out


def test_every_documented_function_exists_and_every_function_is_documented():
    documented, declared = set(doc_sections()), set(stdlib_functions())
    assert documented - declared == set(), "documented but not in stdlib/"
    assert declared - documented == set(), "in stdlib/ but not documented in docs/stdlib.md"


def test_every_documented_function_has_a_checked_example_naming_it():
    for name, body in doc_sections().items():
        examples = CHECKED.findall(body)
        assert examples, f"{name} has no Checked: line"
        assert all(re.match(rf"{name}\b", expr) for expr, _, _ in examples), name


def test_the_doc_shows_the_schema_the_examples_are_checked_with():
    assert ROW.strip() in DOC.read_text()


def test_coefficients_parser():
    assert coefficients("bag num -o[0.5] fuzzy num") == [Fraction(1, 2)]
    assert coefficients("bag num -o[rho 0.5] fuzzy num") == [Fraction(0)]
    assert coefficients("bag num -o[2; rho 0.5] fuzzy num") == [Fraction(2)]
    assert coefficients("(num, num) -> list (num -o num) -o fuzzy num") == [float("inf"), 1]


@pytest.mark.parametrize("name, params, expr, expected", checked_lines(),
                         ids=[f"{n}:{e[:40]}" for n, _, e, _ in checked_lines()])
def test_checked_line_matches_the_checker(name, params, expr, expected):
    report = probe(params, expr)
    (fn,) = [f for f in report.functions if f.name == "probe"]
    assert fn.type == expected
    if report.entry == "probe":  # a release: the coefficients in the type are its epsilons
        eps = report.epsilon
        assert isinstance(eps, Fraction)
        assert eps == sum(coefficients(expected.split(" fuzzy ", 1)[0] + " fuzzy"))
