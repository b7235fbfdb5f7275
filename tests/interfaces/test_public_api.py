"""Public tables in the Python API and in `%%fuzzpy`: `fuzzpy.run(..., public={...})` joins with a
DataFrame that is verified against its public schema before the charge and never charged; a
missing, unknown or non-DataFrame public table is refused at the arguments stage, and one that
breaks its declared key is refused (E2303) with nothing charged and no value quoted."""

from __future__ import annotations

import pandas as pd
import pytest

import fuzzpy
from fuzzpy.ledger import Ledger

PROGRAM = """schema F { tail : string, delay : num[0, 10] }
public schema P { tail : string unique, seats : int[0, 500] }
function main (f : bag F) (p : bag P) : fuzzy num {
  laplace 1 (sum (map (fun r -> r.seats) (join_public "tail" "tail" f p)))
}
"""
FLIGHTS = pd.DataFrame({"tail": ["N1", "N1", "N2", "N9", None], "delay": [1, 2, 3, 4, 5]})
PLANES = pd.DataFrame({"tail": ["N1", "N2", "N3"], "seats": [100, 200, 300]})


def test_a_public_dataframe_is_joined_and_never_charged(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    result = fuzzpy.run(PROGRAM, {"f": FLIGHTS}, public={"p": PLANES}, budget=1000, ledger=ledger)
    assert len(result.releases) == 1
    assert len(result.spending) == 1, "one account: the private flights, not the public planes"
    assert len({e.dataset for e in Ledger(ledger).entries()}) == 1
    seeded = fuzzpy.run(PROGRAM, {"f": FLIGHTS}, public={"p": PLANES}, budget=1, seed=1)
    assert abs(seeded.releases[0].value - 400) < 3000  # N1 twice (100 each) and N2 once: 400, plus noise


@pytest.mark.parametrize("public, code", [(None, "E0506"), ({"p": PLANES, "x": PLANES}, "E0507"),
                                          ({"p": [1, 2]}, "E0502")])
def test_public_tables_given_wrongly_are_refused_before_anything_is_read(public, code, tmp_path):
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(PROGRAM, {"f": FLIGHTS}, public=public, budget=1, ledger=tmp_path / "l.sqlite")
    assert code in exc.value.codes


def test_a_public_dataframe_breaking_its_key_is_refused_and_nothing_is_charged(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    doubled = pd.concat([PLANES, pd.DataFrame({"tail": ["N2"], "seats": [201]})], ignore_index=True)
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(PROGRAM, {"f": FLIGHTS}, public={"p": doubled}, budget=1, ledger=ledger)
    assert "E2303" in exc.value.codes
    text = str(exc.value)
    assert "'tail'" in text and "N2" not in text and "201" not in text
    again = fuzzpy.run(PROGRAM, {"f": FLIGHTS}, public={"p": PLANES}, budget=1, ledger=ledger)
    assert [s.spent for s in again.spending] == [1], "the refused run charged nothing"


def test_the_notebook_cell_takes_public_tables():
    from fuzzpy.interfaces.notebook import fuzzpy_cell

    namespace = {"flights": FLIGHTS, "planes": PLANES}
    result = fuzzpy_cell("--data f=flights --public p=planes --budget 1 --seed 2", PROGRAM, namespace)
    assert len(result.releases) == 1
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy_cell("--data f=flights --public p=nowhere --budget 1 --seed 2", PROGRAM, namespace)
    assert "E0506" in exc.value.codes
