"""Privacy mechanisms (pure epsilon): laplace, exponential, noisy_max, above_threshold,
randomized_response.

Every mechanism takes an explicit public epsilon.  Its noise is calibrated to the sensitivity
the checker proved (`ctx.sensitivity`), and the same numbers are handed to the runtime in the
IR node's `info`: one calibration, decided once by the checker, read (never recomputed) by the
runtime.  A mechanism whose private input has proven sensitivity S, run with epsilon eps, is
(eps/S)-sensitive as a map into distributions (max-divergence), so its cost is
(eps/S) * distance(input): eps when the input moves by one row.

For the selection mechanisms and the sparse vector, the private input is what the public score
function captures from its context (`Instantiated.captured`); the candidate or query it is
applied to is a public constant.  Their evaluators, which draw the noise, are in
fuzzpy/runtime/kernels/mechanisms.py: checking never loads the samplers.  See
docs/mechanisms.md for the prose version of every rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

from ..hints import hint
from ..typesystem import ir as I
from ..typesystem.quadratic import inventory_of_release, linear_part, zcdp_of_pure
from ..typesystem.sens import INF, ONE, ZERO, Dist, d_add, d_scale, is_const
from ..typesystem.types import BOOL, NUM, Bool, Fuzzy, ListT, Num, Tensor, Type, Vector
from .declarations import Arg, Instantiated, Result, primitive
from .grid import grid_bits

# Accuracy statements are given at confidence 1 - BETA.
BETA = Fraction(1, 20)

_REF_EXACT = "Sampled exactly (Canonne, Kamath, Steinke 2020); see fuzzpy/runtime/noise.py."


# ---- public arguments -------------------------------------------------------------------------

def public_epsilon(ctx, arg: Arg, what: str = "epsilon") -> Fraction:
    """A mechanism's privacy parameter (epsilon, or a Gaussian's rho): a positive public constant."""
    if not arg.is_const or not isinstance(arg.type, Num):
        raise ctx.fail("E0209", f"{what} must be a public constant (a literal, a param, or arithmetic on them)",
                       arg.span)
    value = arg.const if type(arg.const) is Fraction else Fraction(arg.const)  # (a number's constant is one)
    if value <= 0:
        raise ctx.fail("E0213", f"{what} must be positive, got {value}", arg.span)
    return value


def public_list(ctx, arg: Arg, what: str, mech: str) -> Type:
    """The element type of a public, non-empty list (candidates, queries): a constant, or values
    released earlier (public by post-processing; the calibration depends only on the score)."""
    if not isinstance(arg.type, ListT):
        raise ctx.fail("E0202", f"{mech} expects a list of {what}, but this is {arg.type}", arg.span)
    if arg.dist and not arg.is_const:  # a constant is public whatever symbol it arrived through
        raise ctx.fail("E0209", f"the {what} of {mech} must be public (constants or released values)",
                       arg.span, "the list is public; private data enters only through the score function")
    if arg.is_const and len(arg.const) == 0:
        raise ctx.fail("E0213", f"{mech} needs at least one element in its list of {what}", arg.span)
    return arg.type.elem


def public_number(ctx, arg: Arg, what: str, mech: str) -> Fraction:
    if not isinstance(arg.type, Num):
        raise ctx.fail("E0202", f"the {what} of {mech} must be a number, but this is {arg.type}", arg.span)
    if not arg.is_const:
        raise ctx.fail("E0209", f"the {what} of {mech} must be a public constant (a literal or a param)", arg.span)
    return Fraction(arg.const)


def public_cutoff(ctx, arg: Arg, mech: str) -> int:
    c = public_number(ctx, arg, "cutoff", mech)
    if c.denominator != 1 or c < 1:
        raise ctx.fail("E0213", f"the cutoff of {mech} must be a positive whole number, got {c}", arg.span)
    return c.numerator


def score_function(ctx, fn: Arg, elem: Type, span, mech: str) -> Instantiated:
    """Check the score at the element type; its private input is what it captures."""
    inst = ctx.instantiate(fn, [elem], span, public=True)  # applied to public candidates only
    if not isinstance(inst.cod, Num):
        raise ctx.fail("E0202", f"the score function of {mech} must return a number, but it returns {inst.cod}",
                       fn.span)
    return inst


# ---- calibration: the one place where scales and costs are decided ----------------------------

# rule Mechanisms: noise of scale S/eps, cost (eps/S) times the input's distance
def charge(ctx, name: str, eps: Fraction, dist: Dist, dist_span, span, factor: Fraction = ONE,
           extra: Optional[dict] = None, sens: Optional[Fraction] = None) -> tuple[Fraction, Fraction, Dist]:
    """Proven sensitivity S of `dist`, scale factor*S/eps, cost (eps/S) * dist; recorded.

    `factor` is the mechanism's own constant (2 for the exponential mechanism's
    exp(eps*q/(2S)), for instance); the cost does not depend on it.  `sens`, when given, must
    be `ctx.sensitivity(dist, ...)` already computed by the caller."""
    dist = linear_part(dist)  # how far the input moves (rule Rho: shadow entries are costs)
    if sens is None:
        sens = ctx.sensitivity(dist, dist_span)
    if sens == 0:  # the input is public: nothing to hide, nothing charged
        scale, cost = ZERO, {}
    else:
        # (a factor 1: one division fewer; `is ONE` first spares Fraction's `==` on Fractions, an ABC check)
        scale = sens / eps if factor is ONE or factor == 1 else factor * sens / eps
        cost = d_scale(eps / sens, dist)
    ctx.record_mechanism(name, span, sens, eps if sens else ZERO, scale, cost, extra)
    return sens, scale, cost


def calibrate(ctx, name: str, eps: Fraction, arg: Arg, span, extra: dict | None = None):
    """Laplace's calibration: S proven for `arg`, scale S/eps, cost (eps/S) * distance."""
    return charge(ctx, name, eps, arg.dist, arg.span, span, ONE, extra)


# rule Mechanisms: a pure release costs its linear cost, plus its channel-z entries
def pure_release(cost: Dist, laplace_eps: Optional[Fraction] = None, moves: Optional[Dist] = None) -> Dist:
    """The distance of a pure-epsilon release: its linear cost, plus the same release seen in zCDP
    (the "z" shadow channel, rule Rho) for programs that also make Gaussian releases, plus its
    entry in the inventory (rule Inventory): counted as one scalar Laplace release of
    `laplace_eps` when it is one, on its input's `moves`; else as one release of its cost when
    that is on one symbol; otherwise its symbols are marked."""
    if not cost:
        return {}
    entry = inventory_of_release(laplace_eps, moves if moves is not None else cost, cost)
    return d_add(cost, zcdp_of_pure(cost), entry)


def _info(sens: Fraction, eps: Fraction, scale: Fraction, **more: Any) -> dict:
    # `epsilon` is the user's epsilon (the runtime needs it even when S = 0); `charged` is what
    # the checker charges per unit of distance.
    return {"sensitivity": sens, "epsilon": eps, "scale": scale, "charged": eps if sens else ZERO, **more}


# ---- accuracy statements (public: from the calibration alone) ---------------------------------

@dataclass(frozen=True)
class Accuracy:
    """A public statement about a release's error: `what <= bound`, with probability at least
    1 - beta (beta = 0: always)."""

    bound: Fraction
    beta: Fraction
    what: str

    def __str__(self) -> str:
        text = f"{self.what} <= {float(self.bound):.6g}"
        return text + (f" with probability >= {float(1 - self.beta):g}" if self.beta else "")


_SLACK = Fraction(1, 2**40)  # far above the rounding error of math.log / math.exp on doubles


def log_upper(x: Fraction) -> Fraction:
    """An exact upper bound on ln(x), x >= 1 (display only: accuracy, never noise or cost)."""
    return Fraction(math.log(float(x))) * (1 + _SLACK) + _SLACK


def _tail(scale: Fraction, beta: Fraction) -> Fraction:
    """|Laplace(scale)| <= scale * ln(1/beta) with probability 1 - beta (continuous-law tails)."""
    return scale * log_upper(1 / beta)


# ---- laplace ------------------------------------------------------------------------------------

# rule Vector: laplace refuses a vector: L2 does not bound L1
def _laplace_shape(ctx, arg: Arg):
    t = arg.type
    if isinstance(t, Vector):
        raise ctx.fail("E0202", f"laplace cannot release a vector ({t}): its distance is an L2 bound, and the "
                       "Laplace mechanism needs the L1 sensitivity, which can be sqrt(n) times larger", arg.span,
                       "L2 does not bound L1: release it with gaussian, or convert it explicitly with vtuple "
                       "(which costs sqrt(n)) and release the tuple with laplace")
    if isinstance(t, Num):
        return NUM
    if isinstance(t, Tensor) and all(isinstance(i, Num) for i in t.items):
        return Tensor(tuple(Num() for _ in t.items))
    raise ctx.fail("E0202", f"laplace expects a number or a tensor tuple of numbers, but this is {t}", arg.span,
                   *([hint("missing-sample")] if isinstance(t, Fuzzy) else
                     ["with-pairs (| |) measure the max, not the L1 sum the Laplace mechanism needs"]))


@primitive("laplace", ("eps", "x"), "(eps : num) -> num -o[eps/S] fuzzy num",
           "laplace eps x: x plus Laplace noise of scale S/eps, where S is the sensitivity the checker "
           "proved for x (a number, or a tensor tuple of numbers with L1 sensitivity S). Costs eps.",
           "Dwork, McSherry, Nissim, Smith 2006: Laplace noise of scale S/eps on an S-sensitive (L1) "
           "query is eps-DP. Sampled exactly on a fixed-point grid (Canonne, Kamath, Steinke 2020); "
           "see docs/mechanisms.md and fuzzpy/runtime/noise.py.",
           category="mechanism", is_mechanism=True)
def _laplace(ctx, args, span):
    eps_arg, x = args
    eps = public_epsilon(ctx, eps_arg)
    shape = _laplace_shape(ctx, x)
    sens, scale, cost = calibrate(ctx, "laplace", eps, x, span)
    scalar = eps if isinstance(shape, Num) else None  # a tuple's release is not a scalar Laplace pair
    counts = isinstance(x.ir, I.IPrim) and x.ir.name == "count"  # for its label (render/labels.py)
    released = _FUZZY_NUM if shape is NUM else Fuzzy(shape)  # (one type for every scalar release: kept hash)
    return Result(released, pure_release(cost, scalar, linear_part(x.dist)),
                  info=_info(sens, eps, scale, **({"counts": True} if counts else {})))


_FUZZY_NUM = Fuzzy(NUM)


# ---- gaussian (zCDP) ------------------------------------------------------------------------------

def _gaussian_shape(ctx, arg: Arg):
    """A number (its distance is its L1 and its L2 distance), a vector (`vec[n]`, whose distance
    is its L2 move), or a tensor tuple of numbers: a tensor's distance is the L1 norm of its
    moves, which bounds the L2 norm.  A with-pair (| |)
    measures the max, which does not bound the L2 norm: refused."""
    t = arg.type
    if isinstance(t, Num):
        return Num()
    if isinstance(t, Tensor) and all(isinstance(i, Num) for i in t.items):
        return Tensor(tuple(Num() for _ in t.items))
    if isinstance(t, Vector):  # its distance bounds its L2 move (rule Vector)
        return Vector(t.size)
    raise ctx.fail("E0202", f"gaussian expects a number, a vector or a tensor tuple of numbers, but this is {t}",
                   arg.span,
                   "with-pairs (| |) measure the max of their components' moves, which does not bound the L2 "
                   "norm the Gaussian mechanism is calibrated to")


def gaussian_cost(ctx, rho: Fraction, dist: Dist, sens: Fraction, span) -> Dist:
    """Rule Gauss: noise of standard deviation S/sqrt(2 rho) on an input moving by A.d costs
    (A.d)^2 / (2 sigma^2) = (rho/S^2) (A.d)^2 in zCDP, a Gaussian ("g") shadow cost lifted onto
    the input's symbols (rule Rho)."""
    if sens == 0:
        return {}
    return ctx.lift({"g": rho / sens ** 2}, dist, span)


# rule Gauss: rho a positive public constant, sigma^2 = S^2/(2 rho), channel-g cost
@primitive("gaussian", ("rho", "x"), "(rho : num) -> num -o fuzzy num   (costs rho in zCDP)",
           "gaussian rho x: x plus Gaussian noise of standard deviation S/sqrt(2 rho), where S is the "
           "L2 sensitivity the checker proved for x (a number, a vector vec[n], or a tensor tuple of "
           "numbers whose L1 sensitivity bounds the L2 one). Costs rho in zCDP; not pure epsilon: a program that "
           "uses it is reported in rho and in (epsilon, delta) at a delta you give.",
           "Bun & Steinke 2016 (Concentrated Differential Privacy), Proposition 1.6: Gaussian noise of "
           "variance S^2/(2 rho) on a query of L2 sensitivity S is rho-zCDP; group privacy at distance k "
           "costs k^2 rho (their Proposition 1.9), which the checker's quadratic costs carry (rule Rho in "
           "docs/soundness.md). Sampled exactly: the discrete Gaussian of Canonne, Kamath & Steinke 2020 "
           "on a fixed-point grid (docs/noise.md).",
           category="mechanism", is_mechanism=True)
def _gaussian(ctx, args, span):
    rho_arg, x = args
    rho = public_epsilon(ctx, rho_arg, "rho")
    shape = _gaussian_shape(ctx, x)
    dist = linear_part(x.dist)
    sens = ctx.sensitivity(dist, x.span)
    cost = gaussian_cost(ctx, rho, dist, sens, span)
    sigma2 = sens ** 2 / (2 * rho)
    sigma = _sqrt_upper(sigma2)
    dimension = len(shape.items) if isinstance(shape, Tensor) else shape.size if isinstance(shape, Vector) else 1
    ctx.record_mechanism("gaussian", span, sens, Fraction(0), sigma, cost,
                         {"rho": rho if sens else Fraction(0), "sigma2": sigma2, "dimension": dimension})
    info = {"sensitivity": sens, "rho": rho, "sigma": sigma, "sigma2": sigma2,
            "charged_rho": rho if sens else Fraction(0), "scale": sigma}
    return Result(Fuzzy(shape), cost, info=info)


def _sqrt_upper(x: Fraction) -> Fraction:
    """An exact upper bound on sqrt(x) (display and scale checks, never the noise itself)."""
    if x == 0:
        return Fraction(0)
    r = Fraction(math.sqrt(float(x)))
    while r * r < x:
        r *= 1 + _SLACK
    return r


# ---- exponential mechanism and report noisy max ------------------------------------------------

def _selection_rule(name: str, ctx, args, span) -> Result:
    """exponential / noisy_max: public candidates, a score whose captured input is S-sensitive."""
    eps_arg, cands, score = args
    eps = public_epsilon(ctx, eps_arg)
    elem = public_list(ctx, cands, "candidates", name)
    inst = score_function(ctx, score, elem, span, name)
    n = len(cands.const) if cands.is_const else None  # released candidates: known at run time
    sens, scale, cost = charge(ctx, name, eps, inst.captured, score.span, span, Fraction(2), {"candidates": n})
    return Result(Fuzzy(elem), pure_release(cost), info=_info(sens, eps, scale, candidates=n),
                  ir_args=[eps_arg.ir, cands.ir, inst.code])


def selection_accuracy(scale: Fraction, n: int, beta: Fraction = BETA) -> Fraction:
    """score(chosen) >= max score - scale * ln(n/beta) with probability >= 1 - beta.

    Exponential mechanism: Dwork & Roth 2014, Theorem 3.11 (scale = 2S/eps).  Report noisy max
    with Exponential(scale) noise: the chosen score plus its noise beats the best score, and
    max_i noise_i > scale*ln(n/beta) has probability <= n * beta/n."""
    return scale * log_upper(Fraction(n) / beta)


@primitive("exponential", ("eps", "candidates", "score"),
           "(eps : num) -> list 'c -> ('c -> num) -o[eps/S] fuzzy 'c",
           "exponential eps cs score: a candidate c of the public list cs, drawn with probability "
           "proportional to exp(eps * score c / (2S)), where S is the sensitivity of what score captures "
           "(its private input). Costs eps.",
           "McSherry & Talwar 2007 (Mechanism Design via Differential Privacy); Dwork & Roth 2014, "
           "Theorem 3.10: every score moves by at most S, so each probability changes by at most "
           "exp(eps/2) in the numerator and in the normaliser. " + _REF_EXACT,
           category="mechanism", is_mechanism=True)
def _exponential(ctx, args, span):
    return _selection_rule("exponential", ctx, args, span)


@primitive("noisy_max", ("eps", "candidates", "score"),
           "(eps : num) -> list 'c -> ('c -> num) -o[eps/S] fuzzy 'c",
           "noisy_max eps cs score: the candidate of the public list cs whose score plus Exponential "
           "noise of scale 2S/eps is largest (S: sensitivity of what score captures). Returns only the "
           "candidate, never its noisy score. Costs eps.",
           "Permute-and-flip with coins exp(-eps (max - score)/(2S)) is eps-DP (McKenna & Sheldon 2020, "
           "NeurIPS) and has exactly the law of report noisy max with Exponential(2S/eps) noise (Ding, Kifer, "
           "Saghaian, Steinke, Wang, Xiao, Zhang 2021); compare Dwork & Roth 2014, Claim 3.9. " + _REF_EXACT,
           category="mechanism", is_mechanism=True)
def _noisy_max(ctx, args, span):
    return _selection_rule("noisy_max", ctx, args, span)


# ---- sparse vector (AboveThreshold) -------------------------------------------------------------

def svt_scales(sens: Fraction, eps: Fraction, cutoff: int) -> tuple[Fraction, Fraction]:
    """Lyu, Su & Li 2017, Algorithm 1 with eps1 = eps2 = eps/2: the threshold's noise scale
    S/eps1 and each query's 2*cutoff*S/eps2 (fuzzpy.runtime.noise.above_threshold)."""
    return 2 * sens / eps, 4 * cutoff * sens / eps


def svt_accuracy(info: dict, n_queries: int, beta: Fraction = BETA) -> Fraction:
    """alpha with: every answered query that says True is >= threshold - alpha, every False is
    < threshold + alpha, with probability >= 1 - beta.

    Threshold noise within b1*ln(2/beta) + g and all query noises within b2*ln(2k/beta) + g
    (each event failing with probability <= beta/2; a discrete Laplace on step g has tails at
    most one step heavier than the continuous law), plus half a step of rounding on each side."""
    sens, eps = info["sensitivity"], info["epsilon"]
    if sens == 0 or n_queries == 0:
        return Fraction(0)
    b1, b2 = svt_scales(sens, eps, info["cutoff"])
    step = sens / 2 ** grid_bits(eps)  # noise.py's grid step
    return b1 * log_upper(2 / beta) + b2 * log_upper(2 * n_queries / beta) + 3 * step


@primitive("above_threshold", ("eps", "cutoff", "threshold", "queries", "score"),
           "(eps : num) -> (c : int) -> (t : num) -> list 'q -> ('q -> num) -o[eps/S] fuzzy (list bool)",
           "above_threshold eps c t qs score: the sparse vector technique. Answers, in order, whether "
           "score q is above the public threshold t for each public query q, and stops right after the "
           "c-th True. Threshold noise scale 2S/eps, query noise scale 4cS/eps (S: sensitivity of what "
           "score captures). Costs eps in total, however many queries are answered.",
           "Lyu, Su & Li 2017 (Understanding the Sparse Vector Technique for Differential Privacy, "
           "PVLDB 10(6)), Algorithm 1 with eps1 = eps2 = eps/2: Lap(S/eps1) on the "
           "threshold and Lap(2cS/eps2) on each query is eps-DP for queries of sensitivity S. "
           + _REF_EXACT,
           category="mechanism", is_mechanism=True)
def _above_threshold(ctx, args, span):
    eps_arg, cutoff_arg, threshold_arg, queries, score = args
    name = "above_threshold"
    eps = public_epsilon(ctx, eps_arg)
    cutoff = public_cutoff(ctx, cutoff_arg, name)
    threshold = public_number(ctx, threshold_arg, "threshold", name)
    elem = public_list(ctx, queries, "queries", name)
    inst = score_function(ctx, score, elem, span, name)
    sens = ctx.sensitivity(linear_part(inst.captured), score.span)
    query_scale = svt_scales(sens, eps, cutoff)[1]
    sens, scale, cost = charge(ctx, name, eps, inst.captured, score.span, span, Fraction(2),
                               {"cutoff": cutoff, "query_scale": query_scale}, sens)
    cost = svt_rounding_cost(ctx, linear_part(inst.captured), cost, eps, sens)
    info = _info(sens, eps, scale, cutoff=cutoff, threshold=threshold, query_scale=query_scale)
    return Result(Fuzzy(ListT(BOOL)), pure_release(cost), info=info,
                  ir_args=[eps_arg.ir, cutoff_arg.ir, threshold_arg.ir, queries.ir, inst.code])


def svt_rounding_cost(ctx, dist: Dist, cost: Dist, eps: Fraction, sens: Fraction) -> Dist:
    """The sparse vector rounds queries to the nearest point of a grid of step S/2^m (its proof
    needs whole-step shifts).  A symbol whose unit move is a whole number of steps costs exactly
    (eps/S) * c; otherwise rounding can add one step, so a symbol that only moves by whole units
    (tables, ints) is charged eps * 2^-m more per unit, and one that can move by fractions (a num
    parameter of a helper function) is charged infinity."""
    if sens == 0:
        return cost
    steps_per_unit = Fraction(2 ** grid_bits(eps)) / sens
    out: Dist = {}
    for s, c in cost.items():
        coef = dist.get(s, Fraction(0))
        if c == INF or not ctx.integral(s):
            out[s] = INF
        elif (coef * steps_per_unit).denominator == 1:
            out[s] = c
        else:
            out[s] = c + eps / 2 ** grid_bits(eps)
    return out


# ---- randomized response -------------------------------------------------------------------------

def rr_flip_upper(eps: Fraction) -> Fraction:
    """An upper bound on the flip probability 1/(1 + e^eps) (display only); beyond the float
    range of e^eps, e^-eps itself bounds it."""
    if eps > 700:
        return Fraction(1, 2 ** 1000)  # e^-eps < 2^-1000 here
    return 1 / (1 + Fraction(math.exp(float(eps))) * (1 - _SLACK))


def rr_cost(ctx, dist: Dist, eps: Fraction) -> Dist:
    """eps per unit of distance of every input b depends on, where that is sound.

    Whatever happens to its inputs, b takes one of two values, so the output's odds move by at
    most e^eps: the loss is eps * [the input moved], not eps * distance.  A finite coefficient
    means b cannot change at all (bools are infinitely apart), so eps * t over-charges.  An
    infinite one means b may flip for any move t > 0, and eps * t >= eps only for whole t
    (tables: distance 0, 1, 2, ...).  A symbol that may move by a fraction (a num parameter of
    a helper function) is charged infinity (`ctx.integral` tells which symbols are whole)."""
    cost: Dist = {}
    for s, c in dist.items():
        finite = is_const(c) and c != INF
        cost[s] = eps if finite or ctx.integral(s) else INF
    return cost


@primitive("randomized_response", ("eps", "b"), "(eps : num) -> bool -o[eps] fuzzy bool",
           "randomized_response eps b: b, kept with probability e^eps / (1 + e^eps) and flipped otherwise. "
           "Costs eps for each input b depends on, however strongly (a bool changes at most once).",
           "Warner 1965; Dwork & Roth 2014, section 3.2: the odds of any output change by at most e^eps "
           "between the two values of b. Neighbouring tables (distance >= 1 when they differ) change b "
           "at most once, so eps per unit of distance bounds the loss. Coins are exact Bernoulli draws "
           "(Canonne, Kamath, Steinke 2020).",
           category="mechanism", is_mechanism=True)
def _randomized_response(ctx, args, span):
    eps_arg, b = args
    eps = public_epsilon(ctx, eps_arg)
    if not isinstance(b.type, Bool):
        raise ctx.fail("E0202", f"randomized_response expects a bool, but this is {b.type}", b.span)
    cost = rr_cost(ctx, linear_part(b.dist), eps)
    sens = Fraction(1) if cost else Fraction(0)
    scale = 1 / eps  # the log-odds temperature: keep/flip odds are exp(1/scale)
    ctx.record_mechanism("randomized_response", span, sens, eps if cost else Fraction(0), scale, cost, None)
    return Result(Fuzzy(BOOL), pure_release(cost), info=_info(sens, eps, scale))
