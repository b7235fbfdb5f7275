"""Execution engines: where a program's tables live while it runs (docs/scale.md).

The pandas engine is the default: every table is a pandas object in this process, and the
interpreter calls the primitives' own runtime implementations.  Another engine (Dask, in
`dask_engine.py`) binds the entry point's tables to `RemoteBag`s: values the interpreter only
passes around, and that the engine's own implementations of the bag primitives consume.  The
interpreter asks the engine first (`Engine.call_prim`) whenever the run has one; this module
imports nothing heavy, so the pandas path never imports Dask.
"""

from __future__ import annotations

from typing import Any

ENGINES = ("pandas", "dask")


# rule Engines
class Engine:
    """What the interpreter needs from an engine other than pandas."""

    def call_prim(self, interp: Any, prim: Any, node: Any, args: list[Any]) -> Any:
        """The primitive's result, or NotImplemented to let the interpreter run it as usual."""
        raise NotImplementedError  # pragma: no cover - abstract


class RemoteBag:
    """A table held by an engine outside this process's memory.  Never printed with content."""

    engine: Engine

    def __repr__(self) -> str:
        return "<bag>"


# rule Engines
def engine_of(tables: dict[str, Any]) -> Any:
    """The engine holding the run's tables, or None for plain pandas tables."""
    for v in tables.values():
        if isinstance(v, RemoteBag):
            return v.engine
    return None
