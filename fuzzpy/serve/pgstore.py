"""The PostgreSQL store: the same ledger and registry as `SqliteStore`, for a service that runs
as several processes or on several hosts (docs/serve.md, "PostgreSQL").

Soundness as in the SQLite ledger: amounts are exact strings summed as Fractions; a charge is
one transaction that first takes a transaction-level advisory lock on every account it books
(in sorted order, so two charges never wait on each other in a cycle), then reads the caps and
the totals, then inserts; it is committed before `charge` returns.  Needs psycopg 3
(`pip install "fuzzpy[postgres]"`).
"""

from __future__ import annotations

import re
import threading
from fractions import Fraction
from typing import Any, Callable, Optional, TypeVar

from ..diagnostics import error
from ..runtime.ledger import FINISH_STATUSES, Entry, format_exact
from .store import AnalystRecord, DatasetRecord, now

T = TypeVar("T")
_DDL_LOCK = 0x66757A7A  # one advisory lock serialises the first CREATE TABLEs of concurrent processes
_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS fuzzpy_caps (
        dataset TEXT PRIMARY KEY, cap TEXT NOT NULL, label TEXT, set_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS fuzzpy_charges (
        id BIGSERIAL PRIMARY KEY, dataset TEXT NOT NULL, label TEXT NOT NULL,
        program_hash TEXT NOT NULL, epsilon TEXT NOT NULL, status TEXT NOT NULL,
        started_at TEXT NOT NULL, finished_at TEXT)""",
    "CREATE INDEX IF NOT EXISTS fuzzpy_charges_by_dataset ON fuzzpy_charges (dataset)",
    """CREATE TABLE IF NOT EXISTS fuzzpy_serve_datasets (
        name TEXT PRIMARY KEY, data_path TEXT NOT NULL, schema_name TEXT NOT NULL,
        schema_source TEXT NOT NULL, identity TEXT NOT NULL, registered_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS fuzzpy_serve_analysts (
        name TEXT PRIMARY KEY, token_hash TEXT NOT NULL, role TEXT NOT NULL, created_at TEXT NOT NULL)""",
]
_CHARGE_COLUMNS = "id, dataset, label, program_hash, epsilon, status, started_at, finished_at"


def _masked(url: str) -> str:
    """The address without its password (it is shown in messages and run output)."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


class PostgresStore:
    def __init__(self, url: str) -> None:
        try:
            import psycopg  # noqa: F401
        except ModuleNotFoundError:
            raise error("E1017", "a postgresql:// ledger needs psycopg: pip install \"fuzzpy[postgres]\"") from None
        self.url = url
        self.where = _masked(url)
        self._local = threading.local()
        self._all: list = []
        self._all_lock = threading.Lock()

        def create(cur: Any) -> None:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
            for statement in _SCHEMA:
                cur.execute(statement)

        self._tx(create)

    # -- connections --------------------------------------------------------------------------

    def _conn(self) -> Any:
        import psycopg

        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _tx(self, body: Callable[[Any], T]) -> T:
        """Run `body(cursor)` in one transaction; a database failure is E0602, never a traceback."""
        import psycopg

        try:
            conn = self._conn()
            with conn.transaction(), conn.cursor() as cur:
                return body(cur)
        except psycopg.Error as exc:
            self._local.conn = None
            raise error("E0602", f"cannot use the ledger {self.where}: {type(exc).__name__}") from None

    def close(self) -> None:
        with self._all_lock:
            for conn in self._all:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - closing at shutdown
                    pass
            self._all.clear()
        self._local = threading.local()

    # -- the ledger -----------------------------------------------------------------------------

    @staticmethod
    def _cap(cur: Any, key: str) -> Optional[Fraction]:
        cur.execute("SELECT cap FROM fuzzpy_caps WHERE dataset = %s", (key,))
        row = cur.fetchone()
        return None if row is None else Fraction(row[0])

    @staticmethod
    def _spent(cur: Any, key: str) -> Fraction:
        cur.execute("SELECT epsilon FROM fuzzpy_charges WHERE dataset = %s", (key,))
        return sum((Fraction(r[0]) for r in cur.fetchall()), Fraction(0))

    def charge(self, accounts: dict[str, Fraction], program_hash: str, label: str) -> list[int]:
        def book(cur: Any) -> list[int]:
            for key in sorted(accounts):
                cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            for key, eps in accounts.items():
                cap = self._cap(cur, key)
                if cap is not None:
                    spent = self._spent(cur, key)
                    if spent + eps > cap:
                        left = max(cap - spent, Fraction(0))
                        raise error("E0601", f"this run needs epsilon {format_exact(eps)} but only "
                                             f"{format_exact(left)} of the cap {format_exact(cap)} remains "
                                             f"for {key}")
            ids = []
            for key, eps in accounts.items():
                cur.execute("INSERT INTO fuzzpy_charges (dataset, label, program_hash, epsilon, status, started_at) "
                            "VALUES (%s, %s, %s, %s, 'charged', %s) RETURNING id",
                            (key, label, program_hash, str(Fraction(eps)), now()))
                ids.append(int(cur.fetchone()[0]))
            return ids

        return self._tx(book)

    def finish(self, ids: list[int], status: str) -> None:
        if status not in FINISH_STATUSES:
            raise error("E0605", f"invalid run status {status!r}")
        self._tx(lambda cur: cur.execute(
            "UPDATE fuzzpy_charges SET status = %s, finished_at = %s WHERE id = ANY(%s) AND status = 'charged'",
            (status, now(), list(ids))))

    def set_cap(self, key: str, cap: Fraction, label: Optional[str] = None) -> None:
        self._tx(lambda cur: cur.execute(
            "INSERT INTO fuzzpy_caps (dataset, cap, label, set_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (dataset) DO UPDATE SET cap = EXCLUDED.cap, "
            "label = COALESCE(EXCLUDED.label, fuzzpy_caps.label), set_at = EXCLUDED.set_at",
            (key, str(Fraction(cap)), label, now())))

    def cap(self, key: str) -> Optional[Fraction]:
        return self._tx(lambda cur: self._cap(cur, key))

    def entries(self, key: str) -> list[Entry]:
        def read(cur: Any) -> list[Entry]:
            cur.execute(f"SELECT {_CHARGE_COLUMNS} FROM fuzzpy_charges WHERE dataset = %s ORDER BY id", (key,))
            return [Entry(int(r[0]), r[1], r[2], r[3], Fraction(r[4]), r[5], r[6], r[7]) for r in cur.fetchall()]
        return self._tx(read)

    # -- the registry ---------------------------------------------------------------------------

    def put_dataset(self, rec: DatasetRecord) -> None:
        self._tx(lambda cur: cur.execute(
            "INSERT INTO fuzzpy_serve_datasets (name, data_path, schema_name, schema_source, identity, registered_at) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET data_path = EXCLUDED.data_path, "
            "schema_name = EXCLUDED.schema_name, schema_source = EXCLUDED.schema_source, "
            "identity = EXCLUDED.identity, registered_at = EXCLUDED.registered_at",
            (rec.name, rec.data_path, rec.schema_name, rec.schema_source, rec.identity, rec.registered_at)))

    def dataset(self, name: str) -> Optional[DatasetRecord]:
        def read(cur: Any) -> Optional[DatasetRecord]:
            cur.execute("SELECT name, data_path, schema_name, schema_source, identity, registered_at "
                        "FROM fuzzpy_serve_datasets WHERE name = %s", (name,))
            row = cur.fetchone()
            return DatasetRecord(*row) if row else None
        return self._tx(read)

    def datasets(self) -> list[DatasetRecord]:
        def read(cur: Any) -> list[DatasetRecord]:
            cur.execute("SELECT name, data_path, schema_name, schema_source, identity, registered_at "
                        "FROM fuzzpy_serve_datasets ORDER BY name")
            return [DatasetRecord(*r) for r in cur.fetchall()]
        return self._tx(read)

    def put_analyst(self, rec: AnalystRecord) -> None:
        self._tx(lambda cur: cur.execute(
            "INSERT INTO fuzzpy_serve_analysts (name, token_hash, role, created_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET token_hash = EXCLUDED.token_hash, role = EXCLUDED.role",
            (rec.name, rec.token_hash, rec.role, rec.created_at)))

    def analysts(self) -> list[AnalystRecord]:
        def read(cur: Any) -> list[AnalystRecord]:
            cur.execute("SELECT name, token_hash, role, created_at FROM fuzzpy_serve_analysts ORDER BY name")
            return [AnalystRecord(*r) for r in cur.fetchall()]
        return self._tx(read)
