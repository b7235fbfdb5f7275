"""The fuzzpy language server (pygls): live diagnostics, hover, privacy code lens, definitions,
completion.  Start it with `fuzzpy lsp` (stdio).

Diagnostics are the checker's own `Diagnostic`s with the CLI's text, including the budget checks
of `fuzzpy check` (the `# fuzzpy: budget` pragma, or a `budget` initialization option).

The package, in the order a request flows through it:

* `analysis.py`: the server settings and what one analysis of a document produces (including
  the local bindings the checker reports through `Checker.on_bind`, for hover);
* `incremental.py`: `IncrementalChecker`, which re-checks only the functions an edit affected;
* `navigation.py`: positions, the word at the cursor, local names and their binding sites;
* `hover.py`: hover and code lens text;
* `features.py`: the LSP feature handlers (hover, definition, completion, code lens, the
  privacy report command);
* `server.py`: `FuzzpyServer` (documents, debounced checking, publishing diagnostics),
  `create_server` and `main`.
"""

from .analysis import Analysis, Binding, Settings, UnitResult
from .hover import epsilon_summary, hover_binding, hover_function, hover_mechanisms, hover_primitive
from .incremental import IncrementalChecker, make_executor
from .navigation import enclosing_function, find_local, span_to_range, word_at
from .server import FuzzpyServer, create_server, main

__all__ = ["Analysis", "Binding", "FuzzpyServer", "IncrementalChecker", "Settings", "UnitResult", "create_server",
           "enclosing_function", "epsilon_summary", "find_local", "hover_binding", "hover_function",
           "hover_mechanisms", "hover_primitive", "main", "make_executor", "span_to_range", "word_at"]
