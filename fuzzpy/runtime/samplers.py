"""Randomness and exact samplers (Canonne, Kamath, Steinke 2020, "CKS20").

Every sampler draws only uniform integers from a `RandomSource` and computes with Python
integers, so each distribution is exactly the stated one: no floating point touches the
sampling path of a release. The exceptions, `sample_discrete_laplace_batch` and
`sample_discrete_gaussian_batch`, are float-based numpy samplers for auditing and simulation;
no release may use them.

Parameters are exact rationals (`int` or `fractions.Fraction`). Floats are refused: a float
such as 0.7 is not the number the caller meant, and the difference would silently change the
privacy guarantee.
"""

from __future__ import annotations

import math
import numbers
import random
from fractions import Fraction
from typing import Callable

import numpy as np

__all__ = [
    "RandomSource",
    "SharedRuns",
    "shared_copies",
    "runs_draw",
    "exact_rational",
    "sample_bernoulli_exp",
    "sample_geometric_exp",
    "sample_discrete_laplace",
    "sample_discrete_laplace_batch",
    "sample_discrete_gaussian",
    "sample_discrete_gaussian_batch",
]


class RandomSource:
    """The single source of randomness for every sampler: uniform random integers.

    `RandomSource()` reads the operating system's CSPRNG (`random.SystemRandom`, i.e.
    os.urandom). `RandomSource.seeded(seed)` is a deterministic Mersenne Twister for tests and
    demos ONLY: anyone who knows or guesses the seed can subtract the noise, so a seeded run
    gives no privacy at all.
    """

    __slots__ = ("_gen", "_seed", "_numpy")

    def __init__(self) -> None:
        self._gen: random.Random = random.SystemRandom()
        self._seed: int | None = None
        self._numpy: np.random.Generator | None = None

    @classmethod
    def seeded(cls, seed: int) -> RandomSource:
        """A deterministic source, for reproducible tests and demos only (no privacy)."""
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError("a seed must be an integer")
        src = cls.__new__(cls)
        src._gen = random.Random(int(seed))
        src._seed = int(seed)
        src._numpy = None
        return src

    @property
    def is_seeded(self) -> bool:
        """True for a deterministic test source; False for the secure default."""
        return self._seed is not None

    def randbits(self, k: int) -> int:
        """A uniform integer in [0, 2**k)."""
        if k < 0:
            raise ValueError("randbits needs k >= 0")
        return self._gen.getrandbits(k)

    def randbytes(self, n: int) -> bytes:
        """n uniform random bytes (os.urandom for the secure default): bulk bits for the random
        choices of contribution bounds (runtime/kernels/units.py)."""
        if n < 0:
            raise ValueError("randbytes needs n >= 0")
        return self._gen.randbytes(n)

    def secret(self) -> int:
        """64 random bits that choose among equally good outcomes and are never released: which
        rows a truncation keeps (runtime/kernels/joins.py)."""
        return self.randbits(64)

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), by rejection on (n-1).bit_length() bits (exact)."""
        if n <= 0:
            raise ValueError("randbelow needs n > 0")
        getbits = self._gen.getrandbits
        k = (n - 1).bit_length()
        r = getbits(k)
        while r >= n:
            r = getbits(k)
        return r

    def numpy_generator(self) -> np.random.Generator:
        """The numpy Generator for bulk (auditing, simulation) sampling, seeded with 128 bits
        drawn from this source on first use and the same Generator after (one stream: a
        gradient descent's audit asks for it twice per step, and seeding a new one cost more
        than drawing a 400-run step's noise).  Reproducible for a seeded source, unpredictable
        otherwise.  PCG64 is not a cryptographic generator, which is why releases never use it."""
        if self._numpy is None:
            self._numpy = np.random.default_rng(self.randbits(128))
        return self._numpy

    def __repr__(self) -> str:
        if self.is_seeded:
            return f"RandomSource.seeded({self._seed}) [TESTING ONLY: no privacy]"
        return "RandomSource(os secure generator)"


class SharedRuns(RandomSource):
    """AUDITING ONLY: the source of one batched draw over the runs of several inputs at once,
    lane i * runs + j holding run j of input i.  The vectorised samplers draw the noise of the
    `runs` runs once and give every input's run j the same draws (`runs_draw`): each input's runs
    are still independent draws of its law, and inputs differ by their values only (common
    random numbers, as the audit's search wants them).  Everything else (an exact sampler, a
    draw over some of the lanes) reads the shared stream as the base source would."""

    __slots__ = ("base", "copies", "runs")

    def __init__(self, base: RandomSource, copies: int, runs: int):
        self._gen, self._seed, self._numpy = base._gen, base._seed, base.numpy_generator()
        self.base, self.copies, self.runs = base, copies, runs


def shared_copies(rng: RandomSource, n: int) -> int:
    """How many inputs share each run's draws in a draw over n lanes: a `SharedRuns` source's
    copies when the draw is over its every lane, else 1 (some of the lanes draw their own)."""
    if type(rng) is SharedRuns and n == rng.copies * rng.runs:
        return rng.copies
    return 1


def runs_draw(rng: RandomSource, n: int, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    """draw(n): n runs' random numbers (an array whose first axis is the runs), drawn once for
    the runs and repeated for every input when the inputs share them (`shared_copies`)."""
    copies = shared_copies(rng, n)
    if copies > 1:
        return np.concatenate([draw(n // copies)] * copies)
    return draw(n)


def exact_rational(x: object, name: str) -> Fraction:
    """`x` as an exact Fraction; ints and Fractions only (floats are refused, see module doc)."""
    if isinstance(x, bool):
        raise TypeError(f"{name} must be an int or a Fraction, not a bool")
    if isinstance(x, numbers.Rational):
        return Fraction(x.numerator, x.denominator)
    if isinstance(x, numbers.Real) and not math.isfinite(float(x)):
        raise ValueError(f"{name} must be finite")
    raise TypeError(f"{name} must be an int or a fractions.Fraction (exact), got {type(x).__name__}")


# --- integer cores: probabilities are num/den with Python ints -----------------------------

def _bernoulli_exp_unit(num: int, den: int, rng: RandomSource) -> bool:
    """Bernoulli(exp(-num/den)) for 0 <= num/den <= 1 (CKS20, Algorithm 1).

    Draw A_k ~ Bernoulli(gamma/k) for k = 1, 2, ... until one fails; the index K of the
    failure is odd with probability exactly sum_j (-gamma)^j / j! = exp(-gamma)."""
    k = 1
    while rng.randbelow(den * k) < num:
        k += 1
    return k % 2 == 1


def _bernoulli_exp(num: int, den: int, rng: RandomSource) -> bool:
    """Bernoulli(exp(-num/den)) for num/den >= 0: exp(-g) = exp(-1)^floor(g) * exp(-frac(g)),
    a product of independent coins; stop at the first failure (expected < 2 coins)."""
    whole, rem = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_unit(1, 1, rng):
            return False
    return _bernoulli_exp_unit(rem, den, rng)


def _geometric_exp(num: int, den: int, rng: RandomSource) -> int:
    """k >= 0 with P(k) = (1 - e^-g) e^(-g k), g = num/den > 0 (CKS20, inside Algorithm 2).

    X with P(X = x) proportional to exp(-x/den) is U + den*V, U uniform on [0, den) accepted
    with probability exp(-U/den) and V ~ Geometric(1 - e^-1); then X // num has
    P(k) proportional to exp(-k num/den)."""
    while True:
        u = rng.randbelow(den)
        if not _bernoulli_exp_unit(u, den, rng):
            continue
        v = 0
        while _bernoulli_exp_unit(1, 1, rng):
            v += 1
        return (u + den * v) // num


def _discrete_laplace(num: int, den: int, rng: RandomSource) -> int:
    """z with P(z) proportional to exp(-|z| / (num/den)) (CKS20, Algorithm 2).

    A fair sign on a geometric magnitude counts 0 twice, so (sign -, 0) is rejected."""
    while True:
        y = _geometric_exp(den, num, rng)
        negative = rng.randbits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


# --- public samplers ------------------------------------------------------------------------

def sample_bernoulli_exp(gamma: Fraction, rng: RandomSource) -> bool:
    """True with probability exactly exp(-gamma), for rational gamma >= 0."""
    g = exact_rational(gamma, "gamma")
    if g < 0:
        raise ValueError("gamma must be >= 0")
    return _bernoulli_exp(g.numerator, g.denominator, rng)


def sample_geometric_exp(gamma: Fraction, rng: RandomSource) -> int:
    """k in {0, 1, ...} with probability exactly (1 - exp(-gamma)) * exp(-gamma * k), gamma > 0."""
    g = exact_rational(gamma, "gamma")
    if g <= 0:
        raise ValueError("gamma must be > 0")
    return _geometric_exp(g.numerator, g.denominator, rng)


def sample_discrete_laplace(scale: Fraction, rng: RandomSource) -> int:
    """An integer z with P(z) = (1-q)/(1+q) * q^|z|, q = exp(-1/scale), exactly; scale > 0."""
    s = exact_rational(scale, "scale")
    if s <= 0:
        raise ValueError("scale must be > 0")
    return _discrete_laplace(s.numerator, s.denominator, rng)


# Beyond this the int64 differences of numpy geometrics could overflow.
_BATCH_MAX_SCALE = Fraction(2) ** 50


def sample_discrete_laplace_batch(scale: Fraction, n: int, rng: RandomSource) -> np.ndarray:
    """AUDITING / SIMULATION ONLY: n draws of the discrete Laplace, as int64.

    The difference of two independent Geometric(p) variables, p = 1 - exp(-1/scale), has
    P(z) proportional to exp(-|z|/scale): the same law as `sample_discrete_laplace` except that
    p is a float and numpy's geometric sampler uses floating point. That is fine for estimating
    a mechanism's behaviour in bulk and NOT fine for releasing anything (Mironov 2012)."""
    s = exact_rational(scale, "scale")
    if s <= 0:
        raise ValueError("scale must be > 0")
    if s > _BATCH_MAX_SCALE:
        raise ValueError("scale too large for the batch sampler")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError("n must be a non-negative integer")
    gen = rng.numpy_generator()
    p = -math.expm1(-1.0 / float(s))  # expm1 keeps p accurate when the scale is large
    return gen.geometric(p, size=int(n)) - gen.geometric(p, size=int(n))


# --- discrete Gaussian (CKS20, Algorithm 3) -------------------------------------------------

def _ceil_sqrt_int(n: int) -> int:
    """The smallest integer s >= 0 with s*s >= n (exact)."""
    return 0 if n <= 0 else math.isqrt(n - 1) + 1


def _gaussian_params(sigma2: Fraction) -> tuple[int, int, int]:
    """(p, q, t) for sigma^2 = p/q: the proposal's discrete Laplace scale t = floor(sigma) + 1,
    exactly (floor(sqrt(x)) = isqrt(floor(x)) for real x >= 0)."""
    p, q = sigma2.numerator, sigma2.denominator
    return p, q, math.isqrt(p // q) + 1


def _gaussian_rejection(y: int, p: int, q: int, t: int) -> tuple[int, int]:
    """gamma = (|y| - sigma^2/t)^2 / (2 sigma^2) as (num, den), with sigma^2 = p/q:
    (|y| q t - p)^2 / (2 p q t^2). The proposal times exp(-gamma) is proportional to
    exp(-y^2 / (2 sigma^2)) (docs/noise.md, "The sampler")."""
    d = abs(y) * q * t - p
    return d * d, 2 * p * q * t * t


def _discrete_gaussian(p: int, q: int, t: int, rng: RandomSource) -> int:
    """N_Z(0, p/q) exactly (CKS20, Algorithm 3): propose a discrete Laplace of scale t, accept
    with probability exp(-gamma(y)); each round accepts with probability about 0.46 to 0.76."""
    while True:
        y = _discrete_laplace(t, 1, rng)
        if _bernoulli_exp(*_gaussian_rejection(y, p, q, t), rng):
            return y


def sample_discrete_gaussian(sigma2: Fraction, rng: RandomSource) -> int:
    """An integer y with P(y) = exp(-y^2 / (2 sigma2)) / sum_z exp(-z^2 / (2 sigma2)), exactly,
    for rational sigma2 > 0 (the discrete Gaussian N_Z(0, sigma2) of CKS20)."""
    s2 = exact_rational(sigma2, "sigma2")
    if s2 <= 0:
        raise ValueError("sigma2 must be > 0")
    return _discrete_gaussian(*_gaussian_params(s2), rng)


# t = floor(sigma) + 1 stays below 2**50, as for the Laplace batch sampler.
_BATCH_MAX_SIGMA2 = Fraction(2) ** 98


def sample_discrete_gaussian_batch(sigma2: Fraction, n: int, rng: RandomSource) -> np.ndarray:
    """AUDITING / SIMULATION ONLY: n draws of the discrete Gaussian N_Z(0, sigma2), as int64.

    The same rejection scheme as `sample_discrete_gaussian` (discrete Laplace proposal of scale
    floor(sigma) + 1, accepted with probability exp(-gamma)), vectorised with numpy, with the
    proposal and the acceptance coin computed in floating point. Its law is the discrete
    Gaussian up to float rounding: fine for estimating a mechanism in bulk, NOT for releasing
    anything (Mironov 2012)."""
    s2 = exact_rational(sigma2, "sigma2")
    if s2 <= 0:
        raise ValueError("sigma2 must be > 0")
    if s2 > _BATCH_MAX_SIGMA2:
        raise ValueError("sigma2 too large for the batch sampler")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError("n must be a non-negative integer")
    gen = rng.numpy_generator()
    if _ROUNDED_MIN_SIGMA2 <= s2 <= _ROUNDED_MAX_SIGMA2:
        return _rounded_gaussian_batch(float(s2), int(n), gen)
    _, _, t = _gaussian_params(s2)
    var, shift, scale = float(s2), float(s2 / t), float(t)
    out = np.empty(int(n), dtype=np.int64)
    filled, rate = 0, 0.75
    while filled < n:
        need = n - filled
        # A proposal is accepted with probability about 0.44 (sigma2 = 1/2) to 0.76 (large sigma):
        # each round draws for the rate the last one saw, and a short round is topped up.
        m = int(need / rate * 1.1) + 16
        # The discrete Laplace proposal of scale t: a fair sign on the magnitude floor(E t), E a
        # standard exponential (P(k) = q^k (1 - q), q = exp(-1/t)).  Zero comes with either sign:
        # refusing -0 leaves it the weight (1 - q) / 2 that every y has times q^|y|.
        mag = np.floor(gen.standard_exponential(m) * scale)
        neg = gen.random(m) < 0.5
        gamma = (mag - shift) ** 2 / (2 * var)
        # Accepted with probability exp(-gamma): another exponential variable above gamma.
        ok = (gen.standard_exponential(m) > gamma) & ~(neg & (mag == 0))
        rate = max(np.count_nonzero(ok) / m, 0.3)
        kept = np.where(neg, -mag, mag)[ok][:need].astype(np.int64)
        out[filled : filled + len(kept)] = kept
        filled += len(kept)
    return out


# From this variance on, the batch sampler rounds continuous Gaussians (accepted with probability
# about exp(-6 / sigma), at least 0.91) instead of proposing discrete Laplace values (about 0.76),
# with one normal and one uniform variable per proposal instead of two exponentials and a
# uniform.  Proposals beyond 12 sigma are refused: N_Z(0, sigma2) puts less than 1e-31 there.
# Up to sigma = 2**40: a proposal within 12 sigma is then a float whose spacing is at most 2**-8,
# a whole fraction of a unit, so every cell [k - 1/2, k + 1/2) holds as many floats as the next
# (beyond, the discrete Laplace proposals, whose magnitudes stay exact up to 2**49).
_ROUNDED_MIN_SIGMA2 = Fraction(4096)
_ROUNDED_MAX_SIGMA2 = Fraction(2) ** 80
_ROUNDED_TAIL = 12


def _rounded_gap(y: np.ndarray, k: np.ndarray, var: float, c: float) -> np.ndarray:
    """-log of the probability of accepting the proposal y (rounded to k): the ratio of the
    target, exp(-k^2 / 2 var) spread evenly over k's cell, to y's normal density, scaled by
    exp(-c) so that it stays at most 1 (|y^2 - k^2| <= |k| + 1/4 in the cell)."""
    return c - (y - k) * (y + k) / (2 * var)


def _rounded_cell(y: np.ndarray) -> np.ndarray:
    """k with y in [k - 1/2, k + 1/2): half-open cells, each holding as many floats as the next
    (rounding half to even would give even k the halves of both neighbours)."""
    return np.floor(y + 0.5)


def _rounded_accept(u: np.ndarray, gap: np.ndarray) -> np.ndarray:
    """u < exp(-gap) for uniform u (probability exp(-gap)), computing exp only where
    u >= 1 - gap: below that the answer is yes, since 1 - gap <= exp(-gap)."""
    ok = u < 1.0 - gap
    unsure = np.flatnonzero(~ok)
    ok[unsure] = u[unsure] < np.exp(-gap[unsure])
    return ok


def _rounded_gaussian_batch(var: float, n: int, gen: np.random.Generator) -> np.ndarray:
    """n draws of N_Z(0, var), var >= _ROUNDED_MIN_SIGMA2, float-based (auditing only).

    y ~ N(0, var) is rounded to k = floor(y + 1/2) and accepted with probability exp(-gap), gap =
    c - (y^2 - k^2) / (2 var), c = (K + 1/4) / (2 var), |k| <= K = ceil(12 sigma).  Then
    P(k) is proportional to the integral over k's cell (width 1) of
    exp(-y^2 / 2 var) exp((y^2 - k^2) / 2 var) = exp(-k^2 / 2 var): the discrete Gaussian
    (restricted to |k| <= K), up to float rounding.  The coin compares a uniform u with
    exp(-gap): u < 1 - gap already accepts (1 - gap <= exp(-gap)); exp is computed only for the
    few proposals above that."""
    sigma = math.sqrt(var)
    bound = math.ceil(_ROUNDED_TAIL * sigma)
    c = (bound + 0.25) / (2 * var)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        m = int(need * 1.02 * math.exp(c)) + 16
        y = gen.standard_normal(m) * sigma
        k = _rounded_cell(y)
        gap = _rounded_gap(y, k, var, c)
        ok = _rounded_accept(gen.random(m), gap) & (np.abs(k) <= bound)
        kept = k[ok][:need].astype(np.int64)
        out[filled : filled + len(kept)] = kept
        filled += len(kept)
    return out
