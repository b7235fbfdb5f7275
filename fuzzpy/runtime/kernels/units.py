"""Evaluators of `bound_rows`, `bound_groups`, `bound_groups_in`, `groupby_in` and `select_keys`
(declared in fuzzpy/primitives/units.py).

Which rows a bound keeps is a uniformly random choice per unit: each row of a unit with too
many rows gets 32 random bits from the run's random source (`RandomSource`: the operating
system's CSPRNG, never numpy's generator), and a unit keeps its rows with the smallest bits (ties
in the order of its rows).  So the choice for a unit depends only on its own rows and fresh
randomness, which is what rules Bound rows and Bounded groups need (docs/soundness.md).  Units are
factorised once per bound; everything else is numpy over whole columns: one sort of the rows that
need a choice, never a Python loop over units.

`select_keys` counts each key's units (each unit in at most m of its keys, chosen the same way)
and adds exact discrete Laplace noise (runtime/samplers.py) to the count of every key some unit
has, in the keys' sorted order, so the same seed draws the same noise on every engine.

On the Dask engine (`_d_*`) the units are a column of the table: the rows are brought together
by unit with a shuffle (`shuffle(on=unit)`), each partition bounds its own units with the
pandas code above and random bits drawn on the client per partition, and `select_keys` counts
on the workers (exact integer partials, added on the client); noise is drawn on the client.
`bound_groups` and `bound_groups_in` bound each shuffled partition the same way, giving each kept
row its part number, and keep the bounded rows on the workers (one shuffle, whatever number of
parts is read); their parts, and `groupby_in`'s, are lazy selections by part number, as
`groupby`'s are.  Which parts a unit keeps is drawn over its (unit, part) pairs in sorted order:
a function of the unit's set of parts and the seed alone, not of the order the shuffle gave.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from ...accounting.partition_selection import BITS, KeepCurve, keep_curve
from ...primitives.mechanisms import BETA, Accuracy
from ...primitives.registry import PER_LANE, kernel
from ...primitives.units import selection_step
from .. import batch as lanes
from ..samplers import sample_bernoulli_exp, sample_discrete_laplace
from ..state import RunFailure
from ..unit_rows import UnitRows
from ..values import MaskedBag, MechanismDistribution, restrict
from ..vectorize import row_function
from .partitions import key_codes

MAX_RELEASED_KEYS = 100_000  # primitives/partitions.MAX_RELEASED_KEYS


# ---- random choices per group ----------------------------------------------------------------------

def random_u32(rng: Any, n: int) -> np.ndarray:
    """n uniform 32-bit integers from the run's random source."""
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    return np.frombuffer(rng.randbytes(4 * n), dtype=np.uint32)


# rule Bound rows: a uniformly random choice per group, from that group's rows and fresh bits
def keep_at_most(group: np.ndarray, k: int, rng: Any) -> np.ndarray:
    """A mask keeping at most k rows of each group (group ids >= 0; -1: dropped): every row of a
    group of at most k rows, else the k rows with the smallest random bits, ties in row order.
    The choice for one group reads only its rows' positions among themselves and their bits.
    (Row-sized temporaries are masks where possible, and freed as soon as they are read: this
    runs on every row of a table.)"""
    valid = group >= 0
    if not valid.any():
        return valid
    crowded = np.bincount(group[valid]) > k  # per group
    if not crowded.any():
        return valid
    over_mask = crowded[np.maximum(group, 0)]
    over_mask &= valid
    keep = valid
    keep &= ~over_mask
    over = np.flatnonzero(over_mask)
    del over_mask
    og = group[over]
    og = og.view(np.uint64) if og.dtype == np.int64 else og.astype(np.uint64)  # ids >= 0 here
    if og.size and int(og.max()) >= 2**32:  # pragma: no cover - more than 4 billion groups
        order = np.lexsort((random_u32(rng, over.size), og))
        ordered = og[order]
    else:
        og <<= np.uint64(32)
        np.bitwise_or(og, random_u32(rng, over.size), out=og)  # (group, random bits) as one word
        order = np.argsort(og)
        ordered = og[order]
        del og
        _rows_order_in_ties(ordered, order)
        ordered >>= np.uint64(32)  # the groups, in sorted order
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    del ordered
    rank = np.arange(order.size)
    rank -= np.repeat(starts, np.diff(np.r_[starts, order.size]))
    keep[over[order[rank < k]]] = True
    return keep


def _rows_order_in_ties(sorted_key: np.ndarray, order: np.ndarray) -> None:
    """Equal keys (one group, the same random bits) in row order, whatever order the sort left
    them in: the choice must not depend on the other groups' rows."""
    sk = sorted_key
    tie = np.flatnonzero(sk[1:] == sk[:-1])
    if tie.size == 0:
        return
    starts = tie[np.r_[True, np.diff(tie) > 1]]
    for s in starts:
        e = s + 1
        while e < sk.size and sk[e] == sk[s]:
            e += 1
        order[s:e] = np.sort(order[s:e])


def unit_codes(units: Any) -> np.ndarray:
    """Each row's unit as an int64 code (-1: no unit), in order of first appearance."""
    codes, _ = pd.factorize(units, use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64)


def rows_and_units(t: Any) -> tuple[Any, np.ndarray]:
    """The rows of a table, and each row's unit code (a table without a unit: each row its own)."""
    if isinstance(t, UnitRows):
        return t.rows, unit_codes(t.units)
    return t, np.arange(len(t), dtype=np.int64)


# ---- keys as strings -------------------------------------------------------------------------------

def key_strings(values: Any, kind: str) -> tuple[np.ndarray, list[str]]:
    """Each row's key as a code into a list of distinct strings (-1: missing); an int key as its
    digits (5 and 5.0 are "5")."""
    codes, uniques = pd.factorize(values if isinstance(values, pd.Series) else pd.Series(values),
                                  use_na_sentinel=True)
    codes = np.asarray(codes, dtype=np.int64)
    texts = [_key_text(u, kind) for u in uniques]
    if any(t is None for t in texts) or len(set(texts)) != len(texts):  # merge equal texts, drop bad ones
        names = list(dict.fromkeys(t for t in texts if t is not None))
        where = {t: i for i, t in enumerate(names)}
        remap = np.array([where[t] if t is not None else -1 for t in texts] + [-1], dtype=np.int64)
        return remap[codes], names
    return codes, texts


def _key_text(v: Any, kind: str) -> Any:
    if v is None or (isinstance(v, float) and v != v):
        return None
    if kind == "int":
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None
        return str(int(f)) if f == f and f not in (float("inf"), float("-inf")) and f == int(f) else None
    return str(v)


def _listed_codes(values: Any, kind: str, keys: tuple) -> np.ndarray:
    """Each row's position in the public list `keys` (-1: a missing key, or one not listed)."""
    codes, names = key_strings(values, kind)
    where = pd.Index(list(keys)).get_indexer(names) if names else np.zeros(0, dtype=np.int64)
    return np.append(np.asarray(where, dtype=np.int64), -1)[codes]


def _released_list(keys: Any, span: Any) -> tuple:
    keys = tuple(keys)
    if len(keys) > MAX_RELEASED_KEYS:  # public: the list was released, or written in the program
        raise RunFailure(f"a partition over {len(keys)} released keys: at most {MAX_RELEASED_KEYS} are allowed", span)
    if len(set(keys)) != len(keys):
        raise RunFailure("the list of keys of a partition names a key twice", span)
    return keys


# ---- the primitives on pandas ---------------------------------------------------------------------

def _bound_rows(ctx, k, t):
    rows, units = rows_and_units(t)
    return restrict(rows, keep_at_most(units, int(ctx.info["k"]), ctx.rng))


def partition_of(rows: Any, part: np.ndarray, keys: tuple) -> dict:
    """key -> the rows whose part number is its position (lazy parts of `rows`)."""
    base, picked = (rows.base, rows.rows) if isinstance(rows, MaskedBag) else (rows, None)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(-1, len(keys)) + 0.5) if part.size else None
    out = {}
    for i, key in enumerate(keys):
        mine = order[bounds[i]:bounds[i + 1]] if bounds is not None else np.zeros(0, dtype=np.int64)
        mine = np.sort(mine)
        out[key] = MaskedBag(base, rows=mine if picked is None else picked[mine])
    return out


# rule Bounded groups: at most m groups per unit, c rows per unit and group
def bounded_parts(rows: Any, units: np.ndarray, part: np.ndarray, m: int, c: int, rng: Any) -> np.ndarray:
    """Each row's part number after the bounds (-1: dropped): at most m of its unit's parts
    (chosen at random among the unit's parts), and at most c of its unit's rows in each."""
    valid = (units >= 0) & (part >= 0)
    n_parts = int(part.max()) + 1 if part.size and valid.any() else 1
    cell = units * n_parts  # each row's (unit, part) cell; row-sized arrays are built in place
    cell += part
    cell[~valid] = -1
    pair, pairs = pd.factorize(cell, use_na_sentinel=False)
    del cell
    pair = np.asarray(pair, dtype=np.int64)
    pairs = np.asarray(pairs, dtype=np.int64)
    unit_of_pair = np.where(pairs >= 0, pairs // n_parts, -1)
    chosen = keep_at_most(unit_of_pair, m, rng)
    valid &= chosen[pair]
    pair[~valid] = -1  # the rows of the unit's chosen parts, by cell
    del valid
    kept = keep_at_most(pair, c, rng)
    del pair
    return np.where(kept, part, -1)


def _bound_groups(ctx, m, c, key, t):
    rows, units = rows_and_units(t)
    part = np.asarray(key_codes(row_function(ctx.interp.state, key)(rows), ctx.info), dtype=np.int64)
    keys = tuple(ctx.info["keys"])
    return partition_of(rows, bounded_parts(rows, units, part, int(ctx.info["m"]), int(ctx.info["c"]), ctx.rng),
                        keys)


def _bound_groups_in(ctx, keys, m, c, key, t):
    keys = _released_list(keys, ctx.span)
    rows, units = rows_and_units(t)
    part = _listed_codes(row_function(ctx.interp.state, key)(rows), ctx.info["key_kind"], keys)
    return partition_of(rows, bounded_parts(rows, units, part, int(ctx.info["m"]), int(ctx.info["c"]), ctx.rng),
                        keys)


def _groupby_in(ctx, keys, key, b):
    keys = _released_list(keys, ctx.span)
    return partition_of(b, _listed_codes(row_function(ctx.interp.state, key)(b), ctx.info["key_kind"], keys), keys)


# rule Partition selection: units per key, at most m keys per unit
def unit_key_counts(units: np.ndarray, keys: np.ndarray, n_keys: int, m: int, rng: Any) -> np.ndarray:
    """For each key code, how many units have it, each unit counted in at most m of its keys
    (chosen at random among its keys)."""
    valid = (units >= 0) & (keys >= 0)
    if not valid.any():
        return np.zeros(n_keys, dtype=np.int64)
    pairs = pd.unique(units[valid] * n_keys + keys[valid])
    pairs = np.asarray(pairs, dtype=np.int64)
    chosen = keep_at_most(pairs // n_keys, m, rng)
    return np.bincount(pairs[chosen] % n_keys, minlength=n_keys).astype(np.int64)


def thresholded(counts: dict[str, int], info: dict, rng: Any) -> tuple[str, ...]:
    """The keys whose count plus discrete Laplace noise of the checker's scale reaches the
    threshold; the keys are visited in sorted order (the same noise for the same seed everywhere)."""
    scale, threshold = Fraction(info["scale"]), int(info["threshold"])
    return tuple(key for key in sorted(counts) if counts[key] > 0 and reaches(threshold - counts[key], scale, rng))


def reaches(j: int, scale: Fraction, rng: Any) -> bool:
    """True with probability P[Z >= j] exactly, Z discrete Laplace of `scale` (q = exp(-1/scale)):
    for j >= 1, P[Z >= j] = q^(j-1) * P[Z >= 1] (the tail is geometric), drawn as two independent
    coins, the first of which fails fast for a key far below the threshold (most keys); for
    j <= 0, P[Z >= j] = 1 - P[Z >= 1 - j] by symmetry."""
    if j <= 0:
        return not reaches(1 - j, scale, rng)
    return sample_bernoulli_exp(Fraction(j - 1) / scale, rng) and sample_discrete_laplace(scale, rng) >= 1


def selection_accuracy(info: dict) -> Accuracy:
    """A key with at least this many units is released with probability at least 1 - beta
    (P[Z < -j] = q^(j+1)/(1+q) <= q^j for the discrete Laplace, q = exp(-1/scale))."""
    import math

    scale = Fraction(info["scale"])
    j = math.ceil(float(scale) * math.log(1 / float(BETA)) * (1 + 2**-30)) + 1 if scale else 0
    return Accuracy(Fraction(int(info["threshold"]) + j), BETA, "units a key needs to be released")


def _select_keys(ctx, eps, delta, m, key, t):
    info = dict(ctx.info)
    rows, units = rows_and_units(t)
    codes, names = key_strings(row_function(ctx.interp.state, key)(rows), info["key_kind"])
    counts = unit_key_counts(units, codes, len(names), int(info["m"]), ctx.rng)
    return _selection_release(ctx, info, dict(zip(names, counts.tolist())))


# rule Optimal partition selection: each key kept with probability pi(its units), exactly
def kept_by_curve(counts: dict[str, int], info: dict, rng: Any) -> tuple[str, ...]:
    """The keys kept by the optimal curve: for each key with units, in sorted order, BITS uniform
    bits u from the run's random source, kept when u < pi(n) 2^BITS (probability pi(n) exactly)."""
    curve = _curve(info)
    keys = [key for key in sorted(counts) if counts[key] > 0]
    size = BITS // 8
    bits = rng.randbytes(size * len(keys)) if keys else b""
    return tuple(key for i, key in enumerate(keys)
                 if int.from_bytes(bits[i * size:(i + 1) * size], "little") < curve.numerator(counts[key]))


def _curve(info: dict) -> KeepCurve:
    return keep_curve(Fraction(info["epsilon"]), Fraction(info["delta"]), int(info["m"]),
                      selection_step(Fraction(info["sensitivity"])))


def _selection_release(ctx, info: dict, counts: dict[str, int]) -> MechanismDistribution:
    optimal = info.get("method") == "optimal"
    name = "select_keys_optimal" if optimal else "select_keys"

    def draw(sctx):
        if not info["charged"]:
            keys = tuple(sorted(k for k, n in counts.items() if n > 0))
        else:
            keys = kept_by_curve(counts, info, sctx.rng) if optimal else thresholded(counts, info, sctx.rng)
        accuracy = optimal_accuracy(info) if optimal else selection_accuracy(info)
        sctx.record_release(name, keys, info["charged"], Fraction(info["scale"]), accuracy,
                            sensitivity=info["sensitivity"], delta=info["delta"], threshold=info["threshold"])
        return keys

    return MechanismDistribution(name, draw)


def optimal_accuracy(info: dict) -> Accuracy:
    """A key with at least this many units is released with probability at least 1 - beta (the
    checker accepts only curves that reach 1; without a charge every key with a unit is)."""
    units = _curve(info).units_for(1 - BETA) if info["charged"] else 1
    return Accuracy(Fraction(units), BETA, "units a key needs to be released")


# ---- on the Dask engine -----------------------------------------------------------------------------

def _shuffled(b: Any) -> Any:
    """The table with every unit's rows in one partition."""
    from ..engines.dask_tables import SHUFFLE

    return b.frame.shuffle(on=b.unit, shuffle_method=SHUFFLE)


def _p_bound_rows(part: Any, unit: str, k: int, seed: bytes) -> Any:
    part = part.reset_index(drop=True)
    keep = keep_at_most(unit_codes(part[unit].array), k, _Stream(seed))
    return part.iloc[np.flatnonzero(keep)].reset_index(drop=True)


class _Stream:
    """A partition's random bytes: a 256-bit seed the client drew from the run's random source,
    expanded with SHAKE-256 (an extendable-output function: its output cannot be told from random
    bytes without the seed).  No worker draws randomness of its own."""

    def __init__(self, seed: bytes):
        self.seed, self.used = seed, 0

    def randbytes(self, n: int) -> bytes:
        import hashlib

        out = hashlib.shake_256(self.seed).digest(self.used + n)[self.used:]
        self.used += n
        return out


def _partition_seeds(ctx: Any, frame: Any) -> list[bytes]:
    """A fresh 256-bit seed for every partition, from the run's random source."""
    return [ctx.rng.randbytes(32) for _ in range(frame.npartitions)]


def _need_units(b: Any, prim: str, span: Any) -> Any:
    from ..engines.dask_tables import KEPT, DaskRunFailure, need_bag

    b = need_bag(prim, b, span)
    if b.unit is None:
        raise DaskRunFailure("E2101", f"{prim} got a table without its unit on the Dask engine", span, KEPT)
    return b


def _d_bound_rows(eng, ctx, vec, k, b):
    b = _need_units(b, "bound_rows", ctx.span)
    import dask.dataframe as dd
    from dask import delayed

    frame = _shuffled(b)
    seeds = _partition_seeds(ctx, frame)
    pieces = [delayed(_p_bound_rows, pure=False)(p, b.unit, int(ctx.info["k"]), s)
              for p, s in zip(frame.to_delayed(), seeds)]
    return eng.bag(dd.from_delayed(pieces, meta=frame._meta, verify_meta=False))


def _p_unit_keys(part: Any, unit: Any, fn: Any, vec: bool, kind: str, m: int, seed: bytes) -> dict:
    """One partition's units per key (every unit of the partition is whole in it)."""
    from ..engines.dask_tables import rows_of

    part = part.reset_index(drop=True)
    units = unit_codes(part[unit].array) if unit is not None else np.arange(len(part), dtype=np.int64)
    codes, names = key_strings(rows_of(part, fn, vec), kind)
    counts = unit_key_counts(units, codes, len(names), m, _Stream(seed))
    return {n: int(c) for n, c in zip(names, counts.tolist()) if c}


def _d_select_keys(eng, ctx, vec, eps, delta, m, key, b):
    from ..engines.dask_tables import Shipped, need_bag

    b = need_bag("select_keys", b, ctx.span)
    info = dict(ctx.info)
    frame = _shuffled(b) if b.unit is not None else b.frame
    seeds = _partition_seeds(ctx, frame)
    from dask import delayed

    fn = Shipped(key)
    tasks = [delayed(_p_unit_keys, pure=False)(p, b.unit, fn, vec, info["key_kind"], int(info["m"]), s)
             for p, s in zip(frame.to_delayed(), seeds)]
    total: dict[str, int] = {}
    for partial in eng.gathered(tasks):
        for name, n in partial.items():
            total[name] = total.get(name, 0) + n
    return _selection_release(ctx, info, total)


# The parts of `bound_groups`, `bound_groups_in` and `groupby_in` are lazy selections of one coded
# frame, as `groupby`'s are (kernels/partitions.py): part i is the rows whose part number is i, and
# the parts' sizes are counted together, in one pass, when a size is first asked for.

def _free_column(meta: Any) -> str:
    """A column name the frame does not have (to carry each row's part number)."""
    name = "__fuzzpy_part"
    while name in set(map(str, meta.columns)):
        name += "_"
    return name


def _sorted_unit_codes(values: Any) -> np.ndarray:
    """Each row's unit as a code in the sorted order of the units (-1: none): the same code for
    the same unit however the partition's rows are ordered."""
    codes, _ = pd.factorize(values, sort=True, use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64)


def _p_part_codes(part: Any, fn: Any, vec: bool, listing: tuple) -> np.ndarray:
    """Each row's part number (-1: none): ("declared", info) for the checker's keys, ("listed",
    kind, keys) for a released list of keys."""
    from ..engines.dask_tables import rows_of

    values = rows_of(part, fn, vec)
    if listing[0] == "declared":
        return np.asarray(key_codes(values, listing[1]), dtype=np.int64)
    return _listed_codes(values, listing[1], listing[2])


# rule Bounded groups: each unit is whole in its partition, so bounding a partition bounds its units
def _p_bounded(part: Any, unit: Any, fn: Any, vec: bool, listing: tuple, m: int, c: int, seed: bytes,
               column: str) -> Any:
    """One partition's rows that the bounds keep, each with its part number in `column`.  The rows
    are bounded in (unit, part) order, each cell's rows in their own order: which parts a unit
    keeps then depends only on the set of its parts and the seed, not on how the shuffle ordered
    the rows, so every pass over the table (one per part read) keeps the same parts of a unit."""
    part = part.reset_index(drop=True)
    codes = _p_part_codes(part, fn, vec, listing)
    units = _sorted_unit_codes(part[unit].array) if unit is not None else np.arange(len(part), dtype=np.int64)
    order = np.lexsort((codes, units))  # stable: a cell's rows keep their order
    bounded = np.empty(len(part), dtype=np.int64)
    bounded[order] = bounded_parts(None, units[order], codes[order], m, c, _Stream(seed))
    kept = np.flatnonzero(bounded >= 0)
    out = part.iloc[kept].reset_index(drop=True)
    out[column] = bounded[kept]
    return out


def _p_coded_part(part: Any, column: str, i: int) -> Any:
    """The rows of a coded partition in part i, without their part number."""
    return part.loc[part[column].to_numpy() == i].drop(columns=[column]).reset_index(drop=True)


def _p_coded_counts(part: Any, column: str, n: int) -> list[int]:
    codes = part[column].to_numpy()
    return np.bincount(codes[codes >= 0], minlength=n)[:n].tolist()


def _p_listed_part(part: Any, fn: Any, vec: bool, listing: tuple, i: int) -> Any:
    from ..engines.dask_tables import take_rows

    return take_rows(part, _p_part_codes(part, fn, vec, listing) == i)


def _p_listed_counts(part: Any, fn: Any, vec: bool, listing: tuple, n: int) -> list[int]:
    codes = _p_part_codes(part, fn, vec, listing)
    return np.bincount(codes[codes >= 0], minlength=n)[:n].tolist()


class _PartSizes:
    """The sizes of a Dask partition's parts: every partition's counts per part (`fn`), added as
    ints on the client, in one pass when a size is first asked for."""

    def __init__(self, engine: Any, frame: Any, fn: Any, *args: Any):
        self.engine, self.frame, self.fn, self.args = engine, frame, fn, args
        self._counts: Any = None

    # rule Engines: a part's size, the partitions' counts added as ints
    def count(self, i: int) -> int:
        if self._counts is None:
            total: list[int] = []
            for partial in self.engine.partials(self.frame, self.fn, *self.args):
                total = [a + int(b) for a, b in zip(total, partial)] if total else [int(b) for b in partial]
            self._counts = total
        return self._counts[i] if self._counts else 0


def _d_bounded_partition(eng: Any, ctx: Any, vec: bool, b: Any, key: Any, listing: tuple, keys: tuple,
                         prim: str) -> dict:
    """The parts of `bound_groups` / `bound_groups_in` on Dask: the table shuffled on its unit, every
    partition bounded with its own seed (as `bound_rows`) and kept on the workers, then one lazy
    selection per key."""
    import dask.dataframe as dd
    from dask import delayed

    from ..engines.dask_tables import Shipped, need_bag

    b = need_bag(prim, b, ctx.span)
    frame = _shuffled(b) if b.unit is not None else b.frame
    meta = frame._meta
    column = _free_column(meta)
    coded_meta = meta.assign(**{column: np.zeros(0, dtype=np.int64)})
    fn, m, c = Shipped(key), int(ctx.info["m"]), int(ctx.info["c"])
    pieces = [delayed(_p_bounded, pure=False)(p, b.unit, fn, vec, listing, m, c, s, column)
              for p, s in zip(frame.to_delayed(), _partition_seeds(ctx, frame))]
    # computed once and kept on the workers (spilled to disk beyond their memory targets): every
    # part read later selects from the same bounded rows, without shuffling the table again
    coded = dd.from_delayed(eng.client.compute(pieces), meta=coded_meta, verify_meta=False)
    sizes = _PartSizes(eng, coded, _p_coded_counts, column, len(keys))
    return {k: eng.bag(coded.map_partitions(_p_coded_part, column, i, meta=meta), sizes, i)
            for i, k in enumerate(keys)}


def _d_bound_groups(eng, ctx, vec, m, c, key, b):
    return _d_bounded_partition(eng, ctx, vec, b, key, ("declared", dict(ctx.info)), tuple(ctx.info["keys"]),
                                "bound_groups")


def _d_bound_groups_in(eng, ctx, vec, keys, m, c, key, b):
    keys = _released_list(keys, ctx.span)
    return _d_bounded_partition(eng, ctx, vec, b, key, ("listed", ctx.info["key_kind"], keys), keys,
                                "bound_groups_in")


def _d_groupby_in(eng, ctx, vec, keys, key, b):
    """`groupby_in` on Dask: like `groupby`'s parts (no unit, no choice: nothing to shuffle)."""
    from ..engines.dask_tables import Shipped, need_bag

    b = need_bag("groupby_in", b, ctx.span)
    keys = _released_list(keys, ctx.span)
    fn, listing, meta = Shipped(key), ("listed", ctx.info["key_kind"], keys), b.frame._meta
    sizes = _PartSizes(eng, b.frame, _p_listed_counts, fn, vec, listing, len(keys))
    return {k: eng.bag(b.frame.map_partitions(_p_listed_part, fn, vec, listing, i, meta=meta), sizes, i)
            for i, k in enumerate(keys)}


kernel("bound_rows", reference=_bound_rows, context=True, lazy_bags=True, batched=PER_LANE, dask=_d_bound_rows)
kernel("bound_groups", reference=_bound_groups, context=True, lazy_bags=True, batched=PER_LANE,
       dask=_d_bound_groups)
kernel("bound_groups_in", reference=_bound_groups_in, context=True, lazy_bags=True, batched=PER_LANE,
       dask=_d_bound_groups_in)
kernel("groupby_in", reference=_groupby_in, context=True, lazy_bags=True, batched=PER_LANE, dask=_d_groupby_in)
# a mechanism: on lane values, as every other one (only the auditor's sampler evaluates it there)
kernel("select_keys", reference=_select_keys, context=True, lazy_bags=True, batched=lanes.mechanism_on_lanes,
       dask=_d_select_keys)
kernel("select_keys_optimal", reference=_select_keys, context=True, lazy_bags=True,
       batched=lanes.mechanism_on_lanes, dask=_d_select_keys)
