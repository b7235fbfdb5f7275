"""`fuzzpy --version` and `fuzzpy data check` (docs/data.md, "Checking a data file").

`data check` is for the data owner: it reads the file and says how many rows each column's
missing-value policy dropped or filled. Those counts describe private data, so they are never
part of a release, are not charged, and the command refuses to write them anywhere but the
owner's terminal (stdout)."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

data_app = typer.Typer(name="data", help="Commands for the data owner (they read private data and print about it).",
                       no_args_is_help=True)


ROOT_HELP = """fuzzpy: a checked language for differentially private data analysis.

Examples:

  fuzzpy check examples/quickstart.fz

  fuzzpy run examples/quickstart.fz --data examples/data/adult_sample.csv --budget 0.5

  fuzzpy run examples/histogram.fz --data examples/data/adult_sample.csv --budget 0.5 --format csv

  fuzzpy ledger show

Each run's --budget limits that run; a dataset's total is capped with fuzzpy ledger set-cap.
"""


def _version(value: bool) -> None:
    if value:
        from ..version import __version__

        typer.echo(f"fuzzpy {__version__}")
        raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    @app.callback(help=ROOT_HELP)
    def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                           help="Print the version and exit.")) -> None:
        """fuzzpy: a checked language for differentially private data analysis.

        Examples:

          fuzzpy check examples/quickstart.fz

          fuzzpy run examples/quickstart.fz --data examples/data/adult_sample.csv --budget 0.5

          fuzzpy ledger show
        """

    app.add_typer(data_app)
    _plain_metavars(app)


# --help shows a word for each option's value, never a Python type name ("<list[str]>").
_METAVARS = {"data": "PATH", "budget": "B", "param": "NAME=VALUE", "seed": "N", "ledger": "PATH", "fmt": "FORMAT",
             "entry": "NAME", "cap": "EPSILON", "plot": "FILE.png", "program": "PROG.fz", "paths": "PROG.fz|FOLDER"}


def _plain_metavars(app: typer.Typer) -> None:
    """Give every option of every command a plain metavar (mounted commands included; the
    ones mounted later are covered by `plain_help`, called from cli.run_app)."""
    import inspect

    from typer.models import ArgumentInfo, OptionInfo

    for group in [app, *(g.typer_instance for g in app.registered_groups)]:
        for cmd in group.registered_commands:
            for name, param in inspect.signature(cmd.callback).parameters.items():
                info = param.default
                if isinstance(info, (OptionInfo, ArgumentInfo)) and info.metavar is None:
                    is_flag = param.annotation in (bool, "bool")
                    info.metavar = "" if is_flag else _METAVARS.get(name, name.upper())


@data_app.command("check")
def data_check(
    program: Path = typer.Argument(..., help="The program (.fz) whose schema the data must follow."),
    data: List[str] = typer.Option([], "--data", help="PATH, or NAME=PATH for the entry parameter NAME."),
    param: List[str] = typer.Option([], "--param", help="Public parameter NAME=VALUE (repeatable)."),
    entry: str = typer.Option("main", "--entry", help="Name of the entry point."),
    header: bool = typer.Option(False, "--header", help="Text data files start with a header naming every declared "
                                                        "column; a missing one is named in the error."),
) -> None:
    """PRIVATE to the data owner: rows read and kept, and rows each column's policy dropped or filled.

    Example: fuzzpy data check --data examples/data/adult_sample.csv examples/quickstart.fz
    """
    from ..checking.program import check_file
    from ..diagnostics import FuzzError
    from ..pipeline.tables import match_data, table_inputs
    from ..runtime.data import inspect_table
    from .cli import EXIT_OK, exit_code_for, parse_params, print_diagnostics

    report = check_file(program, parse_params(param), entry)
    if not report.ok:
        print_diagnostics(report.diagnostics, report.sources)
        raise typer.Exit(exit_code_for(report.diagnostics))
    try:
        inputs = table_inputs(report)
        spec = match_data(data, inputs)
        schemas = dict(inputs)
        results = {name: inspect_table(path, schemas[name], table=name, header=header) for name, path in spec.items()}
    except FuzzError as exc:
        print_diagnostics(exc.diagnostics, report.sources)
        raise typer.Exit(exit_code_for(exc.diagnostics))
    typer.echo("PRIVATE: these counts describe the data itself. They are for the data owner only, are not "
               "differentially private and were not charged; do not share them.")
    for name, (rows, kept, effects) in results.items():
        typer.echo(f"table {name} ({spec[name]}, schema {schemas[name].name}): {rows} rows read, {kept} kept, "
                   f"{rows - kept} dropped")
        for e in effects:
            what = "dropped" if e.policy == "drop" else "set to the default"
            typer.echo(f"  {e.column}: {e.affected} row(s) missing, unparsable or undeclared -> {what}")
        if rows and not kept:
            typer.echo("  warning: every row was dropped; fuzzpy run refuses such a table before the charge "
                       "(E0509) unless given --allow-empty, and would release noise alone "
                       "(check the categories' spelling, e.g. labels ending in '.')")
    raise typer.Exit(EXIT_OK)


