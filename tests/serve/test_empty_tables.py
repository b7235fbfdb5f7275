"""Empty tables on the curator service (docs/data.md, "Empty tables"): the analyst is not the data's
holder, so nothing the service tells an analyst may depend on whether a table is empty.  The curator is
told instead, when registering (a dataset whose every row the published schema drops is refused), and a
program whose categories share no value with the published schema's is refused from the two schemas
alone, before anything is read or charged."""

from __future__ import annotations

from fractions import Fraction

import pytest

from fuzzpy.diagnostics import FuzzError
from fuzzpy.serve.registry import add_analyst, register_dataset
from fuzzpy.serve.service import ProgramRequest, Service
from fuzzpy.serve.store import SqliteStore

PUBLISHED = 'schema S { age : num[0, 100], income : cat{"<=50K.", ">50K."} }'
ROWS = "age,income\n30,<=50K.\n40,>50K.\n50,<=50K.\n"


def _program(income: str) -> str:
    return (f"schema S {{ age : num[0, 100], income : cat{{{income}}} }}\n"
            "function main (db : bag S) : fuzzy num { laplace 1 (count db) }\n")


def _service(folder, rows: str = ROWS):
    folder.mkdir(exist_ok=True)
    store = SqliteStore(folder / "l.sqlite")
    (folder / "s.fz").write_text(PUBLISHED)
    (folder / "d.csv").write_text(rows)
    register_dataset(store, "d", folder / "d.csv", folder / "s.fz", Fraction(10))
    add_analyst(store, "ann", caps={"d": Fraction(10)})
    return Service(store), store


def test_the_curator_cannot_register_a_dataset_whose_every_row_is_dropped(tmp_path):
    store = SqliteStore(tmp_path / "l.sqlite")
    (tmp_path / "s.fz").write_text('schema S { age : num[0, 100], income : cat{"<=50K", ">50K"} }')
    (tmp_path / "d.csv").write_text(ROWS)
    with pytest.raises(FuzzError) as err:
        register_dataset(store, "d", tmp_path / "d.csv", tmp_path / "s.fz", Fraction(1))
    diag = err.value.diagnostics[0]
    assert diag.code == "E1017" and "would be empty" in diag.message and "fuzzpy data check" in diag.notes[0]
    assert store.dataset("d") is None


def test_a_program_whose_categories_miss_the_published_ones_is_refused_before_anything_is_read(tmp_path):
    service, store = _service(tmp_path)
    (tmp_path / "d.csv").unlink()  # nothing is read: the refusal comes from the schemas alone
    out = service.run(store.analysts()[0], ProgramRequest(_program('"<=50K", ">50K"'), datasets=["d"], budget="1"))
    assert out["exit_code"] == 4 and "E1011" in out["stderr"] and "shares no value" in out["stderr"], out
    assert store.entries("dataset:d") == []


def test_the_static_refusal_is_the_same_whatever_the_rows(tmp_path):
    services = [_service(tmp_path / "a"), _service(tmp_path / "b", "age,income\n99,>50K.\n")]
    request = ProgramRequest(_program('"<=50K"'), datasets=["d"], budget="1")
    shown = [service.run(store.analysts()[0], request)["stderr"] for service, store in services]
    assert shown[0] == shown[1] and "E1011" in shown[0]


def test_a_served_run_never_refuses_on_the_data(tmp_path):
    """A program whose categories overlap the published ones but match no row: its table is empty, and
    the analyst gets noise, charged, exactly as for a table with rows (a refusal would tell them it is
    empty, which only the curator may know)."""
    service, store = _service(tmp_path, "age,income\n30,<=50K.\n40,<=50K.\n")
    outcomes = [service.run(store.analysts()[0], ProgramRequest(_program(cats), datasets=["d"], budget="1"))
                for cats in ('">50K."', '"<=50K."')]  # an empty table, then a full one
    assert [o["exit_code"] for o in outcomes] == [0, 0], outcomes
    assert all("E0509" not in o["stderr"] for o in outcomes)
    assert len(store.entries("dataset:d")) == 2
