"""A one-run session (the command line's, `Session.freeze_heap`) holds the cyclic garbage
collector while it starts (imports, the check, reading the data) and lets it run during the
run, over a frozen heap; the collector's state is as it was afterwards."""

from __future__ import annotations

import gc
from types import SimpleNamespace

from fuzzpy.pipeline.session import Session, collector_held, heap_frozen


class _NoTables:
    def close(self) -> None:
        pass


def _session(check, freeze_heap: bool) -> Session:
    return Session(check=check, tables=_NoTables(), charger=None, label="t", freeze_heap=freeze_heap)


def test_a_one_run_session_holds_the_collector_while_it_starts() -> None:
    seen: list[bool] = []

    def check():
        seen.append(gc.isenabled())
        return SimpleNamespace(ok=False, guarantee=None, diagnostics=[])

    assert gc.isenabled()
    _session(check, freeze_heap=True).execute()
    _session(check, freeze_heap=False).execute()
    assert seen == [False, True] and gc.isenabled()


def test_the_run_collects_over_a_frozen_heap_and_the_held_state_returns() -> None:
    with collector_held(True):
        assert not gc.isenabled()
        with heap_frozen(True):
            assert gc.isenabled() and gc.get_freeze_count() > 0
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_held(True):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
