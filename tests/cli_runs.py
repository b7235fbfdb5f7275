"""Running the command line on small programs and data files: in process (typer's runner) or in a
subprocess whose CPU time can be bounded.  Programs are written against check_and_run's schema T."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from check_and_run import HEADER, T
from typer.testing import CliRunner

from fuzzpy.interfaces.cli import app

CLI = "from fuzzpy.interfaces.cli import main; main()"

runner = CliRunner()


def fz(*args, catch: bool = False, env: dict | None = None):
    """`fuzzpy ARGS` in process; an exception escapes unless `catch` (then it is res.exception)."""
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=catch, env=env)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def prog(tmp_path: Path, body: str, name: str = "prog.fz") -> Path:
    return write(tmp_path / name, T + body)


def data(tmp_path: Path, rows: str, name: str = "db.csv") -> Path:
    return write(tmp_path / name, HEADER + rows)


def cli_subprocess(args: list, timeout: float, cpu_seconds: int | None = None):
    """Run the CLI in a subprocess.  `timeout` only guards against a hang; to bound how much a
    run computes, give `cpu_seconds` (CPU time does not grow on a loaded machine)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}

    def limit() -> None:
        if cpu_seconds is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))

    return subprocess.run([sys.executable, "-c", CLI, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=limit if os.name == "posix" else None)
