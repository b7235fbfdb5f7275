"""The analyst's side: `fuzzpy run --server URL --dataset NAME` and `fuzzpy check --server ...`
send the program to the curator service and print what the local command would print.

Uses only the standard library (urllib), so analysts need no extra packages.  The token comes
from $FUZZPY_TOKEN, else from the file named by $FUZZPY_TOKEN_FILE, else from ~/.fuzzpy/token.
It is sent to the URL given and nowhere else: a redirect is never followed (E1016 says where it
pointed), so a service, a proxy or a man in the middle cannot send the token on to another host.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

import typer

from ..diagnostics import Diagnostic, FuzzError, error, render

ENV_TOKEN = "FUZZPY_TOKEN"
ENV_TOKEN_FILE = "FUZZPY_TOKEN_FILE"
TIMEOUT_S = 3600.0
EXIT_PROGRAM, EXIT_USAGE, EXIT_RUNTIME = 1, 2, 4


def token() -> str:
    value = os.environ.get(ENV_TOKEN, "").strip()
    if value:
        return value
    path = Path(os.environ.get(ENV_TOKEN_FILE, "").strip() or Path.home() / ".fuzzpy" / "token").expanduser()
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError:
        value = ""
    if not value:
        raise error("E1018", f"no access token: set {ENV_TOKEN}, or write the token the curator gave you "
                             f"into {path}")
    return value


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuse every redirect: following one would send the token to wherever it points."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        from urllib.parse import urlsplit

        where = urlsplit(newurl)
        raise error("E1016", f"the curator service answered {code} with a redirect to "
                             f"{where.scheme}://{where.netloc}{where.path[:80]}; it is not followed, and the token "
                             "was not sent there", None, "give the service's final address with --server")


_OPENER = urllib.request.build_opener(_NoRedirects)


def request(server: str, method: str, path: str, body: Optional[dict] = None,
            timeout: float = TIMEOUT_S) -> tuple[int, Any]:
    """(HTTP status, parsed JSON) of one request; E1016 when the service cannot be reached."""
    url = server.rstrip("/") + path
    if not url.startswith(("http://", "https://")):
        raise error("E1016", f"the server must be an http:// or https:// URL, not {server[:80]!r}")
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token()}", "Content-Type": "application/json", "Accept": "application/json"})
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise error("E1016", f"cannot reach the curator service at {server[:80]}: {reason}") from None
    try:
        return status, json.loads(raw)
    except ValueError:
        raise error("E1016", f"the curator service at {server[:80]} answered {status} without JSON") from None


def _echo(text: str, err: bool = False) -> None:
    if text:
        typer.echo(text, nl=False, err=err)


def _refused(status: int, doc: Any) -> int:
    diags = doc.get("diagnostics") if isinstance(doc, dict) else None
    if not diags:
        raise error("E1016", f"the curator service answered {status} unexpectedly")
    for d in diags:
        typer.echo(render(Diagnostic(d["code"], d["message"], None, list(d.get("notes", [])))), err=True)
    return EXIT_USAGE if 400 <= status < 500 else EXIT_RUNTIME


def _outcome(status: int, doc: Any, fmt: str) -> tuple[int, Any]:
    """Print stderr (and text output); return (exit code, parsed result for json/sarif)."""
    if status != 200 or not isinstance(doc, dict) or "exit_code" not in doc:
        return _refused(status, doc), None
    _echo(doc.get("stderr") or "", err=True)
    if fmt == "text":
        _echo(doc.get("stdout") or "")
    return int(doc["exit_code"]), doc.get("result")


def _program(path: Path) -> Optional[str]:
    from ..syntax.loader import read_source

    text, err = read_source(path)
    if err is not None:
        typer.echo(render(err), err=True)
        return None
    return text


def _body(text: str, path: Path, datasets: list[str], params: dict[str, str], entry: str,
          budget: Optional[str], fmt: str, delta: Optional[str] = None) -> dict:
    return {"program": text, "file": str(path), "dataset": datasets, "params": params, "entry": entry,
            "budget": budget, "format": fmt, "delta": delta}


def run_remote(program: Path, server: str, datasets: list[str], params: dict[str, str], entry: str,
               budget: Optional[str], fmt: str, delta: Optional[str] = None) -> int:
    from ..render.numbers import dumps

    try:
        text = _program(program)
        if text is None:
            return EXIT_PROGRAM
        status, doc = request(server, "POST", "/v1/run", _body(text, program, datasets, params, entry, budget, fmt,
                                                               delta))
        code, result = _outcome(status, doc, fmt)
    except FuzzError as exc:
        return _fail(exc)
    if fmt == "json" and result is not None:
        typer.echo(dumps(result, indent=2))
    return code


def check_remote(files: list[Path], server: str, datasets: list[str], params: dict[str, str], entry: str,
                 budget: Optional[str], fmt: str, delta: Optional[str] = None) -> int:
    """Check each file against the published schema, printing as `fuzzpy check` does."""
    from ..render.numbers import dumps

    codes, results = [], []
    try:
        for path in files:
            text = _program(path)
            if text is None:
                codes.append(EXIT_PROGRAM)
                continue
            status, doc = request(server, "POST", "/v1/check", _body(text, path, datasets, params, entry, budget, fmt,
                                                                     delta))
            code, result = _outcome(status, doc, fmt)
            codes.append(code)
            if result is not None:
                results.append(result)
    except FuzzError as exc:
        return _fail(exc)
    if fmt == "json" and results:
        one = len(results) == 1
        typer.echo(dumps(results[0] if one else {"ok": all(r.get("ok") for r in results), "files": results}, indent=2))
    elif fmt == "sarif" and results:
        log = results[0]
        for extra in results[1:]:
            log["runs"][0]["results"].extend(extra["runs"][0]["results"])
        typer.echo(dumps(log, indent=2))
    return max(codes) if codes else EXIT_USAGE


def print_schema(server: str, name: str, fmt: str) -> int:
    try:
        status, doc = request(server, "GET", f"/v1/datasets/{name}/schema")
        if status != 200:
            return _refused(status, doc)
    except FuzzError as exc:
        return _fail(exc)
    typer.echo(json.dumps(doc, indent=2) if fmt == "json" else doc["source"])
    return 0


def _fail(exc: FuzzError) -> int:
    for d in exc.diagnostics:
        typer.echo(render(d), err=True)
    return EXIT_RUNTIME if any(d.code in ("E1016",) for d in exc.diagnostics) else EXIT_USAGE
