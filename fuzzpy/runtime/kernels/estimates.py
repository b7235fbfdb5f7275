"""Evaluators of the estimates `mean_estimate`, `rank_estimate`, `chosen_bound` (declared in
fuzzpy/primitives/estimates.py; docs/runtime.md, "Estimates").

Each computes its value exactly as the standard library computed it before the primitive
existed (the same folds, so released results are unchanged), finds the release(s) its
arguments came from by object identity (`Context.release_of`: additive mechanisms return fresh
float objects, a sparse vector a fresh tuple), and states what those releases' public accuracy
statements imply.  Everything read is public: the statements are post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

from ...primitives.registry import NO_TABLE, PER_LANE, kernel, lookup
from ...typesystem.keys import plain_key
from ..numbers import exact_scalar, fold_exact
from ..values import EstimateRecord

BETA = Fraction(1, 20)  # as every accuracy statement: 95%
ADDITIVE = ("laplace", "gaussian")


def _exact(v: Any) -> Optional[Fraction]:
    q = exact_scalar(v)
    return q if isinstance(q, Fraction) else None  # an infinity or NaN (a saturated release): no statement


def _fmt(x: Any) -> str:
    return f"{float(x):.6g}"


def mean_value(lo: Any, hi: Any, s: Any, n: Any) -> Any:
    """`if n < 1 then (lo + hi) / 2 else clip lo hi (s / n)`, with the interpreter's exact folds
    (the expression the standard library evaluated before this primitive existed)."""
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


def _mean_estimate(ctx, lo, hi, s, n):
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
    suffix = ""
    if rs is not rn and rs.user_name and rn.user_name:  # released by the user's own samples: `total / n`
        suffix = f" / {rn.user_name}"
    elif rs is rn:
        rs.role = "sum and count"
    else:
        rs.role, rn.role = "sum", "count"
    ctx.record_estimate(EstimateRecord("mean", value, low, high, BETA, words, sources, suffix,
                                       box is not None))
    return value


def interval_text(low: Fraction, high: Fraction) -> str:
    """[low, high] to 4 significant digits of the larger end, rounded outwards (never narrower)."""
    top = max(abs(low), abs(high))
    d = 0 if top == 0 else max(0, 3 - math.floor(math.log10(float(top))))
    k = 10 ** d
    lo_r, hi_r = Fraction(math.floor(low * k), k), Fraction(math.ceil(high * k), k)
    return f"[{float(lo_r):.{d}f}, {float(hi_r):.{d}f}]"


def _pct(p: Fraction) -> str:
    return f"{100 * float(p):g}%"


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


def _rank_estimate(ctx, q, c):
    find = getattr(ctx, "release_of", None)
    rec = find(c, ("exponential", "noisy_max")) if find else None
    qx = _exact(q)
    if rec is not None and qx is not None and getattr(rec.accuracy, "bound", None) is not None:
        below, above = grid_neighbours(rec.extra.get("candidates", ()), c)
        rec.accuracy = RankAccuracy(rec.accuracy.bound, rec.accuracy.beta, "rank error beyond the best candidate's",
                                    qx, c, below, above)
    return c


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


def _chosen_bound(ctx, slack, cands, answers):
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


def running_totals(bounds: Any, cs: Any) -> tuple:
    """stdlib/lists.fz `prefix_sums` of the first len(bounds) counts, with the interpreter's exact
    folds (the values the standard library computed before this primitive existed)."""
    add = lookup("add").fold
    totals, acc = [], Fraction(0)
    for c in list(cs)[:len(bounds)]:
        acc = fold_exact(add, [acc, c])
        totals.append(acc)
    return tuple(totals)


def _cumulative_estimate(ctx, bounds, cs):
    bounds, cs = tuple(bounds), tuple(cs)
    totals = running_totals(bounds, cs)
    find = getattr(ctx, "release_of", None)
    counts = cs[:len(bounds)]
    recs = [find(c, ADDITIVE, len(cs)) if find else None for c in counts]
    edges = [_exact(b) for b in bounds]
    exact = [_exact(c) for c in counts]
    if (not totals or None in recs or None in edges or None in exact or len(set(map(id, recs))) < len(recs)
            or any(a >= b for a, b in zip(edges, edges[1:])) or any("bound_at" not in r.extra for r in recs)):
        return totals  # not distinct released counts of increasing intervals: no statement
    share = BETA / len(recs)  # every count within its bound at once (union bound)
    errors = [Fraction(r.extra["bound_at"](share)) for r in recs]
    above = find(cs[len(bounds)], ADDITIVE, len(cs)) if len(cs) > len(bounds) else None
    for i, r in enumerate(recs):
        r.keys = (*r.keys, plain_key(interval_label(edges[i - 1] if i else None, edges[i]), "interval"))
    if above is not None and above not in recs:  # the count above the last boundary, not in the totals
        above.keys = (*above.keys, plain_key(f"[{_fmt(edges[-1])}, inf)", "interval"))
    err, total = Fraction(0), Fraction(0)
    for i, (edge, value) in enumerate(zip(edges, totals)):
        err, total = err + errors[i], total + exact[i]
        words = (f"{_pct(1 - BETA)} band (all {len(edges)} at once): {interval_text(total - err, total + err)} for "
                 f"the number of values below {_fmt(edge)}")
        ctx.record_estimate(EstimateRecord("cumulative", value, total - err, total + err, BETA, words,
                                           tuple(recs[:i + 1]), "", True, (plain_key(f"< {_fmt(edge)}", "interval"),)))
    return totals


def interval_label(low: Optional[Fraction], high: Fraction) -> str:
    """[low, high) as the key of an interval count (`(-inf, 30)` for the first)."""
    return f"{'(-inf' if low is None else '[' + _fmt(low)}, {_fmt(high)})"


kernel("mean_estimate", reference=_mean_estimate, context=True, batched=PER_LANE, dask=NO_TABLE)
kernel("rank_estimate", reference=_rank_estimate, context=True, batched=PER_LANE, dask=NO_TABLE)
kernel("chosen_bound", reference=_chosen_bound, context=True, batched=PER_LANE, dask=NO_TABLE)
kernel("cumulative_estimate", reference=_cumulative_estimate, context=True, batched=PER_LANE, dask=NO_TABLE)
