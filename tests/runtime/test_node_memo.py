"""runtime/node_memo.py: what the runtime derives from a program's nodes is kept on the nodes,
lives as long as they do, and never travels with a copy or a pickle."""

import copy
import gc
import pickle
import weakref

from fuzzpy.runtime import batch
from fuzzpy.runtime.node_memo import NodeMemo
from fuzzpy.typesystem import ir as I


def _node() -> I.IR:
    return I.IPrim("add", [I.IVar("x"), I.IVar("y")])


def test_an_entry_is_kept_on_the_node_under_the_runtime_prefix():
    memo, node = NodeMemo("probe"), _node()
    assert memo.get(node) is None and memo.get(node, 7) == 7 and node not in memo
    memo[node] = ("names",)
    assert memo.get(node) == ("names",) and memo[node] == ("names",) and node in memo
    assert [k for k in vars(node) if k.startswith(I.RUNTIME_CACHE)] == [I.RUNTIME_CACHE + "probe"]
    assert memo.setdefault(node, "other") == ("names",)
    assert memo.get(_node()) is None  # per node, not per equal node


def test_an_object_without_attributes_is_never_remembered():
    memo = NodeMemo("probe")
    for obj in ([_node()], {"a": 1}, None, ("t",)):
        memo[obj] = "value"  # skipped, as the weak tables skipped what they could not refer to
        assert memo.get(obj) is None and memo.get(obj, "default") == "default"
        assert obj not in memo
        assert memo.setdefault(obj, "given") == "given"


def test_copies_and_pickles_of_a_node_leave_its_entries_behind():
    """A copy may be changed afterwards (a rewrite of the program): what was derived from the
    original must not come with it."""
    memo, node = NodeMemo("probe"), _node()
    memo[node] = frozenset({"x"})
    for twin in (copy.copy(node), copy.deepcopy(node), pickle.loads(pickle.dumps(node))):
        assert memo.get(twin) is None
        assert not any(k.startswith(I.RUNTIME_CACHE) for k in vars(twin))
        assert twin.name == "add" and [a.name for a in twin.args] == ["x", "y"]


def test_an_entry_lives_exactly_as_long_as_its_node():
    """An entry that refers to its own node (a structure holding the node, compiled code) is a
    cycle the collector frees with the node; a weak table would have kept both."""
    memo, node = NodeMemo("probe"), _node()
    memo[node] = ("ir", id(node), node)
    ref = weakref.ref(node)
    del node
    gc.collect()
    assert ref() is None


def test_read_names_is_remembered_per_node_and_computed_for_lists():
    node = _node()
    assert batch._read_names(node) == frozenset({"x", "y"})
    assert batch._NAMES.get(node) == frozenset({"x", "y"})
    # a list of nodes is not remembered, but its names are the same every time
    pair = [node, I.IVar("z")]
    assert batch._read_names(pair) == frozenset({"x", "y", "z"}) == batch._read_names(pair)
    # a function value without a body (a top-level function's) reads nothing of its scope
    assert batch._read_names(None) == frozenset()
