"""Vectors with the Euclidean (L2) metric: `vec[n]` (docs/language.md, rule Vector in
docs/soundness.md).

A value of type `vec[n]` is n numbers; the distance between two vectors is the L2 norm of their
difference, so a vector's distance expression bounds its L2 move.  Tensor tuples measure L1,
which bounds L2 (||d||_2 <= ||d||_1): turning a tuple into a vector is free (`vec`), the other
way costs sqrt(n) (`vtuple`).  The Gaussian mechanism is calibrated to a vector's proven L2
sensitivity; the Laplace mechanism, which needs L1, refuses vectors (mechanisms.py).

At run time a vector is a tuple of numbers.  Outside row functions its components are exact
(Fractions), like every number there (docs/runtime.md), and every primitive below computes
exactly; in row functions they are floats, or whole columns (their evaluators,
fuzzpy/runtime/kernels/vectors.py, are numpy-generic, and `structured=True` lets the
vectorising evaluator hand them tuples of columns).
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any

from ..typesystem.effects import FAIL
from ..typesystem.quadratic import linear_part
from ..typesystem.sens import ONE, d_add, d_inf, d_scale
from ..typesystem.types import Num, Tensor, Vector
from .bags import elem_type, row_function
from .declarations import Arg, Result, primitive

_REF_L2 = ("the Euclidean norm is a norm: the triangle inequality and ||k v||_2 = |k| ||v||_2 "
           "(any linear-algebra text; for its use in DP, Dwork & Roth 2014, section 3.5.3)")


# ---- exact helpers ---------------------------------------------------------------------------------

def sqrt_upper(x: Fraction, bits: int = 32) -> Fraction:
    """An exact rational upper bound on sqrt(x), within 2**-bits of it (x >= 0)."""
    x = Fraction(x)
    if x <= 0:
        return Fraction(0)
    p, q = x.numerator, x.denominator
    scaled = p * q * 4 ** bits  # sqrt(p/q) = sqrt(p q) / q
    r = math.isqrt(scaled)
    if r * r < scaled:
        r += 1
    return Fraction(r, q * 2 ** bits)


def is_exact(x: Any) -> bool:
    return isinstance(x, (Fraction, int)) and not isinstance(x, bool)


def exact_times(k: Any, x: Any) -> Any:
    """k * x on exact numbers, with 0 * x = 0 (as `mul`'s fold)."""
    return Fraction(0) if k == 0 or x == 0 else k * x


def _exact_dot(u: tuple, v: tuple) -> Any:
    terms = [exact_times(a, b) for a, b in zip(u, v)]
    return sum(terms[1:], terms[0])


# ---- the exact clip (outside row functions; in floats: fuzzpy/runtime/kernels/vectors.py) ----------

CLIP_GRID = 256  # tangent points per octave of the exact clip (relative shortfall < 3e-5)


def _tangent_factor(t2: Fraction) -> Fraction:
    """phi(t2) = max over g in G of 3/(2g) - t2/(2 g^3), for t2 = ||v||^2 / c^2 > 1, where
    G = {(1 + j/M) 2^e : e >= 0, 0 <= j < M}: the tangents of s -> s^(-1/2) at the squares of G,
    so phi(t2) <= t2^(-1/2) (a convex function lies above its tangents).  The maximum of the
    tangents at t2 is attained at one of the two tangent points around sqrt(t2) (the gap between
    a convex function and a tangent grows with the distance of the tangent point on each side);
    a floor estimate of sqrt(t2) with 60 bits finds them, and checking two more on each side
    covers its error."""
    m = CLIP_GRID
    num = t2.numerator * 4 ** 60 // t2.denominator
    r = Fraction(math.isqrt(num), 2 ** 60)  # floor of sqrt(t2), within 2**-60
    e = max(int(r).bit_length() - 1, 0)
    j = int((r / 2 ** e - 1) * m)
    index = e * m + min(j, m - 1)
    best = None
    for k in range(max(index - 2, 0), index + 3):
        g = (1 + Fraction(k % m, m)) * Fraction(2) ** (k // m)
        value = 3 / (2 * g) - t2 / (2 * g ** 3)
        best = value if best is None or value > best else best
    return best


# rule Vector: the exact, 1-Lipschitz clip to norm c
def clip_exact(c: Fraction, xs: tuple) -> tuple:
    """The exact clip to L2 norm c: v itself when ||v|| <= c, else v * phi(||v||^2 / c^2).

    It keeps ||result|| <= c (phi <= c/||v||), and it is 1-Lipschitz in L2: a radial map
    v -> phi(|v|^2) v has the Jacobian phi I + 2 phi' v v^T, with eigenvalues phi (in [0, 1]) and
    psi'(|v|), psi(r) = r phi(r^2).  On the piece where the tangent at g is the maximum,
    psi'(r) = (3/(2g)) (1 - r^2/(c g)^2) with r/(c g) within a factor 1 + 1/M of 1, so
    |psi'| <= 1.5 ((1 + 1/M)^2 - 1) < 1; the pieces join continuously (a maximum of continuous
    functions, and phi = 1 at ||v|| = c).  So it is a 1-Lipschitz map with norm at most c, like
    the projection onto the ball, which it equals inside the ball and approaches within a
    relative 3/(8 M^2) outside: the projection itself is irrational, and a rounded projection
    is not Lipschitz at small scales."""
    s = sum((x * x for x in xs), Fraction(0))
    if s <= c * c:
        return tuple(xs)
    phi = _tangent_factor(s / (c * c))
    return tuple(x * phi for x in xs)


# ---- typing rules ------------------------------------------------------------------------------

def _vector(ctx, arg: Arg, prim: str) -> Vector:
    if not isinstance(arg.type, Vector):
        raise ctx.fail("E0202", f"{prim} expects a vector (vec[n]), but this is {arg.type}", arg.span,
                       "make one with vec: vec (x, y, z) from a tuple of numbers (free: L1 bounds L2)")
    return arg.type


def _same_length(ctx, u: Vector, v: Vector, span, prim: str) -> None:
    if u.size != v.size:
        raise ctx.fail("E0202", f"{prim} expects two vectors of the same length, but they are {u} and {v}", span)


def _public_positive(ctx, arg: Arg, what: str, prim: str) -> Fraction:
    if not arg.is_const or not isinstance(arg.type, Num):
        raise ctx.fail("E0209", f"the {what} of {prim} must be a public constant (a literal or a param)", arg.span,
                       "the bound must not come from the data")
    value = Fraction(arg.const)
    if value <= 0:
        raise ctx.fail("E0213", f"the {what} of {prim} must be positive, got {value}", arg.span)
    return value


def _const_norm_upper(xs: tuple) -> Fraction:
    return sqrt_upper(sum((Fraction(x) ** 2 for x in xs), Fraction(0)))


def _product_risk(a: Arg, b: Arg) -> dict:
    """Rule Exact, as for `x * y`: an exact product of two values that are not constants has the
    digits of both; when both are private, how many depends on the data."""
    if a.is_const or b.is_const:
        return {}
    risk = {FAIL: ONE}
    if linear_part(a.dist) and linear_part(b.dist):
        risk.update({s: ONE for s in {**linear_part(a.dist), **linear_part(b.dist)}})
    return risk


_VEC_WHY = ("||(x_1 .. x_n) - (x'_1 .. x'_n)||_2 <= sum_i |x_i - x'_i|: a tensor tuple's distance (L1) "
            "bounds the vector's (L2), and a number's distance is its own L2 distance.")


@primitive("vec", ("x",), "(num, ..., num) -o vec[n]   (and num -o vec[1])",
           "vec (x1, ..., xn): the vector of a tensor tuple of n numbers (or of one number), with the "
           "Euclidean metric. Free: the tuple's L1 distance bounds the vector's L2 distance.",
           _VEC_WHY, category="vector", structured=True)
def _vec(ctx, args, span):
    (x,) = args
    t = x.type
    if isinstance(t, Num):
        n = 1
    elif isinstance(t, Tensor) and all(isinstance(i, Num) for i in t.items):
        n = len(t.items)
    else:
        raise ctx.fail("E0202", f"vec expects a number or a tensor tuple of numbers, but this is {t}", x.span,
                       "with-pairs (| |) measure the max of their components' moves, which does not bound "
                       "the L2 norm of the vector")
    if n > _max_size():
        raise ctx.fail("E0208", f"vectors have at most {_max_size()} coordinates", x.span)
    if x.is_const:
        const = tuple(Fraction(v) for v in x.const) if n > 1 or isinstance(x.const, tuple) else (Fraction(x.const),)
        return Result(Vector(n), {}, const)
    return Result(Vector(n), x.dist)


def _max_size() -> int:
    from ..typesystem.types import MAX_VECTOR_SIZE

    return MAX_VECTOR_SIZE


@primitive("vtuple", ("v",), "vec[n] -o[sqrt n] (num, ..., num)",
           "vtuple v: the coordinates of v as a tensor tuple (L1 metric), e.g. to release them with "
           "laplace. Costs sqrt(n) (rounded up to a rational): the L1 distance is up to sqrt(n) times "
           "the L2 distance.",
           "Cauchy-Schwarz: ||d||_1 <= sqrt(n) ||d||_2, with equality when every coordinate moves by the "
           "same amount; sqrt(n) is bounded above by an exact rational (32 bits).",
           category="vector", structured=True)
def _vtuple(ctx, args, span):
    (v,) = args
    t = _vector(ctx, v, "vtuple")
    out = Tensor(tuple(Num() for _ in range(t.size))) if t.size > 1 else Num()
    if v.is_const:
        return Result(out, {}, tuple(v.const) if t.size > 1 else v.const[0])
    return Result(out, d_scale(sqrt_upper(Fraction(t.size)), v.dist))



@primitive("vget", ("i", "v"), "(i : int) -> vec[n] -o num",
           "vget i v: the i-th coordinate of v (1 to n, as p.1 for tuples); i is a public constant.",
           "|x_i - x'_i| <= ||x - x'||_2: a coordinate is 1-sensitive in L2.",
           category="vector", structured=True)
def _vget(ctx, args, span):
    i_arg, v = args
    t = _vector(ctx, v, "vget")
    if not i_arg.is_const or not isinstance(i_arg.type, Num):
        raise ctx.fail("E0209", "the coordinate of vget must be a public constant", i_arg.span)
    i = Fraction(i_arg.const)
    if i.denominator != 1 or not 1 <= i <= t.size:
        raise ctx.fail("E0213", f"vget: coordinate {i} of a vector of length {t.size} (coordinates are 1 to "
                                f"{t.size})", i_arg.span)
    if v.is_const:
        value = Fraction(v.const[int(i) - 1])
        return Result(Num(value, value), {}, value)
    return Result(Num(), v.dist)


def _binary(name: str, op, sign: str):
    @primitive(name, ("u", "v"), "vec[n] -o vec[n] -o vec[n]",
               f"{name} u v: u {sign} v, coordinate by coordinate.",
               f"||(u {sign} v) - (u' {sign} v')||_2 <= ||u - u'||_2 + ||v - v'||_2 (triangle inequality): "
               "1-sensitive in each argument; " + _REF_L2 + ".",
               category="vector", structured=True)
    def rule(ctx, args, span):
        u, v = args
        tu, tv = _vector(ctx, u, name), _vector(ctx, v, name)
        _same_length(ctx, tu, tv, span, name)
        if u.is_const and v.is_const:
            return Result(tu, {}, tuple(op(Fraction(a), Fraction(b)) for a, b in zip(u.const, v.const)))
        return Result(tu, d_add(u.dist, v.dist))
    return rule


_binary("vadd", operator.add, "+")
_binary("vsub", operator.sub, "-")


@primitive("vscale", ("k", "v"), "num -o[||v||] vec[n] -o[|k|] vec[n]",
           "vscale k v: k times v. |k|-sensitive in v when k is a public constant; ||v||-sensitive in k "
           "when v is a public constant vector; otherwise unbounded (vectors carry no bound).",
           "||k v - k v'||_2 = |k| ||v - v'||_2 and ||k v - k' v||_2 = |k - k'| ||v||_2 (homogeneity of the "
           "norm); ||v||_2 of a constant is bounded above by an exact rational.",
           category="vector", structured=True)
def _vscale(ctx, args, span):
    k, v = args
    if not isinstance(k.type, Num):
        raise ctx.fail("E0202", f"vscale expects a number to scale by, but this is {k.type}", k.span)
    t = _vector(ctx, v, "vscale")
    if k.is_const and v.is_const:
        return Result(t, {}, tuple(exact_times(Fraction(k.const), Fraction(x)) for x in v.const))
    if k.is_const:
        dist = d_scale(abs(Fraction(k.const)), v.dist)
    elif v.is_const:
        dist = d_scale(_const_norm_upper(v.const), k.dist)
    else:
        dist = d_inf(d_add(k.dist, v.dist))
    return Result(t, dist, risk=_product_risk(k, v))


@primitive("vdot", ("u", "v"), "vec[n] -o[||v||] vec[n] -o[||u||] num",
           "vdot u v: the dot product. ||c||-sensitive in the other argument when one of them is a "
           "public constant vector c (or a released one inside a row function); otherwise unbounded.",
           "Cauchy-Schwarz: |c . v - c . v'| <= ||c||_2 ||v - v'||_2; a product of two private values has "
           "no bound without a bound on both (vectors carry none), so it is infinitely sensitive.",
           category="vector", structured=True)
def _vdot(ctx, args, span):
    u, v = args
    tu, tv = _vector(ctx, u, "vdot"), _vector(ctx, v, "vdot")
    _same_length(ctx, tu, tv, span, "vdot")
    if u.is_const and v.is_const:
        value = _exact_dot(tuple(map(Fraction, u.const)), tuple(map(Fraction, v.const)))
        return Result(Num(value, value), {}, value)
    if u.is_const:
        dist = d_scale(_const_norm_upper(u.const), v.dist)
    elif v.is_const:
        dist = d_scale(_const_norm_upper(v.const), u.dist)
    else:
        dist = d_inf(d_add(u.dist, v.dist))
    return Result(Num(), dist, risk=_product_risk(u, v))


@primitive("vclip", ("c", "v"), "(c : num) -> vec[n] -o vec[n]",
           "vclip c v: v scaled into the ball of L2 norm c (v itself when ||v|| <= c); c is a public "
           "positive constant. In row functions it computes in floats and the result's norm is always "
           "below c; elsewhere it is exact (a rational 1-Lipschitz clip within 3e-5 of the projection, "
           "see fuzzpy/primitives/vectors.py).",
           "The projection onto a closed convex set is 1-Lipschitz (a nonexpansive map; e.g. Bauschke & "
           "Combettes, Convex Analysis and Monotone Operator Theory, Prop. 4.16) and bounds the norm. The "
           "exact version is a radial map phi(|v|^2) v whose Jacobian has eigenvalues in [0, 1]: "
           "1-Lipschitz too (clip_exact's proof).",
           category="vector", structured=True)
def _vclip(ctx, args, span):
    c_arg, v = args
    c = _public_positive(ctx, c_arg, "norm", "vclip")
    t = _vector(ctx, v, "vclip")
    if v.is_const:
        return Result(t, {}, clip_exact(c, tuple(map(Fraction, v.const))))
    # Rule Exact: the result has about three times the digits of v, by a factor that depends on v.
    risk = {FAIL: ONE, **{s: ONE for s in linear_part(v.dist)}}
    return Result(t, v.dist, risk=risk)


@primitive("vsum", ("c", "f", "b"), "(c : num) -> ('a -> vec[n]) -> bag 'a -o[c] vec[n]",
           "vsum c f b: the sum over the rows r of b of f r clipped to L2 norm c (f is a row function "
           "returning a vector; a row without one counts as 0). c is a public positive constant.",
           "Each row's clipped vector has L2 norm at most c (computed in floats with a safety factor, then "
           "each coordinate truncated toward zero onto a grid and summed exactly, as sum does), so adding "
           "or removing a row moves the sum by at most c in L2: the L2 sensitivity of a sum of clipped "
           "vectors, as in DP-SGD (Abadi et al., CCS 2016, section 3.1).",
           category="vector")
def _vsum(ctx, args, span):
    c_arg, f, b = args
    c = _public_positive(ctx, c_arg, "clip norm", "vsum")
    elem = elem_type(ctx, b, "vsum")
    inst, captured = row_function(ctx, f, elem, span)
    if not isinstance(inst.cod, Vector):
        raise ctx.fail("E0202", f"vsum expects a row function returning a vector, but it returns {inst.cod}",
                       f.span, "build the row's vector with vec (x, y, ...)")
    dist = d_add(d_scale(c, b.dist), captured)
    return Result(Vector(inst.cod.size), dist, info={"bound": c, "size": inst.cod.size},
                  ir_args=[c_arg.ir, inst.code, b.ir])

