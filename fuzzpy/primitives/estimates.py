"""Estimates: values computed from releases, with their accuracy in the user's units
(docs/runtime.md, "Estimates"; the derivations are in docs/mechanisms.md, "Accuracy in the
user's units").

These primitives are post-processing: every argument must be public (released values, or
constants), so they cost nothing and the checker gives their result distance 0.  At run time
each one computes its value exactly as the standard library computed it before (the same
folds, so released results are unchanged), finds the release(s) its arguments came from by
object identity (`RunContext.release_of`: additive mechanisms return fresh float objects, a
sparse vector a fresh tuple), and states what those releases' public accuracy statements imply:

* `mean_estimate lo hi s n`: the ratio of a noisy clipped sum and a noisy count, with an interval
  for the mean of the clipped values (both intervals at confidence 1 - beta/2: union bound);
* `rank_estimate q c`: a quantile chosen by the exponential mechanism; its accuracy restated in
  ranks, with the neighbouring candidates (an interval in the data's units would need the data);
* `chosen_bound slack cands answers`: the clip bound a sparse vector chose, as a value, with
  what its answers say about the number of values above it.

Nothing here reads private data: the values, bounds and candidates are all public, so what is
shown is post-processing of the releases (no further privacy cost)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

from ..checking.types import ListT, Num
from .registry import Result, primitive

BETA = Fraction(1, 20)  # as every accuracy statement: 95%
ADDITIVE = ("laplace", "gaussian")


def _public(ctx, arg, name: str, what: str) -> None:
    if arg.dist and not arg.is_const:
        raise ctx.fail("E1801", f"{name} works on released values: its {what} must be public (a released value "
                       "or a constant), but this depends on private data", arg.span,
                       f"release the {what} with a mechanism first (sample x = laplace ...), then pass x")


def _constant(ctx, arg, name: str, what: str) -> Fraction:
    if not arg.is_const or not isinstance(arg.type, Num):
        raise ctx.fail("E1802", f"the {what} of {name} must be a public constant (a literal or a param)", arg.span)
    return Fraction(arg.const)


def _number(ctx, arg, name: str, what: str) -> None:
    if not isinstance(arg.type, Num):
        raise ctx.fail("E0202", f"the {what} of {name} must be a number, but this is {arg.type}", arg.span)


def _exact(v: Any) -> Optional[Fraction]:
    from ..runtime.numbers import exact_scalar

    q = exact_scalar(v)
    return q if isinstance(q, Fraction) else None  # an infinity or NaN (a saturated release): no statement


def _fmt(x: Any) -> str:
    return f"{float(x):.6g}"


# ---- mean_estimate ------------------------------------------------------------------------------

def mean_value(lo: Any, hi: Any, s: Any, n: Any) -> Any:
    """`if n < 1 then (lo + hi) / 2 else clip lo hi (s / n)`, with the interpreter's exact folds
    (the expression the standard library evaluated before this primitive existed)."""
    from ..runtime.numbers import fold_exact
    from .registry import lookup

    fold = {name: lookup(name).fold for name in ("lt", "add", "div", "clip")}
    if fold_exact(fold["lt"], [n, Fraction(1)]):
        return fold_exact(fold["div"], [fold_exact(fold["add"], [lo, hi]), Fraction(2)])
    return fold_exact(fold["clip"], [lo, hi, fold_exact(fold["div"], [s, n])])


def ratio_interval(lo: Fraction, hi: Fraction, s: Fraction, a: Fraction, n: Fraction,
                   b: Fraction) -> Optional[tuple[Fraction, Fraction]]:
    """The range of S/N over S in [s - a, s + a] and N in [n - b, n + b], within [lo, hi]; None
    when the count's interval reaches 0 (the ratio is then unbounded: only [lo, hi] holds).

    S/N is monotone in S and in N on each side (N > 0), so its extremes are at the corners."""
    n_lo, n_hi = n - b, n + b
    if n_lo <= 0:
        return None
    corners = [(s + da) / nn for da in (-a, a) for nn in (n_lo, n_hi)]
    low, high = max(lo, min(corners)), min(hi, max(corners))
    if low > high:  # the boxes miss [lo, hi]: possible only outside the 1 - beta event
        low = high = hi if low > hi else lo
    return low, high


def _run_mean(ctx, lo, hi, s, n):
    from ..runtime.values import EstimateRecord

    value = mean_value(lo, hi, s, n)
    find = getattr(ctx, "release_of", None)
    rs = find(s, ADDITIVE, 2) if find else None  # the sum and the count: the last two releases
    rn = find(n, ADDITIVE, 2) if find else None
    if rs is None or rn is None or "bound_at" not in rs.extra or "bound_at" not in rn.extra:
        return value  # not released values passed on unchanged: no statement
    sources = (rs,) if rs is rn else (rs, rn)
    share = BETA / len(sources)  # union bound over the distinct releases
    a, b = rs.extra["bound_at"](share), rn.extra["bound_at"](share)
    ex = [_exact(x) for x in (lo, hi, s, n)]
    if None in ex:
        return value
    lo_x, hi_x, s_x, n_x = ex
    box = ratio_interval(lo_x, hi_x, s_x, Fraction(a), n_x, Fraction(b))
    what = f"the mean of the values clipped to [{_fmt(lo_x)}, {_fmt(hi_x)}]"
    if box is None:
        low, high = lo_x, hi_x
        words = (f"unbounded: the count's {_pct(1 - share)} interval reaches 0, so the noise bounds nothing; "
                 f"{what} is in [{_fmt(lo_x)}, {_fmt(hi_x)}]")
    else:
        low, high = box
        words = f"{_pct(1 - BETA)} interval {interval_text(low, high)} for {what}"
    if rs is rn:
        rs.role = "sum and count"
    else:
        rs.role, rn.role = "sum", "count"
    ctx.record_estimate(EstimateRecord("mean", value, low, high, BETA, words, sources, "",
                                       box is not None))
    return value


def interval_text(low: Fraction, high: Fraction) -> str:
    """[low, high] to 4 significant digits of the larger end, rounded outwards (never narrower)."""
    import math

    top = max(abs(low), abs(high))
    d = 0 if top == 0 else max(0, 3 - math.floor(math.log10(float(top))))
    k = 10 ** d
    lo_r, hi_r = Fraction(math.floor(low * k), k), Fraction(math.ceil(high * k), k)
    return f"[{float(lo_r):.{d}f}, {float(hi_r):.{d}f}]"


def _pct(p: Fraction) -> str:
    return f"{100 * float(p):g}%"


@primitive("mean_estimate", ("lo", "hi", "s", "n"), "(lo : num) -> (hi : num) -> num -> num -> num[lo, hi]   (public arguments only)",
           "mean_estimate lo hi s n: the mean s / n of a released clipped sum s and a released count n, "
           "clamped into [lo, hi] (the midpoint when n < 1). Post-processing of released values: the run "
           "shows it with a 95% interval for the exact mean, from the two releases' accuracy.",
           "Post-processing: every argument is public (released values or constants), so the result is "
           "public and costs nothing (Dwork & Roth 2014, Proposition 2.1). The interval is the range of "
           "S/N over the two releases' intervals at 97.5% each (union bound); docs/mechanisms.md.",
           category="numeric", run=_run_mean, needs_context=True)
def _mean_estimate(ctx, args, span):
    lo, hi, s, n = args
    l, h = _constant(ctx, lo, "mean_estimate", "lower bound"), _constant(ctx, hi, "mean_estimate", "upper bound")
    if l > h:
        raise ctx.fail("E0213", "mean_estimate: lower bound is above upper bound", span)
    for arg, what in ((s, "sum"), (n, "count")):
        _number(ctx, arg, "mean_estimate", what)
        _public(ctx, arg, "mean_estimate", what)
    return Result(Num(l, h, False), {})  # the type `clip lo hi (s / n)` had before


# ---- rank_estimate ------------------------------------------------------------------------------

@dataclass(frozen=True)
class RankAccuracy:
    """The exponential mechanism's statement for a quantile score -|#(v < c) - q n|, in ranks:
    |#(v < c) - q n| <= (the best candidate's) + bound, with probability 1 - beta."""

    bound: Fraction
    beta: Fraction
    what: str
    q: Fraction
    chosen: Any
    below: Any   # the neighbouring candidates (None at an end of the grid)
    above: Any

    def describe(self) -> str:
        near = ", ".join(f"{side} {_fmt(c)}" for side, c in (("below", self.below), ("above", self.above))
                         if c is not None)
        return (f"rank error |#(values < {_fmt(self.chosen)}) - {_fmt(self.q)} n| at most the best candidate's "
                f"+ {float(self.bound):.4g} with {_pct(1 - self.beta)} probability"
                + (f"; next candidates: {near}" if near else ""))


def grid_neighbours(candidates: tuple, chosen: Any) -> tuple[Any, Any]:
    """The largest candidate below and the smallest above the chosen one (public: the grid)."""
    xs = [_exact(c) for c in candidates]
    c = _exact(chosen)
    if c is None or None in xs:
        return None, None
    below = [x for x in xs if x < c]
    above = [x for x in xs if x > c]
    return (max(below) if below else None), (min(above) if above else None)


def _run_rank(ctx, q, c):
    find = getattr(ctx, "release_of", None)
    rec = find(c, ("exponential", "noisy_max")) if find else None
    qx = _exact(q)
    if rec is not None and qx is not None and getattr(rec.accuracy, "bound", None) is not None:
        below, above = grid_neighbours(rec.extra.get("candidates", ()), c)
        rec.accuracy = RankAccuracy(rec.accuracy.bound, rec.accuracy.beta, "rank error beyond the best candidate's",
                                    qx, c, below, above)
    return c


@primitive("rank_estimate", ("q", "c"), "(q : num) -> 'c -> 'c   (public arguments only)",
           "rank_estimate q c: c, a quantile released by the exponential mechanism with stdlib's "
           "quantile_score q; the run states its accuracy in ranks (|#(values < c) - q n| beyond the best "
           "candidate's) with the neighbouring candidates, not in score units.",
           "Post-processing: both arguments are public, the result is c itself. The restatement is the "
           "mechanism's own bound (Dwork & Roth 2014, Theorem 3.11) for the score -|#(v < c) - q n|; an "
           "interval in the data's units would need the private data (docs/mechanisms.md).",
           category="numeric", run=_run_rank, needs_context=True)
def _rank_estimate(ctx, args, span):
    q, c = args
    _constant(ctx, q, "rank_estimate", "quantile level")
    _public(ctx, c, "rank_estimate", "candidate")
    return Result(c.type, {})


# ---- chosen_bound -------------------------------------------------------------------------------

def first_selected(cands: tuple, answers: tuple) -> tuple[Any, Optional[int]]:
    """stdlib/lists.fz first_selected: the first candidate but the last whose answer is true, else
    the last candidate; with the index of the true answer that chose it (None: the default)."""
    for i, c in enumerate(cands[:-1]):
        if i < len(answers) and answers[i]:
            return c, i
    if not cands:
        return Fraction(0), None
    last = len(cands) - 1
    return cands[-1], (last if last < len(answers) and answers[last] else None)


def _run_bound(ctx, slack, cands, answers):
    from ..runtime.values import EstimateRecord

    find = getattr(ctx, "release_of", None)
    rec = find(answers, ("above_threshold",)) if find else None  # before any copy: by identity
    cands, answers = tuple(cands), tuple(answers)
    value, index = first_selected(cands, answers)
    sx = _exact(slack)
    if rec is None or sx is None or rec.extra.get("threshold") != -sx or rec.extra.get("queries") != cands:
        return value  # not the answers of bound_answers over these candidates: no statement
    alpha = Fraction(rec.accuracy.bound)
    parts = []
    if index is not None:
        parts.append(f"at most {float(sx + alpha):.4g} values above it")
    else:
        parts.append("no candidate was answered yes: the largest one, with no statement about the values above it")
    last_no = (index if index is not None else len(answers)) - 1
    if last_no >= 0 and sx - alpha > 0:  # otherwise the no answers say nothing
        parts.append(f"more than {float(sx - alpha):.4g} above {_fmt(cands[last_no])}")
    words = f"chosen by the sparse vector: {', '.join(parts)}, with {_pct(1 - BETA)} probability"
    rec.role = "answers"
    ctx.record_estimate(EstimateRecord("clip bound", value, None, None, BETA, words, (rec,), ".bound"))
    return value


@primitive("chosen_bound", ("slack", "cands", "answers"), "(slack : num) -> list num -> list bool -> num   (public arguments only)",
           "chosen_bound slack cands answers: the first candidate bound answered true (the last candidate if "
           "none), for the answers of stdlib/adaptive.fz bound_answers with this slack; the run shows the "
           "bound as a value, with what the sparse vector says about the number of values above it.",
           "Post-processing: all arguments are public (constants and released answers), the result is one "
           "of the public candidates (Dwork & Roth 2014, Proposition 2.1); the statement is the sparse "
           "vector's accuracy (Lyu, Su & Li 2017) for the queries -#(v > c) and the threshold -slack.",
           category="numeric", run=_run_bound, needs_context=True)
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
