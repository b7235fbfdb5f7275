"""Candidate events: sets of outputs whose probabilities may differ most between two inputs.

Any set of outputs is a valid test of epsilon-DP (it is post-processing), so the families here
are heuristics for power, never a soundness question.  They are proposed from one half of an
exploration sample and ranked on the other half (so an event that merely fits noise ranks low);
the chosen ones are then measured on fresh samples (`search.py`).

Families, each built from the proposal half:

* value cells: unions of exact outputs, ranked by their likelihood ratio (the Neyman-Pearson
  shape of the best test), including the support set of outputs seen on one side only.  Used
  when outputs repeat (selections, booleans, answer lists, counts).
* float-lattice cells: a float coordinate's (sign, binade, trailing zero bits of the mantissa).
  Naive floating-point noise leaves the input in these bits (Mironov 2012): x + Lap(b) for
  x = 1 can only produce values in (0, 1/2) that are multiples of 2^-53, for x = 0 it produces
  odd multiples of 2^-54 as well.  Unions ranked by likelihood ratio, as for value cells.
* thresholds: y > t and y <= t on each numeric coordinate, t at pooled quantiles (down to the
  0.1% tails, where the Laplace ratio is largest) and at each side's extremes;
* intervals: lo < y <= hi between pooled deciles;
* projections: with several numeric coordinates, thresholds on w . y, w the difference of the
  two sides' means over the pooled variance per coordinate (diagonal Fisher discriminant).  For
  Gaussian noise on a vector, the likelihood ratio is monotone in this projection: it sees the
  L2 move of the whole vector, where a single coordinate only sees its own move.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from .outputs import Encoded
from .stats import point_estimate, predicted_bound

QUANTILES = (0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97, 0.99, 0.997, 0.999)
DECILES = tuple(i / 10 for i in range(11))
MAX_DISCRETE_THRESHOLDS = 64   # a coordinate with at most this many values: cut between each pair
MAX_COORDS = 32                # coordinates searched per pair (the most different ones)
MAX_CODES = 4096               # cells in one union event
TZ_CAP = 8                     # trailing zero bits counted up to this


# ---- events ---------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Event:
    """A set of outputs.  `contains` is vectorised over an encoded sample."""

    text: str

    def contains(self, enc: Encoded) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_json(self) -> dict:
        return {"kind": type(self).__name__, "text": self.text}


@dataclass(frozen=True, eq=False)
class CellEvent(Event):
    """The output (or a float coordinate's lattice class) is one of `codes` (distinct)."""

    family: str = "value"           # "value" or "lattice"
    coord: Optional[str] = None     # for "lattice"
    codes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def contains(self, enc: Encoded) -> np.ndarray:
        return np.isin(family_codes(enc, self.family, self.coord), self.codes)

    def to_json(self) -> dict:
        return {**super().to_json(), "family": self.family, "coordinate": self.coord, "cells": int(self.codes.size)}


@dataclass(frozen=True, eq=False)
class ThresholdEvent(Event):
    """y > t (above) or y <= t on one numeric coordinate; an output without it is outside."""

    coord: str = "y"
    t: float = 0.0
    above: bool = True

    def contains(self, enc: Encoded) -> np.ndarray:
        y = enc.coordinate(self.coord)
        return y > self.t if self.above else y <= self.t

    def to_json(self) -> dict:
        return {**super().to_json(), "coordinate": self.coord, "threshold": self.t, "above": self.above}


@dataclass(frozen=True, eq=False)
class ProjectionEvent(Event):
    """w . y > t (above) or w . y <= t over several numeric coordinates; an output missing one
    of them is outside."""

    coords: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    t: float = 0.0
    above: bool = True

    def contains(self, enc: Encoded) -> np.ndarray:
        z = project(enc, self.coords, self.weights)
        return z > self.t if self.above else z <= self.t

    def to_json(self) -> dict:
        return {**super().to_json(), "coordinates": list(self.coords), "weights": list(self.weights),
                "threshold": self.t, "above": self.above}


@dataclass(frozen=True, eq=False)
class IntervalEvent(Event):
    """lo < y <= hi on one numeric coordinate."""

    coord: str = "y"
    lo: float = -np.inf
    hi: float = np.inf

    def contains(self, enc: Encoded) -> np.ndarray:
        y = enc.coordinate(self.coord)
        return (y > self.lo) & (y <= self.hi)

    def to_json(self) -> dict:
        return {**super().to_json(), "coordinate": self.coord, "lo": self.lo, "hi": self.hi}


# ---- cell families --------------------------------------------------------------------------------

def family_codes(enc: Encoded, family: str, coord: Optional[str]) -> np.ndarray:
    if family == "value":
        return enc.keys
    return lattice_codes(enc.coordinate(coord or "y"))


_ZERO, _NAN, _POS_INF, _NEG_INF = -1, -2, -3, -4


def lattice_codes(y: np.ndarray) -> np.ndarray:
    """(sign, binary exponent, trailing zero bits of the 53-bit mantissa, capped) as one int64."""
    y = np.asarray(y, dtype=np.float64)
    finite = np.isfinite(y) & (y != 0)
    m, e = np.frexp(np.where(finite, y, 1.0))         # y = m * 2**e, 0.5 <= |m| < 1
    mant = (np.abs(m) * 2.0**53).astype(np.int64)      # exact: 53 significant bits
    low = mant & -mant                                 # the lowest set bit, a power of two
    tz = np.minimum(np.log2(low.astype(np.float64)).astype(np.int64), TZ_CAP)
    code = ((y < 0).astype(np.int64) * 8192 + (e.astype(np.int64) + 4096)) * 16 + tz
    code = np.where(finite, code, _ZERO)
    code = np.where(np.isnan(y), _NAN, code)
    code = np.where(y == np.inf, _POS_INF, code)
    return np.where(y == -np.inf, _NEG_INF, code)


def lattice_text(code: int) -> str:
    special = {_ZERO: "0", _NAN: "nan", _POS_INF: "inf", _NEG_INF: "-inf"}
    if code in special:
        return special[code]
    tz, rest = code % 16, code // 16
    sign, e = divmod(rest, 8192)
    e -= 4096
    lo, hi = 2.0 ** (e - 1), 2.0 ** e
    where = f"-[{lo:g}, {hi:g})" if sign else f"[{lo:g}, {hi:g})"
    if tz >= TZ_CAP:
        bits = f"a multiple of 2^{TZ_CAP} ulps"
    elif tz == 0:
        bits = "an odd multiple of the ulp"
    else:
        bits = f"an odd multiple of 2^{tz} ulps"
    return f"{where}, {bits}"


# ---- proposing events from the first half of an exploration sample --------------------------------

def propose(a: Encoded, b: Encoded) -> list[Event]:
    """Candidate events from a proposal sample of each side."""
    events: list[Event] = []
    if _is_discrete(a, b):
        events += _cell_unions("value", None, a.keys, b.keys, lambda k: _value_text(a, b, k))
    for coord in coordinates(a, b):
        ya, yb = a.coordinate(coord), b.coordinate(coord)
        if not _is_integral(ya, yb):
            events += _cell_unions("lattice", coord, lattice_codes(ya), lattice_codes(yb), lattice_text,
                                   prefix=f"{coord} in lattice class")
        events += _thresholds(coord, ya, yb)
        events += _intervals(coord, ya, yb)
    events += _projections(a, b)
    return events


def _is_discrete(a: Encoded, b: Encoded) -> bool:
    """Outputs repeat enough for single outputs to be measurable events."""
    pooled = np.concatenate([a.keys, b.keys])
    return np.unique(pooled).size <= max(1, pooled.size // 4)


def _is_integral(ya: np.ndarray, yb: np.ndarray) -> bool:
    y = np.concatenate([ya, yb])
    y = y[np.isfinite(y)]
    return y.size == 0 or bool(np.all(y == np.round(y)))


def coordinates(a: Encoded, b: Encoded) -> list[str]:
    """Numeric coordinates, at most MAX_COORDS: those whose means differ most (in pooled sds)."""
    labels = list(dict.fromkeys([*a.numeric, *b.numeric]))
    if len(labels) <= MAX_COORDS:
        return labels

    def gap(label: str) -> float:
        ya, yb = a.coordinate(label), b.coordinate(label)
        sd = np.nanstd(np.concatenate([ya, yb])) or 1.0
        diff = abs(np.nanmean(ya) - np.nanmean(yb)) / sd if np.isfinite(ya).any() and np.isfinite(yb).any() else 1.0
        return float(diff) if np.isfinite(diff) else 0.0

    return sorted(labels, key=gap, reverse=True)[:MAX_COORDS]


def _value_text(a: Encoded, b: Encoded, key: int) -> str:
    text = a.label_of(key)
    return b.label_of(key) if text.startswith("<output") else text


def _prefix_lengths(k: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, ... up to k (and k itself)."""
    out, x = [], 1
    while x < k:
        out.append(x)
        x = x + 1 if x < 4 else (x * 3) // 2
    out.append(k)
    return sorted(set(min(v, MAX_CODES) for v in out if v >= 1))


def _cell_unions(family: str, coord: Optional[str], ca: np.ndarray, cb: np.ndarray, describe,
                 prefix: str = "output is") -> list[Event]:
    """Unions of the cells with the highest likelihood ratio, for each direction, and the support
    set (cells seen on one side only)."""
    codes, inv = np.unique(np.concatenate([ca, cb]), return_inverse=True)
    na = np.bincount(inv[:ca.size], minlength=codes.size)
    nb = np.bincount(inv[ca.size:], minlength=codes.size)
    logratio = np.log((na + 0.5) / (nb + 0.5))
    events: list[Event] = []
    for sign, mine, other in ((1, na, nb), (-1, nb, na)):
        order = np.argsort(-sign * logratio, kind="stable")
        useful = int(np.sum(sign * logratio > 0))
        for length in _prefix_lengths(useful) if useful else []:
            chosen = codes[order[:length]]  # best ratio first, so the description leads with it
            events.append(CellEvent(_cells_text(prefix, chosen, describe), family, coord, chosen))
        only = (mine > 0) & (other == 0)
        if only.any() and only.sum() <= MAX_CODES:
            chosen = codes[order[only[order]]]
            side = "A" if sign == 1 else "B"
            text = _cells_text(prefix, chosen, describe) + f" (seen only under input {side} while exploring)"
            events.append(CellEvent(text, family, coord, chosen))
    return events


def _cells_text(prefix: str, codes: np.ndarray, describe, shown: int = 3) -> str:
    items = [describe(int(c)) for c in codes[:shown]]
    more = f" or {codes.size - shown} more" if codes.size > shown else ""
    if codes.size == 1:
        return f"{prefix} {items[0]}"
    return f"{prefix} one of {{{'; '.join(items)}}}{more}"


def _thresholds(coord: str, ya: np.ndarray, yb: np.ndarray) -> list[Event]:
    pooled = np.concatenate([ya, yb])
    pooled = pooled[np.isfinite(pooled)]
    if pooled.size == 0:
        return []
    distinct = np.unique(pooled)
    if distinct.size <= MAX_DISCRETE_THRESHOLDS:
        cuts = list((distinct[:-1] + distinct[1:]) / 2)
    else:
        cuts = list(np.quantile(pooled, QUANTILES))
        for y in (ya, yb):  # each side's extremes: "beyond anything the other side produced"
            y = y[np.isfinite(y)]
            if y.size:
                cuts += [float(y.max()), float(np.nextafter(y.min(), -np.inf))]
    events: list[Event] = []
    for t in sorted(set(float(c) for c in cuts)):
        events.append(ThresholdEvent(f"{coord} > {t:.6g}", coord, t, True))
        events.append(ThresholdEvent(f"{coord} <= {t:.6g}", coord, t, False))
    return events


def _intervals(coord: str, ya: np.ndarray, yb: np.ndarray) -> list[Event]:
    pooled = np.concatenate([ya, yb])
    pooled = pooled[np.isfinite(pooled)]
    if np.unique(pooled).size <= MAX_DISCRETE_THRESHOLDS:
        return []  # thresholds and value cells already cover a few-valued coordinate
    edges = np.unique(np.quantile(pooled, DECILES))
    edges[0] = -np.inf
    return [IntervalEvent(f"{lo:.6g} < {coord} <= {hi:.6g}", coord, float(lo), float(hi))
            for lo, hi in zip(edges[:-1], edges[1:])]


def project(enc: Encoded, coords: Sequence[str], weights: Sequence[float]) -> np.ndarray:
    """w . y for every output (NaN where a coordinate is missing)."""
    z = np.zeros(enc.n)
    for c, w in zip(coords, weights):
        z = z + w * enc.coordinate(c)
    return z


def _projections(a: Encoded, b: Encoded) -> list[Event]:
    """Thresholds on the diagonal Fisher direction over the coordinates present in every output."""
    coords = [c for c in coordinates(a, b)
              if np.isfinite(a.coordinate(c)).all() and np.isfinite(b.coordinate(c)).all()]
    if len(coords) < 2 or a.n < 2 or b.n < 2:
        return []
    ya = np.stack([a.coordinate(c) for c in coords], axis=1)
    yb = np.stack([b.coordinate(c) for c in coords], axis=1)
    var = (ya.var(axis=0) + yb.var(axis=0)) / 2
    diff = ya.mean(axis=0) - yb.mean(axis=0)
    w = np.where(var > 0, diff / np.where(var > 0, var, 1.0), 0.0)
    scale = np.abs(w).max()
    if not np.isfinite(scale) or scale == 0:
        return []
    w = w / scale
    keep = w != 0
    cs, ws = tuple(c for c, k in zip(coords, keep) if k), tuple(float(x) for x, k in zip(w, keep) if k)
    if len(cs) < 2:
        return []  # one coordinate: its own thresholds already cover it
    za, zb = ya[:, keep] @ np.array(ws), yb[:, keep] @ np.array(ws)
    label = " + ".join(f"{x:.3g}*{c}" for c, x in zip(cs, ws)).replace("+ -", "- ")
    return [ProjectionEvent(e.text.replace("z", f"({label})", 1), cs, ws, e.t, e.above)
            for e in _thresholds("z", za, zb) if isinstance(e, ThresholdEvent)]


# ---- ranking on the second half -------------------------------------------------------------------

@dataclass(frozen=True)
class Scored:
    """An event with a direction (+1: P[A]/P[B], -1: P[B]/P[A]) and its exploration counts."""

    event: Event
    direction: int
    k1: int            # count on the numerator side
    k2: int            # count on the denominator side
    n: int             # draws per side
    predicted: float   # expected fresh-sample bound (ranking only)
    delta: float = 0.0

    @property
    def estimate(self) -> float:
        return float(point_estimate(self.k1, self.n, self.k2, self.n, self.delta))


def counts(events: Sequence[Event], enc: Encoded) -> np.ndarray:
    """How many outputs of `enc` each event contains.  A cell event's count is the sum of its
    cells' multiplicities, the distinct cell codes of a family and their multiplicities found
    once per family (an event is a set of cells, so no output is counted twice)."""
    cache: dict[tuple[str, Optional[str]], tuple[np.ndarray, np.ndarray]] = {}
    out = np.zeros(len(events), dtype=np.int64)
    for i, e in enumerate(events):
        if isinstance(e, CellEvent):
            key = (e.family, e.coord)
            if key not in cache:
                cache[key] = np.unique(family_codes(enc, e.family, e.coord), return_counts=True)
            out[i] = _cells_count(*cache[key], e.codes)
        else:
            out[i] = int(np.count_nonzero(e.contains(enc)))
    return out


def _cells_count(cells: np.ndarray, mult: np.ndarray, codes: np.ndarray) -> int:
    """The outputs whose cell is one of `codes` (distinct), from the sorted distinct `cells` and
    their multiplicities."""
    if not len(cells) or not len(codes):
        return 0
    at = np.minimum(np.searchsorted(cells, codes), len(cells) - 1)
    return int(mult[at][cells[at] == codes].sum())


def rank(events: Sequence[Event], a: Encoded, b: Encoded, fresh: int, alpha: float, top: int,
         delta: float = 0.0) -> list[Scored]:
    """The `top` (event, direction) candidates by the bound a fresh sample is expected to give
    (at `delta`), counted on (a, b), which must not be the sample the events were proposed from."""
    if not events or a.n == 0:
        return []
    ka, kb = counts(events, a), counts(events, b)
    n = min(a.n, b.n)
    scored: list[Scored] = []
    for direction, k1, k2 in ((1, ka, kb), (-1, kb, ka)):
        pred = predicted_bound(k1, k2, n, fresh, alpha, delta)
        scored += [Scored(e, direction, int(x), int(y), n, float(p), delta)
                   for e, x, y, p in zip(events, k1, k2, pred) if x > 0]
    scored.sort(key=lambda s: s.predicted, reverse=True)
    out: list[Scored] = []
    seen: set[tuple[str, int]] = set()
    for s in scored:
        key = (s.event.text, s.direction)
        if key not in seen:
            seen.add(key)
            out.append(s)
        if len(out) >= top:
            break
    return out
