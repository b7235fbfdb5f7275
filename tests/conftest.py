"""Shared helpers for the test suite."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# No wall-clock limits on generated examples: a loaded 2-core machine can be many times slower
# than a quiet one, and a deadline there fails a test that is correct.
settings.register_profile("fuzzpy", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("fuzzpy")

# On-disk caches (the check cache, the parser's tables) go to a folder of this session, never the
# user's: a test sees no entry another run wrote.  Subprocesses inherit it.
os.environ["FUZZPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="fuzzpy-test-cache-")
atexit.register(shutil.rmtree, os.environ["FUZZPY_CACHE_DIR"], ignore_errors=True)

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult"
EXAMPLES = ROOT / "examples"


def check(source: str, **kw):
    """Check a program given as text; returns the CheckReport."""
    from fuzzpy.checking.program import check_source

    return check_source(source, "test.fz", **kw)


def codes(report) -> list[str]:
    return [d.code for d in report.diagnostics]


def eps(report) -> Fraction:
    assert report.ok, [f"{d.code} {d.message}" for d in report.diagnostics]
    return report.epsilon


def fn_type(report, name: str) -> str:
    for f in report.functions:
        if f.name == name:
            return f.type
    raise KeyError(name)


@pytest.fixture
def adult_dir() -> Path:
    if not ADULT.exists():
        pytest.skip("shared Adult data not available")
    return ADULT


@pytest.fixture(scope="module")
def dask_scheduler():
    """The address of a real local Dask cluster, started for the test module (two in-process
    workers, one thread each); the module is skipped without the Dask engine's extra."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=None, memory_limit=None)
    yield cluster.scheduler_address
    cluster.close()


sys.path.insert(0, str(Path(__file__).parent))
