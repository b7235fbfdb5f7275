"""Partitions over a finite, public set of keys, and operations on their parts.

`groupby key b` maps every declared key to its part, empty parts included (whether a key is
present is itself private).  Each part gets a fresh distance variable d_k with
d_1 + ... + d_k <= d(b) (Spar's distance variables, as PrivJail implements them), so
mechanisms applied to different parts compose in parallel and unions of parts follow
PrivJail's generalised parallel composition.
"""

from __future__ import annotations

import functools

from ..checking.sens import d_add, d_inf
from ..checking.types import Bag, Cat, Fuzzy, Num, Parts, Tensor
from .bags import elem_type, row_function
from .registry import Result, primitive, runtime

_REF = "PrivJail (seed 003) section 4.3 and appendix B; Spar distance variables"


# ---- runtime implementations (pandas/numpy are imported only when a program runs) ---------------
# A partition is a dict key -> part in declared key order, every key present.  Parts are lazy
# MaskedBags over the grouped bag: their sizes come from one bincount, and their rows are
# selected only if a function reads them.


def category_codes(values, keys):
    """Position of each value in the declared `keys` (-1 for anything else), as an int array.
    Categorical columns use their codes; the keys never come from the data."""
    import pandas as pd

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
    import pandas as pd

    return pd.Index(list(keys))


@functools.lru_cache(maxsize=256)
def _category_lookup(dtype, keys: tuple):
    """None when a categorical dtype's categories are the keys in order (its codes are the key
    codes), else the key code of each category code, with -1 appended for a missing value."""
    import numpy as np
    import pandas as pd

    cats = dtype.categories.tolist()
    if cats == list(keys):
        return None
    return np.append(_key_index(keys).get_indexer(pd.Index(cats)), -1).astype(np.int64)


def int_codes(values, lo: int, k: int):
    """Part index of bounded int keys (the checker proved lo <= key <= lo + k - 1; a missing
    value, NaN, has none: -1), in the smallest integer type that holds 0 .. k - 1 (a tree
    gathers the codes of its nodes' rows again and again: int8 moves an eighth of int64)."""
    import numpy as np

    r = np.rint(np.asarray(values, dtype=np.float64))  # a new array: the steps below are in place
    if lo:
        r = np.subtract(r, lo, out=r) if r.ndim else r - lo
    ok = r >= 0
    ok &= r < k  # False for NaN
    small = np.int8 if k <= 127 else np.int16 if k <= 32767 else np.int64
    codes = np.asarray(r if ok.all() else np.where(ok, r, -1)).astype(small)
    if codes.ndim == 0:
        return codes.reshape(1)
    return codes


def key_codes(values, info: dict):
    """Part index of each row's key, -1 for none: a category, a bounded int (value - lo), or a
    tuple of those (a crosstab: row-major over the component domains)."""
    import numpy as np

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
    import pandas as pd

    if isinstance(values, pd.DataFrame):
        return values
    rows = [v if isinstance(v, tuple) and len(v) == width else (None,) * width for v in values]
    return pd.DataFrame(rows, columns=range(width)) if rows else pd.DataFrame(columns=range(width))


PER_KEY_COUNT_MAX = 32  # up to this many keys, one vectorised comparison per key beats bincount


def _group_counts(codes, k: int):
    """Rows per key; codes are small ints (-1: no key).  bincount needs them widened to intp
    (8 bytes a row), so for few keys a comparison per key is faster and allocates nothing big."""
    import numpy as np

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
    ident = runtime("batch").constant_identity(key)
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
        codes = key_codes(ctx.vectorised(key)(base), ctx.info)
        if kept is not None and state.fallbacks == before:
            kept.put(ident, codes)
    return codes


def _info_identity(info: dict):
    """The groupby's decisions (keys, ranges) by value: two call sites of the same key function
    with the same decisions share their codes; by identity when they have no such value."""
    hit = _INFO_IDENTITY.get(id(info))
    if hit is not None and hit[0] is info:
        return hit[1]
    ident = runtime("batch").structure_number(info)
    ident = ("info", id(info), info) if ident is None else ident
    if len(_INFO_IDENTITY) >= MEMO_ENTRIES:
        _INFO_IDENTITY.clear()
    _INFO_IDENTITY[id(info)] = (info, ident)
    return ident


_INFO_IDENTITY: dict = {}  # id(info) -> (info, its identity): info dicts are not weakly referenceable


def _run_groupby(ctx, key, b):
    values = runtime("values")
    MaskedBag, Partition = values.MaskedBag, values.Partition
    keys = tuple(ctx.info["keys"])
    k = len(keys)
    part = b if isinstance(b, MaskedBag) else None
    base = part.base if part is not None else b
    codes, complete = remembered_key_codes(ctx, key, base)
    if part is None:  # the whole table
        if codes is None:
            codes = key_codes(ctx.vectorised(key)(b), ctx.info)
        size = _sizes(codes, k, _group_counts)
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
    mine = codes[rows] if codes is not None else key_codes(ctx.vectorised(key)(b), ctx.info)
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
        import numpy as np

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
        import numpy as np

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
    import numpy as np

    if not complete and codes.size and codes.min() < 0:
        codes = codes[codes >= 0]
    # bincount casts small integer codes itself (a part's few rows: each numpy call counts)
    return np.bincount(codes, minlength=k)[:k].astype(np.int64, copy=False)


def _run_part(ps, key):
    return ps[key]


def _run_pmap(ctx, f, ps):
    out = runtime("batch").batched_pmap(ctx, f, ps)  # every part at once when the function allows it
    return out if out is not None else {k: ctx.call(f, part) for k, part in ps.items()}


def _run_each(ctx, f, ps):
    return runtime("values").EachDistribution({k: ctx.call(f, part) for k, part in ps.items()})


MAX_INT_KEYS = 100_000


@primitive("groupby", ("key", "b"), "('a -> cat K | int[lo, hi] | (K1, K2, ...)) -> bag 'a -o parts K (bag 'a)",
           "groupby key b: one part per declared value of key (a row function returning a category, "
           "an int with public bounds [lo, hi]: keys \"lo\" .. \"hi\", or a tuple of those: a crosstab "
           "with keys \"k1, k2\"), empty parts included.",
           "Each row lands in exactly one part, so sum_k d_k <= d(b); the keys come from the declared "
           "category, never from the data. " + _REF,
           category="partition", run=_run_groupby, needs_context=True)
def _groupby(ctx, args, span):
    key, b = args
    elem = elem_type(ctx, b, "groupby")
    inst, captured = row_function(ctx, key, elem, span)
    keys, info = _key_domain(ctx, inst.cod, key.span)
    parts = ctx.split(d_add(b.dist, captured), list(keys))
    return Result(Parts(keys, Bag(elem)), d_add(*parts), ir_args=[inst.code, b.ir], parts=parts, info=info)


def _key_domain(ctx, t, span) -> tuple[tuple[str, ...], dict]:
    """The public keys of a partition: a category's values, a bounded int's range, or the
    product of those for a tuple key (a crosstab; keys joined with ", ")."""
    if isinstance(t, Tensor) and len(t.items) >= 2:
        if any(isinstance(item, Tensor) for item in t.items):
            raise ctx.fail("E0307", f"a crosstab key must be a flat tuple of categories or bounded ints, not {t}", span)
        subs = [_key_domain(ctx, item, span)[1] for item in t.items]
        keys: list[str] = [""]
        for sub in subs:
            keys = [f"{k}, {v}" if k else v for k in keys for v in sub["keys"]]
        if len(keys) > MAX_INT_KEYS:
            raise ctx.fail("E0307", f"this crosstab has {len(keys)} cells; at most {MAX_INT_KEYS} are allowed", span)
        if len(set(keys)) != len(keys):
            raise ctx.fail("E0307", "this crosstab's cells would have the same name (a category value contains "
                           "\", \"); rename the categories", span)
        return tuple(keys), {"keys": tuple(keys), "product": subs}
    if isinstance(t, Cat):
        return t.values, {"keys": t.values}
    if isinstance(t, Num) and t.integer and t.bounded and 0 <= t.hi - t.lo < MAX_INT_KEYS:
        lo, hi = int(t.lo), int(t.hi)
        keys = tuple(str(i) for i in range(lo, hi + 1))
        return keys, {"keys": keys, "int_lo": lo}
    raise ctx.fail("E0307", f"groupby needs a key with a finite, declared set of values, but the key is {t}",
                   span, "declare the column as a category in the schema, e.g. sex : cat{\"Male\", \"Female\"}, "
                   "or make the key a bounded int, e.g. clip 0 3 (nearest p)")


def _parts_type(ctx, arg, what):
    if not isinstance(arg.type, Parts):
        raise ctx.fail("E0202", f"{what} expects the parts of a partition, but this is {arg.type}", arg.span)
    return arg.type


def _parts_dists(ctx, arg):
    """Per-key distances; a partition known only by its type gets fresh part variables
    (its metric is the sum over parts, so they satisfy sum_k d_k <= d(whole))."""
    if arg.parts is not None:
        return arg.parts
    if not arg.dist:
        return [{} for _ in arg.type.keys]
    return ctx.split(arg.dist, list(arg.type.keys), [arg.type.elem] * len(arg.type.keys))


@primitive("part", ("ps", "key"), "parts K 'a -o string -> 'a",
           "part ps \"key\": the part of a partition for one key (ps.key works for keys that are names).",
           "Projection from a tensor of parts is 1-sensitive in that part's distance variable. " + _REF,
           category="partition", run=_run_part)
def _part(ctx, args, span):
    ps, key = args
    t = _parts_type(ctx, ps, "part")
    if not key.is_const or key.const not in t.keys:
        raise ctx.fail("E0205", f"part: the key must be one of the declared keys {list(t.keys)}", key.span)
    i = t.keys.index(key.const)
    return Result(t.elem, _parts_dists(ctx, ps)[i], info={"index": i})


def _per_part(ctx, f, ps, span, fuzzy: bool):
    t = _parts_type(ctx, ps, "each" if fuzzy else "pmap")
    inst = ctx.instantiate(f, [t.elem], span, times=len(t.keys), quadratic=True)  # once per key
    if fuzzy and not isinstance(inst.cod, Fuzzy):
        raise ctx.fail("E0202", f"each expects a function returning a distribution, but it returns {inst.cod}",
                       f.span, "use pmap for a function that releases nothing")
    k = inst.param_coefs[0]
    # The function runs once per part: its captured private data is read k times -> infinite.
    captured = d_inf(inst.captured)
    quad = inst.quad[0] if inst.quad else {}
    # Each part's Gaussian releases cost rho per unit of its distance squared (rule Rho); the parts
    # are split symbols, so their maximum is taken where they are eliminated.
    parts = [d_add(ctx.scale_apply(k, d, span), ctx.lift(quad, d, span), captured) for d in _parts_dists(ctx, ps)]
    return inst, parts


@primitive("pmap", ("f", "ps"), "('a -o[s] 'b) -> parts K 'a -o[s] parts K 'b",
           "pmap f ps: apply f to every part (no release).",
           "An s-sensitive function applied to each component of a tensor is s-sensitive in each "
           "component's distance variable. " + _REF,
           category="partition", run=_run_pmap, needs_context=True)
def _pmap(ctx, args, span):
    f, ps = args
    inst, parts = _per_part(ctx, f, ps, span, fuzzy=False)
    return Result(Parts(ps.type.keys, inst.cod), d_add(*parts), ir_args=[inst.code, ps.ir], parts=parts)


@primitive("each", ("f", "ps"), "('a -o[s] fuzzy 'b) -> parts K 'a -o[s] fuzzy (parts K 'b)",
           "each f ps: run the mechanism f on every part and release all results (a map from key to value).",
           "Releases on disjoint parts compose in parallel: the cost is sum_k s * d_k <= s * d(b) "
           "(parallel composition; PrivJail appendix B for unions of parts). " + _REF,
           category="partition", run=_run_each, needs_context=True)
def _each(ctx, args, span):
    f, ps = args
    inst, parts = _per_part(ctx, f, ps, span, fuzzy=True)
    return Result(Fuzzy(Parts(ps.type.keys, inst.cod.inner)), d_add(*parts), ir_args=[inst.code, ps.ir])


@primitive("values", ("ps",), "parts K 'a -o list 'a",
           "values ps: the parts' values as a list, in declared key order (e.g. released per-group "
           "results, to feed the next iteration of an algorithm).",
           "A list's distance is the sum of its elements' distances, like the parts'. " + _REF,
           category="partition", run=lambda ps: tuple(ps.values()))
def _values(ctx, args, span):
    (ps,) = args
    t = _parts_type(ctx, ps, "values")
    from ..checking.types import ListT

    return Result(ListT(t.elem), d_add(*_parts_dists(ctx, ps)) if ps.dist else {})
