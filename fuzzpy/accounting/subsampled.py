"""Poisson-subsampled Gaussian releases: their privacy-loss distribution, certified.

A release on a Poisson sample (each row kept independently with a public rate q, drawn fresh by
the runtime) of a Gaussian release dominated by the pair T = (T1, T0), T1 = c N(mu, 1) (a measure
of mass c = e^(gamma mu^2) >= 1: the discrete Gaussian's scaled pair, docs/privacy-notions.md) and
T0 = N(0, 1), is dominated by

    remove (the larger table first):  ((1 - q) T0 + q T1,  T0)
    add    (the smaller table first): (T1,  (1 - q) T1 + q T0)

(docs/privacy-notions.md, "Poisson subsampling"). Both pairs' losses are monotone in x, so their
PLDs are the measure of x-intervals between the points where the loss crosses the lattice; every
loss is rounded up to the lattice and the top tail goes to +infinity, which only raises delta.
A composition of `count` such releases (adaptive: each pair is fixed) is the `count`-fold
convolution; epsilon is the larger of the two directions'."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .pld import LatticePld, power_by_fft

_U = 2.0**-53
# mass above this tail probability (per release, relative) is kept on the lattice; the rest of the
# top tail goes to +infinity (it then counts fully in delta)
_TOP_TAIL = 1e-16


def _ndtr_between(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Phi(b) - Phi(a) for a <= b, computed on the side of the smaller tail (no cancellation
    against 1), and the larger of the two tail values (each is within a few ulps of it)."""
    from scipy import special  # imported when used: see accounting/gaussian.py

    upper = a >= 0
    ta, tb = special.ndtr(-a), special.ndtr(b)
    diff = np.where(upper, ta - special.ndtr(-b), tb - special.ndtr(a))
    return diff, np.where(upper, ta, tb)


def _interval_masses(edges: np.ndarray, mus: tuple[float, ...],
                     weights: tuple[float, ...]) -> tuple[np.ndarray, float]:
    """Masses of sum_j weights[j] N(mus[j], 1) on (edges[i-1], edges[i]] (edges[0] = -inf), and a
    bound on the sum of their float errors."""
    out = np.zeros(len(edges))
    err = 0.0
    lo = np.concatenate(([-np.inf], edges[:-1]))
    for m, w in zip(mus, weights):
        diff, tail = _ndtr_between(lo - m, edges - m)
        out += w * np.clip(diff, 0.0, None)
        err += 8 * _U * w * float(tail.sum())  # two Phi values and a difference, a few ulps each
    return out, err * (1 + 1e-6) + 8 * _U * len(edges) * sum(weights) * 1e-3


def subsampled_gaussian_pld(q: float, mu: float, log_c: float, h: Fraction, remove: bool,
                            connect_dots: bool = False) -> LatticePld:
    """The PLD (on lattice h, losses rounded up) of one Poisson-subsampled release dominated by the
    scaled pair (e^log_c N(mu, 1), N(0, 1)), in the `remove` or the add direction."""
    from scipy import special  # imported when used: see accounting/gaussian.py

    c = math.exp(log_c) * (1 + 1e-12)
    hf = float(h)
    if remove:
        # loss(x) = log(1 - q + q c e^(mu x - mu^2/2)) under (1 - q) N(0) + q c N(mu), increasing
        low = math.log1p(-q)
        x_top = mu + float(-special.ndtri(_TOP_TAIL))
        top = math.log(1 - q + q * c * math.exp(mu * x_top - mu * mu / 2))
        i0, i1 = math.ceil(low / hf), math.ceil(top / hf)
        levels = np.arange(i0, i1 + 1) * hf
        arg = (np.expm1(levels) + q) / (q * c)
        with np.errstate(divide="ignore"):
            edges = (np.log(np.where(arg > 0, arg, 0.0)) + mu * mu / 2) / mu
        mus, weights = (0.0, mu), (1 - q, q * c)
    else:
        # loss(x) = -log(1 - q + (q / c) e^-(mu x - mu^2/2)) under c N(mu), increasing to -log(1-q)
        high = -math.log1p(-q)
        x_bottom = mu - float(-special.ndtri(1e-30))
        low = -math.log(1 - q + q / c * math.exp(-(mu * x_bottom - mu * mu / 2)))
        i0, i1 = math.ceil(low / hf), math.ceil(high / hf)
        levels = np.arange(i0, i1 + 1) * hf
        arg = (np.expm1(-levels) + q) * c / q
        with np.errstate(divide="ignore"):
            edges = (mu * mu / 2 - np.log(np.where(arg > 0, arg, np.inf))) / mu
        mus, weights = (mu,), (c,)
    # each edge moved down by a relative margin: the interval ending at edges[i] then has losses
    # <= levels[i] despite the float error of the edge
    edges = np.where(np.isfinite(edges), edges - (np.abs(edges) + 1) * 1e-12, edges)
    edges[-1] = np.inf if not remove else edges[-1]
    masses, err = _interval_masses(edges, mus, weights)
    total = sum(weights)
    # the top tail's mass, rounded up by the masses' error and the float sum's
    above = max(total - float(masses.sum()), 0.0) + err + 64 * _U * total if remove else 0.0
    if connect_dots:
        masses, err = _connect_the_dots(masses, edges, levels, hf, q, c, mu, remove), 2 * err
        i0 -= 1
    return LatticePld(h, i0, masses, above, err)


def _connect_the_dots(masses: np.ndarray, edges: np.ndarray, levels: np.ndarray, hf: float,
                      q: float, c: float, mu: float, remove: bool) -> np.ndarray:
    """Each interval's mass split between the lattice points below and above its losses, the
    upper part b at least the part that keeps the interval's Q-mass (docs/privacy-notions.md,
    "Connecting the dots"): b = E / (1 - e^-h) with E = int (e^L - e^l_lo) dQ over the interval,
    bounded above in closed form. Returned on the lattice from levels[0] - h up."""
    lo_edge = np.concatenate(([-np.inf], edges[:-1]))
    width = edges - lo_edge
    finite = np.isfinite(lo_edge) & np.isfinite(edges) & (width * max(mu, 1.0) < 0.5)
    xa = np.where(finite, lo_edge, 0.0)
    w = np.where(finite, width, 0.0) * (1 + 1e-15) + 1e-300
    if remove:
        # e^L - e^L(xa) = q c e^(-mu^2/2) (e^(mu x) - e^(mu xa)); (e^(mu t) - 1) <= t expm1(mu w)/w and
        # phi(xa + t) <= phi(xa) e^(max(0, -xa) t): E <= q c phi(xa - mu) e^(max(0,-xa) w) expm1(mu w) w / 2
        bound = q * c * np.exp(-0.5 * (xa - mu) ** 2) / math.sqrt(2 * math.pi) \
            * np.exp(np.maximum(0.0, -xa) * w) * np.expm1(mu * w) * w / 2
    else:
        # 1 - e^(L(xa) - L(x)) <= e^L(xa) (q/c) e^(mu^2/2 - mu xa) mu t under c N(mu):
        # E <= q mu phi(xa) e^(max(0, mu - xa) w) w^2 / 2 * e^l_lo
        l_lo = np.concatenate(([levels[0] - hf], levels[:-1]))
        bound = q * mu * np.exp(-0.5 * xa ** 2) / math.sqrt(2 * math.pi) \
            * np.exp(np.maximum(0.0, mu - xa) * w) * w * w / 2 * np.exp(l_lo)
    closed = _closed_form_excess(lo_edge, edges, levels, hf, q, c, mu, remove)
    bound = np.minimum(np.where(finite, bound * (1 + 1e-9), np.inf), closed)
    upper = np.minimum(masses, bound / -math.expm1(-hf))
    out = np.zeros(len(masses) + 1)
    out[1:] += np.where(np.isfinite(upper), upper, masses)
    out[:-1] += masses - upper
    return out


def _closed_form_excess(lo_edge: np.ndarray, edges: np.ndarray, levels: np.ndarray, hf: float,
                        q: float, c: float, mu: float, remove: bool) -> np.ndarray:
    """E = p - e^l_lo r of each interval from its P- and Q-masses (normal CDF differences), plus
    the bound on their float error (8 ulps of each tail value, doubled): an upper bound that is
    the tighter one where the interval is wide."""
    l_lo = np.concatenate(([levels[0] - hf], levels[:-1]))
    scale = np.exp(l_lo) * (1 + 1e-12)
    d0, t0 = _ndtr_between(lo_edge, edges)
    d1, t1 = _ndtr_between(lo_edge - mu, edges - mu)
    d0, d1 = np.clip(d0, 0.0, None), np.clip(d1, 0.0, None)
    if remove:  # P = (1-q) N(0) + q c N(mu), Q = N(0)
        value = q * c * d1 - (scale - 1 + q) * d0
        err = 16 * _U * (q * c * t1 + (scale + 1) * t0)
    else:  # P = c N(mu), Q = (1-q) c N(mu) + q N(0)
        value = c * d1 * (1 - scale * (1 - q)) - scale * q * d0
        err = 16 * _U * (c * t1 * (1 + scale) + scale * q * t0)
    # the sliver of the interval below its true left point (the edges' margin, 4e-12 relative at
    # most) has losses below l_lo: E counts it negatively, the split must not (its loss moves by at
    # most mu per unit of x, and both measures' densities are below (1 + c) / sqrt(2 pi))
    sliver = 4e-12 * (np.abs(np.where(np.isfinite(lo_edge), lo_edge, 0.0)) + 1)
    err = err + scale * mu * sliver * sliver * (1 + c)
    return np.maximum(value, 0.0) + err


def gauss_lattice(q: float) -> Fraction:
    """The lattice of a subsampled Gaussian release at rate q: 1e-4 down to 1e-6, about q/100,
    since the losses of the bulk are of the order of q."""
    digits = min(max(math.ceil(-math.log10(q)) + 2, 4), 6)
    return Fraction(1, 10**digits)


def subsampled_gaussian_epsilon_float(q: float, mu: float, log_c: float, count: int, delta: float,
                                      h: Fraction | None = None) -> float:
    """The smallest epsilon (a float search on the certified curve) with delta(epsilon) <= delta
    for `count` composed releases, the larger of the two directions: each release's PLD with
    its dots connected on lattice h (`gauss_lattice(q)` by default), the count by one FFT."""
    out = 0.0
    for remove in (True, False):
        one = subsampled_gaussian_pld(q, mu, log_c, h or gauss_lattice(q), remove, connect_dots=True)
        pld = DeltaCurve(power_by_fft(one, count))
        lo, hi = 0.0, 1.0
        while pld(hi) > delta:
            lo, hi = hi, 2 * hi
        for _ in range(60):
            mid = (lo + hi) / 2
            if pld(mid) > delta:
                lo = mid
            else:
                hi = mid
        out = max(out, hi)
    return out


# --- subsampled releases of an exact lattice pair (Laplace, randomized response) ---------------

# the lattice of subsampled losses: their values are irregular, so they are rounded up onto it
SUBSAMPLED_H = Fraction(1, 10**5)


def subsampled_lattice_pld(pair: LatticePld, q: float, h: Fraction, remove: bool) -> LatticePld:
    """The PLD (on lattice h, losses rounded up) of one Poisson-subsampled release dominated by
    the pair (P, Q) whose PLD `pair` is *exact*: every loss exactly h' * index, no mass at +inf
    (the discrete Laplace and randomized-response pairs of pld.py). The likelihood ratio of the
    subsampled pair is a function of the inner one's, e^l (docs/privacy-notions.md, "Poisson
    subsampling"):

        remove: ((1-q) Q + q P, Q):  loss log(1 - q + q e^l), mass (1-q) p e^-l + q p
        add:    (P, (1-q) P + q Q):  loss -log(1 - q + q e^-l), mass p

    where p is P's mass at inner loss l and p e^-l is Q's."""
    if pair.inf:
        raise ValueError("the inner pair must have no mass at +infinity")
    hp = float(pair.h)
    inner = np.arange(pair.lo, pair.lo + len(pair.probs), dtype=float) * hp  # exact to a few ulps
    p = pair.probs
    if remove:
        loss = np.log1p(q * np.expm1(inner))
        with np.errstate(divide="ignore"):
            q_mass = np.exp(np.log(p) - inner)  # no overflow where p is tiny and e^-l huge
        mass = (1 - q) * q_mass + q * p
        # Q's masses carry P's error times e^-l; a mass lost to underflow is at most the
        # shortfall of the total from 1 (P and Q are probability measures)
        err = pair.err * ((1 - q) * math.exp(min(float(np.max(-inner)), 700.0)) + q) \
            + abs(1.0 - float(mass.sum()))
    else:
        loss = -np.log1p(q * np.expm1(-inner))
        mass = p.copy()
        err = pair.err
    hf = float(h)
    # rounded up: the margin (1e-6 of a step) is far above the float error of loss / h
    idx = np.ceil(loss / hf + 1e-6).astype(np.int64)
    lo = int(idx.min())
    out = np.zeros(int(idx.max()) - lo + 1)
    np.add.at(out, idx - lo, mass)
    # exp / log1p / expm1 are within a few ulps: a relative 1e-13 of the total mass covers them
    return LatticePld(h, lo, out, 0.0, err + 1e-13 * float(mass.sum()))


class DeltaCurve:
    """delta(eps) of a PLD for eps >= 0, by suffix sums, in O(log n) per query (an epsilon search
    asks for many): delta(eps) = sum_{l > eps} p_l - e^eps sum_{l > eps} p_l e^-l, with an
    outward margin for the float error of the two sums (recursive summation: at most n u times
    the sum of the terms, u = 2^-53), plus the mass at +infinity and the PLD's error."""

    def __init__(self, pld: LatticePld):
        ell = pld.losses()  # each rounded up
        keep = ell > 0
        self.ell, p = ell[keep], pld.probs[keep]
        self.mass = np.cumsum(p[::-1])[::-1]
        self.tilted = np.cumsum((p * np.exp(-self.ell))[::-1])[::-1]
        self.slack = 4 * len(p) * _U
        self.extra = pld.inf + pld.err

    def __call__(self, eps: float) -> float:
        if eps < 0:
            raise ValueError("DeltaCurve answers for eps >= 0")
        i = int(np.searchsorted(self.ell, eps, side="right"))
        if i == len(self.ell):
            return self.extra
        a, b = float(self.mass[i]), math.exp(eps) * float(self.tilted[i])
        return max(a - b, 0.0) + self.slack * (a + b) + self.extra
