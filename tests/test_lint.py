"""ruff, configured in pyproject.toml ([tool.ruff]), finds nothing in the package, the tests, the
benchmarks and the CI scripts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "fuzzpy", "tests", "benchmarks", ".ci"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-1000:]
