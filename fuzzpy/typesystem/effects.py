"""The failure effect: on what evaluating an expression may fail or not complete (docs/soundness.md,
"Failure").

A value's *risk* is a distance-shaped map whose keys are the symbols on which whether its
evaluation completes may depend, plus the pseudo-symbol `FAIL` when it may fail or not complete
whatever the data (a recursion the checker did not unroll may run deeper than the runtime allows,
or forever).  Only presence matters: a coefficient is 1, or (inside an unsolved recursion) an LP
unknown that turns out 0 or positive.  Risk is never dropped by a rule that drops a value: every
construct that evaluates a sub-expression unions its risk, whatever it does with the value.
"""

from __future__ import annotations

from fractions import Fraction

from .quadratic import base_of, is_shadow
from .sens import ONE, Coef, Dist, Lin, is_const

FAIL = "!fail"  # may fail or not complete, whatever the private data
# In the risk of a function a primitive checked: it may fail depending on what the primitive
# applies it to (rule Primitive maps this onto the primitive's arguments).
ARGS = "!args"


def r_union(*risks: Dist) -> Dist:
    """Risk of evaluating several sub-expressions: the union of theirs."""
    out: Dist = {}
    for r in risks:
        if not r:
            continue
        if not out:
            out = dict(r)
            continue
        for s, c in r.items():
            out[s] = _either(out[s], c) if s in out else c
    return out


def _either(a: Coef, b: Coef) -> Coef:
    if is_const(a) and a != 0:
        return a
    if is_const(b) and b != 0:
        return b
    if not is_const(a) and not is_const(b):
        terms = dict(a.terms)  # type: ignore[union-attr]
        for u, k in b.terms:  # type: ignore[union-attr]
            terms[u] = terms.get(u, Fraction(0)) + k
        return Lin(a.const + b.const, tuple(sorted(terms.items())))  # type: ignore[union-attr]
    return b if is_const(a) else a


def r_presence(d: Dist, coef: Coef = ONE) -> Dist:
    """Every symbol a value depends on, with presence `coef`: a failure that depends on the value
    depends on all of them (a finite move can change a number, hence the depth of a recursion on it)."""
    # A shadow entry (rule Rho) depends on its base symbol.
    return {base_of(s): coef for s in d} if coef != 0 else {}


def r_base(r: Dist) -> Dist:
    """A risk keyed by base symbols: eliminating a split part replaces it by its parent's
    expression, whose shadow entries (rule Rho) stand for their base symbol here."""
    if not any(is_shadow(s) for s in r):
        return r
    return r_union(*({base_of(s): c} for s, c in r.items()))


def r_may_fail(r: Dist) -> bool:
    return FAIL in r


def r_private(r: Dist) -> Dist:
    """The data-dependent part: everything but FAIL."""
    return {s: c for s, c in r.items() if s != FAIL}


def r_normal(r: Dist) -> Dist:
    """Constants shown as presence 1; zero entries dropped."""
    return {s: (ONE if is_const(c) else c) for s, c in r.items() if c != 0}
