"""Renyi DP / zCDP to (epsilon, delta): the conversion of Canonne, Kamath & Steinke (2020,
Proposition 12) and Balle et al. (AISTATS 2020, Theorem 21):

    (alpha, r)-RDP  =>  (r + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha-1), delta)-DP

for every alpha > 1; rho-zCDP is (alpha, alpha*rho)-RDP for every alpha > 1. Any alpha gives a
valid bound, so the search for the best alpha runs in floats and only the final evaluation is
certified (40 digits, rounded up)."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

from ._num import CERT_DPS, ceil_fraction, cert_margin, mpf

if TYPE_CHECKING:
    import mpmath  # imported where it is used (see _num.py)

RdpCurve = Callable[["mpmath.mpf"], "mpmath.mpf"]


def _eps_at(alpha: mpmath.mpf, rdp: mpmath.mpf, log_delta: mpmath.mpf) -> mpmath.mpf:
    import mpmath

    return rdp + mpmath.log1p(-1 / alpha) - (log_delta + mpmath.log(alpha)) / (alpha - 1)


def rdp_epsilon(curve: RdpCurve, delta: Fraction, alpha_max: float = 1e6) -> tuple[Fraction, float]:
    """Certified (epsilon, alpha): the RDP conversion of `curve` (alpha -> RDP epsilon at alpha,
    evaluated in mpmath at the caller's precision) minimised over alpha in (1, alpha_max]."""
    import mpmath
    from scipy import optimize  # imported when used: see accounting/gaussian.py

    with mpmath.workdps(20):
        log_delta = mpmath.log(mpf(delta))

        def objective(t: float) -> float:
            alpha = 1 + math.exp(t)
            return float(_eps_at(mpmath.mpf(alpha), curve(mpmath.mpf(alpha)), log_delta))

        res = optimize.minimize_scalar(objective, bounds=(-12.0, math.log(alpha_max)),
                                       method="bounded", options={"xatol": 1e-7})
    alpha = 1 + math.exp(float(res.x))
    with mpmath.workdps(CERT_DPS):
        a = mpmath.mpf(alpha)
        eps = _eps_at(a, curve(a), mpmath.log(mpf(delta))) + cert_margin()
    return ceil_fraction(max(eps, mpmath.mpf(0))), alpha


def zcdp_epsilon(rho: Fraction, delta: Fraction) -> Fraction:
    """Certified epsilon at delta for rho-zCDP (RDP curve alpha * rho)."""
    if rho == 0:
        return Fraction(0)
    r = rho
    return rdp_epsilon(lambda alpha: alpha * mpf(r), delta)[0]


def laplace_rdp(eps0: Fraction, count: int) -> RdpCurve:
    """The RDP curve of `count` continuous Laplace releases of epsilon eps0 (Mironov 2017,
    Proposition 6). Used as a comparison figure only: fuzzpy's discrete Laplace is accounted
    with its own privacy loss distribution (pld.py)."""
    import mpmath

    def curve(alpha: mpmath.mpf) -> mpmath.mpf:
        e = mpf(eps0)
        inner = (alpha / (2 * alpha - 1)) * mpmath.exp((alpha - 1) * e) \
            + ((alpha - 1) / (2 * alpha - 1)) * mpmath.exp(-alpha * e)
        return count * mpmath.log(inner) / (alpha - 1)
    return curve
