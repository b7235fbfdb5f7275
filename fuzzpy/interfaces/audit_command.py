"""`fuzzpy audit`: look for privacy violations empirically (mounted by cli.py through `register`).

    fuzzpy audit prog.fz [--delta D] [--samples N] [--confidence 0.95] [--seed S] [--format text|json] [--param ...]
    fuzzpy audit --mechanism laplace [--epsilon 0.5] [--exact] ...
    fuzzpy audit --mechanism gaussian --rho R [--delta 1e-5] [--exact] ...

A program with Gaussian releases, and the Gaussian mechanism, claim (epsilon, delta): the audit
needs the delta (a program: --delta is required; the mechanism: 1e-5 by default).

Exit codes: 0 no violation found (which proves nothing), 5 violation found, 1 the program has
errors or cannot be audited, 2 usage error.  Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, List, Optional

import typer

from ..diagnostics import Diagnostic, FuzzError, render
from .memory import keep_freed_memory

EXIT_OK, EXIT_USAGE, EXIT_VIOLATION = 0, 2, 5
DEFAULT_SAMPLES = 50_000
PROGRESS_EVERY_S = 1.0


def register(app: typer.Typer) -> None:
    app.command("audit")(audit)


def audit(
    program: Optional[Path] = typer.Argument(None, help="The program (.fz) to audit."),
    mechanism: Optional[str] = typer.Option(None, "--mechanism", help="Audit one mechanism instead: laplace, "
                                            "exponential, noisy_max, above_threshold, randomized_response or "
                                            "gaussian."),
    epsilon: Optional[str] = typer.Option(None, "--epsilon", help="Epsilon for --mechanism (default 0.5)."),
    rho: Optional[str] = typer.Option(None, "--rho", help="rho (zCDP) for --mechanism gaussian (required there)."),
    delta: Optional[str] = typer.Option(None, "--delta", help="The delta of an (epsilon, delta) claim, in (0, 1): "
                                        "required for a program with Gaussian releases; 1e-5 by default for "
                                        "--mechanism gaussian."),
    samples: int = typer.Option(DEFAULT_SAMPLES, "--samples", help="Fresh samples per side for each pair "
                                                                   "validated."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence of the reported lower bound."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for reproducible sampling (default: random, "
                                                            "and reported)."),
    fmt: str = typer.Option("text", "--format", help="text or json."),
    param: List[str] = typer.Option([], "--param", help="Public parameter NAME=VALUE (repeatable)."),
    entry: str = typer.Option("main", "--entry", help="Name of the entry point."),
    exact: bool = typer.Option(False, "--exact", help="use the exact (slow) samplers, not the vectorised ones."),
    max_pairs: int = typer.Option(160, "--max-pairs", help="At most this many neighbouring pairs are screened."),
) -> None:
    """Estimate a lower bound on a program's (or a mechanism's) true epsilon by sampling, and compare
    it with the checker's claim. Reads no data: the tables are synthetic, built from the schema."""
    from .cli import exit_code_for, parse_params

    _validate(program, mechanism, epsilon, param, samples, confidence, fmt, exact)
    if seed is not None and seed < 0:
        raise _usage(f"--seed must be a non-negative integer, got {seed}")
    if max_pairs < 1:
        raise _usage(f"--max-pairs must be at least 1, got {max_pairs}")
    claim = _claim_options(mechanism, epsilon, rho, delta)
    params = parse_params(param)
    keep_freed_memory()  # the samplers' arrays are reused, not page-faulted in again (memory.py)
    try:
        result = _run(program, mechanism, claim, params, entry, samples, confidence, seed, exact, max_pairs)
    except _CheckFailed as failed:
        raise typer.Exit(failed.code)
    except FuzzError as exc:
        _print_diagnostics(exc.diagnostics)
        raise typer.Exit(exit_code_for(exc.diagnostics))
    except (ValueError, OverflowError, ArithmeticError) as exc:  # a sampler refusing these numbers
        _print_diagnostics([Diagnostic("E0801", f"cannot audit with these settings: {type(exc).__name__}: "
                                                f"{str(exc)[:120]}")])
        raise typer.Exit(1)
    _emit(result, fmt)
    raise typer.Exit(EXIT_VIOLATION if result.violation else EXIT_OK)


class _CheckFailed(Exception):
    def __init__(self, code: int):
        self.code = code


def _usage(message: str) -> typer.Exit:
    _print_diagnostics([Diagnostic("E0701", message)])
    return typer.Exit(EXIT_USAGE)


def _print_diagnostics(diags: list[Diagnostic], sources: Optional[dict[str, str]] = None) -> None:
    for d in diags:
        typer.echo(render(d, sources), err=True)


def _validate(program: Optional[Path], mechanism: Optional[str], epsilon: Optional[str], param: list[str],
              samples: int, confidence: float, fmt: str, exact: bool) -> None:
    if fmt not in ("text", "json"):
        raise _usage(f"--format must be text or json, got '{fmt}'")
    if (program is None) == (mechanism is None):
        raise _usage("give either a program to audit or --mechanism NAME, not both")
    if mechanism is None and epsilon is not None:
        raise _usage("--epsilon must go with --mechanism; a program's epsilon comes from the checker")
    if mechanism is not None and param:
        raise _usage("--param goes with a program, not with --mechanism")
    if samples < 100:
        raise _usage(f"--samples must be at least 100, got {samples}")
    if not 0 < confidence < 1:
        raise _usage(f"--confidence must be strictly between 0 and 1, got {confidence}")


def _parse_epsilon(text: Optional[str], option: str = "--epsilon") -> Any:
    from fractions import Fraction

    from ..exact import parse_exact

    if text is None:
        return Fraction(1, 2)
    try:
        value = parse_exact(text)
    except ValueError:
        raise _usage(f"{option} expects a positive number, got '{text[:60]}'")
    if value <= 0:
        raise _usage(f"{option} expects a positive number, got '{text}'")
    return value


def _parse_delta(text: Optional[str]) -> Any:
    from ..exact import parse_delta

    if text is None:
        return None
    try:
        return parse_delta(text)
    except ValueError:
        raise _usage(f"--delta expects a number strictly between 0 and 1, got '{text[:60]}'") from None


def _claim_options(mechanism: Optional[str], epsilon: Optional[str], rho: Optional[str],
                   delta: Optional[str]) -> dict:
    """The privacy parameters as audit_mechanism / audit_program keywords (usage errors first)."""
    from ..audit.mechanisms import ZCDP_TARGETS

    zcdp = mechanism in ZCDP_TARGETS
    if rho is not None and not zcdp:
        raise _usage("--rho goes with --mechanism gaussian; a program's rho comes from the checker")
    if zcdp and epsilon is not None:
        raise _usage(f"--mechanism {mechanism} takes --rho (zCDP), not --epsilon: its claim is the epsilon at "
                     "--delta that this rho gives")
    if zcdp and rho is None:
        raise _usage(f"--mechanism {mechanism} needs --rho (its zCDP parameter), e.g. --rho 0.05")
    out: dict = {"delta": _parse_delta(delta)}
    if zcdp:
        out["rho"] = _parse_epsilon(rho, "--rho")
    elif mechanism is not None:
        out["epsilon"] = _parse_epsilon(epsilon)
    return out


def _run(program: Optional[Path], mechanism: Optional[str], claim: dict, params: dict[str, str],
         entry: str, samples: int, confidence: float, seed: Optional[int], exact: bool, max_pairs: int) -> Any:
    from ..audit.auditor import audit_mechanism, audit_program, mechanism_names
    from ..audit.search import AuditConfig

    config = AuditConfig(samples=samples, confidence=confidence, seed=seed)
    progress = _Progress()
    try:
        if mechanism is not None:
            if mechanism not in mechanism_names():
                raise _usage(f"--mechanism must be one of {', '.join(mechanism_names())}, got '{mechanism}'")
            return audit_mechanism(mechanism, exact=exact, config=config, progress=progress, **claim)
        report = _checked(program, params, entry)
        if not report.is_pure and claim["delta"] is None:
            raise _usage(f"{report.entry} makes Gaussian releases: its guarantee is rho-zCDP (rho {report.rho}), "
                         "an (epsilon, delta) claim; give the delta to audit it at, e.g. --delta 1e-5")
        return audit_program(report, config=config, progress=progress, max_pairs=max_pairs, exact=exact, **claim)
    finally:
        progress.done()


def _checked(program: Optional[Path], params: dict[str, str], entry: str) -> Any:
    """The checker's report; an ill-typed or unchecked program is refused with its diagnostics."""
    from ..checking.program import check_file
    from .cli import exit_code_for

    report = check_file(program, params, entry)  # type: ignore[arg-type]
    if not report.ok:
        _print_diagnostics(report.diagnostics, report.sources)
        typer.echo("fuzzpy audit: the program does not check, so there is no claim to audit", err=True)
        raise _CheckFailed(exit_code_for(report.diagnostics))
    return report


def _emit(result: Any, fmt: str) -> None:
    from ..audit.report import result_json, result_text

    if fmt == "json":
        typer.echo(json.dumps(result_json(result), indent=2))
    else:
        typer.echo(result_text(result))


class _Progress:
    """Stage messages on stderr: rewritten in place on a terminal, at most one line a second
    otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.shown = False

    def __call__(self, message: str) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        if self.tty:
            typer.echo(f"\r\033[Kfuzzpy audit: {message}", nl=False, err=True)
        else:
            typer.echo(f"fuzzpy audit: {message}", err=True)
        self.shown = True

    def done(self) -> None:
        if self.tty and self.shown:
            typer.echo("\r\033[K", nl=False, err=True)
