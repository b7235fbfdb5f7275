"""`fuzzpy check` without the command-line framework: its body, its helpers, and a fast dispatch.

Importing typer costs 0.15-0.3 s, and typer reaches pydantic when it builds a command (another
0.2 s): more than checking a small file.  So `fuzzpy check` with ordinary arguments is parsed
here with a small, strict parser and runs without either; anything it does not recognise (help,
an unknown or malformed option, `--server`) goes to the full typer command line, which prints
the usual usage errors.  Both paths run `run_check`, so their output is the same.

Nothing here imports typer, click or pydantic (tests/interfaces/test_check_cache.py checks).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional

from ..diagnostics import Diagnostic, FuzzError, render
from ..render.exits import EXIT_BUDGET, EXIT_OK, EXIT_PROGRAM, EXIT_RUNTIME, EXIT_USAGE, exit_code_for, internal_error  # noqa: F401 - shared


def echo(text: str, err: bool = False) -> None:
    """One line on stdout (or stderr), flushed, so the two streams interleave in order."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    stream.write(text + "\n")
    stream.flush()


def print_diagnostics(diags: list[Diagnostic], sources: dict[str, str] | None = None) -> None:
    for d in diags:
        echo(render(d, sources), err=True)


def usage_error(message: str) -> SystemExit:
    """Print E0701 and return the exit to raise (a SystemExit: typer, click and `guard` all
    end a command with it)."""
    print_diagnostics([Diagnostic("E0701", message)])
    return SystemExit(EXIT_USAGE)


def parse_params(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise usage_error(f"--param expects NAME=VALUE, got '{item}'")
        out[name.strip()] = value.strip()
    return out


def parse_budget(text: Optional[str]):
    from ..exact import parse_exact

    if text is None:
        return None
    try:
        value = parse_exact(text)
    except ValueError:
        raise usage_error(f"--budget expects a non-negative number, got '{text[:60]}'")
    if value < 0:
        raise usage_error(f"--budget expects a non-negative number, got '{text}'")
    return value


def parse_delta(text: Optional[str]):
    """--delta: the delta at which a program is stated as (epsilon, delta), strictly in (0, 1)."""
    from ..exact import parse_delta as read

    if text is None:
        return None
    try:
        return read(text)
    except ValueError:
        raise usage_error(f"--delta expects a number strictly between 0 and 1, such as 1e-6, got '{text[:60]}'")


def parse_rho(text: Optional[str]):
    """--rho: a budget in zCDP, a non-negative number."""
    from ..exact import parse_non_negative

    if text is None:
        return None
    try:
        return parse_non_negative(text)
    except ValueError:
        raise usage_error(f"--rho expects a non-negative number, got '{text[:60]}'")


def collect_files(paths: list[Path]) -> list[tuple[Path, bool]]:
    """(file, found in a folder) for each program to check."""
    files: list[tuple[Path, bool]] = []
    for p in paths:
        if p.is_dir():
            files.extend((f, True) for f in sorted(p.rglob("*.fz")))
        else:
            files.append((p, False))
    return files


def entry_for(path: Path, entry: str, in_folder: bool) -> Optional[str]:
    """A file found in a folder that declares no entry point is a library: it is checked for
    errors, not for an entry point (a file named on the command line must have one)."""
    if not in_folder:
        return entry
    import re

    try:
        text = path.read_text(errors="replace")
    except OSError:
        return entry
    return entry if re.search(rf"\bfunction\s+{re.escape(entry)}\b", text) else None


def run_check(paths: list[Path], budget: Optional[str] = None, delta: Optional[str] = None,
              rho: Optional[str] = None, fmt: str = "text", param: Optional[list[str]] = None,
              entry: str = "main", use_cache: bool = True, formula: Optional[str] = None,
              formula_timeout: float = 10.0) -> int:
    """The local `fuzzpy check`: check every file, print the reports, return the exit code."""
    from ..pipeline.budget import check_with_budget
    from ..render import report as R

    if fmt not in ("text", "json", "sarif"):
        raise usage_error(f"--format must be text, json or sarif, got '{fmt}'")
    if formula is not None and formula not in ("text", "latex"):
        raise usage_error(f"--formula must be text or latex, got '{formula}'")
    limit, at, rho_limit = parse_budget(budget), parse_delta(delta), parse_rho(rho)
    params = parse_params(param or [])
    files = collect_files(paths)
    with stdout_kept_for_the_document(fmt != "text"):
        # Formulas are derived from a fresh check's functions and declared parameter types, which
        # a cached report does not keep.
        results = [check_with_budget(f, params, entry_for(f, entry, in_folder), limit, at, rho_limit,
                                     use_cache=use_cache and formula is None)
                   for f, in_folder in files]
        if not results:
            raise usage_error("no .fz files found")
        if formula is not None:
            from ..render.formulas import attach_formulas

            for res, (f, in_folder) in zip(results, files):
                attach_formulas(res, params, formula, formula_timeout, entry_for(f, entry, in_folder))
    if fmt == "json":
        echo(R.reports_json_text(results))
    elif fmt == "sarif":
        echo(R.sarif_text(results))
    else:
        for res in results:
            R.report_text(res).write()
    return max(exit_code_for(res.diagnostics) for res in results)


@contextmanager
def stdout_kept_for_the_document(machine: bool):
    """For JSON and SARIF, stdout carries the document and nothing else: while the check works,
    whatever else writes to stdout (a library's print, a solver's banner written from C to
    descriptor 1) is sent to stderr instead, at both levels (sys.stdout and descriptor 1)."""
    if not machine or sys.stdout is None or sys.stderr is None:
        yield
        return
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no descriptor 1 (an embedded interpreter): Python level only
        saved = None
    python_stdout = sys.stdout
    try:
        if saved is not None:
            os.dup2(2, 1)
        sys.stdout = sys.stderr
        yield
    finally:
        sys.stdout = python_stdout
        if saved is not None:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 1)
            os.close(saved)


# ---- the fast dispatch ------------------------------------------------------------------------

@dataclass(frozen=True)
class _FastOptions:
    """The options one command's fast path understands; anything else goes to typer."""

    valued: dict[str, str]                 # --opt VALUE -> keyword
    repeated: dict[str, str]               # --opt VALUE, repeatable -> keyword (a list)
    flags: dict[str, tuple[str, bool]]     # --flag -> (keyword, value when given)
    convert: dict[str, Callable[[str], Any]]  # keyword -> conversion (a ValueError: leave it to typer)


_CHECK = _FastOptions({"--budget": "budget", "--delta": "delta", "--rho": "rho", "--format": "fmt",
                       "--entry": "entry"}, {"--param": "param"}, {"--no-cache": ("use_cache", False)}, {})
# `fuzzpy run` with only these options skips typer too (its argument handling costs about as much
# as importing pandas); anything else (--help, --server, --engine...) goes to the full command line.
_RUN = _FastOptions({"--budget": "budget", "--delta": "delta", "--rho": "rho", "--format": "fmt", "--entry": "entry",
                     "--seed": "seed", "--ledger": "ledger", "--plot": "plot"},
                    {"--data": "data", "--public": "public", "--param": "param"},
                    {"--header": ("header", True), "--allow-empty": ("allow_empty", True)},
                    {"seed": int, "ledger": Path, "plot": Path})
_RUN_DEFAULTS = {"data": [], "public": [], "param": [], "header": False, "allow_empty": False, "budget": None,
                 "delta": None, "rho": None, "seed": None, "ledger": None, "fmt": "text", "entry": "main", "plot": None}


def _fast_parse(argv: list[str], command: str,
                spec: _FastOptions) -> Optional[tuple[list[Path], dict[str, Any]]]:
    """(the file arguments, the options given) of `command ...`, or None when argv holds
    anything `spec` does not know.  Strict on purpose: a value that starts with '-', an
    unknown option, `--help`, a value the conversion refuses: all None."""
    if not argv or argv[0] != command:
        return None
    files: list[Path] = []
    options: dict[str, Any] = {key: [] for key in spec.repeated.values()}
    rest, i, options_done = argv[1:], 0, False
    while i < len(rest):
        tok = rest[i]
        i += 1
        if options_done or not tok.startswith("-"):
            files.append(Path(tok))
            continue
        if tok == "--":
            options_done = True
            continue
        name, eq, value = tok.partition("=")
        if name in spec.flags and not eq:
            key, given = spec.flags[name]
            options[key] = given
            continue
        if name not in spec.valued and name not in spec.repeated:
            return None
        if not eq:
            if i >= len(rest):
                return None
            value = rest[i]
            i += 1
        if value.startswith("-"):
            return None
        if name in spec.repeated:
            options[spec.repeated[name]].append(value)
            continue
        key = spec.valued[name]
        try:
            options[key] = spec.convert.get(key, str)(value)
        except ValueError:
            return None
    return files, options


def fast_plan(argv: list[str]) -> Optional[dict[str, Any]]:
    """The arguments of `run_check` for `check ...` with only options its fast path knows, or
    None (then the full command line handles it)."""
    parsed = _fast_parse(argv, "check", _CHECK)
    if parsed is None or not parsed[0]:
        return None
    return {"paths": parsed[0], **parsed[1]}


def fast_run_plan(argv: list[str]) -> Optional[dict[str, Any]]:
    """The keyword arguments of `run_command.run` for `run PROG ...` with only the options of
    `_RUN`, or None.  A value typer would refuse (a seed that is not an integer) is left to
    typer, so its message is the usual one."""
    parsed = _fast_parse(argv, "run", _RUN)
    if parsed is None or len(parsed[0]) != 1:
        return None
    return {"program": parsed[0][0], **_RUN_DEFAULTS, **parsed[1]}


def fast_run(plan: dict[str, Any]) -> int:
    """`fuzzpy run` for a plan of `fast_run_plan`: the command's own function, without typer's
    parsing (every option it does not take gets the command line's default).  `run` ends with
    SystemExit(code), which `guard` turns into the exit code."""
    from .run_command import run

    run(**plan, server=None, dataset=[], engine="pandas", scheduler=None, workers=None, threads=None, persist=False)
    return EXIT_OK


def guard(work: Callable[[], Any]) -> int:
    """Run a command and return its exit code.  Nothing escapes as a traceback: every
    exception ends as a coded error on stderr."""
    try:
        result = work()
        code: object = result if isinstance(result, int) else EXIT_OK
    except SystemExit as exc:  # how click (and usage_error) end every command
        code = exc.code
    except FuzzError as exc:
        print_diagnostics(exc.diagnostics)
        code = exit_code_for(exc.diagnostics)
    except KeyboardInterrupt:
        echo_err("interrupted")
        code = 130
    except BrokenPipeError:  # the reader of our output went away (`fuzzpy check ... | head`)
        silence_stdout()
        code = EXIT_PROGRAM
    except BaseException as exc:  # noqa: BLE001 - see internal_error
        diag = internal_error(type(exc))
        print_diagnostics([diag])
        code = exit_code_for([diag])
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError, AttributeError):
        silence_stdout()
    if code is None:
        return EXIT_OK
    if not isinstance(code, int):  # sys.exit("message")
        echo_err(str(code))
        return EXIT_USAGE
    return code


def echo_err(text: str) -> None:
    try:
        echo(text, err=True)
    except (OSError, ValueError):
        pass


def silence_stdout() -> None:
    """Point descriptor 1 at /dev/null, so the interpreter's final flush cannot fail."""
    import os

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def thread_excepthook(hook_args: Any) -> None:  # threading.ExceptHookArgs
    if hook_args.exc_type is not SystemExit:
        print_diagnostics([internal_error(hook_args.exc_type)])


def main() -> None:  # pragma: no cover - console entry (tested through subprocesses)
    """The `fuzzpy` script: a plain `fuzzpy check` or `fuzzpy run` runs here; everything else in
    the full CLI."""
    import threading

    plan, run_plan = fast_plan(sys.argv[1:]), fast_run_plan(sys.argv[1:])
    if plan is None and run_plan is None:
        from .cli import main as full

        full()
        return
    threading.excepthook = thread_excepthook
    if run_plan is not None:
        exit_process(guard(lambda: fast_run(run_plan)))
    exit_process(guard(lambda: run_check(**plan)))


def exit_process(code: int) -> NoReturn:
    """End a command's process with `code` once its work and output are complete: the Python
    exit work (atexit handlers, flushing stdout and stderr) runs here, and the C-level teardown
    after it is skipped.  In that teardown Arrow's thread pools (used to read CSV and Parquet) can
    abort the process with "terminate called without an active exception" (exit -6), now and
    then on a busy machine, after a run that had finished and printed its results."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
