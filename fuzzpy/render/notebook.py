"""Reports and results as HTML, for notebooks: what the command line shows (the proven epsilon
and mechanisms, the released values with their accuracy), never the data."""

from __future__ import annotations

import html
from typing import Any, Optional

from .numbers import show


def _cell(x: Any) -> str:
    return html.escape(str(x))


def _num(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return _cell(x)
    return f"{x:.6g}"


def _cost(item: Any) -> str:
    """A mechanism's or release's own cost in its own notion: epsilon, or rho for a Gaussian one."""
    if getattr(item, "rho", None) is not None and item.epsilon is None:
        return f"rho {_cell(show(item.rho))}"
    together = getattr(item, "epsilon_together", None)
    if together is not None:  # a release in an `each`: what adds up is the groups' cost together
        return (f"epsilon {_cell(show(item.epsilon))} per group; the {item.groups} groups cost epsilon "
                f"{_cell(show(together))} together")
    return f"epsilon {_cell(show(item.epsilon))}"


def report_html(report: Any) -> str:
    """A check report: verdict, epsilon per input, mechanisms, errors."""
    if not report.ok:
        items = "".join(f"<li><code>{_cell(d.code)}</code> {_cell(d.message)}</li>" for d in report.errors)
        return f"<div><b>fuzzpy: {len(report.errors)} error(s)</b><ul>{items}</ul></div>"
    head = f"<b>fuzzpy: ok</b>, epsilon = {_cell(show(report.epsilon))}" if report.epsilon is not None else \
        "<b>fuzzpy: ok</b>"
    if report.budget is not None:
        head += f" (budget {_cell(show(report.budget))})"
    inputs = ", ".join(f"{_cell(n)}: {_cell(show(e))}" for n, e in report.per_input.items())
    rows = "".join(f"<tr><td>{_cell(m.name)}</td><td><code>{_cell(m.location)}</code></td>"
                   f"<td>{_cell(show(m.sensitivity))}</td><td>{_cost(m)}</td><td>{_cell(show(m.scale))}</td></tr>"
                   for m in report.mechanisms)
    table = ("<table><tr><th>mechanism</th><th>where</th><th>sensitivity</th><th>cost</th><th>noise scale</th></tr>"
             f"{rows}</table>") if rows else ""
    return f"<div>{head}<br>per input: {inputs}{table}</div>"


def result_html(result: Any) -> str:
    """A run: every release with its value, its cost (epsilon, or rho for a Gaussian release) and
    accuracy interval, then the spending."""
    rows = []
    for r in result.releases:
        acc = r.accuracy
        interval = f"[{_num(acc.interval[0])}, {_num(acc.interval[1])}]" if acc and acc.interval else ""
        rows.append(f"<tr><td>{_cell(r.label)}</td><td>{_num(r.value)}</td><td>{_cost(r)}</td>"
                    f"<td>{interval}</td><td>{_cell(acc.words if acc else '')}</td>"
                    f"<td><code>{_cell(r.location or '')}</code></td></tr>")
    for e in getattr(result, "estimates", []):
        interval = f"[{_num(e.interval[0])}, {_num(e.interval[1])}]" if e.interval else ""
        rows.append(f"<tr><td>{_cell(e.label)}</td><td>{_num(e.value)}</td><td>0 (estimate)</td>"
                    f"<td>{interval}</td><td>{_cell(e.words)}</td><td><code>{_cell(e.location or '')}</code></td></tr>")
    table = ("<table><tr><th>release</th><th>value</th><th>cost</th><th>95% interval</th><th>accuracy</th>"
             f"<th>where</th></tr>{''.join(rows)}</table>")
    head = f"<b>fuzzpy run</b>: epsilon {_cell(show(result.epsilon))} of budget {_cell(show(result.budget))}"
    if result.seeded:
        head += " &mdash; <b>seeded test run: NOT private, nothing charged</b>"
    spend = "".join(_spending_html(s) for s in result.spending)
    return f"<div>{head}{table}result: <code>{_cell(_short(result.value))}</code>{spend}</div>"


def _spending_html(s: Any) -> str:
    """One dataset's total after the run, in its cap's notion (as `fuzzpy run` prints it)."""
    if s.cap is None:
        return f"<br>ledger: {_cell(s.dataset)} has spent {_cell(show(s.spent))} in total; no cap"
    which = "default cap" if getattr(s, "default_cap", False) else "cap"
    return (f"<br>ledger: {_cell(s.dataset)} has spent {_cell(s.notion)} {_cell(show(s.spent))} in total, "
            f"of its {which} {_cell(show(s.cap))}")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 300 else text[:297] + "..."


def result_table(value: Any) -> Optional[Any]:
    """A DataFrame for a tabular result: a dict of keys (parts) -> number, tuple or dict."""
    import pandas as pd

    if not isinstance(value, dict) or not value:
        return None
    rows = list(value.values())
    if all(isinstance(x, (int, float)) for x in rows):
        return pd.DataFrame({"key": list(value), "value": rows})
    if all(isinstance(x, dict) for x in rows):
        return pd.DataFrame.from_dict(value, orient="index")
    if all(isinstance(x, tuple) for x in rows):
        return pd.DataFrame(rows, index=list(value))
    return None


# ---- the cell magic ----------------------------------------------------------------------------
