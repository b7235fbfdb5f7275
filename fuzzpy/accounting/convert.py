"""From a ProvenLoss to certified (epsilon, delta) and zCDP figures, and the ledger's caps.

Every bound here is valid for every ProvenLoss it is applied to (docs/privacy-notions.md says
why); `epsilon_at_delta` returns the smallest. Each is found in floats and then certified: the
delta at the returned epsilon is re-evaluated with outward margins (mpmath at 40 digits for the
closed forms; the PLD's error bound for the lattice ones) and epsilon is stepped up until the
re-evaluated delta is at most the target."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

from ._num import CERT_DPS, EPS_DENOMINATOR, ceil_fraction, cert_margin, check_delta, mpf
from .gaussian import MIN_GRID_SIGMA, DiscreteGaussianSlack, discrete_gaussian_slack, gdp_delta_float
from .loss import Inventory, ProvenLoss
from .pld import LatticePld, inventory_pld, laplace_pld, power_by_fft, rr_pld
from .rdp import zcdp_epsilon

if TYPE_CHECKING:
    import mpmath  # imported where it is used (see _num.py)


@dataclass(frozen=True)
class Conversion:
    """epsilon at delta, the method that gave it, every valid bound that was computed, and the
    tighter methods that could not be used, each with the reason."""

    epsilon: Fraction | float
    method: str
    delta: Fraction
    candidates: tuple[tuple[str, Fraction | float], ...] = ()
    refused: tuple[tuple[str, str], ...] = ()  # (tighter method, why it could not be used)


def rho_of(loss: ProvenLoss) -> Fraction | float:
    """The zCDP rho of the whole loss: pure releases count eps^2/2 (Bun & Steinke 2016,
    Proposition 3.3), the discrete Gaussians their mu^2/2 (Canonne, Kamath & Steinke 2020).
    Infinite with a partition selection: no zCDP bound covers its delta."""
    if loss.delta:
        return math.inf
    return loss.pure_rho + loss.gauss_rho


# --- search and certification ---------------------------------------------------------------

def _target(delta: Fraction) -> float:
    """float(delta) rounded down."""
    t = float(delta)
    return math.nextafter(t, 0.0) if Fraction(t) > delta else t


def _certify(delta_upper: Callable[[float], float], delta: Fraction, start: float,
             cert: Callable[[Fraction], bool] | None = None) -> Fraction | float:
    """Smallest epsilon (on the 1e-9 grid, from a float bisection) whose certified delta is
    at most `delta`. `delta_upper` is non-increasing in epsilon and already an upper bound."""
    target = _target(delta)
    lo, hi = 0.0, max(start, 1e-6)
    if delta_upper(0.0) <= target:
        hi = 0.0
    else:
        while delta_upper(hi) > target:
            lo, hi = hi, hi * 2
            if hi > 1e7:
                return math.inf
        for _ in range(100):
            mid = (lo + hi) / 2
            if delta_upper(mid) > target:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 2e-10 * max(1.0, hi):
                break
    eps = ceil_fraction(hi)
    for _ in range(10_000):
        ok = cert(eps) if cert is not None else \
            delta_upper(math.nextafter(float(eps), 0.0)) <= target
        if ok:
            return eps
        eps += max(Fraction(1, EPS_DENOMINATOR), eps / 10**6)
    return math.inf


# --- the candidate bounds --------------------------------------------------------------------

@lru_cache(maxsize=256)
def _slack(sigma: Fraction, budget: Fraction, delta: Fraction) -> DiscreteGaussianSlack | None:
    return discrete_gaussian_slack(sigma, float(budget) * (1 + 1e-15), float(delta))


@dataclass(frozen=True)
class _GaussPart:
    """The Gaussian part of a loss as the scaled pair (e^log_c N(mu, 1), N(0, 1)) (its curve is
    e^log_c delta_mu(eps - log_c)); mu = 0 when there is no Gaussian release."""

    mu: float
    log_c: float

    def scaled(self, inner: Callable[[float], float]) -> Callable[[float], float]:
        """The curve of (pair whose curve is `inner`) composed with the scale: c * inner(e - ln c),
        rounded up (the scale's float exp carries a relative margin)."""
        if self.log_c == 0:
            return inner
        c = math.exp(self.log_c) * (1 + 1e-12)
        return lambda e: min(1.0, c * inner(e - self.log_c))


_NO_GAUSS = _GaussPart(0.0, 0.0)


def _gauss_part(loss: ProvenLoss, delta: Fraction) -> _GaussPart | str:
    """The Gaussian part's scaled GDP pair when its domination is proven, else why not (then
    only the zCDP conversion may be used for it)."""
    if loss.gauss_rho == 0:
        return _NO_GAUSS
    if loss.gauss_grid_sigma is None:
        return "the grid sigma of the Gaussian releases is not known"
    if loss.gauss_grid_sigma < MIN_GRID_SIGMA:
        return f"the grid sigma of a Gaussian release, {float(loss.gauss_grid_sigma):.4g}, is below {MIN_GRID_SIGMA}"
    if mpf(delta) <= 2 * cert_margin():  # its certificate adds cert_margin() to delta: it could never hold
        return (f"delta {float(delta):.3g} is below what the analytic certificate resolves "
                f"({float(2 * cert_margin()):.0e})")
    budget = 2 * loss.gauss_rho
    slack = _slack(loss.gauss_grid_sigma, budget, delta)
    if slack is None:
        return "no certified scale for this budget of Gaussian releases"
    mu = slack.kappa * math.sqrt(float(budget)) * (1 + 1e-15)
    return _GaussPart(mu, slack.log_scale(float(budget) * (1 + 1e-15)))


def _pure_gdp(eps_p: Fraction, gauss: _GaussPart, delta: Fraction) -> Fraction | float:
    """RR(eps_p) (dominates every eps_p-DP part) composed with the scaled mu-GDP pair."""
    e, mu, log_c = float(eps_p), gauss.mu, gauss.log_c
    if mpf(delta) <= 2 * cert_margin():  # the certificate below could never hold (see _gauss_part)
        return math.inf
    p = 1 / (1 + math.exp(-e))

    def inner(x: float) -> float:
        return (p * gdp_delta_float(mu, x - e) + (1 - p) * gdp_delta_float(mu, x + e)) * (1 + 1e-9)

    upper = gauss.scaled(inner)

    def cert(eps: Fraction) -> bool:
        import mpmath

        with mpmath.workdps(CERT_DPS):
            m, ep = mpmath.mpf(mu), mpf(eps_p)
            lc = mpmath.mpf(log_c)
            x = mpf(eps) - lc
            pp = 1 / (1 + mpmath.exp(-ep))

            def d(t: mpmath.mpf) -> mpmath.mpf:
                return mpmath.ncdf(-t / m + m / 2) - mpmath.exp(t) * mpmath.ncdf(-t / m - m / 2)
            value = mpmath.exp(lc) * (pp * d(x - ep) + (1 - pp) * d(x + ep))
            return value + cert_margin() <= mpf(delta)

    start = e + log_c + mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / float(delta)))
    return _certify(upper, delta, start, cert)


@lru_cache(maxsize=64)
def _inventory(kind: str, entries: Inventory) -> LatticePld:
    return inventory_pld(entries, laplace_pld if kind == "laplace" else rr_pld)


def _pld_gdp(kind: str, entries: Inventory, gauss: _GaussPart, delta: Fraction) -> Fraction | float:
    pld = _inventory(kind, entries)
    mu = gauss.mu
    inner = (lambda e: pld.delta_with_gaussian(e, mu)) if mu > 0 else pld.delta_pure
    upper = gauss.scaled(inner)
    total = float(sum(e * c for e, c in entries))
    start = min(total, 1.0) + gauss.log_c + mu * mu / 2 + (mu + math.sqrt(total)) * math.sqrt(
        2 * math.log(1 / float(delta)))
    return _certify(upper, delta, start)


def epsilon_at_delta(loss: ProvenLoss, delta: Fraction | float) -> Conversion:
    """The smallest certified epsilon at `delta` among the bounds valid for `loss`, with the
    tighter bounds that could not be used and why (`Conversion.refused`).

    delta must be in (0, 1) (ValueError otherwise: with delta = 0, use `loss.epsilon`, which is
    the answer when `loss.is_pure()` and infinity otherwise).

    A loss with partition selections (`loss.delta` > 0) is (eps + Delta/(1 - Delta), delta)-DP
    where eps is the conversion of its releases without their bad events at delta - Delta
    (docs/privacy-notions.md, "Partition selection"); infinite when delta <= Delta."""
    d = check_delta(delta)
    if loss.delta:
        return _with_selection(loss, d)
    sampled, loss = loss, loss.unamplified()  # every conversion below counts sampled releases plainly
    cands: list[tuple[str, Fraction | float]] = []
    refused: list[tuple[str, str]] = []
    if loss.is_pure():
        cands.append(("pure epsilon", loss.epsilon))
    cands.append(("zCDP (rho = pure_rho + gauss_rho)", zcdp_epsilon(rho_of(loss), d)))
    gauss = _gauss_part(loss, d)
    if isinstance(gauss, str):
        refused.append(("analytic Gaussian (GDP)", gauss))
    else:
        with_gdp = " with GDP" if gauss.mu else ""
        if loss.epsilon not in (0, math.inf) and not loss.is_pure():
            cands.append(("pure epsilon (randomized response) with GDP",
                          _pure_gdp(Fraction(loss.epsilon), gauss, d)))
        if loss.laplace is not None and loss.epsilon != 0:
            cands.append(("discrete Laplace PLD" + with_gdp, _pld_gdp("laplace", loss.laplace, gauss, d)))
        if loss.pure is not None and loss.epsilon != 0:
            cands.append(("optimal composition (KOV)" + with_gdp, _pld_gdp("pure", loss.pure, gauss, d)))
        if loss.pure is None and loss.epsilon not in (0, math.inf):
            refused.append(("optimal composition (KOV)", "not every pure release could be counted (a release "
                            "on an input used more than once, on several inputs, or by a function of a "
                            "declared type)"))
        if loss.epsilon == 0 and gauss.mu > 0:
            cands.append(("analytic Gaussian (GDP)", _pure_gdp(Fraction(0), gauss, d)))
    if sampled.subsampled != ():
        why = _why_not_subsampled(sampled, d)
        if why is None:
            cands.append((SUBSAMPLED_METHOD, _subsampled_epsilon(sampled, d)))
        else:
            refused.append((SUBSAMPLED_METHOD, why))
    method, eps = min(cands, key=lambda c: c[1])
    return Conversion(eps, method, d, tuple(cands), tuple(refused))


# --- releases on Poisson samples ---------------------------------------------------------------

SUBSAMPLED_METHOD = "Poisson-subsampled PLD"


def _why_not_subsampled(loss: ProvenLoss, delta: Fraction) -> str | None:
    """Why the subsampled releases cannot be composed by their amplified PLDs, or None."""
    if loss.subsampled is None or (loss.pure is None and loss.epsilon != 0):
        return ("not every release could be counted (a release on a sample or an input used more than "
                "once, on several inputs, or by a function of a declared type)")
    if loss.gauss_rho:
        sigma = loss.gauss_grid_sigma
        if sigma is None or sigma < MIN_GRID_SIGMA:
            return "the grid sigma of a Gaussian release is unknown or below " + str(MIN_GRID_SIGMA)
        if mpf(delta) <= 2 * cert_margin():
            return f"delta {float(delta):.3g} is below what the discrete Gaussian's certificate resolves"
    return None


@lru_cache(maxsize=32)
def _subsampled_plds(loss: ProvenLoss, delta: Fraction) -> tuple[LatticePld, LatticePld]:
    """The composition of every release, in the remove and in the add direction: the pure releases
    not on a sample by their inventory's pairs (symmetric), each release on a sample by its
    amplified pair (docs/privacy-notions.md, "Poisson subsampling")."""
    from .subsampled import SUBSAMPLED_H, gauss_lattice, subsampled_gaussian_pld, subsampled_lattice_pld

    base = _inventory("laplace", loss.laplace) if loss.laplace is not None else _inventory("pure", loss.pure or ())
    out = []
    for remove in (True, False):
        parts = [] if base.probs.shape == (1,) and base.lo == 0 else \
            [base.regrid(SUBSAMPLED_H) if base.h > SUBSAMPLED_H else base]
        for kind, q, value, count in loss.subsampled or ():
            if kind == "gauss":
                mu2 = 2 * float(value) * (1 + 1e-15)
                slack = _slack(loss.gauss_grid_sigma, Fraction(mu2), delta)
                if slack is None:
                    raise _NoSlack()
                one = subsampled_gaussian_pld(float(q), slack.kappa * math.sqrt(mu2) * (1 + 1e-15),
                                              slack.log_scale(mu2), gauss_lattice(float(q)), remove,
                                              connect_dots=True)
            else:
                pair = laplace_pld(value) if kind == "laplace" else rr_pld(value)
                one = subsampled_lattice_pld(pair, float(q), SUBSAMPLED_H, remove)
            parts.append(power_by_fft(one, count))
        total = parts[0] if parts else LatticePld.identity()
        for part in parts[1:]:
            total = total.compose(part)
        out.append(total)
    return out[0], out[1]


class _NoSlack(Exception):
    """No certified scale for a discrete Gaussian release on a sample."""


def _subsampled_epsilon(loss: ProvenLoss, delta: Fraction) -> Fraction | float:
    """Epsilon at delta of the composition of every release with the amplified pairs of the
    releases on samples, the other Gaussian releases by their scaled GDP pair: the larger of
    the two directions' (rule Poisson subsampling)."""
    plain = loss.gauss_rho - loss.gauss_sampled_rho
    gauss = _NO_GAUSS
    if plain:
        slack = _slack(loss.gauss_grid_sigma, 2 * plain, delta)
        if slack is None:
            return math.inf
        budget = float(2 * plain) * (1 + 1e-15)
        gauss = _GaussPart(slack.kappa * math.sqrt(budget) * (1 + 1e-15), slack.log_scale(budget))
    try:
        remove, add = _subsampled_plds(loss, delta)
    except _NoSlack:
        return math.inf
    mu = gauss.mu
    if not mu:
        from .subsampled import DeltaCurve

        curves = (DeltaCurve(remove), DeltaCurve(add))

        def upper(e: float) -> float:
            return max(c(e) for c in curves) if e >= 0 else math.inf  # the search asks for eps >= 0 only
    else:
        def upper(e: float) -> float:
            return max(p.delta_with_gaussian(e, mu) for p in (remove, add))
    start = float(min(loss.epsilon, 1)) + float(loss.gauss_rho) + 1.0
    return _certify(gauss.scaled(upper), delta, start)


# rule Partition selection: the releases' conversion at delta - Delta, plus Delta/(1 - Delta)
def _with_selection(loss: ProvenLoss, delta: Fraction) -> Conversion:
    """The good part (every release, partition selections by their epsilon) converted at the
    delta left after the partition selections' Delta, and ln(1/(1 - Delta)) <= Delta/(1 - Delta)
    added to epsilon (the larger table's good part is its law given no bad event)."""
    big = loss.delta
    rest = delta - big
    what = "partition selection"
    if rest <= 0:
        return Conversion(math.inf, f"{what}: delta not above its delta {float(big):.3g}", delta)
    extra = ceil_fraction(float(big / (1 - big)) * (1 + 1e-12))  # >= Delta/(1 - Delta) >= ln(1/(1 - Delta))
    while extra < big / (1 - big):
        extra += Fraction(1, EPS_DENOMINATOR)
    inner_conv = epsilon_at_delta(loss.without_delta(), rest)
    eps = inner_conv.epsilon if inner_conv.epsilon == math.inf else inner_conv.epsilon + extra
    cands = tuple((f"{name} + {what}", e if e == math.inf else e + extra) for name, e in inner_conv.candidates)
    return Conversion(eps, f"{inner_conv.method} + {what}", delta, cands, inner_conv.refused)


def delta_at_epsilon_gdp(mu: Fraction, epsilon: Fraction) -> mpmath.mpf:
    """Certified upper bound on the delta of mu-GDP at epsilon (for reports and tests)."""
    from .gaussian import gdp_delta_upper
    return gdp_delta_upper(mu, epsilon)


# --- caps for the ledger ---------------------------------------------------------------------

@dataclass(frozen=True)
class EpsilonCap:
    """A cap of epsilon at delta; delta = 0 is a pure-epsilon cap."""

    epsilon: Fraction
    delta: Fraction = Fraction(0)


@dataclass(frozen=True)
class RhoCap:
    """A cap in zCDP rho."""

    rho: Fraction


def compose(history: Iterable[ProvenLoss]) -> ProvenLoss:
    """The sequential (adaptive) composition of a history of charges."""
    total = ProvenLoss()
    for charge in history:
        total = total.add(charge)
    return total


def spent(history: Iterable[ProvenLoss], cap: EpsilonCap | RhoCap) -> Fraction | float:
    """What a history has spent, in the cap's unit: rho for a RhoCap; for an EpsilonCap the
    certified epsilon at its delta (its pure epsilon when delta = 0, infinite if any charge is
    Gaussian). Histories mixing pure and Gaussian charges compose before converting: never
    add epsilons converted separately at the same delta (that would spend the delta twice)."""
    total = compose(history)
    if isinstance(cap, RhoCap):
        return rho_of(total)
    if cap.delta == 0:
        return total.epsilon if total.is_pure() else math.inf
    return epsilon_at_delta(total, cap.delta).epsilon


def fits(history: Iterable[ProvenLoss], cap: EpsilonCap | RhoCap) -> bool:
    """True when the history (including a charge about to be made) stays within the cap."""
    limit = cap.rho if isinstance(cap, RhoCap) else cap.epsilon
    return spent(history, cap) <= limit
