"""The (epsilon, delta) claim an audit tests, from the checker's rho and pure epsilon.

`claimed_epsilon(rho, pure_epsilon, delta, grid_sigma)` is the ONE place where the auditor turns
zCDP into (epsilon, delta): it asks the certified accountant (fuzzpy/accounting), so an audit tests
the very figure the checker's report states.  `rdp_claim` keeps the RDP conversion below as an
independent, looser bound for the tests.  Nothing else in the auditor computes a claim.

For rho-zCDP, the mechanism is (alpha, alpha rho)-RDP for every alpha > 1, and an
(alpha, r)-RDP mechanism is (epsilon, delta)-DP with (Balle et al., AISTATS 2020, Theorem 21;
Canonne, Kamath and Steinke 2020, Proposition 12)

    epsilon = r + log((alpha - 1) / alpha) - (log delta + log alpha) / (alpha - 1).

Every alpha gives a valid bound, so the minimiser only has to be good, not exact; the value at
the chosen alpha is then evaluated with every logarithm rounded the safe way and the sum rounded
up to a multiple of 2^-40, so the claim is never below the conversion's true value.

A program with pure releases too: the pure part is pure_epsilon-DP and the Gaussian part is
(eps_g, delta)-DP, so together (basic composition) (pure_epsilon + eps_g, delta)-DP.  The pure
part is also pure_epsilon^2/2-zCDP (Bun and Steinke 2016, Proposition 1.4), so converting
rho + pure_epsilon^2/2 is valid as well; the smaller of the two is returned.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional, Union

import numpy as np

Number = Union[int, float, Fraction]

_SLACK = Fraction(1, 2**40)   # far above the error of math.log on doubles (about 2^-52 relative)
_GRID = 2**40                 # the claim is rounded up to a multiple of 1/_GRID


def claimed_epsilon(rho: Number, pure_epsilon: Number, delta: Number, grid_sigma: Optional[Fraction] = None,
                    pure_rho: Optional[Number] = None) -> Fraction:
    """An upper bound on the epsilon, at `delta`, of a mechanism that is rho-zCDP in its Gaussian
    releases and pure_epsilon-DP in its pure ones (composed): the certified accountant's
    (fuzzpy.accounting.epsilon_at_delta), the same figure `fuzzpy check` states.  `grid_sigma`
    (a lower bound on the Gaussian releases' grid sigma) lets it use the Gaussian conversion;
    `pure_rho` is the pure releases' zCDP (at most pure_epsilon^2/2, its default).  rho = 0:
    pure_epsilon (delta is then not needed)."""
    from ..accounting import ProvenLoss, epsilon_at_delta

    r, pure, d = Fraction(rho), Fraction(pure_epsilon), Fraction(delta)
    if r < 0 or pure < 0:
        raise ValueError("rho and pure_epsilon must be >= 0")
    if r == 0:
        return pure
    if not 0 < d < 1:
        raise ValueError("delta must be in (0, 1) when rho > 0")
    zp = pure * pure / 2 if pure_rho is None else min(Fraction(pure_rho), pure * pure / 2)
    conv = epsilon_at_delta(ProvenLoss(pure, zp, r, gauss_grid_sigma=grid_sigma), d)
    return max(Fraction(0), Fraction(conv.epsilon))


def rdp_claim(rho: Number, pure_epsilon: Number, delta: Number) -> Fraction:
    """The RDP conversion alone (Balle et al. 2020): an independent, looser upper bound the tests
    compare the accountant's claim with."""
    r, pure, d = Fraction(rho), Fraction(pure_epsilon), Fraction(delta)
    basic = pure + _zcdp_to_dp(r, d)
    if pure == 0:
        return basic
    return min(basic, _zcdp_to_dp(r + pure * pure / 2, d))


def _zcdp_to_dp(rho: Fraction, delta: Fraction) -> Fraction:
    alpha = _best_alpha(float(rho), _log(delta))
    # (eps, delta)-DP implies (eps', delta)-DP for eps' >= eps: a negative value (tiny rho, large
    # delta) is reported as 0.
    return max(Fraction(0), _round_up(_objective_upper(rho, delta, alpha)))


def _objective(rho: float, log_delta: float, alpha: np.ndarray) -> np.ndarray:
    return alpha * rho + np.log1p(-1 / alpha) - (log_delta + np.log(alpha)) / (alpha - 1)


def _best_alpha(rho: float, log_delta: float) -> Fraction:
    """A good alpha (any alpha > 1 is valid): a log-spaced grid, then a finer one around the best."""
    u = np.linspace(-12.0, 30.0, 2001)          # alpha - 1 = e^u
    for _ in range(3):
        with np.errstate(all="ignore"):
            f = _objective(rho, log_delta, 1 + np.exp(u))
        i = int(np.argmin(np.where(np.isfinite(f), f, np.inf)))
        best_u, width = float(u[i]), float(u[1] - u[0])
        u = np.linspace(best_u - 2 * width, best_u + 2 * width, 401)
    best = 1 + math.exp(best_u)
    return Fraction(best).limit_denominator(2**30) if best > 1 + 2**-20 else Fraction(best)


def _objective_upper(rho: Fraction, delta: Fraction, alpha: Fraction) -> Fraction:
    """alpha rho + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha-1), each term rounded up."""
    if alpha <= 1:
        raise ValueError("alpha must be > 1")
    return (alpha * rho + _log_up((alpha - 1) / alpha)
            + (_log_up(1 / delta) - _log_down(alpha)) / (alpha - 1))


def _log(x: Fraction) -> float:
    """ln(x) for a positive rational of any size (numerator and denominator taken apart)."""
    return math.log(x.numerator) - math.log(x.denominator)


def _log_up(x: Fraction) -> Fraction:
    v = Fraction(_log(x))
    return v + abs(v) * _SLACK + _SLACK


def _log_down(x: Fraction) -> Fraction:
    v = Fraction(_log(x))
    return v - abs(v) * _SLACK - _SLACK


def _round_up(x: Fraction) -> Fraction:
    return Fraction(-((-x.numerator * _GRID) // x.denominator), _GRID)
