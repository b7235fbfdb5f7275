"""Privacy mechanisms (pure epsilon).

Every mechanism takes an explicit public epsilon.  Its noise is calibrated to the sensitivity
the checker proved for its argument (`ctx.sensitivity`), and the same number is handed to the
runtime in the IR node's `info`: one calibration, used by both sides.  A mechanism applied to an
argument of proven sensitivity S with epsilon eps is (eps/S)-sensitive as a map into
distributions (max-divergence), so its cost is (eps/S) * distance(argument): eps when the input
moves by one row.
"""

from __future__ import annotations

from fractions import Fraction

from ..checking.sens import d_scale
from ..checking.types import Fuzzy, Num, Tensor
from .registry import Arg, Result, primitive


def public_epsilon(ctx, arg: Arg) -> Fraction:
    if not arg.is_const or not isinstance(arg.type, Num):
        raise ctx.fail("E0209", "epsilon must be a public constant (a literal, a param, or arithmetic on them)",
                       arg.span)
    eps = Fraction(arg.const)
    if eps <= 0:
        raise ctx.fail("E0213", f"epsilon must be positive, got {eps}", arg.span)
    return eps


def calibrate(ctx, name: str, eps: Fraction, arg: Arg, span, extra: dict | None = None):
    """Proven sensitivity S, scale S/eps, and the cost (eps/S) * distance; recorded for the report."""
    sens = ctx.sensitivity(arg.dist, arg.span)
    if sens == 0:
        scale, cost = Fraction(0), {}
    else:
        scale, cost = sens / eps, d_scale(eps / sens, arg.dist)
    ctx.record_mechanism(name, span, sens, eps if sens else Fraction(0), scale, cost, extra)
    return sens, scale, cost


def _laplace_shape(ctx, arg: Arg):
    t = arg.type
    if isinstance(t, Num):
        return Num()
    if isinstance(t, Tensor) and all(isinstance(i, Num) for i in t.items):
        return Tensor(tuple(Num() for _ in t.items))
    raise ctx.fail("E0202", f"laplace expects a number or a tensor tuple of numbers, but this is {t}", arg.span,
                   "with-pairs (| |) measure the max, not the L1 sum the Laplace mechanism needs")


@primitive("laplace", ("eps", "x"), "(eps : num) -> num -o[eps/S] fuzzy num",
           "laplace eps x: x plus Laplace noise of scale S/eps, where S is the sensitivity the checker "
           "proved for x (a number, or a tensor tuple of numbers with L1 sensitivity S). Costs eps.",
           "Dwork, McSherry, Nissim, Smith 2006: Laplace noise of scale S/eps on an S-sensitive (L1) "
           "query is eps-DP. Sampled exactly on a fixed-point grid (Canonne, Kamath, Steinke 2020); "
           "see docs/noise.md.",
           category="mechanism", is_mechanism=True)
def _laplace(ctx, args, span):
    eps_arg, x = args
    eps = public_epsilon(ctx, eps_arg)
    shape = _laplace_shape(ctx, x)
    sens, scale, cost = calibrate(ctx, "laplace", eps, x, span)
    info = {"sensitivity": sens, "epsilon": eps, "scale": scale}
    return Result(Fuzzy(shape), cost, info=info)
