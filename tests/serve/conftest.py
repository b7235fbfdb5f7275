"""Fixtures of the service's tests: a throwaway PostgreSQL server, started by the tests themselves
(initdb and pg_ctl from the machine's PostgreSQL binaries), never a mock.  Tests that need it
are skipped, with the reason, only where no PostgreSQL server binaries are installed."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from .helpers import free_port


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
    def run(*args):
        return subprocess.run([*prefix, *map(str, args)], check=True, capture_output=True, text=True,
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
