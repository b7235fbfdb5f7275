"""Row functions as column operations (docs/runtime.md, "Vectorisation").

A row function given to map / filter / split / groupby is evaluated once for the whole bag:
its row parameter is bound to the bag's columns, so `r.age` is the age column, `r.age + 1` one
vectorised addition, `if c then a else b` one `numpy.where`, and constants broadcast.  This is
the ordinary evaluator with a few node rules changed (`VectorEvaluator`); values derived from
the row are wrapped in `Vec`.

What it cannot express raises `NotVectorisable` (or any library error), and the row function
then runs once per row on Python values (`_row_by_row`), the reference semantics.  The fallback
changes speed, never results: both paths are total and compute the same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Iterator, Optional

import numpy as np
import pandas as pd

from .. import limits
from ..primitives.registry import lookup
from ..typesystem import ir as I
from .evaluator import Interpreter
from .node_memo import NodeMemo
from .numbers import as_float
from .state import RunFailure, RunState
from .values import (
    Bag,
    Closure,
    Frame,
    MaskedBag,
    bag_from_rows,
    bag_rows,
    column_labels,
    field_of,
    nrows,
)


class NotVectorisable(Exception):
    """This row function needs the per-row fallback."""


class Vec:
    """A column derived from the row: a Series or ndarray, one entry per row of the bag."""

    __slots__ = ("data",)

    def __init__(self, data: Any):
        self.data = data


class RowView(Mapping):
    """The row parameter of a bag of records: field access reads (and, for a lazily filtered
    bag, selects) only the columns the function uses.  With `arrays`, a column of a numpy dtype
    (floats, ints, booleans) is read as its numpy array: the same values, and on short columns
    each operation skips pandas' per-call cost."""

    __slots__ = ("bag", "labels", "arrays", "_read")

    def __init__(self, bag: Bag, labels: "tuple | list[Any]", arrays: bool = False):
        self.bag = bag
        self.labels = labels
        self.arrays = arrays
        # each column read once, then the same Vec (bags are never modified): a row function
        # evaluated again on this view sees the same objects (VectorEvaluator's memo)
        self._read: dict[Any, Vec] = {}

    def __getitem__(self, name: Any) -> Vec:
        vec = self._read.get(name)
        if vec is None:
            col = _column(self.bag, name)
            if self.arrays and isinstance(col.dtype, np.dtype) and col.dtype.kind in "fib":
                vec = Vec(col.to_numpy())
            else:
                vec = Vec(col)
            self._read[name] = vec
        return vec

    def __iter__(self) -> Iterator[Any]:
        return iter(self.labels)

    def __len__(self) -> int:
        return len(self.labels)


def _column(bag: Bag, label: Any) -> pd.Series:
    return bag.column(label) if isinstance(bag, MaskedBag) else bag[label]


def _as_float_column(col: Any) -> Any:
    """Row functions compute on floats, like their per-row fallback: int64 arithmetic would wrap
    at 2**63 where floats do not, and whether a column is int64 can depend on the data (a union
    with an empty bag).  Applied to the operands of arithmetic only (comparisons on ints are
    exact, and a copy of every column read would double the memory of a filter)."""
    dtype = getattr(col, "dtype", None)
    if isinstance(dtype, np.dtype):  # numpy's own kinds: signed and unsigned ints (not bool)
        if type(col) is pd.Series and dtype.kind in "fiu":
            # the same float operations on the column's array, without pandas' dispatch per
            # operation (the result is a column either way; rows are matched by position)
            return col.to_numpy(dtype=np.float64)
        return col.astype(np.float64) if dtype.kind in "iu" else col
    if dtype is not None and pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        return col.astype(np.float64)
    return col


_FLOAT_CATEGORIES = ("arithmetic", "numeric")


def has_vec(v: Any) -> bool:
    t = type(v)
    if t is Vec or t is RowView:
        return True
    if t is tuple:
        return any(has_vec(x) for x in v)
    if t is dict:
        return any(has_vec(x) for x in v.values())
    return False


# ---- applying a row function to a bag ------------------------------------------------------------

def row_function(state: RunState, fn: Any) -> Callable[[Bag], Frame]:
    """A row function as a function of a whole bag: bag -> one result per row (a Series, or a DataFrame for records
    and tuples), with a fresh RangeIndex, in the bag's row order."""
    _check_row_function(fn)
    return lambda bag: apply_rows(state, fn, bag)


def row_keys(state: RunState, fn: Any, bag: Bag) -> Any:
    """row_function(state, fn)(bag) for a group key: the same rows and fallback, but a key
    computed as one numpy column (a bucket number) comes back as that array, without the Series
    around it (the key codes read only its values, by position)."""
    _check_row_function(fn)
    return apply_rows(state, fn, bag, bare_array=True)


def _check_row_function(fn: Any) -> None:
    if not isinstance(fn, Closure) or fn.body is None or not fn.params:
        raise RunFailure("internal error: a row function has no code")


def apply_rows(state: RunState, fn: Closure, bag: Bag, bare_array: bool = False) -> Frame:
    """With `bare_array`, a result computed as one numeric numpy column is that array."""
    key = id(fn.body)
    if state.vectorise and key not in state.no_vector:
        try:
            return _vectorised(state, fn, bag, bare_array)
        except Exception:  # noqa: BLE001 - any failure here means: use the reference path
            state.no_vector.add(key)
    state.fallbacks += 1
    return _row_by_row(state, fn, bag)


def _vectorised(state: RunState, fn: Closure, bag: Bag, bare_array: bool = False) -> Frame:
    out, n = _vector_rows(state, fn, bag)
    if bare_array and type(out) is Vec:
        data = out.data
        if type(data) is np.ndarray and data.ndim == 1 and len(data) == n and data.dtype.kind in "fiub":
            return data
    return to_frame(out, n)


def _vector_rows(state: RunState, fn: Closure, bag: Bag) -> tuple[Any, int]:
    """The row function evaluated on whole columns, before it is made a frame; and the rows."""
    if not isinstance(bag, MaskedBag) and not _has_range_index(bag):
        bag = bag.reset_index(drop=True)
    env = dict(fn.env)
    env[fn.params[0]] = row_value(bag)  # type: ignore[index]
    # The columns share one budget of calls (a row's, limits.ROW_CALLS): past it the rows run
    # one by one, each with its own budget, and those that exhaust it are missing values.
    outer, state.row_calls = state.row_calls, limits.ROW_CALLS
    try:
        out = VectorEvaluator(state).eval(fn.body, env)  # type: ignore[arg-type]
    finally:
        state.row_calls = outer
    return out, nrows(bag)


# rule Vector: a row function's vectors as one float matrix, without the frame when it can
def row_vectors(state: RunState, fn: Any, bag: Bag, size: int) -> np.ndarray:
    """row_matrix(row_function(state, fn)(bag), size): the same matrix, read straight from the
    vectorised columns (number_matrix) when they are numbers, instead of through a frame."""
    if isinstance(fn, Closure) and fn.body is not None and fn.params and state.vectorise \
            and id(fn.body) not in state.no_vector:
        try:
            out, n = _vector_rows(state, fn, bag)
            matrix = number_matrix(out, n, size)
            frame = to_frame(out, n) if matrix is None else None
        except Exception:  # noqa: BLE001 - as in apply_rows: the rows are run one by one
            state.no_vector.add(id(fn.body))
        else:
            return matrix if matrix is not None else row_matrix(frame, size)
    return row_matrix(row_function(state, fn)(bag), size)


# rule Row: a row that fails or exceeds ROW_CALLS is missing, not a failed run
def _row_by_row(state: RunState, fn: Closure, bag: Bag) -> Frame:
    """The documented fallback: one evaluation per row, on Python values.

    A row whose evaluation fails (recursion too deep, say) gives a missing value (None: false
    for filter and split, no part for groupby, 0 in a sum) instead of failing the run: whether
    some row fails depends on private data, so it must not decide the run's outcome."""
    interp = Interpreter(state, exact=False)
    param, body, base_env = fn.params[0], fn.body, fn.env  # type: ignore[index]
    out = []
    outer = state.row_calls
    try:
        for row in bag_rows(bag):
            env = dict(base_env)
            env[param] = row
            # A row that would run (practically) for ever gets a missing value too: each row has
            # its own budget of calls, so the outcome depends on that row alone.
            state.row_calls = limits.ROW_CALLS
            try:
                out.append(interp.eval(body, env))  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 - per-row failures are private: a missing value instead
                out.append(None)
    finally:
        state.row_calls = outer
    return bag_from_rows(out)


def _has_range_index(frame: Frame) -> bool:
    idx = frame.index
    return isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1


def row_value(bag: Bag, arrays: bool = False) -> Any:
    """The row parameter bound to whole columns (`arrays`: numpy-typed ones as arrays, RowView)."""
    base = bag.base if isinstance(bag, MaskedBag) else bag
    if isinstance(base, pd.Series):
        return Vec(bag.series() if isinstance(bag, MaskedBag) else bag)
    labels, tuples = column_labels(base)
    if tuples:
        return tuple(Vec(_column(bag, c)) for c in labels)
    return RowView(bag, labels, arrays)


# ---- results back to a bag -------------------------------------------------------------------------

def to_frame(out: Any, n: int) -> Frame:
    if isinstance(out, RowView):
        bag = out.bag
        return bag.materialise() if isinstance(bag, MaskedBag) else bag
    if isinstance(out, dict):
        return pd.DataFrame({k: _series(v, n) for k, v in out.items()}, index=pd.RangeIndex(n))
    if isinstance(out, tuple):
        if not out:
            raise NotVectorisable("empty tuple rows")
        return pd.DataFrame({i: _series(v, n) for i, v in enumerate(out)}, index=pd.RangeIndex(n))
    return _series(out, n)


# rule Vector: a row function's vectors as one float matrix
def number_matrix(out: Any, n: int, size: int) -> Optional[np.ndarray]:
    """The float matrix (n x size) that building the frame (`to_frame`) and reading it as
    numbers (`row_matrix`) give for a tuple of `size` number columns (float,
    int or bool arrays of length n, or such numbers: each column's values converted to float64
    as the frame's `to_numpy` converts them), without building the frame; None for anything
    else."""
    if type(out) is not tuple or len(out) != size or not size:
        return None
    matrix = np.empty((n, size))
    for j, v in enumerate(out):
        data = v.data if type(v) is Vec else v
        if isinstance(data, np.ndarray) and data.ndim == 1:
            if len(data) != n or data.dtype.kind not in "fiub":
                return None
            matrix[:, j] = data  # converted as astype(float64) converts
        elif type(data) is float or type(data) is bool or isinstance(data, (np.floating, np.bool_)) or (
                type(data) is int and abs(data) <= 2**53):  # ints a float holds exactly
            matrix[:, j] = float(data)
        else:
            return None
    return matrix


def row_matrix(frame: Any, n: int) -> Any:
    """A row function's vectors as a float matrix (rows x n); NaN where a row has no vector."""
    if isinstance(frame, pd.DataFrame) and frame.shape[1] == n:
        if all(isinstance(t, np.dtype) and t.kind in "fiub" for t in frame.dtypes):
            # numbers already (the usual case): to_numeric would give every column back as it is
            return frame.to_numpy(dtype=np.float64)
        return frame.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    rows = list(frame) if isinstance(frame, pd.Series) else []
    out = np.full((len(rows), n), np.nan)
    for i, row in enumerate(rows):  # the per-row fallback with failed rows (None): rare
        if isinstance(row, tuple) and len(row) == n:
            try:
                out[i] = [float(x) for x in row]
            except (TypeError, ValueError, OverflowError):
                pass
    return out


def _series(v: Any, n: int) -> pd.Series:
    if isinstance(v, Vec):
        data = v.data
        if np.ndim(data) == 0:
            return pd.Series(data, index=pd.RangeIndex(n))
        if isinstance(data, pd.Series):
            if len(data) != n:
                raise NotVectorisable("column of another length")
            return data if _has_range_index(data) else data.reset_index(drop=True)
        series = pd.Series(data, copy=False)
        if len(series) != n:
            raise NotVectorisable("column of another length")
        return series
    if _is_scalar(v):
        return pd.Series(v, index=pd.RangeIndex(n), dtype=object if v is None else None)
    raise NotVectorisable("a row function result that is not a column")  # nested values, lists


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, np.generic))


# ---- the evaluator over columns -------------------------------------------------------------------

def _raw(v: Any) -> Any:
    return v.data if type(v) is Vec else v


def _as_bool_array(data: Any) -> np.ndarray:
    if isinstance(data, pd.Series):
        return data.to_numpy(dtype=bool, na_value=False)
    return np.asarray(data, dtype=bool)


def where(cond: Any, a: Any, b: Any) -> Any:
    """`if cond then a else b` for a column `cond`, component-wise on records and tuples."""
    if (type(a) is Vec or _is_scalar(a)) and (type(b) is Vec or _is_scalar(b)):
        return Vec(np.where(cond, as_float(_raw(a)), as_float(_raw(b))))
    if isinstance(a, Mapping) and isinstance(b, Mapping) and list(a) == list(b):
        return {k: where(cond, a[k], b[k]) for k in a}
    if type(a) is tuple and type(b) is tuple and len(a) == len(b):
        return tuple(where(cond, x, y) for x, y in zip(a, b))
    raise NotVectorisable("branches of different shapes")


def _unwrap_columns(v: Any) -> Any:
    if type(v) is Vec:
        return _as_float_column(as_float(v.data))
    if type(v) is tuple:
        return tuple(_unwrap_columns(x) for x in v)
    if type(v) is RowView or type(v) is dict:
        raise NotVectorisable("record given to a vector primitive")
    return as_float(v)


def _wrap_columns(v: Any) -> Any:
    if type(v) is tuple:
        return tuple(_wrap_columns(x) for x in v)
    return Vec(v) if np.ndim(v) > 0 else v


Memo = dict[int, tuple[tuple, Any]]


def remembered(memo: Memo, node: Any, args: list[Any], compute: Callable[[], Any]) -> Any:
    """compute(), or the result kept for `node` when its last arguments were these very objects.

    Sound for a computation that is a function of its arguments, on values never modified once
    built (columns, lane values): the same objects give the same result.  The arguments are
    kept with the result, so their ids stay theirs.  NotImplemented (no fast path) is not kept."""
    last = memo.get(id(node))
    if last is not None and len(last[0]) == len(args) and all(x is y for x, y in zip(last[0], args)):
        return last[1]
    out = compute()
    if out is not NotImplemented:
        memo[id(node)] = (tuple(args), out)
    return out


_OPERATIONS_ONLY = NodeMemo("operations_only")


def _operations_only(inst: I.Instance) -> bool:
    """Whether inst's body is built of constants, variables, primitives on values (no
    mechanism, none that reads the run's context), `if`, `let`, tuples, records, projections and
    fields alone: no call, no function value, no distribution.  Kept on the instance (it lives
    as long as the program)."""
    kept = _OPERATIONS_ONLY.get(inst)
    if kept is None:
        kept = _OPERATIONS_ONLY[inst] = inst.body is not None and _operations(inst.body)
    return kept


def _operations(node: Any) -> bool:
    t = type(node)
    if t is I.IConst or t is I.IVar:
        return True
    if t is I.IPrim:
        prim = lookup(node.name)
        return (prim is not None and (prim.vectorised or prim.structured) and not prim.is_mechanism
                and not prim.needs_context and all(_operations(a) for a in node.args))
    if t is I.IIf:
        return _operations(node.cond) and _operations(node.then) and _operations(node.other)
    if t is I.ILet:
        return _operations(node.bound) and _operations(node.body)
    if t is I.ITuple:
        return all(_operations(x) for x in node.items)
    if t is I.IRecord:
        return all(_operations(x) for _, x in node.fields)
    if t is I.IProj or t is I.IField:
        return _operations(node.value)
    return False


# rule Vector: vector primitives on columns run as on rows
def _on_columns(prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """A primitive applied to arguments of which some are (or hold) columns."""
    if prim.structured:
        # Vector primitives take tuples whose components are columns (numpy-generic runs).
        return _wrap_columns(prim.run(*[_unwrap_columns(a) for a in args]))
    if not prim.vectorised or prim.needs_context:
        raise NotVectorisable(node.name)
    if any(type(a) is not Vec and has_vec(a) for a in args):
        raise NotVectorisable("tuple or record given to an operator")
    raw = [as_float(_raw(a)) for a in args]
    if prim.category in _FLOAT_CATEGORIES:
        raw = [_as_float_column(r) for r in raw]
    return Vec(prim.run(*raw))


class VectorEvaluator(Interpreter):
    """The evaluator with the row bound to columns; only these node rules differ.

    With a `memo` (kept by the caller across evaluations), an operation on columns whose
    arguments are the very objects of its node's last evaluation returns that result again: the
    primitives on columns are functions of their arguments, and columns are never modified once
    built.  A gradient step's row function re-reads the same row view at every step, so the
    part that does not depend on the step (`features r`) is computed once.  Calls are still
    made and counted (limits.ROW_CALLS); only their operations are not redone."""

    def __init__(self, state: RunState, memo: Optional[Memo] = None):
        super().__init__(state, exact=False)
        self._memo = memo
        # Instances being evaluated on columns, with the number of column branches (`if` on a
        # column, both arms evaluated) open when each was entered (recursion check).
        self._active: dict[int, int] = {}
        self._column_branches = 0

    def e_IPrim(self, node: I.IPrim, env: dict) -> Any:
        prim = self.prim(node)
        args = [self.eval(a, env) for a in node.args]
        if any(has_vec(a) for a in args):
            return self._remembered(node, args, lambda: _on_columns(prim, node, args))
        if not prim.vectorised and any(isinstance(a, Closure) for a in args):
            # A function handed on may have captured columns of this row: not on columns.
            raise NotVectorisable(node.name)
        return self.call_prim(prim, node, args)

    def _remembered(self, node: Any, args: list[Any], compute: Callable[[], Any]) -> Any:
        return compute() if self._memo is None else remembered(self._memo, node, args, compute)

    def e_IIf(self, node: I.IIf, env: dict) -> Any:
        cond = self.eval(node.cond, env)
        if type(cond) is Vec:
            self._column_branches += 1
            try:
                arms = [cond, self.eval(node.then, env), self.eval(node.other, env)]
            finally:
                self._column_branches -= 1
            return self._remembered(node, arms, lambda: where(_as_bool_array(cond.data), arms[1], arms[2]))
        if has_vec(cond):
            raise NotVectorisable("if on a tuple")
        return self.eval(node.then if cond else node.other, env)

    def case_on(self, node: I.ICase, value: Any, env: dict) -> Any:
        if has_vec(value):
            raise NotVectorisable("case on a value that depends on the row")
        return super().case_on(node, value, env)

    def call_instance(self, node: I.ICall, args: list[Any]) -> Any:
        if not any(has_vec(a) for a in args):
            return super().call_instance(node, args)
        key = id(node.instance)
        if key in self._active and self._column_branches > self._active[key]:
            # Both arms of an `if` on a column run, so a recursion through one would never
            # stop: such functions run row by row.  A recursion decided by values that are
            # not columns (a public counter) stops as it does for each row.
            raise NotVectorisable("recursive call on the row")
        outer = self._active.get(key)
        self._active[key] = self._column_branches
        try:
            return super().call_instance(node, args)
        finally:
            if outer is None:
                del self._active[key]
            else:
                self._active[key] = outer

    def call_body(self, inst: I.Instance, args: list[Any]) -> Any:
        # A body of operations alone (no call inside: `features r`) is a function of its
        # arguments, which are all it sees: with the memo, the same argument objects give the
        # last result, the call itself still counted (call_instance) and nothing inside skipped
        # but operations.
        if self._memo is None or not any(has_vec(a) for a in args) or not _operations_only(inst):
            return super().call_body(inst, args)
        return self._remembered(inst, args, lambda: Interpreter.call_body(self, inst, args))

    def e_IProj(self, node: I.IProj, env: dict) -> Any:
        value = self.eval(node.value, env)
        if type(value) is not tuple:
            raise NotVectorisable("projection from a column")
        return value[node.index]

    def e_IField(self, node: I.IField, env: dict) -> Any:
        value = self.eval(node.value, env)
        if type(value) is Vec:
            raise NotVectorisable("field of a column")
        return field_of(value, node.name)

    def e_IInject(self, node: I.IInject, env: dict) -> Any:
        value = self.eval(node.value, env)
        if has_vec(value):
            raise NotVectorisable("inl/inr of a column")
        return (node.side, value)

    def e_IList(self, node: I.IList, env: dict) -> Any:
        items = tuple(self.eval(x, env) for x in node.items)
        if any(has_vec(x) for x in items):
            raise NotVectorisable("list of columns")
        return items

    def e_ICons(self, node: I.ICons, env: dict) -> Any:
        head, tail = self.eval(node.head, env), self.eval(node.tail, env)
        if has_vec(head) or has_vec(tail):
            raise NotVectorisable("list of columns")
        return (head,) + tuple(tail)
