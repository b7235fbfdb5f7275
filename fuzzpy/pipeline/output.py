"""A run's outcome as `fuzzpy run` prints it: text, JSON or CSV on standard output, diagnostics on
standard error, and the exit code.  The curator service returns the same `Printed` lines, so a
served run and a local one print the same bytes.

Formatting runs after the budget was charged, so it is total (every number is bounded first);
should it still fail, the released values are printed plainly, never lost.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any, Optional

from ..diagnostics import Diagnostic, render
from ..render.labels import (
    base_label,
    estimate_keys,
    estimate_labels,
    estimate_location,
    key_cells,
    key_columns,
    labels,
    location,
)
from ..render.numbers import dumps, show
from ..render.printed import Printed
from ..render.released import (
    ESTIMATES_HEADING,
    estimate_json,
    estimate_text,
    release_json,
    release_text,
    value_json,
    value_text,
)
from ..render.report import exact, number, report_json, report_text
from .session import Outcome

EXIT_OK, EXIT_USAGE, EXIT_RUNTIME, EXIT_INTERRUPTED = 0, 2, 4, 130
SEED_WARNING = ("warning: --seed makes the noise reproducible, so anyone who knows the seed can remove it: "
                "this output is NOT differentially private. Use it only for tests and demos. "
                "No budget was charged.")


def exit_code_for(diags: list[Diagnostic]) -> int:
    """The exit code of a command that stopped on these diagnostics (docs/errors.md)."""
    from ..render.exits import exit_code_for as codes

    return codes(diags)


def printed(outcome: Outcome, fmt: str) -> Printed:
    """What `fuzzpy run --format FMT` prints for this outcome, with its exit code."""
    shown = Printed()
    if outcome.seed_warned:
        shown.err(SEED_WARNING)
    if outcome.stage == "check":
        _failed_check(shown, outcome, fmt)
    elif outcome.stage in ("arguments", "data", "ledger"):
        _failed_before_run(shown, outcome, fmt)
    elif outcome.interrupted:
        shown.err("interrupted; the epsilon charged for this run stays spent")
        shown.exit_code = EXIT_INTERRUPTED
    elif outcome.stage == "run":
        _failed_run(shown, outcome, fmt)
    else:
        _released(shown, outcome, fmt)
    return shown


# ---- refusals and failures ----------------------------------------------------------------------

def _failed_check(shown: Printed, outcome: Outcome, fmt: str) -> None:
    report = outcome.report
    if fmt == "json":
        for d in report.diagnostics:
            shown.err(render(d, report.sources))
        shown.out(dumps({**report_json(report), "stage": "check"}, indent=2))
    else:
        shown.extend(report_text(report))
    shown.exit_code = exit_code_for(report.diagnostics)


def _failed_before_run(shown: Printed, outcome: Outcome, fmt: str) -> None:
    report = outcome.report
    for d in outcome.diagnostics:
        shown.err(render(d, report.sources))
    if fmt == "json":
        shown.out(dumps({"ok": False, "stage": outcome.stage, "file": report.file,
                         "diagnostics": [d.to_json() for d in outcome.diagnostics]}, indent=2))
    code = exit_code_for(outcome.diagnostics)
    shown.exit_code = code if code != EXIT_OK else EXIT_RUNTIME


def _failed_run(shown: Printed, outcome: Outcome, fmt: str) -> None:
    """What was released before the failure is charged, so it is shown, with its estimates."""
    for d in outcome.diagnostics:
        shown.err(render(d, outcome.report.sources))
    if fmt == "json":
        shown.out(dumps({**header_json(outcome), "ok": False, "stage": "run",
                         "diagnostics": [d.to_json() for d in outcome.diagnostics],
                         "releases": releases_json(outcome, outcome.releases),
                         "estimates": estimates_json(outcome, outcome.estimates)}, indent=2))
    elif outcome.releases:
        shown.out("released before the failure (charged):")
        for line in releases_text(outcome, outcome.releases):
            shown.out("  " + line)
        if outcome.estimates:
            shown.out(ESTIMATES_HEADING)
            for line in estimates_text(outcome, outcome.estimates):
                shown.out("  " + line)
    shown.exit_code = EXIT_RUNTIME


# ---- released values ----------------------------------------------------------------------------

def _released(shown: Printed, outcome: Outcome, fmt: str) -> None:
    try:
        body = Printed()
        _success(body, outcome, fmt)
        shown.extend(body)
    except Exception as exc:  # noqa: BLE001 - a bug in fuzzpy's formatting, after the release
        from ..render.exits import internal_error

        shown.err(render(internal_error(type(exc))))
        shown.out("released (printed plainly after an internal error):")
        for r in outcome.result.releases:
            shown.out(f"  {r.name or '?'} = {r.value!s}")
        shown.exit_code = EXIT_RUNTIME
        return
    if outcome.finish_problem is not None:
        for d in outcome.finish_problem.diagnostics:
            shown.err(render(d))
        shown.exit_code = EXIT_RUNTIME


def _success(shown: Printed, outcome: Outcome, fmt: str) -> None:
    report, result = outcome.report, outcome.result
    inner = getattr(report.entry_type, "inner", None)
    estimates = getattr(result, "estimates", [])
    if fmt == "json":
        shown.out(dumps({**header_json(outcome), "ok": True,
                         "releases": releases_json(outcome, result.releases),
                         "estimates": estimates_json(outcome, estimates),
                         "result": value_json(result.value, inner), "spending": spending_json(outcome)}, indent=2))
        return
    if fmt == "csv":
        shown.out(releases_csv(outcome, result.releases, estimates).rstrip("\n"))
        for line in spending_text(outcome):
            shown.err(line)
        return
    shown.out(header_text(outcome))
    if result.releases:
        shown.out("released:")
        for line in releases_text(outcome, result.releases):
            shown.out("  " + line)
    if estimates:
        shown.out(ESTIMATES_HEADING)
        for line in estimates_text(outcome, estimates):
            shown.out("  " + line)
    shown.out(f"result: {value_text(result.value, inner)}")
    for line in spending_text(outcome):
        shown.out(line)


def spending_text(outcome: Outcome) -> list[str]:
    """Each charged dataset's total spent and its cap after this run, in the cap's notion, which is
    the dataset's one unit from its first run (docs/ledger.md, "The default cap")."""
    return [_spending_line(entry, outcome.report) for entry in spending_json(outcome)]


def _spending_line(entry: dict, report: Any) -> str:
    if entry["cap"] is None:
        return (f"ledger: {entry['files']} has spent {entry['spent']} in total (the sum of its runs' epsilons); "
                "it has no cap (set one with fuzzpy ledger set-cap)")
    if entry["notion"] == "rho":
        unit = f"rho {entry['spent']} (zCDP)"
    elif entry["cap_delta"] is not None:
        unit = f"epsilon {entry['spent']} at delta {entry['cap_delta']}"
    else:
        unit = f"pure epsilon {entry['spent']}"
    which = "default cap" if entry["default_cap"] else "cap"
    left = f"{entry['remaining']} left" + ("; raise it on purpose with fuzzpy ledger set-cap" if entry["default_cap"]
                                           else "")
    line = f"ledger: {entry['files']} has spent {unit} in total, of its {which} {entry['cap']} ({left})"
    if not report.is_pure and entry["cap_delta"] is None:  # a Gaussian run under a rho cap: its delta too
        g = report.guarantee
        line += f"; this run: rho {show(report.rho)}, epsilon {show(g.epsilon)} at delta {show(g.delta)}"
    return line


def spending_json(outcome: Outcome) -> list[dict]:
    """Each charged dataset's spending, when its ledger shows it (a served run does not: the
    dataset's total includes other analysts' runs)."""
    return [_spending_entry(use, ", ".join(c.shown)) for c, use in zip(outcome.charges, outcome.usage)
            if use is not None]


def _spending_entry(use: Any, shown: str) -> dict:
    """One dataset's spending as run output shows it: exact amounts, in the cap's notion."""
    cap = use.cap
    amount = None if cap is None else (cap.rho if hasattr(cap, "rho") else cap.epsilon)
    return {"files": shown, "spent": "inf" if use.spent == math.inf else show(use.spent),
            "cap": None if cap is None else show(amount),
            "remaining": None if cap is None else show(use.remaining),
            "notion": None if cap is None else ("rho" if hasattr(cap, "rho") else "epsilon"),
            "cap_delta": None if cap is None or hasattr(cap, "rho") or not cap.delta else show(cap.delta),
            "default_cap": bool(getattr(use, "default", False))}


def estimates_json(outcome: Outcome, estimates: list) -> list[dict]:
    report = outcome.report
    names = estimate_labels(estimates, report.file, report.sources)
    return [{**estimate_json(e, name, estimate_location(e, report.file),
                             labels(list(e.sources), report.file, report.sources)),
             "key_columns": dict(key_cells(estimate_keys(e)))}
            for e, name in zip(estimates, names)]


def estimates_text(outcome: Outcome, estimates: list) -> list[str]:
    return [estimate_text(js) for js in estimates_json(outcome, estimates)]


def release_rows(outcome: Outcome) -> list[dict]:
    """One row per released value and per estimate (label, key, value, epsilon, low, high, ...),
    with the values as numbers: what `--plot` draws.  Each row also says what it is (`kind`: an
    estimate's kind, "quantile" for a release stated in ranks, else "release"), its name without
    the keys, its key columns, and a quantile's statement (`rank`: the JSON accuracy)."""
    releases, estimates = outcome.result.releases, getattr(outcome.result, "estimates", [])
    rows = list(csv.DictReader(io.StringIO(releases_csv(outcome, releases, estimates))))
    report = outcome.report
    rel_js, est_js = releases_json(outcome, releases), estimates_json(outcome, estimates)
    names = [base_label(r, report.file, report.sources) for r in releases] + \
        [base_label(e.sources[0], report.file, report.sources) + e.suffix for e in estimates]
    for row, js, name in zip(rows, rel_js + est_js, names):
        rank = (js.get("accuracy") or {}) if "quantile" in (js.get("accuracy") or {}) else None
        row.update(value=js["value"], name=name, keys=js["key_columns"], rank=rank,
                   kind=js.get("kind") or ("quantile" if rank else "release"),
                   low=float(row["low"]) if row["low"] else "", high=float(row["high"]) if row["high"] else "")
    return rows


def releases_csv(outcome: Outcome, releases: list, estimates: Optional[list] = None) -> str:
    """label, the key columns, value, epsilon, epsilon_together, rho, low, high, accuracy, where:
    one row per released value, its cost in its own notion (epsilon for a pure release, rho for a
    Gaussian one; for a release in an `each`, epsilon is per group and epsilon_together the cost
    of all its groups together, which is what adds up), then one per estimate (epsilon 0:
    computed from the releases, it costs nothing more).
    Each component of a key has its own column, named after the field the key function read
    (`sex`, `income`; `key` when it read none; render/labels.py)."""
    rel_js, est_js = releases_json(outcome, releases), estimates_json(outcome, estimates or [])
    columns = key_columns([js["key_columns"] for js in rel_js + est_js])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["label", *columns, "value", "epsilon", "epsilon_together", "rho", "low", "high", "accuracy", "where"])
    for js in rel_js:
        acc = js["accuracy"] or {}
        value = js["value"]
        low = high = ""
        additive = acc.get("what", "").startswith("|noise|")
        if additive and isinstance(value, (int, float)) and not isinstance(value, bool):
            low, high = value - acc["bound"], value + acc["bound"]
        w.writerow([js["label"], *(js["key_columns"].get(c, "") for c in columns),
                    value if not isinstance(value, (list, dict)) else dumps(value),
                    "" if js["epsilon"] is None else js["epsilon"], (js.get("together") or {}).get("epsilon", ""),
                    js.get("rho", ""), low, high,
                    acc.get("words", ""), js["where"] or ""])
    for js in est_js:
        w.writerow([js["label"], *(js["key_columns"].get(c, "") for c in columns), js["value"], 0, "", "",
                    "" if js["low"] is None else js["low"], "" if js["high"] is None else js["high"],
                    js["words"], js["where"] or ""])
    return buf.getvalue()


def releases_text(outcome: Outcome, releases: list) -> list[str]:
    """Named after the user's code, located relative to the program (render/labels.py)."""
    report = outcome.report
    names = labels(releases, report.file, report.sources)
    return [release_text(r, report.sources, name, location(r, report.file)) for r, name in zip(releases, names)]


def releases_json(outcome: Outcome, releases: list) -> list[dict]:
    report = outcome.report
    names = labels(releases, report.file, report.sources)
    return [{**release_json(r, report.sources), "label": name, "where": location(r, report.file),
             "key_columns": dict(key_cells(r.keys))}
            for r, name in zip(releases, names)]


def header_text(outcome: Outcome) -> str:
    head = f"{outcome.report.file} ({outcome.report.entry}): {spent_text(outcome.report)}"
    if outcome.seeded is not None:
        return head + f"; seeded test run (seed {outcome.seeded}): NOT private, nothing charged"
    where = ", ".join(f for c in outcome.charges for f in c.shown)
    return head + f"; charged on {where} in {outcome.ledger}"


def header_json(outcome: Outcome) -> dict:
    r, g = outcome.report, outcome.report.guarantee
    seeded = outcome.seeded is not None
    return {"file": r.file, "entry": r.entry, "epsilon": number(g.epsilon), "epsilon_exact": exact(g.epsilon),
            "delta": number(g.stated_delta), "delta_exact": exact(g.stated_delta), "pure": r.is_pure,
            "rho": number(r.rho), "rho_exact": exact(r.rho),
            "budget": number(r.budget), "budget_exact": exact(r.budget),
            "rho_budget": number(r.rho_budget), "rho_budget_exact": exact(r.rho_budget),
            "seeded": seeded, "warning": SEED_WARNING if seeded else None,
            "ledger": None if seeded or outcome.ledger is None else {
                "path": outcome.ledger,
                "charges": [{"files": list(c.shown), "id": c.id} for c in outcome.charges]}}


def spent_text(r: Any) -> str:
    """What a run costs, against its budgets: epsilon (at its delta when not pure) and rho."""
    g = r.guarantee
    cost = f"epsilon {show(g.epsilon)}" + ("" if g.method == "pure" else f" at delta {show(g.delta)}")
    if not r.is_pure:
        cost += f" (rho {show(r.rho)})"
    budgets = [f"budget {show(r.budget)}" if r.budget is not None else "",
               f"rho budget {show(r.rho_budget)}" if r.rho_budget is not None else ""]
    return cost + " of " + " and ".join(b for b in budgets if b)
