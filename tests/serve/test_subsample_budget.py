"""Runs with releases on Poisson samples (rule Poisson subsampling) on the one charge path: the
ledger records their amplified loss whole (its list of releases on samples), composes later runs
with it, and a cap at a delta refuses, before any data is read and charging nothing, the run
that would pass it, through the Python API and the command line alike."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

import fuzzpy
from fuzzpy.accounting import EpsilonCap, epsilon_at_delta
from fuzzpy.ledger import Ledger, dataset_identity
from fuzzpy.pipeline.local import frame_identity

from .helpers import ADULT_CSV, fuzzpy_cli

# three Laplace releases of epsilon 1, each on a fresh sample at rate 1/50: 3 without a delta,
# far less at one
PROGRAM = """schema Adult { age : num[17, 90] }
function one (s : bag Adult) : fuzzy num { laplace 1 (count s) }
function main (db : bag Adult) : fuzzy (num, num, num) {
  sample a = subsample 0.02 one db;
  sample b = subsample 0.02 one db;
  sample c = subsample 0.02 one db;
  return (a, b, c)
}
"""
DELTA = Fraction(1, 10**5)


def _entries(ledger: Path) -> list:
    with Ledger(ledger) as book:
        return book.entries()


def test_the_ledger_records_and_composes_the_amplified_loss(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    frame = pd.read_csv(ADULT_CSV)
    first = fuzzpy.run(PROGRAM, frame, budget=1, delta=DELTA, ledger=ledger)
    assert first.epsilon < Fraction(1, 2)  # amplified: 3 unamplified
    (entry,) = _entries(ledger)
    assert entry.loss.subsampled == (("laplace", Fraction(1, 50), Fraction(1), 3),)
    fuzzpy.run(PROGRAM, frame, budget=1, delta=DELTA, ledger=ledger)
    both = entry.loss + _entries(ledger)[1].loss
    composed = epsilon_at_delta(both, DELTA).epsilon
    assert first.epsilon < composed < 2 * first.epsilon  # six releases on samples, composed by their PLDs


def test_a_cap_at_a_delta_refuses_the_run_that_would_pass_it_through_the_api_and_the_cli(tmp_path):
    frame = pd.read_csv(ADULT_CSV)
    alone = fuzzpy.run(PROGRAM, frame, budget=1, delta=DELTA, seed=1).epsilon  # seeded: nothing charged
    cap = EpsilonCap(Fraction(alone) * Fraction(3, 2), DELTA)  # room for one run, not two
    api_ledger, cli_ledger = tmp_path / "api.sqlite", tmp_path / "cli.sqlite"
    with Ledger(api_ledger) as book:
        book.set_cap(frame_identity(frame), cap)
    with Ledger(cli_ledger) as book:
        book.set_cap(dataset_identity(ADULT_CSV), cap)
    program = tmp_path / "sampled.fz"
    program.write_text(PROGRAM)
    fuzzpy.run(PROGRAM, frame, budget=1, delta=DELTA, ledger=api_ledger)
    with pytest.raises(fuzzpy.FuzzpyError) as refused:
        fuzzpy.run(PROGRAM, frame, budget=1, delta=DELTA, ledger=api_ledger)
    assert refused.value.codes == ["E0601"]
    args = ("run", str(program), "--data", str(ADULT_CSV), "--budget", "1", "--delta", "0.00001",
            "--ledger", str(cli_ledger))
    assert fuzzpy_cli(*args).returncode == 0
    res = fuzzpy_cli(*args)
    assert res.returncode != 0 and "E0601" in res.stderr and "released" not in res.stdout
    assert "Traceback" not in res.stderr
    assert len(_entries(api_ledger)) == 1 and len(_entries(cli_ledger)) == 1
