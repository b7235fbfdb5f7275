"""The checked program: a small, monomorphised IR that the runtime evaluates.

The checker elaborates each expression into IR as it types it, so everything the runtime must
agree with (which branch a constant condition takes, which instance of a generic function is
called, each mechanism's calibrated noise) is decided once, by the checker.  Every node keeps
the span of the source it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterator, Optional

from ..diagnostics import Span

# Attributes whose names start with this are what the runtime derives from a node or an
# instance (its compiled code, the names it reads, its structure: runtime/node_memo.py), kept on
# the object so that they live as long as the program: not part of the checked program, and
# never pickled or copied (the Dask engine ships row functions' code to its workers).
RUNTIME_CACHE = "_runtime_"


def _without_runtime_cache(state: dict) -> dict:
    if not any(k.startswith(RUNTIME_CACHE) for k in state):
        return state
    return {k: v for k, v in state.items() if not k.startswith(RUNTIME_CACHE)}


@dataclass(eq=False)
class IR:
    span: Optional[Span] = field(default=None, repr=False, kw_only=True)

    def __getstate__(self) -> dict:
        return _without_runtime_cache(self.__dict__)


@dataclass(eq=False)
class IConst(IR):
    value: Any


@dataclass(eq=False)
class IVar(IR):
    name: str


# Patterns: a name, "_" (None), or ("tensor"|"with", [patterns]).
IPattern = Any


@dataclass(eq=False)
class ILet(IR):
    pattern: IPattern
    bound: IR
    body: IR


@dataclass(eq=False)
class ISample(IR):
    """Run a distribution (`bound`), bind the released value, continue with `body`."""

    pattern: IPattern
    bound: IR
    body: IR


@dataclass(eq=False)
class IReturn(IR):
    value: IR


@dataclass(eq=False)
class IIf(IR):
    cond: IR
    then: IR
    other: IR


@dataclass(eq=False)
class IPrim(IR):
    """A call of a registry primitive; `info` is what its rule decided (bounds, calibration)."""

    name: str
    args: list[IR]
    info: dict = field(default_factory=dict)


# `IPrim.info` flag of an equality (`==`, `!=`) whose operands are compound values: it reads
# every field of a record it meets, so the runtime keeps every column (runtime/columns.py).
WHOLE_VALUES = "whole_values"

# `IPrim.info` entry of a primitive that reads columns by name, without a field access in the IR
# (a join's keys): the names it reads (runtime/columns.py keeps them).
READS_COLUMNS = "reads_columns"

# `IPrim.info` entry of a primitive whose rule says, in words, why its result moves as it does and
# where its factors come from (a join, a truncation): shown by the language server at the call.
EXPLAINED = "explained"


@dataclass(eq=False)
class Instance:
    """One checked instance of a top-level function (generic functions get one per use)."""

    name: str
    params: list[str]
    body: Optional[IR] = None
    key: Any = None
    # The entry point's tables with a privacy unit: parameter -> the unit's column (rule Units);
    # the runtime keeps each row's unit beside it (runtime/unit_rows.py).
    units: dict = field(default_factory=dict)

    def __getstate__(self) -> dict:
        return _without_runtime_cache(self.__dict__)


@dataclass(eq=False)
class ICall(IR):
    instance: Instance
    args: list[IR]


@dataclass(eq=False)
class IClosure(IR):
    """Capture the current environment; the code comes from each application site."""


@dataclass(eq=False)
class ILambda(IR):
    """A function value with its own code (used where a function is passed as data).  It
    captures the environment where it is evaluated; its body reaches the original function
    through that environment, and the original closure carries its own."""

    params: list[str]
    body: IR


@dataclass(eq=False)
class IApply(IR):
    """Apply a function value: with `params`/`body` given, the value supplies only its
    environment (checked closure at this site); otherwise the value carries its code."""

    fn: IR
    args: list[IR]
    params: Optional[list[str]] = None
    body: Optional[IR] = None


@dataclass(eq=False)
class ITuple(IR):
    kind: str
    items: list[IR]


@dataclass(eq=False)
class IProj(IR):
    value: IR
    index: int  # 0-based


@dataclass(eq=False)
class IField(IR):
    value: IR
    name: str


@dataclass(eq=False)
class IRecord(IR):
    fields: list[tuple[str, IR]]


@dataclass(eq=False)
class IInject(IR):
    side: str
    value: IR


@dataclass(eq=False)
class ICase(IR):
    """Sum case (`inl`/`inr` arms) or list case (`nil`/`cons` arms)."""

    scrutinee: IR
    kind: str  # "sum" | "list"
    left: tuple[IPattern, IR]   # inl pattern + body, or (None, nil body)
    right: tuple[IPattern, IR]  # inr pattern + body, or ((head, tail), cons body)


@dataclass(eq=False)
class IList(IR):
    items: list[IR]


@dataclass(eq=False)
class ICons(IR):
    head: IR
    tail: IR


def reachable(root: Any) -> Iterator[Any]:
    """Every IR node and instance reachable from `root`, each once: instance bodies through
    calls, lambdas' and application sites' code, and the IR inside lists, tuples and dicts (a
    primitive's arguments and decisions)."""
    seen: set[int] = set()
    todo: list[Any] = [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, (IR, Instance)):
            yield node
            todo.extend(getattr(node, f.name) for f in fields(node))
        elif isinstance(node, (list, tuple)):
            todo.extend(node)
        elif isinstance(node, dict):
            todo.extend(node.values())
