"""The optimal keep-probability curve of partition selection (Desfontaines, Voss, Gipson,
Mandayam, "Differentially private partition selection", PoPETs 2022, section 4).

A key with n units (each unit counted in at most m keys) is released with probability pi(n),
independently of every other key.  For one key whose count moves by at most one, pi is
(e, d)-DP when, for every n >= 1,

    pi(n) <= e^e pi(n-1) + d     and     1 - pi(n-1) <= e^e (1 - pi(n)) + d

(the two other inequalities of the pair hold because pi does not decrease), and pi(0) = 0 (a key
nobody has is never seen).  The largest such curve is the recursion

    pi(n) = min(e^e pi(n-1) + d,  1 - e^-e (1 - pi(n-1) - d),  1).

Here it is computed exactly on the grid of multiples of 2^-BITS: e^e is replaced by a lower
bound E and e^-e by an upper bound E' (both on the grid, certified with interval arithmetic) and
each value is rounded down.  Every step then satisfies the two inequalities with the real e^e
exactly (E <= e^e; E' >= e^-e), rounding down keeps the curve non-decreasing (each value is at
least its predecessor, which is on the grid), and a release draws BITS uniform bits u and keeps
the key when u < pi(n) 2^BITS: exactly probability pi(n), with no floating point anywhere.

For a table that moves by S units and a unit in at most m keys (docs/soundness.md, rule Optimal
partition selection), each key gets (eps/(m S), delta/(m S)) and its count n is read in steps of
S units (ceil(n / S)): at most m S keys move, each by at most one step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

BITS = 128
ONE = 1 << BITS
MAX_STEPS = 250_000  # a longer curve is cut (its last value kept: a constant tail satisfies both inequalities)


@dataclass(frozen=True)
class KeepCurve:
    """pi(n) = grid[min(ceil(n / step), len(grid) - 1)] / 2^BITS for n >= 0."""

    epsilon: Fraction   # per key and step
    delta: Fraction     # per key and step
    step: int           # units per step (the input's sensitivity S)
    grid: tuple[int, ...]

    def numerator(self, units: int) -> int:
        """pi(units) * 2^BITS."""
        if units <= 0:
            return 0
        steps = -(-units // self.step)
        return self.grid[min(steps, len(self.grid) - 1)]

    @property
    def complete(self) -> bool:
        """The curve reaches 1 (it was not cut at MAX_STEPS, nor stuck below 2^-BITS)."""
        return self.grid[-1] == ONE

    def probability(self, units: int) -> Fraction:
        return Fraction(self.numerator(units), ONE)

    def half_count(self) -> int | None:
        """The smallest number of units with which a key is kept with probability at least 1/2."""
        return self.units_for(Fraction(1, 2))

    def units_for(self, probability: Fraction) -> int | None:
        """The smallest number of units with which a key is kept with at least this probability
        (None: no count reaches it)."""
        target = probability * ONE
        for i, p in enumerate(self.grid):
            if p >= target:
                return max(i * self.step, 1)
        return None


def exp_grid_bounds(x: Fraction) -> tuple[int, int]:
    """(floor(e^x 2^BITS), ceil(e^-x 2^BITS)), certified: e^x >= the first over 2^BITS and e^-x
    <= the second."""
    from mpmath import iv

    old, iv.dps = iv.dps, 80
    try:
        xi = iv.mpf(x.numerator) / iv.mpf(x.denominator)
        up, down = iv.exp(xi) * ONE, iv.exp(-xi) * ONE
        return math.floor(lower_end(up)), math.ceil(upper_end(down))  # exact ends: no rounding to a float
    finally:
        iv.dps = old


# rule Optimal partition selection: the curve, exact on its grid
@lru_cache(maxsize=64)
def keep_curve(epsilon: Fraction, delta: Fraction, m: int, sensitivity: Fraction) -> KeepCurve:
    """The optimal curve for a selection of eps and delta in all, each unit in at most m keys, an
    input that moves by at most `sensitivity` units (rounded up to a whole number, at least 1)."""
    step = max(1, math.ceil(sensitivity))
    keys = m * step
    e, d = epsilon / keys, delta / keys
    return KeepCurve(e, d, step, _recursion(e, d))


def _recursion(e: Fraction, d: Fraction) -> tuple[int, ...]:
    lo_exp, hi_exp_neg = exp_grid_bounds(e)
    dn, dd = d.numerator, d.denominator
    scale = ONE * dd
    d_grid = dn * ONE  # d * 2^BITS * dd
    grid = [0]
    p = 0
    while p < ONE and len(grid) <= MAX_STEPS:
        grow = (lo_exp * p * dd + dn * ONE * ONE) // scale          # floor((E p + d) 2^BITS)
        rest = ONE * dd - p * dd - d_grid                           # (1 - p - d) 2^BITS dd
        fall = ONE + (-hi_exp_neg * rest) // scale if rest > 0 else ONE  # floor((1 - E'(1 - p - d)) 2^BITS)
        nxt = min(grow, fall, ONE)
        if nxt <= p:  # no progress on the grid (d below 2^-BITS): the curve stays where it is
            break
        grid.append(nxt)
        p = nxt
    return tuple(grid)


# ---- what a selection releases on a pair of tables, exactly (the soundness oracle) -------------------

MAX_MOVED_KEYS = 14  # the divergence enumerates the 2^k release patterns of the k keys that move


def keep_interval(units: int, info: dict):
    """An mpmath interval holding the probability that a key with `units` units is released by
    the selection `info` (a checked select_keys or select_keys_optimal): pi(units) exactly, or
    P[units + Z >= T] for the discrete Laplace Z of the selection's scale."""
    from mpmath import iv

    if units <= 0:
        return iv.mpf(0)
    old, iv.dps = iv.dps, 50
    try:
        return _keep_interval(iv, units, info)
    finally:
        iv.dps = old


def _keep_interval(iv, units: int, info: dict):
    if info.get("method") == "optimal":
        step = Fraction(math.ceil(Fraction(info["sensitivity"])))
        curve = keep_curve(Fraction(info["epsilon"]), Fraction(info["delta"]), int(info["m"]), step)
        return iv.mpf(curve.numerator(units)) / iv.mpf(ONE)
    scale = Fraction(info["scale"])
    q = iv.exp(-iv.mpf(scale.denominator) / iv.mpf(scale.numerator))
    j = int(info["threshold"]) - units
    return q ** j / (1 + q) if j >= 1 else 1 - q ** (1 - j) / (1 + q)


def selection_divergence(keep_a: list, keep_b: list, epsilon: Fraction) -> Fraction:
    """The lower end of an interval holding max(D(A||B), D(B||A)), the hockey-stick divergences at
    e^epsilon of two products of independent Bernoulli laws (the keys that move; the keys that do
    not move have the same law on both sides and leave the divergence unchanged):
    D(P||Q) = sum over release patterns o of max(0, P(o) - e^epsilon Q(o))."""
    from itertools import product

    from mpmath import iv

    old, iv.dps = iv.dps, 50
    try:
        e = iv.exp(iv.mpf(epsilon.numerator) / iv.mpf(epsilon.denominator))
        best = Fraction(0)
        for first, second in ((keep_a, keep_b), (keep_b, keep_a)):
            total = iv.mpf(0)
            for pattern in product((False, True), repeat=len(first)):
                p, q = iv.mpf(1), iv.mpf(1)
                for kept, pa, pb in zip(pattern, first, second):
                    p, q = (p * pa, q * pb) if kept else (p * (1 - pa), q * (1 - pb))
                gap = p - e * q
                total += iv.mpf([max(gap.a, 0), max(gap.b, 0)])
            best = max(best, lower_end(total))
        return best
    finally:
        iv.dps = old


def lower_end(x) -> Fraction:
    """The lower end of an mpmath interval, exactly."""
    sign, man, exp, _ = x._mpi_[0]
    value = Fraction(man) * Fraction(2) ** exp
    return -value if sign else value


def upper_end(x) -> Fraction:
    """The upper end of an mpmath interval, exactly."""
    sign, man, exp, _ = x._mpi_[1]
    value = Fraction(man) * Fraction(2) ** exp
    return -value if sign else value
