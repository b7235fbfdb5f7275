"""Mechanism-level audit targets: every registry mechanism on canonical neighbouring inputs.

The calibration comes from the checker: a one-line program using the mechanism on a 1-sensitive
argument is checked, and the `info` its typing rule wrote into the IR (sensitivity, epsilon,
scale, cutoff, threshold) is handed to the registry's runtime, exactly as the interpreter does.
The inputs are the runtime arguments the private data determines (a count, the score vector,
the query answers, the bit), at neighbouring values allowed by sensitivity 1: worst cases of the
mechanism's guarantee, not only those a particular program can produce.

Sampling goes through the registry runtime (`Primitive.run(ctx, ...).sample(ctx)`), i.e. the
exact pure-Python samplers.  Laplace also has a vectorised path (the default): the same plan
(`plan_laplace`, the same grid rounding) with `sample_discrete_laplace_batch`, which has the
same law up to floating point in numpy's geometric sampler (a check of the calibration, not of
the exact sampler; `exact=True` checks the sampler too).  The Gaussian mechanism likewise:
`gaussian_release_batch` (same plan as `gaussian_release`, numpy's discrete Gaussian) by
default, the exact `gaussian_release` with `exact=True`.

The Gaussian target's parameter is rho (the body's EPS stands for it), and its claim is the
epsilon at a delta that `claims.claimed_epsilon` gives for the rho the checker proved.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from fractions import Fraction
from typing import Any, Callable, Optional

import numpy as np

from ..diagnostics import Diagnostic, FuzzError
from ..typesystem import ir as I
from .search import Pair, Sampler

SCHEMA = 'schema T { x : num[0, 10], k : cat{"a", "b", "c"} }\n'
CANDIDATES = ("a", "b", "c")
THRESHOLD = "0.5"


@dataclass(frozen=True)
class Target:
    """How to audit one mechanism: the program that calibrates it, the runtime arguments for a
    private input x, and the neighbouring inputs."""

    name: str
    body: str                                   # uses EPS for the epsilon
    args: Callable[[Fraction, Any], tuple]      # (epsilon, private input) -> runtime arguments
    pairs: tuple[tuple[Any, Any], ...]
    output: str = "list"                        # "float", "bool" or "list"
    notes: tuple[str, ...] = field(default_factory=tuple)


def vector_or_float(x: Any) -> Any:
    return tuple(float(v) for v in x) if isinstance(x, tuple) else float(x)


def _scores(x: tuple) -> Callable[[Any], float]:
    table = dict(zip(CANDIDATES, x))
    return lambda c: float(table[c])


def _answers(x: tuple) -> Callable[[Any], float]:
    return lambda q: float(x[int(q)])


_SELECT = '{name} EPS ["a", "b", "c"] (fun c -> count (filter (fun r -> r.k == c) db))'
_SCORE_PAIRS = (((0, 0, 0), (1, 0, 0)), ((1, 0, 0), (0, 1, 1)))

TARGETS: dict[str, Target] = {
    "laplace": Target(
        "laplace", "laplace EPS (count db)", lambda eps, x: (eps, float(x)), ((0, 1),), "float"),
    "exponential": Target(
        "exponential", _SELECT.format(name="exponential"), lambda eps, x: (eps, CANDIDATES, _scores(x)),
        _SCORE_PAIRS),
    "noisy_max": Target(
        "noisy_max", _SELECT.format(name="noisy_max"), lambda eps, x: (eps, CANDIDATES, _scores(x)),
        _SCORE_PAIRS),
    "above_threshold": Target(
        "above_threshold",
        f"above_threshold EPS 1 {THRESHOLD} [0, 1, 2, 3, 4] (fun q -> count (filter (fun r -> r.x >= q) db))",
        lambda eps, x: (eps, 1, float(Fraction(THRESHOLD)), tuple(range(len(x))), _answers(x)),
        # A run of Falses then one True, against its mirror: the shape of the SVT proof's worst case.
        (((1, 1, 1, 1, 0), (0, 0, 0, 0, 1)), ((0, 1, 0, 1, 0), (1, 0, 1, 0, 1)))),
    "randomized_response": Target(
        "randomized_response", "randomized_response EPS (count db > 0)", lambda eps, x: (eps, bool(x)),
        ((False, True),), "bool"),
    # EPS is rho here: the Gaussian mechanism's parameter.
    "gaussian": Target(
        "gaussian", "gaussian EPS (count db)", lambda rho, x: (rho, vector_or_float(x)), ((0, 1),), "float"),
}

ZCDP_TARGETS = frozenset({"gaussian"})  # targets whose parameter is rho and whose claim needs a delta


class _DirectContext:
    """The RunContext the interpreter would give a mechanism; releases are not kept."""

    __slots__ = ("info", "span", "rng")

    def __init__(self, info: dict, rng: Any):
        self.info, self.span, self.rng = info, None, rng

    def call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def vectorised(self, fn: Any) -> Any:
        return fn

    def record_release(self, *args: Any, **kw: Any) -> None:
        pass


def calibration(target: Target, epsilon: Fraction) -> tuple[dict, Fraction]:
    """The checker's `info` for the target's mechanism call, and the program's epsilon."""
    info, report = calibration_report(target, epsilon)
    return info, Fraction(report.epsilon)


def calibration_report(target: Target, param: Fraction) -> tuple[dict, Any]:
    """The checker's `info` for the target's mechanism call (its parameter, epsilon or rho, set
    to `param`), and the calibration program's CheckReport (its epsilon, rho)."""
    from ..checking.program import check_source

    eps = f"({param.numerator} / {param.denominator})"
    body = target.body.replace("EPS", eps)
    src = SCHEMA + f"function main (db : bag T) : fuzzy {result_type(target)} {{ {body} }}"
    report = check_source(src, f"<audit {target.name}>")
    if not report.ok:
        raise FuzzError(Diagnostic("E0801", f"the {target.name} calibration program does not check: "
                                   + "; ".join(d.message for d in report.diagnostics)))
    infos = _mechanism_infos(report.entry_instance.body, target.name)
    if len(infos) != 1:
        raise FuzzError(Diagnostic("E0801", f"cannot find the {target.name} call in its calibration program"))
    return infos[0], report


def result_type(target: Target) -> str:
    """The calibration program's result type: a vector target (pairs of tuples) gives a tensor."""
    if target.name in ("laplace", "gaussian"):
        x = target.pairs[0][0]
        return "(" + ", ".join(["num"] * len(x)) + ")" if isinstance(x, tuple) else "num"
    return {"above_threshold": "(list bool)", "randomized_response": "bool"}.get(target.name, "string")


def _mechanism_infos(node: Any, name: str) -> list[dict]:
    found: list[dict] = []

    def walk(x: Any) -> None:
        if isinstance(x, I.IPrim) and x.name == name:
            found.append(dict(x.info))
        if is_dataclass(x) and not isinstance(x, (type, I.Instance)):
            for f in fields(x):
                walk(getattr(x, f.name))
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)

    walk(node)
    return found


def mechanism_sampler(target: Target, info: dict, exact: bool) -> Sampler:
    """sample(x, n, rng): n outputs of the mechanism on private input x."""
    if target.name == "laplace" and not exact:
        return _laplace_batch(info)
    if target.name == "gaussian" and not exact:
        return _gaussian_batch(info)
    from ..primitives.registry import lookup
    from ..runtime import kernels  # noqa: F401 - registers the mechanisms' evaluators (`prim.run`)
    from ..runtime.samplers import RandomSource

    prim = lookup(target.name)
    if prim is None or prim.run is None:
        raise FuzzError(Diagnostic("E0801", f"mechanism {target.name} has no runtime"))
    eps = info["rho"] if target.name in ZCDP_TARGETS else info["epsilon"]

    def sample(x: Any, n: int, rng: np.random.Generator) -> Any:
        ctx = _DirectContext(info, RandomSource.seeded(int(rng.integers(2**63))))
        dist = prim.run(ctx, *target.args(eps, x))
        out = [dist.sample(ctx) for _ in range(n)]
        if target.output == "float":
            return np.array(out, dtype=np.float64)
        if target.output == "bool":
            return np.array(out, dtype=bool)
        return out

    return sample


def _laplace_batch(info: dict) -> Sampler:
    """laplace_release's own vectorised twin (same plan, random rounding, discrete Laplace)."""
    from ..runtime.noise import laplace_release_batch
    from ..runtime.samplers import RandomSource

    def sample(x: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        source = RandomSource.seeded(int(rng.integers(2**63)))
        return laplace_release_batch(x, info["sensitivity"], info["epsilon"], n, source)

    return sample


def _gaussian_batch(info: dict) -> Sampler:
    """gaussian_release's own vectorised twin (same plan for the input's dimension, random
    rounding, discrete Gaussian noise): shape (n,) for a number, (n, d) for a d-tuple."""
    from ..runtime.noise import gaussian_release_batch
    from ..runtime.samplers import RandomSource

    def sample(x: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        source = RandomSource.seeded(int(rng.integers(2**63)))
        return gaussian_release_batch(x, info["sensitivity"], info["rho"], n, source)

    return sample


def mechanism_pairs(target: Target, claimed: Fraction, delta: Fraction = Fraction(0)) -> list[Pair]:
    return [Pair(a, b, claimed, f"{target.name}: {_text(a)} vs {_text(b)}", None, _text, delta)
            for a, b in target.pairs]


def _text(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, tuple):
        return "(" + ", ".join(_text(v) for v in x) + ")"
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


def describe_inputs(name: str) -> str:
    return describe_target(TARGETS[name])


def describe_target(t: Target) -> str:
    vector = isinstance(t.pairs[0][0], tuple) and t.name in ("laplace", "gaussian")
    what = "the counts" if vector else {
        "laplace": "the count", "exponential": "the scores of (a, b, c)", "noisy_max": "the scores of (a, b, c)",
        "above_threshold": f"the answers to 5 queries (threshold {THRESHOLD}, cutoff 1)",
        "randomized_response": "the bit", "gaussian": "the count"}.get(t.name, "the input")
    return f"{what}: " + ", ".join(f"{_text(a)} vs {_text(b)}" for a, b in t.pairs)


def get_target(name: str) -> Optional[Target]:
    return TARGETS.get(name)
