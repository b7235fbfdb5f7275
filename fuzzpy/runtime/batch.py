"""Batched evaluation: one function evaluated for many inputs at once (docs/runtime.md, "Batched
evaluation").

`pmap f ps` runs f on every part of a partition, and a selection mechanism (`exponential`,
`noisy_max`) runs its score function on every candidate.  Both are deterministic (no noise is
drawn while they run), so they may be computed in any way that gives the same values.  Here the
function runs once, with its parameter bound to all the inputs at once: a *lane* per part or per
candidate.

* `Lanes`: one value per lane (an int64/bool array for counts and integer arithmetic on them, a
  list of exact Python values otherwise).
* `LaneBag`: the rows of every part of a partition at once, each row tagged with its lane.
  `count` is one bincount, `groupby` one evaluation of the key over all the rows (the parts of a
  lane bag's partition are lane bags again), `filter`/`split` one evaluation of the predicate,
  `map` one evaluation of the function, `sum` one bincount of the exact sum's integers.
* (lane, row) pairs: a row function that reads lane values (a candidate, a run's release) over a
  bag runs once over every lane's rows, each lane value a column (`product`, `lane_rows`).
* `ThresholdBags`: `split (fun r -> e < c) b` with a candidate c (a lane value) and e not
  depending on the candidate: the column e is sorted once and each candidate's count is a binary
  search (the cumulative count of the median).

Any other primitive given lane values runs once per lane on that lane's own values (the
reference semantics, so the result is the same by construction).  An `if` whose condition
differs between lanes splits them between its branches.  A construct whose behaviour would
differ between lanes otherwise (`case` on lane values of different shapes, a mechanism outside
the auditor) raises `NotBatchable`, and the caller runs the function once per input as before.
Batching changes speed, never values: the same exact ints and Fractions reach the mechanisms,
and no noise is drawn in a batched evaluation.
"""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import fields, is_dataclass
from fractions import Fraction
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from .. import limits
from ..primitives.registry import PER_LANE, lookup
from ..typesystem import ir as I
from .evaluator import Interpreter
from .node_memo import NodeMemo
from .numbers import (
    _NOT_EXACT,
    as_float,
    exact_arg,
    fold_exact,
    whole_fraction,
    whole_fractions,
)
from .ratios import Ratios
from .state import Bind, bind
from .sums import SUM_GRID_BITS, sum_grid
from .values import (
    Closure,
    EachDistribution,
    Located,
    MaskedBag,
    MechanismDistribution,
    Partition,
    Returned,
    field_of,
    is_bag,
    is_distribution,
    restrict,
)
from .vectorize import (
    RowView,
    Vec,
    VectorEvaluator,
    apply_rows,
    has_vec,
    number_matrix,
    row_matrix,
    row_value,
    to_frame,
)

# Integer lanes stay int64 while every operand is below this (a sum or difference of two such
# values cannot overflow; products are checked separately).
_INT_SAFE = 2**61
_FLOAT_EXACT_INT = 2**53  # int64 columns below this compare exactly as float64
_NUMBER = (int, float, Fraction)  # the exact and released numbers lane values hold
# Up to this many lanes a compiled public function runs once per lane (LaneEvaluator.call_body);
# beyond, its code is evaluated on all lanes at once (the auditor's thousands of samples).
COMPILED_LANES = 64


class NotBatchable(Exception):
    """This evaluation needs one run per input."""


# `Lanes._data` of float lanes whose list of Python floats is not built yet (see `floats`).
_UNBUILT = object()
# `Lanes._data` of sums whose list is not built yet (see `of_sums`).
_SUMS = object()


class Lanes:
    """One value per lane.  `data` is an int64 or bool numpy array (exact integers; `frac`
    says whether each lane's value is a Fraction, as exact scalar arithmetic returns, or an int,
    as `count` returns) or a list of Python values.  Lanes of exact rationals may be held as
    `ratios` alone (Fractions not built yet: fuzzpy/runtime/ratios.py; `_data` is None); `data`
    builds them when read.  Lanes of Python floats (released values, float vector arithmetic) may
    keep `floats`, the same values as a float64 array; `of_floats` lanes hold only the array
    until their list is read (`_data` is _UNBUILT), so that a chain of column operations never
    converts to a list and back.  `of_sums` lanes mix Fractions with the float 0.0 (sums, some
    over empty bags): they keep `exact`, every lane's exact value, for what reads exact values
    alone (a mechanism's input), and build their list only when it is read (`_data` is _SUMS):
    arithmetic, whose result types follow the values' types, reads the list."""

    __slots__ = ("_data", "frac", "ratios", "floats", "exact", "_empty")

    def __init__(self, data: Any, frac: bool = False, ratios: Optional[Ratios] = None):
        self._data = data
        self.frac = frac
        self.ratios = ratios
        self.floats: Optional[np.ndarray] = None
        self.exact: Optional[Ratios] = None

    @staticmethod
    def of_sums(sums: Ratios, empty: np.ndarray) -> "Lanes":
        """Lanes of the exact sums, except the float 0.0 where `empty` (a sum over no rows)."""
        out = Lanes(_SUMS)
        out.exact, out._empty = sums, empty
        return out

    @staticmethod
    def of_ratios(r: Ratios) -> "Lanes":
        """Lanes of the exact rationals r (read as Fractions)."""
        return Lanes(None, ratios=r)

    @staticmethod
    def of_floats(x: np.ndarray) -> "Lanes":
        """Lanes of the float64 array x's values as Python floats (bit for bit: -0.0 and NaN
        included), keeping x."""
        out = Lanes(_UNBUILT)
        out.floats = np.ascontiguousarray(x, dtype=np.float64)
        return out

    @property
    def data(self) -> Any:
        d = self._data
        if d is None:
            self._data = d = self.ratios.fractions()  # type: ignore[union-attr]
        elif d is _UNBUILT:
            self._data = d = self.floats.tolist()  # type: ignore[union-attr]
        elif d is _SUMS:
            r = self.exact
            self._data = d = [0.0 if e else Fraction(p, q)  # type: ignore[union-attr]
                              for p, q, e in zip(r.num.tolist(), r.den.tolist(), self._empty.tolist())]
        return d

    def __len__(self) -> int:
        d = self._data
        if d is None:
            return len(self.ratios)  # type: ignore[arg-type]
        if d is _SUMS:
            return len(self.exact)  # type: ignore[arg-type]
        return len(self.floats) if d is _UNBUILT else len(d)  # type: ignore[arg-type]

    def at(self, i: int) -> Any:
        if self._data is None:  # one lane's Fraction, without building every lane's
            return self.ratios.fraction(i)  # type: ignore[union-attr]
        if self._data is _UNBUILT:  # one lane's float, as tolist gives it
            return self.floats[i].item()  # type: ignore[index]
        if self._data is _SUMS:
            return 0.0 if self._empty[i] else self.exact.fraction(i)  # type: ignore[union-attr]
        v = self.data[i]
        if isinstance(self.data, np.ndarray):
            if self.data.dtype == np.bool_:
                return bool(v)
            return whole_fraction(int(v)) if self.frac else int(v)
        return v

    def numbers(self) -> Optional[tuple[np.ndarray, np.ndarray, Ratios]]:
        """When every lane holds a float, an int or a Fraction: (each lane's nearest float, as
        float() gives it, saturating at the infinities; which lanes hold a Fraction; those lanes'
        exact values, in lane order), without building the Fractions.  None when a lane holds
        anything else (a bool, a tuple...)."""
        d = self._data
        if d is None:
            r = self.ratios
            return r.floats(), np.ones(len(r), dtype=bool), r  # type: ignore[union-attr]
        if d is _UNBUILT:
            return self.floats, np.zeros(len(self.floats), dtype=bool), _NO_RATIOS  # type: ignore[arg-type]
        if d is _SUMS:
            r, full = self.exact, ~self._empty  # type: ignore[operator]
            return np.where(full, r.floats(), 0.0), full, r.take(np.flatnonzero(full))  # type: ignore[union-attr]
        if isinstance(d, np.ndarray):
            if d.dtype == np.bool_:
                return None
            if not self.frac:  # ints (int64: their floats are correctly rounded)
                return d.astype(np.float64), np.zeros(len(d), dtype=bool), _NO_RATIOS
            return d.astype(np.float64), np.ones(len(d), dtype=bool), Ratios.of_ints(d)
        return _list_numbers(d)

    def values(self) -> list[Any]:
        d = self.data
        if type(d) is list:
            return list(d)
        if self.frac:  # int64 lanes of integral Fractions
            return whole_fractions(d)
        return d.tolist()  # Python ints, or bools

    def __repr__(self) -> str:
        return "<lanes>"


class LaneBag:
    """Row `rows[j]` of `base` in lane `lanes[j]`, for n lanes.  Each lane's rows are distinct
    and ascending (that lane's bag in its order); across lanes a row may repeat (the lanes of a
    row function that reads lane values each see the whole bag: `product`)."""

    __slots__ = ("base", "_rows", "_lanes", "n", "_selected", "_one_each", "_whole", "_codes", "_code", "counts",
                 "blocks")

    def __init__(self, base: Any, rows: Optional[np.ndarray], lanes: Optional[np.ndarray], n: int, *,
                 whole: Optional["LaneBag"] = None, codes: Any = None, code: int = 0,
                 counts: Optional[np.ndarray] = None, blocks: Optional[tuple] = None):
        self.base, self._rows, self._lanes, self.n = base, rows, lanes, n
        self._selected: Any = None
        self._one_each: Optional[bool] = None
        # A group of `whole` (its pairs whose key `codes` are `code`), selected only when its
        # pairs are read: a group is mostly only counted, and `counts` (pairs per lane) is known.
        # `codes` may be a function making them (groupby's batched evaluator on blocks).
        self._whole, self._codes, self._code, self.counts = whole, codes, code, counts
        # Blocks (`of_blocks`): (rows, [(codes, first lane, lanes)]), the pairs made when read.
        self.blocks = blocks

    @staticmethod
    def of_blocks(base: Any, rows: np.ndarray, blocks: list[tuple[np.ndarray, int, int]], n: int) -> "LaneBag":
        """Blocks of lanes over the same rows: in block (codes, first, m), row rows[j] is in lane
        first + codes[j] (0 <= codes[j] < m, each row in one lane), the blocks' lanes in order
        and together n.  The parts of several partitions of one bag (batched `pmap`, in
        kernels/partitions.py): a grouping of them is a bincount per block over the bag's rows
        (batched `groupby`), without
        the pairs of all blocks gathered into one array."""
        return LaneBag(base, None, None, n, blocks=(rows, blocks))

    @property
    def rows(self) -> np.ndarray:
        if self._rows is None:
            self._select()
        return self._rows  # type: ignore[return-value]

    @property
    def lanes(self) -> np.ndarray:
        if self._lanes is None:
            self._select()
        return self._lanes  # type: ignore[return-value]

    def _select(self) -> None:
        if self.blocks is not None:  # every block's pairs, in block order
            rows, blocks = self.blocks
            self._rows = np.tile(rows, len(blocks))
            self._lanes = np.concatenate([codes.astype(np.int64) + first for codes, first, _ in blocks])
            return
        whole, codes = self._whole, self._codes
        assert whole is not None and codes is not None
        if callable(codes):
            codes = codes()
        keep = codes == self._code
        self._rows, self._lanes = whole.rows[keep], whole.lanes[keep]
        self._whole = self._codes = None

    def pair_lanes(self) -> Optional[np.ndarray]:
        """Each (lane, row) pair's lane, or None when pair i is lane i (one row in every lane):
        a lane value's column on the pairs is then the lane value itself."""
        if self._one_each is None:
            self._one_each = len(self.lanes) == self.n and bool((self.lanes == np.arange(self.n)).all())
        return None if self._one_each else self.lanes

    def selected(self) -> Any:
        """Every (lane, row) pair's row, in order, as one bag: lazily selected when no row
        repeats, else gathered.  Made once (bags are never modified), with the columns a
        row function reads kept by the MaskedBag."""
        if self._selected is None:
            rows = self.rows
            if len(rows) > 1 and not bool((rows[1:] > rows[:-1]).all()):
                gathered = self.base.take(rows).reset_index(drop=True)
                self._selected = MaskedBag(gathered, np.ones(len(rows), dtype=bool), count=len(rows))
            else:
                mask = np.zeros(len(self.base), dtype=bool)
                mask[rows] = True
                self._selected = MaskedBag(self.base, mask, count=len(rows))
        return self._selected

    def lane(self, i: int) -> MaskedBag:
        mask = np.zeros(len(self.base), dtype=bool)
        mine = self.rows[self.lanes == i]
        mask[mine] = True
        return MaskedBag(self.base, mask, count=len(mine))

    def sub(self, keep: np.ndarray) -> "LaneBag":
        return LaneBag(self.base, self.rows[keep], self.lanes[keep], self.n)

    def __repr__(self) -> str:
        return "<bag>"


class ThresholdBags:
    """The rows of `bag` where `column op t_i` holds (or, `negated`, does not), one lane per
    threshold t_i; counts come from one sort (or one count per whole number) of the column."""

    __slots__ = ("bag", "column", "op", "thresholds", "negated", "_below")

    def __init__(self, bag: Any, column: np.ndarray, op: str, thresholds: list[float], negated: bool,
                 shared: Optional[list] = None):
        self.bag, self.column, self.op, self.thresholds, self.negated = bag, column, op, thresholds, negated
        # the two sides of a split share the column's counts and each threshold's hits
        self._below: list = shared if shared is not None else [None, None]

    def counts(self) -> np.ndarray:
        shared = self._below
        if shared[1] is None:
            if shared[0] is None:
                shared[0] = _Below.of(self.column)
            below = shared[0]
            t = np.asarray(self.thresholds, dtype=np.float64)
            # #(x < t) or #(x <= t), whichever the operator needs, for each t
            if self.op in ("lt", "ge"):
                hits = below.below(t)
            else:
                hits = below.at_most(t)
            if self.op in ("gt", "ge"):
                hits = below.n - hits
            nan = np.isnan(t)
            if nan.any():
                hits = np.where(nan, 0, hits)  # a comparison with NaN is false
            shared[1] = hits.astype(np.int64)
        hits = shared[1]
        return len(self.column) - hits if self.negated else hits.copy()

    def lane(self, i: int) -> MaskedBag:
        prim = lookup(self.op)
        with np.errstate(invalid="ignore"):
            keep = np.asarray(prim.run(self.column, self.thresholds[i]), dtype=bool)
        return restrict(self.bag, ~keep if self.negated else keep)

    def __repr__(self) -> str:
        return "<bag>"


class _Below:
    """How many of a column's values (no NaN) lie below, or at most at, each threshold: by
    binary search in the sorted column, or, when every value is a whole number in a range not
    much wider than the column is long, from one count per whole number (a bincount and its
    cumulative sum, no sort): for a whole number x, x < t exactly when x <= ceil(t) - 1 and
    x <= t exactly when x <= floor(t), both computed exactly in floats."""

    __slots__ = ("n", "_sorted", "_lo", "_cum")

    def __init__(self, n: int, sorted_values: Optional[np.ndarray], lo: int = 0, cum: Optional[np.ndarray] = None):
        self.n, self._sorted, self._lo, self._cum = n, sorted_values, lo, cum

    @classmethod
    def of(cls, column: np.ndarray) -> "_Below":
        """The counts of a column's values other than NaN."""
        x = column
        lo = hi = math.nan
        if x.size:
            lo, hi = float(x.min()), float(x.max())  # NaN when the column holds one
            if math.isnan(lo) or math.isnan(hi):
                x = x[~np.isnan(x)]
                lo, hi = (float(x.min()), float(x.max())) if x.size else (math.nan, math.nan)
        n = len(x)
        if (n and math.isfinite(lo) and math.isfinite(hi) and hi - lo <= 4 * n + 1024
                and -2.0**52 < lo and hi < 2.0**52):
            whole = x.astype(np.intp)  # exact for a whole number of this size; any other differs
            if bool((whole == x).all()):
                whole -= int(lo)  # in place: a large temporary fewer
                counts = np.bincount(whole, minlength=int(hi - lo) + 1)
                return cls(n, None, int(lo), np.concatenate(([0], np.cumsum(counts))))
        return cls(n, np.sort(x))

    def below(self, t: np.ndarray) -> np.ndarray:
        if self._cum is None:
            return np.searchsorted(self._sorted, t, "left")
        return self._upto(np.ceil(t) - 1)

    def at_most(self, t: np.ndarray) -> np.ndarray:
        if self._cum is None:
            return np.searchsorted(self._sorted, t, "right")
        return self._upto(np.floor(t))

    def _upto(self, v: np.ndarray) -> np.ndarray:
        """#(x <= v) for whole numbers v (infinities and NaN allowed: NaN is dropped later)."""
        cum = self._cum
        assert cum is not None
        # cum[j] = #(x <= lo + j - 1); clip in floats first (v may be infinite or huge)
        j = np.clip(np.nan_to_num(v - self._lo + 1, nan=0.0), 0, len(cum) - 1).astype(np.intp)
        return cum[j]


class PerRunMechanism:
    """A mechanism whose input differs between lanes and nothing else (the auditor's fuzzy
    evaluation): `first` is lane 0's distribution (its calibration is every lane's: it comes from
    the checker and the lane-free arguments), `inputs` the lane value of the inputs.  The auditor
    draws all lanes at once with `first.per_run`; `each_lane()` builds the reference, one
    distribution per lane.  It is a lane value that cannot be split or viewed lane by lane
    (NotBatchable): only drawn."""

    __slots__ = ("first", "inputs", "n", "each_lane")

    def __init__(self, first: Any, inputs: Any, n: int, each_lane: Any):
        self.first, self.inputs, self.n, self.each_lane = first, inputs, n, each_lane

    def __repr__(self) -> str:
        return "<distribution>"


def _unlocated(v: Any) -> Any:
    while type(v) is Located:
        v = v.inner
    return v


_LANE_TYPES = (Lanes, LaneBag, ThresholdBags, PerRunMechanism)
_PLAIN = frozenset({str, bool, int, float, Fraction, type(None)})  # never hold lanes
# Nor do these: bags of one table (a groupby's parts too, made lazily) and tables.
_NO_LANES = _PLAIN | {MaskedBag, Partition, pd.DataFrame, pd.Series}


_NO_RATIOS = Ratios.of_ints(np.zeros(0, dtype=np.int64))


def _list_numbers(d: list) -> Optional[tuple[np.ndarray, np.ndarray, Ratios]]:
    """`Lanes.numbers` of a list of values."""
    kinds = set(map(type, d))
    if not kinds <= {float, Fraction, int}:  # the exact types: a bool is not a number here
        return None
    is_exact = np.fromiter((type(x) is Fraction for x in d), dtype=bool, count=len(d))
    try:
        floats = np.array(d, dtype=np.float64)  # float() of each int and Fraction: correctly rounded
    except OverflowError:
        floats = np.array([as_float(x) for x in d], dtype=np.float64)
    exact = Ratios.of_values([x for x in d if type(x) is Fraction]) if Fraction in kinds else _NO_RATIOS
    return floats, is_exact, exact  # type: ignore[return-value]


def has_lanes(v: Any, depth: int = 0) -> bool:
    t = type(v)
    if t in _NO_LANES:
        return False
    if t in _LANE_TYPES:
        return True
    if depth > 8:
        return False
    if t is tuple:
        return any(has_lanes(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return any(has_lanes(x, depth + 1) for x in v.values())
    if t is Closure:  # only what its code reads counts: a lambda captures its whole scope
        env = v.env
        return any(has_lanes(env[k], depth + 1) for k in _read_names(v.body) if k in env)
    return False


# Memoised per IR node, on the node (runtime/node_memo.py): it lives as long as the program.
_NAMES = NodeMemo("read_names")
_NOTHING: frozenset = frozenset()


def _read_names(body: Any) -> frozenset:
    """Every variable name the code reads (a superset of its free variables), memoised (not for
    a list of nodes, which has no attributes to keep it in).  A function value without a body
    (a top-level function's) reads nothing of its scope."""
    if body is None:
        return _NOTHING
    hit = _NAMES.get(body)
    if hit is not None:
        return hit
    names: set[str] = set()
    _collect(body, names)
    out = frozenset(names)
    _NAMES[body] = out
    return out


def _collect(node: Any, names: set[str]) -> None:
    if isinstance(node, I.IVar):
        names.add(node.name)
    elif isinstance(node, (list, tuple)):
        for x in node:
            _collect(x, names)
    elif isinstance(node, I.ICall):  # top-level functions capture nothing: only the arguments
        _collect(node.args, names)
    elif isinstance(node, I.IR) and is_dataclass(node):
        for f in fields(node):
            if f.name not in ("span", "info"):
                _collect(getattr(node, f.name), names)


def lane_view(v: Any, i: int, depth: int = 0) -> Any:
    """Lane i's own value of `v` (the value an unbatched evaluation for input i has)."""
    t = type(v)
    if t is Lanes or t is LaneBag or t is ThresholdBags:
        return v.at(i) if t is Lanes else v.lane(i)
    if t is PerRunMechanism:
        raise NotBatchable("a per-run mechanism used as a value")
    if depth > 8 or not has_lanes(v):
        return v
    if t is tuple:
        return tuple(lane_view(x, i, depth + 1) for x in v)
    if isinstance(v, dict):
        return {k: lane_view(x, i, depth + 1) for k, x in v.items()}
    if t is Closure:
        env = dict(v.env)
        for k in _read_names(v.body):
            if k in env:
                env[k] = lane_view(env[k], i, depth + 1)
        return Closure(env, v.params, v.body)
    return v


def constant_identity(fn: Any) -> Optional[tuple]:
    """(code, the values it reads from its scope) for a function that reads only public
    constants (numbers, strings, booleans, tuples of them) besides its parameters; None
    otherwise.  Two functions with the same identity compute the same thing.  The code is its
    structure up to the names of its bound variables (`structure`) when it has one, so that one
    source function elaborated in two instances of its caller (an IR copy each, with generated
    names) has one identity; else the code object itself."""
    if type(fn) is not Closure or fn.body is None or not fn.params:
        return None
    env, params = fn.env, tuple(fn.params)
    read = []
    for name in _outer_reads(fn.body, params):
        if name not in env:
            continue
        v = env[name]
        if not _is_constant(v):
            return None
        read.append((name, type(v).__name__, v))
    if not read:  # a key reading its row alone (r.income): the code is its identity
        return _per_node(_CODE_IDENTITIES, fn.body, params, lambda: _code_identity(fn.body, params, ()))
    return _code_identity(fn.body, params, tuple(read))


def _code_identity(body: Any, params: tuple, read: tuple) -> tuple:
    code = structure_number(body, params)
    return (len(params), ("ir", id(body), body) if code is None else code, read)


def _outer_reads(body: Any, params: tuple) -> tuple:
    """The names `body` reads other than `params`, sorted (remembered per node and params)."""
    return _per_node(_OUTER_READS, body, params, lambda: tuple(sorted(_read_names(body) - set(params))))


_CODE_IDENTITIES = NodeMemo("code_identity")
_OUTER_READS = NodeMemo("outer_reads")


def structure_number(node: Any, params: tuple = ()) -> Optional[int]:
    """A number per distinct `structure` of code, remembered per IR node: a structure is a deep
    tuple, hashed again on every lookup of a key that holds it.  None when it has none.  Equal
    numbers mean equal structures (numbers are never reused)."""
    def number() -> Optional[int]:
        code = structure(node, params)
        return None if code is None else _number(code)

    return _per_node(_STRUCTURE_NUMBERS, node, params, number)


def _per_node(table: NodeMemo, node: Any, params: tuple, compute: Callable[[], Any]) -> Any:
    """compute(), remembered in `table` (on the IR node; not for a dict or a list of nodes) for
    these `params`."""
    hit = table.get(node)
    if hit is not None and hit[0] == params:
        return hit[1]
    out = compute()
    table[node] = (params, out)
    return out


_STRUCTURE_NUMBERS = NodeMemo("structure_number")


_STRUCTURE = NodeMemo("structure")


def structure(node: Any, params: tuple = ()) -> Optional[tuple]:
    """A hashable description of code, equal for two pieces of code exactly when they are the
    same up to the names of the variables they bind: `params` and every name bound inside are
    replaced by their binding position (a de Bruijn level), free names are kept; spans are left
    out, called instances are described by their bodies (a call of an instance whose body is
    being described, recursion, by how many enclosing instance descriptions up that one is: a
    fixpoint, equal for two recursive functions exactly when their equations are), constants with
    their types and the primitives' decisions (`info`) by value.  None for code it cannot
    describe so (a closure whose code comes from elsewhere, a value with no equality by value):
    such code is only ever the same as itself."""
    def describe() -> Optional[tuple]:
        try:
            return _Structure().of(node, {p: i for i, p in enumerate(params)})
        except _Opaque:
            return None

    return _per_node(_STRUCTURE, node, params, describe)


class _Opaque(Exception):
    pass


class _Structure:
    """One `structure` computation: `scope` maps a bound name to its binding level."""

    def __init__(self) -> None:
        self.active: list[int] = []  # the instances being described, outermost first

    def of(self, v: Any, scope: dict) -> Any:
        if isinstance(v, I.IR):
            handler = getattr(self, "n_" + type(v).__name__, None)
            if handler is not None:
                return handler(v, scope)
            if isinstance(v, (I.IClosure, I.ISample)):  # code from elsewhere; or a distribution
                raise _Opaque
            return (type(v).__name__,) + tuple(self.of(getattr(v, f.name), scope)
                                               for f in fields(v) if f.name != "span")
        if isinstance(v, I.Instance):
            if v.body is None:
                raise _Opaque
            if id(v) in self.active:  # recursion: the enclosing description it refers to
                return ("recursive", len(self.active) - 1 - self.active.index(id(v)))
            self.active.append(id(v))
            try:
                return ("instance", len(v.params), self.of(v.body, {p: i for i, p in enumerate(v.params)}))
            finally:
                self.active.pop()
        if v is None or type(v) in (bool, int, float, str, Fraction):
            return (type(v).__name__, v)
        if type(v) in (list, tuple):
            return (type(v).__name__,) + tuple(self.of(x, scope) for x in v)
        if type(v) is dict:
            items = sorted(v.items(), key=lambda kx: repr(kx[0]))
            return ("dict",) + tuple((repr(k), self.of(x, scope)) for k, x in items)
        if is_dataclass(v) and not isinstance(v, type) and type(v).__eq__ is not object.__eq__:
            try:
                hash(v)
            except TypeError:
                raise _Opaque from None
            return ("value", type(v).__name__, v)  # a description compared by value (a type)
        raise _Opaque

    # -- variables and binders ----------------------------------------------------------------------

    @staticmethod
    def bind(scope: dict, pattern: Any) -> dict:
        """`scope` with the names of `pattern` bound at the next levels, in pattern order."""
        out = dict(scope)

        def add(p: Any) -> None:
            if p is None:
                return
            if isinstance(p, str):
                out[p] = len(out)
                return
            for q in p[1]:
                add(q)

        add(pattern)
        return out

    @staticmethod
    def pattern(p: Any) -> Any:
        """A pattern's shape, its names left out (they become levels)."""
        if p is None:
            return "_"
        if isinstance(p, str):
            return "x"
        return (p[0],) + tuple(_Structure.pattern(q) for q in p[1])

    def n_IVar(self, node: I.IVar, scope: dict) -> Any:
        level = scope.get(node.name)
        return ("free", node.name) if level is None else ("bound", level)

    def n_ILet(self, node: I.ILet, scope: dict) -> Any:
        return ("ILet", self.pattern(node.pattern), self.of(node.bound, scope),
                self.of(node.body, self.bind(scope, node.pattern)))

    def n_ICase(self, node: I.ICase, scope: dict) -> Any:
        (lp, lb), (rp, rb) = node.left, node.right
        if node.kind == "list":
            left = ("nil", self.of(lb, scope))
            right = ("cons", self.pattern(rp[0]), self.pattern(rp[1]),
                     self.of(rb, self.bind(self.bind(scope, rp[0]), rp[1])))
        else:
            left = ("inl", self.pattern(lp), self.of(lb, self.bind(scope, lp)))
            right = ("inr", self.pattern(rp), self.of(rb, self.bind(scope, rp)))
        return ("ICase", node.kind, self.of(node.scrutinee, scope), left, right)

    def n_ILambda(self, node: I.ILambda, scope: dict) -> Any:
        inner = self.bind(scope, ("tensor", list(node.params)))
        return ("ILambda", len(node.params), self.of(node.body, inner))

    def n_IApply(self, node: I.IApply, scope: dict) -> Any:
        if node.body is None:
            return ("IApply", self.of(node.fn, scope), self.of(node.args, scope))
        if not isinstance(node.fn, I.IClosure):  # the body runs in another value's scope
            raise _Opaque
        # a closure applied where it is made: its body runs in this scope plus its parameters
        inner = self.bind(scope, ("tensor", list(node.params or [])))
        return ("IApply closure", self.of(node.args, scope), len(node.params or []), self.of(node.body, inner))


def _is_constant(v: Any, depth: int = 0) -> bool:
    if v is None or isinstance(v, (bool, str, int, Fraction, float)):
        return True
    if type(v) is tuple and depth < 4:
        return all(_is_constant(x, depth + 1) for x in v)
    return False


def unlane(v: Any, n: int) -> list[Any]:
    """[lane_view(v, i) for i in range(n)], built a component at a time."""
    t = type(v)
    if t is Lanes:
        if isinstance(v.data, np.ndarray):
            return v.values()
        return list(v.data)
    if not has_lanes(v):
        return [v] * n
    if t is tuple:
        return list(zip(*[unlane(x, n) for x in v])) if v else [()] * n
    if t is dict:
        keys = list(v)
        cols = [unlane(v[k], n) for k in keys]
        return [dict(zip(keys, row)) for row in zip(*cols)]
    return [lane_view(v, i) for i in range(n)]


# ---- the evaluator -----------------------------------------------------------------------------

_INT_OPS = {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum}
_CMP_OPS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
            "ne": np.not_equal}
_CMP_FNS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
            "ne": operator.ne}
_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _simple(cond: Any) -> bool:
    """A comparison of variables and constants: evaluating it cannot fail or loop."""
    return (type(cond) is I.IPrim and cond.name in _CMP_OPS
            and all(type(a) in (I.IVar, I.IConst) for a in cond.args))


def _call_key(branch: Any) -> Optional[tuple]:
    """What makes two branches calls of one function: the called code (`structure`, by its
    number: `_code_number`) and the number of arguments; None for a branch that is not such a
    call."""
    if type(branch) is not I.ICall:
        return None
    code = _code_number(branch.instance)
    return None if code is None else ("call", code, len(branch.args))


def _code_number(inst: I.Instance) -> Optional[int]:
    """A number per distinct `structure` of an instance, remembered per instance: a structure is
    a deep tuple, hashed again on every comparison."""
    hit = _CODE_NUMBERS.get(inst)
    if hit is None:
        code = structure(inst)
        hit = -1 if code is None else _number(code)
        _CODE_NUMBERS[inst] = hit
    return None if hit < 0 else hit


def _number(code: tuple) -> int:
    """The number of a structure: the same for equal structures while they are remembered."""
    if len(_NUMBERED) >= 4096:  # forgets old codes; numbers are never reused
        _NUMBERED.clear()
    return _NUMBERED.setdefault(code, next(_NEXT_NUMBER))


_CODE_NUMBERS = NodeMemo("code_number")
_NUMBERED: dict = {}
_NEXT_NUMBER = itertools.count()


# (id(condition), its string arguments per lane) -> (condition, truth per lane)
_TRUTHS: dict = {}
_CHAINS: dict = {}  # (chain, first truth, strings read) -> (chain, each lane's branch, the branches)
_MISSING = object()


def _chain_names(node: I.IIf) -> Optional[tuple]:
    """The variables the chain's conditions read, from `node`'s own on, as far as they are
    comparisons of variables and constants (`_simple`): what decides the chain.  None when
    `node`'s own condition is not one.  Remembered per node."""
    def collect() -> Optional[tuple]:
        if not _simple(node.cond):
            return None
        names: list[str] = []
        nxt = node
        while type(nxt) is I.IIf and _simple(nxt.cond):
            names.extend(a.name for a in nxt.cond.args if type(a) is I.IVar and a.name not in names)
            nxt = nxt.other
        return tuple(names)

    return _per_node(_CHAIN_NAMES, node, (), collect)


_CHAIN_NAMES = NodeMemo("chain_names")


class _ListCase:
    kind = "list"


_LIST_CASE = _ListCase()


class LaneEvaluator(Interpreter):
    """The ordinary evaluator, with lane values allowed in the environment."""

    def __init__(self, state: Any, n: int, fuzzy: bool = False, inputs: bool = False):
        super().__init__(state, exact=True)
        self.n = n
        # fuzzy: distributions may be built (the auditor samples them lane by lane, audit/batched.py);
        # otherwise a distribution means the evaluation is not a pure computation: not batched here.
        self.fuzzy = fuzzy
        # inputs: the lanes hold several inputs' tables (the auditor's `draw_inputs`); what each
        # input's own evaluation does once for its table would be done here once per lane
        self.inputs = inputs
        # product() of a plain bag, per bag: an iterative program reads the same table at every
        # step, and its (lane, row) pairs and their columns are the same each time
        self._products: dict[int, tuple[Any, LaneBag]] = {}
        # the arithmetic's last arguments and result per node (a loop-invariant operation:
        # kernels/arith.py's batched evaluator)
        self.numeric_memo: dict[int, tuple[tuple, Any]] = {}
        # the row view of each (lane, row) bag and the column evaluator's memo (VectorEvaluator),
        # kept across steps: the row function's operations on the row alone are done once
        self._row_views: dict[int, tuple[Any, Any]] = {}
        self._pair_memo: dict[int, tuple[tuple, Any]] = {}
        self._scalar: Optional[Interpreter] = None

    def scalar(self) -> Interpreter:
        """The scalar evaluator this one runs a single lane's code with (one per evaluator: it
        keeps no state of its own but its caches of primitives and constants)."""
        if self._scalar is None:
            self._scalar = Interpreter(self.state)
        return self._scalar

    def e_IIf(self, node: I.IIf, env: dict) -> Any:
        cond = self.eval(node.cond, env)
        if type(cond) is Lanes:
            vals = [bool(v) for v in cond.values()]  # the truth the scalar evaluator's `if` tests
            if all(vals) or not any(vals):
                return self.eval(node.then if vals[0] else node.other, env)
            truth = np.asarray(vals, dtype=bool)
            return self._split(node, env, truth) if self.fuzzy else self._split_chain(node, env, truth)
        if has_lanes(cond):
            raise NotBatchable("if on a lane value")
        return self.eval(node.then if cond else node.other, env)

    def _split_chain(self, node: I.IIf, env: dict, truth: np.ndarray) -> Any:
        """An `if` whose condition differs between lanes, with the `else if`s after it whose
        conditions are comparisons of variables and constants (`_simple`): every lane's branch
        is decided first, then each branch reached is evaluated once, on the lanes taking it.
        Branches that are calls of one function (the same code, `structure`) are one call, its
        arguments each lane's own branch's arguments (`_one_call`).  Each lane evaluates what its
        own evaluation does, in the same order: the conditions its own evaluation tests (the
        others it evaluates too are comparisons, which cannot fail or loop), then its branch."""
        which, branches = self._chain_branches(node, env, truth)
        groups: dict[Any, list[int]] = {}
        for j in np.unique(which).tolist():
            groups.setdefault(_call_key(branches[j]) or ("branch", j), []).append(j)
        parts = []
        for js in groups.values():
            if len(js) == 1:
                idx = np.flatnonzero(which == js[0])
            else:
                member = np.zeros(len(branches), dtype=bool)
                member[js] = True
                idx = np.flatnonzero(member[which])
            if len(js) == 1:
                parts.append(self._branch_on(branches[js[0]], env, idx))
            else:
                parts.append(self._one_call(env, branches, js, which, idx))
        if len(parts) == 1 and len(parts[0][0]) == self.n:
            return parts[0][1]
        return merge_lanes(self.n, parts)

    def _chain_branches(self, node: I.IIf, env: dict, truth: np.ndarray) -> tuple[np.ndarray, list]:
        """Each lane's branch number in the chain (`_split_chain`), and the branches: the first
        whose condition holds in the lane, else the chain's last `else`.  A few lanes (a score's
        candidates) are decided on Python lists: a numpy operation per condition and lane group
        costs more than the lanes themselves."""
        branches: list[Any] = []
        if self.n > COMPILED_LANES:
            which = np.full(self.n, -1, dtype=np.int64)
            while True:
                which[(which < 0) & truth] = len(branches)
                branches.append(node.then)
                nxt = node.other
                if type(nxt) is not I.IIf or not _simple(nxt.cond) or not (which < 0).any():
                    which[which < 0] = len(branches)
                    branches.append(nxt)
                    return which, branches
                node = nxt
                truth = self._simple_truth(node.cond, env)
        holds = truth.tolist()
        key = self._chain_key(node, env, holds)
        hit = _CHAINS.get(key) if key is not None else None
        if hit is not None and hit[0] is node:
            return hit[1], list(hit[2])
        which, branches = self._decide_chain(node, env, holds)
        if key is not None:
            which.flags.writeable = False
            if len(_CHAINS) >= 4096:
                _CHAINS.clear()
            _CHAINS[key] = (node, which, tuple(branches))
        return which, branches

    def _chain_key(self, node: I.IIf, env: dict, holds: list) -> Optional[tuple]:
        """What decides a chain on a few lanes when its conditions compare only strings (a
        tree's `by` on the candidate attribute): the strings they read.  None otherwise: only
        strings are remembered, as for `_simple_truth` (the table outlives the run)."""
        names = _chain_names(node)
        if names is None:
            return None
        values = []
        for name in names:
            v = env.get(name, _MISSING)
            if type(v) is Lanes:
                lanes = v.values()
                if not all(type(x) is str for x in lanes):
                    return None
                values.append(tuple(lanes))
            elif type(v) is str:
                values.append(v)
            else:
                return None
        return (id(node), tuple(holds), tuple(values))

    def _decide_chain(self, node: I.IIf, env: dict, holds: list) -> tuple[np.ndarray, list]:
        branches: list[Any] = []
        decided: list[int] = [-1] * self.n
        while True:
            b = len(branches)
            decided = [b if d < 0 and t else d for d, t in zip(decided, holds)]
            branches.append(node.then)
            nxt = node.other
            if type(nxt) is not I.IIf or not _simple(nxt.cond) or -1 not in decided:
                b = len(branches)
                branches.append(nxt)
                return np.array([b if d < 0 else d for d in decided], dtype=np.int64), branches
            node = nxt
            holds = self._simple_truth(node.cond, env).tolist()

    def _simple_truth(self, cond: I.IPrim, env: dict) -> np.ndarray:
        """The truth in every lane of a comparison of variables and constants (`_simple`): the
        comparison's exact fold on each lane's values, which is what evaluating it computes
        (its batched paths are exact too), without the primitive dispatch per condition."""
        vals = [self.eval(a, env) for a in cond.args]
        if self.state.engine is None and all(type(v) is Lanes or not has_lanes(v) for v in vals):
            cols = [v.values() if type(v) is Lanes else itertools.repeat(v, self.n) for v in vals]
            lanes = list(zip(*cols))
            # The same comparison of the same strings (a chain on the candidate attributes, at
            # every node of a tree) has the same truth.  Only strings are remembered: this table
            # outlives the run, and numbers compared on lanes may come from private counts.
            key = None
            if self.n <= COMPILED_LANES and all(type(x) is str for lane in lanes for x in lane):
                key = (id(cond), tuple(lanes))
            hit = _TRUTHS.get(key) if key is not None else None
            if hit is not None and hit[0] is cond:
                return hit[1]
            fold = self.prim(cond).fold
            out = [fold_exact(fold, lane) for lane in lanes]
            if all(o is not _NOT_EXACT for o in out):
                truth = np.array([bool(o) for o in out], dtype=bool)
                if key is not None:
                    truth.flags.writeable = False
                    if len(_TRUTHS) >= 4096:
                        _TRUTHS.clear()
                    _TRUTHS[key] = (cond, truth)
                return truth
        value = self.call_prim(self.prim(cond), cond, vals)
        if type(value) is Lanes:
            return np.asarray([bool(v) for v in value.values()], dtype=bool)
        if has_lanes(value):
            raise NotBatchable("if on a lane value")
        return np.full(self.n, bool(value))

    def _branch_on(self, branch: Any, env: dict, idx: np.ndarray) -> tuple:
        """(idx, branch's value on lanes idx, the evaluator that computed it)."""
        if len(idx) == self.n:
            return idx, self.eval(branch, env), self
        if len(idx) == 1 and not self.fuzzy:
            return idx, self._one_lane(branch, env, int(idx[0])), None
        sub = LaneEvaluator(self.state, len(idx), self.fuzzy, self.inputs)
        return idx, sub.eval(branch, _restrict_env(env, branch, idx, self.n)), sub

    def _one_call(self, env: dict, branches: list, js: list[int], which: np.ndarray, idx: np.ndarray) -> tuple:
        """Branches js, calls of one function, on their lanes idx: each branch's arguments on
        its own lanes, merged lane by lane, then one call of the function on all of idx."""
        calls = [branches[j] for j in js]
        sub = self if len(idx) == self.n else LaneEvaluator(self.state, len(idx), self.fuzzy, self.inputs)
        sub_env = env if sub is self else _restrict_env(env, calls, idx, self.n)
        mine = which[idx]
        per_arg: list[list] = [[] for _ in calls[0].args]
        for j, call in zip(js, calls):
            pos = np.flatnonzero(mine == j)
            for slot, v in zip(per_arg, sub._args_on(call.args, sub_env, pos)):
                slot.append((pos, v))
        args = [_merge_values(len(idx), slot) for slot in per_arg]
        return idx, sub.call_instance(calls[0], args), sub

    def _args_on(self, args: list, env: dict, idx: np.ndarray) -> list:
        """A call's arguments, in order, on lanes idx (each over those lanes)."""
        if len(idx) == self.n:
            return [self.eval(a, env) for a in args]
        if len(idx) == 1:
            scalar = self.scalar()
            lane_env = self._lane_env(list(args), env, int(idx[0]))
            out = [scalar.eval(a, lane_env) for a in args]
            if any(is_distribution(v) for v in out):
                raise NotBatchable("a distribution")
            return out
        sub = LaneEvaluator(self.state, len(idx), self.fuzzy, self.inputs)
        sub_env = _restrict_env(env, list(args), idx, self.n)
        return [sub.eval(a, sub_env) for a in args]

    def _lane_env(self, nodes: Any, env: dict, i: int) -> dict:
        """Lane i's own values of what `nodes` (a node or a list of them) can reach."""
        reached = [_reach(b) for b in nodes] if type(nodes) is list else [_reach(nodes)]
        if any(r is None for r in reached):
            return {k: lane_view(v, i) for k, v in env.items()}
        return {k: lane_view(env[k], i) for k in frozenset().union(*reached) if k in env}

    def _split(self, node: I.IIf, env: dict, truth: np.ndarray) -> Any:
        """An `if` whose condition differs between lanes: each branch is evaluated once, on the
        lanes that take it (and only those, as each input's own evaluation would), by an
        evaluator over those lanes; the two results are merged back lane by lane."""
        parts = []
        for branch, idx in ((node.then, np.flatnonzero(truth)), (node.other, np.flatnonzero(~truth))):
            if len(idx) == 1 and not self.fuzzy:
                parts.append((idx, self._one_lane(branch, env, int(idx[0])), None))
                continue
            sub = LaneEvaluator(self.state, len(idx), self.fuzzy, self.inputs)
            parts.append((idx, sub.eval(branch, _restrict_env(env, branch, idx, self.n)), sub))
        return merge_lanes(self.n, parts)

    def _one_lane(self, branch: Any, env: dict, i: int) -> Any:
        """A branch taken by lane i alone, by the scalar evaluator on that lane's own values: the
        reference semantics itself, without lane bookkeeping at every step (a selection's chain
        of `if`s on the candidate ends with one candidate per branch).  Its value, a plain value,
        is lane i's value."""
        out = self.scalar().eval(branch, self._lane_env(branch, env, i))
        if is_distribution(out):
            raise NotBatchable("a distribution")
        return out

    def case_on(self, node: I.ICase, value: Any, env: dict) -> Any:
        if type(value) is Lanes:
            value = self._uniform_shape(node, value)
        elif node.kind == "sum" and has_lanes(value):
            raise NotBatchable("case on a lane value")
        return super().case_on(node, value, env)

    def _uniform_shape(self, node: I.ICase, value: Lanes) -> Any:
        """A lane value whose shape is the same in every lane (lists of one length, sums on one
        side) as that shape with lane values inside: every lane takes the same branch."""
        vals = value.values()
        if node.kind == "sum":
            if not all(type(v) is tuple and len(v) == 2 for v in vals) or len({v[0] for v in vals}) != 1:
                raise NotBatchable("case on a lane value")
            return (vals[0][0], Lanes([v[1] for v in vals]))
        if not all(type(v) is tuple for v in vals) or len({len(v) for v in vals}) != 1:
            raise NotBatchable("case on lists of different lengths")
        if not vals[0]:
            return ()
        return (Lanes([v[0] for v in vals]),) + tuple(Lanes([v[j] for v in vals]) for j in range(1, len(vals[0])))

    def e_ICons(self, node: I.ICons, env: dict) -> Any:
        head, tail = self.eval(node.head, env), self.eval(node.tail, env)
        if type(tail) is Lanes:
            tail = self._uniform_shape(_LIST_CASE, tail)
        return (head,) + tuple(tail)

    def e_ILet(self, node: I.ILet, env: dict) -> Any:
        while type(node) is I.ILet:
            value = self.eval(node.bound, env)
            if type(value) is Lanes and not isinstance(node.pattern, (str, type(None))):
                value = _transpose(value, self.n)
            env = bind(env, node.pattern, value)
            node = node.body  # type: ignore[assignment]
        return self.eval(node, env)

    def e_IProj(self, node: I.IProj, env: dict) -> Any:
        value = self.eval(node.value, env)
        if type(value) is Lanes:
            return Lanes([x[node.index] for x in value.values()])
        if type(value) in _LANE_TYPES:
            raise NotBatchable("projection")
        return value[node.index]

    def e_IField(self, node: I.IField, env: dict) -> Any:
        value = self.eval(node.value, env)
        if type(value) is Lanes:
            return Lanes([field_of(x, node.name) for x in value.values()])
        if type(value) in _LANE_TYPES:
            raise NotBatchable("field")
        return field_of(value, node.name)

    def e_ISample(self, node: I.ISample, env: dict) -> Any:
        if not self.fuzzy:
            raise NotBatchable("a distribution")
        return super().e_ISample(node, env)

    def e_IReturn(self, node: I.IReturn, env: dict) -> Any:
        if not self.fuzzy:
            raise NotBatchable("a distribution")
        return super().e_IReturn(node, env)

    def call_body(self, inst: I.Instance, args: list[Any]) -> Any:
        """A public function (one compiled.py translates) on a few lanes: its compiled code once
        per lane, on that lane's own values (the reference semantics, without a step per node);
        anything else is evaluated on the lanes."""
        state = self.state
        if (self.n <= COMPILED_LANES and not self.fuzzy and state.compiled and state.engine is None
                and state.row_calls is None):
            scalar = self.scalar()
            fn = scalar.compiled_of(inst)
            if fn is not None:
                cols = [unlane(a, self.n) for a in args]
                return compact([fn(scalar, state, *vals) for vals in zip(*cols)] if cols
                               else [fn(scalar, state) for _ in range(self.n)])
        return super().call_body(inst, args)

    def call_prim(self, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
        if not any(type(a) not in _PLAIN and has_lanes(a) for a in args):
            out = super().call_prim(prim, node, args)
            if is_distribution(out) and not self.fuzzy:
                raise NotBatchable("a distribution")
            return out
        batched = prim.batched  # the primitive's own evaluator on lanes (runtime/kernels/), if it has one
        if batched is not PER_LANE:
            out = batched(self, prim, node, args)
            if out is not NotImplemented:
                return out
        return self._per_lane(prim, node, args)

    def _per_lane(self, prim: Any, node: I.IPrim, args: list[Any]) -> Lanes:
        """The reference semantics: the primitive once per lane, on that lane's values."""
        if self.inputs and (prim.is_mechanism or any(type(a) is LaneBag for a in args)):
            # a mechanism or a table operation once per lane, where each input's own evaluation
            # does it once (or draws it vectorised): slower together than input by input
            raise NotBatchable("one evaluation per lane of several inputs' tables")
        if self.state.engine is None and prim.fold is not None and not prim.needs_context and not prim.structured:
            return self._folds(prim, node, args)
        if self.state.engine is None and prim.bag_only:  # run on its arguments as they are,
            cols = [unlane(a, self.n) for a in args]           # as the scalar call_prim runs it
            return Lanes([prim.run(*vals) for vals in zip(*cols)])
        out = []
        for i in range(self.n):
            v = super().call_prim(prim, node, [lane_view(a, i) for a in args])
            if is_distribution(v) and not self.fuzzy:
                raise NotBatchable("a distribution")
            out.append(v)
        return Lanes(out)

    def _folds(self, prim: Any, node: I.IPrim, args: list[Any]) -> Lanes:
        """Scalar arithmetic and comparisons once per lane: the exact fold the scalar evaluator
        tries first (Interpreter.call_prim), without its dispatch; a lane whose values it does not
        take (not scalars) goes through call_prim itself."""
        fold = prim.fold
        cols = [exact_args(a, self.n) for a in args]
        if all(c is not None for c in cols):  # every lane's arguments as fold_exact makes them
            return Lanes([fold(*vals) for vals in zip(*cols)])
        out = []
        for vals in zip(*[unlane(a, self.n) for a in args]):
            v = fold_exact(fold, list(vals))
            out.append(v if v is not _NOT_EXACT else Interpreter.call_prim(self, prim, node, list(vals)))
        return Lanes(out)


def exact_args(v: Any, n: int) -> Optional[list]:
    """A lane value's (or a constant's) values as `fold_exact` converts them (`exact_arg`), or
    None when one of them is not a scalar."""
    if type(v) is not Lanes:
        if has_lanes(v):
            return None
        one = exact_arg(v)
        return None if one is None else [one] * n
    out = []
    for x in v.values():
        q = exact_arg(x)
        if q is None:
            return None
        out.append(q)
    return out


# ---- lane subsets: the lanes that take one branch of an `if` ----------------------------------------

class LaneSplit:
    """A distribution per group of lanes (the branches of an `if` that differs between lanes, in
    the auditor's fuzzy evaluation): `parts` is [(lane indices, distribution, evaluator)]."""

    __slots__ = ("n", "parts")

    def __init__(self, n: int, parts: list):
        self.n, self.parts = n, parts

    def __repr__(self) -> str:
        return "<distribution>"


def _is_dist(v: Any) -> bool:
    return type(v) is LaneSplit or type(v) is PerRunMechanism or is_distribution(v)


def merge_lanes(n: int, parts: list) -> Any:
    """One value over n lanes from [(lane indices, value over those lanes, evaluator)]."""
    dists = [_is_dist(v) for _, v, _ in parts]
    if all(dists):
        return LaneSplit(n, parts)
    if any(dists):
        raise NotBatchable("a branch is a distribution and the other not")
    return _merge_values(n, [(idx, v) for idx, v, _ in parts])


def _merge_values(n: int, parts: list, depth: int = 0) -> Any:
    """The lanes' values put back in lane order: tuples of one length coordinate by coordinate,
    Fractions held as ratios in every part as ratios, anything else lane by lane (`compact`)."""
    vals = [v for _, v in parts]
    if depth < 8 and vals and all(type(v) is tuple for v in vals) and len({len(v) for v in vals}) == 1:
        return tuple(_merge_values(n, [(idx, v[j]) for idx, v in parts], depth + 1) for j in range(len(vals[0])))
    held = [_fraction_ratios(v, len(idx)) for idx, v in parts]
    if held and all(r is not None for r in held):
        return Lanes.of_ratios(Ratios.scatter(n, [(idx, r) for (idx, _), r in zip(parts, held)]))
    out: list = [None] * n
    for idx, v in parts:
        for i, x in zip(idx.tolist(), unlane(v, len(idx))):
            out[i] = x
    return compact(out)


def _fraction_ratios(v: Any, n: int) -> Optional[Ratios]:
    """The ratios of lanes held as ratios (Fractions when read), or of a Fraction constant; None
    for anything else (a float or an int must keep its type)."""
    if type(v) is Lanes:
        return v.ratios if v._data is None else None
    return Ratios.constant(v, n) if type(v) is Fraction else None


def compact(vals: list) -> Lanes:
    """Lanes of these values: an int64/bool array when they are all ints, all integral Fractions
    or all booleans (below the int-lane bound), a list otherwise.  Lanes.at gives back the same
    values and types."""
    if vals:
        t = type(vals[0])
        if all(type(v) is t for v in vals):
            if t is bool:
                return Lanes(np.asarray(vals, dtype=bool))
            if t is int and all(abs(v) < _INT_SAFE for v in vals):
                return Lanes(np.asarray(vals, dtype=np.int64))
            if t is Fraction and all(v.denominator == 1 and abs(v.numerator) < _INT_SAFE for v in vals):
                return Lanes(np.asarray([v.numerator for v in vals], dtype=np.int64), True)
    return Lanes(vals)


# What a branch can reach of its environment: the names it reads, or everything when it captures
# the whole environment (a closure whose code comes from its application site).
_REACH = NodeMemo("reach")
_UNREACHED = object()


def _reach(branch: Any) -> Optional[frozenset]:
    hit = _REACH.get(branch, _UNREACHED)  # one lookup: None (captures its scope) is a value
    if hit is not _UNREACHED:
        return hit
    out = None if _captures_env(branch) else _read_names(branch)
    _REACH[branch] = out
    return out


def _captures_env(node: Any) -> bool:
    if isinstance(node, I.IClosure):
        return True
    if isinstance(node, (list, tuple)):
        return any(_captures_env(x) for x in node)
    if isinstance(node, I.ICall):
        return _captures_env(node.args)
    if isinstance(node, I.IR) and is_dataclass(node):
        return any(_captures_env(getattr(node, f.name)) for f in fields(node) if f.name not in ("span", "info"))
    return False


def _restrict_env(env: dict, branch: Any, idx: np.ndarray, n: int) -> dict:
    """The environment of lanes `idx` only; names the branch (or every branch of a list) cannot
    reach are left out (reading one would be an error, which makes the batch fall back)."""
    reached = [_reach(b) for b in branch] if type(branch) is list else [_reach(branch)]
    names = None if any(r is None for r in reached) else frozenset().union(*reached)
    keys = env.keys() if names is None else [k for k in names if k in env]
    remap = np.full(n, -1, dtype=np.int64)
    remap[idx] = np.arange(len(idx))
    return {k: select_lanes(env[k], idx, remap) for k in keys}


def select_lanes(v: Any, idx: np.ndarray, remap: np.ndarray, depth: int = 0) -> Any:
    """The value of lanes idx (in that order) of `v`; remap[i] is lane i's new number, or -1."""
    t = type(v)
    if t is Lanes:
        if v._data is None:
            return Lanes.of_ratios(v.ratios.take(idx))  # type: ignore[union-attr]
        if v.floats is not None:
            return Lanes.of_floats(v.floats[idx])
        d = v.data
        return Lanes(d[idx], v.frac) if isinstance(d, np.ndarray) else Lanes([d[i] for i in idx.tolist()])
    if t is LaneBag:
        new = remap[v.lanes]
        keep = new >= 0
        return LaneBag(v.base, v.rows[keep], new[keep], len(idx))
    if t is ThresholdBags:
        ts = [v.thresholds[i] for i in idx.tolist()]
        # the column's counts are shared still; the hits were for the other thresholds
        return ThresholdBags(v.bag, v.column, v.op, ts, v.negated, [v._below[0], None])
    if t is LaneSplit or is_distribution(v):
        # A distribution built before the split (the auditor's fuzzy evaluation) may hold every
        # lane's values in its environment; it is narrowed only when it provably holds none.
        if _lane_free_distribution(v):
            return v
        raise NotBatchable("a distribution holding lane values")
    if t is Closure:
        if v.body is None:  # captures its whole environment: every entry is restricted
            if depth > 8:
                raise NotBatchable("lane values nested too deep")
            return Closure({k: select_lanes(x, idx, remap, depth + 1) for k, x in v.env.items()}, v.params, v.body)
        if not has_lanes(v):
            return v
    elif t in (str, int, float, bool, Fraction) or v is None or not has_lanes(v):
        return v
    if depth > 8:
        raise NotBatchable("lane values nested too deep")
    if t is tuple:
        return tuple(select_lanes(x, idx, remap, depth + 1) for x in v)
    if isinstance(v, dict):
        out = {k: select_lanes(x, idx, remap, depth + 1) for k, x in v.items()}
        return out if t is dict else _same_mapping(v, out)
    if t is Closure:
        env = dict(v.env)
        for k in _read_names(v.body):
            if k in env:
                env[k] = select_lanes(env[k], idx, remap, depth + 1)
        return Closure(env, v.params, v.body)
    raise NotBatchable("a lane value this evaluator cannot split")


def _lane_free_distribution(v: Any, depth: int = 0) -> bool:
    t = type(v)
    if depth > 8:
        return False
    if t is Located:
        return _lane_free_distribution(v.inner, depth + 1)
    if t is MechanismDistribution:  # built from plain inputs (per-lane ones are Lanes of them)
        return True
    if t is Returned:
        return not has_lanes(v.value)
    if t is Bind:
        env = v.env
        names = _reach(v.node)
        keys = env.keys() if names is None else [k for k in names if k in env]
        return not any(_holds_lanes(env[k], depth + 1) for k in keys)
    if t is EachDistribution:
        return all(_holds_lanes(d, depth + 1) is False for d in v.parts.values())
    return False  # LaneSplit, or a distribution this function does not know


def _holds_lanes(v: Any, depth: int) -> bool:
    if type(v) is LaneSplit or is_distribution(v):
        return not _lane_free_distribution(v, depth)
    return has_lanes(v)


def _same_mapping(original: Any, items: dict) -> Any:
    raise NotBatchable("a partition holding lane values")


def _transpose(value: Lanes, n: int) -> Any:
    vals = value.values()
    if not vals or not all(type(v) is tuple and len(v) == len(vals[0]) for v in vals):
        raise NotBatchable("tuple pattern on lanes that are not tuples")
    return tuple(Lanes([v[j] for v in vals]) for j in range(len(vals[0])))


# ---- primitives with a batched implementation ------------------------------------------------------

# ---- row functions per lane: every (lane, row) pair in one column evaluation ------------------------
#
# `map f b`, `filter p b`, `groupby key b`, `vsum c f b` with b a lane bag, or with a row function
# that reads lane values (the auditor's released weights, a candidate inside a score's row
# function) and b the same bag in every lane: the function runs once over all (lane, row) pairs,
# the row bound to the pairs' columns and each lane value it reads to a column holding, on every
# pair, that lane's value as the row function sees it (`as_float`, as its scalar evaluation
# converts it).  Inside a row function everything computes in floats (vectorize.py), the same
# float operations on the same floats on either path, so each pair's result is the one lane's own
# evaluation gives its row.  Anything else (a lane value that is not a number, a boolean or a
# tuple of them, a construct the column evaluator refuses) returns NotImplemented: once per lane.

PRODUCT_CELLS = 1 << 23  # at most this many cells gathered for the (lane, row) pairs of a plain bag


def product(ev: LaneEvaluator, b: Any) -> Optional[LaneBag]:
    """b as a lane bag: itself, or (a plain bag, the same in every lane) every row in every lane."""
    if type(b) is LaneBag:
        return b
    if has_lanes(b) or not is_bag(b) or not getattr(ev.state, "vectorise", True):
        return None
    kept = ev._products.get(id(b))
    if kept is not None and kept[0] is b:
        return kept[1]
    base = b.base if isinstance(b, MaskedBag) else b
    rows = b.rows if isinstance(b, MaskedBag) else np.arange(len(b))
    width = base.shape[1] if isinstance(base, pd.DataFrame) else 1
    if len(rows) * ev.n * max(width, 1) > PRODUCT_CELLS:
        return None
    out = LaneBag(base, np.tile(rows, ev.n), np.repeat(np.arange(ev.n, dtype=np.int64), len(rows)), ev.n)
    ev._products[id(b)] = (b, out)
    return out


def lane_rows(ev: LaneEvaluator, fn: Any, b: LaneBag, size: Optional[int] = None) -> Any:
    """fn's result on every (lane, row) pair of b, in order (a Series or a DataFrame), or None;
    with `size`, its vectors of that size as a float matrix (`vectors._row_matrix`)."""
    if type(fn) is not Closure or fn.body is None or not fn.params:
        return None
    if not has_lanes(fn):
        out = apply_rows(ev.state, fn, b.selected())  # the ordinary path, row-by-row fallback included
        return out if size is None or out is None else row_matrix(out, size)
    env = dict(fn.env)
    for name in _read_names(fn.body):
        if name in env and has_lanes(env[name]):
            col = _lane_columns(env[name], b.pair_lanes())
            if col is None:
                return None
            env[name] = col
    return _on_pairs(ev, Closure(env, fn.params, fn.body), b.selected(), size)


def _on_pairs(ev: LaneEvaluator, fn: Closure, bag: Any, size: Optional[int] = None) -> Any:
    state = ev.state
    env = dict(fn.env)
    kept = ev._row_views.get(id(bag))
    if kept is None or kept[0] is not bag:
        kept = ev._row_views[id(bag)] = (bag, row_value(bag, arrays=True))
    env[fn.params[0]] = kept[1]  # type: ignore[index]
    outer, depth, state.row_calls = state.row_calls, state.depth, limits.ROW_CALLS
    try:
        out = _PairEvaluator(state, ev._pair_memo).eval(fn.body, env)  # type: ignore[arg-type]
        if isinstance(out, RowView):
            return None
        if size is not None:  # number columns straight to the matrix, or through the frame
            matrix = number_matrix(out, len(bag), size)
            return matrix if matrix is not None else row_matrix(to_frame(out, len(bag)), size)
        return to_frame(out, len(bag))
    except Exception:  # noqa: BLE001 - not expressible on columns: the caller runs it once per lane
        state.depth = depth
        return None
    finally:
        state.row_calls = outer


def _lane_columns(v: Any, lanes: Optional[np.ndarray], depth: int = 0) -> Any:
    """A lane value as the column (a Vec) of its lanes' values on each pair (`lanes`: each pair's
    lane, None when pair i is lane i); tuples component by component; None for anything else."""
    t = type(v)
    if not has_lanes(v):
        return v
    if depth > 8:
        return None
    if t is tuple:
        cols = tuple(_lane_columns(x, lanes, depth + 1) for x in v)
        return None if any(c is None for c in cols) else cols
    if t is not Lanes:
        return None
    if v._data is None:  # exact rationals: their nearest floats, as as_float gives them
        return Vec(_on_lanes(v.ratios.floats(), lanes))  # type: ignore[union-attr]
    if v.floats is not None:  # floats: themselves
        return Vec(_on_lanes(v.floats, lanes))
    d = v.data
    if isinstance(d, np.ndarray):  # exact ints (below 2**61) or booleans
        return Vec(_on_lanes(d if d.dtype == np.bool_ else d.astype(np.float64), lanes))
    kinds = set(map(type, d))
    if kinds == {float}:  # released values: the floats themselves
        return Vec(_on_lanes(np.asarray(d, dtype=np.float64), lanes))
    if d and kinds == {bool}:
        return Vec(_on_lanes(np.asarray(d, dtype=bool), lanes))
    if kinds <= {int, float, Fraction}:
        return Vec(_on_lanes(np.asarray([as_float(x) for x in d], dtype=np.float64), lanes))
    if d and all(type(x) is tuple and len(x) == len(d[0]) for x in d):  # tuples and lists of one length
        return _lane_columns(tuple(Lanes([x[j] for x in d]) for j in range(len(d[0]))), lanes, depth + 1)
    return None


def _on_lanes(values: np.ndarray, lanes: Optional[np.ndarray]) -> np.ndarray:
    """Each pair's lane's value (the array itself when pair i is lane i: never modified)."""
    return values if lanes is None else values[lanes]


class _PairEvaluator(VectorEvaluator):
    """The column evaluator, where a tuple or list may hold columns that came from lane values
    (their shape is the same on every pair, so a `case` on it takes one branch for all)."""

    def case_on(self, node: I.ICase, value: Any, env: dict) -> Any:
        if node.kind != "sum" and type(value) is tuple and has_vec(value):
            return Interpreter.case_on(self, node, value, env)
        return super().case_on(node, value, env)


def _lane_sum_ratios(values: np.ndarray, lanes: np.ndarray, n: int,
                     bound: Fraction) -> Optional[tuple[Ratios, np.ndarray]]:
    """`_bounded_sum` of each lane's values as exact ratios (0 for an empty lane), and each
    lane's size: the same clamping and grid, each lane's integers summed by one bincount (exact:
    every partial sum stays below 2**53); None when a lane is too large for that."""
    sizes = _lane_sizes(lanes, n)
    if sizes is None:
        return None
    y, k = _grid_integers(values, bound)
    return Ratios.of_scaled(np.bincount(lanes, weights=y, minlength=n), k), sizes


def _lane_sizes(lanes: np.ndarray, n: int) -> Optional[np.ndarray]:
    """Each lane's number of rows, or None when a lane's grid integers could sum past 2**53."""
    sizes = np.bincount(lanes, minlength=n)
    return None if n and int(sizes.max()) >= 1 << (52 - SUM_GRID_BITS) else sizes


def _grid_integers(values: np.ndarray, bound: Fraction) -> tuple[np.ndarray, int]:
    """Each value clamped and rounded toward zero onto the sum's grid 2**k, as the float
    integers y (NaN as 0; all 0 for a bound <= 0), and k: the value's share is y * 2**k."""
    if bound <= 0:
        return np.zeros(values.shape), 0
    k, inv, lim = sum_grid(Fraction(bound))
    y = np.trunc(np.clip(values * inv, -lim, lim))
    y[np.isnan(y)] = 0.0
    return y, k


def _lane_sums(values: np.ndarray, lanes: np.ndarray, n: int, bound: Fraction) -> Optional[Lanes]:
    """`_bounded_sum` of each lane's values, with its types: a Fraction, or the float 0.0 for
    an empty lane or no bound.  Kept as ratios when every lane's sum is a Fraction."""
    got = _lane_sum_ratios(values, lanes, n, bound)
    if got is None:
        return None
    sums, sizes = got
    if bound <= 0:
        return Lanes([0.0] * n)
    if n and int(sizes.min()) > 0:
        return Lanes.of_ratios(sums)
    return Lanes.of_sums(sums, sizes == 0)


def mechanism_on_lanes(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """The batched evaluator of every mechanism (registered in kernels/mechanisms.py): only the
    auditor's sampler evaluates one on lane values (a fuzzy evaluation; anywhere else
    NotBatchable).  When only its input (a number or a tuple) differs between lanes, one
    `PerRunMechanism` the auditor draws for all lanes at once; otherwise one distribution per
    lane."""
    if not ev.fuzzy:
        raise NotBatchable("a mechanism on lane values")
    if type(args[-1]) is not Closure and not any(has_lanes(a) for a in args[:-1]):
        first = Interpreter.call_prim(ev, prim, node, [lane_view(a, 0) for a in args])
        if getattr(_unlocated(first), "per_run", None) is not None:
            return PerRunMechanism(_unlocated(first), args[-1], ev.n, lambda: ev._per_lane(prim, node, args))
    return ev._per_lane(prim, node, args)  # one distribution per lane


# ---- entry points: pmap and selection scores ---------------------------------------------------------

def batching(ctx: Any) -> bool:
    interp = getattr(ctx, "interp", None)
    return (interp is not None and getattr(interp.state, "batch", False) and interp.exact
            and type(interp) in (Interpreter, LaneEvaluator))


def _run(ctx: Any, fn: Any, arg: Any, n: int) -> Optional[Any]:
    return run_on_lanes(ctx.interp.state, fn, arg, n)


def run_on_lanes(state: Any, fn: Any, arg: Any, n: int) -> Optional[Any]:
    """fn applied to the lane value `arg` on a lane evaluator; None when not batchable (or on
    any error: the caller's one-run-per-input path then reproduces the real behaviour)."""
    depth, calls, fallbacks = state.depth, state.row_calls, state.fallbacks
    try:
        return LaneEvaluator(state, n).apply(fn, [arg])
    except Exception:  # noqa: BLE001 - NotBatchable, or anything the reference path must decide
        state.depth, state.row_calls, state.fallbacks = depth, calls, fallbacks
        return None


def batched_pmap(ctx: Any, fn: Any, ps: dict) -> Optional[dict]:
    """pmap fn ps in one evaluation over all parts, or None (then: one call per part)."""
    if type(fn) is not Closure or not batching(ctx) or len(ps) < 2 or has_lanes(fn):
        return None
    arg = _parts_as_lanes(ps)
    if arg is None:
        return None
    out = _run(ctx, fn, arg, len(ps))
    if out is None:
        return None
    return dict(zip(ps, unlane(out, len(ps))))


def batched_scores(ctx: Any, score: Any, candidates: list[Any]) -> Optional[list[Any]]:
    """The score of every candidate in one evaluation, or None (then: one call per candidate)."""
    if type(score) is not Closure or not batching(ctx) or len(candidates) < 2 or has_lanes(score):
        return None
    out = _run(ctx, score, Lanes(list(candidates)), len(candidates))
    if out is None:
        return None
    if type(out) is Lanes:
        return out.values()
    if has_lanes(out):
        return None
    return [out] * len(candidates)  # the score does not depend on the candidate


def _parts_as_lanes(ps: dict) -> Optional[Any]:
    """A partition's parts as one lane value: a LaneBag when they are the parts of one bag's
    groupby (or masked bags over one base), the values themselves otherwise."""
    codes = getattr(ps, "codes", None)
    if codes is not None:  # a groupby's partition: read through its codes (its parts are not made)
        if not ps.complete and codes.size and codes.min() < 0:  # rows in no part
            keep = np.flatnonzero(codes >= 0)
            rows, codes = (keep if ps.rows is None else ps.rows[keep]), codes[keep]
        else:
            rows = np.arange(len(codes)) if ps.rows is None else ps.rows
        return LaneBag(ps.base, rows, codes.astype(np.int64, copy=False), len(ps))
    parts = list(ps.values())
    if all(type(p) is MaskedBag for p in parts) and len({id(p.base) for p in parts}) == 1:
        lanes = np.full(len(parts[0].base), -1, dtype=np.int64)
        for i, p in enumerate(parts):
            m = p.mask
            if (lanes[m] >= 0).any():
                return None  # overlapping parts: not a partition of one bag
            lanes[m] = i
        rows = np.flatnonzero(lanes >= 0)
        return LaneBag(parts[0].base, rows, lanes[rows], len(parts))
    if any(isinstance(p, (pd.DataFrame, pd.Series, MaskedBag)) for p in parts):
        return None
    return Lanes(parts)
