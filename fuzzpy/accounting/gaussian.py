"""mu-GDP curves and the bound that lets fuzzpy's *discrete* Gaussian release use them.

`gdp_delta(mu, eps)` is the exact hockey-stick curve of N(0,1) against N(mu,1) (Balle & Wang
2018, Theorem 8; Dong, Roth & Su 2022, Corollary 2.13):

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

`DiscreteGaussianSlack` turns a lower bound on the grid sigma of fuzzpy's discrete Gaussian
releases into (kappa, gamma): a budget of releases with sum of mu_i^2 = B, however many and
however chosen, is dominated by the scaled pair (e^(gamma B) N(kappa sqrt(B), 1), N(0, 1)), whose
curve is e^(gamma B) delta_{kappa sqrt(B)}(eps - gamma B). The proof is in
docs/privacy-notions.md ("Is the discrete Gaussian GDP?")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from ._num import CERT_DPS, cert_margin, mpf

if TYPE_CHECKING:
    import mpmath  # imported where it is used (see _num.py)


def gdp_delta_float(mu: float, eps: np.ndarray | float) -> np.ndarray | float:
    """delta of mu-GDP at eps (any real eps), in float64, written to avoid cancellation:
    Phi(a) * (1 - exp(eps + log Phi(b) - log Phi(a)))."""
    eps = np.asarray(eps, dtype=float)
    if mu == 0:
        return np.where(eps >= 0, 0.0, -np.expm1(eps))
    a = -eps / mu + mu / 2
    b = -eps / mu - mu / 2
    from scipy import special  # here, not at the top: scipy costs ~0.3 s to import, and a run without
    # Gaussian accounting (a Laplace count) never needs it
    la, lb = special.log_ndtr(a), special.log_ndtr(b)
    out = np.exp(la) * -np.expm1(np.minimum(eps + lb - la, 0.0))
    return out if out.ndim else float(out)


def gdp_delta_upper(mu: Fraction | mpmath.mpf, eps: Fraction) -> mpmath.mpf:
    """A certified upper bound on delta of mu-GDP at eps: 40 digits plus an explicit margin."""
    import mpmath

    with mpmath.workdps(CERT_DPS):
        m, e = mpf(mu) if isinstance(mu, Fraction) else mpmath.mpf(mu), mpf(eps)
        if m == 0:
            return mpmath.mpf(0) if e >= 0 else -mpmath.expm1(e) + cert_margin()
        value = mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
        return max(value, mpmath.mpf(0)) + cert_margin()


def gdp_epsilon_float(mu: float, delta: float) -> float:
    """The smallest eps >= 0 with delta_mu(eps) <= delta, in floats (a search, not a bound)."""
    if mu == 0 or gdp_delta_float(mu, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
    while gdp_delta_float(mu, hi) > delta:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        if gdp_delta_float(mu, mid) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return hi


# --- the discrete Gaussian ------------------------------------------------------------------

# Sigma (in grid steps) below which fuzzpy does not use the GDP curve for its discrete Gaussian:
# below it the slack is not negligible (at sigma = 1/2 the discrete Gaussian is visibly less
# private than the continuous one). The zCDP conversion is used instead.
MIN_GRID_SIGMA = 64


@dataclass(frozen=True)
class DiscreteGaussianSlack:
    """Every budget B = sum mu_i^2 of discrete Gaussian releases with grid sigma >= sigma_min is
    dominated by the *scaled* Gaussian pair (e^(gamma B) N(kappa sqrt(B), 1), N(0, 1)): its
    hockey-stick divergence at e^eps is at most e^(gamma B) delta_{kappa sqrt(B)}(eps - gamma B)
    for every real eps (docs/privacy-notions.md, Theorem DG and "From the theorem to a bound that
    composes"). kappa = sqrt(1 + lam^2); gamma = beta + lam^2/2. Fields are floats with outward
    rounding margins (see `discrete_gaussian_slack`)."""

    lam: float
    kappa: float
    gamma: float

    def log_scale(self, budget: float) -> float:
        """ln c = gamma * B, the log of the scale of the pair for the budget B (rounded up)."""
        return self.gamma * budget * (1 + 1e-12)


def _eta(tau2: float) -> float:
    """Upper bound on 2 * sum_{k>=1} exp(-2 pi^2 tau^2 k^2) (geometric tail, k^2 >= k)."""
    r = math.exp(-2 * math.pi**2 * tau2)
    return 2 * r / (1 - r)


def _slack_for(lam: float, sigma_min: float) -> DiscreteGaussianSlack | None:
    """The slack of docs/privacy-notions.md, Theorem DG, for one choice of lambda: the release
    of squared shift mu^2 costs ln c <= mu^2 (beta + lam^2/2), beta = sigma_min^2 eta(sigma_min)."""
    tau2 = sigma_min**2 * lam**2 / (1 + lam**2)
    if 2 * math.pi**2 * tau2 < 2:  # sigma^2 eta(sigma) must be decreasing from sigma_min on
        return None
    beta = sigma_min**2 * _eta(tau2)           # ln (1+eta)^n <= mu^2 * beta   (n <= K^2 = mu^2 sigma^2)
    gamma = beta + lam**2 / 2                  # ln((1+eta)^n e^a) <= mu^2 * gamma
    kappa = math.sqrt(1 + lam**2)
    # outward margins for the float arithmetic above (a few ulps each, taken as 1e-12 relative)
    return DiscreteGaussianSlack(lam, kappa * (1 + 1e-12), gamma * (1 + 1e-12) + 1e-300)


def discrete_gaussian_slack(sigma_min: Fraction | float, budget: float,
                            delta: float) -> DiscreteGaussianSlack | None:
    """The best domination (over a grid of lambdas) of a budget B = sum mu_i^2 = 2 rho of
    discrete Gaussian releases whose grid sigma is at least sigma_min, for use at `delta`:
    lambda trades the scale (ln c = gamma B, gamma about lambda^2/2) against
    kappa = sqrt(1 + lambda^2). The choice is the one with the smallest float estimate of epsilon
    at delta; any choice is sound. None when sigma_min < MIN_GRID_SIGMA."""
    s = float(sigma_min)
    if s < MIN_GRID_SIGMA or budget <= 0:
        return None
    best: tuple[float, DiscreteGaussianSlack] | None = None
    for k in range(0, 161):
        cand = _slack_for(0.5 * 10 ** (-0.05 * k), s)
        if cand is None:
            continue
        log_c = cand.log_scale(budget)
        if log_c > 50:
            continue
        mu = cand.kappa * math.sqrt(budget)
        score = log_c + gdp_epsilon_float(mu, delta * math.exp(-log_c))
        if best is None or score < best[0]:
            best = (score, cand)
    return None if best is None else best[1]
