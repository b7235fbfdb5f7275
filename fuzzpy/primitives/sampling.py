"""Poisson subsampling: `subsample q f db`, one release on a sample of db, amplified.

The runtime keeps every row of db independently with the public rate q, with coins it draws
fresh from the operating system's generator when the release is sampled (never from the data,
never reused), and makes f's one release on that sample.  A release that is dominated by a pair
T on neighbouring samples is then dominated by the subsampled pair of T (docs/privacy-notions.md,
"Poisson subsampling"), which the accountant composes by its privacy-loss distribution.  The
rule accepts only a function whose check shows ONE release of a known pair: a scalar Laplace
release (the discrete Laplace pair), another pure release (randomized response), or Gaussian
releases (their rho).  Its evaluator is in fuzzpy/runtime/kernels/sampling.py.
"""

from __future__ import annotations

from fractions import Fraction

from ..typesystem.ir import IVar
from ..typesystem.quadratic import (
    PURE_PREFIX,
    SAMPLED_GAUSS,
    SUBSAMPLED_PREFIX,
    UNKNOWN,
    is_inventory,
    linear_part,
    subsampled_channel,
)
from ..typesystem.sens import INF, d_add, d_inf, is_const
from ..typesystem.types import Bag, Fuzzy, Num
from .declarations import Arg, Instantiated, Result, primitive

_ALLOWED = ("f must make exactly one release on the sample and read nothing else private: a scalar "
            "laplace release, another pure mechanism (noisy_max, exponential, ...), or gaussian")


def _rate(ctx, arg: Arg) -> Fraction:
    """q: a public constant in (0, 1)."""
    if not isinstance(arg.type, Num) or not arg.is_const:
        raise ctx.fail("E0209", "the rate of subsample must be a public constant (a literal, a param, or "
                       f"arithmetic of them){_named(arg)}", arg.span,
                       "a rate the data decides could not be amplified: the sample's coins must not depend on it")
    q = Fraction(arg.const)
    if not 0 < q < 1:
        raise ctx.fail("E0213", f"the rate of subsample must be in (0, 1), got {q}", arg.span)
    return q


def _named(arg: Arg) -> str:
    """Which parameter a rate that is not constant came through (rule Constant parameters)."""
    if isinstance(arg.ir, IVar):
        return (f", but {arg.ir.name} is not: the argument given for {arg.ir.name} where this function "
                "is called must be one")
    return ""


def _refuse(ctx, span, why: str):
    return ctx.fail("E0333", f"subsample cannot amplify this function: {why}", span, _ALLOWED)


# rule Poisson subsampling: one release of a known pair on the sample
def _classify(ctx, inst: Instantiated, span) -> tuple[str, Fraction, dict]:
    """The kind and parameter of f's release on the sample, ("laplace", eps), ("pure", eps) or
    ("gauss", rho), from its cost on its parameter; and the channels of that cost other than the
    release's count."""
    if any(is_const(c) and c != 0 for k, c in linear_part(inst.captured).items()):
        raise _refuse(ctx, span, "it reads private data other than the sample (each row would be in every "
                      "sample's release, unamplified)")
    if not isinstance(inst.cod, Fuzzy):
        raise _refuse(ctx, span, f"it is not a mechanism (it returns {inst.cod}, not a distribution)")
    coef, quad = inst.param_coefs[0], dict(inst.quad[0]) if inst.quad else {}
    if not is_const(coef) or coef == INF or any(not is_const(c) or c == INF for c in quad.values()):
        raise _refuse(ctx, span, "its cost on the sample is not a finite constant")
    counts = {ch: c for ch, c in quad.items() if is_inventory(ch) and c != 0}
    rest = {ch: c for ch, c in quad.items() if not is_inventory(ch) and c != 0}
    if not counts and coef == 0:
        if set(rest) == {"g"}:  # Gaussian releases only, of rho at most rest["g"] together
            return "gauss", Fraction(rest["g"]), {SAMPLED_GAUSS: rest["g"]}
        if SAMPLED_GAUSS in rest:
            raise _refuse(ctx, span, "its release is itself on a sample (subsample nested in subsample)")
        raise _refuse(ctx, span, "it releases nothing that depends on the sample")
    if len(counts) != 1 or UNKNOWN in counts or set(rest) - {"z"} or next(iter(counts.values())) != 1:
        if SAMPLED_GAUSS in rest:
            raise _refuse(ctx, span, "its release is itself on a sample (subsample nested in subsample)")
        raise _refuse(ctx, span, "it makes more than one release on the sample, or one whose epsilon is not "
                      "known (the sample used twice, a release on a sample of the sample, or on a table built "
                      "from the sample that moves by more than one row)")
    (ch, _), = counts.items()
    if ch.startswith(SUBSAMPLED_PREFIX):
        raise _refuse(ctx, span, "its release is itself on a sample (subsample nested in subsample)")
    kind = "pure" if ch.startswith(PURE_PREFIX) else "laplace"
    eps = Fraction(ch[len(PURE_PREFIX):] if kind == "pure" else ch[2:])
    if not 0 < coef <= eps:
        raise _refuse(ctx, span, "its cost on the sample is not that of its one release")
    return kind, eps, rest


@primitive("subsample", ("q", "f", "db"), "(q : num) -> (bag 'a -o fuzzy 'b) -> bag 'a -o fuzzy 'b",
           "subsample q f db: f's one release made on a Poisson sample of db, each row kept independently "
           "with the public rate q by coins the runtime draws fresh when it is sampled. f makes exactly one "
           "release on its argument (laplace, another pure mechanism, or gaussian) and reads nothing else "
           "private. The release is amplified: the accountant composes it by the PLD of the subsampled pair.",
           "Poisson subsampling amplifies privacy (Balle, Barthe & Gaboardi 2018, Theorem 8; Zhu, Dong & "
           "Wang 2022, Theorem 11): a release dominated by the pair (P, Q) on neighbouring samples is "
           "dominated by ((1-q)Q + qP, Q) when a row is removed and (P, (1-q)P + qQ) when one is added, "
           "because the row's coin is independent of the data, of the other coins and of earlier releases. "
           "The coins are drawn from the operating system's generator with a rate at most q "
           "(docs/privacy-notions.md, \"Poisson subsampling\"; rule Poisson subsampling in docs/soundness.md).",
           category="mechanism")  # not a mechanism itself: f's release is (its noise, its record)
def _subsample(ctx, args, span):
    q_arg, f, db = args
    q = _rate(ctx, q_arg)
    if not isinstance(db.type, Bag):
        raise ctx.fail("E0202", f"subsample expects a bag, but this is {db.type}", db.span)
    inst = ctx.instantiate(f, [db.type], span, quadratic=True)
    kind, value, rest = _classify(ctx, inst, span)
    # The plain cost (an upper bound whatever the sample) on db, and the count of one release of
    # this amplified pair in place of the inner release's count; a Gaussian release's rho moves
    # from channel g to channel gs, which holds the Gaussian releases on samples only.
    quad = {**rest, subsampled_channel(kind, q, value): Fraction(1)}
    # What f captures (a released value, say, which a recursion's parameter may still stand for) is
    # read by a release amplified only for db: infinitely sensitive in it, as in a row function.
    dist = d_add(ctx.scale_apply(inst.param_coefs[0], db.dist, span), ctx.lift(quad, db.dist, span),
                 d_inf(inst.captured))
    return Result(Fuzzy(inst.cod.inner), dist, info={"rate": q, "kind": kind},
                  ir_args=[q_arg.ir, inst.code, db.ir])
