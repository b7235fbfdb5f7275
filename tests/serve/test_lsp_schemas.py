"""The language server takes the published schemas from a real `fuzzpy serve` process.

One curator service for the module; each test starts its own language server (pytest-lsp's
client, as in tests/interfaces/test_lsp.py) with its own options and token."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from fuzzpy.diagnostics import FuzzError
from fuzzpy.interfaces.lsp import Settings
from fuzzpy.interfaces.lsp.remote import fetch_all, fetch_one

from ..interfaces.test_lsp import SERVER, diagnostics_for, make_client, open_doc
from .helpers import ADULT_CSV, ADULT_SCHEMA, POINTS_CSV, POINTS_SCHEMA, Analyst, free_port, start_server, write_config

ALICE = Analyst("alice", caps={"adult": "10", "points": "10"})
HANG_GUARD = 60  # seconds before a missing notification fails the test (not a speed assertion)

# Uses three published columns and declares no schema: checks only with the published one.
NO_SCHEMA = textwrap.dedent("""\
    function main (db : bag Adult) : fuzzy num {
      let adults = filter (fun r -> r.age >= 18 && r.sex == "Female" && r.hours_per_week > 40) db;
      sample c = laplace 0.5 (count adults);
      return c
    }
    """)
OWN_SCHEMA = "schema Adult { age : num[17, 90] }\n" + NO_SCHEMA.replace(
    ' && r.sex == "Female" && r.hours_per_week > 40', "")


@pytest.fixture(scope="module")
def curator(tmp_path_factory):
    folder = tmp_path_factory.mktemp("curator")
    config = write_config(folder, "ledger.sqlite", {"adult": (ADULT_CSV, ADULT_SCHEMA, "100"),
                                                    "points": (POINTS_CSV, POINTS_SCHEMA, "100")}, [ALICE])
    srv = start_server(config)
    yield srv
    srv.stop()


def lsp_env(tmp_path: Path, token: str) -> dict:
    """The token in the environment; HOME elsewhere, so ~/.fuzzpy/token of the machine is not read."""
    return {**os.environ, "FUZZPY_TOKEN": token, "HOME": str(tmp_path)}


async def start_lsp(options: dict, env: dict | None = None) -> LanguageClient:
    client = await ClientServerConfig(server_command=SERVER, client_factory=make_client, server_env=env).start()
    await client.initialize_session(T.InitializeParams(capabilities=T.ClientCapabilities(),
                                                       initialization_options={"debounceMs": 10, **options}))
    return client


async def fetched(client: LanguageClient, count: int) -> list[str]:
    """Wait until the server has logged `count` outcomes of its schema fetch (warnings or uses)."""

    def outcomes() -> list[str]:
        return [m.message for m in client.log_messages if "published schema" in m.message]

    async def wait() -> list[str]:
        while len(outcomes()) < count:
            await asyncio.sleep(0.02)
        return outcomes()

    return await asyncio.wait_for(wait(), HANG_GUARD)


def summary(diags: list[T.Diagnostic]) -> list[tuple]:
    return [(d.code, d.severity, d.range.start.line, d.message.splitlines()[0]) for d in diags]


# ---- through the language server -----------------------------------------------------------------

@pytest.mark.asyncio
async def test_a_program_without_a_schema_checks_clean_with_the_published_one(curator, tmp_path):
    client = await start_lsp({"server": curator.url, "dataset": ["adult", "nope"]}, lsp_env(tmp_path, ALICE.token))
    try:
        logs = await fetched(client, 2)
        assert any("published schema Adult of dataset adult is checked" in m for m in logs)
        uri = open_doc(client, tmp_path / "prog.fz", NO_SCHEMA)
        diags = await diagnostics_for(client, uri, 1)
        # adult's schema is used; the unknown dataset is a warning, and nothing else is wrong
        assert summary(diags) == [("E1004", T.DiagnosticSeverity.Warning, 0,
                                   f"fuzzpy could not use the published schema of dataset 'nope' from {curator.url}: "
                                   "no dataset named 'nope' is available to you")]
        hover = await client.text_document_hover_async(T.HoverParams(
            T.TextDocumentIdentifier(uri), T.Position(0, NO_SCHEMA.index("Adult"))))
        assert "hours_per_week" in str(hover.contents)  # the published columns
        # The document's own declaration wins over the published one: age only, so sex is unknown.
        own = OWN_SCHEMA.replace("r.age >= 18", 'r.sex == "Female"')
        uri2 = open_doc(client, tmp_path / "own.fz", own)
        diags = await diagnostics_for(client, uri2, 1)
        assert summary(diags) == [("E0205", T.DiagnosticSeverity.Error, 2, "Adult has no field 'sex'"),
                                  ("E1004", T.DiagnosticSeverity.Warning, 0, summary(diags)[1][3])]
    finally:
        await client.shutdown_session()


@pytest.mark.asyncio
async def test_a_wrong_token_is_a_warning_and_the_document_is_checked_on_its_own(curator, tmp_path):
    wrong = "not-the-token-" + ALICE.token[::-1]
    client = await start_lsp({"server": curator.url, "dataset": "adult"}, lsp_env(tmp_path, wrong))
    try:
        logs = await fetched(client, 1)
        assert wrong not in "".join(logs)
        uri = open_doc(client, tmp_path / "prog.fz", NO_SCHEMA)
        diags = await diagnostics_for(client, uri, 1)
        # the warning last, after what checking the document on its own gives
        assert summary(diags) == [("E0208", T.DiagnosticSeverity.Error, 0, "unknown type 'Adult'"),
                                  ("E1002", T.DiagnosticSeverity.Warning, 0,
                                   f"fuzzpy could not use the published schema of dataset 'adult' from "
                                   f"{curator.url}: the access token is not recognised")]
        assert all(wrong not in d.message for d in diags)
        uri2 = open_doc(client, tmp_path / "own.fz", OWN_SCHEMA)
        assert [d.code for d in await diagnostics_for(client, uri2, 1)] == ["E1002"]
    finally:
        await client.shutdown_session()


@pytest.mark.asyncio
async def test_without_the_server_option_nothing_is_fetched_and_nothing_changes(curator, tmp_path):
    audit = curator.config.parent / "audit.jsonl"
    before = audit.read_text().count("\n") if audit.exists() else 0
    client = await start_lsp({}, lsp_env(tmp_path, ALICE.token))
    try:
        uri = open_doc(client, tmp_path / "prog.fz", NO_SCHEMA)
        diags = await diagnostics_for(client, uri, 1)
        assert summary(diags) == [("E0208", T.DiagnosticSeverity.Error, 0, "unknown type 'Adult'")]
        uri2 = open_doc(client, tmp_path / "own.fz", OWN_SCHEMA)
        assert await diagnostics_for(client, uri2, 1) == []
        assert not [m for m in client.log_messages if "published schema" in m.message]
    finally:
        await client.shutdown_session()
    assert (audit.read_text().count("\n") if audit.exists() else 0) == before


# ---- the fetch itself -----------------------------------------------------------------------------

def test_fetch_gives_the_published_text_and_refuses_cleanly(curator, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FUZZPY_TOKEN", ALICE.token)
    found, warnings = fetch_all(curator.url, ["adult", "points", "adult"])
    assert [(p.dataset, p.schema, p.source) for p in found] == [("adult", "Adult", ADULT_SCHEMA),
                                                              ("points", "Point", POINTS_SCHEMA)]
    assert warnings == []
    down = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(FuzzError) as exc:
        fetch_one(down, "adult")
    assert exc.value.diagnostics[0].code == "E1016"
    # a URL's password is never shown
    _, warnings = fetch_all(down.replace("//", "//me:secret@"), ["adult"])
    assert [w.code for w in warnings] == ["E1016"] and "secret" not in warnings[0].message
    assert warnings[0].message.startswith(f"fuzzpy could not use the published schema of dataset 'adult' from {down}")
    monkeypatch.delenv("FUZZPY_TOKEN")
    _, warnings = fetch_all(curator.url, ["adult"])
    assert [w.code for w in warnings] == ["E1018"] and "no access token" in warnings[0].message
    (tmp_path / ".fuzzpy").mkdir()
    (tmp_path / ".fuzzpy" / "token").write_text(ALICE.token + "\n")  # the client's token file
    assert [p.schema for p in fetch_all(curator.url, ["adult"])[0]] == ["Adult"]


def test_settings_read_the_server_options():
    s = Settings.from_options({"server": "http://h:1", "dataset": "adult"})
    assert (s.server, s.datasets) == ("http://h:1", ("adult",))
    s = Settings.from_options({"server": "https://h", "dataset": ["a", "b", "a", " ", 3]})
    assert (s.server, s.datasets) == ("https://h", ("a", "b"))
    for bad in ({"server": "ftp://h", "dataset": "a"}, {"server": "http://h"}, {"dataset": "a"},
                {"server": "http://h", "dataset": []}, {}):
        s = Settings.from_options(bad)
        assert (s.server, s.datasets) == (None, ())
