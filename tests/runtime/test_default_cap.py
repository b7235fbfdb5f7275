"""The default cap (docs/ledger.md, "The default cap"): spending on a dataset never grows without a cap,
and is always shown in one unit per dataset.  A local run that charges a dataset without a cap gives
it one, epsilon 10, in the notion of its history with that run (pure epsilon, or epsilon at the
largest delta stated), in the transaction that books the charge; it stays the dataset's unit until
someone sets a cap on purpose.  The ledger also records the files each dataset was shown as, and
`ledger show` names datasets by them."""

from __future__ import annotations

import json
import sqlite3
from fractions import Fraction as F

import pytest
from check_and_run import HEADER, ROW_A, ROW_B, T
from cli_runs import fz, prog, write

from fuzzpy.accounting import EpsilonCap
from fuzzpy.ledger import Ledger, dataset_identity, program_hash
from fuzzpy.ledger.caps import DEFAULT_CAP

PURE = "function main (db : bag T) : fuzzy num { laplace 4 (count db) }"
GAUSS = "function main (db : bag T) : fuzzy num { gaussian 0.125 (count db) }"


@pytest.fixture(autouse=True)
def _never_the_default_ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "env-ledger.sqlite"))


def _run(tmp_path, body: str, data, *extra: str):
    return fz("run", prog(tmp_path, body, name=f"p{abs(hash(body)) % 1000}.fz"), "--data", data, "--budget", "10",
              "--ledger", tmp_path / "l.sqlite", *extra)


def _book(tmp_path) -> Ledger:
    return Ledger(tmp_path / "l.sqlite", create=False, readonly=True)


def test_a_first_pure_run_sets_a_pure_default_cap_and_runs_stop_at_it(tmp_path):
    data = write(tmp_path / "db.csv", HEADER + ROW_A)
    for spent in (4, 8):
        res = _run(tmp_path, PURE, data)
        assert res.exit_code == 0, res.output
        assert f"has spent pure epsilon {spent} in total, of its default cap 10 ({10 - spent} left" in res.stdout
    res = _run(tmp_path, PURE, data)
    assert res.exit_code == 4 and "E0601" in res.stderr and "default cap" in res.stderr, res.output
    with _book(tmp_path) as book:
        use = book.usage(dataset_identity(data))
        assert (use.cap, use.spent, use.default) == (EpsilonCap(DEFAULT_CAP, F(0)), 8, True)
    fz("ledger", "set-cap", "--data", data, "--cap", "20", "--ledger", tmp_path / "l.sqlite")  # raised on purpose
    res = _run(tmp_path, PURE, data)
    assert res.exit_code == 0 and "has spent pure epsilon 12 in total, of its cap 20 (8 left)" in res.stdout


def test_a_first_gaussian_run_sets_the_default_cap_at_its_delta(tmp_path):
    data = write(tmp_path / "db.csv", HEADER + ROW_A)
    res = _run(tmp_path, GAUSS, data, "--delta", "1e-5")
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("ledger:"))
    assert "at delta 1e-05 in total, of its default cap 10" in line  # the Gaussian run's line says its delta
    with _book(tmp_path) as book:
        assert book.cap_of(dataset_identity(data)) == EpsilonCap(DEFAULT_CAP, F(1, 10**5))
    res = _run(tmp_path, PURE, data)  # a pure run fits a cap at a delta, and is stated in its unit
    assert res.exit_code == 0 and "at delta 1e-05 in total, of its default cap 10" in res.stdout, res.output


def test_the_unit_never_changes_silently(tmp_path):
    """Pure first, then Gaussian: the Gaussian run is refused under the pure default cap (nothing is
    charged, and the note says how to choose a notion on purpose), so the pure total stays as shown."""
    data = write(tmp_path / "db.csv", HEADER + ROW_A)
    assert _run(tmp_path, PURE, data).exit_code == 0
    res = _run(tmp_path, GAUSS, data, "--delta", "1e-5")
    assert res.exit_code == 4 and "E0606" in res.stderr and "default cap" in res.stderr, res.output
    assert "fuzzpy ledger set-cap" in res.stderr
    with _book(tmp_path) as book:
        assert len(book.entries()) == 1 and book.usage(dataset_identity(data)).spent == 4
    fz("ledger", "set-cap", "--data", data, "--cap", "10", "--delta", "1e-5", "--ledger", tmp_path / "l.sqlite")
    assert _run(tmp_path, GAUSS, data, "--delta", "1e-5").exit_code == 0


def test_a_gaussian_run_under_a_rho_cap_states_its_delta(tmp_path):
    data = write(tmp_path / "db.csv", HEADER + ROW_A)
    fz("ledger", "set-cap", "--data", data, "--rho", "1", "--ledger", tmp_path / "l.sqlite")
    res = _run(tmp_path, GAUSS, data, "--delta", "1e-5")
    line = next(x for x in res.stdout.splitlines() if x.startswith("ledger:"))
    assert "has spent rho 0.125 (zCDP) in total, of its cap 1 (0.875 left)" in line
    assert "this run: rho 0.125, epsilon" in line and "at delta 1e-05" in line


def test_an_uncapped_history_gets_a_default_cap_in_its_own_notion(tmp_path):
    """A dataset charged before default caps (here through the library, which sets none) gets one at
    its next run: at the largest delta of the history when a run was stated at a delta."""
    data = write(tmp_path / "db.csv", HEADER + ROW_A)
    ident = dataset_identity(data)
    with Ledger(tmp_path / "l.sqlite") as book:
        book.charge(ident, F(1), program_hash("old"), "old", F(1, 10**6), F(1, 8))
        assert book.cap_of(ident) is None  # the library books without a default cap
    assert _run(tmp_path, PURE, data).exit_code == 0
    with _book(tmp_path) as book:
        assert book.cap_of(ident) == EpsilonCap(DEFAULT_CAP, F(1, 10**6)) and book.usage(ident).default


def test_a_refused_run_leaves_no_default_cap(tmp_path):
    data = write(tmp_path / "db.csv", HEADER + ROW_A)
    ident = dataset_identity(data)
    with Ledger(tmp_path / "l.sqlite") as book:
        book.charge(ident, F(9), program_hash("old"), "old")
    res = _run(tmp_path, PURE, data)  # 9 + 4 > 10: refused, and the cap is not stored either
    assert res.exit_code == 4 and "E0601" in res.stderr
    with _book(tmp_path) as book:
        assert book.cap_of(ident) is None and len(book.entries()) == 1


def test_ledger_show_names_datasets_by_the_files_runs_printed(tmp_path):
    first = write(tmp_path / "survey.csv", HEADER + ROW_A + ROW_B)
    (tmp_path / "copies").mkdir()
    copy = write(tmp_path / "copies" / "renamed.csv", first.read_text())
    other = write(tmp_path / "other.csv", HEADER + ROW_B)
    for data in (first, copy, other):
        assert _run(tmp_path, PURE, data).exit_code == 0
    ident = dataset_identity(first)
    with _book(tmp_path) as book:
        assert book.names_of(ident) == [str(first), str(copy)] and book.names_of(dataset_identity(other)) == [
            str(other)]
    text = fz("ledger", "show", "--ledger", tmp_path / "l.sqlite").stdout
    rows = text.splitlines()
    assert rows[2].split()[0] == "dataset" and rows[3].startswith(f"{first}, {copy} ")
    assert rows[3].rstrip().endswith(ident[:19]) and "10.0 (default)" in rows[3]
    assert f"runs on {first}, {copy} ({ident[:19]})" in text
    assert "runs' deltas: the sum of the deltas" in text and "rho: the zCDP rho" in text
    js = json.loads(fz("ledger", "show", "--ledger", tmp_path / "l.sqlite", "--format", "json").stdout)
    assert js["datasets"][0]["names"] == [str(first), str(copy)] and js["datasets"][0]["default_cap"] is True


def test_names_are_paths_never_data(tmp_path):
    """What the ledger records of a dataset: its hash and the paths runs printed, not a cell."""
    data = write(tmp_path / "db.csv", HEADER + "4,a,true,2\n" + "5,b,false,1\n")
    assert _run(tmp_path, PURE, data).exit_code == 0
    with sqlite3.connect(tmp_path / "l.sqlite") as db:
        stored = db.execute("SELECT * FROM dataset_names").fetchall()
    assert [row[1] for row in stored] == [str(data)] and len(stored) == 1


def test_the_python_api_sets_the_default_cap_too(tmp_path):
    import pandas as pd

    import fuzzpy

    frame = pd.DataFrame({"x": [1.0], "k": ["a"], "flag": [True], "n": [1]})
    result = fuzzpy.run(T + PURE, frame, budget=10, ledger=tmp_path / "api.sqlite")
    assert [(s.spent, s.cap, s.notion, s.default_cap) for s in result.spending] == [(4, 10, "pure epsilon", True)]


def test_library_charges_and_the_service_set_no_default_cap(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as book:
        book.charge_many({"dataset:adult": F(20)}, program_hash("p"), "served")
        assert book.cap_of("dataset:adult") is None and book.usage("dataset:adult").spent == 20


def test_a_schema_4_ledger_is_read_as_it_is_and_upgraded_to_5(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path) as book:
        book.set_cap("sha256:" + "a" * 64, F(2), "survey.csv")
    raw = sqlite3.connect(path)
    raw.executescript("ALTER TABLE caps DROP COLUMN origin; DROP TABLE dataset_names; PRAGMA user_version=4;")
    raw.close()
    with Ledger(path, create=False, readonly=True) as old:
        assert old.names_of("sha256:" + "a" * 64) == [] and not old.usage("sha256:" + "a" * 64).default
    shown = fz("ledger", "show", "--ledger", path).stdout
    assert "survey.csv" in shown and "(default)" not in shown
    with Ledger(path) as book:  # opened for writing: upgraded, the old cap counts as set on purpose
        use = book.usage("sha256:" + "a" * 64)
        assert use.cap == EpsilonCap(F(2), F(0)) and not use.default
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (5,)
        assert raw.execute("SELECT origin FROM caps").fetchall() == [("set",)]


def test_a_gaussian_charge_at_no_delta_gets_a_rho_default_cap(tmp_path):
    """`fuzzpy run` always states a Gaussian run at a delta (the ledger books (epsilon, delta));
    a library caller that books one in zCDP alone (delta 0, a rho) with the default cap gets it
    in rho (DEFAULT_RHO_CAP), and a later pure run is counted in rho too."""
    from fuzzpy.accounting import ProvenLoss, RhoCap
    from fuzzpy.ledger.caps import DEFAULT_RHO_CAP, default_cap

    with Ledger(tmp_path / "l.sqlite") as book:
        book.charge_many({"dataset:d": F(0)}, program_hash("g"), "g", F(0), F(1, 8),
                         ProvenLoss(gauss_rho=F(1, 8), laplace=()), default_cap=default_cap)
        use = book.usage("dataset:d")
        assert (use.cap, use.spent, use.default) == (RhoCap(DEFAULT_RHO_CAP), F(1, 8), True)
        book.charge_many({"dataset:d": F(1, 2)}, program_hash("p"), "p", default_cap=default_cap)
        assert book.usage("dataset:d").spent == F(1, 8) + F(1, 8)  # epsilon 1/2 pure: rho 1/8
