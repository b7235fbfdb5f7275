"""Numbers as the interfaces print them, by total functions: nothing here raises.

The checker's numbers are exact (`Fraction`, or INF); a public parameter can make one of them
far beyond the float range (epsilon 1e-300 / 1e300 gives a noise scale of 1e600).  Output runs
after a release has been charged, so it must not fail on such a number: floats saturate to
infinity, JSON gets `null` (or the text "inf") instead of a non-standard `Infinity`, and text
falls back to scientific notation computed in decimal arithmetic.
"""

from __future__ import annotations

import json
import math
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any, Optional

from ..typesystem.sens import INF, fmt_coef

_DECIMAL = Context(prec=8, Emax=10**9, Emin=-10**9)


def to_float(x: Any) -> float:
    """The nearest float, saturating to +-inf beyond the float range (never OverflowError)."""
    if x == INF:
        return math.inf
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def json_number(x: Any) -> Optional[float]:
    """A JSON number, or None when there is no finite double for it (infinite, or too large)."""
    f = to_float(x)
    return f if math.isfinite(f) else None


def scientific(x: Fraction, digits: int = 4) -> str:
    """`x` as d.ddde+N, exactly rounded whatever its size."""
    value = _DECIMAL.divide(Decimal(x.numerator), Decimal(x.denominator))
    return f"{value:.{digits - 1}e}"


def show(c: Any) -> str:
    """The checker's notation for a coefficient (`fmt_coef`), total."""
    try:
        return fmt_coef(c)
    except (OverflowError, ValueError):
        return scientific(Fraction(c))


def show_measured(c: Any, digits: int = 6) -> str:
    """A derived quantity a reader compares by eye (a noise scale, a Gaussian's sd), total: the
    exact notation when it is short, else `digits` significant digits.  A grid sigma such as
    629397181890197/281474976710656 says nothing to a reader that 2.23607 does not; the exact
    value stays in the JSON report."""
    text = show(c)
    if "/" not in text or len(text) <= 12:
        return text
    value = to_float(c)
    if math.isfinite(value) and value != 0:
        return f"{value:.{digits}g}"
    return scientific(Fraction(c), digits)


def finite_json(value: Any) -> Any:
    """`value` with every non-finite float replaced by its text ("inf", "-inf", "nan")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """Standard JSON (no NaN or Infinity tokens, which strict parsers refuse)."""
    return json.dumps(finite_json(value), allow_nan=False, **kwargs)
