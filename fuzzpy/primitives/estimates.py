"""Estimates: values computed from releases, with their accuracy in the user's units
(docs/runtime.md, "Estimates"; the derivations are in docs/mechanisms.md, "Accuracy in the
user's units").

These primitives are post-processing: every argument must be public (released values, or
constants), so they cost nothing and the checker gives their result distance 0.  At run time
(fuzzpy/runtime/kernels/estimates.py) each one computes its value exactly as the standard
library computed it before (the same folds, so released results are unchanged), finds the
release(s) its arguments came from, and states what those releases' public accuracy
statements imply:

* `mean_estimate lo hi s n`: the ratio of a noisy clipped sum and a noisy count, with an interval
  for the mean of the clipped values (both intervals at confidence 1 - beta/2: union bound);
* `rank_estimate q c`: a quantile chosen by the exponential mechanism; its accuracy restated in
  ranks, with the neighbouring candidates (an interval in the data's units would need the data);
* `chosen_bound slack cands answers`: the clip bound a sparse vector chose, as a value, with
  what its answers say about the number of values above it;
* `cumulative_estimate bounds cs`: the running totals of released interval counts (a CDF), each
  with an interval for the number of values below its boundary (all at once: a 95% band).

Nothing here reads private data: the values, bounds and candidates are all public, so what is
shown is post-processing of the releases (no further privacy cost)."""

from __future__ import annotations

from fractions import Fraction

from ..typesystem.types import ListT, Num
from .declarations import Result, primitive


# rule Estimate: an argument must be public (E1801)
def _public(ctx, arg, name: str, what: str) -> None:
    if arg.dist and not arg.is_const:
        raise ctx.fail("E1801", f"{name} works on released values: its {what} must be public (a released value "
                       "or a constant), but this depends on private data", arg.span,
                       f"release the {what} with a mechanism first (sample x = laplace ...), then pass x")


# rule Estimate: a bound, level or slack must be a constant (E1802)
def _constant(ctx, arg, name: str, what: str) -> Fraction:
    if not arg.is_const or not isinstance(arg.type, Num):
        raise ctx.fail("E1802", f"the {what} of {name} must be a public constant (a literal or a param)", arg.span)
    return Fraction(arg.const)


def _number(ctx, arg, name: str, what: str) -> None:
    if not isinstance(arg.type, Num):
        raise ctx.fail("E0202", f"the {what} of {name} must be a number, but this is {arg.type}", arg.span)


# ---- mean_estimate ------------------------------------------------------------------------------

@primitive("mean_estimate", ("lo", "hi", "s", "n"),
           "(lo : num) -> (hi : num) -> num -> num -> num[lo, hi]   (public arguments only)",
           "mean_estimate lo hi s n: the mean s / n of a released clipped sum s and a released count n, "
           "clamped into [lo, hi] (the midpoint when n < 1). Post-processing of released values: the run "
           "shows it with a 95% interval for the exact mean, from the two releases' accuracy.",
           "Post-processing: every argument is public (released values or constants), so the result is "
           "public and costs nothing (Dwork & Roth 2014, Proposition 2.1). The interval is the range of "
           "S/N over the two releases' intervals at 97.5% each (union bound); docs/mechanisms.md.",
           category="numeric")
def _mean_estimate(ctx, args, span):
    lo, hi, s, n = args
    low, high = _constant(ctx, lo, "mean_estimate", "lower bound"), _constant(ctx, hi, "mean_estimate", "upper bound")
    if low > high:
        raise ctx.fail("E0213", "mean_estimate: lower bound is above upper bound", span)
    for arg, what in ((s, "sum"), (n, "count")):
        _number(ctx, arg, "mean_estimate", what)
        _public(ctx, arg, "mean_estimate", what)
    return Result(Num(low, high, False), {})  # the type `clip lo hi (s / n)` had before


# ---- rank_estimate ------------------------------------------------------------------------------

@primitive("rank_estimate", ("q", "c"), "(q : num) -> 'c -> 'c   (public arguments only)",
           "rank_estimate q c: c, a quantile released by the exponential mechanism with stdlib's "
           "quantile_score q; the run states its accuracy in ranks (|#(values < c) - q n| beyond the best "
           "candidate's) with the neighbouring candidates, not in score units.",
           "Post-processing: both arguments are public, the result is c itself. The restatement is the "
           "mechanism's own bound (Dwork & Roth 2014, Theorem 3.11) for the score -|#(v < c) - q n|; an "
           "interval in the data's units would need the private data (docs/mechanisms.md).",
           category="numeric")
def _rank_estimate(ctx, args, span):
    q, c = args
    _constant(ctx, q, "rank_estimate", "quantile level")
    _public(ctx, c, "rank_estimate", "candidate")
    return Result(c.type, {})


# ---- chosen_bound -------------------------------------------------------------------------------

@primitive("chosen_bound", ("slack", "cands", "answers"),
           "(slack : num) -> list num -> list bool -> num   (public arguments only)",
           "chosen_bound slack cands answers: the first candidate bound answered true (the last candidate if "
           "none), for the answers of stdlib/adaptive.fz bound_answers with this slack; the run shows the "
           "bound as a value, with what the sparse vector says about the number of values above it.",
           "Post-processing: all arguments are public (constants and released answers), the result is one "
           "of the public candidates (Dwork & Roth 2014, Proposition 2.1); the statement is the sparse "
           "vector's accuracy (Lyu, Su & Li 2017) for the queries -#(v > c) and the threshold -slack.",
           category="numeric")
def _chosen_bound(ctx, args, span):
    slack, cands, answers = args
    _constant(ctx, slack, "chosen_bound", "slack")
    for arg, what in ((cands, "candidates"), (answers, "answers")):
        if not isinstance(arg.type, ListT):
            raise ctx.fail("E0202", f"the {what} of chosen_bound must be a list, but this is {arg.type}", arg.span)
        _public(ctx, arg, "chosen_bound", what)
    if not isinstance(cands.type.elem, Num):
        raise ctx.fail("E0202", f"the candidates of chosen_bound must be numbers, but this is {cands.type}",
                       cands.span)
    return Result(Num(), {})


# ---- cumulative_estimate ------------------------------------------------------------------------

@primitive("cumulative_estimate", ("bounds", "cs"), "(bounds : list num) -> list num -> list num   "
           "(public arguments only)",
           "cumulative_estimate bounds cs: the running totals c1, c1 + c2, ... of the first len(bounds) released "
           "counts cs of the intervals (-inf, b1), [b1, b2), ...: the number of values below each boundary. "
           "Post-processing of released values: the run shows each with a 95% band (all at once) from the "
           "counts' accuracy.",
           "Post-processing: both arguments are public, the totals are sums of released values (Dwork & Roth "
           "2014, Proposition 2.1). The band: each of the k counts within its bound at beta / k (union bound), "
           "so the j-th total within the sum of the first j bounds, for every j at once (docs/runtime.md).",
           category="numeric")
def _cumulative_estimate(ctx, args, span):
    bounds, cs = args
    for arg, what in ((bounds, "boundaries"), (cs, "counts")):
        if not isinstance(arg.type, ListT) or not isinstance(arg.type.elem, Num):
            raise ctx.fail("E0202", f"the {what} of cumulative_estimate must be a list of numbers, but this is "
                           f"{arg.type}", arg.span)
        _public(ctx, arg, "cumulative_estimate", what)
    return Result(ListT(Num()), {})
