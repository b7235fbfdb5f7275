"""The PostgreSQL ledger, against a real PostgreSQL server that this module starts itself
(initdb and pg_ctl from the machine's PostgreSQL binaries), never a mock.

Skipped, with the reason, only where no PostgreSQL server binaries are installed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import pytest

from .helpers import ADULT_CSV, ADULT_SCHEMA, COUNT_PROGRAM, Analyst, body, start_server, write_config


def test_the_postgres_store_books_exactly_and_refuses_over_a_cap(postgres):
    from fuzzpy.diagnostics import FuzzError
    from fuzzpy.serve.pgstore import PostgresStore
    from fuzzpy.serve.store import AnalystRecord, DatasetRecord

    store = PostgresStore(postgres)
    try:
        store.set_cap("dataset:unit", Fraction(1))
        ids = store.charge_many({"dataset:unit": Fraction(1, 3), "analyst:a:unit": Fraction(1, 3)}, "sha256:p", "a: p.fz:main")
        store.charge_many({"dataset:unit": Fraction(2, 3)}, "sha256:p", "a")
        with pytest.raises(FuzzError) as refused:
            store.charge_many({"analyst:a:unit": Fraction(1, 100), "dataset:unit": Fraction(1, 100)}, "sha256:p", "a")
        assert [d.code for d in refused.value.diagnostics] == ["E0601"]
        assert "only 0.0 of the cap 1.0 remains" in refused.value.diagnostics[0].message
        store.finish_many(ids, "released")
        entries = store.entries("dataset:unit")
        assert [(e.epsilon, e.status) for e in entries] == [(Fraction(1, 3), "released"), (Fraction(2, 3), "charged")]
        assert [e.status for e in store.entries("analyst:a:unit")] == ["released"]  # the refused charge left no row
        rec = DatasetRecord("unit", "/data/unit.csv", "Adult", "schema Adult { age : num }", "sha256:x", "t")
        store.put_dataset(rec)
        store.put_analyst(AnalystRecord("a", "0" * 64, "analyst", "t"))
        assert store.dataset("unit") == rec and store.datasets() == [rec]
        assert [a.name for a in store.analysts()] == ["a"]
        assert "fuzzpy@127.0.0.1" in store.where
    finally:
        store.close()


def test_two_server_processes_on_one_postgres_ledger_never_overspend(postgres, tmp_path):
    """50 concurrent runs of epsilon 0.1 against a cap of 1.0, split over two server processes
    that share the ledger: exactly 10 succeed."""
    alice = Analyst("alice", caps={"shared": "100"})
    boss = Analyst("boss", role="curator")
    config = write_config(tmp_path, postgres, {"shared": (ADULT_CSV, ADULT_SCHEMA, "1.0")}, [alice, boss],
                          per_analyst=2, queue_per_analyst=64, queue_seconds=120)
    servers = [start_server(config)]
    servers.append(start_server(config))
    try:
        def one(i):
            with servers[i % 2].client(alice.token) as c:
                return c.post("/v1/run", json=body(COUNT_PROGRAM, "shared")).json()

        with ThreadPoolExecutor(50) as pool:
            results = list(pool.map(one, range(50)))
        assert sum(r["exit_code"] == 0 for r in results) == 10
        assert {d["code"] for r in results if r["exit_code"] for d in r["result"]["diagnostics"]} == {"E1013"}
        with servers[1].client(boss.token) as c:
            view = c.get("/v1/ledger").json()
        shared = view["datasets"][0]
        assert (shared["spent"], shared["remaining"]) == ("1.0", "0.0")
        assert sum(Fraction(r["epsilon"]) for r in shared["runs"]) == 1
        assert view["ledger"].startswith("postgresql://fuzzpy@")
        with servers[0].client(alice.token) as c:
            assert c.get("/v1/spending").json()["datasets"][0]["spent"] == "1.0"
    finally:
        for s in servers:
            s.stop()
