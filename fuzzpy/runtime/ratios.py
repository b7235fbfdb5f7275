"""Exact rationals of many runs at once, for the batched evaluator (fuzzpy/runtime/batch.py).

Between two releases a program often does exact arithmetic on released values (a gradient step
moves the weights by -rate * gradient / n).  The scalar semantics compute it with one Fraction
per operation, and each Fraction costs a gcd and several Python calls.  Here the values of all
runs are two numpy object arrays of Python ints, numerators and positive denominators: +, -, *,
/ and comparisons are a few object-array operations (C loops over Python ints), and fractions
are reduced (one vectorised gcd) only when their integers grow past a bound, or when a value is
read as a Fraction.  The rationals are the ones the exact semantics compute; only their
representation differs, so every value read back (a Fraction, or the nearest float) is the same.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Optional, Sequence

import numpy as np

# Reduce when a numerator or denominator may exceed this many bits: small enough that products
# stay cheap, large enough that most steps need no gcd.
REDUCE_BITS = 512


class Ratios:
    """num[i] / den[i] for each run i: object arrays of Python ints with den > 0; `bits` bounds
    the bit length of every numerator and denominator.

    `scaled`, when not None, is the same values in a second form that fast paths may read
    instead: (x, k) with x a float64 array of integers below 2**53 in magnitude and k an int,
    value i = x[i] * 2**k exactly (a bounded sum's integers on its grid).  Arithmetic does not
    carry it over."""

    __slots__ = ("_num", "_den", "bits", "scaled", "_quotients")

    def __init__(self, num: Optional[np.ndarray], den: Optional[np.ndarray], bits: int,
                 scaled: Optional[tuple[np.ndarray, int]] = None):
        # num and den may be None when `scaled` holds the values: built on first read
        self._num, self._den, self.bits, self.scaled = num, den, bits, scaled
        # num / den as floats (or the OverflowError it raised), computed once: the values never
        # change, and a loop-invariant factor (`rate / max n 1`) is read at every step
        self._quotients: Any = None

    @property
    def num(self) -> np.ndarray:
        if self._num is None:
            self._build()
        return self._num  # type: ignore[return-value]

    @property
    def den(self) -> np.ndarray:
        if self._den is None:
            self._build()
        return self._den  # type: ignore[return-value]

    def _build(self) -> None:
        x, k = self.scaled  # type: ignore[misc]
        ints = x.astype(np.int64).astype(object)
        if k >= 0:
            self._num, self._den = ints << k, np.ones(len(x), dtype=object)
        else:
            self._num, self._den = ints, np.full(len(x), 1 << -k, dtype=object)

    def __len__(self) -> int:
        return len(self.scaled[0]) if self._num is None else len(self._num)  # type: ignore[index]

    @staticmethod
    def of_values(values: Sequence[Any]) -> Optional["Ratios"]:
        """The exact values of ints, Fractions and finite floats; None when one is anything else
        (a bool, an infinity or NaN, a string...), which keeps the reference path."""
        kinds = set(map(type, values))
        if kinds == {float}:
            return Ratios.of_floats(np.asarray(values, dtype=np.float64))
        if not kinds <= {float, int, Fraction}:
            return None  # a bool, a string, a tuple...
        if float in kinds and not all(math.isfinite(x) for x in values if type(x) is float):
            return None  # an infinity or NaN
        return Ratios._of_pairs([x.as_integer_ratio() for x in values])

    @staticmethod
    def of_floats(x: np.ndarray) -> Optional["Ratios"]:
        """The exact values of finite floats: x = m * 2**e with m an integer of at most 53 bits
        (frexp), as m << e or m / 2**-e (not reduced); None when one is infinite or NaN."""
        if not np.isfinite(x).all():
            return None
        frac, exp = np.frexp(x)
        m = np.ldexp(frac, 53).astype(np.int64).astype(object)
        e = exp.astype(np.int64) - 53
        up, down = np.maximum(e, 0), np.maximum(-e, 0)
        num = m << up.astype(object) if up.any() else m
        den = np.ones(len(x), dtype=object) << down.astype(object)
        return Ratios(num, den, 54 + int(max(up.max(initial=0), down.max(initial=0))))

    @staticmethod
    def of_scaled(x: np.ndarray, k: int) -> "Ratios":
        """x[i] * 2**k for a float64 array x of integers below 2**53 in magnitude (the integer
        ratios are built when first read: the grid split and floats() need only x and k)."""
        return Ratios(None, None, max(53 + max(k, 0), 1 - k), (x, k))

    @staticmethod
    def constant(v: Any, n: int) -> Optional["Ratios"]:
        """n copies of one number (as of_values takes them)."""
        one = Ratios.of_values([v])
        if one is None:
            return None
        return Ratios(np.full(n, one.num[0], dtype=object), np.full(n, one.den[0], dtype=object), one.bits)

    @staticmethod
    def of_ints(a: np.ndarray) -> "Ratios":
        """An int64 array's values."""
        bits = int(np.abs(a).max(initial=0)).bit_length()
        return Ratios(a.astype(object), np.ones(len(a), dtype=object), max(bits, 1))

    @staticmethod
    def _of_pairs(pairs: list[tuple[int, int]]) -> "Ratios":
        num = np.empty(len(pairs), dtype=object)
        den = np.empty(len(pairs), dtype=object)
        if pairs:
            num[:], den[:] = zip(*pairs)
        return Ratios(num, den, _max_bits(num, den))

    # ---- reading ----------------------------------------------------------------------------

    def fraction(self, i: int) -> Fraction:
        """Value i as a Fraction (without building every value's integers)."""
        if self._num is None:
            x, k = self.scaled  # type: ignore[misc]
            v = int(x[i])
            return Fraction(v << k) if k >= 0 else Fraction(v, 1 << -k)
        return Fraction(int(self._num[i]), int(self._den[i]))  # type: ignore[index]

    def fractions(self) -> list[Fraction]:
        """Each value as the Fraction the exact semantics compute (reduced)."""
        return [Fraction(p, q) for p, q in zip(self.num.tolist(), self.den.tolist())]

    def floats(self) -> np.ndarray:
        """Each value's nearest float, saturating at the infinities, as `as_float` gives it (int
        true division is correctly rounded, so an unreduced ratio gives the same float)."""
        if self.scaled is not None and _SCALED_EXPONENTS[0] <= self.scaled[1] <= _SCALED_EXPONENTS[1]:
            # x * 2**k is a float itself in that range (53 bits, normal): its own nearest float
            return np.ldexp(self.scaled[0], self.scaled[1]) + 0.0  # + 0.0: -0.0 reads as 0 / q
        try:
            return self.quotients()
        except OverflowError:
            return np.array([_saturating(p, q) for p, q in zip(self.num.tolist(), self.den.tolist())],
                            dtype=np.float64)

    def quotients(self) -> np.ndarray:
        """num / den as float64 (Python's int true division, correctly rounded: float(x) of each
        value); raises OverflowError when a value is beyond the floats.  Computed once; the
        array is shared, never to be modified."""
        if self._quotients is None:
            try:
                self._quotients = (self.num / self.den).astype(np.float64)
            except OverflowError as e:
                self._quotients = e
        if isinstance(self._quotients, OverflowError):
            raise OverflowError(str(self._quotients))
        return self._quotients

    @staticmethod
    def scatter(n: int, parts: list[tuple[np.ndarray, "Ratios"]]) -> "Ratios":
        """n values: parts[j]'s i-th value at position idx_j[i] (the parts' positions cover 0..n-1)."""
        num, den = np.empty(n, dtype=object), np.empty(n, dtype=object)
        for idx, r in parts:
            num[idx], den[idx] = r.num, r.den
        return Ratios(num, den, max((r.bits for _, r in parts), default=1))

    def take(self, idx: np.ndarray) -> "Ratios":
        if self._num is None:
            return Ratios(None, None, self.bits, (self.scaled[0][idx], self.scaled[1]))  # type: ignore[index]
        scaled = None if self.scaled is None else (self.scaled[0][idx], self.scaled[1])
        return Ratios(self.num[idx], self.den[idx], self.bits, scaled)

    # ---- arithmetic: the exact folds of add, sub, mul, div (x / 0 = 0) -------------------------

    def add(self, o: "Ratios") -> "Ratios":
        return _reduced(self.num * o.den + o.num * self.den, self.den * o.den, self.bits + o.bits + 1)

    def sub(self, o: "Ratios") -> "Ratios":
        return _reduced(self.num * o.den - o.num * self.den, self.den * o.den, self.bits + o.bits + 1)

    def mul(self, o: "Ratios") -> "Ratios":
        return _reduced(self.num * o.num, self.den * o.den, self.bits + o.bits)

    def div(self, o: "Ratios") -> "Ratios":
        num, den = self.num * o.den, self.den * o.num
        zero = o.num == 0
        if zero.any():
            num = np.where(zero, 0, num)
            den = np.where(zero, 1, den)
        neg = den < 0
        if neg.any():
            num, den = np.where(neg, -num, num), np.where(neg, -den, den)
        return _reduced(num, den, self.bits + o.bits)

    # ---- order ----------------------------------------------------------------------------------

    def compare(self, op: Callable[[Any, Any], Any], o: "Ratios") -> np.ndarray:
        """op(self, o) per run as booleans (denominators are positive: cross-multiply)."""
        return np.asarray(op(self.num * o.den, o.num * self.den), dtype=bool)

    def pick(self, take_other: np.ndarray, o: "Ratios") -> "Ratios":
        """o's value where take_other, else self's."""
        return Ratios(np.where(take_other, o.num, self.num), np.where(take_other, o.den, self.den),
                      max(self.bits, o.bits))


# Exponents e for which x * 2**e is a normal float, exactly, for every integer |x| < 2**53.
_SCALED_EXPONENTS = (-1000, 900)


def _max_bits(num: np.ndarray, den: np.ndarray) -> int:
    """The bit length of the largest |numerator| or denominator (denominators are positive)."""
    if not len(num):
        return 1
    return max(int(np.abs(num).max()).bit_length(), int(den.max()).bit_length(), 1)


def _reduced(num: np.ndarray, den: np.ndarray, bits: int) -> Ratios:
    """num / den, reduced by a vectorised gcd when the bound says the integers may be large."""
    if bits <= REDUCE_BITS:
        return Ratios(num, den, bits)
    g = np.gcd(num, den)
    num, den = num // g, den // g
    return Ratios(num, den, _max_bits(num, den))


def _saturating(p: int, q: int) -> float:
    try:
        return p / q
    except OverflowError:
        return math.inf if p > 0 else -math.inf


class ExactColumns:
    """Each run's input to a mechanism drawn for all runs at once (`Distribution.per_run`), given
    coordinate by coordinate as exact ratios: a number per run (`scalar`), or a tuple per run."""

    __slots__ = ("columns", "scalar")

    def __init__(self, columns: tuple[Ratios, ...], scalar: bool):
        self.columns, self.scalar = columns, scalar

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0
