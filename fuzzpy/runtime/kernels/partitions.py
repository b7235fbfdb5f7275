"""Evaluators of the partition primitives `groupby`, `part`, `pmap`, `each`, `values` (declared in
fuzzpy/primitives/partitions.py).

A partition is a dict key -> part in declared key order, every key present.  Parts are lazy
MaskedBags over the grouped bag: their sizes come from one count of the rows' key codes, and
their rows are selected only if a function reads them.  A key is coded as its position among
the declared keys (`key_codes`: never from the data), and a key function that reads only its
row and public constants has its codes remembered for the run (and, for a table kept across
runs, across runs: runtime/kept.py).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...primitives.registry import PASSES_TABLES, PER_LANE, kernel
from ...typesystem import ir as I
from ...typesystem.keys import part_keys
from .. import batch
from ..batch import LaneBag, LaneEvaluator, Lanes, NotBatchable, has_lanes, unlane
from ..engines.dask_tables import SharedPass, Shipped, Step, need_bag, rows_of, take_rows
from ..evaluator import Interpreter
from ..state import Context
from ..values import Closure, EachDistribution, MaskedBag, Partition
from ..vectorize import row_function, row_keys

# A partition is a dict key -> part in declared key order, every key present.  Parts are lazy
# MaskedBags over the grouped bag: their sizes come from one bincount, and their rows are
# selected only if a function reads them.


def category_codes(values, keys):
    """Position of each value in the declared `keys` (-1 for anything else), as an int array.
    Categorical columns use their codes; the keys never come from the data."""
    keys = tuple(keys)
    if isinstance(values.dtype, pd.CategoricalDtype):
        # the Categorical's own codes array (`.cat.codes` would build a Series around it)
        raw = values.array.codes if isinstance(values, pd.Series) else values.codes
        lookup = _category_lookup(values.dtype, keys)
        return raw if lookup is None else lookup[raw]  # code -1 (missing) picks the appended -1
    return _key_index(keys).get_indexer(values)


@functools.lru_cache(maxsize=256)
def _key_index(keys: tuple):
    """The declared keys as a pandas Index (public constants: built once, not per groupby)."""
    return pd.Index(list(keys))


@functools.lru_cache(maxsize=256)
def _category_lookup(dtype, keys: tuple):
    """None when a categorical dtype's categories are the keys in order (its codes are the key
    codes), else the key code of each category code, with -1 appended for a missing value."""
    cats = dtype.categories.tolist()
    if cats == list(keys):
        return None
    return np.append(_key_index(keys).get_indexer(pd.Index(cats)), -1).astype(np.int64)


def int_codes(values, lo: int, k: int):
    """Part index of bounded int keys (the checker proved lo <= key <= lo + k - 1; a missing
    value, NaN, has none: -1), in the smallest integer type that holds 0 .. k - 1 (a tree
    gathers the codes of its nodes' rows again and again: int8 moves an eighth of int64)."""
    r = np.rint(np.asarray(values, dtype=np.float64))  # a new array: the steps below are in place
    if lo:
        r = np.subtract(r, lo, out=r) if r.ndim else r - lo
    small = np.int8 if k <= 127 else np.int16 if k <= 32767 else np.int64
    if r.ndim == 1 and r.size and r.min() >= 0 and r.max() < k:  # NaN: a NaN minimum, False
        return r.astype(small)  # every row has a part (the usual case): two reductions, no masks
    ok = r >= 0
    ok &= r < k  # False for NaN
    codes = np.asarray(r if ok.all() else np.where(ok, r, -1)).astype(small)
    if codes.ndim == 0:
        return codes.reshape(1)
    return codes


def key_codes(values, info: dict):
    """Part index of each row's key, -1 for none: a category, a bounded int (value - lo), or a
    tuple of those (a crosstab: row-major over the component domains)."""
    if "product" in info:
        values = _tuple_columns(values, len(info["product"]))
        codes = np.zeros(len(values), dtype=np.int64)
        for j, sub in enumerate(info["product"]):
            c = key_codes(values.iloc[:, j], sub)
            codes = np.where((codes >= 0) & (c >= 0), codes * len(sub["keys"]) + c, -1)
        return codes
    if "int_lo" in info:
        return int_codes(values, int(info["int_lo"]), len(info["keys"]))
    return category_codes(values, info["keys"])


def _tuple_columns(values, width: int):
    """Tuple keys as a DataFrame of `width` columns, whether they came column-wise (a DataFrame)
    or row by row (a Series of tuples, None for a row whose key could not be computed)."""
    if isinstance(values, pd.DataFrame):
        return values
    rows = [v if isinstance(v, tuple) and len(v) == width else (None,) * width for v in values]
    return pd.DataFrame(rows, columns=range(width)) if rows else pd.DataFrame(columns=range(width))


PER_KEY_COUNT_MAX = 32  # up to this many keys, one vectorised comparison per key beats bincount


def group_counts(codes, k: int):
    """Rows per key; codes are small ints (-1: no key).  bincount needs them widened to intp
    (8 bytes a row), so for few keys a comparison per key is faster and allocates nothing big."""
    if k <= PER_KEY_COUNT_MAX:
        return np.array([np.count_nonzero(codes == i) for i in range(k)], dtype=np.int64)
    valid = codes[codes >= 0]
    return np.bincount(valid.astype(np.intp, copy=False), minlength=k)[:k]


MEMO_ENTRIES = 256  # key codes remembered per run (each an int array over a base table)


def remembered_key_codes(ctx, key, base):
    """The part number of every row of `base` (a plain frame) for the row function `key`,
    remembered for the run when the key reads only public constants besides its row: a tree
    learner groups the parts of the same table by the same attributes at every node, and a
    row's key depends on that row alone.  With it, whether every row has a part (no -1): then
    so does every selection of them, and counting or flattening one needs no test for -1.
    (None, False) when the key cannot be remembered."""
    state = ctx.interp.state
    memo = getattr(state, "memo", None) if getattr(state, "batch", False) else None
    if memo is None:
        return None, False
    ident = batch.constant_identity(key)
    if ident is None:
        return None, False
    k = (id(base), ident, _info_identity(ctx.info))
    hit = memo.get(k)
    if hit is not None and hit[0] is base:
        return hit[2], hit[3]
    codes = _kept_or_computed(ctx, key, base, k[1:])
    complete = not codes.size or bool(codes.min() >= 0)
    if len(memo) >= MEMO_ENTRIES:
        memo.clear()
    memo[k] = (base, ctx.info, codes, complete)
    return codes, complete


def _kept_or_computed(ctx, key, base, ident):
    """The codes kept for `base` across runs (runtime/kept.py) when its holder keeps some, else
    computed, and then kept unless the key had to run row by row (the run's count of such
    functions must not depend on an earlier run)."""
    state = ctx.interp.state
    held = state.kept.get(id(base)) if getattr(state, "kept", None) else None
    kept = held[1] if held is not None and held[0] is base else None
    codes = kept.get(ident) if kept is not None else None
    if codes is None:
        before = state.fallbacks
        codes = key_codes(row_keys(ctx.interp.state, key, base), ctx.info)
        if kept is not None and state.fallbacks == before:
            kept.put(ident, codes)
    return codes


def _info_identity(info: dict):
    """The groupby's decisions (keys, ranges) by value: two call sites of the same key function
    with the same decisions share their codes; by identity when they have no such value."""
    hit = _INFO_IDENTITY.get(id(info))
    if hit is not None and hit[0] is info:
        return hit[1]
    ident = batch.structure_number(info)
    ident = ("info", id(info), info) if ident is None else ident
    if len(_INFO_IDENTITY) >= MEMO_ENTRIES:
        _INFO_IDENTITY.clear()
    _INFO_IDENTITY[id(info)] = (info, ident)
    return ident


_INFO_IDENTITY: dict = {}  # id(info) -> (info, its identity): info dicts are not weakly referenceable


def labelled_keys(info: dict) -> tuple:
    """The groupby's keys as the parts are keyed: `PartKey`s, which label the releases made on
    the parts (typesystem/keys.py); made once per checked groupby."""
    hit = _LABELLED.get(id(info))
    if hit is not None and hit[0] is info:
        return hit[1]
    keys = part_keys(info)
    if len(_LABELLED) >= MEMO_ENTRIES:
        _LABELLED.clear()
    _LABELLED[id(info)] = (info, keys)
    return keys


_LABELLED: dict = {}  # id(info) -> (info, its keys)


def _groupby(ctx, key, b):
    keys = labelled_keys(ctx.info)
    k = len(keys)
    part = b if isinstance(b, MaskedBag) else None
    base = part.base if part is not None else b
    codes, complete = remembered_key_codes(ctx, key, base)
    if part is None:  # the whole table
        if codes is None:
            codes = key_codes(row_function(ctx.interp.state, key)(b), ctx.info)
        size = _sizes(codes, k, group_counts)
        whole = _Grouped(None, codes, k, complete)
        return Partition.lazy(keys, lambda i: MaskedBag.part(base, mask_fn=lambda: codes == i,
                                                             count_fn=lambda: size(i), family=(whole, i)),
                              base, codes, complete=complete)
    if codes is not None and part.family is not None:
        # A part of a partition grouped by a remembered key: its rows and their codes are read
        # only if something needs them, and its parts' sizes come from its siblings' cells,
        # counted once for all of them (a tree's leaves only count their classes).
        grouped = _Grouped(part, codes, k, complete)
        family, j = part.family
        counted: list = []

        def sibling_size(i: int) -> int:
            if not counted:
                counted.append(family.cells(codes, k, complete)[j])
            return int(counted[0][i])

        return Partition.lazy(keys, lambda i: MaskedBag.part(base, rows_fn=lambda: grouped.part_rows(i),
                                                             count_fn=lambda: sibling_size(i),
                                                             family=(grouped, i)),
                              base, None, complete=complete, grouped=grouped)
    # A part of a table (a tree's node): its rows' codes, read from the remembered codes of the
    # whole table or computed on its own rows; grouping costs its rows, not the table's.
    rows = part.rows
    mine = codes[rows] if codes is not None else key_codes(row_function(ctx.interp.state, key)(b), ctx.info)
    size = _sizes(mine, k, (lambda c, k: _own_counts(c, k, True)) if complete else _own_counts)
    grouped = _Grouped(part, None, k, complete, rows, mine)
    return Partition.lazy(keys, lambda i: MaskedBag.part(base, rows_fn=lambda: grouped.part_rows(i),
                                                         count_fn=lambda: size(i), family=(grouped, i)),
                          base, mine, rows, complete=complete)


class _Grouped:
    """The rows of a bag (`bag`: a part; None: every row of the table) and their part numbers,
    read when first asked for: `full[rows]` with `full` a remembered key's codes for every row
    of the table, or given (`rows`, `mine`).

    * `part_rows(i)`: part i's rows, ascending.  The first part asked selects its own rows (one
      comparison over the grouped rows); from the second on, every part's rows come from one
      stable sort of the codes (a tree reads every part of a node: one sort instead of a
      comparison per part).
    * `cells(key, k2, complete)`: for another key's codes over the table, each part's count of
      rows per key value, an (its parts x k2) array counted in one pass for all parts: what
      grouping each part by that key and counting its groups gives, for every part at once."""

    __slots__ = ("bag", "full", "k", "complete", "_rows", "_mine", "asked", "sorted", "_cells")

    def __init__(self, bag, full, k: int, complete: bool, rows=None, mine=None):
        self.bag, self.full, self.k, self.complete = bag, full, k, complete
        self._rows, self._mine = rows, mine
        self.asked = 0
        self.sorted = None  # (rows in code order, each code's first position)
        self._cells: dict = {}

    def rows(self):
        """The grouped rows of the table, ascending (None: every row)."""
        if self._rows is None and self.bag is not None:
            self._rows = self.bag.rows
        return self._rows

    def codes(self):
        """The part number of each grouped row (-1: none)."""
        if self._mine is None:
            rows = self.rows()
            self._mine = self.full if rows is None else self.full[rows]
        return self._mine

    def part_rows(self, i: int):
        self.asked += 1
        rows, codes = self.rows(), self.codes()
        if rows is None:  # every row of the table
            rows = np.arange(len(codes))
        if self.sorted is None and self.asked == 1:
            return rows[codes == i]
        if self.sorted is None:
            small = codes.astype(np.int16) if self.k < 2**15 else codes  # radix sort
            order = np.argsort(small, kind="stable")  # equal codes keep their rows' order
            bounds = np.searchsorted(small[order], np.arange(self.k + 1))  # -1 (no part) first
            self.sorted = (rows[order], bounds)
        ordered, bounds = self.sorted
        return ordered[bounds[i]:bounds[i + 1]]

    def cells(self, key, k2: int, complete: bool):
        hit = self._cells.get(id(key))
        if hit is not None and hit[0] is key and hit[1] == k2:
            return hit[2]
        rows, mine = self.rows(), self.codes()
        other = key if rows is None else key[rows]
        if not (self.complete and complete):  # rows in no part, or with no key value, are in no cell
            keep = (mine >= 0) & (other >= 0)
            mine, other = mine[keep], other[keep]
        # the (part, key value) cell of each row, in int16 when the cells fit (a quarter of the
        # memory an intp array moves: most of the time on a large family)
        cell = mine.astype(np.int16 if self.k * k2 < 2**15 else np.intp)
        cell *= k2
        cell += other
        out = np.bincount(cell, minlength=self.k * k2).reshape(self.k, k2)
        self._cells[id(key)] = (key, k2, out)
        return out


def _sizes(codes, k: int, count):
    """Part i's size, every part counted at once (`count(codes, k)`) when a size is first asked
    for: a partition whose parts are only handed to a batched pmap (a score's candidates), or
    not read at all, is never counted."""
    counted: list = []

    def size(i: int) -> int:
        if not counted:
            counted.append(count(codes, k))
        return int(counted[0][i])

    return size


def _own_counts(codes, k: int, complete: bool = False):
    """Rows per key of a bag's own codes (-1: no key; `complete`: known to hold none), by one
    bincount over those rows."""
    if not complete and codes.size and codes.min() < 0:
        codes = codes[codes >= 0]
    # bincount casts small integer codes itself (a part's few rows: each numpy call counts)
    return np.bincount(codes, minlength=k)[:k].astype(np.int64, copy=False)


def _part(ps, key):
    return ps[key]


def _pmap(ctx, f, ps):
    out = batch.batched_pmap(ctx, f, ps)  # every part at once when the function allows it
    return out if out is not None else {k: ctx.call(f, part) for k, part in ps.items()}


def _each(ctx, f, ps):
    return EachDistribution({k: ctx.call(f, part) for k, part in ps.items()}, ctx.info.get("together"))


def _values(ps):
    return tuple(ps.values())


def _values_of(ctx, key, b):
    """The declared values, known at check time (the checker folds the call into a constant)."""
    return tuple(ctx.info["values"])


# ---- on lane values (runtime/batch.py) --------------------------------------------------------------

def _b_groupby(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    key, b = args
    lb = batch.product(ev, b)
    if lb is None:
        return NotImplemented
    keys = labelled_keys(node.info)
    full, complete = (None, False) if has_lanes(key) else remembered_key_codes(Context(ev, node.info, node.span),
                                                                              key, lb.base)
    if full is not None and lb.blocks is not None and complete:
        return _groupby_blocks(lb, full, keys)
    if full is not None:
        codes = full[lb.rows]
    else:
        out = batch.lane_rows(ev, key, lb)
        if out is None:
            return NotImplemented
        codes = np.asarray(key_codes(out, node.info))
    # every lane's count of every key at once: (lane, key) cells of one bincount
    k, lanes = len(keys), lb.lanes
    if not complete and codes.size and codes.min() < 0:  # rows whose key is none of the declared keys
        valid = codes >= 0
        lanes, codes_in = lanes[valid], codes[valid]
    else:
        codes_in = codes
    cell = lanes * k
    cell += codes_in  # in place: one large temporary fewer (each is page-faulted in anew)
    cells = np.bincount(cell, minlength=lb.n * k).reshape(lb.n, k).astype(np.int64)
    return {key: LaneBag(lb.base, None, None, lb.n, whole=lb, codes=codes, code=j, counts=cells[:, j])
            for j, key in enumerate(keys)}


def _groupby_blocks(lb: LaneBag, full: np.ndarray, keys: tuple) -> dict:
    """`_b_groupby` of a lane bag of blocks (`LaneBag.of_blocks`) by a key whose code full[r]
    every row r has: the rows' codes read once, then a bincount of (part, key) cells per
    block; the groups' pairs, in the blocks' order, are selected only if read."""
    rows, blocks = lb.blocks  # type: ignore[misc]
    mine = full[rows]
    k = len(keys)
    if len(mine) * len(blocks) <= ONE_PASS_PAIRS:
        # few pairs (a small node's candidates): every block's cells in one bincount over the
        # (block, row) grid, the lane first + codes[j] of each, instead of a few numpy calls per
        # block (each costs more than its rows)
        grid = np.stack([codes for codes, _, _ in blocks]).astype(np.int16 if lb.n * k < 2**15 else np.intp)
        grid += np.array([first for _, first, _ in blocks], dtype=grid.dtype)[:, None]
        grid *= k
        grid += mine
        cells = np.bincount(grid.ravel(), minlength=lb.n * k).reshape(lb.n, k)
    else:
        cells = np.empty((lb.n, k), dtype=np.int64)
        for codes, first, m in blocks:
            # the block's (part, key) cell of each row, in int16 when the cells fit (a quarter of
            # the memory an intp array moves: most of the time of a large block)
            cell = codes.astype(np.int16 if m * k < 2**15 else np.intp)
            cell *= k
            cell += mine
            cells[first:first + m] = np.bincount(cell, minlength=m * k).reshape(m, k)
    pair_codes: list = []

    def codes_of_pairs() -> np.ndarray:  # made once, shared by the groups
        if not pair_codes:
            pair_codes.append(np.tile(mine, len(blocks)))
        return pair_codes[0]

    return {key: LaneBag(lb.base, None, None, lb.n, whole=lb, codes=codes_of_pairs, code=j, counts=cells[:, j])
            for j, key in enumerate(keys)}


def _b_structural(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """`part ps k`, `values ps`: they move parts around without reading them, so lane values
    pass through (the partition itself, a dict, is the same for every lane)."""
    if type(args[0]) is not dict and not isinstance(args[0], dict):
        return NotImplemented
    return prim.run(*args)


def _b_pmap(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """`pmap f ps` with a partition per lane (the candidates' partitions of a score, each by its
    own key) and f the same in every lane: f once over every part of every lane, each (lane,
    part) a lane of one evaluation (`_lanes_of_partitions`), the results put back per lane in
    each partition's key order.  NotImplemented (once per lane) when the partitions are not
    parts of one table, or f is not batchable on them."""
    f, ps = args
    if ev.fuzzy or type(ps) is not Lanes or type(f) is not Closure or has_lanes(f):
        return NotImplemented
    partitions = ps.values()
    flat = _lanes_of_partitions(partitions)
    if flat is None:
        return NotImplemented
    result = batch.run_on_lanes(ev.state, f, flat, flat.n)
    if result is None:
        return NotImplemented
    values = unlane(result, flat.n)
    out, start = [], 0
    for p in partitions:
        out.append(dict(zip(p, values[start:start + len(p)])))
        start += len(p)
    return Lanes(out)


# At most this many rows in all the partitions together: beyond, each partition's own batched
# pmap is as fast (one bincount each, like the one over all) and makes no large temporary arrays.
FLAT_PAIRS = 1 << 17
# At most this many (block, row) pairs: a lane bag of blocks is grouped with one bincount over
# all its blocks (`_groupby_blocks`) instead of one per block.
ONE_PASS_PAIRS = 1 << 16


def _lanes_of_partitions(partitions: list) -> Optional[LaneBag]:
    """Every part of every partition as one lane bag, a lane per (partition, part) in order;
    None unless they are all `groupby` partitions of one table."""
    if not partitions or not all(type(p) is Partition for p in partitions):
        return None
    base = partitions[0].base
    if any(p.base is not base for p in partitions):
        return None
    first = partitions[0]
    if all(p.complete and p.rows is first.rows for p in partitions):  # every part of one bag's rows
        shared = np.arange(len(first.codes)) if first.rows is None else first.rows
        blocks, offset = [], 0
        for p in partitions:
            blocks.append((p.codes, offset, len(p)))
            offset += len(p)
        return LaneBag.of_blocks(base, shared, blocks, offset)
    if sum(len(p.codes) for p in partitions) > FLAT_PAIRS:
        return None
    rows, lanes, offset = [], [], 0
    for p in partitions:
        codes = p.codes
        if p.complete:  # every row in a part
            rows.append(np.arange(len(codes)) if p.rows is None else p.rows)
            lane = codes.astype(np.int64)
        else:
            keep = codes >= 0
            rows.append(np.flatnonzero(keep) if p.rows is None else p.rows[keep])
            lane = codes[keep].astype(np.int64)
        lane += offset
        lanes.append(lane)
        offset += len(p)
    return LaneBag(base, np.concatenate(rows), np.concatenate(lanes), offset)


def _b_each(ev: LaneEvaluator, prim: Any, node: I.IPrim, args: list[Any]) -> Any:
    """`each f ps` given lane values: only where the auditor samples lanes (a fuzzy evaluation,
    else NotBatchable, as for a mechanism).  The function runs once per key on every lane's part
    at once (lane bags, lane values) when the partition is the same dict in every lane: each
    part's distribution holds lane values, drawn for all lanes by the auditor.  Otherwise one
    distribution per lane, as a mechanism's (batch.mechanism_on_lanes)."""
    if not ev.fuzzy:
        raise NotBatchable("a mechanism on lane values")
    if isinstance(args[1], dict):
        return Interpreter.call_prim(ev, prim, node, args)
    return batch.mechanism_on_lanes(ev, prim, node, args)


# ---- on the Dask engine's tables (runtime/engines/) -------------------------------------------------
# A part is a lazy selection of every partition; the parts' sizes are counted together, once.

def _codes(part: Any, fn: Shipped, info: dict, vectorise: bool) -> np.ndarray:
    return np.asarray(key_codes(rows_of(part, fn, vectorise), info))


def _p_part(part: Any, fn: Shipped, info: dict, vectorise: bool, i: int) -> Any:
    return take_rows(part, _codes(part, fn, info, vectorise) == i)


def _p_parts(part: Any, fn: Shipped, info: dict, vectorise: bool) -> list:
    """Every part's rows of one partition, in key order: what `_p_part` gives for each."""
    codes = _codes(part, fn, info, vectorise)
    return [take_rows(part, codes == i) for i in range(len(info["keys"]))]


# rule Engines: each partition's exact count per key
def _p_group_counts(part: Any, fn: Shipped, info: dict, vectorise: bool) -> list[int]:
    return [int(c) for c in group_counts(_codes(part, fn, info, vectorise), len(info["keys"]))]


@dataclasses.dataclass(eq=False)
class _Groups(SharedPass):
    """The parts of one `groupby`: their sizes are counted in one pass, on first use, and so is
    any other aggregate of them (SharedPass)."""

    engine: Any
    frame: Any
    key: Shipped
    info: dict
    vectorise: bool
    _counts: Optional[list[int]] = None

    @property
    def k(self) -> int:
        return len(self.info["keys"])

    def splitter(self) -> Step:
        return Step(None, _p_parts, (self.key, self.info, self.vectorise))

    # rule Engines: a part's size, the partitions' counts added as ints
    def count(self, i: int) -> int:
        if self._counts is None:
            k = len(self.info["keys"])
            partials = self.engine.partials(self.frame, _p_group_counts, self.key, self.info, self.vectorise)
            total = [0] * k
            for p in partials:
                total = [t + int(c) for t, c in zip(total, p)]
            self._counts = total
        return self._counts[i]


def _d_groupby(eng: Any, ctx: Any, vec: bool, key: Closure, b: Any) -> dict:
    b = need_bag("groupby", b, ctx.span)
    fn = Shipped(key)
    keys = labelled_keys(ctx.info)
    info = dict(ctx.info)
    groups = _Groups(eng, b.frame, fn, info, vec)
    meta = b.frame._meta
    return {k: eng.bag(b.frame.map_partitions(_p_part, fn, info, vec, i, meta=meta), groups, i)
            for i, k in enumerate(keys)}


kernel("groupby", reference=_groupby, context=True, lazy_bags=True, batched=_b_groupby, dask=_d_groupby)
kernel("part", reference=_part, lazy_bags=True, batched=_b_structural, dask=PASSES_TABLES)
kernel("pmap", reference=_pmap, context=True, lazy_bags=True, batched=_b_pmap, dask=PASSES_TABLES)
kernel("each", reference=_each, context=True, lazy_bags=True, batched=_b_each, dask=PASSES_TABLES)
kernel("values", reference=_values, lazy_bags=True, batched=_b_structural, dask=PASSES_TABLES)
kernel("values_of", reference=_values_of, context=True, lazy_bags=True, batched=PER_LANE, dask=PASSES_TABLES)
