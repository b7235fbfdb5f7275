"""Linear algebra for sufficient-statistics regression (AdaSSP in stdlib/ml.fz; rule Vector in
docs/soundness.md).

`vouter` builds a row's share of the Gram matrix X^T X: the outer product x x^T, row by row, as a
vector of n*n numbers whose L2 norm is ||x||^2, so `vsum (B * B) (fun r -> vouter x) b` sums it
with L2 sensitivity B^2 (the checker's own vsum rule) and `gaussian` releases it.  Like `vdot` of
two private vectors it is infinitely sensitive in a private argument: it belongs in a row
function, under vsum's clip.

The others are post-processing of released values: `sqrt`, `vsize`, `min_eigenvalue` and
`ridge_solve` compute in floats (numpy) what a fit derives from the released statistics.  They
are infinitely sensitive in anything private (always an upper bound, as for `exp`), so on
private data they cost infinity; on released values they are free.  Their evaluators are in
fuzzpy/runtime/kernels/linalg.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..typesystem.sens import d_add, d_inf
from ..typesystem.types import MAX_VECTOR_SIZE, Num, Vector
from .declarations import Arg, Result, primitive
from .vectors import _product_risk, _same_length, _vector, exact_times

_POST = ("infinitely sensitive in every private input (always an upper bound, as for exp); on released "
         "values, distance 0, free post-processing (Dwork & Roth 2014, Proposition 2.1).")


def _square_side(ctx, arg: Arg, prim: str) -> int:
    """n for a vector of n*n numbers (a square matrix row by row)."""
    size = _vector(ctx, arg, prim).size
    side = math.isqrt(size)
    if side * side != size:
        raise ctx.fail("E0202", f"{prim} expects a square matrix as a vector of n*n numbers (row by row), but "
                                f"this is a vector of {size}", arg.span, "build it with vouter, summed by vsum")
    return side


# rule Vector: a row's share of the Gram matrix; infinitely sensitive unless vsum clips it
@primitive("vouter", ("v",), "vec[n] -> vec[n*n]",
           "vouter v: the outer product v v^T, row by row, as a vector of n*n numbers; its norm is ||v||^2. "
           "Infinitely sensitive in a private v: use it in a row function under vsum's clip (vsum (B * B) "
           "(fun r -> vouter (vclip B (features r))) b sums the Gram matrix X^T X with L2 sensitivity B^2).",
           "||v v^T||_F = ||v||_2^2, so a row's outer product has L2 norm at most B^2 when ||v||_2 <= B and vsum "
           "(B * B) never clips it; a product of two private values has no Lipschitz bound, so the rule "
           "charges infinity on a private v (as vdot of two private vectors).",
           category="vector", structured=True)
def _vouter(ctx, args, span):
    (v,) = args
    n = _vector(ctx, v, "vouter").size
    if n * n > MAX_VECTOR_SIZE:
        raise ctx.fail("E0208", f"vouter of a vector of {n} gives {n * n} coordinates; vectors have at most "
                                f"{MAX_VECTOR_SIZE}", v.span)
    if v.is_const:
        xs = tuple(Fraction(x) for x in v.const)
        return Result(Vector(n * n), {}, tuple(exact_times(a, b) for a in xs for b in xs))
    return Result(Vector(n * n), d_inf(v.dist), risk=_product_risk(v, v))


@primitive("vsize", ("v",), "vec[n] -> num",
           "vsize v: n, the number of coordinates of v (a public constant, whatever v holds).",
           "The length of a vector is part of its type, the same for every input: distance 0.",
           category="vector", structured=True)
def _vsize(ctx, args, span):
    (v,) = args
    n = Fraction(_vector(ctx, v, "vsize").size)
    return Result(Num(n, n), {}, n)


@primitive("sqrt", ("x",), "num -> num[0, inf]",
           "sqrt x: the square root of x (0 for x <= 0), in floats; e.g. a noise scale from public "
           "parameters. Infinitely sensitive in private inputs: use it on released or public values.",
           "sqrt is not Lipschitz near 0, so the rule " + _POST + " A constant argument is not folded (the "
           "root is irrational).",
           category="numeric")
def _sqrt(ctx, args, span):
    (x,) = args
    if not isinstance(x.type, Num):
        raise ctx.fail("E0202", f"sqrt expects a number, but this is {x.type}", x.span)
    return Result(Num(Fraction(0), None, False), d_inf(x.dist))


@primitive("min_eigenvalue", ("m",), "vec[n*n] -> num",
           "min_eigenvalue m: the smallest eigenvalue of the symmetric part (M + M^T)/2 of the n x n matrix M "
           "given row by row (e.g. a released Gram matrix), in floats. For released values: infinitely "
           "sensitive in private inputs.",
           "Post-processing: " + _POST,
           category="vector")
def _min_eigenvalue(ctx, args, span):
    (m,) = args
    _square_side(ctx, m, "min_eigenvalue")
    return Result(Num(), d_inf(m.dist))


@primitive("ridge_solve", ("lam", "m", "v"), "num -> vec[n*n] -> vec[n] -> vec[n]",
           "ridge_solve lam m v: the solution t of (S + lam I) t = v, S the symmetric part (M + M^T)/2 of the n x n "
           "matrix M given row by row (the least-squares solution of smallest norm when S + lam I is singular), in "
           "floats: the ridge regression coefficients from released sufficient statistics X^T X and X^T y. For "
           "released values: infinitely sensitive in private inputs.",
           "Post-processing: " + _POST,
           category="vector")
def _ridge_solve(ctx, args, span):
    lam, m, v = args
    if not isinstance(lam.type, Num):
        raise ctx.fail("E0202", f"ridge_solve expects a number (the ridge term) first, but this is {lam.type}",
                       lam.span)
    side = _square_side(ctx, m, "ridge_solve")
    tv = _vector(ctx, v, "ridge_solve")
    _same_length(ctx, Vector(side), tv, span, "ridge_solve")
    return Result(Vector(side), d_inf(d_add(lam.dist, d_add(m.dist, v.dist))))
