"""Tables on a Dask cluster, as the primitives' Dask evaluators (runtime/kernels/) see them.

A `DaskBag` is a lazy Dask DataFrame (or Series) of the engine (dask_engine.py); its rows never
come to this process.  A row function travels to the workers as `Shipped` and runs there on one
partition at a time (`rows_of`), with the pandas engine's own column evaluator.  A table it
captured from outside the row cannot travel with it: it arrives as a stand-in that stops the run
(`TableUsedOnWorker`).  Every failure a Dask run shows is a `DaskRunFailure`, whose message is
fixed by the program or the engine.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import Any, Callable, Optional

import numpy as np

from ...diagnostics import Diagnostic, FuzzError
from ..state import RunFailure, RunState
from ..values import Closure
from ..vectorize import apply_rows
from . import RemoteBag

KEPT = "the epsilon charged for this run stays spent: values may have been released before the failure"
# How the engine's shuffles (a bound's units, truncation's keys, a merge of two tables) move rows:
# peer to peer between the workers, in bounded memory, spilling to their disks.  Dask's default
# without a default client (the engine's is never the default) would be "disk", a partd store in
# this process's filesystem, which only a cluster on this machine can share.
SHUFFLE = "p2p"


class DaskRunFailure(RunFailure):
    """A failure of the Dask run whose message is fixed by the program or the engine."""

    def __init__(self, code: str, message: str, span: Any = None, *notes: str):
        FuzzError.__init__(self, Diagnostic(code, message, span, list(notes)))


class TableUsedOnWorker(Exception):
    """A row function touched a table it captured: not available on a worker."""


_TOUCHED = threading.local()  # per worker thread: did the row function being run touch a table?


def _touch(*args: Any, **kw: Any) -> Any:
    # The row-by-row fallback turns a failing row into a missing value: the flag survives that,
    # and `rows_of` raises after the fact, so the run stops instead of computing something else.
    _TOUCHED.flag = True
    raise TableUsedOnWorker()


class _Unavailable:
    """What a captured `DaskBag` becomes when a row function is shipped to a worker."""

    __len__ = __iter__ = __getitem__ = _touch

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _touch()


class DaskBag(RemoteBag):
    """A table on the cluster: a lazy Dask DataFrame (records, tuples) or Series (scalars).  A
    part of a `groupby` knows its group (kernels/partitions.py) and its index there; a table made
    from such a part by per-row steps (`map`, `filter`, `split`) knows them too (`steps`, empty
    for the part itself), so that its aggregate can be computed with its siblings' in one pass
    (`SharedPass`).  A table with a privacy unit names the frame's column that holds each row's
    unit (`unit`, rule Units)."""

    __slots__ = ("engine", "frame", "group", "part", "unit", "steps")

    def __init__(self, engine: Any, frame: Any, group: Optional[Any] = None, part: int = -1,
                 unit: Optional[str] = None, steps: tuple = ()):
        self.engine, self.frame, self.group, self.part, self.unit = engine, frame, group, part, unit
        self.steps = steps

    def is_part(self) -> bool:
        """Whether this is a part of a grouping itself (not a table made from one)."""
        return self.group is not None and not self.steps

    def stepped(self, frame: Any, step: Optional["Step"], unit: Optional[str] = None) -> "DaskBag":
        """The table `frame` made from this one by `step`, with the unit column `unit`: still of
        its group's family when `step` is known (not None) and this one is, else a table of its
        own."""
        if step is None or not isinstance(self.group, SharedPass):
            return DaskBag(self.engine, frame, unit=unit)
        return DaskBag(self.engine, frame, self.group, self.part, unit, self.steps + (step,))

    def __reduce__(self) -> Any:  # shipped inside a row function's environment: never its rows
        return (_Unavailable, ())

    # Reached only from a row function running on a worker that shares this process (an
    # in-process cluster): the same refusal as `_Unavailable`.
    __len__ = __iter__ = __getitem__ = _touch


class Shipped:
    """A row function sent to the workers, with a cheap token (its environment is never hashed)."""

    def __init__(self, fn: Closure):
        self.fn = fn
        self.token = uuid.uuid4().hex

    def __dask_tokenize__(self) -> str:
        return self.token


def rows_of(part: Any, fn: Shipped, vectorise: bool) -> Any:
    """The row function's result on every row of one partition (on a worker)."""
    _TOUCHED.flag = False
    out = apply_rows(RunState(rng=None, vectorise=vectorise), fn.fn, part.reset_index(drop=True))
    if _TOUCHED.flag:
        raise TableUsedOnWorker()
    return out


@dataclasses.dataclass(frozen=True)
class Step:
    """A per-row step on one partition, `fn(partition, *args)`, and what it computes (`identity`:
    equal identities compute the same thing, e.g. a row function's `batch.constant_identity`)."""

    identity: Any
    fn: Callable[..., Any]
    args: tuple

    def key(self) -> tuple:
        return (self.fn.__module__, self.fn.__qualname__, self.identity)


class Failed:
    """A sibling's partial that could not be computed in the shared pass."""


class SharedPass:
    """A grouping of one table into k parts (a `groupby`'s) whose parts' aggregates are computed
    together: when one part's aggregate after some steps is asked for, every part's aggregate
    after the same steps is computed in the same pass over the grouped table (`frame`), and kept
    for the others.  A program releasing a value per part (`each`, `pmap`) then reads the table,
    and does any join or shuffle under it, once instead of k times.  Each part's partials are
    computed exactly as its own pass computes them (its rows selected, the steps applied, the
    aggregate taken, per partition), so the values, and the noise drawn on them, are the same.

    A subclass gives `engine`, `frame`, `k` and `splitter()`: a Step whose function gives a
    partition's k parts, in order (it travels to the workers: no client, no Dask collection)."""

    engine: Any
    frame: Any
    k: int

    def splitter(self) -> Step:  # pragma: no cover - abstract
        raise NotImplementedError

    def shared_partials(self, part: int, steps: tuple, aggregate: Step) -> Optional[list[Any]]:
        """Part `part`'s partials (one per partition of `frame`) of `aggregate` after `steps`,
        computed for every part at once on first use; None when the shared pass failed for it
        (the caller then computes it on its own, as before)."""
        memo = self.__dict__.setdefault("_shared", {})
        key = (tuple(s.key() for s in steps), aggregate.key())
        if key not in memo:
            by_partition = self.engine.partials(self.frame, _shared_partials, self.splitter(), part, steps,
                                                aggregate)
            memo[key] = [None if any(isinstance(p[j], Failed) for p in by_partition)
                         else [p[j] for p in by_partition] for j in range(self.k)]
        return memo[key][part]


def _shared_partials(partition: Any, split: Step, asked: int, steps: tuple, aggregate: Step) -> list[Any]:
    """Every part's aggregate on one partition (on a worker).  The asked part fails as its own
    pass would; a sibling that fails is marked Failed, to be computed on its own when asked."""
    out: list[Any] = []
    for j, rows in enumerate(split.fn(partition, *split.args)):
        try:
            for step in steps:
                rows = step.fn(rows, *step.args)
            out.append(aggregate.fn(rows, *aggregate.args))
        except Exception:  # noqa: BLE001 - the sibling's own pass will meet it again
            if j == asked:
                raise
            out.append(Failed())
    return out


def take_rows(part: Any, keep: np.ndarray) -> Any:
    """The rows of one partition where `keep` holds, with a fresh index."""
    return part.reset_index(drop=True).iloc[np.flatnonzero(keep)].reset_index(drop=True)


def need_bag(prim: str, v: Any, span: Any) -> DaskBag:
    """`v` as a table of this engine; a table of another engine stops the run (E2101)."""
    if not isinstance(v, DaskBag):
        raise DaskRunFailure("E2101", f"primitive {prim} got a table of the Dask engine together with one of "
                                      "another engine", span, KEPT)
    return v


def captured_table() -> DaskRunFailure:
    return DaskRunFailure("E2102", "a row function reads a table it captured from outside the row "
                                   "(count db inside fun r -> ...): the Dask engine cannot run it", None, KEPT)
