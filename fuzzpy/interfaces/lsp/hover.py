"""Hover and code lens text: function types, the entry point's epsilon, mechanisms (proven
sensitivity, epsilon charged, noise scale), primitives (documentation and why their rule is
sound), local bindings, params and schemas."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

from ...checking.checker import MechanismRecord
from ...checking.program import CheckReport
from ...primitives.registry import all_primitives
from ...render.numbers import show as fmt_coef
from ...render.numbers import to_float
from ...render.report import guarantee_text
from ...syntax import ast as A
from .analysis import Analysis, Binding, CallRecord
from .incremental import _unique_by
from .members import hover_field
from .navigation import _contains, _local_at

# ---- hover text ---------------------------------------------------------------------------------


def _fence(text: str) -> str:
    return f"```fuzzpy\n{text}\n```"


def epsilon_summary(report: CheckReport) -> Optional[str]:
    """`epsilon = 0.2 (db 0.2)`, the code lens text of the entry point."""
    if report.entry is None or not report.inputs:
        return None
    text = guarantee_text(report)
    if report.budget is not None:
        over = any(d.code in ("E0401", "E0314") for d in report.diagnostics)
        text += f", {'over' if over else 'within'} budget {fmt_coef(report.budget)}"
    if report.formulas is not None:  # derived after the check (server._derive_formulas)
        from ...render.formulas import lens_suffix

        text += lens_suffix(report)
    return text


def hover_function(report: CheckReport, name: str) -> Optional[str]:
    fn = next((f for f in report.functions if f.name == name), None)
    if fn is None:
        return None
    text = _fence(f"function {name} : {fn.type}")
    if name == report.entry:
        summary = epsilon_summary(report)
        if summary:
            pure = report.guarantee is None or report.guarantee.stated_delta == 0
            text += f"\n\nEntry point: {summary}{', delta = 0' if pure and report.is_pure else ''}."
    if report.formulas is not None:
        from ...render.formulas import hover_suffix

        extra = hover_suffix(report, name)
        text += f"\n\n{extra}" if extra else ""
    return text


def hover_mechanisms(records: list[MechanismRecord]) -> str:
    lines = []
    for m in records:
        cost = (f"rho {fmt_coef(m.extra.get('rho', 0))} (zCDP), noise standard deviation {fmt_coef(m.scale)}"
                if m.name == "gaussian" else f"epsilon charged {fmt_coef(m.epsilon)}, noise scale {fmt_coef(m.scale)}")
        line = f"**{m.name}** (in `{m.function}`): proven sensitivity {fmt_coef(m.sensitivity)}, {cost}"
        if m.name == "select_keys":  # rule Partition selection: its delta and the units a key needs
            line += (f", delta {fmt_coef(m.extra.get('delta', 0))}; a key is released when its noisy count of "
                     f"units reaches {m.extra.get('threshold')} (each unit counted in at most "
                     f"{m.extra.get('groups')} keys)")
        if m.name == "select_keys_optimal":  # rule Optimal partition selection: its delta and its curve
            line += (f", delta {fmt_coef(m.extra.get('delta', 0))}; a key is released with the probability of the "
                     f"optimal curve for its count of units, one half from {m.extra.get('threshold')} units (each "
                     f"unit counted in at most {m.extra.get('groups')} keys)")
        if m.name == "laplace" and m.scale:
            line += f"; |error| <= {to_float(m.scale) * math.log(20):.4g} with probability 0.95"
        lines.append(line)
    return "\n\n".join(lines)


def hover_primitive(name: str) -> Optional[str]:
    prim = all_primitives().get(name)
    if prim is None:
        return None
    head = f"{name} {' '.join(prim.params)} : {prim.signature}".replace("  ", " ")
    return f"{_fence(head)}\n\n{prim.doc}\n\n*Why it is sound:* {prim.justification}"


def hover_binding(name: str, found: list[Binding]) -> str:
    seen = _unique_by(((b.type, b.sensitivity) for b in found), lambda x: x)
    lines = [_fence(f"{name} : {t}") + f"\n\n{s}" for t, s in seen[:5]]
    if len(seen) > 1:
        lines.insert(0, f"`{name}` is checked at {len(seen)} instances:")
    return "\n\n".join(lines)


def hover_call(name: str, calls: list[CallRecord]) -> str:
    """A function at a call: the type of the instance checked there and what the call costs."""
    seen = _unique_by(((c.type, c.cost) for c in calls), lambda x: x)
    lines = [_fence(f"{name} : {t}") + f"\n\nAt this call {cost}." for t, cost in seen[:5]]
    if len(seen) > 1:
        lines.insert(0, f"This call of `{name}` is checked at {len(seen)} instances:")
    return "\n\n".join(lines)


def _lines_with(text: str, line: int, current: str) -> list[str]:
    """The analysed text's lines, with the cursor's line as the editor has it now."""
    lines = text.split("\n")
    lines += [""] * (line - len(lines))
    lines[line - 1] = current
    return lines


def _hover_text(analysis: Analysis, line: int, col: int, word: Optional[tuple[str, int, int]],
                text: str) -> Optional[str]:
    report = analysis.report
    mechs = [m for m in report.mechanisms if m.span.file == analysis.file and _contains(m.span, line, col)]
    if word is None:
        return hover_mechanisms(mechs[:1]) if mechs else None
    name, start, _ = word
    if start > 0 and text[start - 1] == ".":
        return hover_field(analysis, analysis.known, _lines_with(analysis.text, line, text), line, word[2])
    on_head = [m for m in mechs if m.span.line == line and m.span.col == start + 1 and m.name == name]
    if on_head:
        return hover_mechanisms(on_head) + "\n\n---\n\n" + (hover_primitive(name) or "")
    local = _local_at(analysis, line, col, name)
    if local is not None and local.binder is not None:
        found = [b for b in analysis.bindings if b.span == local.binder]
        if found:
            return hover_binding(name, found)
        return _fence(f"{name}") + "\n\n(not checked yet: the function has errors)"
    calls = [c for c in analysis.calls if c.name == name and c.span.file == analysis.file
             and (c.span.line, c.span.col) == (line, start + 1)]
    if calls:
        prim = hover_primitive(name)  # a join: its stability at this call, then what it is
        return hover_call(name, calls) + (f"\n\n---\n\n{prim}" if prim else "")
    fn_text = hover_function(report, name)
    if fn_text is not None:
        return fn_text
    prim = hover_primitive(name)
    if prim is not None:
        return prim
    return _hover_declaration(analysis, name)


def _hover_declaration(analysis: Analysis, name: str) -> Optional[str]:
    for d in analysis.decls:
        if isinstance(d, A.ParamDecl) and d.name == name:
            value = analysis.report.params.get(name)
            shown = f" = {fmt_coef(value)}" if isinstance(value, Fraction) else ""
            return _fence(f"param {name}{shown}") + "\n\nA public parameter: set it with `--param`."
        if isinstance(d, A.SchemaDecl) and d.name == name:
            schema = analysis.report.schemas.get(name)
            cols = ", ".join(f"{c.name} : {c.type}" for c in schema.columns) if schema else ""
            unit = getattr(schema, "unit", None)
            if unit is None:
                return _fence(f"schema {name} {{ {cols} }}")
            return _fence(f"schema {name} unit {unit} {{ {cols} }}") + (  # rule Units
                f"\n\nPrivacy unit: `{unit}`. Neighbouring tables differ by all the rows of one {unit}; "
                f"count, sum, groupby... refuse a table of `{name}` until each {unit}'s rows are bounded: "
                f"`bound_rows k t` (a {unit} then moves k rows), `bound_groups m c key t` (m*c rows in all, "
                f"c per group).")
    return None
