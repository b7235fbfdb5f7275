"""The language server's editor features, over stdio with a real LSP client: completion of
fields after `r.` (also while the document does not parse), hover on `r.age` with the column's
domain and policy, hover at a call with its instance type and cost, standard-library functions
in completion."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient
from test_lsp import SERVER, change_doc, diagnostics_for, hover_text, make_client, open_doc, position_of

SCHEMA = 'schema Adult { age : num[17, 90], sex : cat{"Male", "Female"} default "Male", hours : num[1, 99] drop }\n'

# Two schemas: a lambda's row cannot be guessed from "the only schema in scope".
PROGRAM = 'import "stdlib/stats.fz"\n' + SCHEMA + "schema Other { x : num[0, 1] }\n" + textwrap.dedent("""\

    function helper (db : bag Adult) : num {
      count db + count db
    }

    function main (db : bag Adult) : fuzzy (num, num, num) {
      let adults = filter (fun r -> r.age >= 18) db;
      let t = (count db, true);
      sample c = laplace 0.1 (helper adults + t.1);
      sample n = noisy_count 0.2 adults;
      sample g = gauss_count 0.05 db;
      return (c, n, g)
    }
    """)

ADULT_FIELDS = [("age", "num[17, 90], drop"), ("sex", 'cat{"Male", "Female"}, default "Male"'),
                ("hours", "num[1, 99], drop")]
AGE_DOC = ("Column `age` of schema `Adult`: values outside [17, 90] are clamped to the bounds; "
           "a missing or invalid value drops the row.")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, client_factory=make_client), scope="module")
async def client(lsp_client: LanguageClient):
    markdown = [T.MarkupKind.Markdown, T.MarkupKind.PlainText]
    caps = T.ClientCapabilities(text_document=T.TextDocumentClientCapabilities(
        hover=T.HoverClientCapabilities(content_format=markdown),
        completion=T.CompletionClientCapabilities(
            completion_item=T.ClientCompletionItemOptions(documentation_format=markdown))))
    result = await lsp_client.initialize_session(T.InitializeParams(capabilities=caps,
                                                                    initialization_options={"debounceMs": 10}))
    lsp_client.trigger_characters = result.capabilities.completion_provider.trigger_characters
    yield
    await lsp_client.shutdown_session()


async def complete(client: LanguageClient, uri: str, position: T.Position) -> list[T.CompletionItem]:
    result = await client.text_document_completion_async(T.CompletionParams(T.TextDocumentIdentifier(uri=uri),
                                                                             position))
    return result.items if isinstance(result, T.CompletionList) else list(result or [])


def fields(items: list[T.CompletionItem]) -> list[tuple[str, str]]:
    assert all(i.kind == T.CompletionItemKind.Field for i in items)
    return [(i.label, i.detail) for i in items]


@pytest.mark.asyncio(loop_scope="module")
async def test_dot_completes_columns_also_while_the_document_does_not_parse(client: LanguageClient,
                                                                            tmp_path: Path):
    assert list(client.trigger_characters) == ["."]
    uri = open_doc(client, tmp_path / "dot.fz", PROGRAM)
    assert await diagnostics_for(client, uri, 1) == []
    after_dot = position_of(PROGRAM, "r.age", 2)
    items = await complete(client, uri, after_dot)
    assert fields(items) == ADULT_FIELDS
    assert items[0].documentation.value == AGE_DOC
    assert items[2].documentation.value == ("Column `hours` of schema `Adult`: values outside [1, 99] are "
                                            "clamped to the bounds; a missing or invalid value drops the row.")
    assert items[1].documentation.value == ('Column `sex` of schema `Adult`: a missing or invalid value '
                                            'becomes "Male".')

    # The user deletes `age >= 18` and is about to type a column: main no longer parses, and the
    # types main's variables had when it last checked are used.
    broken = PROGRAM.replace("r.age >= 18", "r.")
    change_doc(client, uri, broken, 2)
    assert [d.code for d in await diagnostics_for(client, uri, 2)] == ["E0101"]
    assert fields(await complete(client, uri, position_of(broken, "r.", 2))) == ADULT_FIELDS
    # a partly typed name: the same list (the client filters it)
    partial = broken.replace("r.", "r.ho")
    change_doc(client, uri, partial, 3)
    await diagnostics_for(client, uri, 3)
    assert fields(await complete(client, uri, position_of(partial, "r.ho", 4))) == ADULT_FIELDS

    # A tuple's positions (1-based), with their types; also after a position already typed.
    assert fields(await complete(client, uri, position_of(PROGRAM, "t.1", 2))) == [("1", "int[0, inf]"), ("2", "bool")]
    assert fields(await complete(client, uri, position_of(PROGRAM, "t.1", 3))) == [("1", "int[0, inf]"), ("2", "bool")]


@pytest.mark.asyncio(loop_scope="module")
async def test_dot_completion_in_a_new_function_and_where_there_is_nothing(client: LanguageClient,
                                                                         tmp_path: Path):
    fresh = SCHEMA + textwrap.dedent("""\
        function bare x (y) (w : num) z : num { x + y + w + z }

        function typed (p : Adult) : num {
          p.
        }

        function lam (db : bag Adult) {
          let n = 3;
          filter (fun row -> row.
        """)
    uri = open_doc(client, tmp_path / "fresh.fz", fresh)
    await diagnostics_for(client, uri, 1)
    # never checked: the declared parameter type, and the only schema for a lambda's row
    assert fields(await complete(client, uri, position_of(fresh, "p.", 2))) == ADULT_FIELDS
    assert fields(await complete(client, uri, position_of(fresh, "row.", 4))) == ADULT_FIELDS

    # After a variable that is not a row (a number, a bag) or an unknown name: no items at all,
    # not the general list.
    text = PROGRAM.replace("let t = (count db, true);", "let t = (count db, true); let z = db.x + adults.y + c.z;")
    uri2 = open_doc(client, tmp_path / "nothing.fz", text)
    await diagnostics_for(client, uri2, 1)
    for needle in ("db.x", "adults.y", "c.z"):
        assert list(await complete(client, uri2, position_of(text, needle, len(needle) - 1))) == [], needle
    # not after a dot: the usual list, with the names in scope and the lark grammar's keywords
    labels = {i.label: i.kind for i in await complete(client, uri, position_of(fresh, "n = 3", 1))}
    assert {"db", "n"} <= labels.keys() and "row" not in labels
    assert labels["seq"] == T.CompletionItemKind.Keyword  # a type keyword the old list missed
    labels = {i.label for i in await complete(client, uri, position_of(fresh, "x + y", 1))}
    assert {"x", "y", "w", "z"} <= labels


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_on_a_field_shows_the_column(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "field.fz", PROGRAM)
    assert await diagnostics_for(client, uri, 1) == []
    doc = T.TextDocumentIdentifier(uri=uri)
    age = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(PROGRAM, "r.age", 3))))
    assert age == f"```fuzzpy\nage : num[17, 90]\n```\n\n{AGE_DOC}"
    pos = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(PROGRAM, "t.1", 2))))
    assert pos == "```fuzzpy\n1 : int[0, inf]\n```"
    # the digits of a number are no projection: the mechanism around them is shown
    mech = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(PROGRAM, "0.1 (helper", 2))))
    assert mech.startswith("**laplace** (in `main`): proven sensitivity 3, epsilon charged 0.1")
    # a field of a bag: no hover
    text = PROGRAM.replace("let t = (count db, true);", "let t = (count db, true); let z = db.age;")
    uri2 = open_doc(client, tmp_path / "field2.fz", text)
    await diagnostics_for(client, uri2, 1)
    none = await client.text_document_hover_async(T.HoverParams(T.TextDocumentIdentifier(uri=uri2),
                                                                position_of(text, "db.age", 4)))
    assert none is None


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_at_a_call_shows_the_instance_type_and_its_cost(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "calls.fz", PROGRAM)
    assert await diagnostics_for(client, uri, 1) == []
    doc = T.TextDocumentIdentifier(uri=uri)

    async def at(needle: str) -> str:
        return hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(PROGRAM, needle, 1))))

    assert await at("noisy_count 0.2") == ("```fuzzpy\nnoisy_count : num -o[0] bag Adult -o[0.2] fuzzy num\n```"
                                           "\n\nAt this call it charges epsilon 0.2 on db.")
    assert await at("gauss_count") == ("```fuzzpy\ngauss_count : num -o[0] bag Adult -o[rho 0.05] fuzzy num\n```"
                                       "\n\nAt this call it charges rho (zCDP) 0.05 on db.")
    assert await at("helper adults") == ("```fuzzpy\nhelper : bag Adult -o[2] num\n```\n\n"
                                         "At this call its result has sensitivity 2 in db.")
    # the declaration itself still shows the function's type
    assert "function helper : bag Adult -o[2] num" in await at("helper (db")

    # The same call with another epsilon: the hover follows the checker.
    text = PROGRAM.replace("noisy_count 0.2", "noisy_count 0.35")
    change_doc(client, uri, text, 2)
    assert await diagnostics_for(client, uri, 2) == []
    hover = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(text, "noisy_count 0", 1))))
    assert hover.endswith("At this call it charges epsilon 0.35 on db.")


@pytest.mark.asyncio(loop_scope="module")
async def test_completion_offers_stdlib_functions_with_their_import(client: LanguageClient, tmp_path: Path):
    text = SCHEMA + "function main (db : bag Adult) : fuzzy num {\n  \n}\n"
    uri = open_doc(client, tmp_path / "nostd.fz", text)
    await diagnostics_for(client, uri, 1)
    items = {i.label: i for i in await complete(client, uri, T.Position(2, 2))}
    noisy = items["noisy_count"]
    assert noisy.kind == T.CompletionItemKind.Function
    assert noisy.detail == "stdlib/stats.fz (adds the import)"
    assert list(noisy.additional_text_edits) == [T.TextEdit(T.Range(T.Position(0, 0), T.Position(0, 0)),
                                                      'import "stdlib/stats.fz"\n')]
    assert noisy.documentation.value == "noisy_count eps b : bag 'a -o[eps] fuzzy num"
    assert items["laplace"].detail == "(eps : num) -> num -o[eps/S] fuzzy num"  # primitives stay
    assert items["top_k"].detail == "stdlib/select.fz (adds the import)"

    imported = 'import "stdlib/stats.fz"\n' + text
    uri2 = open_doc(client, tmp_path / "withstd.fz", imported)
    await diagnostics_for(client, uri2, 1)
    items = {i.label: i for i in await complete(client, uri2, T.Position(3, 2))}
    assert items["noisy_count"].additional_text_edits is None  # in scope already: no second import


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_at_a_call_inside_a_function_checked_at_two_instances(client: LanguageClient, tmp_path: Path):
    text = 'import "stdlib/stats.fz"\n' + SCHEMA + textwrap.dedent("""\
        function both (eps : num) (b : bag Adult) : fuzzy num {
          noisy_count eps b
        }

        function main (db : bag Adult) : fuzzy (num, num) {
          sample x = both 0.1 db;
          sample y = both 0.3 db;
          return (x, y)
        }
        """)
    uri = open_doc(client, tmp_path / "instances.fz", text)
    assert await diagnostics_for(client, uri, 1) == []
    doc = T.TextDocumentIdentifier(uri=uri)
    inner = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(text, "noisy_count", 1))))
    assert inner == ("This call of `noisy_count` is checked at 2 instances:\n\n"
                     "```fuzzpy\nnoisy_count : num -o[0] bag Adult -o[0.1] fuzzy num\n```\n\n"
                     "At this call it charges epsilon 0.1 on b.\n\n"
                     "```fuzzpy\nnoisy_count : num -o[0] bag Adult -o[0.3] fuzzy num\n```\n\n"
                     "At this call it charges epsilon 0.3 on b.")
    second = hover_text(await client.text_document_hover_async(T.HoverParams(doc, position_of(text, "both 0.3", 1))))
    assert second == ("```fuzzpy\nboth : num -o[0] bag Adult -o[0.3] fuzzy num\n```\n\n"
                      "At this call it charges epsilon 0.3 on db.")
