"""`fuzzpy run`: check, compare with the budget, load the data, charge the ledger, run, release.

The order is fixed (docs/runtime.md): nothing is read before the program is proven within
budget, nothing is charged before the data loaded cleanly, nothing is released before the
charge is committed.  A run that fails keeps its charge.  Output and errors never contain
private data: only released values, their epsilon and accuracy, and messages fixed by the
program text.  Mounted by cli.py through `register(app)`.
"""

from __future__ import annotations

import gc
import json
import math
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator, List, Optional

import typer

from ..diagnostics import Diagnostic, FuzzError, render
from .numbers import dumps, show, to_float

# Exit codes, as in cli.py (imported lazily there: cli imports this module while it loads).
EXIT_OK, EXIT_USAGE, EXIT_RUNTIME = 0, 2, 4

PROGRESS_AFTER_S = 2.0
SEED_WARNING = ("warning: --seed makes the noise reproducible, so anyone who knows the seed can remove it: "
                "this output is NOT differentially private. Use it only for tests and demos. "
                "No budget was charged.")
_GENERIC_FAILURE = ("the run of {entry} stopped with an internal error; no details are shown because they "
                    "could depend on the data")
_KEPT_NOTE = "the epsilon charged for this run stays spent: values may have been released before the failure"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run(
    program: Path = typer.Argument(..., help="The program (.fz) to run."),
    data: List[str] = typer.Option([], "--data", help="Data file for the private table (PATH), or NAME=PATH for "
                                                      "the entry parameter NAME (repeatable)."),
    budget: Optional[str] = typer.Option(None, "--budget", help="Refuse to run if the program's epsilon exceeds this "
                                                                "(default: the program's '# fuzzpy: budget' pragma)."),
    delta: Optional[str] = typer.Option(None, "--delta", help="State the guarantee as (epsilon, delta) at this "
                                                              "delta (needed for Gaussian releases)."),
    rho: Optional[str] = typer.Option(None, "--rho", help="Refuse to run if the program's zCDP rho exceeds this."),
    param: List[str] = typer.Option([], "--param", help="Public parameter NAME=VALUE (repeatable)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="TESTING ONLY: reproducible noise, no privacy, no ledger."),
    ledger: Optional[Path] = typer.Option(None, "--ledger", readable=False,  # unreadable: the ledger's E0602
                                          help="Ledger file (default: $FUZZPY_LEDGER or ~/.fuzzpy/ledger.sqlite)."),
    fmt: str = typer.Option("text", "--format", help="text, json or csv (one row per released value)."),
    entry: str = typer.Option("main", "--entry", help="Name of the entry point."),
    server: Optional[str] = typer.Option(None, "--server", help="Run on a curator service (URL) instead of local data."),
    dataset: List[str] = typer.Option([], "--dataset", help="With --server: dataset NAME, or PARAMETER=NAME (repeatable)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw the released numbers with their accuracy "
                                                             "as error bars into this PNG (needs matplotlib)."),
    header: bool = typer.Option(False, "--header", help="Text data files start with a header naming every declared "
                                                        "column; a missing one is named in the error."),
    engine: str = typer.Option("pandas", "--engine", help="pandas (one process) or dask (a partitioned table on a "
                                                          "Dask cluster; docs/scale.md)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="With --engine dask: the address of an existing "
                                                                      "Dask scheduler (default: a local cluster)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="With --engine dask: local cluster workers."),
    threads: Optional[int] = typer.Option(None, "--threads-per-worker", help="With --engine dask: threads per "
                                                                             "local worker."),
    persist: bool = typer.Option(False, "--persist", help="With --engine dask: keep the conformed table on the "
                                                          "workers between passes (spilled to their disks)."),
) -> None:
    """Check a program, charge its epsilon, run it over the data and print the released values."""
    from .checkcmd import parse_budget, parse_delta, parse_params, parse_rho

    if fmt not in ("text", "json", "csv"):
        raise _usage("E0701", f"--format must be text, json or csv, got '{fmt}'")
    if (server is not None or dataset) and engine != "pandas":
        raise _usage("E0701", "--engine is for local data; with --server the curator decides how a program runs")
    if server is not None or dataset:
        raise typer.Exit(_run_remote(program, server, dataset, data, budget, param, seed, ledger, fmt, entry, delta))
    if seed is not None and ledger is not None:
        raise _usage("E0603", "--seed and --ledger cannot be used together: a seeded run is not private, so it is "
                     "never recorded in a ledger")
    opts = _Options(program, data, parse_budget(budget), parse_params(param), seed, ledger, fmt, entry,
                    parse_delta(delta), parse_rho(rho), plot, header)
    if engine != "pandas" or scheduler is not None or workers is not None or threads is not None or persist:
        raise typer.Exit(_run_engine(opts, engine, scheduler, workers, threads, persist))
    raise typer.Exit(_Run(opts).execute())


def _run_engine(opts: "_Options", engine: str, scheduler: Optional[str], workers: Optional[int],
                threads: Optional[int], persist: bool = False) -> int:
    """`--engine dask` (fuzzpy/interfaces/dask_run.py)."""
    if engine == "pandas":
        raise _usage("E0701", "--scheduler, --workers, --threads-per-worker and --persist go with --engine dask")
    if engine != "dask":
        raise _usage("E0701", f"--engine must be pandas or dask, got '{engine}'")
    if scheduler is not None and (workers is not None or threads is not None):
        raise _usage("E0701", "--workers and --threads-per-worker start a local cluster; with --scheduler the "
                              "cluster is the scheduler's")
    if any(n is not None and n < 1 for n in (workers, threads)):
        raise _usage("E0701", "--workers and --threads-per-worker must be at least 1")
    from .dask_run import DaskOptions, DaskRun

    return DaskRun(opts, dask=DaskOptions(scheduler, workers, threads, persist)).execute()


def _run_remote(program: Path, server: Optional[str], dataset: list[str], data: list[str], budget: Optional[str],
                param: list[str], seed: Optional[int], ledger: Optional[Path], fmt: str, entry: str,
                delta: Optional[str] = None) -> int:
    """`fuzzpy run --server URL --dataset NAME`: the curator service runs it (fuzzpy/serve)."""
    from ..serve.client import run_remote
    from .checkcmd import parse_budget, parse_delta, parse_params

    if server is None or not dataset:
        raise _usage("E0701", "--server URL and --dataset NAME go together")
    if data or seed is not None or ledger is not None:
        raise _usage("E0701", "with --server the data, the noise and the ledger are the curator's: "
                              "--data, --seed and --ledger cannot be used")
    parse_budget(budget), parse_delta(delta)
    return run_remote(program, server, dataset, parse_params(param), entry, budget, fmt, delta)


def _usage(code: str, message: str) -> typer.Exit:
    print_diagnostics([Diagnostic(code, message)])
    return typer.Exit(EXIT_USAGE)


def print_diagnostics(diags: list[Diagnostic], sources: Optional[dict[str, str]] = None) -> None:
    for d in diags:
        typer.echo(render(d, sources), err=True)


def exit_code_for(diags: list[Diagnostic]) -> int:
    from .checkcmd import exit_code_for as codes

    return codes(diags)


@dataclass
class _Options:
    program: Path
    data: list[str]
    budget: Optional[Fraction]
    params: dict[str, str]
    seed: Optional[int]
    ledger: Optional[Path]
    fmt: str
    entry: str
    delta: Optional[Fraction] = None
    rho: Optional[Fraction] = None
    plot: Optional[Path] = None
    header: bool = False  # text data files must start with a header naming every declared column


@dataclass
class _Charge:
    dataset: str
    id: int
    files: tuple[str, ...] = ()  # shown instead of the dataset's hash: a hash of private rows is not output


@dataclass
class _Run:
    opts: _Options
    report: Any = None
    charges: list[_Charge] = field(default_factory=list)
    data_paths: dict[str, Any] = field(default_factory=dict)
    book: Any = None
    ledger_path: Optional[Path] = None
    stage: str = "check"
    kept: dict = field(default_factory=dict)  # table -> KeptCodes, from a holder of the tables (serve)
    # One run in this process (the command line): the objects alive when the run starts (the
    # modules, the checked program, the loaded table) are left out of the cyclic garbage
    # collector's full passes while it runs (gc.freeze; a full pass over them cost 15 of the 130 ms
    # of a decision tree's run), and given back to it after.  A service running several programs
    # at once does not (freezing is process-wide).
    freeze_heap: bool = True

    # -- the pipeline: check -> budget -> load -> charge -> run -> release ---------------------------

    def execute(self) -> int:
        try:
            return self._execute()
        finally:
            if self.book is not None:
                self.book.close()

    def _execute(self) -> int:
        o = self.opts
        self.report = self.check_program()
        if self.report.ok and self.report.guarantee is not None and self.report.guarantee.epsilon is None:
            # The ledger books (epsilon, delta): a program that needs a delta runs with one.
            from . import report as R

            self.report.diagnostics.append(R.needs_delta(self.report))
        if not self.report.ok:
            return self.fail_check()
        try:
            self.stage = "arguments"
            if self.report.budget is None and self.report.rho_budget is None:
                raise _usage_error("fuzzpy run needs a budget: pass --budget B (or --rho R) or declare it in the "
                                   "program with the line '# fuzzpy: budget B'")
            spec = match_data(o.data, table_inputs(self.report))
            if o.seed is not None:
                typer.echo(SEED_WARNING, err=True)
            self.stage = "data"
            tables, identities = self.load(spec)
            if o.seed is None:
                self.stage = "ledger"
                self.charge(identities)
        except FuzzError as exc:
            return self.fail(exc.diagnostics, self.stage)
        return self.run_and_release(tables)

    def check_program(self) -> Any:
        """The checked program with its budget applied (the curator service checks text it was sent)."""
        from . import report as R

        o = self.opts
        return R.check_with_budget(o.program, o.params, o.entry, o.budget, o.delta, o.rho)

    def wait_for(self, handle: Any) -> None:
        """Wait for the run to end (the curator service bounds this wait)."""
        _wait_with_progress(handle, self.report.entry)

    def load(self, spec: dict[str, Path]) -> tuple[dict[str, Any], dict[str, str]]:
        """Every table, and each file's identity: the hash of exactly the bytes that were parsed."""
        from ..runtime.columns import columns_read
        from ..runtime.data import load_identified

        schemas = dict(table_inputs(self.report))
        self.data_paths = dict(spec)
        keep = columns_read(self.report.entry_instance)  # the columns the program can read
        tables, identities = {}, {}
        for name, path in spec.items():
            try:
                tables[name], identity = load_identified(path, schemas[name], table=name,
                                                         header=self.opts.header, keep=keep)
            except FuzzError:
                raise
            except Exception:  # noqa: BLE001 - a loader bug: its text could quote the file
                raise FuzzError(Diagnostic("E0502", f"data file '{path}' for table '{name}' could not be loaded "
                                                    "(internal error); nothing was charged")) from None
            if self.opts.seed is None:
                identities[name] = identity
        return tables, identities

    def charge(self, identities: dict[str, str]) -> None:
        """Book the program's epsilon on every distinct dataset before anything runs."""
        from ..runtime.ledger import default_ledger_path, open_ledger, program_hash

        o, report = self.opts, self.report
        self.ledger_path = Path(o.ledger).expanduser() if o.ledger is not None else default_ledger_path()
        self.book = open_ledger(self.ledger_path)
        # The program and every library it imports: a changed stdlib function is another program.
        source = report.sources.get(report.file, "") + "".join(
            f"\n# imported: {name}\n{text}" for name, text in sorted(report.sources.items()) if name != report.file)
        digest = program_hash(source, o.params)
        label = f"{o.program.name}:{report.entry}"
        amounts = dataset_amounts(report, identities)
        files = {d: tuple(str(self.data_paths[n]) for n, dd in identities.items() if dd == d) for d in amounts}
        try:
            g = report.guarantee
            ids = self.book.charge_many(amounts, digest, label,  # all datasets or none
                                        g.stated_delta, None if report.is_pure else report.rho,
                                        loss=run_loss(report))
        except FuzzError as exc:
            raise _name_files(exc, files) from None
        self.charges.extend(_Charge(d, i, files[d]) for d, i in zip(amounts, ids))

    def finish(self, status: str) -> Optional[FuzzError]:
        problem = None
        for c in self.charges:
            try:
                self.book.finish(c.id, status)
            except FuzzError as exc:
                problem = exc
        return problem

    def run_and_release(self, tables: dict[str, Any]) -> int:
        from ..runtime.interpreter import RunFailure, start_run
        from ..runtime.samplers import RandomSource

        o = self.opts
        rng = RandomSource.seeded(o.seed) if o.seed is not None else RandomSource()
        with _heap_frozen(self.freeze_heap):
            handle = start_run(self.report.entry_instance, tables, rng, user_file=self.report.file,
                               kept=self.kept)
            try:
                self.wait_for(handle)
                result = handle.result()
            except KeyboardInterrupt:
                self.finish("failed")
                typer.echo("interrupted; the epsilon charged for this run stays spent", err=True)
                return 130
            except RunFailure as exc:
                return self.fail_run(exc.diagnostics, handle.state.releases, handle.state.estimates)
            except BaseException:  # noqa: BLE001 - its text could depend on the data: never shown
                diag = Diagnostic("E0604", _GENERIC_FAILURE.format(entry=self.report.entry), None, [_KEPT_NOTE])
                return self.fail_run([diag], handle.state.releases, handle.state.estimates)
        problem = self.finish("released") if self.charges else None
        if not self.emit_released(result):
            return EXIT_RUNTIME
        if self.opts.plot is not None and result.releases:
            from .plot import plot_releases

            try:
                plot_releases(self.release_rows(result.releases, getattr(result, "estimates", [])), self.opts.plot, f"{self.report.file} ({self.report.entry})")
            except FuzzError as exc:
                print_diagnostics(exc.diagnostics)
                return EXIT_USAGE
        if problem is not None:
            print_diagnostics(problem.diagnostics)
            return EXIT_RUNTIME
        return EXIT_OK

    # -- output -------------------------------------------------------------------------------------

    def fail_check(self) -> int:
        from . import report as R

        if self.opts.fmt == "json":
            for d in self.report.diagnostics:
                typer.echo(render(d, self.report.sources), err=True)
            typer.echo(dumps({**R.report_json(self.report), "stage": "check"}, indent=2))
        else:
            R.print_text(self.report)
        return exit_code_for(self.report.diagnostics)

    def fail(self, diags: list[Diagnostic], stage: str) -> int:
        print_diagnostics(diags, self.report.sources)
        if self.opts.fmt == "json":
            typer.echo(dumps({"ok": False, "stage": stage, "file": self.report.file,
                              "diagnostics": [d.to_json() for d in diags]}, indent=2))
        code = exit_code_for(diags)
        return code if code != EXIT_OK else EXIT_RUNTIME

    def fail_run(self, diags: list[Diagnostic], releases: list, estimates: list) -> int:
        """What was released before the failure is charged, so it is shown, with its estimates
        (post-processing of those releases: they reveal nothing more)."""
        self.finish("failed")
        print_diagnostics(diags, self.report.sources)
        if self.opts.fmt == "json":
            typer.echo(dumps({**self.header_json(), "ok": False, "stage": "run",
                              "diagnostics": [d.to_json() for d in diags],
                              "releases": self.releases_json(releases),
                              "estimates": self.estimates_json(estimates)}, indent=2))
        elif releases:
            typer.echo("released before the failure (charged):")
            for line in self.releases_text(releases):
                typer.echo("  " + line)
            if estimates:
                typer.echo(ESTIMATES_HEADING)
                for line in self.estimates_text(estimates):
                    typer.echo("  " + line)
        return EXIT_RUNTIME

    def emit_released(self, result: Any) -> bool:
        """Print what was released.  The formatting below is total (every number is bounded
        first); should it still fail, the released values are printed plainly, never lost."""
        try:
            self.emit_success(result)
            return True
        except Exception as exc:  # noqa: BLE001 - a bug in fuzzpy's formatting, after the release
            from .checkcmd import internal_error

            print_diagnostics([internal_error(type(exc))])
            typer.echo("released (printed plainly after an internal error):")
            for r in result.releases:
                typer.echo(f"  {r.name or '?'} = {r.value!s}")
            return False

    def emit_success(self, result: Any) -> None:
        report = self.report
        inner = getattr(report.entry_type, "inner", None)
        estimates = getattr(result, "estimates", [])
        if self.opts.fmt == "json":
            typer.echo(dumps({**self.header_json(), "ok": True,
                              "releases": self.releases_json(result.releases),
                              "estimates": self.estimates_json(estimates),
                              "result": value_json(result.value, inner), "spending": self.spending_json()}, indent=2))
            return
        if self.opts.fmt == "csv":
            typer.echo(self.releases_csv(result.releases, estimates), nl=False)
            for line in self.spending_text():
                typer.echo(line, err=True)
            return
        typer.echo(self.header_text())
        if result.releases:
            typer.echo("released:")
            for line in self.releases_text(result.releases):
                typer.echo("  " + line)
        if estimates:
            typer.echo(ESTIMATES_HEADING)
            for line in self.estimates_text(estimates):
                typer.echo("  " + line)
        typer.echo(f"result: {value_text(result.value, inner)}")
        for line in self.spending_text():
            typer.echo(line)

    def spending_text(self) -> list[str]:
        """Each charged dataset's total spent and its cap, after this run (docs/ledger.md)."""
        out = []
        for entry in self.spending_json():
            unit = {None: "", "epsilon": "", "rho": "rho "}[entry["notion"]]
            if entry["cap_delta"] is not None:
                unit = f"epsilon (at delta {entry['cap_delta']}) "
            head = f"ledger: {entry['files']} has spent {unit}{entry['spent']} in total"
            out.append(head + (f" of its cap {entry['cap']} ({entry['remaining']} left)" if entry["cap"] is not None
                               else "; it has no cap (set one with fuzzpy ledger set-cap)"))
        return out

    def spending_json(self) -> list[dict]:
        if self.book is None:
            return []
        out = []
        for c in self.charges:
            use = self.book.usage(c.dataset)  # in the notion of the dataset's cap (docs/ledger.md)
            cap = use.cap
            out.append({"files": ", ".join(c.files), "spent": "inf" if use.spent == math.inf else show(use.spent),
                        "cap": None if cap is None else show(self.book.cap(c.dataset)),
                        "remaining": None if cap is None else show(use.remaining),
                        "notion": None if cap is None else ("rho" if hasattr(cap, "rho") else "epsilon"),
                        "cap_delta": None if cap is None or hasattr(cap, "rho") or not cap.delta
                        else show(cap.delta)})
        return out

    def estimates_json(self, estimates: list) -> list[dict]:
        from .results import estimate_labels, estimate_location, labels

        names = estimate_labels(estimates, self.report.file, self.report.sources)
        return [estimate_json(e, name, estimate_location(e, self.report.file),
                              labels(list(e.sources), self.report.file, self.report.sources))
                for e, name in zip(estimates, names)]

    def estimates_text(self, estimates: list) -> list[str]:
        return [estimate_text(js) for js in self.estimates_json(estimates)]

    def release_rows(self, releases: list, estimates: Optional[list] = None) -> list[dict]:
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(self.releases_csv(releases, estimates))))
        values = [js["value"] for js in self.releases_json(releases)] + \
            [js["value"] for js in self.estimates_json(estimates or [])]
        for row, value in zip(rows, values):
            row["value"] = value
            row["low"] = float(row["low"]) if row["low"] else ""
            row["high"] = float(row["high"]) if row["high"] else ""
        return rows

    def releases_csv(self, releases: list, estimates: Optional[list] = None) -> str:
        """label,key,value,epsilon,low,high,accuracy,where: one row per released value, then one
        per estimate (epsilon 0: computed from the releases, it costs nothing more)."""
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["label", "key", "value", "epsilon", "low", "high", "accuracy", "where"])
        for rel, js in zip(releases, self.releases_json(releases)):
            acc = js["accuracy"] or {}
            value = js["value"]
            low = high = ""
            if acc.get("what", "").startswith("|noise|") and isinstance(value, (int, float)) and not isinstance(value, bool):
                low, high = value - acc["bound"], value + acc["bound"]
            w.writerow([js["label"], "/".join(rel.keys), value if not isinstance(value, (list, dict)) else dumps(value),
                        js["epsilon"], low, high, acc.get("words", ""), js["where"] or ""])
        for js in self.estimates_json(estimates or []):
            w.writerow([js["label"], "/".join(js["keys"]), js["value"], 0,
                        "" if js["low"] is None else js["low"], "" if js["high"] is None else js["high"],
                        js["words"], js["where"] or ""])
        return buf.getvalue()

    def releases_text(self, releases: list) -> list[str]:
        """Named after the user's code, located relative to the program (interfaces/results.py)."""
        from .results import labels, location

        names = labels(releases, self.report.file, self.report.sources)
        return [release_text(r, self.report.sources, name, location(r, self.report.file))
                for r, name in zip(releases, names)]

    def releases_json(self, releases: list) -> list[dict]:
        from .results import labels, location

        names = labels(releases, self.report.file, self.report.sources)
        return [{**release_json(r, self.report.sources), "label": name, "where": location(r, self.report.file)}
                for r, name in zip(releases, names)]

    def header_text(self) -> str:
        r = self.report
        head = f"{r.file} ({r.entry}): {spent_text(r)}"
        if self.opts.seed is not None:
            return head + f"; seeded test run (seed {self.opts.seed}): NOT private, nothing charged"
        where = ", ".join(f for c in self.charges for f in c.files)
        return head + f"; charged on {where} in {self.ledger_path}"

    def header_json(self) -> dict:
        from . import report as R

        r, g = self.report, self.report.guarantee
        return {"file": r.file, "entry": r.entry, "epsilon": R.number(g.epsilon), "epsilon_exact": R.exact(g.epsilon),
                "delta": R.number(g.stated_delta), "delta_exact": R.exact(g.stated_delta), "pure": r.is_pure,
                "rho": R.number(r.rho), "rho_exact": R.exact(r.rho),
                "budget": R.number(r.budget), "budget_exact": R.exact(r.budget),
                "rho_budget": R.number(r.rho_budget), "rho_budget_exact": R.exact(r.rho_budget),
                "seeded": self.opts.seed is not None,
                "warning": SEED_WARNING if self.opts.seed is not None else None,
                "ledger": None if self.opts.seed is not None or self.ledger_path is None else {
                    "path": str(self.ledger_path),
                    "charges": [{"files": list(c.files), "id": c.id} for c in self.charges]}}


def spent_text(r: Any) -> str:
    """What a run costs, against its budgets: epsilon (at its delta when not pure) and rho."""
    g = r.guarantee
    cost = f"epsilon {show(g.epsilon)}" + ("" if g.method == "pure" else f" at delta {show(g.delta)}")
    if not r.is_pure:
        cost += f" (rho {show(r.rho)})"
    budgets = [f"budget {show(r.budget)}" if r.budget is not None else "",
               f"rho budget {show(r.rho_budget)}" if r.rho_budget is not None else ""]
    return cost + " of " + " and ".join(b for b in budgets if b)


def _name_files(exc: FuzzError, files: dict[str, tuple[str, ...]]) -> FuzzError:
    """The ledger names datasets by hash; run output names the data files instead (a hash of
    private rows is not shown to whoever reads a run's output)."""
    from ..runtime.ledger import short_id

    for d in exc.diagnostics:
        for dataset, names in files.items():
            d.message = d.message.replace(short_id(dataset), ", ".join(names))
    return exc


@contextmanager
def _heap_frozen(freeze: bool) -> Iterator[None]:
    """The objects alive now left out of the garbage collector's passes until the block ends
    (`_Run.freeze_heap`)."""
    if not freeze:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _usage_error(message: str) -> FuzzError:
    return FuzzError(Diagnostic("E0701", message))


def _wait_with_progress(handle: Any, entry: str) -> None:
    """Wait for the run; after PROGRESS_AFTER_S, show that it is still going (stderr only)."""
    start = time.monotonic()
    tty = sys.stderr.isatty()
    shown = last = 0.0
    while not handle.wait(0.1):
        elapsed = time.monotonic() - start
        if elapsed < PROGRESS_AFTER_S:
            continue
        if tty:
            typer.echo(f"\rfuzzpy: running {entry}... {elapsed:.0f}s", nl=False, err=True)
            shown = elapsed
        elif not shown or elapsed - last >= 30:
            typer.echo(f"fuzzpy: running {entry}... ({elapsed:.0f}s so far)", err=True)
            shown = last = elapsed
    if tty and shown:
        typer.echo("\r\033[K", nl=False, err=True)


# ---- tables: which entry parameter reads which file ---------------------------------------------

def table_inputs(report: Any) -> list[tuple[str, Any]]:
    """(parameter, schema) for each entry parameter; every one must be `bag Schema`."""
    out = []
    for inp in report.inputs:
        schema = report.table_schema(inp)
        if schema is None:
            raise _usage_error(f"entry parameter '{inp.name}' has type {inp.type}; fuzzpy run can only bind "
                               "parameters of type bag Schema to data files")
        out.append((inp.name, schema))
    return out


def match_data(items: list[str], inputs: list[tuple[str, Any]]) -> dict[str, Path]:
    """--data PATH (one table) or --data NAME=PATH (by entry parameter name)."""
    names = [n for n, _ in inputs]
    named: dict[str, Path] = {}
    plain: list[Path] = []
    for item in items:
        name, sep, rest = item.partition("=")
        if sep and _NAME.fullmatch(name) and not Path(item).exists():
            if name in named:
                raise _usage_error(f"--data {name}=... is given twice")
            named[name] = Path(rest)
        else:
            plain.append(Path(item))
    if plain:
        if len(plain) > 1 or named or len(names) != 1:
            raise _usage_error("give one --data PATH for a program with one table, or --data NAME=PATH for each "
                               f"of its tables ({', '.join(names) or 'none'})")
        named[names[0]] = plain[0]
    known = ", ".join(names) or "(none)"
    diags = [Diagnostic("E0507", f"data given for unknown table '{n}'; the entry point's tables: {known}")
             for n in named if n not in names]
    diags += [Diagnostic("E0506", f"no data file given for table '{n}'", None,
                         [f"pass --data {n}=PATH" if len(names) > 1 else "pass --data PATH"])
              for n in names if n not in named]
    if diags:
        raise FuzzError(diags)
    return {n: named[n] for n in names}


# ---- rendering released values -------------------------------------------------------------------

def source_text(span: Any, sources: dict[str, str], limit: int = 60) -> str:
    text = sources.get(span.file) if span is not None else None
    if text is None:
        return "?"
    lines = text.splitlines()
    if not 1 <= span.line <= len(lines):
        return "?"
    line = lines[span.line - 1]
    end = span.end_col - 1 if span.end_line == span.line else len(line)
    out = line[span.col - 1:end].strip()
    out += ")" * max(0, out.count("(") - out.count(")"))  # spans stop before an argument's ")"
    if span.end_line != span.line:
        out += " ..."
    return out if len(out) <= limit else out[:limit - 3] + "..."


def release_label(r: Any, sources: dict[str, str]) -> str:
    base = r.name or source_text(r.span, sources)
    return base + "".join(f"[{k}]" for k in r.keys)


def _accuracy_parts(acc: Any) -> tuple[Optional[float], Optional[float], str]:
    """(bound, beta, what) of a mechanism's accuracy statement."""
    if acc is None:
        return None, None, ""
    if isinstance(acc, (int, float, Fraction)):
        return to_float(acc), 0.05, "|noise|"
    bound, beta, what = getattr(acc, "bound", None), getattr(acc, "beta", 0.05), getattr(acc, "what", "")
    return (None if bound is None else to_float(bound)), to_float(beta), str(what)


def accuracy_words(acc: Any, value: Any) -> str:
    if hasattr(acc, "describe"):  # a statement restated in the user's units (primitives/estimates.py)
        return acc.describe()
    bound, beta, what = _accuracy_parts(acc)
    if bound is None:
        return ""
    pct = f"{100 * (1 - beta):g}%"
    if what.startswith("|noise|"):
        joint = "all " if isinstance(value, tuple) else ""  # one bound for every coordinate at once
        return f"{joint}within +-{bound:.4g} with {pct} probability"
    if not beta:
        return f"{what} <= {bound:.4g}"
    return f"{what} <= {bound:.4g} with {pct} probability"


def _decimals(acc: Any) -> Optional[int]:
    bound, _, what = _accuracy_parts(acc)
    if bound is None or not what.startswith("|noise|") or not bound > 0 or not math.isfinite(bound):
        return None
    return max(0, min(10, 2 - math.floor(math.log10(bound))))


def release_text(r: Any, sources: dict[str, str], label: Optional[str] = None, where: Optional[str] = None) -> str:
    value = value_text(r.value, None, _decimals(r.accuracy))
    words = "; ".join(w for w in (_cost_words(r), accuracy_words(r.accuracy, r.value)) if w)
    if where is None:
        where = f"{r.span.file}:{r.span.line}" if r.span is not None else None
    else:
        where = where.rsplit(":", 1)[0]  # file:line
    return f"{label or release_label(r, sources)} = {value}  ({words})" + (f"  [{where}]" if where else "")


def _cost_words(r: Any) -> str:
    if r.mechanism == "gaussian":
        return f"rho {show(r.extra.get('rho', 0))}"
    return f"epsilon {show(r.epsilon)}"


def release_json(r: Any, sources: dict[str, str]) -> dict:
    from . import report as R

    bound, beta, what = _accuracy_parts(r.accuracy)
    loc = None if r.span is None else {"file": r.span.file, "line": r.span.line, "col": r.span.col}
    return {"name": r.name, "keys": list(r.keys), "mechanism": r.mechanism, "location": loc,
            "source": source_text(r.span, sources), "epsilon": R.number(r.epsilon), "epsilon_exact": R.exact(r.epsilon),
            **({"rho": R.number(r.extra.get("rho", 0)), "rho_exact": R.exact(r.extra.get("rho", 0))}
               if r.mechanism == "gaussian" else {}),
            "scale": R.number(r.scale), "scale_exact": R.exact(r.scale),
            "accuracy": None if bound is None else {"bound": bound, "beta": beta, "what": what,
                                                    "words": accuracy_words(r.accuracy, r.value),
                                                    **_rank_json(r.accuracy)},
            "value": value_json(r.value, None)}


def _rank_json(acc: Any) -> dict:
    """A quantile's statement in ranks: its level and the neighbouring candidates (public)."""
    if not hasattr(acc, "q"):
        return {}
    return {"quantile": to_float(acc.q), "neighbours": [None if c is None else to_float(c)
                                                        for c in (acc.below, acc.above)]}


ESTIMATES_HEADING = "estimated from the releases (post-processing, no further cost):"


def estimate_json(e: Any, label: str, where: Optional[str], source_labels: list[str]) -> dict:
    """An estimate: its value, its interval for the exact quantity (or none), and in words."""
    def num(x: Any, up: bool) -> Optional[float]:
        """A bound as a float rounded outwards: the interval printed is never narrower."""
        if x is None:
            return None
        f = to_float(x)
        if isinstance(x, Fraction) and math.isfinite(f):
            if up and Fraction(f) < x:
                f = math.nextafter(f, math.inf)
            elif not up and Fraction(f) > x:
                f = math.nextafter(f, -math.inf)
        return f

    return {"label": label, "kind": e.kind, "keys": list(e.sources[0].keys), "value": value_json(e.value),
            "low": num(e.low, False), "high": num(e.high, True), "beta": to_float(e.beta), "bounded": e.bounded,
            "words": e.words, "from": source_labels, "where": where}


def estimate_text(js: dict) -> str:
    decimals = None
    if js["low"] is not None and js["high"] is not None and js["high"] > js["low"]:
        half = (js["high"] - js["low"]) / 2
        decimals = max(0, min(10, 2 - math.floor(math.log10(half))))
    value = _num_text(js["value"], decimals) if isinstance(js["value"], (int, float)) else value_text(js["value"])
    where = f"  [{js['where'].rsplit(':', 1)[0]}]" if js["where"] else ""
    return f"{js['label']} = {value}  ({js['words']}; from {' and '.join(js['from'])}){where}"


def _num_text(x: Any, decimals: Optional[int]) -> str:
    x = to_float(x)
    if not math.isfinite(x):
        return str(x)
    if decimals is not None and abs(x) < 1e15:
        return f"{x:.{decimals}f}"
    return f"{x:.7g}"


def value_text(v: Any, t: Any = None, decimals: Optional[int] = None) -> str:
    """A released or post-processed value in fuzzpy's notation, guided by its type when known."""
    from ..checking import types as T

    v = _plain(v)
    if isinstance(t, T.Fuzzy):
        return "<distribution>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return _num_text(v, decimals)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if v is None:
        return "()"
    if isinstance(v, dict):
        elem = t.elem if isinstance(t, T.Parts) else None
        fields = dict(t.fields) if isinstance(t, T.Record) else {}
        if isinstance(t, T.Parts):
            return "{" + ", ".join(f"{json.dumps(k)}: {value_text(x, elem, decimals)}" for k, x in v.items()) + "}"
        return "{" + ", ".join(f"{k} = {value_text(x, fields.get(k), decimals)}" for k, x in v.items()) + "}"
    if isinstance(v, tuple):
        return _tuple_text(v, t, decimals)
    return "<" + ("bag" if _is_bag(v) else "function" if callable(v) else "value") + ">"


def _tuple_text(v: tuple, t: Any, decimals: Optional[int]) -> str:
    from ..checking import types as T

    if isinstance(t, T.SumT) and len(v) == 2 and v[0] in ("inl", "inr"):
        return f"{v[0]} {value_text(v[1], t.left if v[0] == 'inl' else t.right, decimals)}"
    if isinstance(t, T.ListT):
        return "[" + ", ".join(value_text(x, t.elem, decimals) for x in v) + "]"
    items = t.items if isinstance(t, (T.Tensor, T.With)) and len(t.items) == len(v) else [None] * len(v)
    inner = ", ".join(value_text(x, it, decimals) for x, it in zip(v, items))
    return f"(|{inner}|)" if isinstance(t, T.With) else f"({inner})"


def _plain(v: Any) -> Any:
    """numpy scalars as Python ones (np.float64 is a float already; np.bool_ and ints are not),
    and exact numbers (released values after exact post-processing) as floats for display."""
    if isinstance(v, Fraction):
        return to_float(v)
    if type(v).__module__ == "numpy" and hasattr(v, "item"):
        try:
            return v.item()
        except (TypeError, ValueError):
            return v
    return v


def _is_bag(v: Any) -> bool:
    from ..runtime.values import is_bag

    return is_bag(v)


def value_json(v: Any, t: Any = None) -> Any:
    from ..checking import types as T

    v = _plain(v)
    if isinstance(t, T.Fuzzy):
        return "<distribution>"
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        x = to_float(v)
        return x if math.isfinite(x) else str(x)
    if isinstance(v, str) or v is None:
        return v
    if isinstance(v, dict):
        elem = t.elem if isinstance(t, T.Parts) else None
        fields = dict(t.fields) if isinstance(t, T.Record) else {}
        return {str(k): value_json(x, elem if elem is not None else fields.get(k)) for k, x in v.items()}
    if isinstance(v, tuple):
        if isinstance(t, T.SumT) and len(v) == 2 and v[0] in ("inl", "inr"):
            return {v[0]: value_json(v[1], t.left if v[0] == "inl" else t.right)}
        if isinstance(t, T.ListT):
            return [value_json(x, t.elem) for x in v]
        items = t.items if isinstance(t, (T.Tensor, T.With)) and len(t.items) == len(v) else [None] * len(v)
        return [value_json(x, it) for x, it in zip(v, items)]
    return "<bag>" if _is_bag(v) else "<value>"


def run_loss(report: Any) -> Any:
    """The run's ProvenLoss for the ledger's cap check (None when a figure is unbounded: such a
    program is refused before it is charged)."""
    from ..checking.sens import INF
    from .guarantee import proven_loss

    if INF in (report.epsilon, report.rho):
        return None
    return proven_loss(report)


def dataset_amounts(report: Any, identities: dict[str, str]) -> dict[str, Any]:
    """Every distinct dataset is charged the program's total epsilon (at the run's delta when it
    is not pure): one person may appear in several tables, so the loss of any one of them is at
    most the total (docs/ledger.md)."""
    return {dataset: report.guarantee.epsilon for dataset in dict.fromkeys(identities.values())}
