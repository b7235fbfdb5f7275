"""Privacy mechanisms on exact samplers: Laplace and Gaussian on a fixed-point grid, exponential mechanism,
report-noisy-max (permute-and-flip), sparse vector (AboveThreshold), randomized response.

Every random choice is exact (see `samplers`): probabilities are the stated ones, not float
approximations of them. Floats appear only in inputs (converted exactly with Fraction) and in
outputs (post-processing of an exact integer or index). The privacy arguments, with references,
are in docs/noise.md; `plan_laplace` and `plan_gaussian` are the only places where a noise scale
is computed.

Callers (the interpreter) must hand over values whose sensitivity the checker proved. Nothing
here raises because of a private value: non-finite numbers saturate (see `_exact_value`); the
errors are about public parameters (epsilon, sensitivity, cutoff, types).
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from fuzzpy.runtime.ratios import ExactColumns, Ratios
from fuzzpy.runtime.samplers import (
    RandomSource,
    _bernoulli_exp,
    _discrete_gaussian,
    _discrete_laplace,
    _gaussian_params,
    exact_rational,
    runs_draw,
    sample_bernoulli_exp,
    sample_discrete_gaussian,
    sample_discrete_gaussian_batch,
    sample_discrete_laplace,
    sample_discrete_laplace_batch,
    sample_geometric_exp,
)

__all__ = [
    "GRID_BITS",
    "GaussianPlan",
    "GaussianRelease",
    "gaussian_release",
    "gaussian_release_batch",
    "gaussian_release_runs",
    "plan_gaussian",
    "sample_discrete_gaussian",
    "sample_discrete_gaussian_batch",
    "LaplacePlan",
    "Release",
    "RandomSource",
    "above_threshold",
    "above_threshold_batch",
    "exponential_mechanism",
    "laplace_release",
    "laplace_release_batch",
    "laplace_release_runs",
    "plan_laplace",
    "randomized_response",
    "report_noisy_max",
    "selection_batch",
    "sample_bernoulli_exp",
    "sample_discrete_laplace",
    "sample_discrete_laplace_batch",
    "sample_geometric_exp",
]

# The grid step is at most 2**-GRID_BITS of the noise scale, so rounding to it is invisible
# next to the noise, and the tuple overhead (n-1)/2**m is at most the same fraction.
from .grid import GRID_BITS  # noqa: F401 (re-exported)
from .grid import gaussian_grid_bits as _gaussian_grid_bits
from .grid import gaussian_shift_bound as _gaussian_shift_bound
from .grid import grid_bits as _grid_bits

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
    t = type(v)
    if t is Fraction:  # the common cases first, by type (isinstance goes through the numbers ABC)
        return v
    if t is int:
        return Fraction(v)
    if isinstance(v, Fraction):
        return v
    if isinstance(v, numbers.Integral):
        return Fraction(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        if not math.isfinite(f):
            # Saturate rather than raise: an error here would depend on private data. Clamping
            # to the float range is 1-Lipschitz, so it cannot add sensitivity; NaN becomes 0
            # (as in the interpreter's exact sum).
            f = 0.0 if math.isnan(f) else math.copysign(sys.float_info.max, f)
        return Fraction(f)
    raise TypeError(f"a mechanism needs numbers, got {type(v).__name__}")


def _is_scalar(values: object) -> bool:
    t = type(values)
    if t is int or t is Fraction or t is float:
        return True
    if t is tuple or t is list:
        return False
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

def _to_grid(x: Fraction, step: Fraction) -> int:
    """round(x / step), halves up: floor(y + 1/2). Monotone, and shifting x by k steps shifts
    the result by exactly k, which is what carries the sensitivity onto the grid (used by the
    sparse vector, whose proof needs whole-step shifts)."""
    y = x / step
    return (2 * y.numerator + y.denominator) // (2 * y.denominator)


def _round_randomly(x: Fraction, step: Fraction, rng: RandomSource) -> int:
    """floor(y) or floor(y) + 1 for y = x / step, up with probability exactly frac(y).

    Unbiased, and the law moves continuously with x: that is what makes the Laplace release's
    privacy loss linear in the input's distance, fractional moves included (docs/noise.md)."""
    num, den = _quotient(x, step)
    low, rem = divmod(num, den)
    return low + (1 if rem and rng.randbelow(den) < rem else 0)


def _quotient(x: Fraction, step: Fraction) -> tuple[int, int]:
    """The numerator and denominator of x / step in lowest terms (step > 0), as Fraction's
    division computes them, without building the Fraction."""
    num, den = x.numerator * step.denominator, x.denominator * step.numerator
    if den < 0:
        num, den = -num, -den
    g = math.gcd(num, den)
    return (num // g, den // g) if g != 1 else (num, den)


def _grid_float(k: int, step: Fraction) -> float:
    """float(k * step), saturating (`_as_float`): an int's true division is correctly rounded,
    as float() of the Fraction k * step is, reduced or not."""
    try:
        return (k * step.numerator) / step.denominator
    except OverflowError:
        return math.inf if k > 0 else -math.inf


@dataclass(frozen=True)
class LaplacePlan:
    """How a Laplace release is calibrated, from public inputs only (docs/noise.md).

    granularity: the grid step g = sensitivity / 2**m (value units).
    grid_scale: the discrete Laplace scale in grid steps, 2**m/epsilon + 1/2.
    scale: sensitivity/epsilon exactly, the calibration: the privacy loss between inputs at L1
        distance t is at most t/scale, as for continuous Laplace(scale) noise.
    noise_scale: grid_scale * g, the scale of the noise actually added, a hair above `scale`
        (by g/2, at most 2**-(GRID_BITS+1) of it)."""

    granularity: Fraction
    grid_scale: Fraction
    scale: Fraction

    @property
    def noise_scale(self) -> Fraction:
        return self.grid_scale * self.granularity


def plan_laplace(sensitivity: Fraction, epsilon: Fraction, n: int = 1) -> LaplacePlan:
    """The grid and noise for releasing n numbers whose L1 sensitivity is `sensitivity`
    (`_plan_laplace`); computed once per exact calibration (`_planned`)."""
    return _planned(_plan_laplace, _laplace_plans, sensitivity, epsilon, n)


def _plan_laplace(sensitivity: Fraction, epsilon: Fraction, n: int = 1) -> LaplacePlan:
    """The grid and noise for releasing n numbers whose L1 sensitivity is `sensitivity`.

    Each coordinate is rounded randomly to the grid of step g = sensitivity/2**m and gets
    discrete Laplace noise of grid_scale = 2**m/epsilon + 1/2 steps. The half step pays for
    the random rounding: the loss per step of input movement is then at most epsilon/2**m, for
    every coordinate and every real move, so n does not change the plan."""
    eps, sens = _epsilon(epsilon), _sensitivity(sensitivity)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError("n must be a positive integer")
    if sens == 0:
        return LaplacePlan(Fraction(0), Fraction(0), Fraction(0))
    k = 2 ** _grid_bits(eps)
    return LaplacePlan(sens / k, Fraction(k) / eps + Fraction(1, 2), sens / eps)


_laplace_plans: dict = {}
_gaussian_plans: dict = {}


def _planned(plan: Any, kept: dict, scale: Any, budget: Any, n: Any) -> Any:
    """plan(scale, budget, n), kept for exact arguments (two Fractions and an int, by type and
    value: a float or a bool is checked, and refused, by `plan` every time).  Plans are frozen
    and depend on public values only; a gradient descent releases with one plan at every step."""
    if type(scale) is Fraction and type(budget) is Fraction and type(n) is int:
        # keyed by the integers: a Fraction's hash is a modular inverse, twice per release
        key = (scale.numerator, scale.denominator, budget.numerator, budget.denominator, n)
        got = kept.get(key)
        if got is None:
            got = plan(scale, budget, n)
            if len(kept) < 4096:  # a bound on the memory a long run's plans take
                kept[key] = got
        return got
    return plan(scale, budget, n)


# --- Laplace ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Release:
    """Values released by `laplace_release`, with the public facts about their noise.

    `values` mirrors the input: a float for a number, a tuple of floats for a sequence.
    `scale` is sensitivity/epsilon (the calibration, see `LaplacePlan`), `noise_scale` the
    scale of the noise actually added. The true values and the noise are not kept."""

    values: float | tuple[float, ...]
    scale: Fraction
    granularity: Fraction
    grid_scale: Fraction

    @property
    def value(self) -> float:
        if isinstance(self.values, tuple):
            raise TypeError("this release holds a tuple; use .values")
        return self.values

    @property
    def noise_scale(self) -> Fraction:
        return self.grid_scale * self.granularity

    def accuracy(self, beta: float | Fraction = Fraction(1, 20)) -> Fraction:
        """A bound a with P(|released - input| > a) <= beta, per coordinate.

        With q = exp(-1/s) (s = grid_scale), P(|Z| > k) = 2 q^(k+1) / (1+q) <= q^k, so
        k = ceil(s ln(1/beta)) steps suffice; random rounding moves the input by less than one
        step: a = granularity * (ceil(s ln(1/beta)) + 1). The float logarithm is inflated by a
        relative 2**-40 before the ceiling, far above its rounding error, so a is an upper
        bound. For all n coordinates at once, use beta / n (union bound)."""
        b = float(beta)
        if not 0 < b < 1:
            raise ValueError("beta must be in (0, 1)")
        return _laplace_accuracy(self.grid_scale, self.granularity, b)


@functools.lru_cache(maxsize=1024)
def _laplace_accuracy(grid_scale: Fraction, granularity: Fraction, b: float) -> Fraction:
    """`Release.accuracy`, remembered: every release of one plan (a tree's nodes) has the same."""
    if grid_scale == 0:
        return Fraction(0)
    # Exact, so that no grid scale (however large) can overflow a float here.
    steps = math.ceil(grid_scale * Fraction(math.log(1 / b)) * (1 + Fraction(1, 2**40)))
    return granularity * (steps + 1)


def laplace_release(
    values: Sequence[float] | float,
    sensitivity: Fraction,
    epsilon: Fraction,
    rng: RandomSource,
) -> Release:
    """epsilon-DP release of a number or tuple whose L1 sensitivity is `sensitivity`.

    Each value is rounded randomly (and exactly) to the grid of `plan_laplace`, gets an exact
    discrete Laplace integer of `grid_scale` steps, and is turned back into a float
    (post-processing). The privacy loss between inputs at L1 distance t is at most
    epsilon * t / sensitivity, for every real t."""
    scalar = _is_scalar(values)
    xs = [_exact_value(values)] if scalar else [_exact_value(v) for v in values]  # type: ignore[union-attr]
    plan = plan_laplace(sensitivity, epsilon, max(1, len(xs)))
    if plan.grid_scale == 0:
        outs = [_as_float(x) for x in xs]  # sensitivity 0: the values are public already
    else:
        step, s = plan.granularity, plan.grid_scale
        outs = [
            _grid_float(_round_randomly(x, step, rng) + _discrete_laplace(s.numerator, s.denominator, rng), step)
            for x in xs
        ]
    released = outs[0] if scalar else tuple(outs)
    return Release(released, plan.scale, plan.granularity, plan.grid_scale)


def laplace_release_batch(
    value: float, sensitivity: Fraction, epsilon: Fraction, n: int, rng: RandomSource
) -> np.ndarray:
    """AUDITING / SIMULATION ONLY: n independent `laplace_release(value, ...)` outputs as a
    float64 array, vectorised: the same plan, random rounding with a float coin, and
    `sample_discrete_laplace_batch` noise. Never use it to release anything."""
    plan = plan_laplace(sensitivity, epsilon)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError("n must be a non-negative integer")
    x = _exact_value(value)
    if plan.grid_scale == 0:
        return np.full(int(n), _as_float(x))
    low, frac = _grid_split([x], plan.granularity)
    return _laplace_steps(plan, low, frac, int(n), rng)


def laplace_release_runs(
    values: Sequence[float] | Ratios, sensitivity: Fraction, epsilon: Fraction, rng: RandomSource
) -> np.ndarray:
    """AUDITING / SIMULATION ONLY: one `laplace_release(v, ...)` output for each number v of
    `values` (each run's own input; or exact `Ratios`), vectorised as `laplace_release_batch`.
    Never use it to release anything."""
    plan = plan_laplace(sensitivity, epsilon)
    if isinstance(values, Ratios):  # exact already, as integer ratios
        if plan.grid_scale == 0:
            return values.floats()
        low, frac = _grid_split_ratios(values, plan.granularity)
        return _laplace_steps(plan, low, frac, len(values), rng)
    xs = [v if type(v) in _EXACT_AS_IS or _is_finite_float(v) else _exact_value(v) for v in values]
    if plan.grid_scale == 0:
        return np.array([_as_float(x) for x in xs], dtype=np.float64)
    low, frac = _grid_split(xs, plan.granularity)
    return _laplace_steps(plan, low, frac, len(xs), rng)


def _exact(v: object) -> Fraction | int:
    """_exact_value, with Fractions and ints (exact already) as they are."""
    return v if type(v) in _EXACT_AS_IS else _exact_value(v)  # type: ignore[return-value]


def _is_finite_float(x: object) -> bool:
    return type(x) is float and math.isfinite(x)  # type: ignore[arg-type]


# Inputs _grid_split takes as they are: their integer ratio is their exact value.
_EXACT_AS_IS = (Fraction, int)


def _grid_split(xs: Sequence[Fraction | int | float], step: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """floor(x / step) (as floats) and the fraction of a step above it (the probability that
    random rounding goes up), for each exact x (a Fraction, an int or a finite float: its
    integer ratio is its exact value)."""
    lows, fracs = [], []
    a, b = step.numerator, step.denominator
    for x in xs:  # x / step = (p b) / (q a), split without normalising a Fraction
        if not x:  # 0 (an empty part's count or sum): on the grid
            lows.append(0.0)
            fracs.append(0.0)
            continue
        p, q = x.as_integer_ratio()
        num, den = p * b, q * a
        low, rem = divmod(num, den)
        lows.append(float(low))
        fracs.append(rem / den)
    return np.array(lows, dtype=np.float64), np.array(fracs, dtype=np.float64)


def _grid_split_ratios(r: Ratios, step: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """_grid_split of exact ratios, as object-array operations: the same integers, so the same
    floats (int true division and int-to-float conversion are correctly rounded)."""
    fast = _grid_split_scaled(r, step)
    if fast is not None:
        return fast
    num, den = r.num * step.denominator, r.den * step.numerator
    low = num // den
    rem = num - low * den
    return low.astype(np.float64), (rem / den).astype(np.float64)


def _grid_split_scaled(r: Ratios, step: Fraction) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """_grid_split_ratios in float arithmetic, for values held as x * 2**k (`Ratios.scaled`, a
    bounded sum's grid integers) and a step that is a power of two: x / step = x * 2**e is a
    float exactly (53 bits, normal exponent), so is its floor, and the one rounding of
    y - floor(y) is the correctly rounded fraction, as rem / den is.  None otherwise."""
    if r.scaled is None:
        return None
    return _split_scaled(*r.scaled, step)


def _split_scaled(x: np.ndarray, k: int, step: Fraction) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """_grid_split_scaled of the values x * 2**k (x: float integers below 2**53, any shape)."""
    a, b = step.numerator, step.denominator
    if a & (a - 1) or b & (b - 1):
        return None
    e = k + b.bit_length() - a.bit_length()
    if not -1000 <= e <= 900:
        return None
    y = np.ldexp(x, e)
    low = np.floor(y)
    return low + 0.0, (y - low) + 0.0  # + 0.0: the integer 0 of the exact path is +0.0


def _laplace_steps(plan: LaplacePlan, low: np.ndarray, frac: np.ndarray, n: int, rng: RandomSource) -> np.ndarray:
    gen = rng.numpy_generator()
    up = runs_draw(rng, n, gen.random) < frac
    noise = runs_draw(rng, n, lambda k: sample_discrete_laplace_batch(plan.grid_scale, k, rng))
    steps = (noise + up).astype(np.float64) + low
    return steps * float(plan.granularity)


# --- Gaussian --------------------------------------------------------------------------------

# Display bounds only (accuracy, sigma), never noise or cost: far above the rounding error of
# math.log on doubles (as primitives/mechanisms.py log_upper).
_SLACK = Fraction(1, 2**40)


def _rho(rho: object) -> Fraction:
    r = exact_rational(rho, "rho")
    if r <= 0:
        raise ValueError("rho must be > 0")
    return r


def _log_upper(x: Fraction) -> Fraction:
    """An exact upper bound on ln(x), x >= 1."""
    return Fraction(math.log(float(x))) * (1 + _SLACK) + _SLACK


def _sqrt_upper(x: Fraction) -> Fraction:
    """An exact upper bound on sqrt(x), x >= 0, within a relative 2**-60 or so."""
    if x == 0:
        return Fraction(0)
    k = max(0, 64 - (x.numerator.bit_length() - x.denominator.bit_length()) // 2)
    scaled = x * 4**k
    c = -((-scaled.numerator) // scaled.denominator)  # ceil(x * 4**k)
    return Fraction(math.isqrt(c) + 1, 2**k)  # (isqrt(c) + 1)**2 > c >= x * 4**k


def _float_up(x: Fraction) -> float:
    """The smallest float >= x (inf beyond the float range)."""
    f = _as_float(x)
    return math.nextafter(f, math.inf) if math.isfinite(f) and Fraction(f) < x else f


@dataclass(frozen=True)
class GaussianPlan:
    """How a Gaussian release is calibrated, from public inputs only (docs/noise.md).

    granularity: the grid step g = l2_sensitivity / 2**m (value units), m = gaussian_grid_bits.
    shift_bound: K = 2**m + ceil(sqrt(n)), the L2 distance in steps between the rounded images
        of neighbouring inputs.
    grid_sigma2: sigma_g^2 = K^2 / (2 rho), the discrete Gaussian's parameter in steps^2.
    sigma2: grid_sigma2 * g^2, the noise's sigma^2 in value units (exact), at most a relative
        2**-11 above the continuous calibration l2_sensitivity^2 / (2 rho)."""

    granularity: Fraction
    shift_bound: int
    grid_sigma2: Fraction

    @property
    def sigma2(self) -> Fraction:
        return self.grid_sigma2 * self.granularity**2


def plan_gaussian(l2_sensitivity: Fraction, rho: Fraction, n: int = 1) -> GaussianPlan:
    """The grid and noise for releasing n numbers whose L2 sensitivity is `l2_sensitivity`,
    rho-zCDP (`_plan_gaussian`); computed once per exact calibration (`_planned`)."""
    return _planned(_plan_gaussian, _gaussian_plans, l2_sensitivity, rho, n)


def _plan_gaussian(l2_sensitivity: Fraction, rho: Fraction, n: int = 1) -> GaussianPlan:
    """The grid and noise for releasing n numbers whose L2 sensitivity is `l2_sensitivity`,
    rho-zCDP: step g = S/2**m, K = 2**m + ceil(sqrt(n)) steps, sigma_g^2 = K^2/(2 rho)."""
    r, sens = _rho(rho), _sensitivity(l2_sensitivity)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError("n must be a positive integer")
    if sens == 0:
        return GaussianPlan(Fraction(0), 0, Fraction(0))
    m = _gaussian_grid_bits(r, int(n))
    k = _gaussian_shift_bound(m, int(n))
    return GaussianPlan(sens / 2**m, k, Fraction(k * k) / (2 * r))


@dataclass(frozen=True)
class GaussianRelease:
    """Values released by `gaussian_release`, with the public facts about their noise.

    `values` mirrors the input: a float for a number, a tuple of floats for a sequence.
    `sigma2` is the noise's exact sigma^2 in value units (each coordinate gets independent
    N_Z(0, sigma2 / granularity^2) steps), `sigma` a float at or above its square root (for
    display). The true values and the noise are not kept."""

    values: float | tuple[float, ...]
    sigma2: Fraction
    granularity: Fraction
    rho: Fraction
    l2_sensitivity: Fraction

    @property
    def value(self) -> float:
        if isinstance(self.values, tuple):
            raise TypeError("this release holds a tuple; use .values")
        return self.values

    @property
    def sigma(self) -> float:
        return _float_up(_sqrt_upper(self.sigma2))

    @property
    def dimension(self) -> int:
        return len(self.values) if isinstance(self.values, tuple) else 1

    def accuracy(self, beta: float | Fraction = Fraction(1, 20)) -> Fraction:
        """A bound a with P(|released - input| > a) <= beta, per coordinate:
        a >= sigma * sqrt(2 ln(2/beta)) + granularity, exactly (docs/noise.md, "Accuracy").

        The noise Z (in steps) has P(|Z| >= u) <= 2 exp(-u^2 / (2 sigma_g^2)), which is beta at
        u = sigma_g sqrt(2 ln(2/beta)); the random rounding moves the input by less than one
        step. Both the logarithm and the square root are rounded up."""
        b = _beta(beta)
        if self.sigma2 == 0:
            return Fraction(0)
        g = self.granularity
        u = _sqrt_upper(self.sigma2 / g**2 * 2 * _log_upper(2 / b))
        return g * (u + 1)

    def joint_accuracy(self, beta: float | Fraction = Fraction(1, 20)) -> Fraction:
        """A bound a with P(some coordinate has |released - input| > a) <= beta: the
        per-coordinate bound at beta / n (union bound over the n coordinates)."""
        return self.accuracy(_beta(beta) / self.dimension)


def _beta(beta: object) -> Fraction:
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise TypeError("beta must be a number")
    b = float(beta)
    if not 0 < b < 1:  # also refuses NaN
        raise ValueError("beta must be in (0, 1)")
    return Fraction(beta) if isinstance(beta, numbers.Rational) else Fraction(b)


def gaussian_release(
    values: Sequence[float] | float,
    l2_sensitivity: Fraction,
    rho: Fraction,
    rng: RandomSource,
) -> GaussianRelease:
    """rho-zCDP release of a number or tuple whose L2 sensitivity is `l2_sensitivity`.

    Each value is rounded randomly (and exactly) to the grid of `plan_gaussian`, gets an exact,
    independent discrete Gaussian integer N_Z(0, sigma_g^2), and is turned back into a float
    (post-processing, saturating at the float range). Sensitivity 0: released unchanged."""
    scalar = _is_scalar(values)
    xs = [_exact_value(values)] if scalar else [_exact_value(v) for v in values]  # type: ignore[union-attr]
    sens, r = _sensitivity(l2_sensitivity), _rho(rho)
    plan = plan_gaussian(sens, r, max(1, len(xs)))
    if plan.grid_sigma2 == 0:
        outs = [_as_float(x) for x in xs]  # sensitivity 0: the values are public already
    else:
        step = plan.granularity
        p, q, t = _gaussian_params(plan.grid_sigma2)
        outs = [
            _as_float((_round_randomly(x, step, rng) + _discrete_gaussian(p, q, t, rng)) * step)
            for x in xs
        ]
    released = outs[0] if scalar else tuple(outs)
    return GaussianRelease(released, plan.sigma2, plan.granularity, r, sens)


def gaussian_release_batch(
    values: Sequence[float] | float,
    l2_sensitivity: Fraction,
    rho: Fraction,
    n: int,
    rng: RandomSource,
) -> np.ndarray:
    """AUDITING / SIMULATION ONLY: n independent `gaussian_release(values, ...)` outputs as
    float64, vectorised: the same plan (for the input's dimension d), random rounding with a
    float coin, and `sample_discrete_gaussian_batch` noise. Shape (n,) for a number, (n, d) for
    a sequence of d numbers. Never use it to release anything."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError("n must be a non-negative integer")
    scalar = _is_scalar(values)
    xs = [_exact_value(values)] if scalar else [_exact_value(v) for v in values]  # type: ignore[union-attr]
    out = _gaussian_rows([xs], l2_sensitivity, rho, int(n), rng)
    return out[:, 0] if scalar else out


def gaussian_release_runs(
    values: Sequence[Sequence[float] | float] | ExactColumns, l2_sensitivity: Fraction, rho: Fraction,
    rng: RandomSource
) -> np.ndarray:
    """AUDITING / SIMULATION ONLY: one `gaussian_release(v, ...)` output for each input v of
    `values` (each run's own: all numbers, or all sequences of one length d), vectorised as
    `gaussian_release_batch`. Shape (runs,) or (runs, d). Never use it to release anything.
    `values` may be `ExactColumns` (each run's input held coordinate by coordinate as ratios)."""
    if isinstance(values, ExactColumns):
        out = _gaussian_columns(values.columns, l2_sensitivity, rho, rng)
        return out[:, 0] if values.scalar else out
    scalar = all(type(v) in (int, float, Fraction) or _is_scalar(v) for v in values)
    if not scalar and not all(isinstance(v, (tuple, list)) for v in values):
        raise TypeError("a mechanism needs numbers or sequences of numbers")
    rows = [[_exact(v)] if scalar else [_exact(x) for x in v] for v in values]  # type: ignore[union-attr]
    if len({len(r) for r in rows}) > 1:
        raise ValueError("inputs of different dimensions")
    out = _gaussian_rows(rows, l2_sensitivity, rho, len(rows), rng)
    return out[:, 0] if scalar else out


def _gaussian_columns(columns: tuple[Ratios, ...], l2_sensitivity: Fraction, rho: Fraction,
                      rng: RandomSource) -> np.ndarray:
    """_gaussian_rows of inputs held as exact ratios, a column per coordinate (the same grid
    split, so the same draws)."""
    n, d = len(columns[0]), len(columns)
    plan = plan_gaussian(l2_sensitivity, rho, max(1, d))
    if plan.grid_sigma2 == 0:
        return np.column_stack([c.floats() for c in columns]).reshape(n, d)
    scaled = [c.scaled for c in columns]
    if all(sc is not None and sc[1] == scaled[0][1] for sc in scaled):  # one grid (a vector sum's)
        # every coordinate split at once, coordinate-major (d x n): the same elementwise floats
        split = _split_scaled(np.stack([x for x, _ in scaled]), scaled[0][1], plan.granularity)  # type: ignore[index]
        if split is not None:
            return _gaussian_steps(plan, split[0].T, split[1].T, n, d, rng)
    splits = [_grid_split_ratios(c, plan.granularity) for c in columns]
    low = np.column_stack([lo for lo, _ in splits]).reshape(n, d)
    frac = np.column_stack([fr for _, fr in splits]).reshape(n, d)
    return _gaussian_steps(plan, low, frac, n, d, rng)


def _gaussian_rows(rows: list[list[Fraction]], l2_sensitivity: Fraction, rho: Fraction, n: int,
                   rng: RandomSource) -> np.ndarray:
    """n releases (n, d): run i releases rows[i], or rows[0] when there is one row for all."""
    d = len(rows[0]) if rows else 1
    plan = plan_gaussian(l2_sensitivity, rho, max(1, d))
    if plan.grid_sigma2 == 0:
        exact = np.array([[_as_float(x) for x in r] for r in rows], dtype=np.float64).reshape(len(rows), d)
        return np.broadcast_to(exact, (n, d)).copy()
    low, frac = _grid_split([x for r in rows for x in r], plan.granularity)
    return _gaussian_steps(plan, low.reshape(len(rows), d), frac.reshape(len(rows), d), n, d, rng)


def _gaussian_steps(plan: GaussianPlan, low: np.ndarray, frac: np.ndarray, n: int, d: int,
                    rng: RandomSource) -> np.ndarray:
    """n releases (n, d) of inputs split on the plan's grid (rows of low and frac, or one row
    for all runs): random rounding up, then discrete Gaussian steps."""
    gen = rng.numpy_generator()
    up = runs_draw(rng, n, lambda k: gen.random((k, d))) < frac
    noise = runs_draw(rng, n, lambda k: sample_discrete_gaussian_batch(plan.grid_sigma2, k * d, rng).reshape(k, d))
    # in place, the same floats as ((noise + up) as float + low) * granularity: every integer
    # here is below 2**53, so converting before adding the rounding bit changes nothing.  Held
    # coordinate-major (each coordinate's runs contiguous, as the auditor keeps them) and
    # returned as its (n, d) view.
    steps = noise.T.astype(np.float64, order="C")
    steps += up.T
    steps += low.T
    steps *= float(plan.granularity)
    return steps.T


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


def selection_batch(
    scores: Sequence[float], sensitivity: Fraction, epsilon: Fraction, n: int, rng: RandomSource,
    kind: str = "exponential",
) -> np.ndarray:
    """AUDITING / SIMULATION ONLY: n independent indices of `exponential_mechanism` (kind
    "exponential") or `report_noisy_max` ("noisy_max") as an int64 array, vectorised: the same
    gaps epsilon (max - score_i) / (2 sensitivity), computed exactly and then rounded to floats;
    the exponential mechanism draws from the probabilities exp(-gap_i) / sum_j exp(-gap_j),
    report noisy max takes argmax_i (-gap_i + Exponential(1)) (its law, as permute-and-flip
    has it). Never use it to release anything."""
    eps, sens, qs = _epsilon(epsilon), _sensitivity(sensitivity), _scores(scores)
    gen = rng.numpy_generator()
    n = int(n)
    if sens == 0:
        top = max(qs)
        best = np.array([i for i, q in enumerate(qs) if q == top], dtype=np.int64)
        return best[gen.integers(len(best), size=n)]
    gaps = np.array([num / den for num, den in _gaps(qs, sens, eps)], dtype=np.float64)
    if kind == "exponential":
        w = np.exp(-gaps)
        return gen.choice(len(qs), size=n, p=w / w.sum()).astype(np.int64)
    if kind == "noisy_max":
        return np.argmax(-gaps + gen.exponential(1.0, size=(n, len(qs))), axis=1).astype(np.int64)
    raise ValueError("kind must be exponential or noisy_max")


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

_NO_QUERY = object()


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
    queries = iter(queries)  # read lazily: nothing after the cutoff-th True is evaluated
    first = next(queries, _NO_QUERY)
    if first is _NO_QUERY:  # released (public) queries can be an empty list: nothing to answer
        return []
    queries = itertools.chain([first], queries)
    t = _exact_value(threshold)
    if sens == 0:
        return _first_trues((_exact_value(q) >= t for q in queries), int(cutoff))
    k = 2 ** _grid_bits(eps)
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


def above_threshold_batch(
    queries: Sequence[float],
    threshold: float,
    sensitivity: Fraction,
    epsilon: Fraction,
    cutoff: int,
    n: int,
    rng: RandomSource,
) -> list[tuple[bool, ...]]:
    """AUDITING / SIMULATION ONLY: n independent `above_threshold(...)` answer lists, vectorised:
    the same grid and scales, `sample_discrete_laplace_batch` noise for the threshold (one per
    run) and for every query of every run (a run's noise past its cutoff-th True is drawn and not
    used, which leaves each run's law unchanged). Never use it to release anything."""
    eps, sens = _epsilon(epsilon), _sensitivity(sensitivity)
    if isinstance(cutoff, bool) or not isinstance(cutoff, numbers.Integral) or cutoff < 1:
        raise ValueError("cutoff must be a positive integer")
    qs = [_exact_value(q) for q in queries]
    t = _exact_value(threshold)
    if not qs:
        return [()] * int(n)
    if sens == 0:
        return [tuple(_first_trues((q >= t for q in qs), int(cutoff)))] * int(n)
    k = 2 ** _grid_bits(eps)
    step = sens / k
    eps1 = eps / 2
    grid_t, grid_q = _to_grid(t, step), [_to_grid(q, step) for q in qs]
    if max(abs(grid_t), *(abs(g) for g in grid_q)) >= 2**60:
        raise ValueError("values too large for the batch sampler")
    noisy_t = grid_t + sample_discrete_laplace_batch(Fraction(k) / eps1, int(n), rng)
    nu = sample_discrete_laplace_batch(Fraction(2 * int(cutoff) * k) / (eps - eps1), int(n) * len(qs), rng)
    above = (np.array(grid_q, dtype=np.int64) + nu.reshape(int(n), len(qs))) >= noisy_t[:, None]
    hits = np.cumsum(above, axis=1)
    stops = np.where(hits[:, -1] >= cutoff, np.argmax(hits >= cutoff, axis=1) + 1, len(qs))
    return [tuple(row[:stop]) for row, stop in zip(above.tolist(), stops.tolist())]


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


def grid_sigma_lower(sites: Iterable[tuple[Fraction, Fraction, int]]) -> Optional[Fraction]:
    """A lower bound on the grid sigma (sigma_g, in grid steps) of Gaussian releases planned for
    `sites` = (L2 sensitivity, rho, coordinates): the accountant's Gaussian conversion needs it
    (docs/privacy-notions.md).  None when no site releases anything."""
    lowest: Optional[Fraction] = None
    for sens, rho, n in sites:
        if not sens:
            continue
        g2 = plan_gaussian(Fraction(sens), Fraction(rho), int(n)).grid_sigma2
        sigma = Fraction(math.isqrt(int(g2 * 2**64)), 2**32)  # floor(sqrt(g2 * 2^64)) / 2^32 <= sqrt(g2)
        lowest = sigma if lowest is None else min(lowest, sigma)
    return lowest
