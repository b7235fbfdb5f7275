"""The one registry of primitives: where the checker, the runtime, the language server and
`docs/primitives.md` look each built-in up.

Each primitive is declared exactly once, in its family's module (arith.py, bags.py, ...), with
`primitive` (declarations.py): name, signature, typing rule, documentation, justification and
its exact semantics on check-time constants (`fold`).  The families are loaded on the first
lookup.

How a primitive is evaluated at run time is not declared here: the runtime registers its
evaluators on the declaration (`kernel`), from one module per family under
fuzzpy/runtime/kernels/ (docs/runtime.md, "Where a primitive is evaluated").  Checking never
loads them, and nothing here imports the runtime.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .declarations import (
    NOCONST,
    OPERATORS,
    REGISTRY,
    Arg,
    Instantiated,
    Primitive,
    Result,
    Rule,
    RuleContext,
    RunContext,
    primitive,
)

__all__ = ["NOCONST", "NO_TABLE", "OPERATORS", "PASSES_TABLES", "PER_LANE", "REGISTRY", "Arg", "Instantiated",
           "Primitive", "Refused", "Result", "Rule", "RuleContext", "RunContext", "StandIn", "all_primitives", "kernel",
           "lookup", "primitive", "without_kernels"]


# ---- evaluators, registered by the runtime --------------------------------------------------------

class StandIn:
    """What evaluates a primitive where it has no evaluator of its own of one kind: a documented
    default that keeps the reference semantics (see each instance's `meaning`)."""

    __slots__ = ("name", "meaning")

    def __init__(self, name: str, meaning: str):
        self.name, self.meaning = name, meaning

    def __repr__(self) -> str:
        return self.name


PER_LANE = StandIn("PER_LANE", "no batched evaluator: given lane values, the reference runs once per lane on "
                               "that lane's own values (runtime/batch.py), the reference semantics by construction")
NO_TABLE = StandIn("NO_TABLE", "takes no table, so no Dask evaluator: on the Dask engine the reference runs on the "
                               "client, on values the client holds; a table among its arguments stops the run (E2101)")
PASSES_TABLES = StandIn("PASSES_TABLES", "moves tables and parts around without reading a row: on the Dask engine the "
                                         "reference runs on the client and hands the engine's tables on as they are")


@dataclass(frozen=True)
class Refused:
    """An evaluator a primitive cannot have, with the reason: for a Dask evaluator, a primitive
    that takes a table and cannot be computed partition by partition (the Dask engine refuses a
    program that calls it before anything is charged, E2101)."""

    reason: str


def kernel(name: str, *, reference: Callable[..., Any], context: bool = False, lazy_bags: bool = False,
           batched: Any, dask: Any) -> Primitive:
    """Register the runtime's evaluators of the declared primitive `name`, once, from its
    family's module under fuzzpy/runtime/kernels/:

    * reference: its run, the semantics every other evaluator of it must agree with; called as
      reference(*args), or with `context` as reference(ctx, *args) (RunContext).  With
      `lazy_bags` it also takes lazy MaskedBags (runtime/values.py); others get plain frames.
    * batched: its evaluator on lane values (runtime/batch.py), batched(evaluator, prim, node,
      args) -> the lanes' values, or NotImplemented to run the reference once per lane; or
      PER_LANE when it has none.
    * dask: its evaluator on the Dask engine's tables (runtime/engines/dask_engine.py),
      dask(engine, ctx, vectorise, *args); or NO_TABLE, PASSES_TABLES, or Refused(reason).

    A primitive that is not declared, registered twice, or given an evaluator of the wrong
    kind is an error (at import)."""
    prim = lookup(name)
    if prim is None:
        raise ValueError(f"kernels registered for {name}, which is not a declared primitive")
    if name in _KERNELS:
        raise ValueError(f"kernels of primitive {name} registered twice")
    if not callable(reference):
        raise ValueError(f"the reference evaluator of {name} is not a function")
    if batched is not PER_LANE and not callable(batched):
        raise ValueError(f"the batched evaluator of {name} is neither a function nor PER_LANE")
    if dask not in (NO_TABLE, PASSES_TABLES) and not isinstance(dask, Refused) and not callable(dask):
        raise ValueError(f"the Dask evaluator of {name} is neither a function, NO_TABLE, PASSES_TABLES nor Refused")
    prim.run, prim.needs_context, prim.lazy_bags = reference, context, lazy_bags
    prim.batched, prim.dask = batched, dask
    prim.kernels_from = sys._getframe(1).f_globals.get("__name__")  # the family module registering it
    prim.bag_only = lazy_bags and not context and prim.fold is None and not prim.structured
    _KERNELS.add(name)
    return prim


_KERNELS: set[str] = set()


def without_kernels() -> list[str]:
    """The declared primitives the runtime has registered no kernels for (all of them until it
    is loaded)."""
    return sorted(set(all_primitives()) - _KERNELS)


def lookup(name: str) -> Optional[Primitive]:
    if not _loaded:  # tested here: the checker looks up a primitive at every application
        _load()
    return REGISTRY.get(name)


def all_primitives() -> dict[str, Primitive]:
    _load()
    return REGISTRY


_loaded = False
_load_lock = threading.RLock()


def _load() -> None:
    # Marked loaded only once every module has registered: a concurrent first check (the
    # curator service checks on many threads) must not see a half-filled registry.
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if not _loaded:
            # Imported on the first lookup, not with this module: a check answered from the
            # cache, or a command that never checks, reads no primitive.
            from . import (  # noqa: F401
                arith,
                bags,
                binning,
                estimates,
                joins,
                library,
                linalg,
                lists,
                mechanisms,
                ordered,
                partitions,
                sampling,
                trees,
                units,
                vectors,
            )
            _loaded = True
