"""Values the runtime derives from a checked program's nodes, kept on the nodes themselves.

A `NodeMemo` is a table keyed by a node (an IR node, an instance) whose entries live in the
node's own attributes, under a name starting with `ir.RUNTIME_CACHE`:

* an entry lives exactly as long as its program (a long-running service checks many programs,
  and a weak table whose values refer to their keys, as compiled code does, would keep every
  one of them);
* a lookup is one dictionary read; a weak table makes a weak reference (an allocation) per
  lookup, and the batched evaluator looks these up several times per candidate and per leaf;
* pickling or copying a node leaves the entries out (`ir.IR.__getstate__`), so a copy, which
  may then be changed, never carries what was derived from the original.

An object without attributes of its own (a list of nodes) is not remembered: `get` gives the
default and a store is skipped, as the weak tables skipped what they could not refer to.
"""

from __future__ import annotations

from typing import Any

from ..typesystem import ir as I


class NodeMemo:
    """One table, stored in its nodes' attribute `name`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = I.RUNTIME_CACHE + name

    def get(self, obj: Any, default: Any = None) -> Any:
        try:
            return obj.__dict__.get(self.name, default)
        except AttributeError:  # no attributes of its own: never remembered
            return default

    def __contains__(self, obj: Any) -> bool:
        try:
            return self.name in obj.__dict__
        except AttributeError:
            return False

    def __getitem__(self, obj: Any) -> Any:
        return obj.__dict__[self.name]

    def __setitem__(self, obj: Any, value: Any) -> None:
        try:
            obj.__dict__[self.name] = value
        except AttributeError:
            pass

    def setdefault(self, obj: Any, value: Any) -> Any:
        try:
            return obj.__dict__.setdefault(self.name, value)
        except AttributeError:
            return value
