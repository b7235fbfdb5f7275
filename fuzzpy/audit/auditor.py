"""The auditor's API: audit a Python sampler, a registry mechanism, or a checked program.

    audit_sampler(sample_fn, inputs=(a, b), claimed_eps=0.5)     # sample_fn(x, n, rng) -> n outputs
    audit_mechanism("laplace", epsilon=Fraction(1, 2))
    audit_program(report)                                         # a CheckReport that is ok

Each returns an `AuditResult`: the claimed epsilon, the largest lower bound on the true epsilon
found (valid at the stated confidence, jointly over every event tested), its witness, and a
verdict.  A lower bound above the claim is a violation; anything else only means that none was
found at this sample size: an audit never shows that something is private.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Optional, Sequence

import numpy as np

from ..diagnostics import Diagnostic, FuzzError
from .search import AuditConfig, Pair, Progress, Sampler, SearchStats, Tested, random_seed, run_search

VIOLATION = "violation found"
NO_VIOLATION = "no violation found at this sample size"


@dataclass
class AuditResult:
    target: str
    claimed: Fraction
    confidence: float
    samples: int                 # fresh samples per side of each validated pair
    tested: list[Tested]
    stats: SearchStats
    seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> Optional[Tested]:
        """The tested candidate furthest above its claim (the witness)."""
        finite = [t for t in self.tested if t.lower_bound > -math.inf]
        return max(finite, key=lambda t: t.excess) if finite else None

    @property
    def lower_bound(self) -> float:
        """The largest lower bound found, at least 0 (every mechanism has epsilon >= 0).  With
        several tables, pairs have different claims: this is the largest bound, while `best`
        is the test closest to (or furthest beyond) its own claim."""
        return max([0.0] + [t.lower_bound for t in self.tested])

    @property
    def violation(self) -> bool:
        return any(t.lower_bound > float(t.pair.claimed) for t in self.tested)

    @property
    def verdict(self) -> str:
        return VIOLATION if self.violation else NO_VIOLATION

    @property
    def tests(self) -> int:
        return len(self.tested)


def _config(config: Optional[AuditConfig], overrides: dict) -> AuditConfig:
    base = config or AuditConfig()
    return replace(base, **overrides) if overrides else base


def _fraction(x: Any) -> Fraction:
    if isinstance(x, float):
        return Fraction(str(x))  # 0.1 means one tenth, not the nearest double
    return Fraction(x)


def audit_sampler(sample_fn: Sampler, inputs: Optional[tuple[Any, Any]] = None, claimed_eps: Any = None, *,
                  pairs: Optional[Sequence[tuple[Any, Any]]] = None, config: Optional[AuditConfig] = None,
                  progress: Optional[Progress] = None, name: str = "sampler", **overrides: Any) -> AuditResult:
    """Audit any sampler on neighbouring inputs `inputs=(a, b)` (or several `pairs`).

    sample_fn(x, n, rng) must return n independent outputs of the mechanism on input x, drawing
    all randomness from the numpy Generator rng: a numeric array of shape (n,) or (n, k), or a
    list of released values.  Keyword overrides set AuditConfig fields (samples=..., seed=...)."""
    if claimed_eps is None:
        raise ValueError("claimed_eps is required")
    claimed = _fraction(claimed_eps)
    given = list(pairs or []) + ([inputs] if inputs is not None else [])
    if not given:
        raise ValueError("give inputs=(a, b) or pairs=[(a, b), ...]")
    cfg = _config(config, overrides)
    ps = [Pair(a, b, claimed, f"{a!r} vs {b!r}") for a, b in given]
    res = run_search(sample_fn, ps, cfg, progress)
    return AuditResult(name, claimed, cfg.confidence, cfg.samples, res.tested, res.stats, res.seed)


def audit_mechanism(name: str, epsilon: Any = Fraction(1, 2), *, exact: bool = False,
                    config: Optional[AuditConfig] = None, progress: Optional[Progress] = None,
                    claimed: Any = None, **overrides: Any) -> AuditResult:
    """Audit one registry mechanism directly, calibrated by the checker, on canonical inputs.

    `claimed` replaces the checker's epsilon (tests use it to show the audit has power)."""
    from ..primitives.registry import all_primitives
    from .mechanisms import calibration, describe_inputs, get_target, mechanism_pairs, mechanism_sampler

    prim = all_primitives().get(name)
    target = get_target(name)
    if prim is None or not prim.is_mechanism or target is None:
        known = ", ".join(mechanism_names())
        raise FuzzError(Diagnostic("E0801", f"'{name}' is not a mechanism the auditor knows; mechanisms: {known}"))
    eps = _fraction(epsilon)
    if eps <= 0:
        raise FuzzError(Diagnostic("E0801", "epsilon must be positive"))
    info, proven = calibration(target, eps)
    claimed = proven if claimed is None else _fraction(claimed)
    cfg = _config(config, overrides)
    res = run_search(mechanism_sampler(target, info, exact), mechanism_pairs(target, claimed), cfg, progress)
    notes = [f"inputs: {describe_inputs(name)}"]
    if name == "laplace":
        notes.append("sampler: " + ("the exact runtime sampler (laplace_release)" if exact else
                                    "vectorised discrete Laplace on laplace_release's grid (pass --exact for "
                                    "the exact sampler)"))
    return AuditResult(f"mechanism {name} (epsilon {_show(eps)})", claimed, cfg.confidence, cfg.samples,
                       res.tested, res.stats, res.seed, notes)


def mechanism_names() -> list[str]:
    """Every registry mechanism with an audit target (tests/audit checks which ones lack one)."""
    from ..primitives.registry import all_primitives

    from .mechanisms import get_target

    return [p.name for p in all_primitives().values() if p.is_mechanism and get_target(p.name) is not None]


def audit_program(report: Any, *, config: Optional[AuditConfig] = None, progress: Optional[Progress] = None,
                  claimed: Any = None, max_pairs: int = 160, **overrides: Any) -> AuditResult:
    """Audit a checked program (a CheckReport with .ok) on synthetic neighbouring tables.

    `claimed` replaces the checker's epsilon (tests use it to show the search finds a gap)."""
    from .programs import program_pairs, program_sampler

    if not report.ok or report.entry_instance is None:
        raise FuzzError(report.diagnostics or [Diagnostic("E0801", "the program has no checked entry point")])
    cfg = _config(config, overrides)
    if cfg.seed is None:
        cfg = replace(cfg, seed=random_seed())
    pair_rng = np.random.default_rng(np.random.SeedSequence(cfg.seed).spawn(1)[0])
    pairs = program_pairs(report, pair_rng, max_pairs, None if claimed is None else _fraction(claimed))
    res = run_search(program_sampler(report), pairs, cfg, progress)
    claim = _fraction(claimed) if claimed is not None else Fraction(report.epsilon)
    notes = []
    if len(report.inputs) > 1:
        notes.append("each pair changes one table; it is compared with that table's epsilon")
    return AuditResult(f"{report.file} ({report.entry})", claim, cfg.confidence, cfg.samples, res.tested,
                       res.stats, res.seed, notes)


def _show(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"
