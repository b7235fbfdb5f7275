"""Exact and directed-rounding helpers shared by the accountant's modules.

Floats and mpmath are used to *find* a number; every number handed out is an exact Fraction
obtained by rounding up, then checked (see docs/privacy-notions.md, "Certification")."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mpmath  # imported where it is used: a run of pure-epsilon releases never needs it

# Digits carried by mpmath in certificates. The margins below are many orders of magnitude
# above the error of a 40-digit evaluation of erfc/exp/log (a few units in the 40th digit).
CERT_DPS = 40


@lru_cache(maxsize=1)
def cert_margin() -> mpmath.mpf:
    """The margin added to every certified delta: 1e-30 at mpmath's default precision (53 bits),
    whatever the precision of the caller."""
    import mpmath

    with mpmath.workprec(53):
        return mpmath.mpf("1e-30")

# Returned epsilons are rounded up to a multiple of 1/EPS_DENOMINATOR.
EPS_DENOMINATOR = 10**9


def ceil_fraction(x: float | mpmath.mpf, denominator: int = EPS_DENOMINATOR) -> Fraction:
    """The smallest k/denominator >= x (x finite)."""
    if isinstance(x, float):
        exact = Fraction(x)  # a float is a dyadic rational: exact
    else:
        exact = mpf_to_fraction(x)
    return Fraction(math.ceil(exact * denominator), denominator)


def mpf_to_fraction(x: mpmath.mpf) -> Fraction:
    """The exact value of an mpmath binary float."""
    import mpmath

    man, exp = mpmath.mpf(x).man_exp
    return Fraction(man) * (Fraction(2) ** exp)


def mpf(x: Fraction | int | float) -> mpmath.mpf:
    """A Fraction (or int/float) as an mpmath number at the current precision."""
    import mpmath

    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return mpmath.mpf(x)


def as_fraction(x: Fraction | int | float, name: str) -> Fraction:
    """Validate a finite, non-negative number and return it exactly."""
    if isinstance(x, bool):
        raise TypeError(f"{name} must be a number, not bool")
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"{name} must be finite")
        x = Fraction(x)
    if not isinstance(x, (Fraction, int)):
        raise TypeError(f"{name} must be a Fraction, int or float")
    x = Fraction(x)
    if x < 0:
        raise ValueError(f"{name} must be >= 0")
    return x


def check_delta(delta: Fraction | float) -> Fraction:
    """delta as an exact Fraction in (0, 1), or a ValueError the caller can turn into a
    diagnostic (delta = 0 makes every Gaussian release cost infinity; delta >= 1 says nothing)."""
    if isinstance(delta, bool) or not isinstance(delta, (Fraction, int, float)):
        raise TypeError("delta must be a number")
    if isinstance(delta, float) and not math.isfinite(delta):
        raise ValueError("delta must be a finite number in (0, 1)")
    d = Fraction(delta)
    if d <= 0:
        raise ValueError("delta must be > 0: with delta = 0 only pure epsilon can be stated")
    if d >= 1:
        raise ValueError("delta must be < 1: a delta of 1 or more guarantees nothing")
    return d
