"""`fuzzpy run`: the command line's side of the run pipeline (fuzzpy/pipeline/session.py).

This module reads the options, runs the program through `Session.execute` with the data files
(`FileTables`, or `DaskTables` for `--engine dask`) and the local ledger, and prints the outcome
as `pipeline.output` renders it.  With `--server`, the curator service runs it instead
(fuzzpy/serve/client.py).  Mounted by cli.py through `register(app)`.

Typer is imported by `register` only: a plain `fuzzpy run` calls `run` directly
(checkcmd.fast_run), and importing typer is a tenth of a Laplace count's whole process.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence

from ..diagnostics import Diagnostic, render
from ..pipeline.local import EmptyAdvice, FileTables
from ..render.exits import EXIT_USAGE

if TYPE_CHECKING:
    import typer

PROGRESS_AFTER_S = 2.0


def register(app: typer.Typer) -> None:
    app.command("run")(_typer_command())


def _typer_command() -> Callable[..., None]:
    """`run` with the command line's options and help, for typer."""
    import typer

    def run_command(
        program: Path = typer.Argument(..., help="The program (.fz) to run."),
        data: List[str] = typer.Option([], "--data", help="Data file for the private table (PATH), or NAME=PATH for "
                                                          "the entry parameter NAME (repeatable)."),
        public: List[str] = typer.Option([], "--public", help="Data file for a public table: NAME=PATH for the entry "
                                                              "parameter NAME of a public schema (repeatable; not "
                                                              "charged)."),
        budget: Optional[str] = typer.Option(None, "--budget", help="Refuse to run if the program's epsilon exceeds "
                                                                    "this (default: the program's '# fuzzpy: budget' "
                                                                    "pragma)."),
        delta: Optional[str] = typer.Option(None, "--delta", help="State the guarantee as (epsilon, delta) at this "
                                                                  "delta (needed for Gaussian releases)."),
        rho: Optional[str] = typer.Option(None, "--rho", help="Refuse to run if the program's zCDP rho exceeds this."),
        param: List[str] = typer.Option([], "--param", help="Public parameter NAME=VALUE (repeatable)."),
        seed: Optional[int] = typer.Option(None, "--seed", help="TESTING ONLY: reproducible noise, no privacy, no "
                                                                "ledger."),
        ledger: Optional[Path] = typer.Option(None, "--ledger", readable=False,  # unreadable: the ledger's E0602
                                              help="Ledger file (default: $FUZZPY_LEDGER or ~/.fuzzpy/ledger.sqlite)."),
        fmt: str = typer.Option("text", "--format", help="text, json or csv (one row per released value)."),
        entry: str = typer.Option("main", "--entry", help="Name of the entry point."),
        server: Optional[str] = typer.Option(None, "--server",
                                              help="Run on a curator service (URL) instead of local data."),
        dataset: List[str] = typer.Option([], "--dataset",
                                             help="With --server: dataset NAME, or PARAMETER=NAME (repeatable)."),
        plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw the released numbers with their accuracy "
                                                                 "as error bars into this PNG (needs matplotlib)."),
        header: bool = typer.Option(False, "--header", help="Text data files start with a header naming every "
                                                            "declared column; a missing one is named in the error."),
        engine: str = typer.Option("pandas", "--engine", help="pandas (one process) or dask (a partitioned table on a "
                                                              "Dask cluster; docs/scale.md)."),
        scheduler: Optional[str] = typer.Option(None, "--scheduler", help="With --engine dask: the address of an "
                                                                          "existing Dask scheduler (default: a local "
                                                                          "cluster)."),
        workers: Optional[int] = typer.Option(None, "--workers", help="With --engine dask: local cluster workers."),
        threads: Optional[int] = typer.Option(None, "--threads-per-worker", help="With --engine dask: threads per "
                                                                                 "local worker."),
        persist: bool = typer.Option(False, "--persist", help="With --engine dask: keep the conformed table on the "
                                                              "workers between passes (spilled to their disks)."),
        allow_empty: bool = typer.Option(False, "--allow-empty", help="Run even when a table has no rows after "
                                                                      "loading (its releases are then noise alone); "
                                                                      "without it such a run is refused before the "
                                                                      "charge."),
    ) -> None:
        """Check a program, charge its epsilon, run it over the data and print the released values."""
        run(program, data, public, budget, delta, rho, param, seed, ledger, fmt, entry, server, dataset, plot, header,
            engine, scheduler, workers, threads, persist, allow_empty)

    return run_command


def run(program: Path, data: Sequence[str] = (), public: Sequence[str] = (), budget: Optional[str] = None,
        delta: Optional[str] = None, rho: Optional[str] = None, param: Sequence[str] = (), seed: Optional[int] = None,
        ledger: Optional[Path] = None, fmt: str = "text", entry: str = "main", server: Optional[str] = None,
        dataset: Sequence[str] = (), plot: Optional[Path] = None, header: bool = False, engine: str = "pandas",
        scheduler: Optional[str] = None, workers: Optional[int] = None, threads: Optional[int] = None,
        persist: bool = False, allow_empty: bool = False) -> None:
    """`fuzzpy run`: ends by raising SystemExit with the exit code (as typer.Exit would)."""
    from .checkcmd import parse_budget, parse_delta, parse_params, parse_rho

    if fmt not in ("text", "json", "csv"):
        raise _usage("E0701", f"--format must be text, json or csv, got '{fmt}'")
    if (server is not None or dataset) and engine != "pandas":
        raise _usage("E0701", "--engine is for local data; with --server the curator decides how a program runs")
    if server is not None or dataset:
        if public:
            raise _usage("E0701", "with --server the curator's registered public tables are used: --public cannot "
                                  "be given")
        raise SystemExit(_run_remote(program, server, dataset, data, budget, param, seed, ledger, fmt, entry, delta))
    if plot is not None:
        _check_plot_available()
    if seed is not None and ledger is not None:
        raise _usage("E0603", "--seed and --ledger cannot be used together: a seeded run is not private, so it is "
                     "never recorded in a ledger")
    opts = RunOptions(program, data, parse_budget(budget), parse_params(param), seed, ledger, fmt, entry,
                      parse_delta(delta), parse_rho(rho), plot, header, list(public), allow_empty)
    tables: Any = FileTables(list(data), header, list(public), EmptyAdvice(allow_empty))
    if engine != "pandas" or scheduler is not None or workers is not None or threads is not None or persist:
        tables = _dask_tables(opts, engine, scheduler, workers, threads, persist)
    raise SystemExit(run_local(opts, tables))


def _check_plot_available() -> None:
    """`--plot` needs matplotlib: checked before anything is read or charged, not after the run."""
    try:
        import matplotlib  # noqa: F401 - only whether it imports
    except ImportError:
        raise _usage("E0701", "--plot needs matplotlib, which is not installed: pip install 'fuzzpy[plot]' "
                              "(nothing was read or charged)") from None


def _dask_tables(opts: "RunOptions", engine: str, scheduler: Optional[str], workers: Optional[int],
                 threads: Optional[int], persist: bool = False) -> Any:
    """`--engine dask` (fuzzpy/pipeline/dask_tables.py)."""
    if engine == "pandas":
        raise _usage("E0701", "--scheduler, --workers, --threads-per-worker and --persist go with --engine dask")
    if engine != "dask":
        raise _usage("E0701", f"--engine must be pandas or dask, got '{engine}'")
    if scheduler is not None and (workers is not None or threads is not None):
        raise _usage("E0701", "--workers and --threads-per-worker start a local cluster; with --scheduler the "
                              "cluster is the scheduler's")
    if any(n is not None and n < 1 for n in (workers, threads)):
        raise _usage("E0701", "--workers and --threads-per-worker must be at least 1")
    from ..pipeline.dask_tables import DaskOptions, DaskTables, require_dask

    require_dask()
    return DaskTables(list(opts.data), opts.header, DaskOptions(scheduler, workers, threads, persist),
                      public=list(opts.public), empty=EmptyAdvice(opts.allow_empty))


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


def _usage(code: str, message: str) -> SystemExit:
    print_diagnostics([Diagnostic(code, message)])
    return SystemExit(EXIT_USAGE)

def print_diagnostics(diags: list[Diagnostic], sources: Optional[dict[str, str]] = None) -> None:
    for d in diags:
        _to_stderr(render(d, sources) + "\n")


@dataclass
class RunOptions:
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
    public: list[str] = field(default_factory=list)  # --public NAME=PATH
    allow_empty: bool = False  # run even on a table left without rows by loading


def run_local(opts: RunOptions, tables: Any) -> int:
    """Check, budget, load, charge (on the local ledger), run, then print what was released."""
    from ..pipeline.budget import check_with_budget
    from ..pipeline.local import LocalLedger, ledger_path
    from ..pipeline.output import printed, release_rows
    from ..pipeline.session import Session
    from .checkcmd import stdout_kept_for_the_document

    session = Session(
        check=lambda: check_with_budget(opts.program, opts.params, opts.entry, opts.budget, opts.delta, opts.rho),
        tables=tables,
        charger=None if opts.seed is not None else (lambda: LocalLedger(ledger_path(opts.ledger))),
        label=f"{opts.program.name}:{opts.entry}", params=opts.params, seed=opts.seed,
        wait=_wait_with_progress, freeze_heap=True)
    with stdout_kept_for_the_document(opts.fmt != "text"):
        outcome = session.execute()
    shown = printed(outcome, opts.fmt)
    shown.write()
    if shown.exit_code == 0 and opts.plot is not None and outcome.result.releases:
        from ..diagnostics import FuzzError
        from .plot import plot_releases

        try:
            plot_releases(release_rows(outcome), opts.plot, f"{outcome.report.file} ({outcome.report.entry})")
        except FuzzError as exc:
            print_diagnostics(exc.diagnostics)
            return EXIT_USAGE
    return shown.exit_code


def _wait_with_progress(handle: Any, report: Any) -> None:
    """Wait for the run; after PROGRESS_AFTER_S, show that it is still going (stderr only)."""
    start = time.monotonic()
    tty = sys.stderr.isatty()
    shown = last = 0.0
    while not handle.wait(0.1):
        elapsed = time.monotonic() - start
        if elapsed < PROGRESS_AFTER_S:
            continue
        if tty:
            _to_stderr(f"\rfuzzpy: running {report.entry}... {elapsed:.0f}s")
            shown = elapsed
        elif not shown or elapsed - last >= 30:
            _to_stderr(f"fuzzpy: running {report.entry}... ({elapsed:.0f}s so far)\n")
            shown = last = elapsed
    if tty and shown:
        _to_stderr("\r\033[K")


def _to_stderr(text: str) -> None:
    """Write and flush (what typer.echo did here: no text of these has colours to strip)."""
    if sys.stderr is not None:
        sys.stderr.write(text)
        sys.stderr.flush()
