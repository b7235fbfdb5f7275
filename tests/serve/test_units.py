"""The curator service's parts, in process: schema fitting, tokens, configuration, limits."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import pytest

from fuzzpy.checking.program import check_source
from fuzzpy.diagnostics import FuzzError
from fuzzpy.serve.config import load_config
from fuzzpy.serve.registry import add_analyst, find_analyst, hash_token, register_dataset, schema_problems
from fuzzpy.serve.service import ProgramRequest, RequestError, Service
from fuzzpy.serve.store import SqliteStore

from .helpers import ADULT_CSV, ADULT_SCHEMA, ROOT, fuzzpy_cli, served_text


def schema(text: str):
    return next(iter(check_source(text, "s.fz", entry=None).schemas.values()))


REGISTERED = schema('schema R { n : num[0, 10], i : int[0, 5], b : bool, c : cat{"a", "b"}, s : string }')


@pytest.mark.parametrize("declared,problem", [
    ('{ n : num[-5, 500], i : num, c : string, s : cat{"z"} }', None),
    ("{ i : int[0, 100] }", None),
    ("{ n : int[0, 10] }", "column 'n' is declared int[0, 10], but the published schema has num[0, 10]"),
    ("{ b : num }", "column 'b' is declared num, but the published schema has bool"),
    ("{ c : bool }", "column 'c' is declared bool"),
    ("{ x : num }", "column 'x' is not in the published schema R"),
])
def test_a_program_schema_fits_when_each_column_reads_the_same_way(declared, problem):
    found = schema_problems(schema(f"schema P {declared}"), REGISTERED)
    assert (found[0] if found else None) == problem or (problem and found[0].startswith(problem))


PER_PLANE = schema("schema R unit plane { plane : string, n : num[0, 10] }")


@pytest.mark.parametrize("declared,problem", [
    ("schema P unit plane { plane : string, n : num[0, 10] }", None),
    ("schema P unit plane { plane : cat{\"A\"} }", None),
    ("schema P { plane : string, n : num[0, 10] }", "the published schema R has the privacy unit plane: declare it"),
    ("schema P unit n { n : int[0, 10] }", "the published schema R has the privacy unit plane"),
])
def test_a_program_schema_declares_the_published_privacy_unit(declared, problem):
    found = schema_problems(schema(declared), PER_PLANE)
    assert (found[0] if found else None) == problem or (problem and found[0].startswith(problem)), found


def test_a_program_cannot_declare_a_unit_the_curator_did_not_publish():
    found = schema_problems(schema("schema P unit s { s : string }"), REGISTERED)
    assert found == ["the published schema R has no privacy unit (one row is one individual); declare the schema "
                     "without `unit s`"]


def test_tokens_are_stored_hashed_and_matched_only_exactly(tmp_path):
    store = SqliteStore(tmp_path / "l.sqlite")
    token = add_analyst(store, "ann", caps={"d": Fraction(1)})
    assert token.startswith("fzp_") and len(token) > 40
    (rec,) = store.analysts()
    assert rec.token_hash == hash_token(token) and token not in (tmp_path / "l.sqlite").read_bytes().decode("latin-1")
    assert find_analyst(store.analysts(), token) == rec
    for wrong in (token[:-1], token + "x", token.upper(), "", hash_token(token)):
        assert find_analyst(store.analysts(), wrong) is None
    assert add_analyst(store, "ann") is None  # updating keeps the token
    assert find_analyst(store.analysts(), token) == rec
    fresh = add_analyst(store, "ann", new=True)
    assert find_analyst(store.analysts(), token) is None and find_analyst(store.analysts(), fresh).name == "ann"
    with pytest.raises(FuzzError) as bad:
        add_analyst(store, "bad name")
    assert bad.value.diagnostics[0].code == "E1017"


@pytest.mark.parametrize("text,words", [
    ("[server\n", "not valid TOML"),
    ('[server]\nspeed = 3\n', "unknown setting(s) in [server]: speed"),
    ('[server]\nrun_seconds = -1\n', "run_seconds must be a positive number"),
    ('[datasets.a]\ndata = "a.csv"\nschema = "a.fz"\ncap = 0.1\n', "not a TOML float"),
    ('[datasets.a]\ndata = "a.csv"\n', "needs data"),
    ('[analysts.x]\ncaps = { a = "1" }\n', "needs token_sha256"),
])
def test_configuration_errors_are_coded(tmp_path, text, words):
    path = tmp_path / "curator.toml"
    path.write_text(text)
    with pytest.raises(FuzzError) as err:
        load_config(path)
    assert err.value.diagnostics[0].code == "E1017" and words in err.value.diagnostics[0].message


def test_a_registration_is_refused_when_the_file_does_not_fit_the_schema(tmp_path):
    store = SqliteStore(tmp_path / "l.sqlite")
    (tmp_path / "s.fz").write_text("schema S { missing_column : num }\n")
    with pytest.raises(FuzzError) as err:
        register_dataset(store, "d", ADULT_CSV, tmp_path / "s.fz", Fraction(1))
    assert err.value.diagnostics[0].code == "E0505"  # schema mismatch: no such column
    assert store.datasets() == []
    (tmp_path / "two.fz").write_text("schema A { age : num }\nschema B { age : num }\n")
    with pytest.raises(FuzzError) as err:
        register_dataset(store, "d", ADULT_CSV, tmp_path / "two.fz", Fraction(1))
    assert "declares 2 schemas (A, B)" in err.value.diagnostics[0].message
    (tmp_path / "a.fz").write_text(ADULT_SCHEMA)
    with pytest.raises(FuzzError) as err:
        register_dataset(store, "d", ADULT_CSV, tmp_path / "a.fz", None)
    assert "has no cap yet" in err.value.diagnostics[0].message


def test_checking_longer_than_the_limit_is_refused_without_reading_or_charging(tmp_path):
    store = SqliteStore(tmp_path / "l.sqlite")
    (tmp_path / "a.fz").write_text(ADULT_SCHEMA)
    register_dataset(store, "adult", ADULT_CSV, tmp_path / "a.fz", Fraction(1))
    add_analyst(store, "ann", caps={"adult": Fraction(1)})
    service = Service(store)
    service.limits.check_seconds = 1e-4
    with pytest.raises(RequestError) as err:
        service.run(store.analysts()[0], ProgramRequest(served_text(ROOT / "examples" / "decision_tree.fz"),
                                                        datasets=["adult"], budget="1"))
    assert err.value.status == 422 and err.value.diagnostic.code == "E1008"
    assert store.entries("dataset:adult") == []


def test_a_served_table_keeps_its_group_codes_across_runs(tmp_path, monkeypatch):
    from fuzzpy.runtime.kernels import partitions

    store = SqliteStore(tmp_path / "l.sqlite")
    (tmp_path / "a.fz").write_text(ADULT_SCHEMA)
    register_dataset(store, "adult", ADULT_CSV, tmp_path / "a.fz", Fraction(10))
    add_analyst(store, "ann", caps={"adult": Fraction(10)})
    service = Service(store)
    calls = []
    real = partitions.key_codes
    monkeypatch.setattr(partitions, "key_codes", lambda values, info: calls.append(1) or real(values, info))
    request = ProgramRequest(served_text(ROOT / "examples" / "decision_tree.fz"), datasets=["adult"], budget="1")
    who = store.analysts()[0]
    outcomes = [service.run(who, request) for _ in range(2)]
    assert [o["exit_code"] for o in outcomes] == [0, 0], outcomes
    assert len(calls) == 13  # the twelve attributes and the class, in the first run only
    rec, adult = store.dataset("adult"), schema(ADULT_SCHEMA)
    (frame_a, kept_a), (frame_b, kept_b) = (service.table(rec, adult) for _ in range(2))
    assert kept_a is kept_b and frame_a is not frame_b  # each run its own frame, the same codes


def test_serve_without_the_serve_extra_is_a_clear_error():
    code = ("import sys; sys.modules['fastapi'] = None; sys.argv = ['fuzzpy', 'serve'];"
            "from fuzzpy.interfaces.cli import main; main()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert "error[E1020]" in out.stderr and 'pip install "fuzzpy[serve]"' in out.stderr
    assert "Traceback" not in out.stderr


def test_the_curator_commands_register_and_list(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    (tmp_path / "a.fz").write_text(ADULT_SCHEMA)
    added = fuzzpy_cli("dataset", "add", "adult", "--data", str(ADULT_CSV), "--schema", str(tmp_path / "a.fz"),
                       "--cap", "2/3", "--ledger", ledger)
    assert added.returncode == 0 and "cap 2/3" in added.stdout
    token = fuzzpy_cli("analyst", "add", "ann", "--cap", "adult=0.5", "--ledger", ledger)
    assert token.returncode == 0 and token.stdout.startswith("fzp_") and hash_token(token.stdout.strip()) in token.stderr
    listed = fuzzpy_cli("dataset", "list", "--ledger", ledger)
    assert "adult: cap 2/3, spent 0.0, remaining 2/3" in listed.stdout and "ann: cap 0.5" in listed.stdout
    bad = fuzzpy_cli("analyst", "add", "ann", "--cap", "adult", "--ledger", ledger)
    assert bad.returncode == 2 and "error[E1017]" in bad.stderr
    missing = fuzzpy_cli("dataset", "add", "b", "--data", str(tmp_path / "none.csv"), "--schema",
                         str(tmp_path / "a.fz"), "--cap", "1", "--ledger", ledger)
    assert missing.returncode == 4 and "error[E0501]" in missing.stderr


def test_the_privacy_unit_example_runs_through_the_service_as_it_does_locally(tmp_path):
    """examples/flights_delay.fz (the plane as the unit, partition selection) on a dataset whose
    published schema has the unit and whose cap is at a delta: the same epsilon and releases as a
    local run, charged on the flights."""
    import json
    import re

    from typer.testing import CliRunner

    from fuzzpy.accounting import EpsilonCap
    from fuzzpy.interfaces.cli import app

    data = ROOT / "examples" / "data" / "flights_sample.csv"
    schemas = (ROOT / "examples" / "schemas" / "flights.fz").read_text()
    (tmp_path / "Flight.fz").write_text(re.search(r"^schema Flight .*?^\}", schemas, re.S | re.M).group(0) + "\n")
    store = SqliteStore(tmp_path / "ledger.sqlite")
    register_dataset(store, "flights", data, tmp_path / "Flight.fz", EpsilonCap(Fraction(10), Fraction(1, 10**6)))
    add_analyst(store, "ann", token_hash="0" * 64, caps={"flights": Fraction(5)})
    service = Service(store)
    ann = next(a for a in service.store.analysts() if a.name == "ann")
    path = ROOT / "examples" / "flights_delay.fz"
    inline = re.sub(r"#[^\n]*", "", schemas).replace("\n", " ")  # on the import's one line
    text = path.read_text().replace('import "schemas/flights.fz"', inline)
    out = service.run(ann, ProgramRequest(text, "examples/flights_delay.fz", ["flights=flights"], {}, "main", "2",
                                          "json", delta="1e-6"))
    assert out["exit_code"] == 0, out
    local = CliRunner().invoke(app, ["run", str(path), "--data", str(data), "--budget", "2", "--delta", "1e-6",
                                     "--seed", "1", "--format", "json"])
    mine, theirs = out["result"], json.loads(local.stdout)
    assert mine["epsilon_exact"] == theirs["epsilon_exact"]
    assert mine["releases"][0]["label"] == theirs["releases"][0]["label"] == "dests"
    assert [c["files"] for c in mine["ledger"]["charges"]] == [["flights"]]
    store.close()
