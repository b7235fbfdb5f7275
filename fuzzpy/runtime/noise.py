"""Privacy mechanisms on exact samplers: Laplace on a fixed-point grid, exponential mechanism,
report-noisy-max (permute-and-flip), sparse vector (AboveThreshold), randomized response.

Every random choice is exact (see `samplers`): probabilities are the stated ones, not float
approximations of them. Floats appear only in inputs (converted exactly with Fraction) and in
outputs (post-processing of an exact integer or index). The privacy arguments, with references,
are in docs/noise.md; `plan_laplace` is the one place where a Laplace noise scale is computed.

Callers (the interpreter) must hand over values whose sensitivity the checker proved; no error
raised here names a value, but the caller must not let data reach an error path at all.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from fuzzpy.runtime.samplers import (
    RandomSource,
    _bernoulli_exp,
    _discrete_laplace,
    exact_rational,
    sample_bernoulli_exp,
    sample_discrete_laplace,
    sample_discrete_laplace_batch,
    sample_geometric_exp,
)

__all__ = [
    "GRID_BITS",
    "LaplacePlan",
    "Release",
    "RandomSource",
    "above_threshold",
    "exponential_mechanism",
    "laplace_release",
    "plan_laplace",
    "randomized_response",
    "report_noisy_max",
    "sample_bernoulli_exp",
    "sample_discrete_laplace",
    "sample_discrete_laplace_batch",
    "sample_geometric_exp",
]

# The grid step is at most 2**-GRID_BITS of the noise scale, so rounding to it is invisible
# next to the noise, and the tuple overhead (n-1)/2**m is at most the same fraction.
GRID_BITS = 12


# --- argument checks (defence in depth: the checker already enforces these) ----------------

def _epsilon(epsilon: object) -> Fraction:
    eps = exact_rational(epsilon, "epsilon")
    if eps <= 0:
        raise ValueError("epsilon must be > 0")
    return eps


def _sensitivity(sensitivity: object) -> Fraction:
    sens = exact_rational(sensitivity, "sensitivity")
    if sens < 0:
        raise ValueError("sensitivity must be >= 0")
    return sens


def _exact_value(v: object) -> Fraction:
    """A released-from or compared number as an exact Fraction (floats convert exactly)."""
    if isinstance(v, Fraction):
        return v
    if isinstance(v, numbers.Integral):
        return Fraction(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        if not math.isfinite(f):
            # Says nothing about which value or where: the caller should never get here.
            raise ValueError("a mechanism was given a non-finite number")
        return Fraction(f)
    raise TypeError(f"a mechanism needs numbers, got {type(v).__name__}")


def _is_scalar(values: object) -> bool:
    if isinstance(values, np.ndarray):
        if values.ndim > 1:
            raise ValueError("expected a number or a flat sequence of numbers")
        return values.ndim == 0
    return isinstance(values, numbers.Number)


def _as_float(x: Fraction) -> float:
    """Post-processing: nearest float, saturating instead of raising on overflow."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


# --- the fixed-point grid --------------------------------------------------------------------

def _ceil_log2(x: Fraction) -> int:
    """Smallest integer m with 2**m >= x, for x > 0 (exact)."""
    m = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** m < x:
        m += 1
    while Fraction(2) ** (m - 1) >= x:
        m -= 1
    return m


def _grid_bits(epsilon: Fraction, n: int) -> int:
    """m >= 0 with 2**m >= 2**GRID_BITS * max(epsilon, n - 1): a function of public inputs
    only. The first term makes the step sensitivity/2**m at most 2**-GRID_BITS of the scale
    sensitivity/epsilon; the second keeps the tuple overhead (n-1)/2**m as small."""
    target = Fraction(2**GRID_BITS) * max(epsilon, Fraction(n - 1))  # > 0 since epsilon > 0
    return max(0, _ceil_log2(target))


def _to_grid(x: Fraction, step: Fraction) -> int:
    """round(x / step), halves up: floor(y + 1/2). Monotone, and shifting x by k steps shifts
    the result by exactly k, which is what carries the sensitivity onto the grid."""
    y = x / step
    return (2 * y.numerator + y.denominator) // (2 * y.denominator)


@dataclass(frozen=True)
class LaplacePlan:
    """How a Laplace release is calibrated, from public inputs only.

    granularity: the grid step (value units); grid_scale: the discrete Laplace scale in grid
    steps; scale: grid_scale * granularity, the per-coordinate noise scale in value units."""

    granularity: Fraction
    grid_scale: Fraction

    @property
    def scale(self) -> Fraction:
        return self.grid_scale * self.granularity


def plan_laplace(sensitivity: Fraction, epsilon: Fraction, n: int = 1) -> LaplacePlan:
    """The grid and noise scale for releasing n numbers with L1 sensitivity `sensitivity`.

    Step g = sensitivity / 2**m. A neighbouring input moves the rounded point by at most K grid
    steps in L1, with K = 2**m for one number and 2**m + n - 1 for n (each coordinate's rounding
    can add less than one step); noise of scale K/epsilon steps is then epsilon-DP. So the scale
    is exactly sensitivity/epsilon for n = 1, and at most (1 + 2**-GRID_BITS) times it for tuples."""
    eps, sens = _epsilon(epsilon), _sensitivity(sensitivity)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError("n must be a positive integer")
    if sens == 0:
        return LaplacePlan(Fraction(0), Fraction(0))
    m = _grid_bits(eps, int(n))
    k = 2**m + (int(n) - 1)
    return LaplacePlan(sens / 2**m, Fraction(k) / eps)


# --- Laplace ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Release:
    """Values released by `laplace_release`, with the public facts about their noise.

    `values` mirrors the input: a float for a number, a tuple of floats for a sequence. The
    true values and the noise are deliberately not kept."""

    values: float | tuple[float, ...]
    scale: Fraction
    granularity: Fraction
    grid_scale: Fraction

    @property
    def value(self) -> float:
        if isinstance(self.values, tuple):
            raise TypeError("this release holds a tuple; use .values")
        return self.values

    def accuracy(self, beta: float | Fraction = Fraction(1, 20)) -> Fraction:
        """A bound a with P(|released - input| > a) <= beta, per coordinate.

        With q = exp(-1/s) (s = grid_scale), P(|Z| > k) = 2 q^(k+1) / (1+q) <= q^k, so
        k = ceil(s ln(1/beta)) steps suffice; rounding the input to the grid adds at most half
        a step: a = granularity * (ceil(s ln(1/beta)) + 1/2). The float logarithm is inflated
        by a relative 2**-40 before the ceiling, far above its rounding error, so a is an upper
        bound. For all n coordinates at once, use beta / n (union bound)."""
        b = float(beta)
        if not 0 < b < 1:
            raise ValueError("beta must be in (0, 1)")
        if self.grid_scale == 0:
            return Fraction(0)
        steps = math.ceil(float(self.grid_scale) * math.log(1 / b) * (1 + 2.0**-40))
        return self.granularity * (Fraction(steps) + Fraction(1, 2))


def laplace_release(
    values: Sequence[float] | float,
    sensitivity: Fraction,
    epsilon: Fraction,
    rng: RandomSource,
) -> Release:
    """epsilon-DP release of a number or tuple whose L1 sensitivity is `sensitivity`.

    Each value is rounded exactly to the grid of `plan_laplace`, gets an exact discrete Laplace
    integer of `grid_scale` steps, and is turned back into a float (post-processing)."""
    scalar = _is_scalar(values)
    xs = [_exact_value(values)] if scalar else [_exact_value(v) for v in values]  # type: ignore[union-attr]
    plan = plan_laplace(sensitivity, epsilon, max(1, len(xs)))
    if plan.grid_scale == 0:
        outs = [_as_float(x) for x in xs]  # sensitivity 0: the values are public already
    else:
        step, s = plan.granularity, plan.grid_scale
        outs = [
            _as_float((_to_grid(x, step) + _discrete_laplace(s.numerator, s.denominator, rng)) * step)
            for x in xs
        ]
    released = outs[0] if scalar else tuple(outs)
    return Release(released, plan.scale, plan.granularity, plan.grid_scale)


# --- selection -------------------------------------------------------------------------------

def _scores(scores: Sequence[float]) -> list[Fraction]:
    qs = [_exact_value(q) for q in scores]
    if not qs:
        raise ValueError("no candidates to choose from")
    return qs


def _uniform_argmax(qs: list[Fraction], rng: RandomSource) -> int:
    """Sensitivity 0: the scores are public, and the limit of both selection mechanisms is a
    uniform choice among the best candidates."""
    top = max(qs)
    best = [i for i, q in enumerate(qs) if q == top]
    return best[rng.randbelow(len(best))]


def _gaps(qs: list[Fraction], sens: Fraction, eps: Fraction) -> list[tuple[int, int]]:
    """epsilon * (max - q_i) / (2 * sensitivity) as (numerator, denominator) pairs."""
    top = max(qs)
    rate = eps / (2 * sens)
    out = []
    for q in qs:
        g = (top - q) * rate
        out.append((g.numerator, g.denominator))
    return out


def exponential_mechanism(
    scores: Sequence[float], sensitivity: Fraction, epsilon: Fraction, rng: RandomSource
) -> int:
    """Index i with probability exactly proportional to exp(epsilon * score_i / (2 sensitivity)).

    Rejection sampling: propose i uniformly, accept with probability
    exp(-epsilon (max - score_i) / (2 sensitivity)) (an exact Bernoulli). The accepted index has
    exactly the target law; the best candidate is always accepted, so each round succeeds with
    probability at least 1/len(scores)."""
    eps, sens, qs = _epsilon(epsilon), _sensitivity(sensitivity), _scores(scores)
    if sens == 0:
        return _uniform_argmax(qs, rng)
    gaps = _gaps(qs, sens, eps)
    while True:
        i = rng.randbelow(len(qs))
        if _bernoulli_exp(*gaps[i], rng):
            return i


def report_noisy_max(
    scores: Sequence[float], sensitivity: Fraction, epsilon: Fraction, rng: RandomSource
) -> int:
    """epsilon-DP index of an approximately largest score, via permute-and-flip.

    Visit the candidates in a uniformly random order and stop at the first i for which a coin
    with probability exp(-epsilon (max - score_i) / (2 sensitivity)) lands heads (the best always
    does). This is McKenna & Sheldon's permute-and-flip, which Ding et al. (2021) show has
    exactly the law of report-noisy-max with Exponential(2 sensitivity / epsilon) noise; it is
    epsilon-DP for sensitivity-bounded scores and never worse in expected score than the
    exponential mechanism. Only the index is returned."""
    eps, sens, qs = _epsilon(epsilon), _sensitivity(sensitivity), _scores(scores)
    if sens == 0:
        return _uniform_argmax(qs, rng)
    gaps = _gaps(qs, sens, eps)
    order = list(range(len(qs)))
    for j in range(len(order)):
        # Lazy Fisher-Yates: order[j] is uniform over the candidates not yet visited.
        k = j + rng.randbelow(len(order) - j)
        order[j], order[k] = order[k], order[j]
        if _bernoulli_exp(*gaps[order[j]], rng):
            return order[j]
    raise AssertionError("unreachable: the best candidate is accepted with probability 1")


# --- sparse vector ---------------------------------------------------------------------------

def above_threshold(
    queries: Sequence[float],
    threshold: float,
    sensitivity: Fraction,
    epsilon: Fraction,
    cutoff: int,
    rng: RandomSource,
) -> list[bool]:
    """Sparse vector technique, Lyu, Su & Li (2017) Algorithm 1, epsilon-DP in total.

    Threshold noise has scale sensitivity/eps1 (eps1 = epsilon/2), each query's noise
    2*cutoff*sensitivity/eps2 (eps2 = epsilon - eps1). Answers are True/False in order and stop
    right after the cutoff-th True. Threshold and queries are rounded to one grid with step
    sensitivity/2**m, so each query moves by at most 2**m steps and the proof's shifts are
    integers (docs/noise.md). `sensitivity` bounds each query separately."""
    eps, sens = _epsilon(epsilon), _sensitivity(sensitivity)
    if isinstance(cutoff, bool) or not isinstance(cutoff, numbers.Integral) or cutoff < 1:
        raise ValueError("cutoff must be a positive integer")
    t = _exact_value(threshold)
    if sens == 0:
        return _first_trues((_exact_value(q) >= t for q in queries), int(cutoff))
    k = 2 ** _grid_bits(eps, 1)
    step = sens / k
    eps1 = eps / 2
    eps2 = eps - eps1
    rho_scale = Fraction(k) / eps1
    nu_scale = Fraction(2 * int(cutoff) * k) / eps2
    noisy_t = _to_grid(t, step) + _discrete_laplace(rho_scale.numerator, rho_scale.denominator, rng)

    def answers():
        for q in queries:
            nu = _discrete_laplace(nu_scale.numerator, nu_scale.denominator, rng)
            yield _to_grid(_exact_value(q), step) + nu >= noisy_t

    return _first_trues(answers(), int(cutoff))


def _first_trues(answers, cutoff: int) -> list[bool]:
    """The answers in order, up to and including the cutoff-th True (lazily consumed)."""
    out: list[bool] = []
    hits = 0
    for a in answers:
        out.append(bool(a))
        hits += bool(a)
        if hits >= cutoff:
            break
    return out


# --- randomized response ---------------------------------------------------------------------

def _rr_bit(bit: bool, num: int, den: int, rng: RandomSource) -> bool:
    """Keep with probability exactly 1/(1 + e^-eps): a fair coin keeps; otherwise a
    Bernoulli(e^-eps) coin flips; otherwise start again. The coins never look at the bit."""
    while True:
        if rng.randbits(1):
            return bit
        if _bernoulli_exp(num, den, rng):
            return not bit


def _bit(b: object) -> bool:
    if isinstance(b, (bool, np.bool_)):
        return bool(b)
    raise TypeError("randomized_response needs booleans")


def randomized_response(
    bits: Sequence[bool] | bool, epsilon: Fraction, rng: RandomSource
) -> bool | list[bool]:
    """Each bit kept with probability e^eps / (1 + e^eps), else flipped: epsilon-DP per bit
    (Warner 1965; Dwork & Roth 2014, section 3.2). Mirrors the input: a bool or a list."""
    eps = _epsilon(epsilon)
    num, den = eps.numerator, eps.denominator
    if isinstance(bits, (bool, np.bool_)):
        return _rr_bit(bool(bits), num, den, rng)
    return [_rr_bit(_bit(b), num, den, rng) for b in bits]
