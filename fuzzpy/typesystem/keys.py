"""A partition's key as the program knows it, with how a person reads it.

`groupby (fun r -> (r.sex, bin 10 r.age)) db` has the keys "Male, 1" .. "Female, 9": the
strings the program uses (`part ps "Male, 1"`, the result's dict).  A person reads the key
"Male, 1" as sex Male and age in [10, 20).  The checker reads, from the key function's code,
the column each component of the key comes from and the width of a bin (the groupby's
`readings`); the run's partitions then key their parts by `PartKey`s, the same strings with
their components, each with its column and the interval it stands for.  Everything here is
public: it comes from the checked program (the schema's categories, a bin's width and the
bounds), never from the data.

A `PartKey` is a `str`: equal to, hashed like and used as the plain key everywhere; only the
rendering of released values (fuzzpy/render/labels.py) reads its extra fields.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import product
from typing import Optional

# The interval [low, high) a key component stands for; None for an unbounded end.
Interval = tuple[Optional[Fraction], Optional[Fraction]]
# How a key function's result component reads: the column it comes from, the width of its bins.
Reading = tuple[Optional[str], Optional[Fraction]]


class PartKey(str):
    """A key with its components (a crosstab's values, in order), each with the column it came
    from (None when the key function's code does not name one) and the interval it stands for
    (None but for a bin, or the interval of a CDF's count)."""

    parts: tuple[str, ...]
    columns: tuple[Optional[str], ...]
    intervals: tuple[Optional[Interval], ...]

    def __new__(cls, text: str, parts: tuple[str, ...], columns: tuple[Optional[str], ...],
                intervals: tuple[Optional[Interval], ...]) -> "PartKey":
        key = super().__new__(cls, text)
        key.parts, key.columns, key.intervals = tuple(parts), tuple(columns), tuple(intervals)
        return key

    def __reduce__(self) -> tuple:  # pickled whole (Dask workers)
        return (PartKey, (str(self), self.parts, self.columns, self.intervals))


def plain_key(text: str, column: Optional[str] = None, interval: Optional[Interval] = None) -> PartKey:
    """A key of one component."""
    return PartKey(text, (text,), (column,), (interval,))


def joined_key(keys: tuple[PartKey, ...]) -> PartKey:
    """A crosstab's cell: its components' keys joined with ", " (the key the program uses)."""
    return PartKey(", ".join(keys), tuple(p for k in keys for p in k.parts),
                   tuple(c for k in keys for c in k.columns), tuple(i for k in keys for i in k.intervals))


def part_keys(info: dict) -> tuple[str, ...]:
    """A groupby's keys (its checked `info`), as `PartKey`s when the checker read how they read;
    in the declared order, each equal to the plain key."""
    readings = info.get("readings")
    if not readings:
        return tuple(info["keys"])
    subs = info.get("product") or [info]
    columns = [[_component(k, sub, reading) for k in sub["keys"]] for sub, reading in zip(subs, readings)]
    keys = tuple(joined_key(cell) if len(cell) > 1 else cell[0] for cell in product(*columns))
    return keys if keys == tuple(info["keys"]) else tuple(info["keys"])  # never another key


def _component(key: str, sub: dict, reading: Reading) -> PartKey:
    column, width = reading
    if width is None or "int_lo" not in sub:
        return plain_key(key, column)
    k = int(key)
    return plain_key(key, column, (k * width, (k + 1) * width))
