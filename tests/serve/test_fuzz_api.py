"""The HTTP API under property-based fuzzing from its own OpenAPI description (schemathesis), on a
real `fuzzpy serve` on 127.0.0.1, on the SQLite store and on a throwaway PostgreSQL server, with
a valid token, a wrong one and none: no answer is a server error, every error is a coded JSON
diagnostic, every request is audited, and the server stays up.  Then the attacks a stranger can
make without any token: a body nested 100,000 levels deep (it crashed the JSON decoder of the
service once, 5 times out of 5), lone surrogates, unknown paths."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import unquote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from .helpers import ADULT_CSV, ADULT_SCHEMA, COUNT_PROGRAM, Analyst, start_server, write_config

FUZZER = Analyst("fuzzer", caps={"adult": "1000"})
CODE = re.compile(r"^E\d{4}$")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    ledger = "ledger.sqlite" if request.param == "sqlite" else request.getfixturevalue("postgres")
    if request.param == "postgresql":
        from fuzzpy.serve.pgstore import PostgresStore

        store = PostgresStore(ledger)  # a fresh database for this module's server
        store.transaction(lambda cur: cur.execute("TRUNCATE fuzzpy_caps, fuzzpy_charges, fuzzpy_serve_datasets, "
                                                  "fuzzpy_serve_analysts"))
        store.close()
    config = write_config(folder, ledger, {"adult": (ADULT_CSV, ADULT_SCHEMA, "1000")}, [FUZZER],
                          check_seconds=10, run_seconds=10, per_analyst=2, queue_per_analyst=64)
    server = start_server(config)
    yield server
    server.stop()
    assert server.proc.returncode in (0, -15), server.log.read_text()[-2000:]


@pytest.fixture(scope="module")
def operations(served):
    """Every operation of the service's own OpenAPI description (fetched with a token)."""
    with served.client(FUZZER.token) as c:
        doc = c.get("/v1/openapi.json").json()
    return [op.ok() for op in schemathesis.openapi.from_dict(doc).get_all_operations()]


def audit_lines(server) -> list[dict]:
    path = server.config.parent / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def assert_coded(response) -> None:
    """A refusal is `{"ok": false, "diagnostics": [...]}` with stable codes and no traceback."""
    assert response.status_code < 500 or response.status_code in (503, 504), (response.status_code, response.text)
    if response.status_code >= 400:
        doc = response.json()
        assert doc["ok"] is False and doc["diagnostics"], doc
        assert all(CODE.match(d["code"]) for d in doc["diagnostics"]), doc
    assert "Traceback" not in response.text


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_request_crashes_the_service_or_goes_unaudited(served, operations, mode):
    """Requests drawn from the description (valid ones, and invalid ones: wrong types, missing
    fields, extra fields), each sent with the analyst's token, a wrong token and none."""
    assert {op.label for op in operations} >= {"POST /v1/run", "POST /v1/check", "GET /v1/ledger"}
    for op in operations:
        fuzz = settings(max_examples=10, deadline=None, database=None, suppress_health_check=list(HealthCheck))(
            given(case=op.as_strategy(mode))(lambda case: _fuzzed(case, served)))
        try:
            fuzz()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE and not op.body, op.label  # nothing to make invalid


def _fuzzed(case, served):
    for token in (FUZZER.token, "fzp_not-a-token", None):
        before = len(audit_lines(served))
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        response = case.call(base_url=served.url, headers=headers, timeout=60)
        assert_coded(response)
        if token != FUZZER.token:
            assert response.status_code == 401, (response.status_code, response.text)
        deadline = time.monotonic() + 5
        while len(audit_lines(served)) <= before and time.monotonic() < deadline:
            time.sleep(0.01)  # the line is written as the answer ends
        last = audit_lines(served)[-1]
        assert last["status"] == response.status_code and last["method"] == case.method.upper()
        assert unquote(last["path"]) == unquote(case.formatted_path)[:200]
        if response.status_code >= 400:
            assert CODE.match(last.get("code") or ""), last
    assert served.proc.poll() is None, "the service stopped"


# ---- a stranger's attacks, spelled out ------------------------------------------------------------

NESTED = b"[" * 100_000 + b"]" * 100_000  # 200 KB, under the 1 MiB body limit


@pytest.mark.parametrize("path", ["/v1/check", "/v1/run"])
def test_a_deeply_nested_body_is_refused_before_it_is_decoded(served, path):
    before = len(audit_lines(served))
    anonymous = httpx.post(served.url + path, content=NESTED, headers={"Content-Type": "application/json"},
                           timeout=30)
    assert anonymous.status_code == 401 and anonymous.json()["diagnostics"][0]["code"] == "E1001"
    with served.client(FUZZER.token) as c:
        mine = c.post(path, content=NESTED, headers={"Content-Type": "application/json"})
        assert mine.status_code == 400 and mine.json()["diagnostics"][0]["code"] == "E1006"
        assert "nested more than" in mine.json()["diagnostics"][0]["message"]
        assert c.get("/v1/whoami").status_code == 200  # still up
    time.sleep(0.2)
    codes = [line.get("code") for line in audit_lines(served)[before:]]
    assert codes[:2] == ["E1001", "E1006"]


@pytest.mark.parametrize("field", ["program", "file", "entry", "dataset"])
def test_a_lone_surrogate_in_any_field_is_a_coded_refusal(served, field):
    payload = {"program": COUNT_PROGRAM, "file": "p.fz", "dataset": "adult", "entry": "main"}
    raw = json.dumps(payload).replace(json.dumps(payload[field]), json.dumps(payload[field])[:-1] + '\\ud800"', 1)
    with served.client(FUZZER.token) as c:
        for path in ("/v1/check", "/v1/run"):
            before = len(audit_lines(served))
            r = c.post(path, content=raw.encode(), headers={"Content-Type": "application/json"})
            assert r.status_code == 400 and r.json()["diagnostics"][0]["code"] in ("E1006", "E1004"), r.text
            time.sleep(0.1)
            assert len(audit_lines(served)) == before + 1


def test_without_a_token_every_path_answers_401_known_or_not(served):
    for method, path in [("GET", "/v1/nowhere"), ("POST", "/v1/run"), ("GET", "/v1/openapi.json"), ("GET", "/"),
                         ("DELETE", "/v1/ledger")]:
        r = httpx.request(method, served.url + path, timeout=30)
        assert r.status_code == 401 and r.json()["diagnostics"][0]["code"] == "E1001", (method, path)
    with served.client(FUZZER.token) as c:
        r = c.get("/v1/nowhere")
        assert r.status_code == 404 and r.json()["diagnostics"][0]["code"] == "E1019"
