"""Costs as formulas in the interfaces: `fuzzpy check --formula text|latex` (text and JSON),
hover and the code lens.  The derivation is in checking/formulas.py (docs/formulas.md); this
module is imported only when formulas are asked for, and imports sympy only through it."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Optional

from ..checking.program import CheckReport, check_file
from .numbers import json_number
from .numbers import show as fmt_coef

STATUS_TEXT = {
    "exact": "exact for every value in the declared ranges",
    "checked": "matches the checker at {points} parameter values; a fit, not a proof for other values",
    "constant": "does not change at the {points} parameter values checked",
}


def attach_formulas(report: CheckReport, params: dict[str, str], style: str = "text",
                    timeout: Optional[float] = None, entry: Optional[str] = "main",
                    check: Optional[Callable[[dict[str, str]], Any]] = None) -> None:
    """Derive the formulas of a successful check (re-checking the same file) into `report`."""
    from ..checking.formulas import DEFAULT_TIMEOUT, FormulaReport, derive

    report.formula_style = style
    if not report.ok:
        report.formulas = FormulaReport({}, note="the program does not check")
        return
    if check is None:
        def check(p: dict[str, str]) -> Any:
            return check_file(report.file, p, entry)
    report.formulas = derive(report, check, params, DEFAULT_TIMEOUT if timeout is None else timeout)


def _render(f: Any, style: str) -> Optional[str]:
    return f.latex if style == "latex" else f.text


def _at(report: CheckReport) -> str:
    fr = report.formulas
    return ", ".join(f"{n} = {fmt_coef(v)}" for n, v in fr.params.items())


def _status(report: CheckReport, f: Any) -> str:
    return STATUS_TEXT.get(f.status, "").format(points=report.formulas.points)


def text_lines(report: CheckReport) -> list[str]:
    """The `formula:` lines of `fuzzpy check --formula`: main's cost, then each function's
    sensitivities that depend on the parameters, each next to the checker's number."""
    fr, style = report.formulas, report.formula_style
    if fr is None:
        return []
    out = []
    main = fr.main
    if main is not None:
        what = "epsilon" if main.name == "epsilon" else "rho (zCDP)"
        if main.expr is not None:
            out.append(f"formula: {what} = {_render(main, style)}  (= {fmt_coef(main.value)} at {_at(report)}; "
                       f"{_status(report, main)})")
        else:
            out.append(f"formula: no formula for {what}: {main.reason or fr.note}")
    elif fr.note:
        out.append(f"formula: none ({fr.note})")
    sens = [f for f in fr.formulas.values() if f.name not in ("epsilon", "rho") and f.symbolic
            and not f.name.startswith(f"{report.entry}.")]  # the entry's is the epsilon line
    if sens:
        out.append("sensitivity formulas:")
        for f in sens:
            fn, _, rest = f.name.partition(".")
            param, _, rho = rest.partition(".")
            kind = "rho per unit of distance squared" if rho else "sensitivity"
            out.append(f"  {fn}: {kind} in {param} = {_render(f, style)}  (= {fmt_coef(f.value)}; "
                       f"{_status(report, f)})")
    return out


def json_fields(report: CheckReport) -> dict:
    """`epsilon_formula`, `epsilon_latex`, `rho_formula`, `rho_latex` (null when none) and
    `formulas`: every cost with its formula, status and the checker's exact number."""
    fr = report.formulas
    out: dict[str, Any] = {}
    for name in ("epsilon", "rho"):
        f = fr.get(name)
        out[f"{name}_formula"] = f.text if f is not None else None
        out[f"{name}_latex"] = f.latex if f is not None else None
    out["formulas"] = {
        "params": {n: json_number(v) for n, v in fr.params.items()},
        "checks": fr.checks, "points": fr.points, "seconds": round(fr.seconds, 3), "note": fr.note or None,
        "costs": [{"name": f.name, "formula": f.text, "latex": f.latex, "status": f.status,
                   "reason": f.reason or None, "value": json_number(f.value) if _finite(f.value) else None,
                   "value_exact": str(Fraction(f.value)) if _finite(f.value) else "inf"}
                  for f in fr.formulas.values()],
    }
    return out


def _finite(v: Any) -> bool:
    return isinstance(v, (int, Fraction))


def lens_suffix(report: CheckReport) -> str:
    """` = 3*T*eps` after the code lens's number, or nothing."""
    fr = report.formulas
    main = fr.main if fr is not None else None
    if main is None or not main.symbolic:
        return ""
    return f"; {'epsilon' if main.name == 'epsilon' else 'rho'} = {main.text}"


def hover_suffix(report: CheckReport, name: str) -> str:
    """The formulas of function `name` (its sensitivities; main's cost for the entry point)."""
    fr = report.formulas
    if fr is None:
        return ""
    lines = []
    if name == report.entry and fr.main is not None:
        main = fr.main
        what = "epsilon" if main.name == "epsilon" else "rho"
        if main.expr is not None:
            lines.append(f"As a formula: `{what} = {main.text}` (= {fmt_coef(main.value)} at {_at(report)}; "
                         f"{_status(report, main)}).")
        else:
            lines.append(f"No formula for {what}: {main.reason or fr.note}.")
    for f in fr.formulas.values():
        if f.name.startswith(name + ".") and f.symbolic:
            param, _, rho = f.name[len(name) + 1:].partition(".")
            kind = "rho per unit of distance squared" if rho else "sensitivity"
            lines.append(f"{kind.capitalize()} in `{param}`: `{f.text}` (= {fmt_coef(f.value)}).")
    return "\n\n".join(lines)
