"""Additional primitives used by the standard library and examples (see docs/primitives.md).

`exp x` is the one numeric function the standard library cannot build from the others: the
logistic function of logistic regression (stdlib/ml.fz) and the multiplicative weights of
MWEM (tests/conformance/programs/mwem.fz) need it.  Its rule is deliberately the simplest
sound one: exp is not Lipschitz on the real line, so the result is infinitely sensitive in
anything private it reads.  That is no restriction where it is used: inside a row function
(`map`, `filter`, `groupby` are 1-sensitive in the bag whatever the row function does; the
value is clipped before it is summed), and on released, public values (distance 0, free
post-processing).
"""

from __future__ import annotations

from fractions import Fraction

from ..typesystem.sens import d_inf
from ..typesystem.types import Num
from .declarations import Result, primitive


@primitive("exp", ("x",), "num -> num[0, inf]",
           "exp x: e to the power x (e.g. the logistic function 1 / (1 + exp (0 - z)), or "
           "multiplicative weights on released values). Infinitely sensitive in private inputs: "
           "use it in row functions (then clip) or on released values.",
           "exp has no global Lipschitz constant, so the rule charges infinity on every private "
           "input (always an upper bound) and keeps public inputs public; row functions may be "
           "infinitely sensitive in their row, because map, filter, split and groupby are "
           "1-sensitive in the bag whatever the row function computes (Reed & Pierce, ICFP 2010, "
           "section 4). The result is positive, so its type is num[0, inf]; a constant argument "
           "is not folded (e^c is irrational).",
           category="numeric", vectorised=True)
def _exp(ctx, args, span):
    (x,) = args
    if not isinstance(x.type, Num):
        raise ctx.fail("E0202", f"exp expects a number, but this is {x.type}", x.span)
    return Result(Num(Fraction(0), None, False), d_inf(x.dist))
