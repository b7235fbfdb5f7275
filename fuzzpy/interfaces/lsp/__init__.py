"""The fuzzpy language server (pygls): live diagnostics, hover, privacy code lens, definitions,
completion.  Start it with `fuzzpy lsp` (stdio).

Diagnostics are the checker's own `Diagnostic`s with the CLI's text, including the budget checks
of `fuzzpy check` (the `# fuzzpy: budget` pragma, or a `budget` initialization option).

The package, in the order a request flows through it:

* `analysis.py`: the server settings and what one analysis of a document produces (including
  the local bindings the checker reports through `Checker.on_bind`, for hover);
* `incremental.py`: `IncrementalChecker`, which re-checks only the functions an edit affected;
* `peer.py`: the peer process, which checks half of a check of the whole file on another core;
* `navigation.py`: positions, the word at the cursor, local names and their binding sites;
* `hover.py`: hover and code lens text;
* `features.py`: the LSP feature handlers (hover, definition, completion, code lens, the
  privacy report command);
* `server.py`: `FuzzpyServer` (documents, debounced checking, publishing diagnostics),
  `create_server` and `main`.
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use (PEP 562), not with the package: the peer process (peer.py) imports the
# checker's part only, without pygls' and lsprotocol's (a second of its start on a busy machine).
_EXPORTS = {
    "Analysis": "analysis", "Binding": "analysis", "Settings": "analysis", "UnitResult": "analysis",
    "epsilon_summary": "hover", "hover_binding": "hover", "hover_function": "hover",
    "hover_mechanisms": "hover", "hover_primitive": "hover",
    "IncrementalChecker": "incremental", "make_executor": "incremental",
    "enclosing_function": "navigation", "find_local": "navigation", "span_to_range": "navigation",
    "word_at": "navigation",
    "FuzzpyServer": "server", "create_server": "server", "main": "server",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
