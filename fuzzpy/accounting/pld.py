"""Privacy loss distributions (PLDs) on a lattice, with pessimistic rounding and an error bound.

A PLD here is the law, under P, of the privacy loss L = log(P/Q) of a dominating pair (P, Q):
mass `probs[i]` at loss `h * (lo + i)` plus `inf` at +infinity. For such a pair

    delta(eps) = E[(1 - e^(eps - L))_+],

which is non-decreasing in L pointwise, and the PLD of a composition is the convolution of the
PLDs. So rounding a loss *up*, or moving mass towards higher loss, gives an upper bound for the
pair and for every composition containing it: that is how grids and tails are handled here.

`err` bounds sum_i |probs[i] - true mass| (floating point: construction, FFT convolution);
every delta computed from the PLD adds it (each weight is at most 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .gaussian import gdp_delta_float

_U = 2.0**-53
# masses below this, at either end, are moved (pessimistically) rather than kept
_TAIL = 1e-30
# longest lattice kept: longer PLDs are coarsened (losses rounded up to a coarser grid)
MAX_LENGTH = 1 << 21

# fuzzpy's Laplace grid: 2**m >= 2**GRID_BITS * epsilon (fuzzpy/runtime/grid.py; the tests
# check that the two agree, this package imports nothing from the rest of fuzzpy).
GRID_BITS = 12


@dataclass(frozen=True)
class LatticePld:
    h: Fraction
    lo: int
    probs: np.ndarray
    inf: float = 0.0
    err: float = 0.0

    # -- construction ----------------------------------------------------------------------
    @staticmethod
    def identity() -> "LatticePld":
        return LatticePld(Fraction(1), 0, np.ones(1))

    def losses(self) -> np.ndarray:
        """The losses as floats, each rounded up (never below the exact h * index)."""
        idx = np.arange(self.lo, self.lo + len(self.probs), dtype=float)
        h = float(self.h)
        up, down = np.nextafter(h, math.inf), np.nextafter(h, 0.0)
        raw = np.where(idx >= 0, idx * up, idx * down)
        return np.nextafter(raw, math.inf)

    # -- operations -------------------------------------------------------------------------
    def regrid(self, h: Fraction) -> "LatticePld":
        """The same PLD on grid h (h <= self.h), every loss rounded up to the new grid."""
        if h == self.h:
            return self
        ratio = self.h / h
        idx = np.arange(self.lo, self.lo + len(self.probs))
        if ratio.denominator == 1:
            new = idx * ratio.numerator
        else:
            r = float(ratio)
            new = np.ceil(np.where(idx >= 0, idx * r * (1 + 1e-12), idx * r * (1 - 1e-12)))
            new = new.astype(np.int64)
        lo = int(new.min())
        out = np.zeros(int(new.max()) - lo + 1)
        np.add.at(out, new - lo, self.probs)
        return LatticePld(h, lo, out, self.inf, self.err)

    def coarsen(self, factor: int) -> "LatticePld":
        """Grid h*factor: index i goes to ceil(i/factor) (losses rounded up)."""
        if factor <= 1:
            return self
        idx = np.arange(self.lo, self.lo + len(self.probs))
        new = -((-idx) // factor)
        lo = int(new[0])
        out = np.zeros(int(new[-1]) - lo + 1)
        np.add.at(out, new - lo, self.probs)
        return LatticePld(self.h * factor, lo, out, self.inf, self.err)

    def _trim(self) -> "LatticePld":
        """Move negligible tails: the low end up to the first kept loss, the high end to +inf."""
        p = np.clip(self.probs, 0.0, None)
        c = np.cumsum(p)
        total = c[-1]
        first = int(np.searchsorted(c, _TAIL, side="right"))
        rc = np.cumsum(p[::-1])
        last = len(p) - 1 - int(np.searchsorted(rc, _TAIL, side="right"))
        if first > last:
            first = last = int(np.argmax(p))
        kept = p[first:last + 1].copy()
        kept[0] += c[first - 1] if first > 0 else 0.0
        high = total - c[last]
        return LatticePld(self.h, self.lo + first, kept, self.inf + max(high, 0.0), self.err)

    def compose(self, other: "LatticePld") -> "LatticePld":
        if other.h != self.h:
            h = min(self.h, other.h)
            return self.regrid(h).compose(other.regrid(h)) if h == self.h or h == other.h \
                else self.regrid(h).compose(other.regrid(h))
        x, y = self.probs, other.probs
        n = len(x) + len(y) - 1
        if min(len(x), len(y)) <= 64:
            z = np.convolve(x, y)  # direct sums of non-negative terms
            conv_err = 2 * n * _U * (x.sum() * y.sum())
        else:
            size = 1 << (n - 1).bit_length()  # numpy's FFT: scipy.signal costs a second to import
            z = np.fft.irfft(np.fft.rfft(x, size) * np.fft.rfft(y, size), size)[:n]
            # standard FFT convolution bound, with a factor of safety of about 10:
            # ||z_hat - z||_1 <= sqrt(n) ||.||_2 <= 50 n log2(n) u ||x||_2 ||y||_2
            conv_err = 50 * n * math.log2(n) * _U * float(np.linalg.norm(x) * np.linalg.norm(y))
        px, py = float(x.sum()) + self.inf, float(y.sum()) + other.inf
        inf = self.inf * py + other.inf * px - self.inf * other.inf
        err = self.err * (py + other.err) + other.err * px + conv_err
        out = LatticePld(self.h, self.lo + other.lo, z, min(inf, 1.0), err)._trim()
        if len(out.probs) > MAX_LENGTH:
            out = out.coarsen(math.ceil(len(out.probs) / MAX_LENGTH))
        return out

    def self_compose(self, count: int) -> "LatticePld":
        result, base = LatticePld(self.h, 0, np.ones(1)), self
        while count:
            if count & 1:
                result = result.compose(base)
            count >>= 1
            if count:
                base = base.compose(base)
        return result

    # -- delta --------------------------------------------------------------------------------
    def delta_pure(self, eps: float) -> float:
        """Upper bound on delta(eps) of this PLD alone."""
        ell = self.losses()
        m = ell > eps
        body = float(np.sum(self.probs[m] * -np.expm1(eps - ell[m])))
        return _up(body) + self.inf + self.err

    def delta_with_gaussian(self, eps: float, mu: float) -> float:
        """Upper bound on delta(eps) of this PLD composed with mu-GDP:
        sum_i p_i delta_mu(eps - l_i) (conditioning on the first part's loss)."""
        if mu == 0:
            return self.delta_pure(eps)
        ell = self.losses()
        w = gdp_delta_float(mu, eps - ell)
        # each float delta_mu is within a relative 1e-12 (log-space formula), plus underflow
        body = float(np.sum(self.probs * np.asarray(w))) * (1 + 1e-9) + 1e-300
        return _up(body) + self.inf + self.err


def _up(x: float) -> float:
    """x plus a relative margin for the float summation (n u with n <= 2^22)."""
    return x * (1 + 1e-9)


# --- the pairs --------------------------------------------------------------------------------

def laplace_grid(epsilon: Fraction) -> int:
    """2**m, the number of grid steps in fuzzpy's Laplace sensitivity for this epsilon."""
    target = Fraction(2**GRID_BITS) * epsilon
    m = 0
    while 2**m < target:
        m += 1
    return 2**m


def laplace_pld(epsilon: Fraction) -> LatticePld:
    """The PLD of the pair (Z, Z + K), Z discrete Laplace with q = e^-a, K = 2**m steps and
    a = epsilon/K, so that the losses span exactly [-epsilon, epsilon]. It dominates fuzzpy's
    scalar Laplace release of this epsilon whose input moves by at most its calibrated
    sensitivity: that release adds discrete Laplace noise of the smaller rate 2a/(2+a), which
    is this noise plus independent noise (docs/privacy-notions.md).

    Under P: loss a*(K - 2j) with mass 1/(1+q) at j = 0, (1-q) q^j/(1+q) for 0 < j < K and
    q^K/(1+q) at j = K."""
    K = laplace_grid(epsilon)
    a = epsilon / K
    q = math.exp(-float(a))
    j = np.arange(K + 1, dtype=float)
    probs = (1 - q) * np.exp(-float(a) * j) / (1 + q)
    probs[0] = 1 / (1 + q)
    probs[-1] = math.exp(-float(a) * K) / (1 + q)
    err = 1e-13  # float error of exp/division on masses summing to 1 (a few ulps each)
    if K % 2 == 0:  # loss = 2a * (K/2 - j)
        return LatticePld(2 * a, -K // 2, probs[::-1].copy(), 0.0, err)
    # K = 1: loss +a (j = 0) or -a (j = 1)
    return LatticePld(a, -1, np.array([probs[1], 0.0, probs[0]]), 0.0, err)


def rr_pld(epsilon: Fraction) -> LatticePld:
    """Randomized response with epsilon: dominates every epsilon-DP release (Kairouz, Oh &
    Viswanath 2015; Murtagh & Vadhan 2016). Loss +eps with mass e^eps/(1+e^eps), else -eps."""
    e = float(epsilon)
    hi = 1 / (1 + math.exp(-e))
    lo = math.exp(-e) / (1 + math.exp(-e))  # = 1/(1 + e^eps), without overflowing for a large epsilon
    return LatticePld(epsilon, -1, np.array([lo, 0.0, hi]), 0.0, 1e-15)


def inventory_pld(entries: tuple[tuple[Fraction, int], ...], pair) -> LatticePld:
    """The composition of every release of an inventory, each dominated by pair(epsilon)."""
    entries = tuple((e, c) for e, c in entries if c > 0 and e > 0)
    if not entries:
        return LatticePld.identity()
    plds = [pair(e).self_compose(c) if len(entries) == 1 else None for e, c in entries]
    if len(entries) == 1:
        return plds[0]
    base = [pair(e) for e, _ in entries]
    h = min(p.h for p in base) / 8
    total = LatticePld(h, 0, np.ones(1))
    for p, (_, c) in zip(base, entries):
        total = total.compose(p.regrid(h).self_compose(c))
    return total


# --- the count-fold composition by one FFT ------------------------------------------------------

# the mass of the composition allowed above its window (it goes to +infinity) and, for tightness
# only, below it (it wraps onto higher losses)
_WINDOW_TAIL = 1e-15


def _log_mgf(p: np.ndarray, lam: float) -> float:
    """log sum_k p_k e^(lam k), rounded up (a relative 1e-9 covers the float sum of n <= 2^24
    terms and the exps)."""
    k = np.arange(len(p), dtype=float)
    with np.errstate(divide="ignore"):
        logs = np.log(p) + lam * k
    top = float(np.max(logs))
    return top + math.log(float(np.sum(np.exp(logs - top)))) + 1e-9 * (1 + abs(top))


def _chernoff_index(p: np.ndarray, count: int, tail: float, upper: bool) -> int:
    """An index s with (sum of `count` indices drawn from the measure p) >= s of mass at most
    `tail` (upper), or, for the lower end, a float estimate of where the mass below is `tail`:
    the Chernoff bound e^(-lam s) (sum_k p_k e^(lam k))^count, minimised over a grid of lam."""
    m = len(p)
    sign = 1.0 if upper else -1.0
    best = math.inf if upper else -math.inf
    for lam in np.geomspace(1e-3, 1e4, 80) * 8.0 / max(m, 1):
        s = (count * _log_mgf(p, sign * lam) - math.log(tail)) / lam
        best = min(best, s) if upper else max(best, -s)
    return math.ceil(best) if upper else math.floor(best)


def power_by_fft(pld: LatticePld, count: int) -> LatticePld:
    """The `count`-fold composition of `pld` by one FFT of the window of losses that carries
    the mass: the k-th power of the DFT is the circular convolution, in which the mass below the
    window lands on higher losses (only raising delta) and the mass above it, bounded by a
    Chernoff bound, is moved to +infinity. The float error of the transforms and of the power is
    bounded coefficient by coefficient (docs/privacy-notions.md, "One FFT for the whole count")."""
    from scipy import fft as sfft

    if count <= 1:
        return pld if count == 1 else LatticePld(pld.h, 0, np.ones(1))
    p = np.clip(pld.probs, 0.0, None)
    m = len(p)
    top = min(_chernoff_index(p, count, _WINDOW_TAIL, True), count * (m - 1) + 1)
    bottom = max(_chernoff_index(p, count, _WINDOW_TAIL, False), 0)
    size = sfft.next_fast_len(max(top - bottom, m) + 1, real=True)
    x = np.zeros(size)
    np.add.at(x, np.arange(m) % size, p)
    xf = sfft.rfft(x)
    # forward transform: ||X_hat - X||_inf <= ||.||_2 <= 5 log2(L) u ||X||_2, ||X||_2 = sqrt(L) ||x||_2
    e = 5 * math.log2(size) * _U * math.sqrt(size) * float(np.linalg.norm(p)) + 1e-300
    mag = np.abs(xf)
    # |Y^n - X^n| <= n |Y - X| (max(|X|, |Y|))^(n-1); the power's own rounding (exp of n log z):
    # a relative 8 u (1 + n |log z|)
    bound_mag = np.minimum(mag + e, float(p.sum()) + e)
    with np.errstate(divide="ignore", under="ignore"):
        power_err = count * e * np.exp((count - 1) * np.log(bound_mag))
        zf = xf ** count
        log_abs = np.abs(np.log(np.where(mag > 0, mag, 1.0))) + math.pi
        power_err = power_err + 8 * _U * (1 + count * log_abs) * np.abs(zf)
    weights = np.full(len(xf), 2.0)
    weights[0] = 1.0
    if size % 2 == 0:
        weights[-1] = 1.0
    spectrum_err = float(np.sum(weights * power_err))  # ||z err||_1 <= (1/L) sum_k |Z_k err| * L
    z = sfft.irfft(zf, size)
    # inverse transform: ||z_hat - z||_1 <= sqrt(L) ||.||_2 <= 5 log2(L) u ||Z||_2
    inverse_err = 5 * math.log2(size) * _U * math.sqrt(float(np.sum(weights * np.abs(zf) ** 2)))
    z = np.roll(np.clip(z, 0.0, None), -(bottom % size))
    total, err_in = float(p.sum()) + pld.inf, pld.err
    grow = (total + err_in) ** (count - 1)
    # the window reaches the largest sum: nothing lies above it
    tail = 0.0 if bottom + size > count * (m - 1) else _upper_tail_bound(p, count, bottom + size)
    inf = min(1.0, count * pld.inf * total ** (count - 1) + tail)
    err = count * err_in * grow + spectrum_err + inverse_err
    return LatticePld(pld.h, count * pld.lo + bottom, z, inf, err)


def _upper_tail_bound(p: np.ndarray, count: int, s: int) -> float:
    """A Chernoff bound on the mass of {sum of `count` indices >= s}, rounded up."""
    m = len(p)
    best = math.inf
    for lam in np.geomspace(1e-3, 1e4, 80) * 8.0 / max(m, 1):
        best = min(best, count * _log_mgf(p, lam) - lam * s)
    return math.exp(best) * (1 + 1e-9) if best < 700 else math.inf
