"""Additional primitives used by the standard library and examples (see docs/primitives.md).

`keys ps` names the parts of a partition.  Tree learners (examples/decision_tree.fz, DiffPID3)
recurse into every part of a group-by and must label each subtree with its key; without it the
program would repeat every category of the schema by hand, and a list that drifts from the
schema would silently mislabel the tree.
"""

from __future__ import annotations

from ..typesystem.types import STRING, ListT, Parts
from .declarations import Result, primitive


@primitive("keys", ("ps",), "parts K 'a -> list string",
           "keys ps: the declared keys of a partition, in order, as a public list of strings (the "
           "values of the category, or \"lo\" .. \"hi\" for a bounded int key); e.g. to label the "
           "results of each, given in the same order by values.",
           "The keys come from the partition's type (the schema's declared category or the public "
           "bounds of an int key), never from the data: the result is a check-time constant at "
           "distance 0, whatever the rows are (the same list for every table). PrivJail (seed "
           "003) section 3.3 reads them the same way, from df.domains.",
           category="partition")
def _keys(ctx, args, span):
    (ps,) = args
    if not isinstance(ps.type, Parts):
        raise ctx.fail("E0202", f"keys expects the parts of a partition, but this is {ps.type}", ps.span)
    if ps.type.released:
        raise ctx.fail("E0202", "keys: this partition's keys are released when the program runs; use the released "
                       "list itself (the one given to groupby_in or bound_groups_in)", ps.span)
    return Result(ListT(STRING), {}, const=tuple(ps.type.keys))
