"""Runtime values of the interpreter (docs/runtime.md, "Values").

Numbers are Python floats (numpy scalars are fine), booleans bools, strings str, tensor and
with tuples Python tuples, records dicts, sums `("inl" | "inr", value)`, public lists tuples,
partitions dicts key -> part in declared key order.  A bag is a pandas DataFrame (rows are
records: string column labels; or tuples: integer labels 0..k-1), a pandas Series (rows are
scalars), or a `MaskedBag`: the rows of one of those where a mask holds, selected lazily so
that counting needs no copy and row functions read only the columns they use.  Every bag has a
fresh RangeIndex.

Functions are `Closure`s; distributions (`fuzzy T`) are objects with `sample(ctx)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional, Union

import numpy as np
import pandas as pd

from ..diagnostics import Span
from ..typesystem.ir import IR

BETA = Fraction(1, 20)  # accuracy statements are at 95% confidence


# ---- functions and distributions --------------------------------------------------------------

@dataclass(eq=False)
class Closure:
    """A function value: the environment it captured, and its code when it carries its own
    (ILambda); an IClosure value gets its code from each application site (IApply)."""

    env: dict[str, Any]
    params: Optional[list[str]] = None
    body: Optional[IR] = None

    def __repr__(self) -> str:  # never shows captured values
        return "<function>"


class Distribution:
    """A value of type `fuzzy T`: `sample(ctx)` draws from it (fresh noise each time) and
    records every release through `ctx.record_release`."""

    def sample(self, ctx: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return "<distribution>"


@dataclass(eq=False, repr=False)
class Returned(Distribution):
    """`return v`: the point mass at v."""

    value: Any

    def sample(self, ctx: Any) -> Any:
        return self.value


@dataclass(eq=False, repr=False)
class Located(Distribution):
    """A distribution made by a primitive, sampled with the context of the call that made it,
    so its releases carry the mechanism's own source span."""

    inner: Any
    ctx: Any

    def sample(self, ctx: Any) -> Any:
        return self.inner.sample(self.ctx)


class MechanismDistribution(Distribution):
    """A mechanism applied to its inputs, not yet sampled (runtime/kernels/mechanisms.py):
    `sample(ctx)` draws fresh noise and records the release through `ctx.record_release`.  Its
    repr never shows the inputs."""

    __slots__ = ("name", "_draw", "batch", "per_run")

    def __init__(self, name: str, draw: Callable[[Any], Any],
                 batch: Optional[Callable[[Any, int], list]] = None,
                 per_run: Optional[tuple[Any, Any, Callable[[list, Any], Optional[list]]]] = None):
        self.name = name
        self._draw = draw
        # batch(rng, n): n independent draws at once, vectorised (AUDITING ONLY: the auditor's
        # batched program sampler, fuzzpy/audit/batched.py; never used to release anything).
        self.batch = batch
        # per_run = (plan, input, draw_runs): draw_runs(inputs, rng) draws once for each of
        # `inputs` (one per run, or ExactColumns; each released with the calibration `plan`
        # names), vectorised: a list of the releases, or for tuple releases a tuple of columns
        # (coordinate j's list over the runs; float64 arrays for ExactColumns inputs); None when
        # it cannot.  AUDITING ONLY, like batch: runs whose mechanisms have equal plans and differ
        # only by their inputs are drawn together.
        self.per_run = per_run

    def sample(self, ctx: Any) -> Any:
        return self._draw(ctx)

    def __repr__(self) -> str:
        return f"<distribution {self.name}>"


def is_distribution(v: Any) -> bool:
    # Not duck typing on `.sample`: DataFrame.sample exists and must never be called.
    return isinstance(v, Distribution)


def field_of(value: Any, name: str) -> Any:
    """A record's field: a dict at run time, or a record constant ((name, value), ...)."""
    if isinstance(value, tuple):
        return dict(value)[name]
    return value[name]


# ---- releases ----------------------------------------------------------------------------------

@dataclass
class ReleaseRecord:
    """One value that left the system through a mechanism, with the public facts about it."""

    mechanism: str
    span: Optional[Span]
    epsilon: Fraction
    scale: Fraction
    accuracy: Any  # the mechanism's statement at beta = 0.05 (bound/beta/what), or a number
    value: Any
    name: Optional[str] = None        # the `sample` variable it was bound to, if any
    keys: tuple[str, ...] = ()        # partition keys (each) under which it was released
    extra: dict = field(default_factory=dict)
    site: Optional[Span] = None       # the innermost call in the user's program that led to it
    user_name: Optional[str] = None   # the `sample` variable of the user's program it was bound to
    role: Optional[str] = None        # its part in an estimate ("sum", "count", "answers"), for its label


@dataclass
class EstimateRecord:
    """A value computed from releases only (post-processing, nothing charged), with what their
    public accuracy statements imply for it in the user's units (docs/runtime.md, "Estimates").

    `low`/`high`: an interval holding the exact (noise-free) quantity with probability at least
    1 - beta, or None when there is none; `words`: the statement for people."""

    kind: str                         # "mean", "clip bound", "cumulative"
    value: Any
    low: Any
    high: Any
    beta: Fraction
    words: str
    sources: tuple = ()               # the ReleaseRecords it is computed from
    suffix: str = ""                  # appended to its sources' name in its label (".bound")
    bounded: bool = True              # False: the noise bounds nothing (low/high are then the clip range)
    keys: Optional[tuple] = None      # its own keys (a CDF value's boundary); None: its first source's


# ---- bags ----------------------------------------------------------------------------------------

Frame = Union[pd.DataFrame, pd.Series]


class MaskedBag:
    """The rows of `base` where a boolean mask holds, selected only when needed.

    The rows are given as a mask over the base or as their indices (ascending), either one now
    or as a function computing it on first use (a group-by part); the other is derived when a
    reader needs it.  A part of a part of a large table is held by its indices, so grouping it
    again costs its own rows, not the table's.  `count` may be given when it is already known
    (group sizes from one bincount), or `count_fn` to compute it on first use."""

    __slots__ = ("base", "_mask", "_mask_fn", "_rows", "_rows_fn", "_count", "_count_fn", "_columns", "_frame",
                 "family")

    def __init__(self, base: Frame, mask: Optional[np.ndarray] = None, *,
                 mask_fn: Optional[Callable[[], np.ndarray]] = None, count: Optional[int] = None,
                 rows: Optional[np.ndarray] = None, rows_fn: Optional[Callable[[], np.ndarray]] = None,
                 count_fn: Optional[Callable[[], int]] = None):
        assert (mask is not None) + (mask_fn is not None) + (rows is not None) + (rows_fn is not None) == 1, \
            "one description of the rows"
        self.base = base
        self._mask = mask
        self._mask_fn = mask_fn
        self._rows = rows
        self._rows_fn = rows_fn
        self._count = count
        self._count_fn = count_fn  # the size, computed on first use (a group's, from all groups' counts)
        self._columns: dict[Any, pd.Series] = {}
        self._frame: Optional[Frame] = None
        self.family: Any = None

    @classmethod
    def part(cls, base: Frame, *, mask_fn: Optional[Callable[[], np.ndarray]] = None,
             rows_fn: Optional[Callable[[], np.ndarray]] = None,
             count_fn: Optional[Callable[[], int]] = None, family: Any = None) -> "MaskedBag":
        """A group-by part: its rows and size computed on first use.  The constructor without its
        keyword handling, for the many parts of a partition that are never read.  `family`:
        (the grouping its siblings share, its part number), for grouping all siblings at once
        (primitives/partitions.py)."""
        assert (mask_fn is None) != (rows_fn is None), "one description of the rows"
        bag = object.__new__(cls)
        bag.base, bag._mask, bag._mask_fn, bag._rows, bag._rows_fn = base, None, mask_fn, None, rows_fn
        bag._count, bag._count_fn, bag._columns, bag._frame = None, count_fn, {}, None
        bag.family = family
        return bag

    @property
    def mask(self) -> np.ndarray:
        if self._mask is None:
            if self._mask_fn is not None:
                self._mask = self._mask_fn()
                self._mask_fn = None
            else:
                mask = np.zeros(len(self.base), dtype=bool)
                mask[self.rows] = True
                self._mask = mask
        return self._mask

    @property
    def rows(self) -> np.ndarray:
        """The selected rows' indices in the base, ascending."""
        if self._rows is None:
            if self._rows_fn is not None:
                self._rows = self._rows_fn()
                self._rows_fn = None
            else:
                self._rows = np.flatnonzero(self.mask)
        return self._rows

    def __len__(self) -> int:
        if self._count is None and self._count_fn is not None:
            self._count, self._count_fn = self._count_fn(), None
        if self._count is None:
            has_rows = self._rows is not None or self._rows_fn is not None
            self._count = len(self.rows) if has_rows else int(np.count_nonzero(self.mask))
        return self._count

    @property
    def is_frame(self) -> bool:
        return isinstance(self.base, pd.DataFrame)

    def column(self, label: Any) -> pd.Series:
        """One selected column (cached): only what a row function reads is copied."""
        col = self._columns.get(label)
        if col is None:
            if self._frame is not None:
                col = self._frame[label]
            else:
                src = self.base[label] if self.is_frame else self.base
                col = take(src, self.rows) if self._few_rows() else select(src, self.mask)
            self._columns[label] = col
        return col

    def _few_rows(self) -> bool:
        """Whether taking the rows by index beats a boolean mask: when the indices are known, or
        the bag keeps under an eighth of its base (a Poisson sample, a small group)."""
        return self._rows is not None or self._rows_fn is not None or 8 * len(self) < len(self.base)

    def series(self) -> pd.Series:
        """The selected values of a bag of scalars."""
        return self.column(None)

    def materialise(self) -> Frame:
        if self._frame is None:
            if self.is_frame:
                self._frame = self.base.take(self.rows).reset_index(drop=True)
            else:
                self._frame = self.series()
        return self._frame

    def __repr__(self) -> str:  # never shows rows or their number
        return "<bag>"


Bag = Union[pd.DataFrame, pd.Series, MaskedBag]


def is_bag(v: Any) -> bool:
    return isinstance(v, (pd.DataFrame, pd.Series, MaskedBag))


def select(series: pd.Series, mask: np.ndarray) -> pd.Series:
    """series[mask] with a fresh RangeIndex; categoricals stay categorical."""
    return pd.Series(series.array[mask], name=series.name, copy=False)


def take(series: pd.Series, rows: np.ndarray) -> pd.Series:
    """series at the positions `rows`, with a fresh RangeIndex: `select` by index."""
    return pd.Series(series.array.take(rows), name=series.name, copy=False)


def nrows(bag: Bag) -> int:
    return len(bag)


def restrict(bag: Bag, keep: np.ndarray) -> MaskedBag:
    """The rows of `bag` (in its own row order) for which `keep` holds."""
    if isinstance(bag, MaskedBag):
        return MaskedBag(bag.base, rows=bag.rows[keep])
    return MaskedBag(bag, keep)


def holds(v: Any, kind: type) -> bool:
    """Whether v is, or holds inside its tuples and partitions, a value of type `kind`."""
    if isinstance(v, kind):
        return True
    if isinstance(v, tuple):
        return any(holds(x, kind) for x in v)
    if isinstance(v, dict):
        return any(holds(x, kind) for x in v.values())
    return False


_SCALARS = frozenset({int, float, Fraction, str, bool, type(None)})


def _holds_lazy_bag(v: Any) -> bool:
    """Whether a MaskedBag is inside the tuples and dicts of v: `materialise`'s question, asked
    with a stack instead of a call per element (a tree's rules are thousands of tuples)."""
    stack = [v]
    while stack:
        x = stack.pop()
        for y in (x.values() if isinstance(x, dict) else x):
            if type(y) in _SCALARS:
                continue
            if isinstance(y, MaskedBag):
                return True
            if isinstance(y, (tuple, dict)):
                stack.append(y)
    return False


def materialise(v: Any) -> Any:
    """A MaskedBag as a plain DataFrame/Series, also inside tuples, records and partitions
    (for primitives that do not know lazy bags)."""
    if type(v) in _SCALARS:
        return v
    if isinstance(v, MaskedBag):
        return v.materialise()
    if isinstance(v, (tuple, dict)) and not _holds_lazy_bag(v):  # a long list of results: one scan
        return v
    if isinstance(v, tuple):  # rebuilt only when a lazy bag is inside: a long list of results is not copied
        items = [materialise(x) for x in v] if any(isinstance(x, (MaskedBag, tuple, dict)) for x in v) else None
        if items is not None and any(y is not x for x, y in zip(v, items)):
            return tuple(items)
        return v
    if isinstance(v, dict) and any(isinstance(x, (MaskedBag, tuple, dict)) for x in v.values()):
        items = {k: materialise(x) for k, x in v.items()}
        if any(items[k] is not x for k, x in v.items()):
            return items
        return v  # the same object: a Partition stays one
    return v


def is_tuple_frame(df: pd.DataFrame) -> bool:
    """Bags of tuples are frames with integer column labels 0..k-1; records have names."""
    return column_labels(df)[1]


def column_labels(df: pd.DataFrame) -> tuple[tuple, bool]:
    """(the frame's column labels, whether it is a bag of tuples), read once per columns Index:
    an Index never changes, and iterating one of text labels (Arrow strings) is slow."""
    columns = df.columns
    hit = _LABELS.get(id(columns))
    if hit is not None and hit[0] is columns:
        return hit[1], hit[2]
    labels = tuple(columns.tolist())
    tuples = len(labels) > 0 and all(isinstance(c, (int, np.integer)) for c in labels)
    if len(_LABELS) >= 256:
        _LABELS.clear()
    _LABELS[id(columns)] = (columns, labels, tuples)
    return labels, tuples


_LABELS: dict = {}


def frame_columns(bag: Bag) -> list[Any]:
    base = bag.base if isinstance(bag, MaskedBag) else bag
    return list(base.columns) if isinstance(base, pd.DataFrame) else []


# ---- rows as Python values (the per-row fallback) ----------------------------------------------

def _as_floats(df: pd.DataFrame) -> pd.DataFrame:
    ints = {c: np.float64 for c, t in df.dtypes.items() if pd.api.types.is_integer_dtype(t)}
    return df.astype(ints) if ints else df


def bag_rows(bag: Bag) -> list[Any]:
    """Every row as a Python value: dicts for records, tuples, or scalars (numbers as floats)."""
    frame = materialise(bag)
    if isinstance(frame, pd.Series):
        if pd.api.types.is_integer_dtype(frame.dtype):
            frame = frame.astype(np.float64)
        return frame.tolist()
    frame = _as_floats(frame)
    if len(frame.columns) == 0:  # a run that reads no column; pandas 2 gives no records at all
        return [{} for _ in range(len(frame))]
    if is_tuple_frame(frame):
        return list(frame.itertuples(index=False, name=None))
    return frame.to_dict("records")


def bag_from_rows(rows: list[Any]) -> Frame:
    """The inverse of `bag_rows` for the rows a row function produced."""
    if not rows:
        return pd.Series([], dtype=object)
    first = rows[0]
    if isinstance(first, dict) and all(isinstance(r, dict) for r in rows):
        return pd.DataFrame.from_records(rows, columns=list(first))
    if isinstance(first, tuple) and all(isinstance(r, tuple) and len(r) == len(first) for r in rows) and first:
        return pd.DataFrame.from_records(rows, columns=list(range(len(first))))
    return pd.Series(rows)


class Partition(dict):
    """`groupby`'s result: key -> part, in declared key order, remembering the part number of
    every grouped row of the base (-1: none), so that batched evaluation (runtime/batch.py) can
    treat all parts at once.  Its parts are bags of one table, never lane values.

    A partition made by `lazy` makes its parts when one of them is first read: its keys, its
    size and its iteration (keys) are known without them, and every other reading (a part, the
    values, the items, a comparison, a copy) first makes them all, in key order.  A score's
    candidate partitions, read only through their codes by a batched `pmap`, are never made."""

    __slots__ = ("base", "_codes", "_rows", "complete", "_keys", "_make", "_grouped")

    def __init__(self, parts: dict, base: Any, codes: Optional[np.ndarray], rows: Optional[np.ndarray] = None,
                 complete: bool = False, grouped: Any = None):
        super().__init__(parts)
        self.base = base
        self._codes = codes  # the part number of each of `rows` (-1: none)
        self._rows = rows    # the grouped rows of the base, ascending (None: every row)
        # or, until codes or rows are read, the grouping that computes them (`rows()`, `codes()`)
        self._grouped = grouped
        self.complete = complete  # True: no code is -1 (known without looking; False: unknown)
        self._keys: tuple = ()
        self._make: Optional[Callable[[int], Any]] = None

    @classmethod
    def lazy(cls, keys: tuple, make: Callable[[int], Any], base: Any, codes: Optional[np.ndarray],
             rows: Optional[np.ndarray] = None, complete: bool = False, grouped: Any = None) -> "Partition":
        """The partition whose part for keys[i] is make(i), made when a part is first read.  With
        `grouped` instead of codes and rows, those are computed when first read."""
        out = cls({}, base, codes, rows, complete, grouped)
        out._keys, out._make = keys, make
        return out

    @property
    def codes(self) -> np.ndarray:
        if self._grouped is not None:
            self._resolve()
        return self._codes  # type: ignore[return-value]

    @property
    def rows(self) -> Optional[np.ndarray]:
        if self._grouped is not None:
            self._resolve()
        return self._rows

    def _resolve(self) -> None:
        grouped, self._grouped = self._grouped, None
        self._rows, self._codes = grouped.rows(), grouped.codes()

    def _fill(self) -> None:
        make = self._make
        if make is not None:
            self._make = None
            for i, key in enumerate(self._keys):
                dict.__setitem__(self, key, make(i))

    def __len__(self) -> int:
        return len(self._keys) if self._make is not None else dict.__len__(self)

    def __iter__(self) -> Any:
        return iter(self._keys) if self._make is not None else dict.__iter__(self)

    def __contains__(self, key: Any) -> bool:
        return key in self._keys if self._make is not None else dict.__contains__(self, key)


def _reading(name: str) -> Callable[..., Any]:
    """dict's method `name`, after the parts are made."""
    method = getattr(dict, name)

    def read(self: Partition, *args: Any, **kw: Any) -> Any:
        self._fill()
        return method(self, *args, **kw)

    read.__name__ = read.__qualname__ = name
    return read


for _name in ("__getitem__", "get", "keys", "values", "items", "copy", "__eq__", "__ne__", "__repr__",
              "__reversed__", "__or__", "__ror__", "__ior__", "__reduce_ex__", "__setitem__", "__delitem__",
              "setdefault", "pop", "popitem", "update", "clear"):
    setattr(Partition, _name, _reading(_name))


class EachDistribution(Distribution):
    """`each f ps`: the per-part distributions, sampled in declared key order; the result maps
    every key to its released value."""

    __slots__ = ("parts", "together")

    def __init__(self, parts: dict[str, Any], together: Optional[Fraction] = None):
        self.parts = parts
        self.together = together  # the checker's epsilon of all parts' releases together, if one

    def sample(self, ctx: Any) -> Any:
        out = {}
        state = ctx.interp.state
        keys = state.keys  # the keys the releases made inside are labelled with
        state.together.append(None if self.together is None else (self.together, len(self.parts)))
        try:
            for key, dist in self.parts.items():
                keys.append(key)
                try:
                    out[key] = dist.sample(ctx) if is_distribution(dist) else dist
                finally:
                    keys.pop()
        finally:
            state.together.pop()
        return out
