"""Evaluators of the mechanisms `laplace`, `gaussian`, `exponential`, `noisy_max`,
`above_threshold`, `randomized_response` (declared in fuzzpy/primitives/mechanisms.py).

Each reads the calibration the checker decided (the IR node's `info`: sensitivity, epsilon or
rho, scale) and never recomputes it.  A mechanism applied to its inputs is a
`MechanismDistribution`: sampling it draws fresh, exact noise (runtime/noise.py) and records the
release with its public accuracy statement.  Its `batch` and `per_run` samplers draw many runs
at once for the auditor only (audit/batched.py), never to release anything.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Optional

import numpy as np

from ...primitives.mechanisms import BETA, Accuracy, rr_flip_upper, selection_accuracy, svt_accuracy
from ...primitives.registry import NO_TABLE, kernel
from .. import batch as lanes
from .. import noise
from ..noise import (
    _is_scalar,
    above_threshold,
    above_threshold_batch,
    gaussian_release,
    gaussian_release_batch,
    gaussian_release_runs,
    laplace_release,
    laplace_release_batch,
    laplace_release_runs,
    randomized_response,
)
from ..ratios import ExactColumns
from ..state import RunFailure
from ..values import MechanismDistribution


def _laplace(ctx, eps, x):
    info = dict(ctx.info)

    def draw(sctx):
        rel = laplace_release(x, info["sensitivity"], info["epsilon"], sctx.rng)
        n = len(rel.values) if isinstance(rel.values, tuple) else 1
        acc = _laplace_statement(rel, n)
        sctx.record_release("laplace", rel.values, info["charged"], rel.scale, acc,
                            sensitivity=info["sensitivity"], bound_at=lambda beta: rel.accuracy(beta / n),
                            **({"counts": True} if info.get("counts") else {}))
        return rel.values

    def batch(rng, n):
        return _coordinates(lambda v: laplace_release_batch(v, info["sensitivity"], info["epsilon"], n, rng), x, n)

    def runs(xs, rng):
        return _coordinate_runs(lambda vs: laplace_release_runs(vs, info["sensitivity"], info["epsilon"], rng), xs)

    return MechanismDistribution("laplace", draw, batch, (("laplace", info["sensitivity"], info["epsilon"]), x, runs))


def _laplace_statement(rel: Any, n: int) -> Accuracy:
    """The accuracy statement of a Laplace release of n coordinates (a union bound: every
    coordinate within the bound at once).  A function of the public plan and n alone, so it is
    made once per plan (every node of a tree releases with one plan), keyed by integers."""
    g, s = rel.granularity, rel.grid_scale
    key = (g.numerator, g.denominator, s.numerator, s.denominator, n)
    acc = _LAPLACE_STATEMENTS.get(key)
    if acc is None:
        acc = Accuracy(rel.accuracy(BETA / n), BETA, "|noise| in every coordinate")
        if len(_LAPLACE_STATEMENTS) < 4096:  # a bound on what a long run's plans keep
            _LAPLACE_STATEMENTS[key] = acc
    return acc


_LAPLACE_STATEMENTS: dict = {}


def _coordinates(one: Callable[[Any], Any], x: Any, n: int) -> Optional[list]:
    """n draws of a number's or a tuple's release, each coordinate vectorised by `one` (the same
    plan for every coordinate, as laplace_release makes it); None for any other value."""
    if _is_scalar(x):
        return one(x).tolist()
    if isinstance(x, tuple) and x and all(_is_scalar(v) for v in x):
        cols = [one(v).tolist() for v in x]
        return list(zip(*cols))
    return None


def _coordinate_runs(many: Callable[[Any], Any], xs: Any) -> Optional[list]:
    """One release of each input of `xs` (all numbers, or all tuples of numbers of one length;
    or `ExactColumns`), each coordinate vectorised over the runs by `many`; None for anything
    else."""
    if type(xs) is ExactColumns:  # float64 columns, which the auditor keeps as arrays
        cols = [np.asarray(many(c)) for c in xs.columns]
        return cols[0] if xs.scalar else tuple(cols)
    nums = (int, float, Fraction)
    if all(type(x) in nums or _is_scalar(x) for x in xs):
        return many(xs).tolist()
    d = len(xs[0]) if xs and isinstance(xs[0], tuple) else 0
    if d and all(isinstance(x, tuple) and len(x) == d and all(type(v) in nums or _is_scalar(v) for v in x) for x in xs):
        return tuple(many([x[j] for x in xs]).tolist() for j in range(d))
    return None


def _gaussian(ctx, rho, x):
    info = dict(ctx.info)

    def draw(sctx):
        rel = gaussian_release(x, info["sensitivity"], info["rho"], sctx.rng)
        n = len(rel.values) if isinstance(rel.values, tuple) else 1
        acc = Accuracy(rel.joint_accuracy(BETA) if n > 1 else rel.accuracy(BETA), BETA,
                       "|noise| in every coordinate")
        sctx.record_release("gaussian", rel.values, Fraction(0), Fraction(rel.sigma), acc,
                            sensitivity=info["sensitivity"], rho=info["charged_rho"],
                            bound_at=lambda beta: rel.joint_accuracy(beta) if n > 1 else rel.accuracy(beta))
        return rel.values

    def batch(rng, n):
        if not (_is_scalar(x) or (isinstance(x, tuple) and x and all(_is_scalar(v) for v in x))):
            return None
        out = gaussian_release_batch(x, info["sensitivity"], info["rho"], n, rng)
        return out.tolist() if out.ndim == 1 else [tuple(row) for row in out.tolist()]

    def runs(xs, rng):
        try:  # numbers, or tuples of numbers of one length (the vectors' dimension)
            out = gaussian_release_runs(xs, info["sensitivity"], info["rho"], rng)
        except (TypeError, ValueError):
            return None
        if type(xs) is ExactColumns:  # float64 columns, which the auditor keeps as arrays
            return out if out.ndim == 1 else tuple(np.ascontiguousarray(col) for col in out.T)
        return out.tolist() if out.ndim == 1 else tuple(col.tolist() for col in out.T)

    return MechanismDistribution("gaussian", draw, batch, (("gaussian", info["sensitivity"], info["rho"]), x, runs))


def _selection(name: str, select_name: str):
    def run(ctx, eps, candidates, score):
        select = getattr(noise, select_name)
        info = dict(ctx.info)
        cands = list(candidates)
        if not cands:  # the list is public (released values), so this failure reveals nothing private
            raise RunFailure(f"{name} was given an empty list of candidates", ctx.span)
        scores = lanes.batched_scores(ctx, score, cands)  # every candidate at once when the score allows it
        if scores is None:
            scores = [ctx.call(score, c) for c in cands]

        def draw(sctx):
            i = select(scores, info["sensitivity"], info["epsilon"], sctx.rng)
            acc = Accuracy(selection_accuracy(info["scale"], len(cands)), BETA,
                           "best score - score of the chosen candidate")
            sctx.record_release(name, cands[i], info["charged"], info["scale"], acc,
                                sensitivity=info["sensitivity"], candidates=tuple(cands))
            return cands[i]  # only the candidate: its score and noise never leave

        def batch(rng, n):
            idx = noise.selection_batch(scores, info["sensitivity"], info["epsilon"], n, rng, name)
            return [cands[i] for i in idx.tolist()]

        return MechanismDistribution(name, draw, batch)

    return run


def _above_threshold(ctx, eps, cutoff, threshold, queries, score):
    info = dict(ctx.info)
    qs = list(queries)
    values = [ctx.call(score, q) for q in qs]

    def draw(sctx):
        answers = tuple(above_threshold(values, info["threshold"], info["sensitivity"], info["epsilon"],
                                        info["cutoff"], sctx.rng))
        acc = Accuracy(svt_accuracy(info, len(qs)), BETA, "distance of a wrong answer's score from the threshold")
        sctx.record_release("above_threshold", answers, info["charged"], info["scale"], acc,
                            sensitivity=info["sensitivity"], query_scale=info["query_scale"],
                            cutoff=info["cutoff"], threshold=info["threshold"], queries=tuple(qs))
        return answers

    def batch(rng, n):
        try:
            return above_threshold_batch(values, info["threshold"], info["sensitivity"], info["epsilon"],
                                         info["cutoff"], n, rng)
        except ValueError:  # beyond the batch sampler's range: the exact sampler, once per run
            return None

    return MechanismDistribution("above_threshold", draw, batch)


def _randomized_response(ctx, eps, b):
    info = dict(ctx.info)

    def draw(sctx):
        out = randomized_response(bool(b), info["epsilon"], sctx.rng)
        acc = Accuracy(rr_flip_upper(info["epsilon"]), Fraction(0), "probability that the bit was flipped")
        sctx.record_release("randomized_response", out, info["charged"], info["scale"], acc,
                            sensitivity=info["sensitivity"])
        return out

    return MechanismDistribution("randomized_response", draw)


# On lane values every mechanism builds one distribution per lane, or one drawn for all lanes at
# once when only its input differs between them; only the auditor's sampler evaluates a
# mechanism on lanes (batch.mechanism_on_lanes).
for _name, _run in [("laplace", _laplace), ("gaussian", _gaussian),
                    ("exponential", _selection("exponential", "exponential_mechanism")),
                    ("noisy_max", _selection("noisy_max", "report_noisy_max")),
                    ("above_threshold", _above_threshold), ("randomized_response", _randomized_response)]:
    kernel(_name, reference=_run, context=True, batched=lanes.mechanism_on_lanes, dask=NO_TABLE)
