"""The fixed-point grid every noisy release uses, decided from public numbers only.

Kept free of numpy so the checker can read it: the sparse vector's typing rule charges for the
rounding of fractional moves onto this grid (primitives/mechanisms.py), and the samplers round
onto it (runtime/noise.py, through runtime/grid.py).  One definition for both.
"""

from __future__ import annotations

from fractions import Fraction
from math import isqrt

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


def ceil_sqrt(x: Fraction) -> int:
    """Smallest integer s >= 0 with s*s >= x, for x >= 0 (exact: s*s >= x iff s*s >= ceil(x))."""
    c = -((-x.numerator) // x.denominator)
    return 0 if c <= 0 else isqrt(c - 1) + 1


def gaussian_shift_bound(m: int, n: int) -> int:
    """K = 2**m + ceil(sqrt(n)): the L2 distance, in grid steps, between the randomly rounded
    images of two neighbouring n-vectors (docs/noise.md, "Gaussian")."""
    return 2**m + ceil_sqrt(Fraction(n))


def gaussian_grid_bits(rho: Fraction, n: int) -> int:
    """The smallest m >= 0 with both
    (a) sigma_g = K / sqrt(2 rho) >= 2**GRID_BITS steps (K = 2**m + ceil(sqrt(n))): the grid
        step is at most 2**-GRID_BITS of the noise's sigma;
    (b) 2**m >= 2**GRID_BITS * ceil(sqrt(n)): the rounding's extra ceil(sqrt(n)) steps in K
        add at most 2**-GRID_BITS to the noise.
    Both are monotone in m and read only the public rho and n."""
    c = ceil_sqrt(Fraction(n))
    m_b = ceil_log2(Fraction(2**GRID_BITS * c))
    # (a): K is an integer, so K**2 >= 2**(2 GRID_BITS + 1) rho  iff  K >= ceil_sqrt(that)
    need = ceil_sqrt(Fraction(2 ** (2 * GRID_BITS + 1)) * rho) - c
    m_a = 0 if need <= 1 else ceil_log2(Fraction(need))
    return max(0, m_a, m_b)
