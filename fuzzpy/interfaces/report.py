"""Render the checker's privacy report: text for people, JSON for tools, SARIF for code review."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

import typer

from ..checking.program import CheckReport, check_file
from ..checking.sens import INF
from ..diagnostics import Diagnostic, render
from .numbers import dumps, json_number, scientific
from .numbers import show as fmt_coef


def check_with_budget(path: Path, params: dict[str, str], entry: Optional[str],
                      budget: Optional[Fraction]) -> CheckReport:
    """Check one file; add E0401 when its epsilon exceeds the CLI budget or its own pragma."""
    report = check_file(path, params, entry)
    apply_budget(report, budget)
    return report


def apply_budget(report: CheckReport, configured: Optional[Fraction]) -> None:
    """The effective budget is the smaller of the configured one and the file's pragma; a
    well-typed program over it gets E0401 (used by the CLI and the language server).  A
    mechanism whose noise scale no run could release gets E0312."""
    given = [b for b in (configured, report.pragma_budget) if b is not None]
    report.budget = min(given) if given else None
    if report.ok:
        report.diagnostics.extend(scale_problems(report))
    if report.ok and report.entry is not None:
        over = over_budget(report, report.budget)
        if over is not None:
            report.diagnostics.append(over)


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


def over_budget(report: CheckReport, budget: Optional[Fraction]) -> Optional[Diagnostic]:
    if budget is None:
        return None
    if not report.is_pure:
        return needs_delta(report)
    eps = report.epsilon
    if eps != INF and eps <= budget:
        return None
    fn = next((f for f in report.functions if f.name == report.entry), None)
    per_input = ", ".join(f"{i.name}: {fmt_coef(i.epsilon)}" for i in report.inputs)
    notes = [f"privacy loss per private input: {per_input}"]
    for m in report.mechanisms[:10]:
        notes.append(f"{m.name} at {m.span} charges {fmt_coef(m.epsilon)} per use "
                     f"(sensitivity {fmt_coef(m.sensitivity)}, noise scale {fmt_coef(m.scale)})")
    return Diagnostic("E0401", f"{report.entry} has epsilon {fmt_coef(eps)}, but the budget is {fmt_coef(budget)}",
                      fn.span if fn else None, notes)


def needs_delta(report: CheckReport) -> Diagnostic:
    """A program with a Gaussian release is not pure epsilon-DP: a pure budget cannot admit it."""
    fn = next((f for f in report.functions if f.name == report.entry), None)
    gauss = [m for m in report.mechanisms if m.name == "gaussian"]
    notes = [f"gaussian at {m.span} costs rho {fmt_coef(m.extra.get('rho', 0))} in zCDP" for m in gauss[:5]]
    notes.append(f"its guarantee is rho-zCDP with rho = {fmt_coef(report.rho)}; stated as (epsilon, delta) it "
                 "needs a delta > 0, which this version cannot yet budget: use laplace for a pure epsilon")
    return Diagnostic("E0314", f"{report.entry} makes Gaussian releases, which are not pure epsilon-DP, but the "
                      f"budget is a pure epsilon", fn.span if fn else None, notes)


def exact(x: Any) -> Any:
    if x == INF:
        return "inf"
    return str(Fraction(x))


def number(x: Any) -> Any:
    """A JSON number, or null when it has no finite double (the `_exact` field is exact)."""
    return json_number(x)


def report_json(report: CheckReport) -> dict:
    return {
        "file": report.file,
        "ok": report.ok,
        "entry": report.entry,
        "epsilon": number(report.epsilon) if report.entry else None,
        "epsilon_exact": exact(report.epsilon) if report.entry else None,
        "delta": 0,
        "budget": number(report.budget) if report.budget is not None else None,
        "inputs": [{"name": i.name, "type": i.type, "epsilon": number(i.epsilon), "epsilon_exact": exact(i.epsilon)}
                   for i in report.inputs],
        "functions": [{"name": f.name, "type": f.type, "generic": f.generic,
                       "location": {"file": f.span.file, "line": f.span.line, "col": f.span.col}}
                      for f in report.functions],
        "mechanisms": [{"mechanism": m.name, "function": m.function,
                        "location": {"file": m.span.file, "line": m.span.line, "col": m.span.col},
                        "sensitivity": number(m.sensitivity), "sensitivity_exact": exact(m.sensitivity),
                        "epsilon": number(m.epsilon), "epsilon_exact": exact(m.epsilon),
                        "scale": number(m.scale), "scale_exact": exact(m.scale), **_extra(m.extra)}
                       for m in report.mechanisms],
        "params": {k: _plain(v) for k, v in report.params.items()},
        "diagnostics": [d.to_json() for d in report.diagnostics],
        "timings_ms": {k: round(v * 1000, 3) for k, v in report.timings.items()},
        "lp_solves": report.lp_solves,
    }


def _extra(extra: dict) -> dict:
    return {k: _plain(v) for k, v in extra.items()}


def _plain(v: Any) -> Any:
    if isinstance(v, Fraction):
        return json_number(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def print_json(reports: list[CheckReport]) -> None:
    if len(reports) == 1:
        typer.echo(dumps(report_json(reports[0]), indent=2))
    else:
        typer.echo(dumps({"ok": all(r.ok for r in reports), "files": [report_json(r) for r in reports]},
                         indent=2))


def print_text(report: CheckReport) -> None:
    for d in report.diagnostics:
        typer.echo(render(d, report.sources), err=True)
    status = "ok" if report.ok else f"{sum(d.severity == 'error' for d in report.diagnostics)} error(s)"
    typer.echo(f"{report.file}: {status}")
    own = [f for f in report.functions if f.span is None or f.span.file == report.file]
    if own:
        width = max(len(f.name) for f in own)
        for f in own:
            typer.echo(f"  {f.name.ljust(width)} : {f.type}")
    if report.entry and report.ok:
        per_input = ", ".join(f"{i.name} {fmt_coef(i.epsilon)}" for i in report.inputs)
        typer.echo(f"privacy: epsilon = {fmt_coef(report.epsilon)}, delta = 0  ({report.entry}; per input: {per_input})")
        if report.budget is not None:
            typer.echo(f"budget: {fmt_coef(report.budget)} (within budget)")
    if report.mechanisms and report.ok:
        typer.echo("mechanisms:")
        for m in report.mechanisms:
            typer.echo(f"  {m.span}  {m.name}: sensitivity {fmt_coef(m.sensitivity)}, epsilon {fmt_coef(m.epsilon)}, "
                       f"noise scale {fmt_coef(m.scale)}  (in {m.function})")


def print_sarif(reports: list[CheckReport]) -> None:
    from .sarif import sarif_log

    typer.echo(dumps(sarif_log(reports), indent=2))

