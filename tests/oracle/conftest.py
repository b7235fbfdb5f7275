"""Report how many programs the soundness oracle tried in this session."""

from __future__ import annotations

import sys

import pytest

from fuzzpy.limits import RECURSION_LIMIT

from .support import SESSION_STATS


@pytest.fixture(scope="module", autouse=True)
def _recursion_limit():
    # The checker's and the oracle's threads raise the recursion limit while they run; raising
    # it for the module keeps hypothesis from seeing it change during a test.
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, RECURSION_LIMIT))
    yield
    sys.setrecursionlimit(old)


def pytest_terminal_summary(terminalreporter) -> None:
    s = SESSION_STATS
    if s.generated:
        rejected = sum(s.rejected.values())
        terminalreporter.write_line(
            f"soundness oracle: {s.generated} programs tried (shrinking included), {s.accepted} accepted, "
            f"{rejected} rejected, {len(s.internal)} checker internal errors, {s.pairs} neighbouring pairs run, "
            f"{s.timeouts} timeouts, violations: {dict(s.violations) or 'none'}")
