"""The PostgreSQL ledger, against a real PostgreSQL server that this module starts itself
(initdb and pg_ctl from the machine's PostgreSQL binaries), never a mock.

Skipped, with the reason, only where no PostgreSQL server binaries are installed."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

import pytest

from .helpers import ADULT_CSV, ADULT_SCHEMA, COUNT_PROGRAM, Analyst, body, free_port, start_server, write_config


def _bindir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb") + glob.glob("/usr/local/pgsql/bin/initdb")
                        + glob.glob("/opt/homebrew/opt/postgresql*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def _as_user() -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no 'postgres' user to run the PostgreSQL server as")
    return ["runuser", "-u", "postgres", "--"]


@pytest.fixture(scope="module")
def postgres():
    bindir = _bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) found on this machine")
    prefix = _as_user()
    folder = Path(tempfile.mkdtemp(prefix="fuzzpy-pg-"))
    if prefix:
        shutil.chown(folder, "postgres", "postgres")
    data, port = folder / "data", free_port()
    run = lambda *args: subprocess.run([*prefix, *map(str, args)], check=True, capture_output=True, text=True,
                                       timeout=120)
    run(bindir / "initdb", "-D", data, "-U", "fuzzpy", "--auth=trust", "-E", "UTF8", "--no-sync")
    run(bindir / "pg_ctl", "-D", data, "-l", folder / "server.log", "-w", "-t", "60", "start", "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200")
    try:
        yield f"postgresql://fuzzpy@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def test_the_postgres_store_books_exactly_and_refuses_over_a_cap(postgres):
    from fuzzpy.diagnostics import FuzzError
    from fuzzpy.serve.pgstore import PostgresStore
    from fuzzpy.serve.store import AnalystRecord, DatasetRecord

    store = PostgresStore(postgres)
    try:
        store.set_cap("dataset:unit", Fraction(1))
        ids = store.charge({"dataset:unit": Fraction(1, 3), "analyst:a:unit": Fraction(1, 3)}, "sha256:p", "a: p.fz:main")
        store.charge({"dataset:unit": Fraction(2, 3)}, "sha256:p", "a")
        with pytest.raises(FuzzError) as refused:
            store.charge({"analyst:a:unit": Fraction(1, 100), "dataset:unit": Fraction(1, 100)}, "sha256:p", "a")
        assert [d.code for d in refused.value.diagnostics] == ["E0601"]
        assert "only 0.0 of the cap 1.0 remains" in refused.value.diagnostics[0].message
        store.finish(ids, "released")
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
    config = write_config(tmp_path, postgres, {"shared": (ADULT_CSV, ADULT_SCHEMA, "1.0")}, [alice, boss])
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
