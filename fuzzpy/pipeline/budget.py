"""The budget stage: a checked program's guarantee at the delta asked for, compared with the
budgets of the run (docs/runtime.md).  Every interface applies budgets through
`apply_budget`, so a program is refused (E0401, E0314, E0312) the same way everywhere, before
anything is read or charged."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

from ..checking.reports import CheckReport
from ..diagnostics import Diagnostic
from ..primitives.units import SELECTIONS
from ..render.locations import relative_span
from ..render.numbers import scientific
from ..render.numbers import show as fmt_coef
from ..render.report import input_cost
from ..typesystem.sens import INF
from .guarantee import guarantee


@dataclass(frozen=True)
class Wording:
    """How an interface names the delta and the rho budget in its advice (docs: the command line
    says `--delta 1e-6`, the Python API `delta=1e-6`, the service `"delta": "1e-6"`)."""

    delta: str = "--delta 1e-6"
    rho: str = "--rho"


COMMAND_LINE = Wording()
PYTHON = Wording("delta=1e-6", "rho=")
SERVICE = Wording('"delta": "1e-6" in the request', "a dataset the curator capped in rho")


def check_with_budget(path: Path, params: dict[str, str], entry: Optional[str],
                      budget: Optional[Fraction], delta: Optional[Fraction] = None,
                      rho: Optional[Fraction] = None, use_cache: bool = False) -> CheckReport:
    """Check one file; add E0401 when it exceeds the CLI budget or its own pragma.  With
    `use_cache`, the check goes through the on-disk cache (fuzzpy/checking/cache.py)."""
    if use_cache:
        from ..checking.cache import cached_check_file

        report = cached_check_file(path, params, entry)
    else:
        from ..checking.program import check_file

        report = check_file(path, params, entry)
    apply_budget(report, budget, delta, rho)
    return report


def apply_budget(report: CheckReport, configured: Optional[Fraction], delta: Optional[Fraction] = None,
                 rho: Optional[Fraction] = None, pragma_delta: bool = True, wording: Wording = COMMAND_LINE) -> None:
    """The effective budget (and delta) is the smaller of the configured one and the file's
    pragma; the program's guarantee is computed at that delta; a well-typed program over a
    budget gets E0401 (E0314 when it needs a delta it was not given).  A mechanism whose noise
    scale no run could release gets E0312.  `pragma_delta=False` ignores the program's delta
    pragma: the curator service states a run in its dataset's notion, and a pure or rho
    dataset has no delta (docs/serve.md)."""
    report.wording = wording
    given = [b for b in (configured, report.pragma_budget) if b is not None]
    report.budget = min(given) if given else None
    deltas = [d for d in (delta, report.pragma_delta if pragma_delta else None) if d is not None]
    report.delta = min(deltas) if deltas else None
    report.rho_budget = rho
    if report.ok:
        report.diagnostics.extend(scale_problems(report))
    if report.ok and report.entry is not None:
        report.guarantee = guarantee(report, report.delta)
        report.diagnostics.extend(over_budget(report))


def scale_problems(report: CheckReport) -> list[Diagnostic]:
    """E0312 for each mechanism whose noise scale exceeds MAX_NOISE_SCALE.  The scale depends
    on public numbers only (sensitivity / epsilon), so this is known before any data is read,
    and `fuzzpy run` stops here, before its charge, rather than after it, in the output."""
    from ..runtime.grid import MAX_NOISE_SCALE, MAX_NOISE_SCALE_TEXT

    out = []
    for m in report.mechanisms:
        if m.name == "randomized_response" or not m.sensitivity:  # a bit: nothing to overflow
            continue
        scale = max(m.scale, m.extra.get("query_scale") or 0)
        if scale > MAX_NOISE_SCALE:
            out.append(Diagnostic(
                "E0312", f"the noise scale of this {m.name} is {scientific(Fraction(scale))}, more than "
                         f"fuzzpy can release (at most {MAX_NOISE_SCALE_TEXT})", m.span,
                [f"the scale is {'a multiple of ' if m.name != 'laplace' else ''}sensitivity / epsilon, here "
                 f"{fmt_coef(m.sensitivity)} / {fmt_coef(m.epsilon)}: raise epsilon or lower the sensitivity",
                 "the released values would not fit in a floating-point number; nothing is read or charged"]))
    return out


def over_budget(report: CheckReport) -> list[Diagnostic]:
    """E0401 for each budget the program's guarantee exceeds (epsilon, at the delta given when
    it is not pure; rho); E0314 for an epsilon budget on a program that needs a delta."""
    g, out = report.guarantee, []
    if report.budget is not None:
        if g.epsilon is None:
            out.append(needs_delta(report))
        elif g.epsilon == INF or g.epsilon > report.budget:
            at = "" if g.method == "pure" else f" at delta {fmt_coef(g.delta)}"
            out.append(_over(report, f"{report.entry} has epsilon {fmt_coef(g.epsilon)}{at}, but the budget is "
                                     f"{fmt_coef(report.budget)}"))
    if report.rho_budget is not None and (report.rho == INF or report.rho > report.rho_budget):
        out.append(_over(report, f"{report.entry} has rho {fmt_coef(report.rho)} (zCDP), but the rho budget is "
                                 f"{fmt_coef(report.rho_budget)}"))
    return out


def _over(report: CheckReport, message: str) -> Diagnostic:
    fn = next((f for f in report.functions if f.name == report.entry), None)
    per_input = ", ".join(f"{i.name}: {input_cost(i)}" for i in report.inputs)
    notes = [f"privacy loss per private input: {per_input}"]
    for m in report.mechanisms[:10]:
        cost = (f"costs rho {fmt_coef(m.extra.get('rho', 0))}" if m.name == "gaussian"
                else f"charges {fmt_coef(m.epsilon)}")
        notes.append(f"{m.name} at {relative_span(m.span, report.file)} {cost} per use "
                     f"(sensitivity {fmt_coef(m.sensitivity)}, noise scale {fmt_coef(m.scale)})")
    return Diagnostic("E0401", message, fn.span if fn else None, notes)


# rule Gauss: a Gaussian release is not pure epsilon-DP
def needs_delta(report: CheckReport) -> Diagnostic:
    """A program with a Gaussian release is not pure epsilon-DP: a pure budget cannot admit it."""
    fn = next((f for f in report.functions if f.name == report.entry), None)
    words = getattr(report, "wording", COMMAND_LINE)
    if report.approx_delta:  # rule Partition selection
        return selection_needs_delta(report, fn, words)
    gauss = [m for m in report.mechanisms if m.name == "gaussian"]
    notes = [f"gaussian at {relative_span(m.span, report.file)} costs rho {fmt_coef(m.extra.get('rho', 0))} in zCDP"
             for m in gauss[:5]]
    notes.append(f"its guarantee is rho-zCDP with rho = {fmt_coef(report.rho)}; an epsilon budget needs it "
                 f"stated as (epsilon, delta): give a delta ({words.delta}, or a '# fuzzpy: delta 1e-6' line), "
                 f"or budget it in zCDP with {words.rho}")
    return Diagnostic("E0314", f"{report.entry} makes Gaussian releases, which are not pure epsilon-DP: an "
                      f"epsilon budget needs a delta", fn.span if fn else None, notes)


# rule Partition selection: its delta needs a delta budget above it
def selection_needs_delta(report: CheckReport, fn: Any, words: Wording) -> Diagnostic:
    """A program that selects keys is (epsilon, delta)-DP only: a pure budget cannot admit it."""
    sites = [m for m in report.mechanisms if m.name in SELECTIONS]
    notes = [f"{m.name} at {relative_span(m.span, report.file)} costs epsilon {fmt_coef(m.epsilon)} and delta "
             f"{fmt_coef(m.extra.get('delta', 0))}" for m in sites[:5]]
    notes.append(f"its partition selections spend delta {fmt_coef(report.approx_delta)}: give a larger delta "
                 f"({words.delta}, or a '# fuzzpy: delta 1e-5' line) to state it as (epsilon, delta)")
    return Diagnostic("E0314", f"{report.entry} selects keys (partition selection), which is not pure epsilon-DP: an "
                      f"epsilon budget needs a delta", fn.span if fn else None, notes)
