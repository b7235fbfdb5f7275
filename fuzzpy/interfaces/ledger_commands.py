"""`fuzzpy ledger show`, `set-cap`, `backup` and `restore`: read, cap, back up and restore the
privacy-budget ledger.

Mounted into the main CLI with `app.add_typer(ledger_app)`. Imports stay light (no pandas):
these commands only read SQLite and hash files.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer

from fuzzpy.diagnostics import FuzzError, error, render
from fuzzpy.ledger import (
    Entry,
    Ledger,
    dataset_identity,
    default_ledger_path,
    describe_cap,
    format_exact,
    restore_ledger,
    short_id,
)
from fuzzpy.ledger.caps import cap_amount, parse_cap
from fuzzpy.ledger.guard import check_no_lost_ledger

EXIT_USAGE = 2
EXIT_LEDGER = 4
_LEDGER_FAILURES = {"E0601", "E0602", "E0603", "E0604"}
_FULL_ID = re.compile(r"sha256:[0-9a-f]{64}")

ledger_app = typer.Typer(name="ledger", no_args_is_help=True, pretty_exceptions_enable=False,
                         pretty_exceptions_show_locals=False,
                         help="Show the privacy budget spent per dataset, cap it, back it up and restore it.")

# readable=False: an unreadable file is reported by the ledger itself, with its code (E0602).
LedgerOpt = Annotated[Optional[Path], typer.Option(
    "--ledger", readable=False, help="Ledger file (default: $FUZZPY_LEDGER or ~/.fuzzpy/ledger.sqlite).")]
DatasetOpt = Annotated[Optional[str], typer.Option(
    "--dataset", help="Dataset identity (sha256:...), as printed by `ledger show`.")]
DataOpt = Annotated[Optional[Path], typer.Option(
    "--data", readable=False, help="Data file; its identity is the sha256 of its bytes.")]


# ---------------------------------------------------------------------------------------------
# Commands


SHOW_LEGEND = [
    "cap, spent and remaining are in the dataset's notion, its cap's (pure epsilon, epsilon at a delta, or zCDP "
    "rho); a default cap was set by the dataset's first run: raise it on purpose with fuzzpy ledger set-cap",
    "runs' deltas: the sum of the deltas its runs were stated at (their basic composition, whatever the cap)",
    "rho: the zCDP rho of all its runs composed (inf when a run has none); id: the dataset's identity, for --dataset",
]


@ledger_app.command("show")
def show(ledger: LedgerOpt = None, dataset: DatasetOpt = None, data: DataOpt = None,
         fmt: Annotated[str, typer.Option("--format", help="text or json")] = "text") -> None:
    """Print, per dataset (named by the files runs showed it as), its cap, what was spent and what
    remains, then every run.

    cap, spent and remaining are in the dataset's notion (its cap's: pure epsilon, epsilon at a
    delta, or zCDP rho); "runs' deltas" is the sum of the deltas its runs were stated at (basic
    composition, whatever the cap); "rho" is the zCDP rho of all its runs composed; "id" is the
    dataset's identity (the hash of its bytes), which --dataset accepts."""
    try:
        if fmt not in ("text", "json"):
            raise error("E0605", f"invalid --format {fmt!r}: expected text or json")
        path = _ledger_path(ledger)
        wanted = _identity_of(dataset, data) if (dataset or data) else None
        if not path.exists():
            check_no_lost_ledger(path)  # "nothing has been spent" would be false where one was deleted
            _print_missing(path, fmt)
            return
        with Ledger(path, create=False, readonly=True) as book:
            ids = book.datasets() if wanted is None else [_match(book, wanted)]
            reports = [_report(book, d) for d in ids]
    except FuzzError as exc:
        _fail(exc)
    if fmt == "json":
        typer.echo(json.dumps({"ledger": str(path), "datasets": reports}, indent=2))
    else:
        typer.echo(_render_text(path, reports))


@ledger_app.command("set-cap")
def set_cap(cap: Annotated[Optional[str], typer.Option(
                "--cap", help="Total epsilon, e.g. 2.0 or 1/3 (pure, or at --delta).")] = None,
            delta: Annotated[Optional[str], typer.Option(
                "--delta", help="With --cap: the delta the epsilon cap holds at (default 0: pure).")] = None,
            rho: Annotated[Optional[str], typer.Option(
                "--rho", help="A cap in zCDP rho instead of epsilon, e.g. 0.5.")] = None,
            data: DataOpt = None, dataset: DatasetOpt = None,
            label: Annotated[Optional[str], typer.Option(
                "--label", help="A name shown beside the dataset (default: the file name).")
            ] = None,
            ledger: LedgerOpt = None) -> None:
    """Set the total privacy loss allowed on a dataset, in epsilon (at a delta) or in zCDP rho
    (replacing any earlier cap)."""
    try:
        new_cap = parse_cap(cap, delta, rho)
        if not (dataset or data):
            raise error("E0605", "say which dataset to cap: --data FILE or --dataset ID")
        ident = _identity_of(dataset, data)
        if not _FULL_ID.fullmatch(ident):
            # A cap on a mistyped or shortened id would silently protect nothing.
            raise error("E0605", f"a cap needs the full dataset identity (sha256: and 64 hex "
                                 f"digits), not {dataset!r}; or pass --data FILE")
        if label is None and data is not None:
            label = data.name
        with Ledger(_ledger_path(ledger)) as book:
            before = book.usage(ident)
            book.set_cap(ident, new_cap, label)
            use = book.usage(ident)
            name = ", ".join(_shown_name(ident, book.names_of(ident), book.cap_label(ident))) + f" ({short_id(ident)})"
    except FuzzError as exc:
        _fail(exc)
    amount = new_cap.rho if _is_rho(new_cap) else new_cap.epsilon
    typer.echo(f"cap of {name} set to {format_exact(amount)} ({describe_cap(new_cap)}): spent "
               f"{_amount(use.spent)}, remaining {format_exact(use.remaining)}")
    if before.cap is not None:
        kind = "default cap" if before.default else "cap"
        old = f"{kind} {_amount(cap_amount(before.cap))} ({describe_cap(before.cap)})"
        changed = "" if describe_cap(before.cap) == describe_cap(new_cap) else \
            f"; what was spent is now stated in {describe_cap(new_cap)} (it was {_amount(before.spent)})"
        typer.echo(f"it replaces the {old}{changed}")
    if use.spent > amount:
        typer.echo(f"warning: {_amount(use.spent)} was already spent, more than the new cap; "
                   "every further run on this dataset will be refused", err=True)


@ledger_app.command("backup")
def backup(target: Annotated[Path, typer.Argument(help="The backup file to write (it must not exist).")],
           ledger: LedgerOpt = None) -> None:
    """Write a consistent copy of the ledger (safe while runs are charging; see docs/ledger.md)."""
    try:
        path = _ledger_path(ledger)
        with Ledger(path, create=False, readonly=True) as book:
            runs = book.backup(target.expanduser())
    except FuzzError as exc:
        _fail(exc)
    typer.echo(f"backed up the ledger {path} to {target} ({_runs(runs)} recorded)")


@ledger_app.command("restore")
def restore(backup: Annotated[Path, typer.Argument(help="A backup written by `fuzzpy ledger backup`.")],
            ledger: LedgerOpt = None,
            accept_older: Annotated[bool, typer.Option(
                "--accept-older", help="Install it even if the ledger's guard records charges or cap "
                                       "changes it lacks (or another ledger).")] = False) -> None:
    """Install a backup where the ledger was (move the old ledger aside first; see docs/ledger.md)."""
    try:
        path = _ledger_path(ledger)
        done = restore_ledger(backup.expanduser(), path, accept_older)
    except FuzzError as exc:
        _fail(exc)
    typer.echo(f"restored the ledger {path} from {backup} ({_runs(done.runs)} recorded)")
    if done.overridden is not None:
        typer.echo(f"warning: its guard recorded {done.overridden.describe()}, which this backup lacks: "
                   "lower the caps by what the runs charged after it spent (docs/ledger.md, \"Restoring\")",
                   err=True)


# ---------------------------------------------------------------------------------------------
# Helpers


def _runs(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def _fail(exc: FuzzError) -> NoReturn:
    """Render like every other fuzzpy error, on stderr, and exit without a traceback."""
    for diag in exc.diagnostics:
        typer.echo(render(diag), err=True)
    codes = {d.code for d in exc.diagnostics}
    raise typer.Exit(EXIT_LEDGER if codes & _LEDGER_FAILURES else EXIT_USAGE)


def _ledger_path(option: Path | None) -> Path:
    return default_ledger_path() if option is None else option.expanduser()


def _identity_of(dataset: str | None, data: Path | None) -> str:
    if dataset and data:
        raise error("E0605", "give either --dataset or --data, not both")
    if data is not None:
        return dataset_identity(data)
    ident = (dataset or "").strip().rstrip("…").lower()
    if not ident:
        raise error("E0605", "--dataset needs a dataset identity such as sha256:3f2a9c81d04e")
    return ident


def _match(book: Ledger, wanted: str) -> str:
    """An exact identity, or a unique prefix of one the ledger knows (as `show` prints them)."""
    known = book.datasets()
    if wanted in known or _FULL_ID.fullmatch(wanted):
        return wanted
    hits = [d for d in known if d.startswith(wanted)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise error("E0605", f"no dataset in the ledger {book.path} starts with {wanted}")
    raise error("E0605", f"{wanted} matches {len(hits)} datasets; give more of the identity")


def _report(book: Ledger, dataset: str) -> dict:
    """Everything `show` prints about one dataset; amounts as exact strings.  `spent` is in the
    notion of the cap (the sum of the epsilons without a cap); `epsilon_sum`/`delta_sum` are
    the basic composition of the recorded runs and `rho` their zCDP rho, whatever the cap."""
    runs = book.entries(dataset)
    use = book.usage(dataset)
    cap = use.cap
    label = book.cap_label(dataset) or next((r.label for r in reversed(runs) if r.label), "")
    return {
        "dataset": dataset,
        "short": short_id(dataset),
        "names": _shown_name(dataset, book.names_of(dataset), book.cap_label(dataset)),
        "label": label,
        "default_cap": use.default,
        "cap": None if cap is None else format_exact(cap.rho if _is_rho(cap) else cap.epsilon),
        "notion": None if cap is None else ("rho" if _is_rho(cap) else "epsilon"),
        "cap_delta": None if cap is None or _is_rho(cap) else format_exact(cap.delta),
        "spent": _amount(use.spent),
        "remaining": None if use.remaining is None else format_exact(use.remaining),
        "epsilon_sum": format_exact(use.epsilon_sum),
        "delta_sum": format_exact(use.delta_sum),
        "rho": _amount(use.rho),
        "runs": [_run(r) for r in runs],
    }


def _is_rho(cap: Any) -> bool:
    return hasattr(cap, "rho")


def _amount(value: Fraction | float) -> str:
    """An exact amount, or "inf" when the history has no bound in that notion."""
    return "inf" if value == float("inf") else format_exact(Fraction(value))


def _shown_name(dataset: str, names: list[str], cap_label: str | None) -> list[str]:
    """How `show` names a dataset: the files runs showed it as; an account the service names by
    name (`dataset:adult`) as it is; a dataset from before names were recorded by its cap's label
    (the file `set-cap --data` read), else by its short id."""
    if names:
        return names
    if not dataset.startswith("sha256:"):
        return [dataset]
    return [cap_label] if cap_label else [short_id(dataset)]


def _notion_cell(report: dict) -> str:
    if report["notion"] is None:
        return "- (no cap)"
    if report["notion"] == "rho":
        return "zCDP rho"
    return f"epsilon at delta {report['cap_delta']}" if Fraction(report["cap_delta"]) else "pure epsilon"


def _run(entry: Entry) -> dict:
    return {"id": entry.id, "time": entry.started_at, "finished_at": entry.finished_at,
            "program_hash": entry.program_hash, "epsilon": format_exact(entry.epsilon),
            "delta": format_exact(entry.delta), "rho": None if entry.rho is None else format_exact(entry.rho),
            "loss": None if entry.loss is None else entry.loss.to_dict(),
            "status": entry.status, "label": entry.label}


def _render_text(path: Path, reports: list[dict]) -> str:
    lines = [f"ledger {path}", ""]
    if not reports:
        return "\n".join(lines + ["nothing recorded yet"])
    summary = [["dataset", "notion", "cap", "spent", "remaining", "runs' deltas", "rho", "id"]]
    for r in reports:
        cap = "none" if r["cap"] is None else r["cap"] + (" (default)" if r["default_cap"] else "")
        summary.append([", ".join(r["names"]), _notion_cell(r), cap, r["spent"],
                        r["remaining"] if r["remaining"] is not None else "no cap",
                        r["delta_sum"], r["rho"], r["short"]])
    lines += _table(summary) + [""] + SHOW_LEGEND
    for r in reports:
        lines += ["", f"runs on {', '.join(r['names'])} ({r['short']})"]
        if not r["runs"]:
            lines.append("  (none)")
            continue
        rows = [["time", "program", "epsilon", "delta", "rho", "status"]]
        rows += [[x["time"], short_id(x["program_hash"]), x["epsilon"], x["delta"],
                  x["rho"] or "-", x["status"]] for x in r["runs"]]
        lines += ["  " + line for line in _table(rows)]
    return "\n".join(lines)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _print_missing(path: Path, fmt: str) -> None:
    # Not an error: before the first run there is simply nothing to show.
    if fmt == "json":
        typer.echo(json.dumps({"ledger": str(path), "datasets": []}, indent=2))
    else:
        typer.echo(f"no ledger at {path} yet: nothing has been spent")
