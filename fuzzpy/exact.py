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
