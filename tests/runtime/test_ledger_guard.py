"""Losing the ledger file is refused, not a fresh start: a ledger deleted or replaced while a run
holds it is not charged; its guard forbids a new ledger where one with caps lived, and refuses a
ledger that is another one or older (a copy without its write-ahead log); a checkpoint after each
charge keeps the main file complete; `ledger restore` puts a backup back on purpose."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from fractions import Fraction as F
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuzzpy.diagnostics import FuzzError
from fuzzpy.interfaces.cli import app
from fuzzpy.ledger import Ledger, program_hash, restore_ledger
from fuzzpy.ledger.guard import LedgerState, guard_path, read_guard

DS = "sha256:" + "ab" * 32
PROG = program_hash("main db = count db")
ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.fz"
SAMPLE = ROOT / "examples" / "data" / "adult_sample.csv"
HANG_GUARD = 120
runner = CliRunner()


def fz(*args: object):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def refusal(action) -> str:
    """The E0602 message and notes of `action`, which must be refused with that code."""
    with pytest.raises(FuzzError) as exc:
        action()
    (diag,) = exc.value.diagnostics
    assert diag.code == "E0602", diag
    return " ".join([diag.message, *diag.notes])


def open_and_read(path: Path, **kw) -> None:
    with Ledger(path, **kw) as book:
        book.spent(DS)


def remove_ledger(path: Path) -> None:
    """What a cleanup job does: the ledger and its SQLite companions, not its guard."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def rows(path: Path) -> int:
    raw = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return raw.execute("SELECT count(*) FROM charges").fetchone()[0]
    finally:
        raw.close()


@pytest.fixture
def capped(tmp_path: Path) -> Path:
    """A ledger with a cap of 1 and 0.5 spent."""
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as book:
        book.set_cap(DS, F(1), "adult.csv")
        book.charge(DS, F(1, 2), PROG)
    return path


_HOLDER = """
import sys
from fractions import Fraction
from pathlib import Path
from fuzzpy.diagnostics import FuzzError
from fuzzpy.ledger import Ledger
book = Ledger(Path(sys.argv[1]))
print("open", flush=True)
for line in sys.stdin:
    try:
        print("ok", book.charge(sys.argv[2], Fraction(line.strip()), "h"), flush=True)
    except FuzzError as exc:
        print(exc.diagnostics[0].code, exc.diagnostics[0].message, flush=True)
"""


class Holder:
    """Another process that opened the ledger and charges it when told to, as a long run does."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), DS], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.proc.stdout.readline().strip() == "open", self.proc.stderr.read()

    def charge(self, epsilon: str) -> str:
        self.proc.stdin.write(epsilon + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(HANG_GUARD)


@pytest.fixture
def holder(capped):
    held = Holder(capped)
    yield held
    held.close()


# ---- the file charged is the file at the path --------------------------------------------------------


def test_a_ledger_deleted_while_a_run_holds_it_is_not_charged_and_not_started_afresh(capped, holder):
    assert holder.charge("1/4").startswith("ok")
    remove_ledger(capped)
    answer = holder.charge("1/4")
    assert answer.startswith("E0602") and "was deleted or moved while in use: nothing was charged" in answer
    text = refusal(lambda: Ledger(capped))
    assert "no ledger at" in text and "records a ledger there with charges up to #2 and 1 cap change" in text
    assert "fuzzpy ledger restore" in text and "remove the guard" in text
    assert not capped.exists()
    run = fz("run", QUICKSTART, "--data", SAMPLE, "--budget", "1", "--ledger", capped)
    assert run.exit_code == 4 and "E0602" in run.stderr and "released" not in run.stdout
    show = fz("ledger", "show", "--ledger", capped)
    assert show.exit_code == 4 and "E0602" in show.stderr and "nothing has been spent" not in show.stdout
    cap = fz("ledger", "set-cap", "--ledger", capped, "--dataset", DS, "--cap", "5")
    assert cap.exit_code == 4 and "records a ledger there" in cap.stderr
    assert not capped.exists()


def test_a_ledger_replaced_while_a_run_holds_it_is_not_charged_and_the_other_file_is_refused(capped, holder, tmp_path):
    other = tmp_path / "other.sqlite"
    with Ledger(other) as book:
        book.charge(DS, F(1, 10), PROG)
    os.replace(other, capped)
    answer = holder.charge("1/4")
    assert answer.startswith("E0602") and "was replaced by another file while in use: nothing was charged" in answer
    for readonly in (False, True):
        text = refusal(lambda: open_and_read(capped, readonly=readonly))
        assert "is not the ledger its guard ledger.sqlite.guard records" in text and "the file was replaced" in text
        assert "remove the guard" in text
    assert rows(capped) == 1
    guard_path(capped).unlink()  # adopting the other ledger on purpose: the documented way out
    with Ledger(capped) as book:
        assert book.spent(DS) == F(1, 10) and book.cap(DS) is None


def test_a_ledger_deleted_during_a_charge_fails_the_charge_after_its_commit(capped, monkeypatch):
    from fuzzpy.ledger import sqlite as L

    book = Ledger(capped)
    insert = L.Ledger._insert

    def deleted_meanwhile(self, *args):  # after the check that opens the charge
        remove_ledger(capped)
        return insert(self, *args)

    monkeypatch.setattr(L.Ledger, "_insert", deleted_meanwhile)
    text = refusal(lambda: book.charge(DS, F(1, 4), PROG))
    assert "was deleted or moved while in use: the charge was booked in the file opened" in text
    assert "release nothing" in text
    book.close()
    assert "records a ledger there" in refusal(lambda: Ledger(capped))


# ---- a copy without its log, an older copy ---------------------------------------------------------


def _charges_only_in_the_log(path: Path, n: int) -> sqlite3.Connection:
    """n more charges, committed while a reader's snapshot keeps them in the write-ahead log;
    returns that reader (to be closed by the caller)."""
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM charges").fetchone()
    with Ledger(path) as book:
        book._db.execute("PRAGMA wal_autocheckpoint=0")
        for _ in range(n):
            book.charge(DS, F(1, 10), PROG)
    return reader


def test_a_copy_without_its_log_put_back_is_refused_and_its_log_recovers_it(capped, tmp_path):
    reader = _charges_only_in_the_log(capped, 2)
    copy, log = tmp_path / "copy.sqlite", tmp_path / "saved-log"
    shutil.copyfile(capped, copy)  # `cp ledger.sqlite backup/` while charges are in the log
    shutil.copyfile(f"{capped}-wal", log)
    reader.close()
    assert rows(copy) == 1
    remove_ledger(capped)
    shutil.copyfile(copy, capped)  # the copy put back
    for readonly in (False, True):
        text = refusal(lambda: open_and_read(capped, readonly=readonly))
        assert "is older than its guard ledger.sqlite.guard records" in text
        assert "it holds charges up to #1 and 1 cap change, the guard recorded charges up to #3" in text
        assert "copy made without its write-ahead log" in text and "ledger.sqlite-wal file" in text
    assert rows(capped) == 1  # refused before anything was written
    shutil.copyfile(log, f"{capped}-wal")  # the note's way out: put the log back
    with Ledger(capped) as book:
        assert book.spent(DS) == F(7, 10) and len(book.entries()) == 3


def test_an_older_copy_put_back_is_refused_even_when_only_a_cap_changed(capped, tmp_path):
    old = tmp_path / "old.sqlite"
    with Ledger(capped, readonly=True) as book:
        book.backup(old)
    with Ledger(capped) as book:
        book.set_cap(DS, F(6, 10))  # lowered: the old copy would allow 0.5 more
    remove_ledger(capped)
    shutil.copyfile(old, capped)
    text = refusal(lambda: Ledger(capped).charge(DS, F(1, 2), PROG))
    assert "older than its guard" in text
    assert "charges up to #1 and 1 cap change, the guard recorded charges up to #1 and 2 cap changes" in text
    assert rows(capped) == 1


def test_after_each_charge_the_main_file_alone_holds_every_charge(capped, tmp_path):
    with Ledger(capped) as book:  # a run still open: its connection keeps the log
        for _ in range(3):
            book.charge(DS, F(1, 10), PROG)
        assert os.path.getsize(f"{capped}-wal") > 0
        shutil.copyfile(capped, tmp_path / "plain-copy.sqlite")
    assert rows(tmp_path / "plain-copy.sqlite") == 4


# ---- the guard: written after the commit, never ahead, only growing --------------------------------


_KILLED_AFTER_COMMIT = """
import os, signal, sys
from fractions import Fraction
from pathlib import Path
import fuzzpy.ledger.sqlite as L
book = L.Ledger(Path(sys.argv[1]))
L.write_guard = lambda *a: os.kill(os.getpid(), signal.SIGKILL)  # dies between commit and guard
book.charge(sys.argv[2], Fraction(1, 4), "h")
"""


def test_a_run_killed_between_its_commit_and_the_guard_leaves_the_guard_behind_not_ahead(capped):
    done = subprocess.run([sys.executable, "-c", _KILLED_AFTER_COMMIT, str(capped), DS], cwd=ROOT,
                          capture_output=True, text=True, timeout=HANG_GUARD)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert read_guard(capped).last_charge == 1  # behind the ledger, which holds charge #2
    with Ledger(capped) as book:  # a lagging guard is no refusal; opening brings it up to date
        assert book.spent(DS) == F(3, 4)
    assert read_guard(capped).last_charge == 2


def test_a_guard_that_cannot_be_written_fails_the_charge_after_booking_it(capped, monkeypatch):
    from fuzzpy.ledger import guard as G

    book = Ledger(capped)
    monkeypatch.setattr(G, "new_temp", lambda beside: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    text = refusal(lambda: book.charge(DS, F(1, 4), PROG))
    assert "cannot write the guard" in text and "No space left on device" in text
    monkeypatch.undo()
    book.close()
    with Ledger(capped) as book:
        assert book.spent(DS) == F(3, 4)  # booked: it counts, and its run released nothing


def _charge_many_times(path: str, n: int) -> None:
    with Ledger(Path(path)) as book:
        for _ in range(n):
            book.charge(DS, F(1, 100), PROG)


def test_concurrent_charges_keep_the_guard_equal_to_the_last_charge_never_ahead(capped):
    import multiprocessing

    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    seen: list[tuple[int, int]] = []
    stop = threading.Event()

    def watch() -> None:  # the guard first, then the ledger: the guard must never be ahead
        with Ledger(capped, readonly=True) as book:
            while not stop.is_set():
                guard = read_guard(capped).last_charge
                seen.append((guard, book.state().last_charge))
                time.sleep(0.001)

    procs = [ctx.Process(target=_charge_many_times, args=(str(capped), 5)) for _ in range(6)]
    for p in procs:
        p.start()
    watcher = threading.Thread(target=watch)  # after the forks: a child must not inherit its locks
    watcher.start()
    for p in procs:
        p.join(HANG_GUARD)
        assert p.exitcode == 0
    stop.set()
    watcher.join(HANG_GUARD)
    with Ledger(capped, readonly=True) as book:
        assert book.state().last_charge == 31 and len(book.entries()) == 31
    assert read_guard(capped) == LedgerState(read_guard(capped).ledger_id, 31, 1)
    assert seen and all(guard <= last for guard, last in seen)
    guards = [guard for guard, _ in seen]
    assert guards == sorted(guards)  # only grows


def test_the_guard_is_written_under_the_write_lock_so_no_later_charge_overtakes_it(capped, monkeypatch):
    from fuzzpy.ledger import sqlite as L

    write = L.write_guard
    other: dict[str, object] = {}

    def charge_elsewhere() -> None:
        with Ledger(capped) as book:
            other["id"] = book.charge(DS, F(1, 10), PROG)

    def slow_write(path, state):
        if "thread" not in other:  # the first guard write: another run charges meanwhile
            other["thread"] = threading.Thread(target=charge_elsewhere)
            other["thread"].start()
            other["thread"].join(0.5)
            other["waited"] = "id" not in other
        write(path, state)

    monkeypatch.setattr(L, "write_guard", slow_write)
    with Ledger(capped) as book:
        assert book.charge(DS, F(1, 10), PROG) == 2
    other["thread"].join(HANG_GUARD)
    assert other["waited"] and other["id"] == 3  # it waited for the lock, then charged
    assert read_guard(capped).last_charge == 3


def test_threads_of_the_service_store_share_one_guard(tmp_path):
    from fuzzpy.serve.store import SqliteStore

    store = SqliteStore(tmp_path / "ledger.sqlite")
    store.set_cap("dataset:adult", F(100))

    def charges() -> None:
        for _ in range(5):
            store.charge_many({"dataset:adult": F(1, 10)}, "h")

    threads = [threading.Thread(target=charges) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD)
    store.close()
    guard = read_guard(tmp_path / "ledger.sqlite")
    assert (guard.last_charge, guard.cap_changes) == (20, 1)


# ---- ledgers without a guard, the guard's own failures ----------------------------------------------


def _schema_3_ledger(path: Path) -> None:
    """A ledger as fuzzpy wrote it before ledgers had an id and a guard."""
    raw = sqlite3.connect(path)
    raw.executescript("""
        CREATE TABLE caps (dataset TEXT PRIMARY KEY, cap TEXT NOT NULL, label TEXT, set_at TEXT NOT NULL,
            notion TEXT NOT NULL DEFAULT 'epsilon', delta TEXT);
        CREATE TABLE charges (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, label TEXT NOT NULL,
            program_hash TEXT NOT NULL, epsilon TEXT NOT NULL, status TEXT NOT NULL, started_at TEXT NOT NULL,
            finished_at TEXT, delta TEXT, rho TEXT, loss TEXT);
        CREATE INDEX charges_by_dataset ON charges (dataset);
        INSERT INTO caps (dataset, cap, set_at) VALUES ('%s', '1', '2026-01-01');
        INSERT INTO charges (dataset, label, program_hash, epsilon, status, started_at)
            VALUES ('%s', 'old', 'h', '1/2', 'released', '2026-01-01');
        PRAGMA journal_mode=WAL;
        PRAGMA user_version=3;
    """ % (DS, DS))
    raw.close()


def test_a_ledger_from_before_the_guard_keeps_working_and_gets_one(tmp_path):
    path = tmp_path / "ledger.sqlite"
    _schema_3_ledger(path)
    with Ledger(path, readonly=True) as book:  # reading writes no guard
        assert book.spent(DS) == F(1, 2) and book.state().ledger_id is None
    assert not guard_path(path).exists()
    with Ledger(path) as book:
        book.charge(DS, F(1, 4), PROG)
        assert book.remaining(DS) == F(1, 4)
        ledger_id = book.state().ledger_id
    assert read_guard(path) == LedgerState(ledger_id, 2, 1)  # its cap counts as one change
    remove_ledger(path)
    _schema_3_ledger(path)  # the old file put back: it has no id, the guard names one
    assert "it is a ledger written before ledgers had ids" in refusal(lambda: Ledger(path))


def test_a_ledger_whose_guard_was_removed_gets_a_new_one(capped):
    guard_path(capped).unlink()
    with Ledger(capped) as book:
        book.charge(DS, F(1, 4), PROG)
    assert read_guard(capped).last_charge == 2


def test_a_new_ledger_is_made_where_the_guard_records_nothing(tmp_path):
    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()
    first = read_guard(path)
    assert (first.last_charge, first.cap_changes) == (0, 0)
    remove_ledger(path)
    with Ledger(path) as book:  # nothing could be lost: no refusal
        book.set_cap(DS, F(1))
    assert read_guard(path).ledger_id != first.ledger_id


def test_deleting_both_the_ledger_and_its_guard_starts_afresh_as_documented(capped):
    remove_ledger(capped)
    guard_path(capped).unlink()
    with Ledger(capped) as book:  # the one loss the guard cannot see: protect the folder
        assert book.cap(DS) is None and book.spent(DS) == 0


@pytest.mark.parametrize("damage, words", [
    (b"", "Expecting value"),
    (b'{"format": "something else"}', "not a fuzzpy ledger guard"),
    (b'{"format": "fuzzpy ledger guard", "version": 9}', "guard version 9"),
    (b'{"format": "fuzzpy ledger guard", "version": 1, "ledger_id": "x", "last_charge": -1, "cap_changes": 0}',
     "wrong values"),
])
def test_a_damaged_guard_is_refused_and_nothing_is_charged(capped, damage, words):
    guard_path(capped).write_bytes(damage)
    for action in (lambda: Ledger(capped).charge(DS, F(1, 4), PROG), lambda: open_and_read(capped, readonly=True)):
        text = refusal(action)
        assert "cannot read the guard" in text and words in text and "remove the guard" in text
    assert rows(capped) == 1
    remove_ledger(capped)
    assert "cannot read the guard" in refusal(lambda: Ledger(capped))  # nor a new ledger
    assert not capped.exists()


def test_a_ledger_reached_through_a_link_has_the_guard_of_its_file(capped, tmp_path):
    link = tmp_path / "link.sqlite"
    link.symlink_to(capped)
    with Ledger(link) as book:
        book.charge(DS, F(1, 4), PROG)
    assert not guard_path(link).name.startswith("link") and read_guard(capped).last_charge == 2


# ---- restoring a backup on purpose -------------------------------------------------------------------


def test_restore_installs_a_current_backup_and_the_ledger_goes_on(capped, tmp_path):
    backup = tmp_path / "backup.sqlite"
    assert fz("ledger", "backup", backup, "--ledger", capped).exit_code == 0
    remove_ledger(capped)
    done = fz("ledger", "restore", backup, "--ledger", capped)
    assert done.exit_code == 0, done.stderr
    assert f"restored the ledger {capped} from {backup} (1 run recorded)" in done.stdout and done.stderr == ""
    with Ledger(capped) as book:
        assert book.remaining(DS) == F(1, 2)
        book.charge(DS, F(1, 2), PROG)
        with pytest.raises(FuzzError) as exc:
            book.charge(DS, F(1, 100), PROG)
        assert exc.value.diagnostics[0].code == "E0601"
    assert read_guard(capped).last_charge == 2


def test_restore_refuses_an_older_backup_unless_told_and_then_says_what_it_lacks(capped, tmp_path):
    backup = tmp_path / "backup.sqlite"
    with Ledger(capped) as book:
        book.backup(backup)
        book.charge(DS, F(1, 4), PROG)
    remove_ledger(capped)
    refused = fz("ledger", "restore", backup, "--ledger", capped)
    assert refused.exit_code == 4 and "error[E0602]" in refused.stderr
    assert "is older than the ledger its guard records" in refused.stderr and "--accept-older" in refused.stderr
    assert not capped.exists() and read_guard(capped).last_charge == 2
    done = fz("ledger", "restore", backup, "--ledger", capped, "--accept-older")
    assert done.exit_code == 0, done.stderr
    assert "warning: its guard recorded charges up to #2 and 1 cap change" in done.stderr
    assert read_guard(capped).last_charge == 1
    with Ledger(capped) as book:
        assert book.spent(DS) == F(1, 2)


def test_restore_refuses_another_ledgers_backup_unless_told(capped, tmp_path):
    other = tmp_path / "other.sqlite"
    with Ledger(other) as book:
        book.charge(DS, F(1, 10), PROG)
    backup = tmp_path / "other-backup.sqlite"
    with Ledger(other, readonly=True) as book:
        book.backup(backup)
    remove_ledger(capped)
    text = refusal(lambda: restore_ledger(backup, capped))
    assert "is of another ledger than the one its guard records" in text
    restored = restore_ledger(backup, capped, accept_older=True)
    assert restored.overridden is not None and read_guard(capped) == restored.state


def test_restore_gives_an_id_to_a_backup_from_before_the_guard(tmp_path):
    old = tmp_path / "old-backup.sqlite"
    _schema_3_ledger(old)
    path = tmp_path / "ledger.sqlite"
    restored = restore_ledger(old, path)  # no guard: nothing to compare with
    assert restored.state.ledger_id and restored.runs == 1
    with Ledger(path) as book:
        assert book.state() == restored.state == read_guard(path)
    assert rows(old) == 1 and "ledger_meta" not in {r[0] for r in sqlite3.connect(old).execute(
        "SELECT name FROM sqlite_master")}  # the backup itself is left as it was


@pytest.mark.parametrize("leftover", ["", "-wal", "-shm"])
def test_restore_installs_nothing_where_a_ledger_or_its_files_remain(capped, tmp_path, leftover):
    backup = tmp_path / "backup.sqlite"
    with Ledger(capped, readonly=True) as book:
        book.backup(backup)
    remove_ledger(capped)
    Path(f"{capped}{leftover}").write_bytes(b"x")
    before = guard_path(capped).read_bytes()
    done = fz("ledger", "restore", backup, "--ledger", capped)
    assert done.exit_code == 2 and "error[E0605]" in done.stderr
    assert "a restore installs a ledger only where there is none" in done.stderr and "move the ledger" in done.stderr
    assert guard_path(capped).read_bytes() == before
    assert Path(f"{capped}{leftover}").read_bytes() == b"x"


def test_restore_of_something_that_is_not_a_ledger_installs_nothing(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 100)
    path = tmp_path / "ledger.sqlite"
    done = fz("ledger", "restore", junk, "--ledger", path)
    assert done.exit_code == 4 and "error[E0602]" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.sqlite"]


def test_show_json_still_reads_a_guarded_ledger(capped):
    shown = fz("ledger", "show", "--ledger", capped, "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    (report,) = json.loads(shown.stdout)["datasets"]
    assert report["spent"] == "0.5" and report["cap"] == "1.0"
