"""Schemas published by a curator service (`fuzzpy serve`), for the language server.

With the options `server` and `dataset`, the server fetches each dataset's published schema
once (GET /v1/datasets/NAME/schema, short timeout, in a thread of its own) with the token the
command-line client uses (fuzzpy/serve/client.py).  Each published declaration is then checked
with every document as a virtual import, unless the document (or a file it imports) declares a
schema of the same name itself: so a program written against the service checks in the editor
without the declaration pasted in, and against exactly the published text.

A failed fetch becomes a warning (never the token, never a traceback); the documents are then
checked on their own.
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass
from typing import Optional

from ...diagnostics import Diagnostic, FuzzError
from ...syntax import ast as A
from ...syntax.parser import parse_module

log = logging.getLogger("fuzzpy.lsp")

FETCH_TIMEOUT_S = 5.0  # per dataset: an unreachable service must not keep the editor waiting long


@dataclass(frozen=True)
class Published:
    """One dataset's published schema declaration."""

    dataset: str
    schema: str   # the declared schema's name, e.g. Adult
    source: str   # the declaration text, exactly as the service publishes it

    @property
    def file(self) -> str:
        """The virtual module's name: shown by go-to-definition and in diagnostics."""
        return f"<published schema of dataset {self.dataset}>"


def fetch_all(server: str, datasets: list[str]) -> tuple[list[Published], list[Diagnostic]]:
    """Every dataset's published schema, and a warning for each one that could not be had."""
    found: list[Published] = []
    warnings: list[Diagnostic] = []
    for name in datasets:
        try:
            item = fetch_one(server, name)
        except FuzzError as exc:
            warnings.extend(_warning(d.code, name, server, d.message) for d in exc.diagnostics)
            continue
        clash = next((p for p in found if p.schema == item.schema), None)
        if clash is not None and clash.source != item.source:
            warnings.append(_warning("E1011", name, server,
                                     f"it publishes a schema named {item.schema}, and so does dataset "
                                     f"{clash.dataset}, differently; only {clash.dataset}'s is used"))
        elif clash is None:
            found.append(item)
    return found, warnings


def fetch_one(server: str, name: str) -> Published:
    """One dataset's schema; FuzzError (E1016, E1018 or the service's own code) when it fails."""
    from ...diagnostics import error
    from ...serve.client import request

    status, doc = request(server, "GET", f"/v1/datasets/{urllib.parse.quote(name, safe='')}/schema",
                          timeout=FETCH_TIMEOUT_S)
    if status != 200:
        diags = doc.get("diagnostics") if isinstance(doc, dict) else None
        if diags and isinstance(diags[0], dict) and diags[0].get("code") in _SERVICE_CODES:
            raise error(diags[0]["code"], str(diags[0].get("message", ""))[:200])
        raise error("E1016", f"the curator service answered {status} unexpectedly")
    source = doc.get("source") if isinstance(doc, dict) else None
    schema = _schema_name(source) if isinstance(source, str) else None
    if schema is None:
        raise error("E1016", "the service's answer is not a single schema declaration")
    return Published(name, schema, source)  # type: ignore[arg-type]


# The refusals the service gives to a schema request (fuzzpy/serve/service.py).
_SERVICE_CODES = ("E1001", "E1002", "E1004", "E1015", "E1017")


def _schema_name(source: str) -> Optional[str]:
    """The name declared by a text holding exactly one schema declaration and nothing else
    (so a hostile or broken service cannot slip functions, params or imports into a program)."""
    module, errors = parse_module(source, "<published schema>")
    if errors or len(module.decls) != 1 or not isinstance(module.decls[0], A.SchemaDecl):
        return None
    return module.decls[0].name


def _warning(code: str, dataset: str, server: str, why: str) -> Diagnostic:
    shown = _safe_url(server)
    message = (f"fuzzpy could not use the published schema of dataset '{dataset}' from {shown}: "
               f"{why.replace(server[:80], shown)}")
    log.warning("%s", message)
    return Diagnostic(code, message, None, ["documents are checked with their own declarations only"],
                      severity="warning")


def _safe_url(server: str) -> str:
    """The URL without any user:password part (never shown)."""
    parts = urllib.parse.urlsplit(server)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))[:120] or server[:80]
