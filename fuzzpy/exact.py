"""Reading exact numbers that users type (budgets, caps, pragmas): bounded, so that a hostile
`1e99999999` is an error rather than an hour of big-integer arithmetic."""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?(\s*/\s*\d+)?\s*$")
MAX_CHARS = 60
MAX_EXPONENT = 400


def parse_exact(text: str) -> Fraction:
    """"1.0", ".5", "1e-3" or "1/3" as an exact Fraction; ValueError for anything else, for a
    zero denominator, and for absurd sizes (more than 60 characters, exponents beyond 400)."""
    if len(text) > MAX_CHARS or not _NUMBER.match(text):
        raise ValueError(f"not a number: {text!r}")
    exp = re.search(r"[eE]([+-]?\d+)", text)
    if exp and abs(int(exp.group(1))) > MAX_EXPONENT:
        raise ValueError(f"number out of range: {text!r}")
    try:
        return Fraction(text.replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"not a number: {text!r}") from None


def parse_delta(text: str) -> Fraction:
    """A delta, the second parameter of (epsilon, delta)-DP: exact, strictly between 0 and 1
    (ValueError otherwise).  One reading for the command line, the API, the editor and the
    curator service."""
    value = parse_exact(text)
    if not 0 < value < 1:
        raise ValueError(f"delta must be strictly between 0 and 1: {text!r}")
    return value


def parse_non_negative(text: str) -> Fraction:
    """A budget or a cap (epsilon or rho): exact and non-negative (ValueError otherwise)."""
    value = parse_exact(text)
    if value < 0:
        raise ValueError(f"must be non-negative: {text!r}")
    return value
