"""Where the service keeps its state: the budget ledger and the registry of datasets and analysts.

Two stores with one interface: `SqliteStore` (the default, zero set-up) reuses the SQLite
ledger of `fuzzpy run` (fuzzpy/ledger/) and adds two registry tables to the same
file; `PostgresStore` (fuzzpy/serve/pgstore.py) keeps the same tables in PostgreSQL, for a
service that runs as several processes or on several hosts.

Every charge books two accounts in one transaction, all or nothing: the dataset's
(`dataset:NAME`, capped by the dataset's total cap) and the analyst's on that dataset
(`analyst:WHO:NAME`, capped by the analyst's cap).  Each account's cap is checked by the
ledger's one cap check (`fuzzpy.ledger.caps.check_charge`) against its composed history, with
the run's whole loss; so neither cap can be overspent, in any privacy notion, however many
requests run at once, and the charge is committed before the run starts.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional, Protocol

from ..diagnostics import error
from ..ledger import BUSY_TIMEOUT_S, Entry, Ledger, Usage

ROLES = ("analyst", "curator")


def dataset_key(name: str) -> str:
    return f"dataset:{name}"


def analyst_key(analyst: str, dataset: str) -> str:
    return f"analyst:{analyst}:{dataset}"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class DatasetRecord:
    """A registered dataset.  `identity` is the sha256 of the data file when it was registered:
    the service refuses the dataset while the file's bytes differ (E1010)."""

    name: str
    data_path: str
    schema_name: str
    schema_source: str
    identity: str
    registered_at: str


@dataclass(frozen=True)
class AnalystRecord:
    name: str
    token_hash: str  # sha256 hex of the token: the token itself is never stored
    role: str  # "analyst" or "curator"
    created_at: str


class Store(Protocol):
    """What the service needs from its storage (both stores implement it)."""

    where: str

    def charge_many(self, amounts: dict[str, Fraction], program_hash: str, label: str = "",
                    delta: Fraction = Fraction(0), rho: Optional[Fraction] = None, loss: Any = None,
                    names: Optional[dict[str, str]] = None) -> list[int]: ...
    def finish_many(self, ids: list[int], status: str) -> None: ...
    def set_cap(self, key: str, cap: Any, label: Optional[str] = None) -> None: ...
    def cap(self, key: str) -> Optional[Fraction]: ...
    def cap_of(self, key: str) -> Any: ...
    def usage(self, key: str) -> Usage: ...
    def entries(self, key: str) -> list[Entry]: ...
    def put_dataset(self, rec: DatasetRecord) -> None: ...
    def dataset(self, name: str) -> Optional[DatasetRecord]: ...
    def datasets(self) -> list[DatasetRecord]: ...
    def put_analyst(self, rec: AnalystRecord) -> None: ...
    def analysts(self) -> list[AnalystRecord]: ...
    def close(self) -> None: ...


_REGISTRY = """
CREATE TABLE IF NOT EXISTS serve_datasets (
    name          TEXT PRIMARY KEY,
    data_path     TEXT NOT NULL,
    schema_name   TEXT NOT NULL,
    schema_source TEXT NOT NULL,
    identity      TEXT NOT NULL,
    registered_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS serve_analysts (
    name       TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    role       TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""
_DATASET_COLUMNS = "name, data_path, schema_name, schema_source, identity, registered_at"
_ANALYST_COLUMNS = "name, token_hash, role, created_at"


class SqliteStore:
    """The SQLite ledger plus the registry tables, in one file.  The tables are added with
    CREATE TABLE IF NOT EXISTS: a ledger written by `fuzzpy run` keeps working, and older
    fuzzpy versions read a service's ledger (they look only at `caps` and `charges`).

    SQLite connections belong to one thread, and the service answers on many: each thread
    opens its own ledger connection on first use."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser().resolve()
        self.where = str(self.path)
        self.address = str(self.path)  # what another process opens the same store with
        self._local = threading.local()
        self._all: list = []
        self._all_lock = threading.Lock()
        Ledger(self.path).close()  # creates a complete ledger where there is none
        db = self._registry()
        try:
            self._write(db, lambda: [db.execute(s) for s in _REGISTRY.split(";") if s.strip()])
        except sqlite3.Error as exc:
            raise error("E0602", f"cannot use the ledger {self.path}: {exc}") from None

    # -- connections, one per thread --------------------------------------------------------

    def _book(self) -> Ledger:
        book = getattr(self._local, "book", None)
        if book is None:
            book = self._local.book = Ledger(self.path, create=False)
            with self._all_lock:
                self._all.append(book)
        return book

    def _registry(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            # mode=rw: never creates a file (a deleted ledger must be refused, not replaced)
            db = sqlite3.connect(f"{self.path.as_uri()}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_S,
                                 isolation_level=None, check_same_thread=False)
            self._local.db = db
            with self._all_lock:
                self._all.append(db)
        return db

    @staticmethod
    def _write(db: sqlite3.Connection, body) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            body()
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _read(self, query: str, args: tuple = ()) -> list[tuple]:
        try:
            return self._registry().execute(query, args).fetchall()
        except sqlite3.Error as exc:
            raise error("E0602", f"cannot use the ledger {self.path}: {exc}") from None

    def close(self) -> None:
        with self._all_lock:
            for conn in self._all:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - closing at shutdown: nothing to report
                    pass
            self._all.clear()
        self._local = threading.local()

    # -- the ledger: the runtime's own code ---------------------------------------------------

    def charge_many(self, amounts: dict[str, Fraction], program_hash: str, label: str = "",
                    delta: Fraction = Fraction(0), rho: Optional[Fraction] = None, loss: Any = None,
                    names: Optional[dict[str, str]] = None) -> list[int]:
        return self._book().charge_many(amounts, program_hash, label, delta, rho, loss, names)

    def finish_many(self, ids: list[int], status: str) -> None:
        self._book().finish_many(ids, status)

    def set_cap(self, key: str, cap: Any, label: Optional[str] = None) -> None:
        self._book().set_cap(key, cap, label)

    def cap(self, key: str) -> Optional[Fraction]:
        return self._book().cap(key)

    def cap_of(self, key: str) -> Any:
        return self._book().cap_of(key)

    def usage(self, key: str) -> Usage:
        return self._book().usage(key)

    def entries(self, key: str) -> list[Entry]:
        return self._book().entries(key)

    # -- the registry -----------------------------------------------------------------------

    def put_dataset(self, rec: DatasetRecord) -> None:
        db = self._registry()
        self._write(db, lambda: db.execute(
            f"INSERT OR REPLACE INTO serve_datasets ({_DATASET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (rec.name, rec.data_path, rec.schema_name, rec.schema_source, rec.identity, rec.registered_at)))

    def dataset(self, name: str) -> Optional[DatasetRecord]:
        rows = self._read(f"SELECT {_DATASET_COLUMNS} FROM serve_datasets WHERE name = ?", (name,))
        return DatasetRecord(*rows[0]) if rows else None

    def datasets(self) -> list[DatasetRecord]:
        return [DatasetRecord(*r) for r in self._read(f"SELECT {_DATASET_COLUMNS} FROM serve_datasets ORDER BY name")]

    def put_analyst(self, rec: AnalystRecord) -> None:
        db = self._registry()
        self._write(db, lambda: db.execute(
            f"INSERT OR REPLACE INTO serve_analysts ({_ANALYST_COLUMNS}) VALUES (?, ?, ?, ?)",
            (rec.name, rec.token_hash, rec.role, rec.created_at)))

    def analysts(self) -> list[AnalystRecord]:
        return [AnalystRecord(*r) for r in self._read(f"SELECT {_ANALYST_COLUMNS} FROM serve_analysts ORDER BY name")]


def open_store(where: str) -> Store:
    """A PostgreSQL store for a postgresql:// (or postgres://) address, else the SQLite file."""
    if where.startswith(("postgresql://", "postgres://")):
        from .pgstore import PostgresStore

        return PostgresStore(where)
    return SqliteStore(Path(where))
