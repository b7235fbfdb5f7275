"""The language server, driven over stdio by a real LSP client (pytest-lsp), and its incremental
checker compared with a plain full check."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as T
from pygls.protocol import default_converter
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from fuzzpy.checking.program import check_source
from fuzzpy.interfaces.lsp import IncrementalChecker, Settings, make_executor, word_at
from fuzzpy.pipeline import budget as R

HANG_GUARD = 60  # seconds before a missing notification fails the test (not a speed assertion)

BROKEN = textwrap.dedent("""\
    schema Adult { age : num[17, 90] }

    function helper (db : bag Adult) : num {
      count db +
    }

    function main (db : bag Adult) : fuzzy num {
      sample c = laplace 0.1 (cuont db);
      return c
    }
    """)

FIXED = textwrap.dedent("""\
    schema Adult { age : num[17, 90] }

    function helper (db : bag Adult) : num {
      count db + count db
    }

    function main (db : bag Adult) : fuzzy num {
      let adults = filter (fun r -> r.age >= 18) db;
      sample c = laplace 0.1 (helper adults);
      return c
    }
    """)

SERVER = [sys.executable, "-m", "fuzzpy.interfaces.cli", "lsp", "--stdio"]


def on_publish(client: LanguageClient, params: T.PublishDiagnosticsParams) -> None:
    """pytest-lsp's handler, plus the version each list of diagnostics belongs to."""
    client.diagnostics[params.uri] = params.diagnostics
    client.versions[params.uri] = params.version


def on_lens_refresh(client: LanguageClient, params: None) -> None:
    client.lens_refreshes += 1


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.versions, client.lens_refreshes = {}, 0
    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: on_publish,
                                   T.WORKSPACE_CODE_LENS_REFRESH: on_lens_refresh})
    return client


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, client_factory=make_client), scope="module")
async def client(lsp_client: LanguageClient):
    markdown = [T.MarkupKind.Markdown, T.MarkupKind.PlainText]
    caps = T.ClientCapabilities(
        workspace=T.WorkspaceClientCapabilities(code_lens=T.CodeLensWorkspaceClientCapabilities(refresh_support=True)),
        text_document=T.TextDocumentClientCapabilities(
            hover=T.HoverClientCapabilities(content_format=markdown),
            completion=T.CompletionClientCapabilities(
                completion_item=T.ClientCompletionItemOptions(documentation_format=markdown))))
    await lsp_client.initialize_session(T.InitializeParams(capabilities=caps,
                                                           initialization_options={"debounceMs": 10}))
    yield
    await lsp_client.shutdown_session()


async def diagnostics_for(client: LanguageClient, uri: str, version: int) -> list[T.Diagnostic]:
    """Wait until the server has published diagnostics for this version of the document."""

    async def wait() -> list[T.Diagnostic]:
        while client.versions.get(uri) != version:
            await client.wait_for_notification(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return list(client.diagnostics[uri])

    return await asyncio.wait_for(wait(), HANG_GUARD)


async def until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def open_doc(client: LanguageClient, path: Path, text: str, version: int = 1) -> str:
    path.write_text(text)
    uri = from_fs_path(str(path))
    client.text_document_did_open(T.DidOpenTextDocumentParams(
        T.TextDocumentItem(uri=uri, language_id="fuzzpy", version=version, text=text)))
    return uri


def change_doc(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[T.TextDocumentContentChangeWholeDocument(text=text)]))


def position_of(text: str, needle: str, offset: int = 0) -> T.Position:
    index = text.index(needle) + offset
    line = text.count("\n", 0, index)
    return T.Position(line, index - (text.rfind("\n", 0, index) + 1))


def hover_text(result: T.Hover | None) -> str:
    assert result is not None
    assert isinstance(result.contents, T.MarkupContent)
    return result.contents.value


# ---- over stdio ------------------------------------------------------------------------------------


@pytest.mark.asyncio(loop_scope="module")
async def test_diagnostics_published_and_cleared(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "two_errors.fz", BROKEN)
    diags = await diagnostics_for(client, uri, 1)
    by_code = {d.code: d for d in diags}
    assert sorted(by_code) == ["E0101", "E0201"]

    syntax = by_code["E0101"]  # the '}' on line 5 (0-based 4) ends `count db +` too early
    assert syntax.range == T.Range(T.Position(4, 0), T.Position(4, 1))
    assert syntax.message.startswith("unexpected '}'\nnote: expected ")
    unknown = by_code["E0201"]  # 'cuont' on line 8, columns 27-31 (1-based) -> 26..31 (0-based, end excl.)
    assert unknown.range == T.Range(position_of(BROKEN, "cuont"), position_of(BROKEN, "cuont", 5))
    assert unknown.range.start == T.Position(7, 26)
    assert unknown.message.splitlines()[:2] == ["unknown name 'cuont'", "note: did you mean count or union?"]
    assert {d.source for d in diags} == {"fuzzpy"}
    assert {d.severity for d in diags} == {T.DiagnosticSeverity.Error}

    change_doc(client, uri, FIXED, 2)
    assert await diagnostics_for(client, uri, 2) == []


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_function_mechanism_variable_primitive(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "hover.fz", FIXED)
    assert await diagnostics_for(client, uri, 1) == []
    doc = T.TextDocumentIdentifier(uri=uri)

    fn = hover_text(await client.text_document_hover_async(
        T.HoverParams(doc, position_of(FIXED, "helper (db", 2))))
    assert "function helper : bag Adult -o[2] num" in fn

    entry = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(FIXED, "main", 1))))
    assert "function main : bag Adult -o[0.1] fuzzy num" in entry
    assert "epsilon = 0.1 (db 0.1)" in entry

    mech = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(FIXED, "laplace", 3))))
    assert "proven sensitivity 2, epsilon charged 0.1, noise scale 20" in mech
    assert "Dwork" in mech  # the registry's justification follows

    var = hover_text(await client.text_document_hover_async(
        T.HoverParams(doc, position_of(FIXED, "helper adults", 8))))
    assert "adults : bag {age : num[17, 90]}" in var or "adults : bag Adult" in var
    assert "sensitivity 1 in db" in var

    prim = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(FIXED, "filter", 1))))
    assert "filter p b" in prim


@pytest.mark.asyncio(loop_scope="module")
async def test_code_lens_shows_epsilon_and_follows_edits(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "lens.fz", FIXED)
    await diagnostics_for(client, uri, 1)
    lenses = await client.text_document_code_lens_async(T.CodeLensParams(T.TextDocumentIdentifier(uri=uri)))
    assert [lens.command.title for lens in lenses] == ["epsilon = 0.1 (db 0.1)"]
    assert lenses[0].range.start == position_of(FIXED, "main")

    refreshes = client.lens_refreshes
    change_doc(client, uri, FIXED.replace("laplace 0.1", "laplace 0.25"), 2)
    await diagnostics_for(client, uri, 2)
    await asyncio.wait_for(until(lambda: client.lens_refreshes > refreshes), HANG_GUARD)
    lenses = await client.text_document_code_lens_async(T.CodeLensParams(T.TextDocumentIdentifier(uri=uri)))
    assert [lens.command.title for lens in lenses] == ["epsilon = 0.25 (db 0.25)"]


LOOP = textwrap.dedent("""\
    schema Adult { age : num[17, 90] }
    param eps : num = 0.1;
    param T : int = 3;
    param hi : num = 50;

    function total (db : bag Adult) : num {
      sum (map (fun r -> clip 0 hi r.age) db)
    }

    function rounds (db : bag Adult) (t : int) : fuzzy num {
      if t <= 0 then return 0
      else
        sample c = laplace eps (count db);
        sample rest = rounds db (t - 1);
        return (c + rest)
    }

    function main (db : bag Adult) : fuzzy num {
      rounds db T
    }
    """)


@pytest.mark.asyncio(loop_scope="module")
async def test_formulas_in_code_lens_and_hover(client: LanguageClient, tmp_path: Path):
    """Derived after the check is published (docs/formulas.md); the lens then shows it."""
    uri = open_doc(client, tmp_path / "formulas.fz", LOOP)
    assert await diagnostics_for(client, uri, 1) == []
    doc = T.TextDocumentIdentifier(uri=uri)
    titles: list[str] = []

    async def lens_has_formula() -> None:
        while not titles or "T*eps" not in titles[0]:
            await asyncio.sleep(0.05)
            lenses = await client.text_document_code_lens_async(T.CodeLensParams(doc))
            titles[:] = [lens.command.title for lens in lenses]

    await asyncio.wait_for(lens_has_formula(), HANG_GUARD)
    assert titles == ["epsilon = 0.3 (db 0.3); epsilon = T*eps"]
    entry = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(LOOP, "main", 1))))
    assert "function main : bag Adult -o[0.3] fuzzy num" in entry
    assert "As a formula: `epsilon = T*eps` (= 0.3 at eps = 0.1, T = 3, hi = 50; matches the checker at " in entry
    fn = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(LOOP, "total (db", 1))))
    assert "function total : bag Adult -o[50] num" in fn
    assert "Sensitivity in `db`: `hi` (= 50)." in fn


@pytest.mark.asyncio(loop_scope="module")
async def test_pragma_budget_gives_the_cli_error(client: LanguageClient, tmp_path: Path):
    text = "# fuzzpy: budget 0.05\n" + FIXED
    uri = open_doc(client, tmp_path / "budget.fz", text)
    diags = await diagnostics_for(client, uri, 1)
    assert [d.code for d in diags] == ["E0401"]
    assert diags[0].message.startswith("main has epsilon 0.1, but the budget is 0.05")
    assert diags[0].range.start == position_of(text, "main")


@pytest.mark.asyncio(loop_scope="module")
async def test_completion_lists_primitives_functions_params_keywords(client: LanguageClient, tmp_path: Path):
    text = "param eps : num = 0.5;\n" + FIXED
    uri = open_doc(client, tmp_path / "complete.fz", text)
    await diagnostics_for(client, uri, 1)
    result = await client.text_document_completion_async(T.CompletionParams(
        T.TextDocumentIdentifier(uri=uri), position_of(text, "return c")))
    items = {i.label: i for i in (result.items if isinstance(result, T.CompletionList) else result)}
    assert items["laplace"].detail == "(eps : num) -> num -o[eps/S] fuzzy num"
    assert items["laplace"].kind == T.CompletionItemKind.Function
    assert items["helper"].detail == "bag Adult -o[2] num"
    assert items["eps"].kind == T.CompletionItemKind.Constant
    assert items["sample"].kind == T.CompletionItemKind.Keyword
    assert "adults" in items  # a local bound before the cursor


@pytest.mark.asyncio(loop_scope="module")
async def test_definition_in_an_imported_library_file(client: LanguageClient, tmp_path: Path):
    lib = tmp_path / "mylib.fz"
    lib.write_text("# a small library\nfunction twice (x : num) : num {\n  x + x\n}\n")
    text = 'import "mylib.fz"\n' + FIXED.replace("(helper adults)", "(twice (count adults))")
    uri = open_doc(client, tmp_path / "uses_lib.fz", text)
    assert await diagnostics_for(client, uri, 1) == []
    doc = T.TextDocumentIdentifier(uri=uri)

    result = await client.text_document_definition_async(T.DefinitionParams(doc, position_of(text, "twice", 2)))
    assert isinstance(result, list) and len(result) == 1
    assert result[0].uri == from_fs_path(str(lib.resolve()))
    assert result[0].range == T.Range(T.Position(1, 9), T.Position(1, 14))

    local = await client.text_document_definition_async(T.DefinitionParams(doc, position_of(text, "adults))")))
    assert local[0].uri == uri and local[0].range.start == position_of(text, "adults =")

    mech = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(text, "laplace"))))
    assert "proven sensitivity 2, epsilon charged 0.1, noise scale 20" in mech


@pytest.mark.asyncio(loop_scope="module")
async def test_errors_in_an_imported_file_and_unsaved_library_edits(client: LanguageClient, tmp_path: Path):
    lib_text = "function twice (x : num) : num {\n  x + x\n}\n"
    lib_uri = open_doc(client, tmp_path / "lib2.fz", lib_text)
    text = 'import "lib2.fz"\n' + FIXED.replace("(helper adults)", "(twice (count adults))")
    uri = open_doc(client, tmp_path / "main2.fz", text)
    assert await diagnostics_for(client, uri, 1) == []

    # An unsaved edit of the open library re-checks the program that imports it.
    broken = lib_text.replace("x + x", "x + y")
    change_doc(client, lib_uri, broken, 2)
    assert [d.code for d in await diagnostics_for(client, lib_uri, 2)] == ["E0201"]
    await asyncio.wait_for(until(lambda: [d.code for d in client.diagnostics[uri]] == ["E0201"]), HANG_GUARD)
    (diag,) = client.diagnostics[uri]
    assert diag.range == T.Range(T.Position(0, 0), T.Position(0, 16))  # shown on the import ...
    (related,) = diag.related_information  # ... with a link to the place in the library
    assert related.location.uri == lib_uri
    assert related.location.range == T.Range(T.Position(1, 6), T.Position(1, 7))


@pytest.mark.asyncio(loop_scope="module")
async def test_ranges_are_in_utf16_units(client: LanguageClient, tmp_path: Path):
    # The checker counts code points; LSP clients count UTF-16 units by default: the emoji is 2 units.
    text = FIXED.replace("sample c =", 'let label = "\U0001F600"; sample c =').replace("(helper adults)",
                                                                                "(helper adulst)")
    uri = open_doc(client, tmp_path / "emoji.fz", text)
    (diag,) = await diagnostics_for(client, uri, 1)
    assert diag.code == "E0201"
    line = text.splitlines()[diag.range.start.line]
    before = line[: line.index("adulst")]
    assert diag.range.start.character == len(before.encode("utf-16-le")) // 2 == len(before) + 1
    assert diag.range.end.character == diag.range.start.character + len("adulst")


@pytest.mark.asyncio(loop_scope="module")
async def test_rapid_changes_publish_the_last_version(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "typing.fz", FIXED)
    await diagnostics_for(client, uri, 1)
    for version in range(2, 8):  # sent back to back: debounced, only the newest matters
        change_doc(client, uri, FIXED.replace("laplace 0.1", f"laplace 0.{version}"), version)
    change_doc(client, uri, FIXED.replace("helper adults", "helpr adults"), 8)
    diags = await diagnostics_for(client, uri, 8)
    assert [(d.code, d.message.splitlines()[0]) for d in diags] == [("E0201", "unknown name 'helpr'")]


def test_a_change_after_a_quiet_moment_is_checked_at_once():
    """Debounce: a change whose document was not changed within the debounce is checked without
    waiting; a change that follows another within it waits the debounce (a burst is checked once)."""
    from fuzzpy.interfaces.lsp.server import FuzzpyServer, debounce_delay

    assert debounce_delay(10.0, float("-inf"), 0.015) == 0.0
    assert debounce_delay(10.0, 9.9, 0.015) == 0.0
    assert debounce_delay(10.0, 9.99, 0.015) == 0.015

    async def edits(server: FuzzpyServer) -> None:
        server.schedule("file:///a.fz", 0.05)  # the first change: nothing to wait for
        server.schedule("file:///a.fz", 0.05)  # right after it: a burst
        server.schedule("file:///b.fz", 0.05)  # another document has its own quiet moment
        await asyncio.sleep(0.1)
        server.schedule("file:///a.fz", 0.05)  # after a quiet moment

    assert _delays_of_scheduled_checks(edits) == [0.0, 0.05, 0.0, 0.0]


def _delays_of_scheduled_checks(edits) -> list[float]:
    """The debounce delay of each check `edits(server)` schedules, on a server whose checks do nothing."""
    from fuzzpy.interfaces.lsp.server import FuzzpyServer

    server, delays = FuzzpyServer(), []

    def check_later(uri: str, generation: int, delay: float, received: float):
        delays.append(delay)
        return asyncio.sleep(0)

    server._check_later = check_later  # type: ignore[method-assign]
    try:
        asyncio.run(edits(server))
    finally:
        server.executor.shutdown()
    return delays


def test_a_change_that_comes_while_an_older_version_is_checked_waits_the_debounce():
    """A burst whose keystrokes reach the server late and spread out (the machine busy) is still
    a burst while the worker checks one of its versions: no change then starts a check at once."""
    from fuzzpy.interfaces.lsp.server import FuzzpyServer, debounce_delay

    assert debounce_delay(10.0, 9.9, 0.015, checking=True) == 0.015
    assert debounce_delay(10.0, float("-inf"), 0.015, checking=True) == 0.015

    async def edits(server: FuzzpyServer) -> None:
        server.schedule("file:///a.fz", 0.05)
        server.state("file:///a.fz").checking = True  # the worker checks that version
        await asyncio.sleep(0.1)
        server.schedule("file:///a.fz", 0.05)  # late, but its older version is not answered yet
        server.state("file:///a.fz").checking = False
        await asyncio.sleep(0.1)
        server.schedule("file:///a.fz", 0.05)  # after a quiet moment, the older check over

    assert _delays_of_scheduled_checks(edits) == [0.0, 0.05, 0.0]


def test_the_cache_refill_after_a_full_check_waits_until_the_document_is_still(monkeypatch):
    """After a full check (a param's new value) the background refill starts only once the
    document has not changed for WARM_IDLE_AFTER_FULL: an edit made meanwhile finds the worker
    free and the refill of the older version never starts.  After a check of a few units it
    starts at once."""
    from types import SimpleNamespace

    from fuzzpy.interfaces.lsp import server as server_module

    monkeypatch.setattr(server_module, "WARM_IDLE_AFTER_FULL", 0.2)
    assert server_module.warm_delay(SimpleNamespace(full=True)) == 0.2  # type: ignore[arg-type]
    assert server_module.warm_delay(SimpleNamespace(full=False)) == 0.0  # type: ignore[arg-type]

    from pygls.workspace import Workspace

    server, uri, warmed = server_module.FuzzpyServer(), "file:///a.fz", []
    server.protocol._workspace = Workspace(None)  # what `initialize` sets up
    server.workspace.put_text_document(T.TextDocumentItem(uri=uri, language_id="fuzzpy", version=1, text="x"))
    full = SimpleNamespace(full=True, peer=False, stale_units=3, runs=1, report=SimpleNamespace(ok=False), known={})

    async def warm(uri: str, generation: int, text: str, file: str) -> None:
        warmed.append(generation)

    server.engine.analyse = lambda *args: full  # type: ignore[method-assign]
    server.publish = lambda *args: None  # type: ignore[method-assign]
    server._warm = warm  # type: ignore[method-assign]
    monkeypatch.setattr(server_module, "known_types", lambda analysis: {})

    async def edits() -> None:
        server.schedule(uri, 0)
        await asyncio.sleep(0.1)  # checked, published, and waiting for the document to be still
        assert warmed == []
        server.schedule(uri, 0)  # the next edit: the first version's refill is given up
        await asyncio.sleep(0.1)
        assert warmed == []
        for _ in range(100):  # the second version's refill, once it has been still long enough
            if warmed:
                break
            await asyncio.sleep(0.05)

    try:
        asyncio.run(edits())
    finally:
        server.executor.shutdown()
    assert warmed == [2]


def test_the_editor_process_freezes_what_it_checked_and_collects_now_and_then(monkeypatch):
    """The server's own process (`freeze_heap`) leaves the objects alive after each step of work
    out of the collector's passes, and makes a full pass only every COLLECT_EVERY steps; a
    server created inside another program (these tests) leaves the collector alone."""
    import gc

    from fuzzpy.interfaces.lsp import server as server_module

    server = server_module.FuzzpyServer()
    try:
        server.settle_heap()
        assert gc.get_freeze_count() == 0 and server.settled_since_collect == 0
        server.freeze_heap = True
        monkeypatch.setattr(server_module, "COLLECT_EVERY", 2)
        server.settle_heap()
        assert gc.get_freeze_count() > 0 and server.settled_since_collect == 1
        server.collect_heap()  # one step since the last pass: not yet
        assert server.settled_since_collect == 1
        server.settle_heap()
        server.collect_heap()
        assert server.settled_since_collect == 0 and gc.get_freeze_count() > 0  # frozen again after the pass
    finally:
        gc.unfreeze()
        server.executor.shutdown()


def test_a_superseded_analysis_stops_between_unit_runs(tmp_path: Path):
    """A newer version of the document stops an analysis after its current unit run: nothing is
    published for it, and the units it ran are cached for the next analysis."""
    file = str(tmp_path / "prog.fz")
    engine, settings, executor = IncrementalChecker(full_factor=100.0), Settings(), make_executor()
    try:
        executor.submit(engine.analyse, PROGRAM, file, settings).result()
        edited = PROGRAM.replace("clip 0 50", "clip 0 60")  # clipped, total and main run again
        calls = []

        def superseded() -> bool:
            calls.append(1)
            return True

        assert executor.submit(engine.analyse, edited, file, settings, None, superseded).result() is None
        assert len(calls) == 1  # asked after the first run (clipped's), before the second
        analysis = executor.submit(engine.analyse, edited, file, settings).result()
        assert analysis.runs == 2  # total and main; clipped came from the cache
        assert comparable(analysis.report.diagnostics) == comparable(full_check(edited, file).diagnostics)
    finally:
        executor.shutdown()



def test_background_warming_stops_between_steps_and_resumes_where_it_stopped(tmp_path: Path):
    """After a full check, the background fills the unit cache in slices: `stop()` is asked
    between two steps (never before the first), the slice returns what is left, and the next
    slice goes on from there until the cache serves every unit."""
    file = str(tmp_path / "prog.fz")
    engine, settings, executor = IncrementalChecker(), Settings(), make_executor()
    try:
        analysis = executor.submit(engine.analyse, PROGRAM, file, settings).result()
        assert analysis.full and analysis.stale_units == 5
        asked = []

        def stop_after_two() -> bool:
            asked.append(1)
            return len(asked) >= 2

        left = executor.submit(engine.warm, PROGRAM, file, settings, None, None, stop_after_two).result()
        assert (left, len(asked)) == (3, 2)  # two units checked, three left
        slices = 1
        while executor.submit(engine.warm, PROGRAM, file, settings, None, None, lambda: False).result():
            slices += 1
        assert slices == 1  # the rest in one slice when nothing stops it
        again = executor.submit(engine.analyse, PROGRAM.replace("count db\n}", "count dbb\n}"), file,
                                settings).result()
        assert (again.runs, again.full) == (1, False)  # the cache is full: one unit ran
    finally:
        executor.shutdown()


def test_a_type_nested_too_deep_for_the_editors_thread_is_shown_and_does_not_stop_the_background(
        tmp_path: Path):
    """A binding whose type is a tuple nested 400 deep: finding out whether its result can move
    does not fail (it is checked again instead of moved), and hover's text for its type, written
    when first read in a thread with a normal stack, is the whole type."""
    import threading

    expr = "1"
    for i in range(400):
        expr = f"({expr}, {i})"
    program = f"function f (y : num) {{\n  let x = {expr};\n  y\n}}\n"
    file = str(tmp_path / "deep.fz")
    engine, settings, executor = IncrementalChecker(), Settings(), make_executor()
    try:
        analysis = executor.submit(engine.analyse, program, file, settings).result()
        while executor.submit(engine.warm, program, file, settings).result():
            pass
        shown = {}
        reader = threading.Thread(target=lambda: shown.update((b.name, b.type) for b in analysis.bindings))
        reader.start()
        reader.join()
        assert shown["y"] == "num" and shown["x"].count("(") == 400
    finally:
        executor.shutdown()

def test_the_warm_up_program_checks_cleanly():
    """The program the server checks at start (to build the parser and import what a check
    uses before the first document) stays a valid program as the language changes."""
    from fuzzpy.interfaces.lsp.server import WARM_UP_PROGRAM

    report = check_source(WARM_UP_PROGRAM, "<warm-up>")
    assert report.ok and report.diagnostics == []



def test_the_server_builds_its_message_converters_and_runs_an_analysis_at_start():
    """warm_up and warm_protocol do at start what the first document would otherwise wait for:
    one whole analysis, and pygls' converters for the document messages and for diagnostics."""
    import json

    from fuzzpy.interfaces.lsp.server import create_server, warm_protocol, warm_up

    warm_up()
    sent = json.loads(warm_protocol(create_server()))
    assert sent["method"] == "textDocument/publishDiagnostics"
    assert [d["code"] for d in sent["params"]["diagnostics"]] == ["E0000"]



def test_an_analysis_says_how_long_each_of_its_stages_took():
    """What the server logs for each published version: the time of each stage of the analysis,
    for a full check (a new document) and for a check of the units an edit changed."""
    from fuzzpy.interfaces.lsp.server import WARM_UP_PROGRAM

    engine, settings, executor = IncrementalChecker(), Settings(), make_executor()
    try:
        full = executor.submit(engine.analyse, WARM_UP_PROGRAM, "/tmp/stages.fz", settings).result()
        executor.submit(engine.warm, WARM_UP_PROGRAM, "/tmp/stages.fz", settings, None, None).result()  # the refill
        edited = WARM_UP_PROGRAM.replace("  return y\n", "  return y  # changed\n")  # main's unit only
        units = executor.submit(engine.analyse, edited, "/tmp/stages.fz", settings).result()
    finally:
        executor.shutdown()
    assert full.full and not units.full and units.runs == 1
    assert list(full.stages) == list(units.stages) == ["load", "plan", "lookup", "check", "merge"]
    assert all(seconds >= 0 for seconds in [*full.stages.values(), *units.stages.values()])


# ---- a server whose checker fails ----------------------------------------------------------------

FAILING_SERVER = [sys.executable, "-c", textwrap.dedent("""\
    from fuzzpy.interfaces import lsp
    real = lsp.IncrementalChecker.analyse
    def analyse(self, text, *args, **kwargs):
        if "BOOM" in text:
            raise ZeroDivisionError("simulated checker bug")
        return real(self, text, *args, **kwargs)
    lsp.IncrementalChecker.analyse = analyse
    lsp.main()
    """)]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=FAILING_SERVER, client_factory=make_client))
async def failing(lsp_client: LanguageClient):
    await lsp_client.initialize_session(T.InitializeParams(capabilities=T.ClientCapabilities()))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_checker_exception_becomes_one_diagnostic(failing: LanguageClient, tmp_path: Path):
    uri = open_doc(failing, tmp_path / "boom.fz", "# BOOM\n" + FIXED)
    diags = await diagnostics_for(failing, uri, 1)
    assert len(diags) == 1
    assert diags[0].code == "internal-error"
    assert "ZeroDivisionError: simulated checker bug" in diags[0].message
    assert any("simulated checker bug" in m.message for m in failing.log_messages)

    change_doc(failing, uri, FIXED, 2)  # the server is still alive and checks the next version
    assert await diagnostics_for(failing, uri, 2) == []


# ---- the incremental checker against a plain full check ------------------------------------------

PROGRAM = textwrap.dedent("""\
    # fuzzpy: budget 1
    schema Adult { age : num[17, 90], hours : num[1, 99] }
    param eps : num = 0.1;

    function clipped (db : bag Adult) {
      map (fun r -> clip 0 50 r.hours) db
    }

    function total (db : bag Adult) : num {
      sum (clipped db)
    }

    function twice x { x + x }

    function unused (db : bag Adult) : num {
      count db
    }

    function main (db : bag Adult) : fuzzy (num, num) {
      sample a = laplace eps (total db);
      sample b = laplace eps (twice (count db));
      return (a, b)
    }
    """)

EDITS = [
    PROGRAM.replace("clip 0 50", "clip 0 60"),                     # a callee of a callee of main
    PROGRAM.replace("count db\n}", "count dbb\n}"),                # unknown name outside main's closure
    PROGRAM.replace("twice x { x + x }", "twice x { x + x + x }"),  # a generic function
    PROGRAM.replace("sum (clipped db)", "sum (clipped db"),         # a syntax error in a callee
    PROGRAM.replace("eps : num = 0.1", "eps : num = 0.6"),          # the prelude: over budget
    PROGRAM.replace("return (a, b)", "return (a, count db)"),      # a privacy error in main
    PROGRAM.replace("function unused", "\nfunction unused"),        # a line inserted: positions move
    PROGRAM,
]


def full_check(text: str, file: str):
    report = check_source(text, file)
    R.apply_budget(report, None)
    return report


def mechanisms(report) -> list:
    return sorted((str(m.span), m.name, m.sensitivity, m.epsilon, m.scale) for m in report.mechanisms)


def comparable(diags) -> list:
    return sorted((d.code, d.message, str(d.span), tuple(d.notes)) for d in diags)


@pytest.mark.parametrize("full_factor", [100.0, 1.5])
def test_incremental_results_equal_a_full_check(tmp_path: Path, full_factor: float):
    """100: always re-check changed units one by one; 1.5 (the default): a full check when cheaper."""
    file = str(tmp_path / "prog.fz")
    engine, settings, executor = IncrementalChecker(full_factor=full_factor), Settings(), make_executor()
    runs = []
    for i, text in enumerate([PROGRAM] + EDITS):
        analysis = executor.submit(engine.analyse, text, file, settings).result()
        while executor.submit(engine.warm, text, file, settings).result():
            pass
        full = full_check(text, file)
        assert comparable(analysis.report.diagnostics) == comparable(full.diagnostics), f"edit {i}"
        assert analysis.report.epsilon == full.epsilon, f"edit {i}"
        if full.ok:
            assert mechanisms(analysis.report) == mechanisms(full), f"edit {i}"
        runs.append((analysis.runs, analysis.full))
    assert analysis.report.epsilon == Fraction(1, 5)
    if full_factor == 100.0:
        # clipped changed: re-check the units whose closure holds it (clipped, total, main) ...
        assert runs[1] == (3, False)
        # ... `unused` alone ...
        assert runs[2] == (1, False)
        # ... and back to the first text: everything comes from the cache.
        assert runs[-1] == (0, False)


def test_word_at_finds_identifiers():
    assert word_at("  sample c = laplace 0.1 x;", 15) == ("laplace", 13, 20)
    assert word_at("  sample c = laplace 0.1 x;", 20) == ("laplace", 13, 20)
    assert word_at("  (x)", 0) is None


UNITS = textwrap.dedent("""\
    schema Flight unit plane { plane : string, dest : string }
    function main (t : bag Flight) {
      sample ks = select_keys 1 0.000001 2 (fun r -> r.dest) t;
      laplace 1 (count (bound_rows 3 t))
    }
    """)


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_shows_the_privacy_unit_and_what_a_selection_costs(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "units.fz", UNITS)
    assert await diagnostics_for(client, uri, 1) == []
    doc = T.TextDocumentIdentifier(uri=uri)

    schema = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(UNITS, "Flight", 1))))
    assert "schema Flight unit plane {" in schema and "Privacy unit: `plane`" in schema and "bound_rows k t" in schema

    table = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(UNITS, "(t :", 1))))
    assert "bag Flight (unit plane)" in table

    select = hover_text(await client.text_document_hover_async(
        T.HoverParams(doc, position_of(UNITS, "select_keys", 2))))
    assert "proven sensitivity 1, epsilon charged 1, noise scale 2, delta 0.000001" in select.replace("1e-06", "0.000001")
    assert "each unit counted in at most 2 keys" in select

    bound = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(UNITS, "bound_rows", 2))))
    assert "bound_rows k t" in bound and "at most k rows" in bound

    lap = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(UNITS, "laplace", 2))))
    assert "proven sensitivity 3, epsilon charged 1, noise scale 3" in lap


BOUNDS = textwrap.dedent("""\
    schema Flight unit plane { plane : string, dest : string, origin : cat{"EWR", "JFK"} }
    function main (t : bag Flight) {
      sample n = laplace 1 (count (bound_rows 3 t));
      sample h = each (fun g -> laplace 1 (count g)) (bound_groups 2 4 (fun r -> r.origin) t);
      sample ks = select_keys_optimal 1 0.000001 2 (fun r -> r.dest) t;
      return (n, h, ks)
    }
    """)


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_on_a_bound_shows_what_the_distance_becomes(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "bounds.fz", BOUNDS)
    assert await diagnostics_for(client, uri, 1) == []
    doc = T.TextDocumentIdentifier(uri=uri)
    rows = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(BOUNDS, "bound_rows", 2))))
    assert "At this call at most 3 rows of each plane: a plane added or removed moves the result" in rows
    assert "by at most 3 rows, so a count or sum of it costs 3 times its epsilon" in rows
    assert "its result has sensitivity 3 in t" in rows
    assert "bound_rows k t" in rows  # the registry's text follows
    groups = hover_text(await client.text_document_hover_async(
        T.HoverParams(doc, position_of(BOUNDS, "bound_groups", 2))))
    assert "at most 2 groups of each plane and 4 rows in each" in groups
    assert "moves at most 2 parts, each by at most 4 rows (8 in all)" in groups
    assert "costs 8 times a part's epsilon with laplace and 32 times its rho with gaussian" in groups
    select = hover_text(await client.text_document_hover_async(
        T.HoverParams(doc, position_of(BOUNDS, "select_keys_optimal", 2))))
    assert "delta 0.000001" in select.replace("1e-06", "0.000001")
    assert "optimal curve for its count of units, one half from 27 units" in select
    assert "each unit counted in at most 2 keys" in select


JOIN = textwrap.dedent("""\
    schema F { tail : string, delay : num[0, 10] }
    public schema P { tail : string unique, seats : int[0, 10] }

    function main (f : bag F) (p : bag P) : fuzzy num {
      let t = truncate 3 "tail" f;
      laplace 1 (count (join_private "tail" "tail" t p))
    }
    """)


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_on_a_join_shows_its_stability_and_where_each_bound_comes_from(client: LanguageClient,
                                                                                    tmp_path: Path):
    uri = open_doc(client, tmp_path / "join.fz", JOIN)
    assert await diagnostics_for(client, uri, 1) == []
    doc = T.TextDocumentIdentifier(uri=uri)
    join = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(JOIN, "join_private", 1))))
    assert "one row per tail (declared in public schema P)" in join
    assert "at most 3 rows per tail (truncate 3, line 5)" in join
    assert "join_private \"ka\" \"kb\" a b" in join  # the registry's text follows
    cut = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(JOIN, "truncate", 1))))
    assert "at most 3 rows per tail" in cut and "2 rows" in cut


@pytest.mark.parametrize("level, fuzzpy_level, root_level", [("info", "INFO", "WARNING"), ("debug", "DEBUG", "DEBUG"),
                                                              ("error", "ERROR", "ERROR")])
def test_log_level_sets_the_servers_own_log_and_libraries_only_at_debug(monkeypatch, level, fuzzpy_level,
                                                                         root_level):
    """`fuzzpy lsp --log-level info` shows the server's checks and stages, not pygls' log of
    every message body (which it writes at info); at debug both."""
    import logging

    from typer.testing import CliRunner

    import fuzzpy.interfaces.lsp as lsp
    from fuzzpy.interfaces.cli import app

    monkeypatch.setattr(lsp, "main", lambda **options: None)  # the command's set-up only, no stdio loop
    root, ours = logging.getLogger(), logging.getLogger("fuzzpy")
    saved = root.level, list(root.handlers), ours.level
    try:
        root.handlers = []  # basicConfig configures only a root logger without handlers
        done = CliRunner().invoke(app, ["lsp", "--log-level", level])
        assert done.exit_code == 0, done.output
        assert (logging.getLevelName(ours.level), logging.getLevelName(root.level)) == (fuzzpy_level, root_level)
    finally:
        root.setLevel(saved[0])
        root.handlers = saved[1]
        ours.setLevel(saved[2])
