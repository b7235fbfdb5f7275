"""Public tables on the curator service: a table registered with `fuzzpy dataset add --public`
(its schema a `public schema`) is usable by every analyst as PARAMETER=NAME, joined through the
same run pipeline as a local run (loaded and verified before the charge), never charged and
without a cap.  A private dataset cannot be passed off as a public table, and a registered public
file that breaks its declared key is refused before anything is charged."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuzzpy.diagnostics import FuzzError
from fuzzpy.serve.registry import add_analyst, register_dataset
from fuzzpy.serve.service import ProgramRequest, RequestError, Service
from fuzzpy.serve.store import SqliteStore, analyst_key, dataset_key

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "data"
FLIGHT = "schema Flight { carrier : string, arr_delay : num[-60, 240] }"
AIRLINE = "public schema Airline { carrier : string unique, name : string }"
PROGRAM = (f"{FLIGHT}\n{AIRLINE}\nfunction main (flights : bag Flight) (airlines : bag Airline) : fuzzy num "
           '{ laplace 1 (count (join_public "carrier" "carrier" flights airlines)) }\n')


@pytest.fixture
def service(tmp_path):
    store = SqliteStore(tmp_path / "ledger.sqlite")
    (tmp_path / "flight.fz").write_text(FLIGHT + "\n")
    (tmp_path / "airline.fz").write_text(AIRLINE + "\n")
    register_dataset(store, "flights", DATA / "flights_sample.csv", tmp_path / "flight.fz", 10)
    register_dataset(store, "airlines", DATA / "airlines.csv", tmp_path / "airline.fz", None, public=True)
    add_analyst(store, "ann", token_hash="0" * 64, caps={"flights": 5})
    yield Service(store)
    store.close()


def ann(service):
    return next(a for a in service.store.analysts() if a.name == "ann")


def served(service, datasets, program=PROGRAM):
    return service.run(ann(service), ProgramRequest(program, "join.fz", datasets, {}, "main", "1", "json"))


def test_a_registered_public_table_joins_without_a_cap_or_a_grant_and_is_never_charged(service):
    out = served(service, ["flights=flights", "airlines=airlines"])
    assert out["exit_code"] == 0 and out["result"]["ok"], out
    assert len(service.store.entries(dataset_key("flights"))) == 1
    assert service.store.entries(dataset_key("airlines")) == []
    assert service.store.entries(analyst_key("ann", "airlines")) == []
    assert service.store.cap(dataset_key("airlines")) is None


def test_a_private_dataset_cannot_be_given_as_a_public_table(service, tmp_path):
    """Attack: name the private flights as the public table, so that join_public reads them uncharged."""
    with pytest.raises(RequestError) as refused:
        served(service, ["flights=flights", "airlines=flights"])
    assert refused.value.diagnostic.code == "E1004" and "public table" in str(refused.value)
    assert service.store.entries(dataset_key("flights")) == []


def test_a_public_table_that_breaks_the_programs_declared_key_is_refused_before_the_charge(service, tmp_path):
    """The curator registered airlines without declaring a key; the program declares the carrier
    unique, and the registered rows repeat one: the run is refused (E2303), nothing charged."""
    doubled = tmp_path / "doubled.csv"
    doubled.write_text((DATA / "airlines.csv").read_text() + "UA,United Air Lines Inc.\n")
    (tmp_path / "plain.fz").write_text("public schema Airline { carrier : string, name : string }\n")
    register_dataset(service.store, "airlines2", doubled, tmp_path / "plain.fz", None, public=True)
    out = served(service, ["flights=flights", "airlines=airlines2"])
    assert out["exit_code"] != 0 and "E2303" in str(out), out
    assert "United" not in str(out)
    assert service.store.entries(dataset_key("flights")) == []


def test_registration_verifies_the_declared_keys_and_needs_a_public_schema(tmp_path):
    store = SqliteStore(tmp_path / "ledger.sqlite")
    (tmp_path / "airline.fz").write_text(AIRLINE + "\n")
    (tmp_path / "flight.fz").write_text(FLIGHT + "\n")
    doubled = tmp_path / "doubled.csv"
    doubled.write_text((DATA / "airlines.csv").read_text() + "UA,United Air Lines Inc.\n")
    with pytest.raises(FuzzError) as exc:
        register_dataset(store, "a", doubled, tmp_path / "airline.fz", None, public=True)
    assert "E2303" in [d.code for d in exc.value.diagnostics]
    for schema, public, cap in ((tmp_path / "flight.fz", True, None), (tmp_path / "airline.fz", False, 1),
                                (tmp_path / "airline.fz", True, 1)):
        with pytest.raises(FuzzError) as exc:
            register_dataset(store, "b", DATA / "airlines.csv", schema, cap, public=public)
        assert [d.code for d in exc.value.diagnostics] == ["E1017"]
    store.close()


def test_fuzzpy_dataset_add_public(tmp_path):
    from fuzzpy.interfaces.cli import app

    (tmp_path / "airline.fz").write_text(AIRLINE + "\n")
    result = CliRunner().invoke(app, ["dataset", "add", "airlines", "--data", str(DATA / "airlines.csv"),
                                      "--schema", str(tmp_path / "airline.fz"), "--public",
                                      "--ledger", str(tmp_path / "l.sqlite")])
    assert result.exit_code == 0, result.output
    assert "dataset airlines registered" in result.output and "cap none" in result.output


def test_the_join_examples_run_through_the_service_as_they_do_locally(tmp_path):
    """delay_by_airline and seats_by_manufacturer with the flights schema inlined (a served program
    imports only the standard library): the same epsilon and releases as a local run, charged on
    the flights only."""
    import json
    import re

    from fuzzpy.interfaces.cli import app

    schemas = (ROOT / "examples" / "schemas" / "flights_by_row.fz").read_text()
    store = SqliteStore(tmp_path / "ledger.sqlite")
    for name in ("Flight", "Airline", "Plane"):
        decl = re.search(rf"^(public )?schema {name} \{{.*?^\}}", schemas, re.S | re.M).group(0)
        (tmp_path / f"{name}.fz").write_text(decl + "\n")
    register_dataset(store, "flights", DATA / "flights_sample.csv", tmp_path / "Flight.fz", 10)
    register_dataset(store, "airlines", DATA / "airlines.csv", tmp_path / "Airline.fz", None, public=True)
    register_dataset(store, "planes", DATA / "planes.csv", tmp_path / "Plane.fz", None, public=True)
    add_analyst(store, "ann", token_hash="0" * 64, caps={"flights": 5})
    service = Service(store)
    for example, public in (("delay_by_airline", "airlines"), ("seats_by_manufacturer", "planes")):
        path = ROOT / "examples" / f"{example}.fz"
        inline = re.sub(r"#[^\n]*", "", schemas).replace("\n", " ")  # on the import's one line
        text = path.read_text().replace('import "schemas/flights_by_row.fz"', inline)
        out = service.run(ann(service), ProgramRequest(text, f"examples/{example}.fz",
                                                       ["flights=flights", f"{public}={public}"], {}, "main", "1",
                                                       "json"))
        assert out["exit_code"] == 0, out
        local = CliRunner().invoke(app, ["run", str(path), "--data", f"flights={DATA / 'flights_sample.csv'}",
                                         "--public", f"{public}={DATA / f'{public}.csv'}", "--budget", "1",
                                         "--seed", "1", "--format", "json"])
        mine, theirs = out["result"], json.loads(local.stdout)
        assert mine["epsilon_exact"] == theirs["epsilon_exact"] == "1"
        assert [r["label"] for r in mine["releases"]] == [r["label"] for r in theirs["releases"]]
        assert [c["files"] for c in mine["ledger"]["charges"]] == [["flights"]]
    assert store.entries(dataset_key("airlines")) == store.entries(dataset_key("planes")) == []
    store.close()
