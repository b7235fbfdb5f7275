"""The privacy-budget ledger: exact caps, charges that survive crashes, no overspend under races."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3
import tempfile
from fractions import Fraction as F
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fuzzpy.diagnostics import FuzzError
from fuzzpy.interfaces.ledger_commands import ledger_app
from fuzzpy.ledger import (
    Ledger,
    dataset_identity,
    default_ledger_path,
    format_exact,
    open_ledger,
    parse_amount,
    program_hash,
    short_id,
)
from fuzzpy.ledger.sqlite import SCHEMA_VERSION

DS = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
PROG = program_hash("main db = count db")

# fork when the platform has it: the child then needs no re-import of this module, whatever
# pytest's import mode; each child still opens its own SQLite connection, as real runs do.
_CTX = multiprocessing.get_context(
    "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def code_of(exc_info: pytest.ExceptionInfo[FuzzError]) -> str:
    return exc_info.value.diagnostics[0].code


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger(tmp_path / "ledger.sqlite") as book:
        yield book


# ---------------------------------------------------------------------------------------------
# Caps, exactly


def test_cap_is_enforced_exactly(ledger: Ledger) -> None:
    ledger.set_cap(DS, F(1), "adult")
    ledger.charge(DS, F(3, 10), PROG)
    ledger.charge(DS, F(7, 10), PROG)  # 0.3 + 0.7 == 1 exactly: allowed (floats would say 1.0)
    assert ledger.spent(DS) == F(1)
    assert ledger.remaining(DS) == F(0)
    with pytest.raises(FuzzError) as exc:
        ledger.charge(DS, F(1, 10), PROG)
    assert code_of(exc) == "E0601"
    message = exc.value.diagnostics[0].message
    assert "needs epsilon 0.1" in message and "only 0.0 of the cap 1.0" in message
    assert short_id(DS) in message and DS not in message  # shortened identity
    assert len(ledger.entries(DS)) == 2  # the refused run left no row
    assert ledger.spent(DS) == F(1)


def test_thirds_sum_to_exactly_the_cap(ledger: Ledger) -> None:
    ledger.set_cap(DS, F(1))
    for _ in range(3):
        ledger.charge(DS, F(1, 3), PROG)
    assert ledger.spent(DS) == F(1)
    with pytest.raises(FuzzError) as exc:
        ledger.charge(DS, F(1, 10**30), PROG)  # the tiniest overspend is still refused
    assert code_of(exc) == "E0601"
    assert "the cap 1.0" in exc.value.diagnostics[0].message


def test_refused_charge_message_shows_fractions(ledger: Ledger) -> None:
    ledger.set_cap(DS, F(1, 3))
    ledger.charge(DS, F(1, 4), PROG)
    with pytest.raises(FuzzError) as exc:
        ledger.charge(DS, F(1, 2), PROG)
    assert "needs epsilon 0.5 but only 1/12 of the cap 1/3 remains" in str(exc.value)


def test_without_a_cap_charges_always_succeed(ledger: Ledger) -> None:
    assert ledger.cap(DS) is None and ledger.remaining(DS) is None
    for _ in range(5):
        ledger.charge(DS, F(10), PROG)
    assert ledger.spent(DS) == F(50)
    assert ledger.spent(OTHER) == F(0)


def test_caps_are_per_dataset(ledger: Ledger) -> None:
    ledger.set_cap(DS, F(1, 2))
    ledger.charge(OTHER, F(5), PROG)  # uncapped dataset does not eat DS's budget
    ledger.charge(DS, F(1, 2), PROG)
    assert ledger.spent(DS) == F(1, 2) and ledger.spent(OTHER) == F(5)


def test_zero_cap_allows_only_zero(ledger: Ledger) -> None:
    ledger.set_cap(DS, F(0))
    ledger.charge(DS, F(0), PROG)
    with pytest.raises(FuzzError):
        ledger.charge(DS, F(1, 10**9), PROG)


def test_lowering_cap_below_spent(ledger: Ledger) -> None:
    ledger.set_cap(DS, F(2), "first")
    ledger.charge(DS, F(3, 2), PROG)
    ledger.set_cap(DS, F(1))  # label None keeps the old label
    assert ledger.cap(DS) == F(1) and ledger.cap_label(DS) == "first"
    assert ledger.remaining(DS) == F(0)  # clamped, not negative
    with pytest.raises(FuzzError) as exc:
        ledger.charge(DS, F(1, 100), PROG)
    assert "only 0.0 of the cap 1.0" in str(exc.value)
    ledger.set_cap(DS, F(5, 2), "second")
    assert ledger.remaining(DS) == F(1) and ledger.cap_label(DS) == "second"


@pytest.mark.parametrize("bad", [F(-1, 10), -1, 0.5, 1.0, True, "0.3", None])
def test_invalid_caps_and_epsilons_are_refused(ledger: Ledger, bad: object) -> None:
    for call in (lambda: ledger.set_cap(DS, bad), lambda: ledger.charge(DS, bad, PROG)):
        with pytest.raises(FuzzError) as exc:
            call()
        assert code_of(exc) == "E0605"
    assert ledger.cap(DS) is None and ledger.entries() == []


@pytest.mark.parametrize("text,value", [("2.0", F(2)), ("0.3", F(3, 10)), ("1/3", F(1, 3)),
                                        (" 1e-3 ", F(1, 1000)), ("0", F(0))])
def test_parse_amount_is_exact(text: str, value: F) -> None:
    assert parse_amount(text) == value


@pytest.mark.parametrize("text", ["", "abc", "-0.5", "nan", "inf", "1/0", "0x10", "1,5"])
def test_parse_amount_rejects(text: str) -> None:
    with pytest.raises(FuzzError) as exc:
        parse_amount(text)
    assert code_of(exc) == "E0605"


def test_empty_dataset_identity_is_refused(ledger: Ledger) -> None:
    with pytest.raises(FuzzError) as exc:
        ledger.charge("  ", F(1), PROG)
    assert code_of(exc) == "E0605"


@settings(max_examples=40, deadline=None)
@given(cap=st.fractions(min_value=0, max_value=3, max_denominator=12),
       charges=st.lists(st.fractions(min_value=0, max_value=1, max_denominator=12), max_size=12))
def test_ledger_matches_exact_model(cap: F, charges: list[F]) -> None:
    """A charge succeeds exactly when the exact running total stays within the cap."""
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "l.sqlite") as book:
        book.set_cap(DS, cap)
        total = F(0)
        for eps in charges:
            if total + eps <= cap:
                book.charge(DS, eps, PROG)
                total += eps
            else:
                with pytest.raises(FuzzError):
                    book.charge(DS, eps, PROG)
        assert book.spent(DS) == total
        assert book.remaining(DS) == cap - total


# ---------------------------------------------------------------------------------------------
# Finishing runs, persistence


def test_finish_records_status_and_never_refunds(ledger: Ledger) -> None:
    ok = ledger.charge(DS, F(1, 4), PROG, "adult.csv")
    bad = ledger.charge(DS, F(1, 4), PROG, "adult.csv")
    ledger.finish(ok)
    ledger.finish(bad, "failed")
    by_id = {e.id: e for e in ledger.entries()}
    assert by_id[ok].status == "released" and by_id[ok].finished_at is not None
    assert by_id[bad].status == "failed" and by_id[bad].finished_at is not None
    assert by_id[ok].label == "adult.csv" and by_id[ok].program_hash == PROG
    assert ledger.spent(DS) == F(1, 2)  # the failed run still counts


def test_finish_rejects_bad_calls(ledger: Ledger) -> None:
    cid = ledger.charge(DS, F(1), PROG)
    for call in (lambda: ledger.finish(cid, "refunded"), lambda: ledger.finish(cid + 99)):
        with pytest.raises(FuzzError) as exc:
            call()
        assert code_of(exc) == "E0605"
    ledger.finish(cid, "failed")
    with pytest.raises(FuzzError) as exc:
        ledger.finish(cid, "released")  # cannot rewrite history
    assert code_of(exc) == "E0605"
    assert ledger.entries()[0].status == "failed"


def test_charged_run_marks_failure_and_keeps_charge(ledger: Ledger) -> None:
    with ledger.charged_run(DS, F(1, 5), PROG) as first:
        pass
    with pytest.raises(ZeroDivisionError):
        with ledger.charged_run(DS, F(1, 5), PROG):
            1 / 0
    statuses = [(e.id == first, e.status) for e in ledger.entries()]
    assert statuses == [(True, "released"), (False, "failed")]
    assert ledger.spent(DS) == F(2, 5)


def test_ledger_persists_exact_strings(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as book:
        book.set_cap(DS, F(1), "adult")
        book.charge(DS, F(3, 10), PROG)
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT epsilon FROM charges").fetchall() == [("3/10",)]
    assert raw.execute("SELECT cap, label FROM caps").fetchall() == [("1", "adult")]
    raw.close()
    with Ledger(path) as again:
        assert again.spent(DS) == F(3, 10) and again.cap(DS) == F(1)
        assert again.datasets() == [DS]


def test_datasets_lists_charged_then_capped(ledger: Ledger) -> None:
    ledger.set_cap(OTHER, F(1))
    ledger.charge(DS, F(1), PROG)
    assert ledger.datasets() == [DS, OTHER]
    assert [e.dataset for e in ledger.entries(DS)] == [DS]
    assert ledger.entries(OTHER) == []


# ---------------------------------------------------------------------------------------------
# Crashes and concurrency (real processes)


def _charge_then_die(path: str, epsilon: str) -> None:
    book = Ledger(Path(path))
    book.charge(DS, F(epsilon), PROG)
    os._exit(1)  # killed after charging, before finish(): no cleanup, no commit of anything else


def test_killed_run_keeps_its_charge(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as book:
        book.set_cap(DS, F(1))
    child = _CTX.Process(target=_charge_then_die, args=(str(path), "3/5"))
    child.start()
    child.join(60)
    assert child.exitcode == 1
    with Ledger(path) as book:
        [entry] = book.entries(DS)
        assert entry.status == "charged" and entry.finished_at is None
        assert entry.epsilon == F(3, 5)
        assert book.spent(DS) == F(3, 5) and book.remaining(DS) == F(2, 5)
        with pytest.raises(FuzzError):
            book.charge(DS, F(1, 2), PROG)  # 3/5 + 1/2 > 1: the dead run still counts


def _race(path: str, epsilon: str, barrier, results) -> None:
    try:
        book = Ledger(Path(path))
        barrier.wait(60)
        try:
            results.put(("ok", book.charge(DS, F(epsilon), PROG)))
        except FuzzError as exc:
            results.put((exc.diagnostics[0].code, str(exc)))
        book.close()
    except BaseException as exc:  # report, so the parent fails with a reason, not a hang
        results.put(("crash", repr(exc)))


def _run_race(path: Path, n: int, epsilon: str) -> list[tuple]:
    barrier, results = _CTX.Barrier(n), _CTX.Queue()
    procs = [_CTX.Process(target=_race, args=(str(path), epsilon, barrier, results))
             for _ in range(n)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return outcomes


@pytest.mark.parametrize("round_", range(3))
def test_concurrent_runs_never_overspend(tmp_path: Path, round_: int) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as book:
        book.set_cap(DS, F(1))
    outcomes = _run_race(path, 8, "0.3")
    kinds = sorted(o[0] for o in outcomes)
    assert kinds == ["E0601"] * 5 + ["ok"] * 3, outcomes
    with Ledger(path) as book:
        assert book.spent(DS) == F(9, 10)
        assert len(book.entries(DS)) == 3
        assert sorted(e.id for e in book.entries(DS)) == sorted(o[1] for o in outcomes
                                                                if o[0] == "ok")


def test_concurrent_first_use_creates_one_ledger(tmp_path: Path) -> None:
    """Eight processes opening a ledger that does not exist yet: no errors, nothing lost."""
    path = tmp_path / "fresh.sqlite"
    outcomes = _run_race(path, 8, "1/8")
    assert [o[0] for o in outcomes] == ["ok"] * 8, outcomes
    with Ledger(path) as book:
        assert book.spent(DS) == F(1) and len(book.entries()) == 8


# ---------------------------------------------------------------------------------------------
# Broken or unusable ledger files


def _expect_unavailable(path: Path, create: bool = True) -> str:
    with pytest.raises(FuzzError) as exc:
        Ledger(path, create=create)
    assert code_of(exc) == "E0602"
    return exc.value.diagnostics[0].message


def test_corrupted_file(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    path.write_bytes(b"this is not a database at all" * 100)
    assert "file is not a database" in _expect_unavailable(path)
    assert path.read_bytes().startswith(b"this is not")  # left untouched


def test_truncated_ledger(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as book:
        for _ in range(200):
            book.charge(DS, F(1, 7), PROG, "x" * 200)
    # Fold the WAL back into the main file, then cut it in half.
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.execute("PRAGMA journal_mode=DELETE")
    raw.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(FuzzError) as exc:
        with Ledger(path) as book:
            book.spent(DS)
    assert code_of(exc) == "E0602"


def test_foreign_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE charges (who TEXT)")
    raw.execute("PRAGMA user_version=1")
    raw.commit()
    raw.close()
    assert "not a fuzzpy ledger" in _expect_unavailable(path)


def test_foreign_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE users (name TEXT)")
    raw.commit()
    raw.close()
    before = path.read_bytes()
    assert "not a fuzzpy ledger" in _expect_unavailable(path)
    assert path.read_bytes() == before  # no tables added, not switched to WAL


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    Ledger(path).close()
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version=7")
    raw.close()
    assert "newer fuzzpy" in _expect_unavailable(path)


def test_tampered_amount(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as book:
        book.charge(DS, F(1), PROG)
    raw = sqlite3.connect(path)
    raw.execute("UPDATE charges SET epsilon = '-5'")  # a negative charge would be a refund
    raw.commit()
    raw.close()
    with Ledger(path) as book, pytest.raises(FuzzError) as exc:
        book.spent(DS)
    assert code_of(exc) == "E0602" and "corrupted" in str(exc.value)


def test_uncreatable_paths(tmp_path: Path) -> None:
    assert "does not exist" in _expect_unavailable(tmp_path / "no" / "such" / "l.sqlite")
    assert "is a folder" in _expect_unavailable(tmp_path)
    assert "no ledger" in _expect_unavailable(tmp_path / "missing.sqlite", create=False)
    assert not (tmp_path / "missing.sqlite").exists()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores modes")
def test_read_only_ledger_refuses_charges(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    Ledger(path).close()
    path.chmod(0o444)
    try:
        with pytest.raises(FuzzError) as exc:
            with Ledger(path) as book:
                book.charge(DS, F(1), PROG)
        assert code_of(exc) == "E0602"
    finally:
        path.chmod(0o644)


# ---------------------------------------------------------------------------------------------
# Identities, hashes, locations, formatting


def test_dataset_identity_follows_content(tmp_path: Path) -> None:
    original = tmp_path / "adult.csv"
    original.write_bytes(b"age,income\n30,100\n")
    copy = tmp_path / "renamed.csv"
    copy.write_bytes(original.read_bytes())
    edited = tmp_path / "edited.csv"
    edited.write_bytes(b"age,income\n31,100\n")
    ident = dataset_identity(original)
    assert ident == "sha256:" + hashlib.sha256(original.read_bytes()).hexdigest()
    assert dataset_identity(copy) == ident
    assert dataset_identity(edited) != ident


def test_dataset_identity_streams_large_files(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    data = os.urandom(1 << 16) * 50 + b"tail"  # > 3 MiB, not a multiple of the chunk size
    big.write_bytes(data)
    assert dataset_identity(big) == "sha256:" + hashlib.sha256(data).hexdigest()


def test_dataset_identity_of_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FuzzError) as exc:
        dataset_identity(tmp_path / "nope.csv")
    assert code_of(exc) == "E0501"
    with pytest.raises(FuzzError) as exc:
        dataset_identity(tmp_path)  # a folder is not readable as data
    assert code_of(exc) == "E0502"


def test_program_hash() -> None:
    src = "main db = count db\n"
    assert program_hash(src) == "sha256:" + hashlib.sha256(src.encode()).hexdigest()
    assert program_hash(src, {}) == program_hash(src)
    a = program_hash(src, {"eps": "0.5", "k": "3"})
    assert a == program_hash(src, {"k": "3", "eps": "0.5"})  # order does not matter
    assert a != program_hash(src, {"eps": "0.5", "k": "4"})
    assert a != program_hash(src) and program_hash(src + " ") != program_hash(src)


def test_default_ledger_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "env.sqlite"))
    assert default_ledger_path() == tmp_path / "env.sqlite"
    monkeypatch.delenv("FUZZPY_LEDGER")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    assert default_ledger_path() == tmp_path / "home" / ".fuzzpy" / "ledger.sqlite"
    assert (tmp_path / "home" / ".fuzzpy").is_dir()
    with open_ledger() as book:
        assert book.path == tmp_path / "home" / ".fuzzpy" / "ledger.sqlite"


@pytest.mark.parametrize("value,text", [(F(1), "1.0"), (F(3, 10), "0.3"), (F(1, 3), "1/3"),
                                        (F(0), "0.0"), (F(5, 2), "2.5"), (F(-1, 4), "-0.25"),
                                        (F(1, 1024), "0.0009765625"), (F(5, 6), "5/6"),
                                        (F(1, 2**80), "1/" + str(2**80)), (F(12), "12.0")])
def test_format_exact(value: F, text: str) -> None:
    assert format_exact(value) == text
    assert F(text) == value  # every printed amount parses back exactly


# ---------------------------------------------------------------------------------------------
# The CLI


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(ledger_app)
    return app


def invoke(*args: str):
    return CliRunner().invoke(_cli(), ["ledger", *args])


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "adult.csv"
    path.write_bytes(b"age,income\n30,100\n41,200\n")
    return path


def test_cli_set_cap_and_show(tmp_path: Path, data_file: Path) -> None:
    led = str(tmp_path / "l.sqlite")
    ident = dataset_identity(data_file)
    result = invoke("set-cap", "--data", str(data_file), "--cap", "2.0", "--ledger", led)
    assert result.exit_code == 0, result.output
    assert f"cap of adult.csv ({short_id(ident)}) set to 2.0 (pure epsilon)" in result.stdout
    with Ledger(Path(led)) as book:
        done = book.charge(ident, F(1, 2), program_hash("p1"), "adult.csv")
        book.finish(done)
        book.charge(ident, F(1, 3), program_hash("p2"), "adult.csv")  # killed run
        book.charge(OTHER, F(1, 4), PROG, "other.csv")

    text = invoke("show", "--ledger", led)
    assert text.exit_code == 0, text.output
    out = text.stdout
    # named by the set-cap file (no run recorded a name); notion, cap, spent, remaining, ..., id
    summary = next(line for line in out.splitlines() if line.startswith("adult.csv "))
    assert summary.split()[1:6] == ["pure", "epsilon", "2.0", "5/6", "7/6"] and summary.endswith(short_id(ident))
    other = next(line for line in out.splitlines() if line.startswith(short_id(OTHER)))
    assert other.split()[1:8] == ["-", "(no", "cap)", "none", "0.25", "no", "cap"]
    assert "runs' deltas: the sum of the deltas" in out and "rho: the zCDP rho of all its runs" in out
    assert short_id(program_hash("p1")) in out and "released" in out and "charged" in out
    assert ident not in out  # identities are shortened on screen

    js = invoke("show", "--ledger", led, "--data", str(data_file), "--format", "json")
    assert js.exit_code == 0, js.output
    report = json.loads(js.stdout)
    [entry] = report["datasets"]
    assert entry["dataset"] == ident and entry["label"] == "adult.csv"
    assert (entry["cap"], entry["spent"], entry["remaining"]) == ("2.0", "5/6", "7/6")
    assert [(r["epsilon"], r["status"]) for r in entry["runs"]] == [("0.5", "released"),
                                                                    ("1/3", "charged")]
    assert sum(F(r["epsilon"]) for r in entry["runs"]) == F(entry["spent"])

    by_prefix = json.loads(invoke("show", "--ledger", led, "--dataset", short_id(OTHER) + "…",
                                  "--format", "json").stdout)
    assert [d["dataset"] for d in by_prefix["datasets"]] == [OTHER]
    assert by_prefix["datasets"][0]["cap"] is None


def test_cli_set_cap_by_dataset_id_and_warning(tmp_path: Path) -> None:
    led = str(tmp_path / "l.sqlite")
    with Ledger(Path(led)) as book:
        book.charge(DS, F(1), PROG)
    result = invoke("set-cap", "--dataset", DS.upper().replace("SHA256", "sha256"),
                    "--cap", "1/3", "--label", "survey", "--ledger", led)
    assert result.exit_code == 0, result.output
    assert "set to 1/3 (pure epsilon): spent 1.0, remaining 0.0" in result.stdout
    assert "warning:" in result.stderr and "refused" in result.stderr
    with Ledger(Path(led)) as book:
        assert book.cap(DS) == F(1, 3) and book.cap_label(DS) == "survey"


def test_cli_show_without_a_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "none.sqlite"))
    result = invoke("show")
    assert result.exit_code == 0 and "nothing has been spent" in result.stdout
    assert json.loads(invoke("show", "--format", "json").stdout)["datasets"] == []
    assert not (tmp_path / "none.sqlite").exists()  # show never creates a ledger


@pytest.mark.parametrize("args,code,exit_code", [
    (["set-cap", "--dataset", "sha256:ab12", "--cap", "1"], "E0605", 2),  # shortened id
    (["set-cap", "--dataset", DS, "--cap", "-1"], "E0605", 2),
    (["set-cap", "--dataset", DS, "--cap", "lots"], "E0605", 2),
    (["set-cap", "--cap", "1"], "E0605", 2),
    (["set-cap", "--dataset", DS, "--data", "x.csv", "--cap", "1"], "E0605", 2),
    (["set-cap", "--data", "MISSING", "--cap", "1"], "E0501", 2),
    (["show", "--format", "xml"], "E0605", 2),
    (["show", "--dataset", "sha256:ffff"], "E0605", 2),  # matches nothing
])
def test_cli_usage_errors(tmp_path: Path, args: list[str], code: str, exit_code: int) -> None:
    led = tmp_path / "l.sqlite"
    Ledger(led).close()
    args = [str(tmp_path / "missing.csv") if a == "MISSING" else a for a in args]
    result = invoke(*args, "--ledger", str(led))
    assert result.exit_code == exit_code
    assert result.stderr.startswith(f"error[{code}]: ")
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not an escaped error
    with Ledger(led) as book:
        assert book.datasets() == []  # nothing was written


def test_cli_ledger_errors_exit_4(tmp_path: Path, data_file: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"garbage" * 50)
    for args in (["show"], ["set-cap", "--data", str(data_file), "--cap", "1"]):
        result = invoke(*args, "--ledger", str(bad))
        assert result.exit_code == 4
        assert result.stderr.startswith("error[E0602]: cannot use the ledger")
        assert "Traceback" not in result.output


def test_charge_many_books_all_datasets_or_none(tmp_path):
    from fractions import Fraction as F

    from fuzzpy.diagnostics import FuzzError
    from fuzzpy.ledger import Ledger

    book = Ledger(tmp_path / "l.sqlite")
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    book.set_cap(b, F(1, 2))
    assert len(book.charge_many({a: F(1, 5), b: F(1, 5)}, "h")) == 2
    try:
        book.charge_many({a: F(1, 5), b: F(2, 5)}, "h")  # b would exceed its cap
        raise AssertionError("expected E0601")
    except FuzzError as exc:
        assert exc.diagnostics[0].code == "E0601"
    assert book.spent(a) == F(1, 5) and book.spent(b) == F(1, 5)  # nothing booked on a either


# ---- schema 2: the delta and rho of runs stated in (epsilon, delta) ---------------------------------

def _schema_1_ledger(path: Path) -> None:
    """A ledger as fuzzpy wrote it before charges recorded their delta."""
    raw = sqlite3.connect(path)
    raw.executescript("""
        CREATE TABLE caps (dataset TEXT PRIMARY KEY, cap TEXT NOT NULL, label TEXT, set_at TEXT NOT NULL);
        CREATE TABLE charges (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, label TEXT NOT NULL,
            program_hash TEXT NOT NULL, epsilon TEXT NOT NULL, status TEXT NOT NULL, started_at TEXT NOT NULL,
            finished_at TEXT);
        CREATE INDEX charges_by_dataset ON charges (dataset);
        INSERT INTO caps VALUES ('%s', '2', NULL, '2026-01-01');
        INSERT INTO charges (dataset, label, program_hash, epsilon, status, started_at)
            VALUES ('%s', 'old', 'h', '1/2', 'released', '2026-01-01');
        PRAGMA user_version=1;
    """ % (DS, DS))
    raw.close()


def test_a_schema_1_ledger_is_upgraded_in_place_and_keeps_its_spending(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _schema_1_ledger(path)
    with Ledger(path, readonly=True) as book:  # read-only: read as it is, never changed
        (old,) = book.entries()
        assert (old.epsilon, old.delta, old.rho, old.loss) == (F(1, 2), 0, None, None)
        assert book.spent(DS) == F(1, 2) and book.cap(DS) == 2
    with Ledger(path) as book:
        book.charge(DS, F(1), PROG)
        assert book.spent(DS) == F(3, 2) and book.spent_delta(DS) == 0
        with pytest.raises(FuzzError) as exc:  # the old cap is a pure epsilon cap
            book.charge(DS, F(1, 4), PROG, delta=F(1, 10**6), rho=F(1, 4))
        assert code_of(exc) == "E0606" and "pure epsilon cap" in str(exc.value)
        assert [(e.delta, e.rho) for e in book.entries()] == [(0, None), (0, None)]
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    raw.close()


def test_runs_in_epsilon_delta_without_a_loss_compose_by_adding_both(tmp_path: Path) -> None:
    from fuzzpy.accounting import EpsilonCap

    with Ledger(tmp_path / "l.sqlite") as book:
        book.set_cap(DS, EpsilonCap(F(3), F(1, 10**4)))
        book.charge(DS, F(1), PROG)
        book.charge_many({DS: F(1)}, PROG, delta=F(1, 10**5), rho=F(1, 8))
        use = book.usage(DS)
        assert use.epsilon_sum == 2 and use.delta_sum == F(1, 10**5) and book.spent_delta(DS) == F(1, 10**5)
        assert 1 < use.spent <= 2  # booked 1 at 1e-5, plus the pure 1 converted at the delta left
        with pytest.raises(FuzzError) as exc:
            book.charge(DS, F(2), PROG, delta=F(1, 10**5))
        assert code_of(exc) == "E0601"
        with pytest.raises(FuzzError) as exc:
            book.charge(DS, F(1, 2), PROG, delta=F(1))
        assert code_of(exc) == "E0605"
