"""A ledger keeps each dataset's charges composed as they come and reads only newer ones: the cap
check must still see every charge, made through this connection or any other, and cost one
composition step per charge rather than one per earlier charge."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from fuzzpy.accounting import EpsilonCap, ProvenLoss
from fuzzpy.diagnostics import FuzzError
from fuzzpy.ledger import Ledger

DS = "sha256:" + "cd" * 32
TENTH = ProvenLoss.laplace_releases(F(1, 10))


def test_charges_through_another_connection_count_against_the_cap(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as one, Ledger(path) as two:
        one.set_cap(DS, EpsilonCap(F(1), F(0)))
        for i in range(10):  # alternately: each sees the other's charges
            (one if i % 2 else two).charge(DS, F(1, 10), "p", loss=TENTH)
        for book in (one, two):
            assert book.usage(DS).spent == 1
            with pytest.raises(FuzzError) as refused:
                book.charge(DS, F(1, 10), "p", loss=TENTH)
            assert refused.value.diagnostics[0].code == "E0601"
    with Ledger(path) as fresh:  # read from scratch: the same total
        assert fresh.usage(DS).spent == 1 and len(fresh.entries(DS)) == 10


def test_a_refused_charge_leaves_the_kept_history_as_it_was(tmp_path):
    with Ledger(tmp_path / "ledger.sqlite") as book:
        book.set_cap(DS, EpsilonCap(F(3, 10), F(0)))
        book.charge(DS, F(1, 10), "p", loss=TENTH)
        with pytest.raises(FuzzError):
            book.charge(DS, F(1), "p", loss=ProvenLoss.laplace_releases(F(1)))
        assert book.usage(DS).spent == F(1, 10)
        book.charge(DS, F(1, 10), "p", loss=TENTH)
        book.charge(DS, F(1, 10), "p", loss=TENTH)
        assert book.usage(DS).spent == F(3, 10)


def test_each_charge_reads_only_the_charges_it_has_not_composed(tmp_path, monkeypatch):
    import fuzzpy.ledger.sqlite as L

    with Ledger(tmp_path / "ledger.sqlite") as book:
        book.set_cap(DS, EpsilonCap(F(100), F(1, 10**6)))
        for _ in range(30):
            book.charge(DS, F(1, 10), "p", loss=TENTH)
        read = []
        real = L.Ledger._stored_loss
        monkeypatch.setattr(L.Ledger, "_stored_loss", lambda self, text: read.append(1) or real(self, text))
        book.charge(DS, F(1, 10), "p", loss=TENTH)
        assert len(read) <= 1  # the one charge made since the history was last composed, at most
