"""The ledger's guard: a small file beside the ledger (`ledger.sqlite.guard`) recording which
ledger lives at the path and how far it got, so that losing the ledger file is refused rather
than silently starting over (docs/ledger.md, "What the guard detects").

It holds the ledger's id (a random id stored in the ledger itself), the id of its last
committed charge and its number of cap changes.  The ledger writes it after each committed
charge or cap change, under the ledger's write lock, from what is committed: so it may lag
behind the ledger (a process killed between its commit and the guard's update), never lead,
and it only grows.  A ledger at the path must be the one the guard names, and at least as far
along; where there is no ledger, a guard that records caps or charges forbids a new one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from ..diagnostics import error
from .files import fsync_file, new_temp, sync_folder
from .identity import why

GUARD_SUFFIX = ".guard"
GUARD_FORMAT = "fuzzpy ledger guard"
GUARD_VERSION = 1
RESTORE_HINT = "restore a backup with `fuzzpy ledger restore BACKUP` (docs/ledger.md)"


@dataclass(frozen=True)
class LedgerState:
    """How far a ledger got: what the guard records and what a ledger is compared by."""

    ledger_id: Optional[str]  # None: a ledger written before ledgers had ids (schema < 4)
    last_charge: int          # the id of its last charge, 0 without charges
    cap_changes: int          # how many times a cap was set

    @property
    def records_something(self) -> bool:
        return self.last_charge > 0 or self.cap_changes > 0

    def describe(self) -> str:
        charges = f"charges up to #{self.last_charge}" if self.last_charge else "no charges"
        return f"{charges} and {_count(self.cap_changes, 'cap change')}"


def guard_path(ledger: Path) -> Path:
    """The guard of the ledger at `ledger`: beside the file a link points to, so that the
    ledger reached through a link or by its own path has one guard."""
    real = Path(os.path.realpath(ledger))
    return real.with_name(real.name + GUARD_SUFFIX)


def read_guard(ledger: Path) -> Optional[LedgerState]:
    """What the guard of `ledger` records; None when it has no guard.  A guard that cannot be
    read is an error: it may be the only record that a ledger with caps lived here."""
    path = guard_path(ledger)
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # no guard; a missing folder is reported later
        return None
    except (OSError, UnicodeError) as exc:
        raise _damaged(ledger, path, why(exc)) from None
    try:
        data = json.loads(text)
        if data.get("format") != GUARD_FORMAT:
            raise ValueError("not a fuzzpy ledger guard")
        if data.get("version") != GUARD_VERSION:
            raise ValueError(f"guard version {data.get('version')!r}, written by another fuzzpy")
        state = LedgerState(data["ledger_id"], data["last_charge"], data["cap_changes"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _damaged(ledger, path, str(exc) or type(exc).__name__) from None
    if not (isinstance(state.ledger_id, str) and state.ledger_id and _is_count(state.last_charge)
            and _is_count(state.cap_changes)):
        raise _damaged(ledger, path, "its fields have wrong values")
    return state


def write_guard(ledger: Path, state: LedgerState) -> None:
    """Replace the guard atomically (temporary file, fsync, rename, fsync of the folder): a
    reader sees the old guard or the new one, never a partial one."""
    if state.ledger_id is None:
        raise ValueError("only a ledger with an id has a guard")
    path = guard_path(ledger)
    text = json.dumps({"format": GUARD_FORMAT, "version": GUARD_VERSION, "ledger": path.name[:-len(GUARD_SUFFIX)],
                       "ledger_id": state.ledger_id, "last_charge": state.last_charge,
                       "cap_changes": state.cap_changes,
                       "updated_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=1)
    try:
        tmp = new_temp(path)
    except OSError as exc:
        raise _unwritable(ledger, path, exc) from None
    try:
        tmp.write_text(text + "\n", encoding="utf-8")
        fsync_file(tmp)
        os.replace(tmp, path)
        sync_folder(path.parent)
    except OSError as exc:
        raise _unwritable(ledger, path, exc) from None
    finally:
        tmp.unlink(missing_ok=True)


def check_ledger(ledger: Path, guard: Optional[LedgerState], state: LedgerState) -> None:
    """Refuse (E0602) a ledger that is not the one its guard records, or older than it."""
    if guard is None or not guard.records_something:
        return  # nothing recorded: nothing this ledger could lose
    where = guard_path(ledger)
    if state.ledger_id != guard.ledger_id:
        which = ("a ledger written before ledgers had ids" if state.ledger_id is None
                 else f"ledger {state.ledger_id[:12]}")
        raise error("E0602", f"the ledger {ledger} is not the ledger its guard {where.name} records: it is "
                             f"{which}, the guard records ledger {guard.ledger_id[:12]} with {guard.describe()}; "
                             "the file was replaced, and using it would drop the caps and spending recorded there",
                    None, f"put that ledger back (with its -wal file), or {RESTORE_HINT}; to adopt this file "
                          f"as the ledger on purpose, remove the guard {where}")
    if state.last_charge < guard.last_charge or state.cap_changes < guard.cap_changes:
        raise error("E0602", f"the ledger {ledger} is older than its guard {where.name} records: it holds "
                             f"{state.describe()}, the guard recorded {guard.describe()}; it is a copy made "
                             "without its write-ahead log (-wal file) or an older copy put back, and using it "
                             "would forget spending",
                    None, f"if the ledger's {Path(ledger).name}-wal file still exists, put it back beside the "
                          f"ledger; otherwise {RESTORE_HINT}, with --accept-older if the backup is older too")


def check_no_lost_ledger(ledger: Path) -> None:
    """Where there is no ledger: refuse (E0602) if the guard records that one with caps or
    charges lived here, since a new ledger would start without them."""
    guard = read_guard(ledger)
    if guard is None or not guard.records_something:
        return
    where = guard_path(ledger)
    raise error("E0602", f"no ledger at {ledger}, but its guard {where.name} records a ledger there with "
                         f"{guard.describe()}: it was deleted or moved, and a new ledger would start "
                         "without its caps and spending",
                None, f"put the ledger back (with its -wal file), or {RESTORE_HINT}; to start a new, empty "
                      f"ledger on purpose, remove the guard {where} first")


def _damaged(ledger: Path, path: Path, reason: str):
    return error("E0602", f"cannot read the guard {path} of the ledger {ledger}: {reason}",
                 None, "the guard records which ledger lives at that path; if you are sure the ledger there "
                       "is the right one (or that none should be), remove the guard: the next run writes a new one")


def _unwritable(ledger: Path, path: Path, exc: OSError):
    return error("E0602", f"cannot write the guard {path} of the ledger {ledger}: {why(exc)}",
                 None, "whoever charges the ledger must be able to create files in its folder")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
