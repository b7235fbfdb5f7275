"""What lies at the ledger path: an empty, foreign, unreadable or odd file is an error, never a
fresh ledger; a read-only folder can still be shown and backed up; a backup is a consistent copy
(the write-ahead log included), which a plain copy of the .sqlite file is not."""

from __future__ import annotations

import ctypes
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from fractions import Fraction as F
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuzzpy.diagnostics import FuzzError
from fuzzpy.interfaces.cli import app
from fuzzpy.ledger import Ledger, program_hash
from fuzzpy.ledger.sqlite import SCHEMA_VERSION as L_SCHEMA

DS = "sha256:" + "ab" * 32
PROG = program_hash("main db = count db")
ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.fz"
SAMPLE = ROOT / "examples" / "data" / "adult_sample.csv"
HANG_GUARD = 120
runner = CliRunner()


def fz(*args: object):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def unavailable(path: Path, **kw) -> str:
    with pytest.raises(FuzzError) as exc:
        with Ledger(path, **kw) as book:
            book.spent(DS)
    (diag,) = exc.value.diagnostics
    assert diag.code == "E0602"
    return diag.message + " " + " ".join(diag.notes)


def folder_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ---- nothing but a ledger is used as a ledger ----------------------------------------------------------


def test_an_empty_file_is_an_error_everywhere_and_stays_empty(tmp_path):
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(b"")
    text = unavailable(path)
    assert "is empty (0 bytes)" in text and "restore it from a backup" in text and "delete the empty file" in text
    assert "empty (0 bytes)" in unavailable(path, create=False, readonly=True)
    show = fz("ledger", "show", "--ledger", path)
    assert show.exit_code == 4 and "E0602" in show.stderr and "nothing has been spent" not in show.stdout
    cap = fz("ledger", "set-cap", "--ledger", path, "--dataset", DS, "--cap", "1")
    assert cap.exit_code == 4 and "E0602" in cap.stderr
    run = fz("run", QUICKSTART, "--data", SAMPLE, "--budget", "1", "--ledger", path)
    assert run.exit_code == 4 and "E0602" in run.stderr and "released" not in run.stdout
    assert path.read_bytes() == b"" and folder_files(tmp_path) == ["ledger.sqlite"]


def test_a_ledger_truncated_to_zero_keeps_nobody_from_overspending(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as book:
        book.set_cap(DS, F(1))
        book.charge(DS, F(9, 10), PROG)
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            Path(f"{path}{suffix}").write_bytes(b"")
    with pytest.raises(FuzzError):
        Ledger(path).charge(DS, F(9, 10), PROG)


def test_a_sqlite_file_without_tables_is_not_made_a_ledger(tmp_path):
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE t (x)")
    raw.execute("DROP TABLE t")
    raw.commit()
    raw.close()
    before = path.read_bytes()
    assert len(before) > 0
    assert "not a fuzzpy ledger (it holds no ledger tables)" in unavailable(path)
    assert path.read_bytes() == before


def test_a_fifo_or_a_dangling_link_at_the_ledger_path_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "fifo.sqlite"
    os.mkfifo(fifo)
    assert "not a regular file" in unavailable(fifo)
    link = tmp_path / "link.sqlite"
    link.symlink_to(tmp_path / "nowhere.sqlite")
    assert "link to a file that does not exist" in unavailable(link)
    assert not (tmp_path / "nowhere.sqlite").exists()


def test_a_new_ledger_is_complete_has_normal_permissions_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "ledger.sqlite"
    old = os.umask(0o022)
    try:
        Ledger(path).close()
    finally:
        os.umask(old)
    assert folder_files(tmp_path) == ["ledger.sqlite", "ledger.sqlite.guard"]
    assert path.stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "ledger.sqlite.guard").stat().st_mode & 0o777 == 0o644
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (L_SCHEMA,)
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    raw.close()


def test_a_failed_creation_leaves_nothing(tmp_path, monkeypatch):
    from fuzzpy.ledger import sqlite as L

    def broken(path):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(L, "_new_ledger_file", broken)
    assert "cannot create the ledger" in unavailable(tmp_path / "ledger.sqlite")
    assert folder_files(tmp_path) == []


def test_many_threads_creating_one_ledger_all_use_the_same_one(tmp_path):
    path = tmp_path / "ledger.sqlite"
    errors: list[BaseException] = []

    def first_use() -> None:
        try:
            with Ledger(path) as book:
                book.charge(DS, F(1, 10), PROG)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD)
    assert errors == []
    with Ledger(path) as book:
        assert book.spent(DS) == F(8, 10)
    assert [n for n in folder_files(tmp_path) if n.endswith(".new")] == []


# ---- read-only folders ---------------------------------------------------------------------------------


def _without_permission_override() -> None:
    """In the child: root loses the capabilities that ignore file modes (as any user has)."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                os._exit(97)


def as_ordinary_user(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "fuzzpy.interfaces.cli", *args], capture_output=True, text=True,
                          timeout=HANG_GUARD, preexec_fn=_without_permission_override, cwd=ROOT)
    if done.returncode == 97:
        pytest.skip("cannot drop root's permission override here")
    return done


@pytest.fixture
def read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    with Ledger(folder / "ledger.sqlite") as book:
        book.set_cap(DS, F(2), "adult.csv")
        book.charge(DS, F(1, 2), PROG, "prog.fz:main")
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


@pytest.mark.skipif(sys.platform != "linux", reason="drops Linux capabilities when run as root")
def test_show_and_backup_work_in_a_read_only_folder(read_only_folder, tmp_path):
    before = folder_files(read_only_folder)
    guard = (read_only_folder / "ledger.sqlite.guard").read_bytes()
    shown = as_ordinary_user("ledger", "show", "--ledger", str(read_only_folder / "ledger.sqlite"), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    import json

    (report,) = json.loads(shown.stdout)["datasets"]
    assert report["cap"] == "2.0" and report["spent"] == "0.5" and len(report["runs"]) == 1
    copy = tmp_path / "backup.sqlite"
    done = as_ordinary_user("ledger", "backup", str(copy), "--ledger", str(read_only_folder / "ledger.sqlite"))
    assert done.returncode == 0, done.stderr
    assert "(1 run recorded)" in done.stdout
    with Ledger(copy, readonly=True) as book:
        assert book.spent(DS) == F(1, 2) and book.cap(DS) == F(2)
    assert folder_files(read_only_folder) == before
    assert (read_only_folder / "ledger.sqlite.guard").read_bytes() == guard  # checked, not written
    # writing still fails there, with the coded error
    run = as_ordinary_user("ledger", "set-cap", "--ledger", str(read_only_folder / "ledger.sqlite"),
                           "--dataset", DS, "--cap", "3")
    assert run.returncode == 4 and "E0602" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="drops Linux capabilities when run as root")
def test_a_ledger_without_a_guard_in_a_read_only_folder_is_shown_and_gets_no_guard(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    with Ledger(folder / "ledger.sqlite") as book:
        book.charge(DS, F(1, 2), PROG)
    (folder / "ledger.sqlite.guard").unlink()  # as a ledger from before the guard
    folder.chmod(0o555)
    try:
        for args, words in ((["show"], "0.5"), (["backup", str(tmp_path / "copy.sqlite")], "(1 run recorded)")):
            done = as_ordinary_user("ledger", *args, "--ledger", str(folder / "ledger.sqlite"))
            assert done.returncode == 0 and words in done.stdout, done.stderr
    finally:
        folder.chmod(0o755)
    assert folder_files(folder) == ["ledger.sqlite"]


@pytest.mark.skipif(sys.platform != "linux", reason="drops Linux capabilities when run as root")
def test_an_older_ledger_in_a_read_only_folder_is_refused_by_its_guard(read_only_folder, tmp_path):
    old = tmp_path / "old.sqlite"
    read_only_folder.chmod(0o755)
    with Ledger(read_only_folder / "ledger.sqlite") as book:
        book.backup(old)
        book.charge(DS, F(1, 4), PROG)
    shutil.copyfile(old, read_only_folder / "ledger.sqlite")  # an older copy put back
    read_only_folder.chmod(0o555)
    done = as_ordinary_user("ledger", "show", "--ledger", str(read_only_folder / "ledger.sqlite"))
    assert done.returncode == 4 and "E0602" in done.stderr and "older than its guard" in done.stderr, done.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="drops Linux capabilities when run as root")
def test_a_read_only_folder_with_a_leftover_log_is_an_error_not_a_partial_read(tmp_path):
    path = tmp_path / "ledger.sqlite"
    book = _charges_kept_in_the_log(path, 3)  # committed, but only in ledger.sqlite-wal
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    shutil.copyfile(path, frozen / "ledger.sqlite")  # as a crash leaves them: main file and log,
    shutil.copyfile(f"{path}-wal", frozen / "ledger.sqlite-wal")  # no shared-memory file
    book._reader.close()
    book.close()
    frozen.chmod(0o555)
    try:
        done = as_ordinary_user("ledger", "show", "--ledger", str(frozen / "ledger.sqlite"))
    finally:
        frozen.chmod(0o755)
    if done.returncode == 0:  # SQLite could read the log after all: then it must show all of it
        assert done.stdout.count("charged") == 3, done.stdout
    else:
        assert done.returncode == 4 and "E0602" in done.stderr, done.stderr
        assert "write-ahead log" in done.stderr and "copy ledger.sqlite together with its -wal" in done.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="drops Linux capabilities when run as root")
def test_an_unreadable_ledger_is_an_error_not_a_new_ledger(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as book:
        book.charge(DS, F(1), PROG)
    path.chmod(0o000)
    try:
        for args in (["ledger", "show"], ["ledger", "set-cap", "--dataset", DS, "--cap", "1"]):
            done = as_ordinary_user(*args, "--ledger", str(path))
            assert done.returncode == 4 and "E0602" in done.stderr, done.stderr
    finally:
        path.chmod(0o644)
    with Ledger(path) as book:
        assert book.spent(DS) == F(1)


def test_read_only_opening_writes_nothing(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as book:
        book.charge(DS, F(1), PROG)
    before = path.read_bytes()
    with Ledger(path, readonly=True) as book:
        assert book.spent(DS) == F(1)
        with pytest.raises(FuzzError):
            book.charge(DS, F(1), PROG)
    assert path.read_bytes() == before
    assert "no ledger" in unavailable(tmp_path / "missing.sqlite", readonly=True)
    assert not (tmp_path / "missing.sqlite").exists()


# ---- backups -------------------------------------------------------------------------------------------


def _charges_kept_in_the_log(path: Path, n: int) -> Ledger:
    """A ledger whose last n charges are committed but still only in its write-ahead log: a
    reader at work (as `ledger show` or a backup may be) keeps the checkpoint that follows each
    charge from folding them into the main file."""
    book = Ledger(path)
    book._db.execute("PRAGMA wal_autocheckpoint=0")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM charges").fetchone()  # its snapshot predates the charges
    for _ in range(n):
        book.charge(DS, F(1, 10), PROG)
    book._reader = reader  # kept alive with the ledger
    return book


def test_a_plain_copy_loses_committed_charges_but_a_backup_does_not(tmp_path):
    path = tmp_path / "ledger.sqlite"
    book = _charges_kept_in_the_log(path, 5)
    try:
        naive = tmp_path / "naive-copy.sqlite"
        shutil.copyfile(path, naive)  # what the docs now warn against
        raw = sqlite3.connect(naive)
        assert raw.execute("SELECT count(*) FROM charges").fetchone()[0] < 5
        raw.close()
        done = fz("ledger", "backup", tmp_path / "backup.sqlite", "--ledger", path)
        assert done.exit_code == 0, done.stderr
        assert "(5 runs recorded)" in done.stdout
    finally:
        book._reader.close()
        book.close()
    assert sorted(p for p in folder_files(tmp_path) if p.startswith("backup")) == ["backup.sqlite"]
    with Ledger(tmp_path / "backup.sqlite", readonly=True) as copy:
        assert copy.spent(DS) == F(1, 2)
    raw = sqlite3.connect(tmp_path / "backup.sqlite")
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # one self-contained file
    raw.close()


def test_a_backup_taken_while_runs_charge_is_consistent(tmp_path):
    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()
    stop = threading.Event()

    def charging() -> None:
        with Ledger(path) as book:
            while not stop.is_set():
                book.charge(DS, F(1, 4), PROG)

    worker = threading.Thread(target=charging)
    worker.start()
    try:
        copies = []
        for i in range(5):
            target = tmp_path / f"backup-{i}.sqlite"
            with Ledger(path, readonly=True) as book:
                runs = book.backup(target)
            copies.append((target, runs))
    finally:
        stop.set()
        worker.join(HANG_GUARD)
    for target, runs in copies:
        with Ledger(target, readonly=True) as copy:
            assert len(copy.entries()) == runs and copy.spent(DS) == F(runs, 4)


def test_restoring_a_backup_brings_back_caps_and_spending(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as book:
        book.set_cap(DS, F(1))
        book.charge(DS, F(3, 4), PROG)
        book.backup(tmp_path / "backup.sqlite")
    path.write_bytes(b"")  # the accident
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(tmp_path / "backup.sqlite", path)  # the restore of docs/ledger.md
    with Ledger(path) as book:
        assert book.remaining(DS) == F(1, 4)
        with pytest.raises(FuzzError) as exc:
            book.charge(DS, F(1, 2), PROG)
        assert exc.value.diagnostics[0].code == "E0601"


@pytest.mark.parametrize("setup, code, exit_code, text", [
    ("existing", "E0605", 2, "already exists"),
    ("no-folder", "E0605", 2, "does not exist"),
    ("no-ledger", "E0602", 4, "no ledger at"),
])
def test_backup_refusals(tmp_path, setup, code, exit_code, text):
    path = tmp_path / "ledger.sqlite"
    target = tmp_path / "backup.sqlite"
    if setup != "no-ledger":
        Ledger(path).close()
    if setup == "existing":
        target.write_bytes(b"precious")
    if setup == "no-folder":
        target = tmp_path / "missing" / "backup.sqlite"
    done = fz("ledger", "backup", target, "--ledger", path)
    assert done.exit_code == exit_code and f"error[{code}]" in done.stderr and text in done.stderr
    if setup == "existing":
        assert target.read_bytes() == b"precious"
    assert [n for n in folder_files(tmp_path) if n.endswith(".new")] == []
