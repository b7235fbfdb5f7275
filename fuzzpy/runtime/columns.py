"""The columns a checked program can read: only those are kept in memory after loading.

A program observes a row in three ways only: by a field access `r.name` (an `IField` in the checked
IR), by naming a column to a primitive that reads it (a join's and a truncation's keys,
`ir.READS_COLUMNS`), or whole, by an equality `==` / `!=` on a compound value (a record, or a tuple, list or sum
that may hold one). Every other primitive that takes rows (count, filter, map, split, groupby,
union, sort_by, part, ...) looks at them through a function, that is through field accesses, or
not at all. So a column whose name no field access in the program uses is never read, and can be
left out of the table, provided the rows are the same: the loader still reads and checks every
declared column, and a `drop` policy on an unread column still removes the rows it removes
(docs/data.md, "Columns kept"). A whole-value comparison keeps every column.

The walk is over everything reachable from the entry instance: instance bodies through calls,
lambdas and closures' code at their application sites, and the IR inside primitives' arguments
and decisions. Names are collected whatever the value they are read from (a tuple of records, a
record built by `map`): a superset, never fewer than the program reads.
"""

from __future__ import annotations

from typing import Optional

from ..typesystem import ir as I


# rule Columns kept: every field name the IR reads, or None (every column)
def columns_read(entry: Optional[I.Instance]) -> Optional[frozenset[str]]:
    """The field names the program reads anywhere, or None when it may read every column
    (a whole-value comparison, or no checked program to look at)."""
    if entry is None:
        return None
    names: set[str] = set(entry.units.values())  # rule Units: a unit's column is read by every bound
    for node in I.reachable(entry):
        if isinstance(node, I.IField):
            names.add(node.name)
        elif isinstance(node, I.IPrim) and node.info.get(I.WHOLE_VALUES):
            return None
        elif isinstance(node, I.IPrim):
            names.update(node.info.get(I.READS_COLUMNS, ()))
    return frozenset(names)
