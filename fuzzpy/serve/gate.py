"""The service's gate: the outermost layer every HTTP request passes, before the API sees it.

In this order, for every request, known endpoint or not:
1. the caller is authenticated from the Authorization header alone (401 E1001/E1002), before a
   byte of the body is read: a stranger cannot make the service parse anything;
2. the body is read up to `max_request_bytes` (413 E1005), and refused unless it is UTF-8 JSON
   nested at most MAX_JSON_DEPTH deep (400 E1006): a deeply nested document would exhaust the
   stack of the JSON decoder, so it is counted by a flat scan before any decoder sees it;
3. the request goes to the API, with the caller and an audit record in `scope["state"]`;
4. whatever happens, one audit line is written when it ends, with the status sent (an exception
   the API did not handle is answered 500 E0901 without details, and audited).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Optional

from ..diagnostics import Diagnostic
from .audit import AuditLog

MAX_JSON_DEPTH = 32  # a request is an object of strings, lists of strings and a flat object


def failure_body(diags: list[Diagnostic]) -> bytes:
    return json.dumps({"ok": False, "diagnostics": [d.to_json() for d in diags]}).encode("utf-8")


def json_depth_problem(body: bytes) -> Optional[str]:
    """Why a body is not a JSON document this service decodes (too deep, not UTF-8), or None."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return "the request body is not UTF-8"
    depth, in_string, escaped = 0, False, False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return f"the request body is nested more than {MAX_JSON_DEPTH} levels deep"
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return None


class Gate:
    """See the module's docstring.  `authenticate(header)` returns the caller or raises a
    RequestError; it is called in a worker thread (it reads the store)."""

    def __init__(self, app: Any, authenticate: Callable[[Optional[str]], Any], audit: AuditLog, limit: int) -> None:
        self.app, self.authenticate, self.audit, self.limit = app, authenticate, audit, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.monotonic()
        record: dict[str, Any] = {}
        sent: dict[str, Any] = {}

        async def tracked(message: dict) -> None:
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
            await send(message)

        try:
            await self._pass(scope, receive, tracked, record)
        except Exception as exc:  # noqa: BLE001 - never a traceback, never details: they could quote data
            record.update(code="E0901", internal=type(exc).__name__)
            if "status" not in sent:
                await _answer(tracked, 500, [Diagnostic(
                    "E0901", f"internal error in the service ({type(exc).__name__}); no details are shown, because "
                             "they could contain private data")])
        finally:
            client = scope.get("client")
            self.audit.write(request=uuid.uuid4().hex[:12], client=client[0] if client else None,
                             method=scope.get("method"), path=str(scope.get("path", ""))[:200],
                             status=sent.get("status"), ms=round(1000 * (time.monotonic() - start), 1), **record)

    async def _pass(self, scope: dict, receive: Any, send: Any, record: dict) -> None:
        from starlette.concurrency import run_in_threadpool

        from .service import RequestError

        headers = dict(scope.get("headers") or [])
        try:
            who = await run_in_threadpool(self.authenticate, _header(headers, b"authorization"))
        except RequestError as exc:
            record["code"] = exc.diagnostic.code
            return await _answer(send, exc.status, [exc.diagnostic])
        record["analyst"] = who.name
        body = await self._body(headers, receive, send, record)
        if body is None:
            return
        scope.setdefault("state", {}).update(analyst=who, audit=record)
        replay = [{"type": "http.request", "body": body, "more_body": False}]

        async def replayed() -> dict:
            return replay.pop() if replay else await receive()

        await self.app(scope, replayed, send)

    async def _body(self, headers: dict, receive: Any, send: Any, record: dict) -> Optional[bytes]:
        """The whole body, or None when it was refused (the answer is sent)."""
        declared = headers.get(b"content-length")
        too_big = [Diagnostic("E1005", f"the request is larger than this service accepts ({self.limit} bytes)")]
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            record["code"] = "E1005"
            await _answer(send, 413, too_big)
            return None
        chunks, seen = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None  # the client went away
            seen += len(message.get("body", b""))
            if seen > self.limit:
                record["code"] = "E1005"
                await _answer(send, 413, too_big)
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        problem = json_depth_problem(body) if body else None
        if problem is not None:
            record["code"] = "E1006"
            await _answer(send, 400, [Diagnostic("E1006", f"malformed request: {problem}")])
            return None
        return body


def _header(headers: dict, name: bytes) -> Optional[str]:
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")


async def _answer(send: Any, status: int, diags: list[Diagnostic]) -> None:
    body = failure_body(diags)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
