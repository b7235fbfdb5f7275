"""Render the checker's privacy report: text for people, JSON for tools, SARIF for code review."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

from ..checking.reports import CheckReport
from ..checking.sens import INF
from ..diagnostics import Diagnostic, render
from ..hints import shown_span
from .checkcmd import echo
from .locations import relative_span
from .numbers import dumps, json_number, scientific
from .numbers import show as fmt_coef


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
                 rho: Optional[Fraction] = None) -> None:
    """The effective budget (and delta) is the smaller of the configured one and the file's
    pragma; the program's guarantee is computed at that delta; a well-typed program over a
    budget gets E0401 (E0314 when it needs a delta it was not given).  Used by the CLI and the
    language server.  A mechanism whose noise scale no run could release gets E0312."""
    given = [b for b in (configured, report.pragma_budget) if b is not None]
    report.budget = min(given) if given else None
    deltas = [d for d in (delta, report.pragma_delta) if d is not None]
    report.delta = min(deltas) if deltas else None
    report.rho_budget = rho
    if report.ok:
        report.diagnostics.extend(scale_problems(report))
    if report.ok and report.entry is not None:
        from .guarantee import guarantee

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
    per_input = ", ".join(f"{i.name}: {_input_cost(i)}" for i in report.inputs)
    notes = [f"privacy loss per private input: {per_input}"]
    for m in report.mechanisms[:10]:
        cost = (f"costs rho {fmt_coef(m.extra.get('rho', 0))}" if m.name == "gaussian"
                else f"charges {fmt_coef(m.epsilon)}")
        notes.append(f"{m.name} at {relative_span(m.span, report.file)} {cost} per use "
                     f"(sensitivity {fmt_coef(m.sensitivity)}, noise scale {fmt_coef(m.scale)})")
    return Diagnostic("E0401", message, fn.span if fn else None, notes)


def _input_cost(i: Any) -> str:
    return fmt_coef(i.epsilon) if i.is_pure else f"rho {fmt_coef(i.rho)}"


def needs_delta(report: CheckReport) -> Diagnostic:
    """A program with a Gaussian release is not pure epsilon-DP: a pure budget cannot admit it."""
    fn = next((f for f in report.functions if f.name == report.entry), None)
    gauss = [m for m in report.mechanisms if m.name == "gaussian"]
    notes = [f"gaussian at {relative_span(m.span, report.file)} costs rho {fmt_coef(m.extra.get('rho', 0))} in zCDP" for m in gauss[:5]]
    notes.append(f"its guarantee is rho-zCDP with rho = {fmt_coef(report.rho)}; an epsilon budget needs it "
                 "stated as (epsilon, delta): give a delta (--delta 1e-6, or a '# fuzzpy: delta 1e-6' line), "
                 "or budget it in zCDP with --rho")
    return Diagnostic("E0314", f"{report.entry} makes Gaussian releases, which are not pure epsilon-DP: an "
                      f"epsilon budget needs a delta", fn.span if fn else None, notes)


def exact(x: Any) -> Any:
    if x is None:
        return None
    if x == INF:
        return "inf"
    return str(Fraction(x))


def number(x: Any) -> Any:
    """A JSON number, or null when it has no finite double (the `_exact` field is exact)."""
    if x is None:
        return None
    return json_number(x)


def report_json(report: CheckReport) -> dict:
    return {
        "file": report.file,
        "ok": report.ok,
        "entry": report.entry,
        **_privacy_json(report),
        "budget": number(report.budget) if report.budget is not None else None,
        "rho_budget": number(report.rho_budget) if report.rho_budget is not None else None,
        "inputs": [{"name": i.name, "type": i.type, "epsilon": number(i.epsilon), "epsilon_exact": exact(i.epsilon),
                    "pure": i.is_pure, "rho": number(i.rho), "rho_exact": exact(i.rho),
                    "rho_gaussian_exact": exact(i.rho_gauss), "rho_pure_exact": exact(i.rho_pure)}
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
        **_formulas_json(report),
    }


def _formulas_json(report: CheckReport) -> dict:
    """The costs as formulas (`--formula`): absent unless asked for."""
    if report.formulas is None:
        return {}
    from .formula_output import json_fields

    return json_fields(report)


def _privacy_json(report: CheckReport) -> dict:
    """The stated guarantee: `epsilon` and `delta` (delta 0: pure; epsilon null: the program
    needs a delta to be stated as (epsilon, delta)), its zCDP `rho`, and how epsilon was found."""
    if not report.entry:
        return {"epsilon": None, "epsilon_exact": None, "delta": 0, "pure": None, "rho": None, "rho_exact": None}
    g = report.guarantee
    eps = g.epsilon if g is not None else (report.epsilon if report.is_pure else None)
    return {"epsilon": number(eps) if eps is not None else None,
            "epsilon_exact": exact(eps) if eps is not None else None,
            "delta": number(g.stated_delta) if g is not None else 0,
            "delta_exact": exact(g.stated_delta) if g is not None else "0",
            "pure": report.is_pure,
            "pure_epsilon": number(report.epsilon), "pure_epsilon_exact": exact(report.epsilon),
            "rho": number(report.rho), "rho_exact": exact(report.rho),
            "conversion": g.method if g is not None else ("pure" if report.is_pure else "needs delta")}


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
        echo(dumps(report_json(reports[0]), indent=2))
    else:
        echo(dumps({"ok": all(r.ok for r in reports), "files": [report_json(r) for r in reports]},
                         indent=2))


def print_text(report: CheckReport) -> None:
    for d in report.diagnostics:
        echo(render(d, report.sources), err=True)
    status = "ok" if report.ok else f"{sum(d.severity == 'error' for d in report.diagnostics)} error(s)"
    echo(f"{report.file}: {status}")
    own = [f for f in report.functions if f.span is None or f.span.file == report.file]
    if own:
        width = max(len(f.name) for f in own)
        for f in own:
            echo(f"  {f.name.ljust(width)} : {f.type}")
    if report.entry and report.ok:
        echo(privacy_line(report))
        if report.budget is not None:
            echo(f"budget: {fmt_coef(report.budget)} (within budget)")
        if report.rho_budget is not None:
            echo(f"rho budget: {fmt_coef(report.rho_budget)} (within budget)")
        if report.formulas is not None:
            from .formula_output import text_lines

            for line in text_lines(report):
                echo(line)
    if report.mechanisms and report.ok:
        echo("mechanisms:")
        for m in report.mechanisms:
            cost = (f"rho {fmt_coef(m.extra.get('rho', 0))}, noise sd {fmt_coef(m.scale)}" if m.name == "gaussian"
                    else f"epsilon {fmt_coef(m.epsilon)}, noise scale {fmt_coef(m.scale)}")
            echo(f"  {shown_span(m.span)}  {m.name}: sensitivity {fmt_coef(m.sensitivity)}, {cost}  (in {m.function})")


def privacy_line(report: CheckReport) -> str:
    """One line: the guarantee the program states, and each input's share."""
    return f"privacy: {guarantee_head(report)}  ({report.entry}; per input: {per_input_text(report)})"


def guarantee_head(report: CheckReport) -> str:
    """`epsilon = 1, delta = 0`, `epsilon = 4.4, delta = 1e-05 (...); rho = 0.5 (zCDP)`, or
    the rho alone when the program needs a delta to be stated in epsilon."""
    g = report.guarantee
    if report.is_pure and (g is None or g.method == "pure"):
        return f"epsilon = {fmt_coef(report.epsilon)}, delta = 0"
    if g is None or g.epsilon is None:
        return f"rho = {fmt_coef(report.rho)} (zCDP); give a delta to state it as (epsilon, delta)"
    return (f"epsilon = {fmt_coef(g.epsilon)}, delta = {fmt_coef(g.delta)} ({g.method}); "
            f"rho = {fmt_coef(report.rho)} (zCDP)")


def per_input_text(report: CheckReport) -> str:
    return ", ".join(f"{i.name} {_input_cost(i)}" for i in report.inputs)


def guarantee_text(report: CheckReport) -> str:
    """The code lens and SARIF text: the guarantee and each input's share (a pure epsilon alone,
    `epsilon = 0.2 (db 0.2)`)."""
    head = guarantee_head(report)
    if head.endswith(", delta = 0"):
        head = head[:-len(", delta = 0")]
    return f"{head} ({per_input_text(report)})"


def print_sarif(reports: list[CheckReport]) -> None:
    from .sarif import sarif_log

    echo(dumps(sarif_log(reports), indent=2))

