"""`fuzzpy check --format json|sarif`: stdout carries the document and nothing else, even when
something inside the check writes to stdout (a library's print, a C library writing to
descriptor 1); that text goes to stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The pipeline's check made noisy at both levels: Python's print and a write to descriptor 1.
NOISE = """
import os, sys
from pathlib import Path
import fuzzpy.pipeline.budget as budget
from fuzzpy.interfaces.checkcmd import fast_run, fast_run_plan, guard, run_check

real = budget.check_with_budget
def noisy(*args, **kwargs):
    print("a library's print")
    os.write(1, b"a banner written from C\\n")
    return real(*args, **kwargs)
budget.check_with_budget = noisy
"""
NOISY_CHECK = NOISE + "sys.exit(guard(lambda: run_check([Path(sys.argv[1])], fmt=sys.argv[2], use_cache=False)))\n"
NOISY_RUN = NOISE + "sys.exit(guard(lambda: fast_run(fast_run_plan(sys.argv[1:]))))\n"


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_stray_stdout_during_a_check_goes_to_stderr_and_stdout_is_the_document(fmt):
    res = subprocess.run([sys.executable, "-c", NOISY_CHECK, "examples/histogram.fz", fmt],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    document = json.loads(res.stdout)  # the whole of stdout
    assert document
    assert "a library's print" in res.stderr and "a banner written from C" in res.stderr


def test_text_reports_keep_stdout_as_it_is():
    res = subprocess.run([sys.executable, "-c", NOISY_CHECK, "examples/histogram.fz", "text"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0 and "a library's print" in res.stdout and "examples/histogram.fz: ok" in res.stdout


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.fz")))
def test_every_example_checks_to_one_strict_json_document(example):
    def refuse(constant: str):
        raise ValueError(f"non-standard JSON constant {constant}")

    res = subprocess.run([sys.executable, "-m", "fuzzpy", "check", "--format", "json", f"examples/{example}"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout, parse_constant=refuse)["ok"] is True
    assert res.stderr == ""


def test_stray_stdout_during_a_json_run_goes_to_stderr():
    res = subprocess.run([sys.executable, "-c", NOISY_RUN, "run", "examples/histogram.fz", "--data",
                          "examples/data/adult_sample.csv", "--budget", "1.0", "--seed", "1", "--format", "json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)
    assert "a library's print" in res.stderr and "a banner written from C" in res.stderr
