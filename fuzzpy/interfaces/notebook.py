"""Jupyter: the `%%fuzzpy` cell magic (docs/python.md).  The reports and results it shows are
rendered as HTML by fuzzpy/render/notebook.py (also what `fuzzpy.Report` and `fuzzpy.Result`
show in a notebook)."""

from __future__ import annotations

import argparse
import shlex
from typing import Any


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%fuzzpy", add_help=False)
    p.add_argument("--data", action="append", default=[], help="NAME=VARIABLE: a DataFrame for the table NAME")
    p.add_argument("--public", action="append", default=[],
                   help="NAME=VARIABLE: a DataFrame for the public table NAME (not charged)")
    p.add_argument("--budget", default=None)
    p.add_argument("--delta", default=None, help="the delta of an (epsilon, delta) budget")
    p.add_argument("--rho", default=None, help="a budget in zCDP instead of --budget")
    p.add_argument("--allow-empty", action="store_true", help="run even if no row is left after conforming")
    p.add_argument("--param", action="append", default=[])
    p.add_argument("--ledger", default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--check", action="store_true", help="check only, read no data")
    return p


def fuzzpy_cell(line: str, cell: str, namespace: dict) -> Any:
    """Check the cell's program and show the report; with --data, run it and return the result."""
    from ..api import FuzzpyError, check, run
    from ..diagnostics import Diagnostic

    try:
        args = _parser().parse_args(shlex.split(line))
    except SystemExit:
        raise FuzzpyError([Diagnostic("E0701", "usage: %%fuzzpy [--data NAME=VARIABLE] [--public NAME=VARIABLE] "
                                      "[--budget B] [--delta D] [--rho R] [--param NAME=VALUE] [--ledger PATH] "
                                      "[--seed N] [--allow-empty] [--check]")]) from None
    params = dict(_pair(p, "--param") for p in args.param)
    report = check(cell, params=params, budget=args.budget, delta=args.delta, rho=args.rho)
    _display(report)
    if args.check or not args.data or not report.ok:
        report.raise_for_errors()
        return None
    data = _frames(args.data, "--data", namespace, "table")
    public = _frames(args.public, "--public", namespace, "public table")
    return run(cell, data, budget=args.budget, params=params, ledger=args.ledger, seed=args.seed, public=public,
               delta=args.delta, rho=args.rho, allow_empty=args.allow_empty)


def _frames(items: list[str], option: str, namespace: dict, what: str) -> dict[str, Any]:
    """NAME=VARIABLE pairs: each name with the notebook variable's value."""
    from ..api import FuzzpyError
    from ..diagnostics import Diagnostic

    out = {}
    for item in items:
        name, var = _pair(item, option)
        if var not in namespace:
            raise FuzzpyError([Diagnostic("E0506", f"no variable '{var}' in the notebook for {what} '{name}'")])
        out[name] = namespace[var]
    return out


def _pair(item: str, option: str) -> tuple[str, str]:
    from ..api import FuzzpyError
    from ..diagnostics import Diagnostic

    name, sep, value = item.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise FuzzpyError([Diagnostic("E0701", f"{option} expects NAME=VALUE, got '{item}'")])
    return name.strip(), value.strip()


def _display(obj: Any) -> None:
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover - the magic only exists inside IPython
        print(obj)
        return
    display(obj)


def register_magic(ipython: Any) -> None:
    def fuzzpy(line: str, cell: str) -> Any:
        return fuzzpy_cell(line, cell, ipython.user_ns)

    ipython.register_magic_function(fuzzpy, magic_kind="cell", magic_name="fuzzpy")
