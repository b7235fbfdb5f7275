"""The `fuzzpy` command line.  Heavy libraries are imported inside the commands that need them.

Exit codes: 0 success; 1 the program has errors (syntax, types, privacy); 2 usage error;
3 over budget; 4 data, ledger or runtime error.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

# The body of `fuzzpy check` and the helpers other commands share live in checkcmd, which imports
# no typer: the `fuzzpy` script runs a plain `fuzzpy check` there without loading this module.
from .checkcmd import (  # noqa: F401 - re-exported
    EXIT_BUDGET,
    EXIT_OK,
    EXIT_PROGRAM,
    EXIT_RUNTIME,
    EXIT_USAGE,
    collect_files,
    entry_for,
    exit_code_for,
    exit_process,
    guard,
    internal_error,
    parse_budget,
    parse_delta,
    parse_params,
    parse_rho,
    print_diagnostics,
    run_check,
    usage_error,
)
from .checkcmd import echo_err as _echo_err  # noqa: F401 - re-exported
from .checkcmd import silence_stdout as _silence_stdout  # noqa: F401 - re-exported
from .checkcmd import thread_excepthook as _thread_excepthook

# Typer's own handler of uncaught exceptions prints a rich traceback with local variables (rows
# of a private table among them); `main` catches everything before it could run, and it is off.
app = typer.Typer(name="fuzzpy", add_completion=False, no_args_is_help=True,
                  pretty_exceptions_enable=False, pretty_exceptions_show_locals=False,
                  help="fuzzpy: a checked language for differentially private data analysis.")


@app.command()
def check(
    paths: List[Path] = typer.Argument(..., help="Program files or folders of .fz files."),
    budget: Optional[str] = typer.Option(None, "--budget", help="Fail if a program's epsilon exceeds this "
                                                                "(at --delta when it is not pure)."),
    delta: Optional[str] = typer.Option(None, "--delta", help="State the guarantee as (epsilon, delta) at this delta."),
    rho: Optional[str] = typer.Option(None, "--rho", help="Fail if a program's zCDP rho exceeds this."),
    fmt: str = typer.Option("text", "--format", help="text, json or sarif."),
    param: List[str] = typer.Option([], "--param", help="Public parameter NAME=VALUE (repeatable)."),
    entry: str = typer.Option("main", "--entry", help="Name of the entry point."),
    server: Optional[str] = typer.Option(None, "--server",
                                          help="Check against a curator service's published schema (URL)."),
    dataset: List[str] = typer.Option([], "--dataset",
                                         help="With --server: dataset NAME, or PARAMETER=NAME (repeatable)."),
    formula: Optional[str] = typer.Option(None, "--formula", help="Also show the costs as formulas of the numeric "
                                          "params: text or latex (docs/formulas.md)."),
    formula_timeout: float = typer.Option(10.0, "--formula-timeout", help="Seconds to derive formulas in."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the check cache "
                                                             "(docs/performance.md)."),
) -> None:
    """Check programs and print their privacy report. Reads no data."""
    if server is not None or dataset:
        from ..serve.client import check_remote

        if fmt not in ("text", "json", "sarif"):
            raise usage_error(f"--format must be text, json or sarif, got '{fmt}'")
        parse_budget(budget), parse_delta(delta), parse_rho(rho)
        params = parse_params(param)
        if server is None or not dataset:
            raise usage_error("--server URL and --dataset NAME go together")
        if formula is not None:
            raise usage_error("--formula works on local checks only, not with --server")
        raise typer.Exit(check_remote([f for f, _ in collect_files(paths)], server, dataset, params, entry, budget, fmt,
                                      delta))
    raise typer.Exit(run_check(paths, budget, delta, rho, fmt, param, entry, use_cache=not no_cache,
                               formula=formula, formula_timeout=formula_timeout))


def _mount_optional() -> None:
    """Commands that live in their own modules (run, ledger, lsp, audit), when present."""
    import importlib

    for module, attr, kind in [("run_command", "register", "fn"), ("ledger_commands", "ledger_app", "typer"),
                               ("lsp_command", "register", "fn"), ("audit_command", "register", "fn"),
                               ("serve_command", "register", "fn"), ("analyst_commands", "register", "fn")]:
        try:
            mod = importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.endswith(module):
                continue
            raise
        obj = getattr(mod, attr)
        if kind == "typer":
            app.add_typer(obj)
        else:
            obj(app)


_mount_optional()


def run_app(args: Optional[List[str]] = None) -> int:
    """Run the command line and return its exit code.  Nothing escapes as a traceback: every
    exception ends as a coded error on stderr (checkcmd.guard)."""
    return guard(lambda: app(args=args, prog_name="fuzzpy"))


def main() -> None:  # pragma: no cover - console entry (tested through subprocesses)
    import threading

    threading.excepthook = _thread_excepthook
    exit_process(run_app())


if __name__ == "__main__":  # pragma: no cover
    main()
