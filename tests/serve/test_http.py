"""The curator service end to end: a real `fuzzpy serve` process, a real HTTP client.

One server for the module (starting one takes a few seconds).  Datasets: adult (the examples'
sample), points, tiny (cap 1.0: the concurrency test), mutable (its file is edited behind the
server's back), secret (alice's only), and adult_dp and points_dp (the same data, capped in
epsilon at delta 1e-6: Gaussian releases are allowed there).  Analysts: alice, bob, carol, dave
and the curator boss.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import pytest

from fuzzpy.interfaces.cli import run_app

from .helpers import (
    ADULT_CSV,
    ADULT_SCHEMA,
    COUNT_PROGRAM,
    EXAMPLES,
    POINTS_CSV,
    POINTS_SCHEMA,
    Analyst,
    body,
    codes,
    fuzzpy_cli,
    served_text,
    start_server,
    write_config,
)

ALICE = Analyst("alice", caps={"adult": "50", "points": "10", "secret": "1", "adult_dp": "50", "points_dp": "10"})
BOB = Analyst("bob", caps={"adult": "0.3"})
CAROL = Analyst("carol", caps={"tiny": "100", "adult": "0.5"})
DAVE = Analyst("dave", caps={"mutable": "10"})
BOSS = Analyst("boss", role="curator")
MAX_PROGRAM = 16384
MAX_REQUEST = 65536


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("curator")
    for name in ("tiny", "mutable", "secret"):
        shutil.copy(ADULT_CSV, folder / f"{name}.csv")
    datasets = {"adult": (ADULT_CSV, ADULT_SCHEMA, "1000"), "points": (POINTS_CSV, POINTS_SCHEMA, "100"),
                "tiny": ("tiny.csv", ADULT_SCHEMA, "1.0"), "mutable": ("mutable.csv", ADULT_SCHEMA, "100"),
                "secret": ("secret.csv", ADULT_SCHEMA, "5"),
                "adult_dp": (ADULT_CSV, ADULT_SCHEMA, "1000", "delta=1e-6"),
                "points_dp": (POINTS_CSV, POINTS_SCHEMA, "100", "delta=1e-6")}
    # Several requests of one analyst at once, and many waiting: the concurrency tests below send 50.
    config = write_config(folder, "ledger.sqlite", datasets, [ALICE, BOB, CAROL, DAVE, BOSS],
                          max_program_bytes=MAX_PROGRAM, max_request_bytes=MAX_REQUEST, per_analyst=2,
                          queue_per_analyst=64, queue_seconds=120)
    srv = start_server(config)
    yield srv
    srv.stop()


def post(server, who, path, payload):
    with server.client(who.token) as c:
        return c.post(path, json=payload)


# ---- the whole flow ------------------------------------------------------------------------------

def test_each_analyst_sees_the_published_schemas_of_their_own_datasets_only(server):
    with server.client(ALICE.token) as c:
        listed = c.get("/v1/datasets").json()["datasets"]
        assert [d["dataset"] for d in listed] == ["adult", "adult_dp", "points", "points_dp", "secret"]
        adult = c.get("/v1/datasets/adult/schema").json()
    assert adult["source"] == ADULT_SCHEMA
    assert {"name": "age", "type": "num[17, 90]", "on_invalid": "drop", "default": None} in adult["columns"]
    with server.client(BOB.token) as c:
        assert [d["dataset"] for d in c.get("/v1/datasets").json()["datasets"]] == ["adult"]
        # another analyst's dataset and a dataset that does not exist get the same answer
        for name in ("secret", "nonexistent"):
            r = c.get(f"/v1/datasets/{name}/schema")
            assert r.status_code == 404 and codes(r) == ["E1004"]
            assert name in r.json()["diagnostics"][0]["message"]


def _local(capsys, *args):
    code = run_app(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# The flights examples read the flights tables (the join examples public ones among them):
# tests/serve/test_public_tables.py and tests/serve/test_units.py run them through the service.
FLIGHTS_EXAMPLES = {"delay_by_airline.fz", "seats_by_manufacturer.fz", "seats_by_manufacturer_private.fz",
                    "flights_delay.fz"}
# DP-SGD's amplified epsilon takes minutes to certify: tests/examples checks and runs it
SLOW_EXAMPLES = {"dpsgd_logistic.fz"}
# zCDP examples whose name does not say "_gauss"
ZCDP_EXAMPLES = {"linear_regression_adassp.fz"}


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.fz") if p.name not in FLIGHTS_EXAMPLES | SLOW_EXAMPLES))
def test_every_example_checks_and_runs_through_the_service_as_it_does_locally(server, capsys, example):
    path = EXAMPLES / example
    dataset, data = ("points", "points.csv") if example.startswith("kmeans") else ("adult", "adult_sample.csv")
    # The zCDP examples are stated at a delta, under a budget they fit: the same flags both ways,
    # on a dataset capped at that delta (a pure dataset refuses Gaussian releases: E0606).
    zcdp = "_gauss" in example or example in ZCDP_EXAMPLES
    dataset += "_dp" if zcdp else ""
    extra, flags = ({"delta": "1e-6", "budget": "2"}, ["--delta", "1e-6", "--budget", "2"]) if zcdp else \
        ({}, ["--budget", "1"])
    payload = {**body(served_text(path), dataset, file=f"examples/{example}", format="text", budget="1"), **extra}
    checked = post(server, ALICE, "/v1/check", payload).json()
    code, out, err = _local(capsys, "check", f"examples/{example}", *flags)
    assert (checked["exit_code"], checked["stdout"], checked["stderr"]) == (0, out, err)

    ran = post(server, ALICE, "/v1/run", {**payload, "format": "json"}).json()
    assert ran["exit_code"] == 0, ran["stderr"]
    served = ran["result"]
    code, out, _ = _local(capsys, "run", f"examples/{example}", "--data", f"examples/data/{data}", "--seed", "1",
                          *flags, "--format", "json")
    local = json.loads(out)
    assert code == 0 and list(served) == list(local)
    for key in ("file", "entry", "epsilon", "epsilon_exact", "budget", "budget_exact", "ok"):
        assert served[key] == local[key]
    assert served["seeded"] is False and served["warning"] is None
    assert served["ledger"]["path"] == "the curator's ledger"
    assert [c["files"] for c in served["ledger"]["charges"]] == [[dataset]]
    assert served["releases"] and all(list(r) == list(local["releases"][0]) for r in served["releases"])
    if len(served["releases"]) == len(local["releases"]):  # data-dependent in svt and the tree
        for mine, theirs in zip(served["releases"], local["releases"]):
            assert {k: v for k, v in mine.items() if k != "value"} == {k: _relative(v) for k, v in theirs.items()
                                                                       if k != "value"}


def _relative(value):
    """A local release made inside the standard library names its file by its absolute path; the
    service names it relative to the repository (it never shows the curator's paths)."""
    if isinstance(value, dict) and isinstance(value.get("file"), str):
        root = str(EXAMPLES.parent) + "/"
        return {**value, "file": value["file"].removeprefix(root)}
    return value


def test_the_command_line_client_prints_what_a_local_run_prints(server, tmp_path):
    prog = tmp_path / "count.fz"
    prog.write_text(COUNT_PROGRAM)
    env = {"FUZZPY_TOKEN": ALICE.token}
    remote = fuzzpy_cli("check", str(prog), "--server", server.url, "--dataset", "adult", env=env)
    local = fuzzpy_cli("check", str(prog))
    assert (remote.returncode, remote.stdout) == (local.returncode, local.stdout) == (0, local.stdout)
    text = fuzzpy_cli("run", str(prog), "--server", server.url, "--dataset", "adult", env=env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"{prog} (main): epsilon 0.1 of budget 1; charged on adult in the curator's ledger"
    assert lines[1] == "released:" and lines[2].startswith("  n = ") and lines[3].startswith("result: ")
    out = fuzzpy_cli("run", str(prog), "--server", server.url, "--dataset", "adult", "--format", "json", env=env)
    doc = json.loads(out.stdout)  # strict: nothing else on stdout
    assert out.returncode == 0 and doc["ok"] is True and doc["epsilon_exact"] == "1/10"
    # no token: a coded error, no traceback
    none = fuzzpy_cli("run", str(prog), "--server", server.url, "--dataset", "adult",
                      env={"FUZZPY_TOKEN": "", "FUZZPY_TOKEN_FILE": str(tmp_path / "missing")})
    assert none.returncode == 2 and "error[E1018]" in none.stderr and "Traceback" not in none.stderr
    wrong = fuzzpy_cli("run", str(prog), "--server", server.url, "--dataset", "adult", env={"FUZZPY_TOKEN": "fzp_x"})
    assert wrong.returncode == 2 and "error[E1002]" in wrong.stderr
    mixed = fuzzpy_cli("run", str(prog), "--server", server.url, "--dataset", "adult", "--seed", "1", env=env)
    assert mixed.returncode == 2 and "error[E0701]" in mixed.stderr
    gone = fuzzpy_cli("run", str(prog), "--server", "http://127.0.0.1:9", "--dataset", "adult", env=env)
    assert gone.returncode == 4 and "error[E1016]" in gone.stderr
    schema = fuzzpy_cli("dataset", "schema", "adult", "--server", server.url, env=env)
    assert schema.returncode == 0 and schema.stdout.strip() == ADULT_SCHEMA


def test_spending_is_each_analysts_own_and_the_curator_sees_all(server):
    payload = body(COUNT_PROGRAM, "adult", params={"eps": "0.1"})
    with server.client(BOB.token) as c:
        before = c.get("/v1/spending").json()
        first = c.post("/v1/run", json=payload).json()
        assert first["exit_code"] == 0
        after = c.get("/v1/spending").json()
    assert after["analyst"] == "bob" and [d["dataset"] for d in after["datasets"]] == ["adult"]
    mine = after["datasets"][0]
    assert Fraction(mine["spent"]) == Fraction(before["datasets"][0]["spent"]) + Fraction(1, 10)
    assert mine["cap"] == "0.3" and Fraction(mine["remaining"]) == Fraction(3, 10) - Fraction(mine["spent"])
    assert all(r["label"].startswith("bob: ") for r in mine["runs"])
    assert mine["runs"][-1]["id"] == first["result"]["ledger"]["charges"][0]["id"]
    # bob's view never shows alice's runs, nor the dataset's total
    assert "total" not in json.dumps(after) and "alice" not in json.dumps(after)
    # over bob's own cap: refused with bob's numbers, nothing charged
    with server.client(BOB.token) as c:
        c.post("/v1/run", json=payload)
        c.post("/v1/run", json=payload)
        refused = c.post("/v1/run", json=payload).json()
        final = c.get("/v1/spending").json()["datasets"][0]
    assert refused["exit_code"] == 4 and refused["result"]["stage"] == "ledger"
    assert [d["code"] for d in refused["result"]["diagnostics"]] == ["E1014"]
    assert "only 0.0 of your cap 0.3 on dataset adult remains" in refused["stderr"]
    assert final["spent"] == "0.3" and final["remaining"] == "0.0"
    with server.client(BOB.token) as c:
        r = c.get("/v1/ledger")
        assert r.status_code == 403 and codes(r) == ["E1003"]
    with server.client(BOSS.token) as c:
        view = c.get("/v1/ledger").json()
    adult = next(d for d in view["datasets"] if d["dataset"] == "adult")
    bob = next(a for a in adult["analysts"] if a["analyst"] == "bob")
    assert bob == {"analyst": "bob", "notion": "pure epsilon", "cap": "0.3", "spent": "0.3", "remaining": "0.0"}
    assert Fraction(adult["spent"]) == sum(Fraction(r["epsilon"]) for r in adult["runs"])


# ---- tokens, and what one analyst may see of another -----------------------------------------------

ENDPOINTS = [("GET", "/v1/datasets"), ("GET", "/v1/datasets/adult/schema"), ("POST", "/v1/check"),
             ("POST", "/v1/run"), ("GET", "/v1/spending"), ("GET", "/v1/ledger"), ("GET", "/v1/openapi.json"),
             ("GET", "/v1/whoami")]


# Ids are fixed (the tokens are random per session; parallel test workers must collect the same ids).
@pytest.mark.parametrize("header,code", [(None, "E1001"), ("Bearer", "E1001"), ("Basic abc", "E1001"),
                                         ("Bearer fzp_wrong", "E1002"), (f"Bearer {ALICE.token}x", "E1002"),
                                         (f"Bearer {ALICE.token[:-1]}", "E1002")],
                         ids=["none", "bearer-alone", "basic", "unknown", "token-longer", "token-shorter"])
def test_every_endpoint_needs_a_valid_token(server, header, code):
    with server.client() as c:
        for method, path in ENDPOINTS:
            headers = {"Authorization": header} if header else {}
            r = c.request(method, path, headers=headers, json=body(COUNT_PROGRAM) if method == "POST" else None)
            assert r.status_code == 401 and codes(r) == [code], (method, path)


def test_the_openapi_description_lists_every_endpoint(server):
    with server.client(ALICE.token) as c:
        spec = c.get("/v1/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    assert {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops} >= {
        (m, p.replace("adult", "{name}")) for m, p in ENDPOINTS}


def test_an_analyst_cannot_use_or_see_another_analysts_dataset(server):
    r = post(server, BOB, "/v1/run", body(COUNT_PROGRAM, "secret"))
    assert r.status_code == 404 and codes(r) == ["E1004"]
    r = post(server, BOB, "/v1/check", body(COUNT_PROGRAM, "db=secret"))
    assert r.status_code == 404 and codes(r) == ["E1004"]
    with server.client(BOSS.token) as c:
        secret = next(d for d in c.get("/v1/ledger").json()["datasets"] if d["dataset"] == "secret")
    assert secret["spent"] == "0.0"


# ---- refusals: sizes, malformed requests, imports, schemas, budgets ------------------------------------

def test_oversized_and_malformed_requests_are_refused_cleanly(server):
    with server.client(ALICE.token) as c:
        big = c.post("/v1/check", json=body("#" * MAX_REQUEST))
        assert big.status_code == 413 and codes(big) == ["E1005"]
        long = c.post("/v1/check", json=body("# x\n" * (MAX_PROGRAM // 4 + 1)))
        assert long.status_code == 413 and codes(long) == ["E1007"]
        broken = c.post("/v1/run", content=b'{"program": "secret-text', headers={"Content-Type": "application/json"})
        assert broken.status_code == 400 and codes(broken) == ["E1006"] and "secret-text" not in broken.text
        missing = c.post("/v1/run", json={"dataset": "adult"})
        assert missing.status_code == 400 and codes(missing) == ["E1006"] and "program" in missing.text
        typed = c.post("/v1/run", json={**body(COUNT_PROGRAM), "params": {"eps": [1, 2]}})
        assert typed.status_code == 400 and codes(typed) == ["E1006"]
        fmt = c.post("/v1/run", json={**body(COUNT_PROGRAM), "format": "sarif"})
        assert fmt.status_code == 400 and codes(fmt) == ["E1006"]
        nowhere = c.get("/v1/nothing")
        assert nowhere.status_code == 404 and codes(nowhere) == ["E1019"]
        streamed = c.post("/v1/check", content=iter([b"{" + b" " * MAX_REQUEST, b"}"]),
                          headers={"Content-Type": "application/json"})
        assert streamed.status_code == 413 and codes(streamed) == ["E1005"]


def test_a_served_program_imports_the_standard_library_only(server):
    stdlib = 'import "stdlib/stats.fz"\n' + COUNT_PROGRAM
    ok = post(server, ALICE, "/v1/check", body(stdlib)).json()
    assert ok["exit_code"] == 0, ok["stderr"]
    for path in ("/etc/passwd.fz", "../examples/cdf.fz", "examples/cdf.fz", "helpers.fz"):
        r = post(server, ALICE, "/v1/check", body(f'import "{path}"\n' + COUNT_PROGRAM, format="json")).json()
        assert r["exit_code"] == 4
        assert [d["code"] for d in r["result"]["diagnostics"]] == ["E1012"]
        assert r["result"]["diagnostics"][0]["location"]["line"] == 1


def test_a_program_schema_must_read_the_published_schema_the_same_way(server):
    fits = COUNT_PROGRAM.replace("{ age : num[17, 90] }", '{ age : num[0, 200], sex : string, workclass : cat{"Private", "X"} }')
    assert post(server, ALICE, "/v1/check", body(fits)).json()["exit_code"] == 0
    for schema, word in [("{ age : int[17, 90] }", "age"), ("{ salary : num[0, 1] }", "salary"),
                         ("{ age : num[17, 90], sex : bool }", "sex")]:
        r = post(server, ALICE, "/v1/run", body(COUNT_PROGRAM.replace("{ age : num[17, 90] }", schema))).json()
        assert r["exit_code"] == 4 and r["result"]["stage"] == "check"
        assert [d["code"] for d in r["result"]["diagnostics"]] == ["E1011"] and word in r["stderr"]
    assert "runs" not in r["result"]  # refused at the check: nothing charged


def test_fifty_concurrent_runs_never_overspend_a_cap(server):
    """tiny has a total cap of 1.0 and each run costs 0.1: exactly 10 of 50 may run.  Then
    carol's own cap of 0.5 on adult: exactly 5 of 50."""
    def burst(dataset):
        with server.client(CAROL.token) as c, ThreadPoolExecutor(50) as pool:
            return list(pool.map(lambda _: c.post("/v1/run", json=body(COUNT_PROGRAM, dataset)).json(), range(50)))

    tiny = burst("tiny")
    assert sum(r["exit_code"] == 0 for r in tiny) == 10
    refused = [r for r in tiny if r["exit_code"] != 0]
    assert {d["code"] for r in refused for d in r["result"]["diagnostics"]} == {"E1013"}
    assert all("0.9" not in r["stderr"] and "1.0" not in r["stderr"] for r in refused)  # no dataset totals
    adult = burst("adult")
    assert sum(r["exit_code"] == 0 for r in adult) == 5
    assert {d["code"] for r in adult if r["exit_code"] for d in r["result"]["diagnostics"]} == {"E1014"}
    with server.client(BOSS.token) as c:
        view = {d["dataset"]: d for d in c.get("/v1/ledger").json()["datasets"]}
    assert view["tiny"]["spent"] == "1.0" and view["tiny"]["remaining"] == "0.0"
    assert sum(r["status"] == "released" for r in view["tiny"]["runs"]) == 10
    carol = next(a for a in view["adult"]["analysts"] if a["analyst"] == "carol")
    assert carol["spent"] == "0.5"


def test_a_data_file_changed_behind_the_servers_back_is_refused_until_registered_again(server):
    folder = server.config.parent
    data = folder / "mutable.csv"
    ok = post(server, DAVE, "/v1/run", body(COUNT_PROGRAM, "mutable")).json()
    assert ok["exit_code"] == 0
    with open(data, "a") as fh:
        fh.write(data.read_text().splitlines()[1] + "\n")  # one more row
    for _ in range(2):
        r = post(server, DAVE, "/v1/run", body(COUNT_PROGRAM, "mutable")).json()
        assert r["exit_code"] == 4 and r["result"]["stage"] == "data"
        assert [d["code"] for d in r["result"]["diagnostics"]] == ["E1010"]
        assert str(folder) not in r["stderr"]  # the server's paths are not the analyst's business
    with server.client(DAVE.token) as c:
        assert c.get("/v1/spending").json()["datasets"][0]["spent"] == "0.1"  # refused runs cost nothing
    added = fuzzpy_cli("dataset", "add", "mutable", "--data", str(data), "--schema", str(folder / "mutable.fz"),
                       "--config", str(server.config))
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("dataset mutable registered:") and "cap 100" in added.stdout
    again = post(server, DAVE, "/v1/run", body(COUNT_PROGRAM, "mutable")).json()
    assert again["exit_code"] == 0, again["stderr"]
    with server.client(DAVE.token) as c:
        assert c.get("/v1/spending").json()["datasets"][0]["spent"] == "0.2"  # the name keeps its spending


def test_the_audit_log_records_every_request_without_private_values(server):
    r = post(server, ALICE, "/v1/run", body(COUNT_PROGRAM, format="json")).json()
    value = r["result"]["releases"][0]["value"]
    with server.client() as c:
        c.get("/v1/spending")
    lines = [json.loads(line) for line in (server.config.parent / "audit.jsonl").read_text().splitlines()]
    runs = [e for e in lines if e["path"] == "/v1/run" and e.get("analyst") == "alice"]
    assert runs[-1]["exit_code"] == 0 and runs[-1]["epsilon"] == "1/10" and runs[-1]["stage"] == "released"
    assert runs[-1]["runs"] == [r["result"]["ledger"]["charges"][0]["id"]]
    assert lines[-1]["status"] == 401 and lines[-1]["code"] == "E1001"
    text = json.dumps(lines)
    assert repr(value) not in text and "laplace" not in text  # no released value, no program text
    assert sqlite3.connect(server.config.parent / "ledger.sqlite").execute(
        "SELECT count(*) FROM charges WHERE dataset = 'dataset:adult'").fetchone()[0] >= 1


def test_sarif_and_json_checks_through_the_service_never_show_the_servers_paths(server, tmp_path):
    """`fuzzpy check --server --format sarif` gave 500 (the service had deleted its working folder),
    and JSON check results named the server's install path of the standard library."""
    from fuzzpy.stdlib_location import STDLIB

    prog = tmp_path / "mean.fz"
    prog.write_text('import "stdlib/stats.fz"\n' + COUNT_PROGRAM.replace("# fuzzpy: budget 1\n", ""))
    env = {"FUZZPY_TOKEN": ALICE.token}
    sarif = fuzzpy_cli("check", str(prog), "--server", server.url, "--dataset", "adult", "--format", "sarif", env=env)
    assert sarif.returncode == 0, sarif.stderr
    log = json.loads(sarif.stdout)
    assert log["version"] == "2.1.0" and log["runs"][0]["results"]
    as_json = post(server, ALICE, "/v1/check", body(prog.read_text(), "adult", format="json")).json()
    text = json.dumps(as_json) + sarif.stdout
    assert str(STDLIB.resolve()) not in text and STDLIB.resolve().as_uri() not in text
    assert "stdlib/stats.fz" in json.dumps(as_json["result"]["functions"])
