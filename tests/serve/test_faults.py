"""Faults: a run over its time limit, `kill -9` of the server in the middle of a run, and a
restart that resumes the same ledger.  One configuration, two server processes in turn."""

from __future__ import annotations

import sqlite3
import threading
import time
from fractions import Fraction

import httpx
import pytest

from .helpers import ADULT_CSV, ADULT_SCHEMA, COUNT_PROGRAM, SLOW_PROGRAM, Analyst, body, start_server, write_config

ALICE = Analyst("alice", caps={"adult": "10"})
BOSS = Analyst("boss", role="curator")
RUN_SECONDS = 2


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    return write_config(folder, "ledger.sqlite", {"adult": (ADULT_CSV, ADULT_SCHEMA, "5")}, [ALICE, BOSS],
                        run_seconds=RUN_SECONDS)


def ledger_rows(config) -> list[tuple]:
    """The ledger's charges; none before a server has created the ledger (under xdist a test of
    this module may run first on its worker, before any server started on this config)."""
    path = config.parent / "ledger.sqlite"
    if not path.exists():
        return []
    db = sqlite3.connect(path)
    try:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'charges'").fetchone():
            return []
        return db.execute("SELECT id, dataset, epsilon, status FROM charges ORDER BY id").fetchall()
    finally:
        db.close()


def test_a_run_over_the_time_limit_is_stopped_and_keeps_its_charge(config):
    server = start_server(config)
    try:
        with server.client(ALICE.token) as c:
            r = c.post("/v1/run", json=body(SLOW_PROGRAM, format="json")).json()
            assert r["exit_code"] == 4 and r["result"]["stage"] == "run"
            assert [d["code"] for d in r["result"]["diagnostics"]] == ["E1009"]
            assert f"longer than {RUN_SECONDS} s" in r["stderr"]
            # what was released before the limit is shown (it was paid for)
            assert [x["name"] for x in r["result"]["releases"]] == ["c"]
            mine = c.get("/v1/spending").json()["datasets"][0]
            assert mine["spent"] == "0.1" and mine["runs"][0]["status"] == "failed"
            # the server is still serving
            again = c.post("/v1/run", json=body(COUNT_PROGRAM)).json()
            assert again["exit_code"] == 0, again
    finally:
        server.stop()


def test_kill_9_mid_run_loses_no_charge_and_a_restart_resumes_the_same_ledger(config):
    before = ledger_rows(config)
    server = start_server(config)
    outcome = {}

    def slow_run():
        try:
            with server.client(ALICE.token) as c:
                outcome["response"] = c.post("/v1/run", json=body(SLOW_PROGRAM))
        except httpx.TransportError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=slow_run)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while len(ledger_rows(config)) < len(before) + 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # wait for the charge (two rows: the dataset's and alice's)
        server.stop(kill=True)
    finally:
        thread.join(60)
    assert "error" in outcome, "the run ended before the server was killed"
    new = ledger_rows(config)[len(before):]
    assert sorted((d, e, s) for _, d, e, s in new) == [("analyst:alice:adult", "1/10", "charged"),
                                                       ("dataset:adult", "1/10", "charged")]

    server = start_server(config)
    try:
        with server.client(ALICE.token) as c:
            spent = Fraction(c.get("/v1/spending").json()["datasets"][0]["spent"])
            assert spent == sum(Fraction(e) for _, d, e, _ in ledger_rows(config) if d == "analyst:alice:adult")
            again = c.post("/v1/run", json=body(COUNT_PROGRAM)).json()
            assert again["exit_code"] == 0, again
            after = c.get("/v1/spending").json()["datasets"][0]
        assert Fraction(after["spent"]) == spent + Fraction(1, 10)
        assert [r["status"] for r in after["runs"]][-2:] == ["charged", "released"]  # the killed run still counts
        with server.client(BOSS.token) as c:
            adult = c.get("/v1/ledger").json()["datasets"][0]
        assert Fraction(adult["spent"]) == Fraction(after["spent"]) and adult["cap"] == "5.0"
    finally:
        server.stop()
