"""The auditor's API: audit a Python sampler, a registry mechanism, or a checked program.

    audit_sampler(sample_fn, inputs=(a, b), claimed_eps=0.5)     # sample_fn(x, n, rng) -> n outputs
    audit_mechanism("laplace", epsilon=Fraction(1, 2))
    audit_mechanism("gaussian", rho=Fraction(1, 20), delta=Fraction(1, 10**5))
    audit_program(report, delta=...)                              # a CheckReport that is ok

A claim is an epsilon at a delta: delta = 0 for pure mechanisms and programs, and for zCDP ones
the epsilon that `claims.claimed_epsilon` gives for their rho at the delta asked for.  The lower
bound is then on the epsilon at that delta (stats.py).

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
    delta: Fraction = Fraction(0)        # the claim is (claimed, delta)-DP; 0: pure
    rho: Optional[Fraction] = None       # the zCDP rho the claim was converted from, if any

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
                  progress: Optional[Progress] = None, name: str = "sampler", delta: Any = 0,
                  **overrides: Any) -> AuditResult:
    """Audit any sampler on neighbouring inputs `inputs=(a, b)` (or several `pairs`) against the
    claim (claimed_eps, delta)-DP (delta = 0: pure).

    sample_fn(x, n, rng) must return n independent outputs of the mechanism on input x, drawing
    all randomness from the numpy Generator rng: a numeric array of shape (n,) or (n, k), or a
    list of released values.  Keyword overrides set AuditConfig fields (samples=..., seed=...)."""
    if claimed_eps is None:
        raise ValueError("claimed_eps is required")
    claimed, d = _fraction(claimed_eps), _fraction(delta)
    if not 0 <= d < 1:
        raise ValueError("delta must be in [0, 1)")
    given = list(pairs or []) + ([inputs] if inputs is not None else [])
    if not given:
        raise ValueError("give inputs=(a, b) or pairs=[(a, b), ...]")
    cfg = _config(config, overrides)
    ps = [Pair(a, b, claimed, f"{a!r} vs {b!r}", delta=d) for a, b in given]
    res = run_search(sample_fn, ps, cfg, progress)
    return AuditResult(name, claimed, cfg.confidence, cfg.samples, res.tested, res.stats, res.seed, delta=d)


DEFAULT_DELTA = Fraction(1, 10**5)  # --mechanism gaussian without --delta


def audit_mechanism(name: str, epsilon: Any = Fraction(1, 2), *, rho: Any = None, delta: Any = None,
                    exact: bool = False, config: Optional[AuditConfig] = None, progress: Optional[Progress] = None,
                    claimed: Any = None, **overrides: Any) -> AuditResult:
    """Audit one registry mechanism directly, calibrated by the checker, on canonical inputs.

    Pure mechanisms take `epsilon` and are audited at delta 0 (a `delta` is accepted and ignored:
    a pure claim holds at delta 0, the strictest test).  The Gaussian mechanism takes `rho` and
    `delta` (default 1e-5); its claim is claimed_epsilon(rho, 0, delta).  `claimed` replaces the
    claimed epsilon (tests use it to show the audit has power)."""
    from ..primitives.registry import all_primitives
    from .mechanisms import ZCDP_TARGETS, calibration_report, get_target

    prim = all_primitives().get(name)
    target = get_target(name)
    if prim is None or not prim.is_mechanism or target is None:
        known = ", ".join(mechanism_names())
        raise FuzzError(Diagnostic("E0801", f"'{name}' is not a mechanism the auditor knows; mechanisms: {known}"))
    zcdp = name in ZCDP_TARGETS
    if zcdp and rho is None:
        raise FuzzError(Diagnostic("E0701", f"the {name} mechanism is audited at a rho: give rho"))
    if not zcdp and rho is not None:
        raise FuzzError(Diagnostic("E0701", f"the {name} mechanism takes an epsilon, not a rho"))
    param = _fraction(rho if zcdp else epsilon)
    if param <= 0:
        raise FuzzError(Diagnostic("E0801", f"{'rho' if zcdp else 'epsilon'} must be positive"))
    info, report = calibration_report(target, param)
    d = _delta(delta, DEFAULT_DELTA)
    result = audit_target(target, info, report, d, claimed=claimed, exact=exact, config=config, progress=progress,
                          label=f"mechanism {name} ({'rho' if zcdp else 'epsilon'} {_show(param)})", **overrides)
    if not zcdp and delta is not None:
        result.notes.append(PURE_AT_ZERO)
    return result


def _grid_sigma(report: Any) -> Optional[Fraction]:
    """A lower bound on the grid sigma of the report's Gaussian releases (the accountant's
    Gaussian conversion needs it), from the public numbers the runtime plans them with."""
    from ..runtime.noise import grid_sigma_lower

    return grid_sigma_lower((m.sensitivity, m.extra["rho"], m.extra.get("dimension", 1))
                            for m in report.mechanisms if m.name == "gaussian")


PURE_AT_ZERO = ("the claim is pure epsilon-DP, so it is audited at delta 0, a stricter test than at the delta "
                "given")


def audit_target(target: Any, info: dict, report: Any, delta: Fraction, *, claimed: Any = None,
                 exact: bool = False, config: Optional[AuditConfig] = None, progress: Optional[Progress] = None,
                 label: Optional[str] = None, **overrides: Any) -> AuditResult:
    """Audit a mechanism `Target` sampled with `info` (the checker's, or, in tests, a deliberately
    wrong one) against the claim of its calibration `report` at `delta` (or `claimed`)."""
    from .claims import claimed_epsilon
    from .mechanisms import describe_target, mechanism_pairs, mechanism_sampler

    rho = gaussian_rho(report) if not report.is_pure else None
    claim = (claimed_epsilon(rho or 0, Fraction(report.epsilon), delta, _grid_sigma(report)) if claimed is None
             else _fraction(claimed))
    d = delta if rho is not None else Fraction(0)
    cfg = _config(config, overrides)
    res = run_search(mechanism_sampler(target, info, exact), mechanism_pairs(target, claim, d), cfg, progress)
    notes = [f"inputs: {describe_target(target)}"]
    if target.name in ("laplace", "gaussian"):
        exact_name, batch = {"laplace": ("laplace_release", "discrete Laplace"),
                             "gaussian": ("gaussian_release", "discrete Gaussian")}[target.name]
        notes.append("sampler: " + (f"the exact runtime sampler ({exact_name})" if exact else
                                    f"vectorised {batch} on {exact_name}'s grid (pass --exact for "
                                    "the exact sampler)"))
    if rho is not None:
        notes.append(f"claim: rho {_show(rho)} zCDP as (epsilon, delta) at delta {_show(d)}, by the certified "
                     "accountant (fuzzpy.accounting, through claims.claimed_epsilon)")
    return AuditResult(label or f"mechanism {target.name}", claim, cfg.confidence, cfg.samples,
                       res.tested, res.stats, res.seed, notes, d, rho)


def _delta(delta: Any, default: Optional[Fraction]) -> Fraction:
    """A delta in (0, 1) (usage error E0701 otherwise); `default` when none is given."""
    if delta is None:
        if default is None:
            raise FuzzError(Diagnostic("E0701", "a delta is needed"))
        return default
    d = _fraction(delta)
    if not 0 < d < 1:
        raise FuzzError(Diagnostic("E0701", f"delta must be strictly between 0 and 1, got {_show(d)}"))
    return d


def mechanism_names() -> list[str]:
    """Every registry mechanism with an audit target (tests/audit checks which ones lack one)."""
    from ..primitives.registry import all_primitives
    from .mechanisms import get_target

    return [p.name for p in all_primitives().values() if p.is_mechanism and get_target(p.name) is not None]


def audit_program(report: Any, *, delta: Any = None, config: Optional[AuditConfig] = None,
                  progress: Optional[Progress] = None, claimed: Any = None, max_pairs: int = 160,
                  exact: bool = False, batch: bool = True, **overrides: Any) -> AuditResult:
    """Audit a checked program (a CheckReport with .ok) on synthetic neighbouring tables.

    A pure program is audited at delta 0 (a `delta` given is not needed and not used); a program
    with Gaussian releases needs `delta` in (0, 1) (E0701 otherwise): its claim, and each table's,
    is claims.claimed_epsilon(rho of the Gaussian releases, pure epsilon, delta).  `claimed`
    replaces the claimed epsilon (tests use it to show the search finds a gap).  Samples are drawn
    many runs at once where the program allows it (audit/batched.py; `batch=False`: one
    interpreter run per sample), with vectorised Laplace, Gaussian and selection samplers unless
    `exact`."""
    from .claims import claimed_epsilon
    from .programs import program_pairs, program_sampler

    if not report.ok or report.entry_instance is None:
        raise FuzzError(report.diagnostics or [Diagnostic("E0801", "the program has no checked entry point")])
    pure = report.is_pure
    if not pure and delta is None:
        raise FuzzError(Diagnostic("E0701", "this program makes Gaussian releases: its claim is (epsilon, delta), so "
                                   "the audit needs a delta (--delta, in (0, 1))"))
    given = None if delta is None else _delta(delta, None)
    d = Fraction(0) if pure else given
    cfg = _config(config, overrides)
    if cfg.seed is None:
        cfg = replace(cfg, seed=random_seed())
    pair_rng = np.random.default_rng(np.random.SeedSequence(cfg.seed).spawn(1)[0])
    pairs = program_pairs(report, pair_rng, max_pairs, None if claimed is None else _fraction(claimed), d)
    res = run_search(program_sampler(report, batch=batch, exact=exact), pairs, cfg, progress)
    if claimed is not None:
        claim = _fraction(claimed)
    else:
        claim = Fraction(report.epsilon) if pure else claimed_epsilon(
            gaussian_rho(report), report.epsilon, d, _grid_sigma(report), sum(i.rho_pure for i in report.inputs))
    notes = [PROGRAM_SAMPLER_EXACT if exact else PROGRAM_SAMPLER]
    if len(report.inputs) > 1:
        notes.append("each pair changes one table; it is compared with that table's epsilon")
    if pure and given is not None:
        notes.append(PURE_AT_ZERO)
    rho = None if pure else gaussian_rho(report)
    if rho is not None:
        pure_part = f" and pure epsilon {_show(Fraction(report.epsilon))}" if report.epsilon else ""
        notes.append(f"claim: rho {_show(rho)} zCDP (the Gaussian releases){pure_part} as (epsilon, delta) at delta "
                     f"{_show(d)}, by the certified accountant (fuzzpy.accounting, through claims.claimed_epsilon)")
    return AuditResult(f"{report.file} ({report.entry})", claim, cfg.confidence, cfg.samples, res.tested,
                       res.stats, res.seed, notes, d, rho)


PROGRAM_SAMPLER = ("sampler: runs drawn many at once where the program allows it, with vectorised Laplace, "
                   "Gaussian, exponential and noisy_max samplers on the runtime's plans (pass --exact for the "
                   "exact samplers); otherwise one interpreter run per sample")
PROGRAM_SAMPLER_EXACT = ("sampler: runs drawn many at once where the program allows it, every mechanism with its "
                         "exact runtime sampler; otherwise one interpreter run per sample")


def gaussian_rho(report: Any) -> Fraction:
    """The zCDP rho of a program's Gaussian releases, summed over its private inputs."""
    return sum((Fraction(i.rho_gauss) for i in report.inputs), Fraction(0))


def _show(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"
