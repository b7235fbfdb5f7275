"""The local privacy-budget ledger: a SQLite file recording every run charged on every dataset.

Soundness rules this module keeps (see docs/ledger.md):
- A charge is committed to disk *before* `charge` returns, so the caller can only release values
  after the budget is booked; a process killed afterwards keeps its charge.
- Check-and-charge is one `BEGIN IMMEDIATE` transaction, which takes SQLite's write lock before
  reading the total, so concurrent processes are serialised and can never overspend a cap.
- Amounts are `Fraction`s stored as exact strings ("3/10"); sums and comparisons are exact.
- Finishing a run never refunds: a failed run may already have released something.
- A new ledger appears complete or not at all (built aside, then hard-linked into place), so a
  file that is empty, unreadable or not a ledger is always an error, never a fresh ledger: a
  truncated ledger must not silently lose its caps and spending.
- `backup` copies a consistent snapshot through SQLite's backup API (write-ahead log included).
- The file charged is the file at the path: a charge or cap change first checks, inside its
  write transaction, that the path still names the file this instance opened (device and
  inode of its own descriptor), and again after its commit; a deleted or replaced ledger is
  refused (E0602), never charged silently.
- The guard beside the ledger (guard.py) records its id and how far it got: a ledger that is
  not the one recorded, or older than it, is refused, and so is a new ledger where one lived.
- A passive checkpoint after each charge or cap change folds the write-ahead log into the
  main file, so that a plain copy of it holds every commit whenever no run is at work.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from ..diagnostics import FuzzError, error
from .amounts import check_amount
from .caps import (
    DEFAULT_CAP_NOTE,
    CapRefusal,
    History,
    Usage,
    cap_amount,
    cap_from_row,
    cap_row,
    charge_notion,
    check_account,
    check_charge,
    loss_from_json,
    loss_json,
    usage,
)
from .files import exists as _exists
from .files import fsync_file as _fsync
from .files import new_temp as _new_temp
from .files import sync_folder as _sync_folder
from .guard import LedgerState, check_ledger, check_no_lost_ledger, read_guard, write_guard
from .identity import short_id, why

T = TypeVar("T")

ENV_VAR = "FUZZPY_LEDGER"
SCHEMA_VERSION = 5  # 2: charges record the delta and rho of runs stated in (epsilon, delta)
#                    3: charges record their ProvenLoss; caps have a notion (epsilon at a delta, or rho)
#                    4: ledger_meta holds the ledger's id and its number of cap changes (guard.py)
#                    5: caps record their origin (a default cap, or one set); dataset_names records
#                       the files (or names) each dataset was seen as
BUSY_TIMEOUT_S = 30.0  # how long a run waits for another process's charge before giving up
FINISH_STATUSES = ("released", "failed")

_CAPS_COLUMNS_V1 = ("dataset", "cap", "label", "set_at")
_CAPS_COLUMNS_V3 = _CAPS_COLUMNS_V1 + ("notion", "delta")
_CAPS_COLUMNS = _CAPS_COLUMNS_V3 + ("origin",)
_CHARGES_COLUMNS_V1 = ("id", "dataset", "label", "program_hash", "epsilon", "status",
                       "started_at", "finished_at")
_CHARGES_COLUMNS_V2 = _CHARGES_COLUMNS_V1 + ("delta", "rho")
_CHARGES_COLUMNS = _CHARGES_COLUMNS_V2 + ("loss",)
_META_COLUMNS = ("key", "value")
_NAMES_COLUMNS = ("dataset", "name", "first_seen")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS caps (
    dataset TEXT PRIMARY KEY,
    cap     TEXT NOT NULL,
    label   TEXT,
    set_at  TEXT NOT NULL,
    notion  TEXT NOT NULL DEFAULT 'epsilon',
    delta   TEXT,
    origin  TEXT NOT NULL DEFAULT 'set'
);
CREATE TABLE IF NOT EXISTS charges (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset      TEXT NOT NULL,
    label        TEXT NOT NULL,
    program_hash TEXT NOT NULL,
    epsilon      TEXT NOT NULL,
    status       TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    finished_at  TEXT,
    delta        TEXT,
    rho          TEXT,
    loss         TEXT
);
CREATE INDEX IF NOT EXISTS charges_by_dataset ON charges (dataset);
CREATE TABLE IF NOT EXISTS ledger_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dataset_names (
    dataset    TEXT NOT NULL,
    name       TEXT NOT NULL,
    first_seen TEXT NOT NULL,
    PRIMARY KEY (dataset, name)
);
"""


@dataclass(frozen=True)
class Entry:
    """One recorded run. `epsilon` counts against the cap whatever the status."""

    id: int
    dataset: str
    label: str
    program_hash: str
    epsilon: Fraction
    status: str  # "charged" (unfinished or killed), "released" or "failed"
    started_at: str
    finished_at: str | None
    delta: Fraction = Fraction(0)  # the delta of its (epsilon, delta); 0 for a pure epsilon
    rho: Fraction | None = None    # its zCDP rho, when it made Gaussian releases
    loss: Any = None               # its fuzzpy.accounting.ProvenLoss (schema 3), None when not recorded


def default_ledger_path() -> Path:
    """$FUZZPY_LEDGER if set, else ~/.fuzzpy/ledger.sqlite (creating ~/.fuzzpy)."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    try:
        folder = Path.home() / ".fuzzpy"
        folder.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError) as exc:
        raise error("E0602", f"cannot create the default ledger folder ~/.fuzzpy ({why(exc)}); "
                             f"set {ENV_VAR} or pass --ledger") from None
    return folder / "ledger.sqlite"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")



# ---------------------------------------------------------------------------------------------
# The ledger


class Ledger:
    """A ledger file. One instance per process: do not share it across fork().

    `create`: make a new ledger when there is no file at `path` (refused where its guard
    records a ledger with caps or charges).  `readonly`: open without writing anything (no WAL
    switch, no shared-memory file, no guard written), which is what `ledger show` and `ledger
    backup` need, also in a read-only folder."""

    def __init__(self, path: Path, create: bool = True, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._histories: dict[str, History] = {}  # per dataset: its charges composed so far
        if _exists(self.path):
            self._check_existing()
        else:
            check_no_lost_ledger(self.path)
            if not create or readonly:
                raise error("E0602", f"no ledger at {self.path}")
            self._create()
        # Our own descriptor of the file opened (SQLite does not expose its own): a charge
        # compares it with what the path names then.  Opened before SQLite, checked after.
        self._file = self._open_file()
        try:
            self._db = self._connect()
        except sqlite3.Error as exc:
            self._file.close()
            raise self._unavailable(exc) from None
        try:
            self._prepare()
        except BaseException:
            self.close()
            raise

    def _open_file(self):
        try:  # O_NONBLOCK: a FIFO swapped in after _check_existing must not block the open
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise error("E0602", f"cannot use the ledger {self.path}: {why(exc)}") from None
        return os.fdopen(fd, "rb", buffering=0)

    def _check_existing(self) -> None:
        """Whatever is at the path must be a ledger: never replaced, never silently empty."""
        if self.path.is_symlink() and not self.path.exists():
            raise error("E0602", f"the ledger path {self.path} is a link to a file that does not exist")
        try:
            info = self.path.stat()
        except OSError as exc:
            raise error("E0602", f"cannot use the ledger {self.path}: {why(exc)}") from None
        if stat.S_ISDIR(info.st_mode):
            raise error("E0602", f"the ledger path {self.path} is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise error("E0602", f"the ledger path {self.path} is not a regular file")
        if info.st_size == 0:
            raise error("E0602", f"the ledger {self.path} is empty (0 bytes): it holds no caps and no "
                                 "spending, so it is not used as a new ledger",
                        None, "if it was truncated, delete it and restore it from a backup (`fuzzpy ledger "
                              "restore BACKUP`, docs/ledger.md); if you meant to start a new ledger, delete "
                              "the empty file and its .guard file")

    def _create(self) -> None:
        """A new, complete ledger at `path`: built in a temporary file of the same folder, then
        hard-linked into place, so no process ever sees it half made (or empty).  When several
        processes create it at once, one link wins and the others open that ledger."""
        folder = self.path.parent
        if not folder.is_dir():
            # Not created silently: a typo in --ledger would otherwise start a ledger without caps.
            raise error("E0602", f"cannot create the ledger {self.path}: folder {folder} does not exist")
        try:
            tmp = _new_temp(self.path)
        except OSError as exc:
            raise error("E0602", f"cannot create the ledger {self.path}: {why(exc)}") from None
        try:
            _new_ledger_file(tmp)
            os.link(tmp, self.path)
            _sync_folder(folder)
        except FileExistsError:
            pass  # another process created it first: use theirs
        except (OSError, sqlite3.Error) as exc:
            raise error("E0602", f"cannot create the ledger {self.path}: {why(exc)}") from None
        finally:
            _remove_database(tmp)
        if _exists(self.path):
            self._check_existing()

    def _connect(self) -> sqlite3.Connection:
        uri = self.path.resolve().as_uri()
        if not self.readonly:  # mode=rw: SQLite itself never creates a file (only _create does)
            return sqlite3.connect(f"{uri}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            return _probe(sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                                          isolation_level=None))
        except sqlite3.OperationalError as exc:
            # In a folder we cannot write to, SQLite cannot create the shared-memory file WAL
            # reading needs.  Without a write-ahead log or a rollback journal beside it, the file
            # holds every commit and no writer can be at work (it would need one of them): read
            # it as immutable.  Never when busy: a writer holds it.
            if _is_busy(exc):
                raise
            if _has_log(self.path):
                raise error("E0602", f"cannot read the ledger {self.path}: a write-ahead log or journal beside it "
                                     "holds commits, which SQLite reads only with write access to the folder",
                            None, f"copy {self.path.name} together with its -wal (or -journal) file to a folder "
                                  "you can write to, and read that copy") from None
            return _probe(sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None))

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()
        self._file.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _prepare(self) -> None:
        # Inspect before changing anything: a mistyped --ledger must not alter someone's database.
        version, has_tables = self._transaction(self._inspect, write=False)
        if version > SCHEMA_VERSION:
            raise error("E0602", f"the ledger {self.path} was written by a newer fuzzpy "
                                 f"(schema {version}); upgrade fuzzpy to use it")
        if version == 0:  # new ledgers are made complete by _create: this is another database
            what = "it holds other tables" if has_tables else "it holds no ledger tables"
            raise error("E0602", f"{self.path} is not a fuzzpy ledger ({what})")
        self._version = version
        self._transaction(self._check_schema, write=False)
        # Compared with its guard before anything is written: a file put in the ledger's place
        # is refused as it is, not upgraded first.
        self._transaction(lambda: self._check_guard(_OPENING), write=False)
        if not self.readonly:
            with self._guard():
                _retry_busy(self._configure)
            if version < SCHEMA_VERSION:
                self._transaction(self._upgrade)
            self._transaction(lambda: self._sync_guard(_OPENING))

    def _upgrade(self) -> None:
        """Upgrade to SCHEMA_VERSION (see `_upgrade_schema`), in the transaction that checks
        the version, so two processes opening an old ledger at once upgrade it once."""
        self._version = _upgrade_schema(self._db)

    def _inspect(self) -> tuple[int, bool]:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        tables = self._db.execute(
            "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchone()[0]
        return int(version), tables > 0

    def _configure(self) -> None:
        # WAL lets `show` read while a run writes; FULL sync keeps a commit through power loss.
        # Switch only when needed: the switch fails at once while another process opens the file.
        if self._db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")

    def backup(self, target: Path) -> int:
        """Write a consistent copy of the ledger to `target`, which must not exist yet; returns
        the number of runs it records.

        SQLite's backup API reads one snapshot through this connection, committed charges still
        in the write-ahead log included (copying the .sqlite file alone can lose them).  The copy
        is built aside, checked, made a single self-contained file (no WAL), then linked into
        place: `target` is complete or absent."""
        target = Path(target)
        if _exists(target):
            raise error("E0605", f"the backup file {target} already exists; give a new name")
        if not target.parent.is_dir():
            raise error("E0605", f"cannot write the backup {target}: folder {target.parent} does not exist")
        try:
            tmp = _new_temp(target)
        except OSError as exc:
            raise error("E0602", f"cannot write the backup {target}: {why(exc)}") from None
        try:
            copy = sqlite3.connect(str(tmp), isolation_level=None)
            try:
                with self._guard():
                    _retry_busy(lambda: self._db.backup(copy))
                runs = _verified_copy(copy, tmp)
            finally:
                copy.close()
            _fsync(tmp)
            os.link(tmp, target)
            _sync_folder(target.parent)
        except FileExistsError:
            raise error("E0605", f"the backup file {target} already exists; give a new name") from None
        except (OSError, sqlite3.Error) as exc:
            raise error("E0602", f"cannot write the backup {target}: {why(exc)}") from None
        finally:
            _remove_database(tmp)
        return runs

    def _check_schema(self) -> None:
        charges = {1: _CHARGES_COLUMNS_V1, 2: _CHARGES_COLUMNS_V2}.get(self._version, _CHARGES_COLUMNS)
        caps = _CAPS_COLUMNS_V1 if self._version < 3 else _CAPS_COLUMNS_V3 if self._version < 5 else _CAPS_COLUMNS
        tables = [("caps", caps), ("charges", charges)]
        if self._version >= 4:
            tables.append(("ledger_meta", _META_COLUMNS))
        if self._version >= 5:
            tables.append(("dataset_names", _NAMES_COLUMNS))
        for table, expected in tables:
            rows = self._db.execute(f"PRAGMA table_info({table})").fetchall()
            if tuple(r[1] for r in rows) != expected:
                raise error("E0602", f"{self.path} is not a fuzzpy ledger (table {table!r} is "
                                     "missing or has other columns)")

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn any SQLite failure (corrupt file, disk full, lock timeout) into E0602."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None

    def _transaction(self, body: Callable[[], T], write: bool = True) -> T:
        """Run `body` in one transaction; a write takes the lock (BEGIN IMMEDIATE) before reading.

        Nothing is committed unless `body` returns, so a busy retry re-runs it from scratch.
        """
        def attempt() -> T:
            self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = body()
                self._db.execute("COMMIT")
                return result
            except BaseException:
                if self._db.in_transaction:  # SQLite may already have rolled back (disk full)
                    self._db.execute("ROLLBACK")
                raise

        with self._guard():
            return _retry_busy(attempt)

    def _unavailable(self, exc: sqlite3.Error):
        if _is_busy(exc):
            return error("E0602", f"the ledger {self.path} stayed busy for {BUSY_TIMEOUT_S:g} s "
                                  "(another run holds it); try again")
        return error("E0602", f"cannot use the ledger {self.path}: {exc}")

    # -- the file at the path, and its guard ----------------------------------------------------

    def _check_same_file(self, consequence: str) -> None:
        """The path still names the file this instance opened: not deleted, moved or replaced
        (a charge into a deleted file would be lost with it)."""
        opened = os.fstat(self._file.fileno())
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            raise error("E0602", f"the ledger {self.path} was deleted or moved while in use: {consequence}",
                        None, _LOST_LEDGER) from None
        except OSError as exc:
            raise error("E0602", f"cannot use the ledger {self.path}: {why(exc)}") from None
        if (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
            raise error("E0602", f"the ledger {self.path} was replaced by another file while in use: "
                                 f"{consequence}", None, _LOST_LEDGER)

    def _check_guard(self, consequence: str) -> tuple[LedgerState | None, LedgerState]:
        """In a transaction: the file is the one opened, and the one its guard records, at least
        as far along; returns (guard, ledger state).  The guard is read first: it never leads
        what is committed, so a charge committed between the two reads cannot make a sound
        ledger look older than its guard."""
        self._check_same_file(consequence)
        guard = read_guard(self.path)
        state = _read_state(self._db, self.path)
        check_ledger(self.path, guard, state)
        return guard, state

    def _sync_guard(self, consequence: str) -> None:
        """In a write transaction: check, then bring the guard up to what is committed.  Under
        the write lock, so guard updates are serialised and the guard's last charge only grows."""
        guard, state = self._check_guard(consequence)
        if guard != state:
            write_guard(self.path, state)

    def _after_write(self, consequence: str) -> None:
        """After a committed charge or cap change: the file is still the ledger at the path (else
        `consequence`), the guard records it, and the log is folded into the main file."""
        self._transaction(lambda: self._sync_guard(consequence))
        try:  # PASSIVE never waits for readers; best effort, the commit is durable in the log already
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            pass

    def state(self) -> LedgerState:
        """The ledger's id, its last charge and its number of cap changes (what the guard records)."""
        return self._transaction(lambda: _read_state(self._db, self.path), write=False)

    # -- caps ---------------------------------------------------------------------------------

    def set_cap(self, dataset: str, cap: Any, label: str | None = None) -> None:
        """Set (or replace) the cap of `dataset`: an `EpsilonCap(epsilon, delta)` (delta 0: a
        pure epsilon cap), a `RhoCap(rho)`, or an exact number, meaning a pure epsilon cap.
        A None label keeps the old one.  The cap is one set on purpose (it replaces a default)."""
        check_account(dataset)
        row = cap_row(cap)

        def record() -> None:
            self._check_same_file("the cap was not set")
            self._write_cap(dataset, row, label, "set")

        self._transaction(record)
        self._after_write("the cap was set in the file opened, which is no longer the ledger at that path")

    def _write_cap(self, dataset: str, row: tuple[str, str, str | None], label: str | None, origin: str) -> None:
        """In a write transaction: store a cap (`caps.cap_row`) and count the change (guard.py)."""
        amount, notion, delta = row
        if self._version < 3 and (notion != "epsilon" or delta is not None):
            raise error("E0602", f"the ledger {self.path} must be upgraded before it records a cap in "
                                 "another notion than pure epsilon")
        if self._version < 3:  # defensive: a writable ledger is upgraded when opened
            self._db.execute("INSERT INTO caps (dataset, cap, label, set_at) VALUES (?, ?, ?, ?) "
                             "ON CONFLICT(dataset) DO UPDATE SET cap = excluded.cap, "
                             "label = COALESCE(excluded.label, caps.label), set_at = excluded.set_at",
                             (dataset, amount, label, _now()))
        elif self._version < 5:
            self._db.execute("INSERT INTO caps (dataset, cap, label, set_at, notion, delta) VALUES (?, ?, ?, ?, ?, ?) "
                             "ON CONFLICT(dataset) DO UPDATE SET cap = excluded.cap, "
                             "label = COALESCE(excluded.label, caps.label), set_at = excluded.set_at, "
                             "notion = excluded.notion, delta = excluded.delta",
                             (dataset, amount, label, _now(), notion, delta))
        else:
            self._db.execute("INSERT INTO caps (dataset, cap, label, set_at, notion, delta, origin) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(dataset) DO UPDATE SET cap = excluded.cap, "
                             "label = COALESCE(excluded.label, caps.label), set_at = excluded.set_at, "
                             "notion = excluded.notion, delta = excluded.delta, origin = excluded.origin",
                             (dataset, amount, label, _now(), notion, delta, origin))
        if self._version >= 4:
            self._db.execute("UPDATE ledger_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'cap_changes'")

    def cap(self, dataset: str) -> Fraction | None:
        """The cap's amount (an epsilon or a rho: see `cap_of` for its notion); None: no cap."""
        found = self.cap_of(dataset)
        return None if found is None else cap_amount(found)

    def cap_of(self, dataset: str) -> Any:
        """The cap of `dataset` as an `EpsilonCap` or a `RhoCap`; None: no cap."""
        return self._transaction(lambda: self._cap(dataset), write=False)

    def cap_label(self, dataset: str) -> str | None:
        row = self._transaction(lambda: self._db.execute(
            "SELECT label FROM caps WHERE dataset = ?", (dataset,)).fetchone(), write=False)
        return row[0] if row else None

    def spent(self, dataset: str) -> Fraction | float:
        """What counts against the dataset's cap, in its notion (see `Usage`); without a cap, the
        exact sum of the recorded epsilons.  Every charge counts, finished or not: a killed run
        may have released values."""
        return self.usage(dataset).spent

    def remaining(self, dataset: str) -> Fraction | None:
        """cap - spent, never below 0 (a cap can be lowered under what was spent); None: no cap."""
        return self.usage(dataset).remaining

    def usage(self, dataset: str) -> Usage:
        """The dataset's cap and what was spent, in the cap's notion and in the others."""
        cap, history, origin = self._transaction(
            lambda: (self._cap(dataset), self._history(dataset), self._cap_origin(dataset)), write=False)
        return replace(usage(cap, history), default=origin == "default")

    def _cap_origin(self, dataset: str) -> str | None:
        """"set" or "default" (schema 5; an older ledger's caps were all set), None without a cap."""
        if self._version < 5:
            return None
        row = self._db.execute("SELECT origin FROM caps WHERE dataset = ?", (dataset,)).fetchone()
        return None if row is None else str(row[0])

    def names_of(self, dataset: str) -> list[str]:
        """The files (or names) runs showed `dataset` as, in the order first seen (schema 5)."""
        if self._version < 5:
            return []
        rows = self._transaction(lambda: self._db.execute(
            "SELECT name FROM dataset_names WHERE dataset = ? ORDER BY first_seen, rowid", (dataset,)).fetchall(),
            write=False)
        return [r[0] for r in rows]

    def _cap(self, dataset: str) -> Any:
        if self._version < 3:
            row = self._db.execute("SELECT cap, 'epsilon', NULL FROM caps WHERE dataset = ?",
                                   (dataset,)).fetchone()
        else:
            row = self._db.execute("SELECT cap, notion, delta FROM caps WHERE dataset = ?",
                                   (dataset,)).fetchone()
        if row is None:
            return None
        cap = cap_from_row(self._stored_amount(row[0]), row[1],
                           None if row[2] is None else self._stored_amount(row[2]))
        if cap is None:
            raise error("E0602", f"the ledger {self.path} is corrupted (a cap of unknown notion {row[1]!r})")
        return cap

    def _history(self, dataset: str) -> History:
        """Every charge on `dataset` in the form the cap check composes (docs/ledger.md).

        Charges are only ever appended, with growing ids (one writer at a time: BEGIN IMMEDIATE),
        so the history composed so far is kept and only newer charges are read and added: a
        long-lived ledger (the curator service's) pays for one charge, not for every earlier one."""
        columns = {1: "id, epsilon, NULL, NULL, NULL", 2: "id, epsilon, delta, rho, NULL"}.get(
            self._version, "id, epsilon, delta, rho, loss")
        known = self._histories.get(dataset)
        history = known.copy() if known is not None else History()
        rows = self._db.execute(f"SELECT {columns} FROM charges WHERE dataset = ? AND id > ? ORDER BY id",
                                (dataset, history.last_id))
        for charge_id, eps, delta, rho, loss in rows:
            history.add(self._stored_amount(eps),
                        Fraction(0) if delta is None else self._stored_amount(delta),
                        None if rho is None else self._stored_amount(rho),
                        None if loss is None else self._stored_loss(loss))
            history.last_id = charge_id
        self._histories[dataset] = history
        return history.copy()

    def _stored_amount(self, text: object) -> Fraction:
        try:
            value = Fraction(str(text))
        except (ValueError, ZeroDivisionError):
            value = Fraction(-1)
        if value < 0:
            raise error("E0602", f"the ledger {self.path} is corrupted (bad amount {text!r})")
        return value

    def _stored_loss(self, text: object) -> Any:
        try:
            return loss_from_json(str(text))
        except (ValueError, TypeError, KeyError, ZeroDivisionError, AttributeError):
            raise error("E0602", f"the ledger {self.path} is corrupted (a charge's privacy loss "
                                 "cannot be read)") from None

    # -- charges ------------------------------------------------------------------------------

    def charge(self, dataset: str, epsilon: Fraction, program_hash: str, label: str = "",
               delta: Fraction = Fraction(0), rho: Fraction | None = None,
               loss: Any = None) -> int:
        """Book a run on `dataset` before anything is released; returns the charge id.

        `epsilon` is the run's stated epsilon (at `delta` when the run is stated in (epsilon,
        delta)), `rho` its zCDP rho, `loss` its `ProvenLoss` (fuzzpy.accounting), which is what
        the cap check composes; without `loss`, the run counts as booked (docs/ledger.md).
        Raises E0601 unless the history plus this run fits the cap.  The row is committed when
        this returns, so it survives the process being killed at any later point."""
        return self.charge_many({dataset: epsilon}, program_hash, label, delta, rho, loss)[0]

    def charge_many(self, amounts: dict[str, Fraction], program_hash: str, label: str = "",
                    delta: Fraction = Fraction(0), rho: Fraction | None = None,
                    loss: Any = None, names: dict[str, str] | None = None,
                    default_cap: Callable[..., Any] | None = None,
                    seen_as: dict[str, tuple[str, ...]] | None = None) -> list[int]:
        """Book each dataset's run in ONE transaction: all charges or none (a run over several
        tables never books the first ones and then stops at a later dataset's cap).  The cap
        check (`caps.check_charge`: the run's notion, then the history plus this run, composed)
        reads the history inside the same write transaction, so concurrent runs are checked one
        after another.  `names` names the datasets in refusals (default: their short hash).
        `default_cap` (a local run: `caps.default_cap`) gives a dataset without a cap its first
        one, stored with the charge (or not at all when the run is refused); `seen_as` records
        the files each dataset was shown as (`names_of`)."""
        for dataset in amounts:
            check_account(dataset)
        checked = {d: check_amount(e, "epsilon") for d, e in amounts.items()}
        notion = charge_notion(delta, rho)
        stored_loss = loss_json(loss)

        def book() -> list[int]:
            self._check_same_file("nothing was charged")
            for dataset, epsilon in checked.items():
                name = (names or {}).get(dataset) or f"dataset {short_id(dataset)}…"
                self._check_cap(dataset, name, epsilon, Fraction(delta), rho, loss, default_cap)
                self._record_names(dataset, (seen_as or {}).get(dataset, ()))
            return [self._insert(dataset, label, program_hash, epsilon, notion, stored_loss)
                    for dataset, epsilon in checked.items()]

        ids = self._transaction(book)
        self._after_write("the charge was booked in the file opened, which is no longer the ledger at "
                          "that path: release nothing")
        return ids

    # the default cap (docs/ledger.md)
    def _check_cap(self, dataset: str, name: str, epsilon: Fraction, delta: Fraction, rho: Fraction | None,
                   loss: Any, default_cap: Callable[..., Any] | None) -> None:
        """In the charge's transaction: the cap check, after giving an uncapped dataset its
        default cap when `default_cap` is given; a refusal under a default cap says so."""
        cap, history = self._cap(dataset), self._history(dataset)
        default = self._cap_origin(dataset) == "default"
        if cap is None and default_cap is not None:
            cap, default = default_cap(history, delta, rho, loss), True
            self._write_cap(dataset, cap_row(cap), None, "default")
        if cap is None:
            return
        try:
            check_charge(dataset, name, cap, history, epsilon, delta, rho, loss)
        except CapRefusal as exc:
            if default:
                for diag in exc.diagnostics:
                    diag.notes.append(DEFAULT_CAP_NOTE)
            raise

    def _record_names(self, dataset: str, shown: tuple[str, ...]) -> None:
        if self._version >= 5:
            self._db.executemany("INSERT OR IGNORE INTO dataset_names (dataset, name, first_seen) VALUES (?, ?, ?)",
                                 [(dataset, n, _now()) for n in dict.fromkeys(shown) if n])

    def _insert(self, dataset: str, label: str, program_hash: str, epsilon: Fraction,
                notion: tuple[str | None, str | None], loss: str | None) -> int:
        if self._version < SCHEMA_VERSION:  # a read-only old ledger is never written; defensive
            raise error("E0602", f"the ledger {self.path} must be upgraded before it records a charge")
        cursor = self._db.execute(
            "INSERT INTO charges (dataset, label, program_hash, epsilon, status, started_at, delta, rho, loss) "
            "VALUES (?, ?, ?, ?, 'charged', ?, ?, ?, ?)",
            (dataset, label, program_hash, str(epsilon), _now(), *notion, loss))
        return int(cursor.lastrowid)

    def spent_delta(self, dataset: str) -> Fraction:
        """The sum of the deltas of the charges on `dataset` (basic composition: runs stated as
        (eps_i, delta_i) together are (sum eps_i, sum delta_i)-DP)."""
        def read() -> Fraction:
            if self._version == 1:
                return Fraction(0)
            rows = self._db.execute("SELECT delta FROM charges WHERE dataset = ? AND delta IS NOT NULL",
                                    (dataset,))
            return sum((self._stored_amount(r[0]) for r in rows), Fraction(0))
        return self._transaction(read, write=False)

    def finish(self, charge_id: int, status: str = "released") -> None:
        """Mark a run finished. Never refunds: a failed run may have released something."""
        if status not in FINISH_STATUSES:
            raise error("E0605", f"invalid run status {status!r}: expected one of "
                                 f"{', '.join(FINISH_STATUSES)}")

        def mark() -> None:
            row = self._db.execute("SELECT status FROM charges WHERE id = ?",
                                   (charge_id,)).fetchone()
            if row is None:
                raise error("E0605", f"no charge with id {charge_id} in the ledger")
            if row[0] != "charged":
                raise error("E0605", f"charge {charge_id} is already finished ({row[0]})")
            self._db.execute("UPDATE charges SET status = ?, finished_at = ? WHERE id = ?",
                             (status, _now(), charge_id))

        self._transaction(mark)

    def finish_many(self, ids: list[int], status: str = "released") -> None:
        """`finish` each charge; a failure is raised once every charge was tried."""
        problem = None
        for charge_id in ids:
            try:
                self.finish(charge_id, status)
            except FuzzError as exc:
                problem = problem or exc
        if problem is not None:
            raise problem

    @contextmanager
    def charged_run(self, dataset: str, epsilon: Fraction, program_hash: str,
                    label: str = "") -> Iterator[int]:
        """Charge, run the body, then finish as "released", or "failed" if the body raised."""
        charge_id = self.charge(dataset, epsilon, program_hash, label)
        try:
            yield charge_id
        except BaseException:
            self.finish(charge_id, "failed")
            raise
        self.finish(charge_id, "released")

    # -- reading ------------------------------------------------------------------------------

    def entries(self, dataset: str | None = None) -> list[Entry]:
        """All runs, oldest first; only those on `dataset` if given."""
        columns = {1: _CHARGES_COLUMNS_V1 + ("NULL", "NULL", "NULL"),
                   2: _CHARGES_COLUMNS_V2 + ("NULL",)}.get(self._version, _CHARGES_COLUMNS)
        query = f"SELECT {', '.join(columns)} FROM charges"
        args: tuple = ()
        if dataset is not None:
            query += " WHERE dataset = ?"
            args = (dataset,)
        rows = self._transaction(
            lambda: self._db.execute(query + " ORDER BY id", args).fetchall(), write=False)
        return [Entry(r[0], r[1], r[2], r[3], self._stored_amount(r[4]), r[5], r[6], r[7],
                      self._stored_amount(r[8]) if r[8] is not None else Fraction(0),
                      self._stored_amount(r[9]) if r[9] is not None else None,
                      self._stored_loss(r[10]) if r[10] is not None else None)
                for r in rows]

    def datasets(self) -> list[str]:
        """Every dataset with a charge (by first charge), then those with only a cap."""
        def read() -> tuple[list[str], list[str]]:
            charged = [r[0] for r in self._db.execute(
                "SELECT dataset FROM charges GROUP BY dataset ORDER BY MIN(id)")]
            capped = [r[0] for r in self._db.execute("SELECT dataset FROM caps ORDER BY set_at")]
            return charged, capped

        charged, capped = self._transaction(read, write=False)
        seen = set(charged)
        return charged + [d for d in capped if d not in seen]


_OPENING = "nothing was read or written; try again"
_LOST_LEDGER = ("a ledger removed while in use loses its caps and spending: put the file back (with its -wal "
                "file), or restore a backup with `fuzzpy ledger restore BACKUP` (docs/ledger.md)")


def open_ledger(path: Path | None = None, create: bool = True) -> Ledger:
    """The ledger at `path`, or at the default location when `path` is None."""
    return Ledger(default_ledger_path() if path is None else Path(path).expanduser(), create)


@dataclass(frozen=True)
class Restored:
    """What `restore_ledger` installed."""

    runs: int                          # the runs the restored ledger records
    state: LedgerState                 # what its guard now records
    overridden: LedgerState | None     # what the guard recorded before, when accept_older let
    #                                    an older backup (or another ledger's) replace it


def restore_ledger(backup: Path, path: Path, accept_older: bool = False) -> Restored:
    """Install the ledger backup `backup` at `path`, where there must be no ledger (nor any
    -wal, -shm or -journal file), and record it in the guard.

    Refused (E0602) when the guard records what the backup lacks: a later charge or cap change,
    or another ledger altogether, unless `accept_older`.  The backup is copied through SQLite,
    upgraded, checked, and linked into place after its guard is written: a run that looks
    meanwhile finds no ledger (and a guard forbidding a new one) or the restored ledger."""
    backup, path = Path(backup), Path(path)
    _check_free_for_restore(path)
    with Ledger(backup, create=False, readonly=True) as source:
        found = source.state()
        guard = read_guard(path)
        gap = _restore_gap(backup, guard, found)
        if gap is not None and not accept_older:
            raise error("E0602", gap, None, "restore a later backup of that ledger if there is one; otherwise "
                                            "pass --accept-older to install this one anyway, then account for the "
                                            "runs charged after it (docs/ledger.md, \"Restoring\")")
        try:
            tmp = _new_temp(path)
        except OSError as exc:
            raise error("E0602", f"cannot restore the ledger {path}: {why(exc)}") from None
        try:
            copy = sqlite3.connect(str(tmp), isolation_level=None)
            try:
                with source._guard():
                    _retry_busy(lambda: source._db.backup(copy))
                state, runs = _installable(copy, tmp)
            finally:
                copy.close()
            _fsync(tmp)
            write_guard(path, state)
            os.link(tmp, path)
            _sync_folder(path.parent)
        except FileExistsError:
            raise error("E0605", f"a ledger appeared at {path} during the restore; stop every run using it "
                                 "and try again") from None
        except (OSError, sqlite3.Error) as exc:
            raise error("E0602", f"cannot restore the ledger {path}: {why(exc)}") from None
        finally:
            _remove_database(tmp)
    return Restored(runs, state, guard if gap is not None else None)


def _check_free_for_restore(path: Path) -> None:
    if not path.parent.is_dir():
        raise error("E0602", f"cannot restore the ledger {path}: folder {path.parent} does not exist")
    for taken in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        if _exists(taken):
            raise error("E0605", f"{taken} exists: a restore installs a ledger only where there is none",
                        None, "stop every run using the ledger, then move the ledger and its -wal, -shm and "
                              "-journal files aside (keep them: docs/ledger.md, \"Restoring\")")


def _restore_gap(backup: Path, guard: LedgerState | None, found: LedgerState) -> str | None:
    """Why installing a backup holding `found` would lose what the guard records; None if not."""
    if guard is None or not guard.records_something:
        return None
    if found.ledger_id != guard.ledger_id:
        which = "a ledger without an id (older fuzzpy)" if found.ledger_id is None else f"ledger {found.ledger_id[:12]}"
        return (f"the backup {backup} is of another ledger than the one its guard records: the backup is {which}, "
                f"the guard records ledger {guard.ledger_id[:12]} with {guard.describe()}")
    if found.last_charge < guard.last_charge or found.cap_changes < guard.cap_changes:
        return (f"the backup {backup} is older than the ledger its guard records: it holds {found.describe()}, "
                f"the guard recorded {guard.describe()}; installing it would forget the spending after it")
    return None


def _installable(copy: sqlite3.Connection, path: Path) -> tuple[LedgerState, int]:
    """A fresh copy of a backup made a ledger like any other (WAL, current schema, an id),
    checked; its state and number of runs."""
    copy.execute("PRAGMA journal_mode=WAL")
    copy.execute("BEGIN IMMEDIATE")
    try:
        _upgrade_schema(copy)
        copy.execute("COMMIT")
    except BaseException:
        if copy.in_transaction:
            copy.execute("ROLLBACK")
        raise
    if copy.execute("PRAGMA quick_check").fetchone()[0] != "ok":
        raise sqlite3.DatabaseError(f"the copy {path} failed SQLite's integrity check")
    return (_read_state(copy, path), int(copy.execute("SELECT count(*) FROM charges").fetchone()[0]))


# ---------------------------------------------------------------------------------------------
# Files


def _remove_database(path: Path) -> None:
    for leftover in (path, Path(f"{path}-journal"), Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            leftover.unlink()
        except OSError:
            pass


def _has_log(path: Path) -> bool:
    """A non-empty write-ahead log or rollback journal beside the database: commits (or a
    write in progress) that the main file alone does not show."""
    for suffix in ("-wal", "-journal"):
        try:
            if Path(f"{path}{suffix}").stat().st_size > 0:
                return True
        except OSError:
            continue
    return False


def _probe(db: sqlite3.Connection) -> sqlite3.Connection:
    """Read the schema once, so that a file SQLite cannot read fails here, not later."""
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        db.close()
        raise
    return db


def _new_ledger_file(path: Path) -> None:
    """An empty ledger with its schema, already in WAL mode, in a file nobody else uses yet."""
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("BEGIN IMMEDIATE")
        # Statement by statement: executescript() would COMMIT our transaction.
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        _add_meta(db, cap_changes=0)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("COMMIT")
    finally:
        db.close()  # the last connection checkpoints the log into the file and removes it
    _fsync(path)


def _upgrade_schema(db: sqlite3.Connection) -> int:
    """Bring the ledger open in `db`'s write transaction to SCHEMA_VERSION; the version reached.

    Schema 1 -> 2: add the delta and rho of each charge (NULL: a pure epsilon, as every charge
    of a schema-1 ledger is).  Schema 2 -> 3: add each charge's ProvenLoss (NULL for the old
    rows: docs/ledger.md says how they count) and each cap's notion ('epsilon', with a NULL
    delta: every older cap was a pure epsilon cap).  Schema 3 -> 4: the ledger_meta table, with
    a new id for the ledger and its caps counted as one change each.  Schema 4 -> 5: each cap's
    origin ('set': every older cap was set on purpose) and the dataset_names table (empty)."""
    current = int(db.execute("PRAGMA user_version").fetchone()[0])
    if current >= SCHEMA_VERSION:  # another process upgraded it first
        return current
    if current == 1:
        db.execute("ALTER TABLE charges ADD COLUMN delta TEXT")
        db.execute("ALTER TABLE charges ADD COLUMN rho TEXT")
    if current < 3:
        db.execute("ALTER TABLE charges ADD COLUMN loss TEXT")
        db.execute("ALTER TABLE caps ADD COLUMN notion TEXT NOT NULL DEFAULT 'epsilon'")
        db.execute("ALTER TABLE caps ADD COLUMN delta TEXT")
    if current < 4:
        db.execute("CREATE TABLE ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        _add_meta(db, cap_changes=int(db.execute("SELECT count(*) FROM caps").fetchone()[0]))
    db.execute("ALTER TABLE caps ADD COLUMN origin TEXT NOT NULL DEFAULT 'set'")
    db.execute("CREATE TABLE dataset_names (dataset TEXT NOT NULL, name TEXT NOT NULL, first_seen TEXT NOT NULL, "
               "PRIMARY KEY (dataset, name))")
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    return SCHEMA_VERSION


def _add_meta(db: sqlite3.Connection, cap_changes: int) -> None:
    db.execute("INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', ?), ('cap_changes', ?)",
               (secrets.token_hex(16), str(cap_changes)))


def _read_state(db: sqlite3.Connection, path: Path) -> LedgerState:
    """What the guard compares, read in `db`'s current transaction.  The version is read here
    too: another process may have upgraded the ledger since this one inspected it."""
    last = int(db.execute("SELECT COALESCE(MAX(id), 0) FROM charges").fetchone()[0])
    if int(db.execute("PRAGMA user_version").fetchone()[0]) < 4:  # no id yet: read as it is
        return LedgerState(None, last, int(db.execute("SELECT count(*) FROM caps").fetchone()[0]))
    meta = dict(db.execute("SELECT key, value FROM ledger_meta").fetchall())
    try:
        return LedgerState(str(meta["ledger_id"]), last, int(meta["cap_changes"]))
    except (KeyError, ValueError):
        raise error("E0602", f"the ledger {path} is corrupted (its id or its count of cap changes is "
                             "missing)") from None


def _verified_copy(copy: sqlite3.Connection, path: Path) -> int:
    """Check a fresh backup and make it one self-contained file; the number of runs in it."""
    copy.execute("PRAGMA journal_mode=DELETE")
    if copy.execute("PRAGMA quick_check").fetchone()[0] != "ok":
        raise sqlite3.DatabaseError(f"the copy {path} failed SQLite's integrity check")
    if not 1 <= copy.execute("PRAGMA user_version").fetchone()[0] <= SCHEMA_VERSION:
        raise sqlite3.DatabaseError("the copy is not a fuzzpy ledger")
    return int(copy.execute("SELECT count(*) FROM charges").fetchone()[0])


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _retry_busy(action: Callable[[], T]) -> T:
    """Run `action`, retrying while SQLite reports the file busy, for up to BUSY_TIMEOUT_S.

    SQLite's own busy timeout covers most waits but not all: switching a fresh file to WAL, or
    WAL recovery, reports "locked" at once while another process is opening the same file.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.001
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, 0.1)
