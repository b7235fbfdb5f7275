"""The fixed-point grid every noisy release uses, decided from public numbers only.

Kept free of numpy so the checker can read it: the sparse vector's typing rule charges for the
rounding of fractional moves onto this grid (primitives/mechanisms.py), and the samplers round
onto it (runtime/noise.py).  One definition for both.
"""

from __future__ import annotations

from fractions import Fraction

GRID_BITS = 12
# The largest noise scale a release may have.  Beyond it, released values and their accuracy
# bounds leave the floating-point range (about 1.8e308), so the run could not print them; such
# a program is refused before anything is read or charged (E0312).
MAX_NOISE_SCALE = 10**300
MAX_NOISE_SCALE_TEXT = "1e300"


def ceil_log2(x: Fraction) -> int:
    """Smallest integer m with 2**m >= x, for x > 0 (exact)."""
    m = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** m < x:
        m += 1
    while Fraction(2) ** (m - 1) >= x:
        m -= 1
    return m


def grid_bits(epsilon: Fraction) -> int:
    """m >= 0 with 2**m >= 2**GRID_BITS * epsilon, from public epsilon only: the grid step
    sensitivity/2**m is then at most 2**-GRID_BITS of the scale sensitivity/epsilon (or equal
    to the sensitivity when epsilon < 2**-GRID_BITS, where the scale dwarfs it anyway)."""
    return max(0, ceil_log2(Fraction(2**GRID_BITS) * epsilon))
