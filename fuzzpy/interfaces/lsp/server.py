"""The language server itself: `FuzzpyServer` (open documents, debounced checking in a worker
thread, publishing diagnostics, client capabilities), `create_server`, which registers the
handlers of features.py, and `main`.

Robustness: every handler catches its own exceptions.  A failing analysis is logged and shown as
one `internal-error` diagnostic; the server keeps running.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from ...diagnostics import Diagnostic, Span, note_line
from ...primitives.registry import all_primitives
from ...stdio import reserve_stdout
from ...syntax import ast as A
from ...syntax.loader import resolve_import
from .analysis import Analysis, Settings
from .features import _safe, code_lens, completion, definition, hover, privacy_report
from .incremental import WARM_UP_PROGRAM, IncrementalChecker, make_executor
from .members import known_types, merge_known
from .navigation import span_to_range
from .peer import Peer
from .remote import fetch_all

log = logging.getLogger("fuzzpy.lsp")

SOURCE = "fuzzpy"
INTERNAL_CODE = "internal-error"
WARM_SLICE = 0.05  # seconds of background work the worker gives one document at a time
# After a full check, how long the document must stay unchanged before the cache refill starts:
# the next edit of a burst (a param being typed) would otherwise wait for a refill step under way.
WARM_IDLE_AFTER_FULL = 0.3
# How long a thread holding the interpreter lock keeps it while another waits (Python's default:
# 5 ms).  While the worker checks, the event loop needs the lock a few times to read each
# message (header, body, handler): at 5 ms a turn, the keystrokes of a burst reached the server
# tens of ms late, too late to stop the check of an older version.
SWITCH_INTERVAL = 0.0005
COLLECT_EVERY = 1_000  # steps of work (checks, background steps) between two full collections


# ---- the server -----------------------------------------------------------------------------------


@dataclass
class _DocState:
    generation: int = 0
    task: Optional[asyncio.Task] = None
    analysis: Optional[Analysis] = None
    published: Optional[int] = None
    last_change: float = float("-inf")  # the event loop's time of the last change scheduled
    checking: bool = False  # whether the worker is checking a version not yet published


class FuzzpyServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("fuzzpy", _version(), text_document_sync_kind=T.TextDocumentSyncKind.Full)
        self.settings = Settings()
        self.engine = IncrementalChecker()
        self.executor = make_executor()
        self.docs: dict[str, _DocState] = {}
        self.remote_warnings: list[Diagnostic] = []  # failed fetches of published schemas
        self.fetch_task: Optional[asyncio.Task] = None
        # The editor's own process (`main`) keeps what it has checked out of the garbage
        # collector's passes (gc.freeze after each step of work): a full pass over the caches
        # took 100-500 ms and fell at random inside an edit's check.  Process-wide, so off for a
        # server created inside another program (the tests).
        self.freeze_heap = False
        self.settled_since_collect = 0

    def use_peer(self, peer: Optional[Peer]) -> None:
        """Check half of each full check in `peer`'s process (peer.py); None: all here."""
        self.engine.peer = peer

    def close_peer(self) -> None:
        """End the peer process (the `peer` option is off, or the server ends)."""
        peer, self.engine.peer = self.engine.peer, None
        if peer is not None:
            peer.close()

    def settle_heap(self) -> None:
        """Leave every object alive now out of the collector's later passes."""
        if self.freeze_heap:
            gc.freeze()
            self.settled_since_collect += 1

    def collect_heap(self) -> None:
        """Now and then (called while the editor idles), one full pass over everything, frozen
        or not, then freeze again: it frees the cycles among frozen objects that died since.  A
        check leaves few (tens of objects per file checked), and the pass costs as much as a
        full check, so it runs once every `COLLECT_EVERY` steps of work."""
        if self.freeze_heap and self.settled_since_collect >= COLLECT_EVERY:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.settled_since_collect = 0

    # -- schemas published by a curator service (remote.py)

    async def fetch_published(self) -> None:
        """Fetch once, in a thread of its own (checks go on meanwhile), then re-check every open
        document with the schemas, or with a warning saying why there are none."""
        settings = self.settings
        if settings.server is None:
            return
        loop = asyncio.get_running_loop()
        try:
            found, warnings = await loop.run_in_executor(None, fetch_all, settings.server, list(settings.datasets))
        except Exception:  # noqa: BLE001 - a bug here must not take the server down
            log.exception("fetching the published schemas failed")
            return
        self.settings = dataclasses.replace(self.settings, published=tuple(found))
        self.remote_warnings = warnings
        for w in warnings:
            self.log_message(T.MessageType.Warning, w.message)
        for p in found:
            self.log_message(T.MessageType.Info, f"fuzzpy: published schema {p.schema} of dataset {p.dataset} "
                                                 "is checked with documents that do not declare it")
        for uri in list(self.workspace.text_documents):
            self.schedule(uri, 0)

    # -- documents and files

    def file_of(self, uri: str) -> str:
        path = to_fs_path(uri) if uri.startswith("file:") else None
        return str(Path(path).resolve()) if path else uri

    def overlays(self, exclude: str) -> dict[str, str]:
        """Unsaved text of the other open documents, for imports."""
        out = {}
        for uri, doc in list(self.workspace.text_documents.items()):
            if uri != exclude and uri.startswith("file:"):
                out[self.file_of(uri)] = doc.source
        return out

    def state(self, uri: str) -> _DocState:
        return self.docs.setdefault(uri, _DocState())

    # -- scheduling

    def schedule(self, uri: str, delay: float) -> None:
        """Debounce: each change restarts the timer; only the newest version is published.  A
        change after a quiet moment is checked at once (`debounce_delay`)."""
        st = self.state(uri)
        loop = asyncio.get_running_loop()
        now = loop.time()
        delay, st.last_change = debounce_delay(now, st.last_change, delay, st.checking), now
        st.generation += 1
        if st.task is not None and not st.task.done():
            st.task.cancel()
        st.task = loop.create_task(self._check_later(uri, st.generation, delay, now))

    def schedule_dependents(self, uri: str) -> None:
        file = self.file_of(uri)
        for other, st in list(self.docs.items()):
            if other != uri and st.analysis is not None and file in st.analysis.report.sources:
                self.schedule(other, self.settings.debounce)

    async def _check_later(self, uri: str, generation: int, delay: float, received: float) -> None:
        st, version = self.state(uri), None
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            doc = self.workspace.get_text_document(uri)
            text, version, file = doc.source, doc.version, self.file_of(uri)
            loop = asyncio.get_running_loop()
            started, began, overlays = loop.time(), [], self.overlays(uri)

            def analyse() -> Optional[Analysis]:
                began.append(loop.time())  # the worker may still be busy with background work
                st.checking = True
                try:
                    return self.engine.analyse(text, file, self.settings, overlays,
                                               lambda: st.generation != generation)
                finally:
                    st.checking = False

            analysis = await loop.run_in_executor(self.executor, analyse)
            returned = loop.time()
            self.settle_heap()
            if analysis is None:  # superseded by a newer version between two unit runs
                return
            log.info("checked %s v%s in %.1f ms (%.1f ms waiting for the worker; %d check runs%s%s)", uri, version,
                     1000 * (returned - started), 1000 * (began[0] - started), analysis.runs,
                     ", one in the peer" if analysis.peer else "", ", full" if analysis.full else "")
            if st.generation != generation:
                return
            previous = st.analysis
            st.analysis = analysis
            publishing = loop.time()
            self.publish(uri, version, analysis)
            if log.isEnabledFor(logging.INFO):  # where an edit's time went, from its arrival to its diagnostics
                log.info("stages of v%s in ms: %s", version, _stages_text(
                    [("debounce", started - received), ("worker busy", began[0] - started)]
                    + list(analysis.stages.items())
                    + [("to the loop", returned - began[0] - sum(analysis.stages.values())),
                       ("freeze", publishing - returned), ("publish", loop.time() - publishing)]))
            analysis.known = merge_known(previous.known if previous is not None else {}, known_types(analysis))
            if analysis.stale_units:
                await asyncio.sleep(warm_delay(analysis))  # cancelled with this task by the next edit
                await self._warm(uri, generation, text, file)
            await self._derive_formulas(uri, generation, text, file, analysis)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing check must never take the server down
            self.internal_error(uri, version, exc)

    async def _derive_formulas(self, uri: str, generation: int, text: str, file: str, analysis: Analysis) -> None:
        """Costs as formulas of the numeric params, for hover and the code lens: derived in the
        executor once the document has been still for `formula_delay` after its check was
        published (typing never waits behind a derivation), given up when it changes meanwhile."""
        from fractions import Fraction

        report, settings = analysis.report, self.settings
        if not settings.formulas or not report.ok or report.entry is None or not any(
                isinstance(v, Fraction) for v in report.params.values()):
            return
        await asyncio.sleep(settings.formula_delay)  # cancelled with this task by the next edit
        if self.state(uri).generation != generation:
            return
        from ...checking.program import check_source
        from ...render.formulas import attach_formulas

        overlays, virtual = self.overlays(uri), settings.virtual(set(report.schemas))

        def check(params: dict[str, str]) -> Any:
            if self.state(uri).generation != generation:
                raise RuntimeError("the document changed")
            return check_source(text, file, params, settings.entry, overlays, virtual or None)

        def work() -> None:
            try:  # from a plain full check: its param types, and the same numbers as the lens
                full = check(settings.params)
                attach_formulas(full, settings.params, "text", settings.formula_timeout, settings.entry, check)
                report.formulas = full.formulas
            except RuntimeError:
                report.formulas = None

        await asyncio.get_running_loop().run_in_executor(self.executor, work)
        self.settle_heap()
        if self.state(uri).generation == generation and report.formulas is not None:
            self.refresh_lenses()

    async def _warm(self, uri: str, generation: int, text: str, file: str) -> None:
        """Refill the unit cache after a full check while nothing is edited, in slices of
        `WARM_SLICE` seconds: each slice loads and plans the file once, and stops after the unit
        it is checking when this document changes (the edit waits for that unit only); between
        slices, other documents' checks get the worker."""
        loop = asyncio.get_running_loop()
        st = self.state(uri)
        remaining = 1
        while remaining and st.generation == generation:
            def stop(until: float = loop.time() + WARM_SLICE) -> bool:
                return st.generation != generation or loop.time() > until
            remaining = await loop.run_in_executor(self.executor, self.engine.warm, text, file, self.settings,
                                                   self.overlays(uri), None, stop)
            self.settle_heap()
        if self.state(uri).generation == generation:
            await loop.run_in_executor(self.executor, self.collect_heap)
            self.log_message(T.MessageType.Log, f"fuzzpy: analysis cache ready for {uri}")

    # -- output

    def publish(self, uri: str, version: Optional[int], analysis: Analysis) -> None:
        lines = analysis.text.splitlines(True) or [""]
        diags = [self.to_lsp(d, analysis, lines) for d in analysis.report.diagnostics + self.remote_warnings]
        self.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, version=version,
                                                                          diagnostics=diags))
        self.state(uri).published = version
        self.refresh_lenses()

    def to_lsp(self, d: Diagnostic, analysis: Analysis, lines: list[str]) -> T.Diagnostic:
        message = "\n".join([d.message] + [note_line(n) for n in d.notes])
        severity = {"error": T.DiagnosticSeverity.Error, "warning": T.DiagnosticSeverity.Warning}.get(
            d.severity, T.DiagnosticSeverity.Information)
        related = None
        span = d.span
        if span is not None and span.file != analysis.file:
            # An error inside an imported file: shown on the import, with a link to the place.
            related = [T.DiagnosticRelatedInformation(
                T.Location(from_fs_path(span.file) or span.file, span_to_range(span, [], None)), d.message)]
            span = _import_span_for(analysis, span.file)
        return T.Diagnostic(range=span_to_range(span, lines, self.codec()), message=message, severity=severity,
                            code=d.code, source=SOURCE, related_information=related)

    def internal_error(self, uri: str, version: Optional[int], exc: BaseException) -> None:
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        log.error("analysis of %s failed:\n%s", uri, detail)
        self.log_message(T.MessageType.Error, f"fuzzpy: analysis of {uri} failed:\n{detail}")
        diag = T.Diagnostic(range=T.Range(T.Position(0, 0), T.Position(0, 0)),
                            message=f"internal error in fuzzpy while checking this file: "
                                    f"{type(exc).__name__}: {exc} (please report it; details in the server log)",
                            severity=T.DiagnosticSeverity.Error, code=INTERNAL_CODE, source=SOURCE)
        try:
            self.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, version=version,
                                                                              diagnostics=[diag]))
        except Exception:  # noqa: BLE001 - the connection itself may be gone
            log.exception("could not publish the internal error")

    def log_message(self, kind: T.MessageType, message: str) -> None:
        try:
            self.window_log_message(T.LogMessageParams(type=kind, message=message))
        except Exception:  # noqa: BLE001
            log.exception("could not send a log message")

    def refresh_lenses(self) -> None:
        caps = self.client_capabilities.workspace if self.client_capabilities else None
        lens = caps.code_lens if caps else None
        if lens is not None and lens.refresh_support:
            try:
                self.workspace_code_lens_refresh(None).add_done_callback(lambda f: f.exception())
            except Exception:  # noqa: BLE001
                log.exception("code lens refresh failed")

    def markup(self, value: str, formats: Optional[list]) -> T.MarkupContent:
        """Markdown when the client accepts it, else the same text without the fences."""
        if formats and T.MarkupKind.Markdown in formats:
            return T.MarkupContent(kind=T.MarkupKind.Markdown, value=value)
        plain = re.sub(r"```\w*\n?", "", value).replace("**", "").replace("`", "")
        return T.MarkupContent(kind=T.MarkupKind.PlainText, value=plain.strip())

    def text_caps(self) -> Any:
        caps = self.client_capabilities
        return caps.text_document if caps is not None else None

    def hover_formats(self) -> Optional[list]:
        hover = getattr(self.text_caps(), "hover", None)
        return hover.content_format if hover is not None else None

    def completion_formats(self) -> Optional[list]:
        completion = getattr(self.text_caps(), "completion", None)
        item = completion.completion_item if completion is not None else None
        return item.documentation_format if item is not None else None

    def codec(self) -> Any:
        try:
            return self.workspace.position_codec
        except Exception:  # noqa: BLE001 - before initialize
            return None

    # -- queries

    def analysis(self, uri: str) -> Optional[Analysis]:
        st = self.docs.get(uri)
        return st.analysis if st else None

    def cursor(self, uri: str, pos: T.Position) -> tuple[int, int, str]:
        """The 1-based (line, column) in code points and the text of that line."""
        doc = self.workspace.get_text_document(uri)
        server_pos = doc.position_from_client_units(pos)
        lines = doc.lines
        text = lines[server_pos.line] if server_pos.line < len(lines) else ""
        return server_pos.line + 1, server_pos.character + 1, text.rstrip("\r\n")


def debounce_delay(now: float, last_change: float, debounce: float, checking: bool = False) -> float:
    """How long to wait before checking a change made at `now`: nothing when the document's
    previous change is more than `debounce` old and its check is over (a keystroke on its own,
    not the start of a burst the debounce is for), else `debounce`.  The first change of a burst
    is then checked at once, and its check is not published if later changes arrive meanwhile
    (one check wasted, at most, per burst); every later change of the burst waits as before.  A
    change that comes while an older version is still being checked is part of a burst even when
    it comes late (under load, the keystrokes of a burst reach the server spread out): checked at
    once, each would start one more check that no one sees."""
    return 0.0 if now - last_change > debounce and not checking else debounce


def warm_delay(analysis: Analysis) -> float:
    """How long the document must stay unchanged before its cache is refilled: after a full
    check (a param's new value, an opened file), `WARM_IDLE_AFTER_FULL`, so that the next edit
    of a burst finds the worker free; after a check of a few units, none (the refill then only
    finds out which new results can move, and the next inserted line needs that)."""
    return WARM_IDLE_AFTER_FULL if analysis.full else 0.0


def _stages_text(stages: list[tuple[str, float]]) -> str:
    return ", ".join(f"{name} {1000 * seconds:.1f}" for name, seconds in stages)


def _import_span_for(analysis: Analysis, file: str) -> Optional[Span]:
    imports = [d for d in analysis.own_decls if isinstance(d, A.Import)]
    for d in imports:
        target = resolve_import(d.path, analysis.file)
        if target is not None and str(target) == file:
            return d.span
    return imports[0].span if imports else None


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("fuzzpy")
    except Exception:  # noqa: BLE001
        return "0.0.0"


def create_server() -> FuzzpyServer:
    ls = FuzzpyServer()

    @ls.feature(T.INITIALIZE)
    def on_initialize(ls: FuzzpyServer, params: T.InitializeParams) -> None:
        try:
            ls.settings = Settings.from_options(params.initialization_options)
        except Exception:  # noqa: BLE001 - bad options fall back to the defaults
            log.exception("invalid initializationOptions")  # not the options: they may hold a URL's password
        if not ls.settings.peer:
            ls.close_peer()

    @ls.feature(T.SHUTDOWN)
    def on_shutdown(ls: FuzzpyServer, params: None) -> None:
        ls.close_peer()

    @ls.feature(T.INITIALIZED)
    def on_initialized(ls: FuzzpyServer, params: T.InitializedParams) -> None:
        if ls.settings.server is not None:
            ls.fetch_task = asyncio.get_running_loop().create_task(ls.fetch_published())

    @ls.feature(T.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: FuzzpyServer, params: T.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @ls.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: FuzzpyServer, params: T.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.settings.debounce)
        ls.schedule_dependents(params.text_document.uri)

    @ls.feature(T.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: FuzzpyServer, params: T.DidSaveTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @ls.feature(T.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: FuzzpyServer, params: T.DidCloseTextDocumentParams) -> None:
        st = ls.docs.pop(params.text_document.uri, None)
        if st is not None and st.task is not None:
            st.task.cancel()
        ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=params.text_document.uri,
                                                                        diagnostics=[]))

    ls.feature(T.TEXT_DOCUMENT_HOVER)(_safe(None)(hover))
    ls.feature(T.TEXT_DOCUMENT_DEFINITION)(_safe(None)(definition))
    ls.feature(T.TEXT_DOCUMENT_COMPLETION, T.CompletionOptions(trigger_characters=["."]))(
        _safe(T.CompletionList(is_incomplete=False, items=[]))(completion))
    ls.feature(T.TEXT_DOCUMENT_CODE_LENS)(_safe([])(code_lens))
    ls.command("fuzzpy.privacyReport")(privacy_report)
    return ls


def warm_up() -> None:
    """Build the parser and import what a check imports on first use (30-50 ms) before the
    editor's first request, not inside the first document's check: the whole analysis runs
    once (its merge, the budget and the hover records first cost 5-10 ms more), by a checker
    of its own whose cache is then dropped."""
    IncrementalChecker().analyse(WARM_UP_PROGRAM, "<fuzzpy-lsp warm-up>", Settings())


def warm_protocol(ls: FuzzpyServer) -> str:
    """Build pygls' converters for the messages of opening and editing a document (received) and
    of publishing diagnostics (sent): each is built on its message's first use, and the first
    document's diagnostics waited 7-13 ms for them.  Returns the diagnostics message it wrote."""
    import json

    protocol = ls.protocol
    item = {"uri": "file:///warm-up.fz", "languageId": "fuzzpy", "version": 1, "text": "x"}
    for method, params in ((T.TEXT_DOCUMENT_DID_OPEN, {"textDocument": item}),
                           (T.TEXT_DOCUMENT_DID_CHANGE, {"textDocument": {"uri": item["uri"], "version": 2},
                                                         "contentChanges": [{"text": "y"}]}),
                           (T.TEXT_DOCUMENT_DID_CLOSE, {"textDocument": {"uri": item["uri"]}})):
        protocol.structure_message({"jsonrpc": "2.0", "method": method, "params": params})
    diagnostic = T.Diagnostic(range=T.Range(T.Position(0, 0), T.Position(0, 1)), message="m",
                              severity=T.DiagnosticSeverity.Error, code="E0000", source=SOURCE,
                              related_information=[T.DiagnosticRelatedInformation(
                                  T.Location(item["uri"], T.Range(T.Position(0, 0), T.Position(0, 1))), "m")])
    publish = protocol.get_message_type(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(
        method=T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, jsonrpc="2.0",
        params=T.PublishDiagnosticsParams(uri=item["uri"], version=1, diagnostics=[diagnostic]))
    return json.dumps(publish, default=protocol._serialize_message)  # what pygls does before sending


def start_peer(wanted: bool = True) -> Optional[Peer]:
    """The peer process (peer.py), when wanted and the machine has two cores or more (on one,
    the two halves would take turns): started now and warmed in the background when a core is
    free, else at the first check of a whole file that finds one free (its start, half a second
    of CPU time, would slow the server's first checks on a busy machine)."""
    if not wanted or (os.cpu_count() or 1) < 2:
        return None
    try:
        peer = Peer()
        if peer.core_to_spare():
            peer.start()
        return peer
    except Exception:  # noqa: BLE001 - without it the server checks on one core, as before
        log.exception("could not start the peer process")
        return None


def main(peer: bool = True) -> None:
    """Serve on stdin/stdout (the editor starts this process); `peer`: check half of each full
    check in a second process (on two cores or more; the `peer` option can still turn it off).

    The protocol gets private duplicates of the standard streams; descriptor 1 points at stderr
    for the whole life of the server, so nothing a library prints (HiGHS's banner, from C++)
    can corrupt the JSON-RPC stream (fuzzpy/stdio.py); the peer inherits that descriptor 1."""
    stdin, stdout = reserve_stdout()
    sys.setswitchinterval(SWITCH_INTERVAL)
    logging.basicConfig(level=logging.WARNING, format="fuzzpy-lsp %(levelname)s %(message)s")
    started = start_peer(peer)  # first: it starts and warms up while this process does
    all_primitives()  # load the registry before the first request
    warm_up()
    server = create_server()
    server.use_peer(started)
    try:
        warm_protocol(server)
    except Exception:  # noqa: BLE001 - only a warm-up: the first messages build them instead
        log.exception("warming the protocol's converters failed")
    server.freeze_heap = True
    server.settle_heap()
    try:
        server.start_io(stdin, stdout)
    finally:
        server.close_peer()
