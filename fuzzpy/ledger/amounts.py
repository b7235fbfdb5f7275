"""Exact amounts as the ledger reads and writes them: epsilons, deltas, rhos and caps.

Amounts are `Fraction`s, stored as exact strings ("3/10") and summed exactly; floats are refused
(Fraction(0.1) is slightly above 0.1, the unsafe side for a cap).
"""

from __future__ import annotations

from fractions import Fraction

from ..diagnostics import error

_MAX_DECIMALS = 20  # beyond this many decimals a fraction is easier to read


def parse_amount(text: str, what: str = "cap") -> Fraction:
    """Parse "2.0", "0.3", "1/3" or "1e-3" exactly; reject negatives, nan, inf -> E0605."""
    from ..exact import parse_exact

    try:
        value = parse_exact(text)
    except ValueError:
        raise error("E0605", f"invalid {what} {text[:60]!r}: expected a number such as 1.0, 0.25 "
                             "or 1/3") from None
    return check_amount(value, what)


def format_exact(value: Fraction) -> str:
    """Exact decimal when the value has one ("0.3", "2.0"), else a fraction ("1/3")."""
    value = Fraction(value)
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    places = max(twos, fives)
    if den != 1 or places > _MAX_DECIMALS:
        return f"{value.numerator}/{value.denominator}"
    sign = "-" if value < 0 else ""
    scaled = abs(value.numerator) * 10**places // value.denominator
    digits = str(scaled).rjust(places + 1, "0")
    if places == 0:
        return f"{sign}{digits}.0"
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def check_amount(value: object, what: str) -> Fraction:
    # Floats are refused: Fraction(0.1) is slightly above 0.1, the unsafe side for a cap.
    if isinstance(value, bool) or not isinstance(value, (int, Fraction)):
        raise error("E0605", f"invalid {what}: give an exact number (Fraction, int or a string "
                             f"such as '0.3'), not {type(value).__name__}")
    value = Fraction(value)
    if value < 0:
        raise error("E0605", f"invalid {what} {format_exact(value)}: it must not be negative")
    return value

