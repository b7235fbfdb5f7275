"""The ledger in PostgreSQL: the same caps and charges as the SQLite ledger, for a curator service
that runs as several processes or on several hosts (docs/serve.md, "PostgreSQL").

Soundness as in the SQLite ledger: amounts are exact strings composed as Fractions; every charge
records the run's whole loss (stated epsilon and delta, rho, ProvenLoss); a charge is one
transaction that first takes a transaction-level advisory lock on every account it books (in
sorted order, so two charges never wait on each other in a cycle), then reads each account's
cap and history and asks `caps.check_charge` (the one cap check, shared with SQLite), then
inserts; it is committed before `charge_many` returns.  Needs psycopg 3
(`pip install "fuzzpy[postgres]"`).
"""

from __future__ import annotations

import re
import threading
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Callable, Optional, TypeVar

from ..diagnostics import error
from .amounts import check_amount
from .caps import (
    History,
    Usage,
    cap_from_row,
    cap_row,
    charge_notion,
    check_account,
    check_charge,
    loss_from_json,
    loss_json,
    usage,
)
from .sqlite import FINISH_STATUSES, Entry

T = TypeVar("T")
_DDL_LOCK = 0x66757A7A  # one advisory lock serialises the first CREATE TABLEs of concurrent processes
SCHEMA = [
    """CREATE TABLE IF NOT EXISTS fuzzpy_caps (
        dataset TEXT PRIMARY KEY, cap TEXT NOT NULL, label TEXT, set_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS fuzzpy_charges (
        id BIGSERIAL PRIMARY KEY, dataset TEXT NOT NULL, label TEXT NOT NULL,
        program_hash TEXT NOT NULL, epsilon TEXT NOT NULL, status TEXT NOT NULL,
        started_at TEXT NOT NULL, finished_at TEXT)""",
    "CREATE INDEX IF NOT EXISTS fuzzpy_charges_by_dataset ON fuzzpy_charges (dataset)",
    # Caps by notion and whole losses (older fuzzpy wrote pure epsilon caps and bare epsilons:
    # an old cap is a pure epsilon cap, an old charge a pure epsilon, as in SQLite's schema 1).
    "ALTER TABLE fuzzpy_caps ADD COLUMN IF NOT EXISTS notion TEXT NOT NULL DEFAULT 'epsilon'",
    "ALTER TABLE fuzzpy_caps ADD COLUMN IF NOT EXISTS delta TEXT",
    "ALTER TABLE fuzzpy_charges ADD COLUMN IF NOT EXISTS delta TEXT",
    "ALTER TABLE fuzzpy_charges ADD COLUMN IF NOT EXISTS rho TEXT",
    "ALTER TABLE fuzzpy_charges ADD COLUMN IF NOT EXISTS loss TEXT",
]
_CHARGE_COLUMNS = "id, dataset, label, program_hash, epsilon, status, started_at, finished_at, delta, rho, loss"


def masked(url: str) -> str:
    """The address without its password (it is shown in messages and run output)."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class PostgresLedger:
    """Caps and charges in PostgreSQL; one connection per thread (psycopg connections are not
    shared between threads that run transactions at once).  `extra_schema` adds the tables of
    whoever shares the database (the service's registry), created under the same lock."""

    def __init__(self, url: str, extra_schema: tuple[str, ...] = ()) -> None:
        try:
            import psycopg  # noqa: F401
        except ModuleNotFoundError:
            raise error("E1017", "a postgresql:// ledger needs psycopg: pip install \"fuzzpy[postgres]\"") from None
        self.url = url
        self.address = url  # what another process opens the same store with (it holds the password)
        self.where = masked(url)
        self._local = threading.local()
        self._all: list = []
        self._all_lock = threading.Lock()
        self._histories: dict[str, History] = {}  # per account: its charges composed so far
        self._histories_lock = threading.Lock()

        def create(cur: Any) -> None:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
            for statement in (*SCHEMA, *extra_schema):
                cur.execute(statement)

        self.transaction(create)

    # -- connections ------------------------------------------------------------------------

    def _conn(self) -> Any:
        import psycopg

        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def transaction(self, body: Callable[[Any], T]) -> T:
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

    # -- reading --------------------------------------------------------------------------------

    def _cap(self, cur: Any, key: str) -> Any:
        cur.execute("SELECT cap, notion, delta FROM fuzzpy_caps WHERE dataset = %s", (key,))
        row = cur.fetchone()
        if row is None:
            return None
        cap = cap_from_row(_amount(row[0], self.where), row[1], None if row[2] is None else _amount(row[2], self.where))
        if cap is None:
            raise error("E0602", f"the ledger {self.where} is corrupted (a cap of unknown notion {row[1]!r})")
        return cap

    def _history(self, cur: Any, key: str) -> History:
        """The account's charges composed, reading only those newer than the ones composed so far:
        an account's rows are inserted under its advisory lock and committed before it is released,
        so its ids grow in commit order and no older row can appear later."""
        with self._histories_lock:
            known = self._histories.get(key)
        history = known.copy() if known is not None else History()
        cur.execute("SELECT id, epsilon, delta, rho, loss FROM fuzzpy_charges WHERE dataset = %s AND id > %s "
                    "ORDER BY id", (key, history.last_id))
        for charge_id, eps, delta, rho, loss in cur.fetchall():
            history.add(_amount(eps, self.where), Fraction(0) if delta is None else _amount(delta, self.where),
                        None if rho is None else _amount(rho, self.where),
                        None if loss is None else _loss(loss, self.where))
            history.last_id = int(charge_id)
        with self._histories_lock:
            mine = self._histories.get(key)
            if mine is None or mine.last_id < history.last_id:
                self._histories[key] = history
        return history.copy()

    def cap_of(self, key: str) -> Any:
        """The account's cap as an `EpsilonCap` or a `RhoCap`; None: no cap."""
        return self.transaction(lambda cur: self._cap(cur, key))

    def cap(self, key: str) -> Optional[Fraction]:
        """The cap's amount (an epsilon or a rho: see `cap_of` for its notion); None: no cap."""
        found = self.cap_of(key)
        return None if found is None else (found.rho if hasattr(found, "rho") else found.epsilon)

    def usage(self, key: str) -> Usage:
        return usage(*self.transaction(lambda cur: (self._cap(cur, key), self._history(cur, key))))

    def entries(self, key: str) -> list[Entry]:
        def read(cur: Any) -> list[Entry]:
            cur.execute(f"SELECT {_CHARGE_COLUMNS} FROM fuzzpy_charges WHERE dataset = %s ORDER BY id", (key,))
            return [Entry(int(r[0]), r[1], r[2], r[3], _amount(r[4], self.where), r[5], r[6], r[7],
                          Fraction(0) if r[8] is None else _amount(r[8], self.where),
                          None if r[9] is None else _amount(r[9], self.where),
                          None if r[10] is None else _loss(r[10], self.where)) for r in cur.fetchall()]
        return self.transaction(read)

    # -- writing --------------------------------------------------------------------------------

    def set_cap(self, key: str, cap: Any, label: Optional[str] = None) -> None:
        """Set (or replace) an account's cap: an `EpsilonCap`, a `RhoCap`, or an exact number
        (a pure epsilon cap).  A None label keeps the old one."""
        amount, notion, delta = cap_row(cap)
        check_account(key)
        self.transaction(lambda cur: cur.execute(
            "INSERT INTO fuzzpy_caps (dataset, cap, label, set_at, notion, delta) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (dataset) DO UPDATE SET cap = EXCLUDED.cap, "
            "label = COALESCE(EXCLUDED.label, fuzzpy_caps.label), set_at = EXCLUDED.set_at, "
            "notion = EXCLUDED.notion, delta = EXCLUDED.delta",
            (key, amount, label, _now(), notion, delta)))

    def charge_many(self, amounts: dict[str, Fraction], program_hash: str, label: str = "",
                    delta: Fraction = Fraction(0), rho: Optional[Fraction] = None, loss: Any = None,
                    names: Optional[dict[str, str]] = None) -> list[int]:
        """Book each account's run in one transaction, all or none, after `caps.check_charge`
        of each capped account (the same contract as the SQLite ledger's `charge_many`)."""
        for key in amounts:
            check_account(key)
        checked = {k: check_amount(e, "epsilon") for k, e in amounts.items()}
        stored_delta, stored_rho = charge_notion(delta, rho)
        stored_loss = loss_json(loss)

        def book(cur: Any) -> list[int]:
            for key in sorted(checked):
                cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            for key, eps in checked.items():
                cap = self._cap(cur, key)
                if cap is not None:
                    check_charge(key, (names or {}).get(key) or key, cap, self._history(cur, key), eps,
                                 Fraction(delta), rho, loss)
            ids = []
            for key, eps in checked.items():
                cur.execute("INSERT INTO fuzzpy_charges (dataset, label, program_hash, epsilon, status, started_at, "
                            "delta, rho, loss) VALUES (%s, %s, %s, %s, 'charged', %s, %s, %s, %s) RETURNING id",
                            (key, label, program_hash, str(eps), _now(), stored_delta, stored_rho, stored_loss))
                ids.append(int(cur.fetchone()[0]))
            return ids

        return self.transaction(book)

    def finish_many(self, ids: list[int], status: str) -> None:
        """Mark runs finished (never a refund); runs already finished keep their status."""
        if status not in FINISH_STATUSES:
            raise error("E0605", f"invalid run status {status!r}")
        self.transaction(lambda cur: cur.execute(
            "UPDATE fuzzpy_charges SET status = %s, finished_at = %s WHERE id = ANY(%s) AND status = 'charged'",
            (status, _now(), list(ids))))


def _amount(text: Any, where: str) -> Fraction:
    try:
        value = Fraction(str(text))
    except (ValueError, ZeroDivisionError):
        value = Fraction(-1)
    if value < 0:
        raise error("E0602", f"the ledger {where} is corrupted (bad amount {str(text)[:40]!r})")
    return value


def _loss(text: Any, where: str) -> Any:
    try:
        return loss_from_json(text)
    except (ValueError, TypeError, KeyError, ZeroDivisionError, AttributeError):
        raise error("E0602", f"the ledger {where} is corrupted (a charge's privacy loss cannot be read)") from None
