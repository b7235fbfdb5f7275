"""Ledger schema 3: each charge records its ProvenLoss, caps are in pure epsilon, in epsilon at a
delta, or in zCDP rho, and the cap check is the accountant's fits(history + run, cap), composed
once, in the charging transaction (docs/ledger.md, "Caps by notion")."""

from __future__ import annotations

import json
import math
import multiprocessing
import sqlite3
from fractions import Fraction as F
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuzzpy.accounting import EpsilonCap, ProvenLoss, RhoCap, compose, epsilon_at_delta, fits, spent
from fuzzpy.diagnostics import FuzzError
from fuzzpy.interfaces.cli import app
from fuzzpy.ledger import Ledger, dataset_identity, program_hash, short_id
from fuzzpy.ledger.sqlite import SCHEMA_VERSION

DS = "sha256:" + "ab" * 32
PROG = program_hash("main db = count db")
DELTA = F(1, 10**6)
# As `fuzzpy run` makes them: a discrete Gaussian on a grid of sigma 4096 steps (the checker's
# lower bound for `gaussian 0.5 (count db)`), so the accountant may use its GDP bounds.
GAUSS_HALF = ProvenLoss.gaussian_releases(1, 1, grid_sigma=4096)    # mu = 1: rho 1/2
GAUSS_SMALL = ProvenLoss.gaussian_releases(1, 10, grid_sigma=4096)  # mu = 1/10: rho 1/200
_CTX = multiprocessing.get_context(
    "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def code_of(exc_info: pytest.ExceptionInfo[FuzzError]) -> str:
    return exc_info.value.diagnostics[0].code


def gauss_charge(book: Ledger, loss: ProvenLoss, delta: F = DELTA) -> int:
    """A run as `fuzzpy run` charges it: its epsilon at delta, its delta and rho, its loss."""
    return book.charge(DS, epsilon_at_delta(loss, delta).epsilon, PROG, "g", delta,
                       loss.gauss_rho + loss.pure_rho, loss)


def admitted(book: Ledger, charge) -> int:
    """How many runs the ledger books before the first E0601 (which must come)."""
    count = 0
    while True:
        try:
            charge()
        except FuzzError as exc:
            assert exc.diagnostics[0].code == "E0601", exc
            return count
        count += 1
        assert count < 1000


@pytest.fixture
def book(tmp_path: Path):
    with Ledger(tmp_path / "l.sqlite") as ledger:
        yield ledger


# ---- schema 3 and the upgrade from schema 2 -------------------------------------------------

def _schema_2_ledger(path: Path) -> None:
    """A ledger as fuzzpy wrote it when charges recorded delta and rho, but no loss."""
    raw = sqlite3.connect(path)
    raw.executescript("""
        CREATE TABLE caps (dataset TEXT PRIMARY KEY, cap TEXT NOT NULL, label TEXT, set_at TEXT NOT NULL);
        CREATE TABLE charges (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, label TEXT NOT NULL,
            program_hash TEXT NOT NULL, epsilon TEXT NOT NULL, status TEXT NOT NULL, started_at TEXT NOT NULL,
            finished_at TEXT, delta TEXT, rho TEXT);
        CREATE INDEX charges_by_dataset ON charges (dataset);
        INSERT INTO caps VALUES ('%(ds)s', '5', 'old', '2026-01-01');
        INSERT INTO charges (dataset, label, program_hash, epsilon, status, started_at)
            VALUES ('%(ds)s', 'pure', 'h', '1', 'released', '2026-01-01');
        INSERT INTO charges (dataset, label, program_hash, epsilon, status, started_at, delta, rho)
            VALUES ('%(ds)s', 'gauss', 'h', '3/2', 'released', '2026-01-01', '1/1000000', '1/8');
        PRAGMA user_version=2;
    """ % {"ds": DS})
    raw.close()


def test_a_schema_2_ledger_is_read_as_booked_and_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _schema_2_ledger(path)
    with Ledger(path, readonly=True) as old:  # read as it is: never changed
        assert old.cap_of(DS) == EpsilonCap(F(5), F(0))
        use = old.usage(DS)  # a delta was booked: no pure epsilon bound
        assert (use.spent, use.remaining, use.epsilon_sum, use.delta_sum) == (math.inf, 0, F(5, 2), DELTA)
        assert use.rho == F(1, 2) + F(1, 8)  # the pure 1 is 1/2-zCDP; the booked run its recorded rho
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (2,)
    raw.close()

    with Ledger(path) as book:
        assert [e.loss for e in book.entries()] == [None, None]
        with pytest.raises(FuzzError) as exc:  # the old cap became a pure epsilon cap
            book.charge(DS, F(1, 10), PROG)
        assert code_of(exc) == "E0601" and "pure epsilon cap" in str(exc.value)
        book.set_cap(DS, RhoCap(F(1)))
        assert book.spent(DS) == F(5, 8)
        book.set_cap(DS, EpsilonCap(F(5), F(1, 10**5)))
        # the booked run: 3/2 at 1e-6, as booked; the pure 1 converted once at the 9e-6 left
        assert book.spent(DS) == F(3, 2) + spent([ProvenLoss(1, F(1, 2), 0, None, ((F(1), 1),))],
                                                 EpsilonCap(F(5), F(9, 10**6)))
        gauss_charge(book, GAUSS_SMALL)
        last = book.entries()[-1]
        assert last.loss == GAUSS_SMALL and last.delta == DELTA
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert [r[1] for r in raw.execute("PRAGMA table_info(caps)")][-3:] == ["notion", "delta", "origin"]
    stored = raw.execute("SELECT loss FROM charges ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert json.loads(stored) == GAUSS_SMALL.to_dict()  # the exact JSON of to_dict
    raw.close()


def test_a_corrupted_loss_is_an_error_not_a_zero(book: Ledger) -> None:
    gauss_charge(book, GAUSS_HALF)
    raw = sqlite3.connect(book.path)
    raw.execute("UPDATE charges SET loss = '{\"epsilon\": \"-\"}'")
    raw.commit()
    raw.close()
    book.set_cap(DS, RhoCap(F(5)))
    with pytest.raises(FuzzError) as exc:
        book.charge(DS, F(0), PROG, loss=ProvenLoss())
    assert code_of(exc) == "E0602" and "corrupted" in str(exc.value)


def test_bad_caps_and_losses_are_refused(book: Ledger) -> None:
    for bad in (EpsilonCap(F(1), F(1)), EpsilonCap(0.5, F(0)), RhoCap(F(-1)), 1.0):
        with pytest.raises(FuzzError) as exc:
            book.set_cap(DS, bad)
        assert code_of(exc) == "E0605"
    with pytest.raises(FuzzError) as exc:
        book.charge(DS, F(1), PROG, loss={"epsilon": "1"})
    assert code_of(exc) == "E0605"
    assert book.datasets() == []


# ---- pure caps: exactly as before --------------------------------------------------------------

def test_pure_runs_with_their_loss_sum_exactly_to_a_pure_cap(book: Ledger) -> None:
    book.set_cap(DS, F(1))
    third = ProvenLoss.laplace_releases(F(1, 3))
    for _ in range(3):
        book.charge(DS, F(1, 3), PROG, loss=third)
    assert book.spent(DS) == 1 and book.remaining(DS) == 0
    with pytest.raises(FuzzError) as exc:
        book.charge(DS, F(0) + F(1, 10**9), PROG, loss=ProvenLoss.laplace_releases(F(1, 10**9)))
    assert code_of(exc) == "E0601" and "a cap in pure epsilon" in str(exc.value)
    book.charge(DS, F(0), PROG, loss=ProvenLoss())  # a run that spends nothing still fits


def test_a_pure_cap_refuses_a_gaussian_run_and_says_why(book: Ledger) -> None:
    book.set_cap(DS, F(100))
    with pytest.raises(FuzzError) as exc:
        gauss_charge(book, GAUSS_SMALL)
    text = str(exc.value)
    # rule Notion: refused for its notion (E0606) before any amount is compared
    assert code_of(exc) == "E0606" and "pure epsilon cap" in text and "--rho" in text
    assert "Gaussian releases" in text and "nothing was charged" in text
    assert book.entries() == []


# ---- rho caps -----------------------------------------------------------------------------------

def test_a_rho_cap_admits_exactly_the_runs_that_fit(book: Ledger) -> None:
    book.set_cap(DS, RhoCap(F(2)))
    assert admitted(book, lambda: gauss_charge(book, GAUSS_HALF)) == 4  # 4 * 1/2 = 2
    assert book.spent(DS) == 2 and book.remaining(DS) == 0
    with pytest.raises(FuzzError) as exc:
        gauss_charge(book, GAUSS_HALF)
    assert str(exc.value).startswith(f"E0601: this run needs rho 0.5 but only 0.0 of the cap 2.0 remains for "
                                     f"dataset {short_id(DS)}… (a cap in zCDP rho)")


def test_mixed_pure_and_gaussian_runs_under_a_rho_cap(book: Ledger) -> None:
    book.set_cap(DS, RhoCap(F(1)))
    book.charge(DS, F(1), PROG, loss=ProvenLoss.laplace_releases(F(1)))  # eps 1: rho 1/2
    book.charge(DS, F(1, 2), PROG)  # a pure run booked without a loss: also rho 1/8
    assert book.spent(DS) == F(5, 8)
    with pytest.raises(FuzzError):
        gauss_charge(book, GAUSS_HALF)  # 5/8 + 1/2 > 1
    gauss_charge(book, ProvenLoss.gaussian_releases(1, 2))  # rho 1/8: 3/4
    assert book.spent(DS) == F(3, 4)
    assert book.usage(DS).epsilon_sum > 1  # what basic composition in epsilon would say


# ---- epsilon caps at a delta: composed in zCDP (and better), converted once --------------------

def test_an_epsilon_cap_at_a_delta_admits_more_gaussian_runs_than_basic_composition(book: Ledger) -> None:
    cap = EpsilonCap(F(2), DELTA)
    book.set_cap(DS, cap)
    n = admitted(book, lambda: gauss_charge(book, GAUSS_SMALL))
    # the accountant's own figure: n runs fit, n + 1 do not
    assert fits([GAUSS_SMALL] * n, cap) and not fits([GAUSS_SMALL] * (n + 1), cap)
    assert n == 20 and book.spent(DS) == spent([GAUSS_SMALL] * n, cap) <= 2
    # never below the truth: the zCDP bound rho + 2 sqrt(rho ln(1/delta)) is looser (it is an
    # upper bound too), so what the ledger counts is at most it
    rho = float(n * GAUSS_SMALL.gauss_rho)
    assert float(book.spent(DS)) <= rho + 2 * math.sqrt(rho * math.log(1 / float(DELTA)))
    # Basic composition: each run stated alone, e.g. at delta 1e-7 (so 10 runs use the delta),
    # costs epsilon 0.4474 (certified), and 2 / 0.4474 admits only 4 runs.
    alone = epsilon_at_delta(GAUSS_SMALL, DELTA / 10).epsilon
    assert int(F(2) / alone) == 4 < n


def test_pure_runs_under_a_cap_at_a_delta_compose_optimally(book: Ledger) -> None:
    book.set_cap(DS, EpsilonCap(F(2), DELTA))
    n = admitted(book, lambda: book.charge(DS, F(1, 10), PROG, loss=ProvenLoss(F(1, 10), F(1, 200), 0)))
    assert n == 24 > 20  # 20 is what a pure cap of 2 admits (sum of epsilons)


def test_a_mixed_history_is_composed_before_it_is_converted(book: Ledger) -> None:
    cap = EpsilonCap(F(7), DELTA)
    book.set_cap(DS, cap)
    pure = ProvenLoss.laplace_releases(F(1, 2))
    book.charge(DS, F(1, 2), PROG, loss=pure)
    gauss_charge(book, GAUSS_HALF)
    book.charge(DS, F(1, 2), PROG, loss=pure)
    history = [pure, GAUSS_HALF, pure]  # 5.734 at 1e-6; separately 0.5 + 4.934 + 0.5
    assert book.spent(DS) == spent(history, cap) == epsilon_at_delta(compose(history), DELTA).epsilon
    # converting each charge at the cap's delta and adding would spend the delta three times
    separately = sum(epsilon_at_delta(x, DELTA).epsilon for x in history)
    assert book.spent(DS) < separately


def test_a_refusal_at_a_delta_names_the_cap_and_what_composing_spends(book: Ledger) -> None:
    book.set_cap(DS, EpsilonCap(F(6), DELTA))
    gauss_charge(book, GAUSS_HALF)  # 4.934 at 1e-6; two compose to 7.766
    with pytest.raises(FuzzError) as exc:
        gauss_charge(book, GAUSS_HALF)
    text = str(exc.value)
    assert code_of(exc) == "E0601" and "(a cap in epsilon at delta 0.000001: the runs so far and this one, " \
        "composed, spend epsilon" in text


# ---- concurrency: two processes, one rho cap ---------------------------------------------------

def _race(path: str, barrier, results) -> None:
    try:
        book = Ledger(Path(path))
        barrier.wait(60)
        loss = ProvenLoss(gauss_rho=F(3, 10), laplace=())  # three such runs fit a cap of 1
        for _ in range(3):
            try:
                results.put(("ok", book.charge(DS, F(1), PROG, delta=DELTA, rho=F(3, 10), loss=loss)))
            except FuzzError as exc:
                results.put((exc.diagnostics[0].code, str(exc)))
        book.close()
    except BaseException as exc:  # report, so the parent fails with a reason, not a hang
        results.put(("crash", repr(exc)))


def test_concurrent_processes_never_overspend_a_rho_cap(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as book:
        book.set_cap(DS, RhoCap(F(1)))
    barrier, results = _CTX.Barrier(2), _CTX.Queue()
    procs = [_CTX.Process(target=_race, args=(str(path), barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in range(6)]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert sorted(o[0] for o in outcomes) == ["E0601"] * 3 + ["ok"] * 3, outcomes
    with Ledger(path) as book:
        assert book.spent(DS) == F(9, 10) and len(book.entries(DS)) == 3


# ---- the command line ---------------------------------------------------------------------------

def ledger_cli(*args: object):
    return CliRunner().invoke(app, ["ledger", *[str(a) for a in args]])


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "adult.csv"
    path.write_bytes(b"age,income\n30,100\n41,200\n")
    return path


def test_cli_set_cap_in_rho_and_at_a_delta_and_show(tmp_path: Path, data_file: Path) -> None:
    led = tmp_path / "l.sqlite"
    ident = dataset_identity(data_file)
    res = ledger_cli("set-cap", "--data", data_file, "--rho", "0.5", "--ledger", led)
    assert res.exit_code == 0, res.output
    assert f"cap of adult.csv ({short_id(ident)}) set to 0.5 (zCDP rho): spent 0.0, remaining 0.5" in res.stdout
    with Ledger(led) as book:
        assert book.cap_of(ident) == RhoCap(F(1, 2))
        book.charge(ident, F(3), PROG, "g", DELTA, F(1, 8), ProvenLoss(gauss_rho=F(1, 8), laplace=()))
    out = json.loads(ledger_cli("show", "--ledger", led, "--format", "json").stdout)
    [entry] = out["datasets"]
    assert entry["names"] == ["adult.csv"] and entry["default_cap"] is False
    assert (entry["cap"], entry["notion"], entry["cap_delta"], entry["spent"], entry["remaining"],
            entry["epsilon_sum"], entry["delta_sum"], entry["rho"]) == \
        ("0.5", "rho", None, "0.125", "0.375", "3.0", "0.000001", "0.125")
    assert entry["runs"][0]["loss"] == ProvenLoss(gauss_rho=F(1, 8), laplace=()).to_dict()
    assert (entry["runs"][0]["delta"], entry["runs"][0]["rho"]) == ("0.000001", "0.125")

    res = ledger_cli("set-cap", "--data", data_file, "--cap", "2", "--delta", "1e-6", "--ledger", led)
    assert res.exit_code == 0, res.output
    assert "set to 2.0 (epsilon at delta 0.000001): spent " in res.stdout
    text = ledger_cli("show", "--ledger", led).stdout
    summary = next(line for line in text.splitlines() if line.startswith("adult.csv "))
    cells = summary.split()
    assert cells[1:5] == ["epsilon", "at", "delta", "0.000001"] and cells[5] == "2.0"
    assert cells[8:] == ["0.000001", "0.125", short_id(ident)]
    with Ledger(led) as book:
        assert F(cells[6]) == book.spent(ident) == spent([ProvenLoss(gauss_rho=F(1, 8), laplace=())],
                                                         EpsilonCap(F(2), DELTA))
    js = json.loads(ledger_cli("show", "--ledger", led, "--format", "json").stdout)["datasets"][0]
    assert (js["notion"], js["cap_delta"]) == ("epsilon", "0.000001")


@pytest.mark.parametrize("args", [
    ["--cap", "1", "--rho", "1"], [], ["--rho", "1", "--delta", "1e-6"], ["--cap", "1", "--delta", "1"],
    ["--cap", "1", "--delta", "-1e-6"], ["--rho", "-1"], ["--cap", "1", "--delta", "nan"],
])
def test_cli_set_cap_refuses_bad_notions(tmp_path: Path, args: list[str]) -> None:
    led = tmp_path / "l.sqlite"
    Ledger(led).close()
    res = ledger_cli("set-cap", "--dataset", DS, *args, "--ledger", led)
    assert res.exit_code == 2 and res.stderr.startswith("error[E0605]: "), res.output
    assert "Traceback" not in res.output
    with Ledger(led) as book:
        assert book.datasets() == []


# ---- fuzzpy run: the run's loss reaches the ledger ---------------------------------------------

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data" / "adult_sample.csv"
GAUSS = """schema Adult {
  age : num[17, 90], workclass : string, education_num : int[1, 16], sex : cat{"Male", "Female"},
  hours_per_week : num[1, 99], income : cat{"<=50K", ">50K"}
}
function main (db : bag Adult) : fuzzy num { gaussian 0.5 (count db) }"""


def test_fuzzpy_run_charges_its_loss_against_a_rho_cap(tmp_path: Path) -> None:
    led, prog = tmp_path / "l.sqlite", tmp_path / "g.fz"
    prog.write_text(GAUSS)
    assert ledger_cli("set-cap", "--data", SAMPLE, "--rho", "1", "--ledger", led).exit_code == 0

    def run():
        return CliRunner().invoke(app, ["run", str(prog), "--data", str(SAMPLE), "--delta", "1e-5",
                                        "--budget", "10", "--ledger", str(led), "--format", "json"])

    first = run()
    assert first.exit_code == 0, first.output
    spending = json.loads(first.stdout)["spending"][0]
    assert (spending["spent"], spending["cap"], spending["notion"], spending["cap_delta"]) == \
        ("0.5", "1", "rho", None)
    assert run().exit_code == 0
    third = run()
    assert third.exit_code != 0 and "E0601" in third.stderr and "zCDP rho" in third.stderr
    with Ledger(led) as book:
        losses = [e.loss for e in book.entries()]
    assert len(losses) == 2 and all(x.gauss_rho == F(1, 2) and not x.is_pure() for x in losses)
