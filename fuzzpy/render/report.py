"""The checker's privacy report as text for people, JSON for tools, SARIF for code review."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..checking.reports import CheckReport
from ..diagnostics import render
from ..hints import shown_span
from ..typesystem.sens import INF
from .numbers import dumps, json_number, show_measured
from .numbers import show as fmt_coef
from .printed import Printed


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
        **_public_json(report),
        "diagnostics": [d.to_json() for d in report.diagnostics],
        "timings_ms": {k: round(v * 1000, 3) for k, v in report.timings.items()},
        "lp_solves": report.lp_solves,
        **_formulas_json(report),
    }


def _public_json(report: CheckReport) -> dict:
    """The public tables (not charged) and the bounds their schemas declare: absent when there are none."""
    if not report.public_tables:
        return {}
    return {"public_tables": [{"name": name, "schema": s.name, "keys": {c: m for c, m in s.per_key}}
                              for name, s in report.public_tables.items()]}


def public_tables_text(report: CheckReport) -> str:
    """`public tables: airlines (Airline: unique carrier)`: the entry point's public data, not charged."""
    shown = []
    for name, s in report.public_tables.items():
        facts = "; ".join(f"unique {c}" if m == 1 else f"at most {m} per {c}" for c, m in s.per_key)
        shown.append(f"{name} ({s.name}{': ' + facts if facts else ''})")
    return "public tables (not charged): " + ", ".join(shown)


def _formulas_json(report: CheckReport) -> dict:
    """The costs as formulas (`--formula`): absent unless asked for."""
    if report.formulas is None:
        return {}
    from .formulas import json_fields

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
            "conversion": g.method if g is not None else ("pure" if report.is_pure else "needs delta"),
            **({"conversion_refused": [{"method": m, "reason": why} for m, why in g.refused]} if g is not None else {}),
            **_selection_json(report)}


def _selection_json(report: CheckReport) -> dict:
    """Partition selection's delta (rule Partition selection): only for a program that has one."""
    d = report.approx_delta
    return {"selection_delta": number(d), "selection_delta_exact": exact(d)} if d else {}


def _extra(extra: dict) -> dict:
    return {k: _plain(v) for k, v in extra.items()}


def _plain(v: Any) -> Any:
    if isinstance(v, Fraction):
        return json_number(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def reports_json_text(reports: list[CheckReport]) -> str:
    """`fuzzpy check --format json`: one report's document, or several under "files"."""
    if len(reports) == 1:
        return dumps(report_json(reports[0]), indent=2)
    return dumps({"ok": all(r.ok for r in reports), "files": [report_json(r) for r in reports]}, indent=2)


def report_text(report: CheckReport) -> Printed:
    """`fuzzpy check`'s text: the diagnostics (stderr), then the functions' types, the guarantee,
    the budgets and the mechanisms (stdout)."""
    shown = Printed()
    for d in report.diagnostics:
        shown.err(render(d, report.sources))
    status = "ok" if report.ok else f"{sum(d.severity == 'error' for d in report.diagnostics)} error(s)"
    shown.out(f"{report.file}: {status}")
    own = [f for f in report.functions if f.span is None or f.span.file == report.file]
    if own:
        width = max(len(f.name) for f in own)
        for f in own:
            shown.out(f"  {f.name.ljust(width)} : {f.type}")
    if report.entry and report.ok:
        shown.out(privacy_line(report))
        if report.public_tables:
            shown.out(public_tables_text(report))
        if report.budget is not None:
            shown.out(f"budget: {fmt_coef(report.budget)} (within budget)")
        if report.rho_budget is not None:
            shown.out(f"rho budget: {fmt_coef(report.rho_budget)} (within budget)")
        if report.formulas is not None:
            from .formulas import text_lines

            for line in text_lines(report):
                shown.out(line)
    if report.mechanisms and report.ok:
        shown.out("mechanisms:")
        for m in report.mechanisms:
            cost = (f"rho {fmt_coef(m.extra.get('rho', 0))}, noise sd {show_measured(m.scale)}" if m.name == "gaussian"
                    else f"epsilon {fmt_coef(m.epsilon)}, noise scale {show_measured(m.scale)}")
            shown.out(f"  {shown_span(m.span)}  {m.name}: sensitivity {fmt_coef(m.sensitivity)}, {cost}  "
                      f"(in {m.function})")
    return shown


def privacy_line(report: CheckReport) -> str:
    """One line: the guarantee the program states, and each input's share."""
    return f"privacy: {guarantee_head(report)}  ({report.entry}; per input: {per_input_text(report)})"


def guarantee_head(report: CheckReport) -> str:
    """`epsilon = 1, delta = 0`, `epsilon = 4.4, delta = 1e-05 (...); rho = 0.5 (zCDP)`, or
    the rho alone when the program needs a delta to be stated in epsilon."""
    g = report.guarantee
    if report.is_pure and (g is None or g.method == "pure"):
        return f"epsilon = {fmt_coef(report.epsilon)}, delta = 0"
    selection = report.approx_delta
    if g is None or g.epsilon is None:
        if selection:  # rule Partition selection: no zCDP bound
            return (f"epsilon = {fmt_coef(report.epsilon)} and delta = {fmt_coef(selection)} from partition "
                    "selection; give a larger delta to state it as (epsilon, delta)")
        return f"rho = {fmt_coef(report.rho)} (zCDP); give a delta to state it as (epsilon, delta)"
    refused = "".join(f"; {m} refused: {why}" for m, why in g.refused)
    if selection:
        return (f"epsilon = {fmt_coef(g.epsilon)}, delta = {fmt_coef(g.delta)} ({g.method}{refused}); of the delta, "
                f"{fmt_coef(selection)} is partition selection's (no zCDP bound)")
    return (f"epsilon = {fmt_coef(g.epsilon)}, delta = {fmt_coef(g.delta)} ({g.method}{refused}); "
            f"rho = {fmt_coef(report.rho)} (zCDP)")


def per_input_text(report: CheckReport) -> str:
    return ", ".join(f"{i.name} {input_cost(i)}" for i in report.inputs)


def input_cost(i: Any) -> str:
    """One private input's cost: its pure epsilon, or its rho when it has Gaussian releases, and
    the delta of its partition selections."""
    if getattr(i, "delta", 0):
        cost = fmt_coef(i.epsilon) if i.rho_gauss == 0 else f"epsilon {fmt_coef(i.epsilon)}, rho " \
            f"{fmt_coef(i.rho_releases)}"
        return f"{cost} + delta {fmt_coef(i.delta)}"
    return fmt_coef(i.epsilon) if i.is_pure else f"rho {fmt_coef(i.rho)}"


def guarantee_text(report: CheckReport) -> str:
    """The code lens and SARIF text: the guarantee and each input's share (a pure epsilon alone,
    `epsilon = 0.2 (db 0.2)`)."""
    head = guarantee_head(report)
    if head.endswith(", delta = 0"):
        head = head[:-len(", delta = 0")]
    return f"{head} ({per_input_text(report)})"


def sarif_text(reports: list[CheckReport]) -> str:
    from .sarif import sarif_log

    return dumps(sarif_log(reports), indent=2)

