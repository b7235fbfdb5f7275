"""Running Python in a subprocess with a bound on its CPU time: for tests that guard against a
computation that would take minutes (a hang) rather than against a wrong answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_LIMIT = 30  # seconds of CPU; starting Python and checking take one or two
HANG_GUARD = 300  # seconds of wall-clock time, only against a run that sleeps forever


def finishes(args: list[str], stdin: str = ""):
    """Run `python ARGS` in a subprocess; None if it used more than CPU_LIMIT seconds of CPU
    (or hung for HANG_GUARD seconds).  CPU time, not wall-clock time: a loaded machine makes a
    run wait, not compute more, and the hangs these tests guard against compute for minutes."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    try:
        done = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True,
                              timeout=HANG_GUARD, env=env, cwd=ROOT, preexec_fn=_limit_cpu)
    except subprocess.TimeoutExpired:
        return None
    return None if done.returncode < 0 else done  # killed by SIGXCPU: over the CPU limit


def _limit_cpu() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT, CPU_LIMIT + 5))
    except (ImportError, ValueError, OSError):
        pass
