"""Exact sensitivity arithmetic: coefficients, distance expressions and their constraints.

A *distance expression* (`Dist`) bounds how far a value can move: a map from distance symbols
(one per function parameter, one per part of a split) to coefficients.  A value `v` with
`Dist {db: 2}` moves by at most 2 when `db` moves by 1: the Fuzz context, written as a linear form.

A *coefficient* is an exact Fraction, infinity, or (only while a recursive function is being
solved) a linear expression over *unknowns*, the annotations the LP will choose.  The hot path
stays in Fractions; sympy is used only to print formulas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Union

INF = float("inf")


class NonLinear(Exception):
    """Two unknown sensitivities were multiplied; the caller turns this into E0304."""


@dataclass(frozen=True)
class Lin:
    """const + sum(coef * unknown): a coefficient that mentions LP unknowns."""

    const: Fraction
    terms: tuple[tuple[str, Fraction], ...]  # sorted by unknown name

    @staticmethod
    def unknown(name: str) -> "Lin":
        return Lin(Fraction(0), ((name, Fraction(1)),))

    def __str__(self) -> str:
        parts = [f"{c}*{u}" if c != 1 else u for u, c in self.terms]
        if self.const or not parts:
            parts.insert(0, str(self.const))
        return " + ".join(parts)


Coef = Union[Fraction, float, Lin]  # float only ever means INF
ZERO = Fraction(0)
ONE = Fraction(1)


def _lin(c: Coef) -> Lin:
    return c if isinstance(c, Lin) else Lin(Fraction(c), ())


def _norm(const: Fraction, terms: dict[str, Fraction]) -> Coef:
    terms = {u: c for u, c in terms.items() if c != 0}
    if not terms:
        return const
    return Lin(const, tuple(sorted(terms.items())))


def is_inf(c: Coef) -> bool:
    """`c == INF`, without Fraction's slow comparison with a float: an exact number is finite."""
    return type(c) is not Fraction and c == INF


def c_add(a: Coef, b: Coef) -> Coef:
    if type(a) is Fraction and type(b) is Fraction:  # the common case: two finite exact numbers
        if not a:  # 0 + b is b: spares Fraction's normalising addition (a sum starting at ZERO)
            return b
        return a + b
    if a == INF or b == INF:
        return INF
    if not isinstance(a, Lin) and not isinstance(b, Lin):
        return a + b
    la, lb = _lin(a), _lin(b)
    terms = dict(la.terms)
    for u, c in lb.terms:
        terms[u] = terms.get(u, ZERO) + c
    return _norm(la.const + lb.const, terms)


def c_mul(a: Coef, b: Coef) -> Coef:
    """Product; 0 * inf = 0 because a zero coefficient means "does not depend on"."""
    if type(a) is Fraction and type(b) is Fraction:  # the common case: two finite exact numbers
        if b is ONE:  # (a unit coefficient, the common factor: the same answer with two comparisons fewer)
            return ZERO if a == 0 else b if a == 1 else a
        if a == 0 or b == 0:
            return ZERO
        # a factor 1 (a unit distance, a coefficient of one) gives the other: no normalising product
        return b if a == 1 else a if b == 1 else a * b
    if isinstance(a, Lin) and isinstance(b, Lin):
        raise NonLinear()
    if isinstance(b, Lin):
        a, b = b, a
    if isinstance(a, Lin):
        if b == 0:
            return ZERO
        if b == INF:
            return INF
        return _norm(a.const * b, {u: c * b for u, c in a.terms})
    if a == 0 or b == 0:
        return ZERO
    if a == INF or b == INF:
        return INF
    return a * b


def max_abs(a: Coef, b: Coef) -> Coef:
    """max(abs(a), abs(b)) (abs(a) on ties): for two exact numbers without Fraction's `abs`, which
    builds a copy, and its comparison, which asks numbers.Rational, an ABC (denominators are
    positive: |b| > |a| is |b.n| * a.d > |a.n| * b.d)."""
    if type(a) is not Fraction or type(b) is not Fraction:
        return max(abs(a), abs(b))
    an, bn = a.numerator, b.numerator
    if abs(bn) * a.denominator > abs(an) * b.denominator:
        return b if bn >= 0 else -b
    return a if an >= 0 else -a


def is_const(c: Coef) -> bool:
    return not isinstance(c, Lin)


# ---- distance expressions ----------------------------------------------------------------

Dist = dict  # symbol -> Coef, with no zero entries


def d_zero() -> Dist:
    return {}


def d_sym(symbol: str, coef: Coef = ONE) -> Dist:
    return {symbol: coef} if coef != 0 else {}


def d_add(*ds: Dist) -> Dist:
    out: Dist = {}
    for d in ds:
        if not out:  # nothing to add to yet: a copy (the same entries, in the same order)
            out.update(d)
            continue
        for s, c in d.items():
            out[s] = c_add(out[s], c) if s in out else c
    return out


_EXACT = frozenset({Fraction})


def d_scale(k: Coef, d: Dist) -> Dist:
    if not d:  # a public value: nothing to scale, whatever k is
        return {}
    if type(k) is Fraction and _EXACT.issuperset(map(type, d.values())):  # exact numbers only
        # (`c is ONE`, the common coefficient, first: it is neither 0 nor other than 1, and
        # Fraction's `==` is a Python call)
        if k == 0:
            return {}
        if k == 1:
            return {s: c for s, c in d.items() if c is ONE or c != 0}
        return {s: k if c is ONE or c == 1 else k * c for s, c in d.items() if c is ONE or c != 0}  # k * 1 is k
    out = {s: c_mul(k, c) for s, c in d.items()}
    return {s: c for s, c in out.items() if c != 0}


def d_inf(d: Dist) -> Dist:
    """Every symbol d depends on becomes infinitely sensitive (e.g. a comparison's result)."""
    return {s: INF for s in d}


def d_is_public(d: Dist) -> bool:
    return not d


def d_without(d: Dist, symbol: str) -> tuple[Coef, Dist]:
    rest = dict(d)
    return rest.pop(symbol, ZERO), rest


def d_str(d: Dist, names: dict[str, str] | None = None) -> str:
    if not d:
        return "0"
    names = names or {}
    parts = []
    for s, c in d.items():
        n = names.get(s, s)
        parts.append(n if c == 1 else f"{fmt_coef(c)}*{n}")
    return " + ".join(parts)


def fmt_coef(c: Coef) -> str:
    if is_inf(c):  # (not `c == INF`: Fraction's comparison with a float is slow)
        return "inf"
    if isinstance(c, Lin):
        return f"({c})"
    f = c if type(c) is Fraction else Fraction(c)
    if f.denominator == 1:
        return str(f.numerator)
    return _fmt_ratio(f.numerator, f.denominator)


@lru_cache(maxsize=4096)
def _fmt_ratio(numerator: int, denominator: int) -> str:
    """Memoised on the exact value (two integers): reports print the same coefficients often,
    and the exact test below parses a decimal."""
    f = Fraction(numerator, denominator)
    as_float = float(f)
    return f"{as_float:g}" if Fraction(repr(as_float)) == f else str(f)


# ---- constraints between coefficients (solved by solving/lp.py) --------------------------


@dataclass
class ConstraintStore:
    """Unknown annotations and `lhs <= rhs` constraints collected while checking a recursive
    group.  `c_max` introduces an unknown m >= a, b when a or b is not a constant: minimising
    the annotations then drives m down to the true maximum, and any feasible m is an upper
    bound, so the rule stays sound."""

    constraints: list[tuple[Coef, Coef, str]] = field(default_factory=list)
    unknowns: list[str] = field(default_factory=list)
    objective: list[str] = field(default_factory=list)
    _counter: int = 0

    def fresh(self, hint: str, minimise: bool = False) -> Lin:
        self._counter += 1
        name = f"{hint}~{self._counter}"
        self.unknowns.append(name)
        if minimise:
            self.objective.append(name)
        return Lin.unknown(name)

    def require(self, lhs: Coef, rhs: Coef, why: str) -> None:
        self.constraints.append((lhs, rhs, why))

    def c_max(self, a: Coef, b: Coef) -> Coef:
        if type(a) is Fraction and type(b) is Fraction:
            # max(a, b) (a on ties) without Fraction's comparison, which asks numbers.Rational, an
            # ABC: denominators are positive, so b > a is b.n * a.d > a.n * b.d
            return b if b.numerator * a.denominator > a.numerator * b.denominator else a
        if is_const(a) and is_const(b):
            return max(a, b)
        if a == INF or b == INF:
            return INF
        if a == 0:
            return b
        if b == 0 or a == b:
            return a
        m = self.fresh("max")
        self.require(a, m, "max")
        self.require(b, m, "max")
        return m

    def d_max(self, a: Dist, b: Dist) -> Dist:
        """Pointwise max: a sound bound for either of two branches (Fuzz's context join)."""
        out = dict(a)
        for s, c in b.items():
            out[s] = self.c_max(out[s], c) if s in out else c
        return out


def substitute(c: Coef, values: dict[str, Fraction]) -> Coef:
    """Replace solved unknowns by their certified values."""
    if not isinstance(c, Lin):
        return c
    total = c.const
    for u, k in c.terms:
        if u not in values:
            return c
        v = values[u]
        if v == INF:
            return INF
        total += k * v
    return total


def d_substitute(d: Dist, values: dict[str, Fraction]) -> Dist:
    return {s: substitute(c, values) for s, c in d.items()}
