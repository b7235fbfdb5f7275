"""`fuzzpy serve`, `fuzzpy dataset ...` and `fuzzpy analyst ...`: the curator's commands
(docs/serve.md).  The service itself lives in fuzzpy/serve; these commands start it and fill
its registry.  Mounted by cli.py through `register(app)`."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import List, NoReturn, Optional

import typer

from ..diagnostics import FuzzError, error, render

EXIT_USAGE, EXIT_RUNTIME = 2, 4

dataset_app = typer.Typer(name="dataset", no_args_is_help=True, pretty_exceptions_enable=False,
                          pretty_exceptions_show_locals=False,
                          help="Register datasets with the curator service, list them, show a published schema.")
analyst_app = typer.Typer(name="analyst", no_args_is_help=True, pretty_exceptions_enable=False,
                          pretty_exceptions_show_locals=False,
                          help="Give analysts tokens and caps for the curator service.")

_CONFIG_HELP = "Curator configuration (default: $FUZZPY_CURATOR_CONFIG, else ./curator.toml if present)."
_LEDGER_HELP = ("Ledger: a SQLite file or a postgresql:// address (default: the configuration's, else the default "
                "ledger).")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.add_typer(dataset_app)
    app.add_typer(analyst_app)


def _fail(exc: FuzzError) -> NoReturn:
    for d in exc.diagnostics:
        typer.echo(render(d), err=True)
    # A bad argument or configuration (E1017) is a usage error; data, ledger and service ones are not.
    runtime = {d.code for d in exc.diagnostics if d.code[:3] in ("E05", "E06", "E10") and d.code != "E1017"}
    raise typer.Exit(EXIT_RUNTIME if runtime else EXIT_USAGE)


def _store(config: Optional[Path], ledger: Optional[str]):
    from ..serve.config import resolve_ledger
    from ..serve.store import open_store

    cfg, where = resolve_ledger(config, ledger)
    return cfg, open_store(where)


def serve(config: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
          ledger: Optional[str] = typer.Option(None, "--ledger", help=_LEDGER_HELP),
          host: Optional[str] = typer.Option(None, "--host", help="Listen address (default 127.0.0.1)."),
          port: Optional[int] = typer.Option(None, "--port", help="Port (default 8470).")) -> None:
    """Run the curator service: analysts check and run programs; the data stays here."""
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ModuleNotFoundError as exc:
        typer.echo(render(error("E1020", f"fuzzpy serve needs the 'serve' extra ({exc.name} is missing): "
                                         "pip install \"fuzzpy[serve]\"").diagnostics[0]), err=True)
        raise typer.Exit(EXIT_USAGE)
    from ..serve.app import create_app
    from ..serve.audit import AuditLog
    from ..serve.config import ServeConfig
    from ..serve.service import Service
    from ..serve.workers import WorkerPool

    try:
        cfg, store = _store(config, ledger)
        cfg = cfg or ServeConfig()
        _apply_config(cfg, store)
        service = Service(store, cfg.limits, cfg.name, prepare=False)
        audit = AuditLog(cfg.audit_log)
    except FuzzError as exc:
        _fail(exc)
    except OSError as exc:
        _fail(error("E1017", f"cannot open the audit log: {exc.strerror}"))
    host = host or cfg.host
    port = port if port is not None else cfg.port
    typer.echo(f"fuzzpy serve: http://{host}:{port}{'/v1'} (ledger {store.where})", err=True)
    # Relative imports in analysts' programs must find nothing on this disk but the stdlib: the
    # server and its workers work in an empty folder of their own, which nobody may write to while
    # the server runs (it stays while the server runs: workers are started from it).
    empty = tempfile.mkdtemp(prefix="fuzzpy-serve-")
    os.chdir(empty)
    os.chmod(empty, 0o500)
    pool = WorkerPool(store.address, cfg.limits, cfg.name, store)
    asgi, _ = create_app(service, audit, pool)
    try:
        uvicorn.run(asgi, host=host, port=port, log_level="warning", access_log=False)
    finally:
        pool.close()
        store.close()
        audit.close()
        with contextlib.suppress(OSError):
            os.rmdir(empty)


def _apply_config(cfg, store) -> None:
    """Register the configuration's datasets and analysts.  A dataset already registered with
    the same file and schema is not re-registered: if its file changed, it stays refused until
    the curator runs `fuzzpy dataset add` (a restart does not bless a changed file)."""
    from ..serve.registry import add_analyst, read_schema_file, register_dataset, same_registration, set_dataset_cap

    for d in cfg.datasets:
        schema, source = read_schema_file(d.schema, d.schema_name)
        old = store.dataset(d.name)
        if same_registration(old, d.data, source, schema.name):
            if d.cap is not None:
                set_dataset_cap(store, d.name, d.cap)
        else:
            register_dataset(store, d.name, d.data, d.schema, d.cap, d.schema_name)
    for a in cfg.analysts:
        add_analyst(store, a.name, a.role, a.token_sha256, a.caps)


@dataset_app.command("add")
def dataset_add(name: str = typer.Argument(..., help="The dataset's name (its identity in the ledger)."),
                data: Path = typer.Option(..., "--data", readable=False, help="The data file (CSV or Parquet)."),
                schema: Path = typer.Option(..., "--schema", readable=False, help="A .fz file declaring its schema."),
                cap: Optional[str] = typer.Option(None, "--cap", help="Total epsilon for the dataset (required the "
                                                                      "first time, unless --rho)."),
                delta: Optional[str] = typer.Option(None, "--delta", help="With --cap: the delta the epsilon cap holds "
                                                                          "at (default 0: pure epsilon)."),
                rho: Optional[str] = typer.Option(None, "--rho", help="A total in zCDP rho instead of --cap."),
                schema_name: Optional[str] = typer.Option(None, "--schema-name",
                                                           help="Which schema, if the file has several."),
                public: bool = typer.Option(False, "--public", help="A public table (its schema a `public schema`): "
                                                                    "usable by every analyst, never charged, no cap."),
                config: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
                ledger: Optional[str] = typer.Option(None, "--ledger", help=_LEDGER_HELP)) -> None:
    """Register (or register again) a dataset: validate the file against the schema, record its hash, set its cap
    in its privacy notion (pure epsilon, epsilon at --delta, or --rho). With --public, a public table: its declared
    keys are verified, and it has no cap."""
    from ..ledger import describe_cap, format_exact
    from ..ledger.caps import parse_cap
    from ..serve.registry import register_dataset

    try:
        total_cap = parse_cap(cap, delta, rho, code="E1017") if (cap, delta, rho) != (None, None, None) else None
        _, store = _store(config, ledger)
        rec = register_dataset(store, name, data, schema, total_cap, schema_name, public)
        total = store.cap_of(f"dataset:{name}")
        store.close()
    except FuzzError as exc:
        _fail(exc)
    shown = "none" if total is None else \
        f"{format_exact(total.rho if hasattr(total, 'rho') else total.epsilon)} in {describe_cap(total)}"
    typer.echo(f"dataset {rec.name} registered: {rec.data_path} ({rec.identity[:19]}), schema {rec.schema_name}, "
               f"cap {shown}")


@dataset_app.command("list")
def dataset_list(config: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
                 ledger: Optional[str] = typer.Option(None, "--ledger", help=_LEDGER_HELP)) -> None:
    """List the registered datasets with their caps and spending (the curator's view)."""
    from ..serve.service import Service

    try:
        _, store = _store(config, ledger)
        view = Service(store).ledger_view(_CURATOR)
        store.close()
    except FuzzError as exc:
        _fail(exc)
    if not view["datasets"]:
        typer.echo("no datasets registered")
    for d in view["datasets"]:
        notion = f" ({d['notion']})" if d["notion"] else ""
        typer.echo(f"{d['dataset']}: cap {d['cap'] or 'none'}, spent {d['spent']}, remaining "
                   f"{d['remaining'] or 'no cap'}{notion}; {d['data']} ({d['identity'][:19]})")
        for a in d["analysts"]:
            typer.echo(f"  {a['analyst']}: cap {a['cap']}, spent {a['spent']}, remaining {a['remaining']}")


@dataset_app.command("schema")
def dataset_schema(name: str = typer.Argument(..., help="The dataset's name."),
                   server: str = typer.Option(..., "--server", help="The curator service's URL."),
                   fmt: str = typer.Option("text", "--format", help="text (the .fz declaration) or json.")) -> None:
    """Print a dataset's published schema, to paste into a program (reads no data)."""
    from ..serve.client import print_schema

    raise typer.Exit(print_schema(server, name, fmt))


@analyst_app.command("add")
def analyst_add(name: str = typer.Argument(..., help="The analyst's name."),
                cap: List[str] = typer.Option([], "--cap", help="DATASET=AMOUNT: the analyst's cap on a dataset, in "
                                                                "the dataset's notion (repeatable)."),
                curator: bool = typer.Option(False, "--curator",
                                             help="A curator token: sees every analyst's spending."),
                new_token: bool = typer.Option(False, "--new-token", help="Replace an existing analyst's token."),
                config: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
                ledger: Optional[str] = typer.Option(None, "--ledger", help=_LEDGER_HELP)) -> None:
    """Create an analyst (printing their token once) or change their caps."""
    from ..ledger import parse_amount
    from ..serve.registry import add_analyst, hash_token

    try:
        caps = {}
        for item in cap:
            dataset, sep, amount = item.partition("=")
            if not sep:
                raise error("E1017", f"--cap expects DATASET=EPSILON, got {item[:60]!r}")
            caps[dataset.strip()] = parse_amount(amount.strip(), "cap")
        _, store = _store(config, ledger)
        token = add_analyst(store, name, "curator" if curator else "analyst", None, caps, new_token)
        store.close()
    except FuzzError as exc:
        _fail(exc)
    if token is not None:
        typer.echo(token)
        typer.echo(f"the token of {name} is shown once; the service keeps only its sha256 "
                   f"({hash_token(token)})", err=True)
    else:
        typer.echo(f"analyst {name} updated", err=True)


@analyst_app.command("list")
def analyst_list(config: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
                 ledger: Optional[str] = typer.Option(None, "--ledger", help=_LEDGER_HELP)) -> None:
    """List the analysts and their roles (tokens are not stored, so not shown)."""
    try:
        _, store = _store(config, ledger)
        analysts = store.analysts()
        store.close()
    except FuzzError as exc:
        _fail(exc)
    for a in analysts:
        typer.echo(f"{a.name} ({a.role}), since {a.created_at}")


class _Curator:
    name, role = "curator", "curator"


_CURATOR = _Curator()
