"""Report how many programs the soundness oracle tried in this session."""

from __future__ import annotations

from .support import SESSION_STATS


def pytest_terminal_summary(terminalreporter) -> None:
    s = SESSION_STATS
    if s.generated:
        rejected = sum(s.rejected.values())
        terminalreporter.write_line(
            f"soundness oracle: {s.generated} programs tried (shrinking included), {s.accepted} accepted, "
            f"{rejected} rejected, {len(s.internal)} checker internal errors, {s.pairs} neighbouring pairs run, "
            f"{s.timeouts} timeouts, violations: {dict(s.violations) or 'none'}")
