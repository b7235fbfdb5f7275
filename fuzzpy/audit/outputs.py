"""Mechanism outputs as arrays that events can be evaluated on, whole sample at a time.

A sampler returns n outputs: a numeric numpy array of shape (n,) or (n, k), a list of
arbitrary released values (numbers, booleans, strings, tuples, lists, partitions as dicts), or
`Rows`, outputs of one shape given coordinate by coordinate (the batched program sampler's).
`encode` turns any of them into an `Encoded` sample:

* `keys`: one int64 per output identifying the whole output exactly, and a function of that
  output alone (a mix of a numeric row's shape and numbers, or a stable hash of the value's
  canonical text), for cell events on discrete outputs;
* `numeric`: coordinate label -> float64 array (NaN where an output has no such coordinate),
  for threshold, interval and float-lattice events.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import chain
from typing import Any, Callable, Iterator

import numpy as np

# More coordinates than this in one output are not all searched (see `Encoded.coordinates`).
MAX_LABEL = 120


@dataclass
class Encoded:
    n: int
    keys: np.ndarray                      # int64, shape (n,)
    numeric: dict[str, np.ndarray]        # label -> float64, shape (n,)
    raw: Any = field(default=None, repr=False)  # the outputs themselves (exploration only: labels)

    def coordinate(self, label: str) -> np.ndarray:
        col = self.numeric.get(label)
        return np.full(self.n, np.nan) if col is None else col

    def label_of(self, key: int) -> str:
        """The output with this key, as text (for describing a witness event)."""
        hit = np.flatnonzero(self.keys == key)
        if self.raw is None or hit.size == 0:
            return f"<output {key:#x}>"
        return output_text(self.raw[int(hit[0])])


def encode(outputs: Any, keep_raw: bool = False) -> Encoded:
    if isinstance(outputs, np.ndarray) and outputs.dtype.kind in "biuf":
        return _encode_array(outputs, keep_raw)
    if type(outputs) is Rows:
        return outputs.encode(keep_raw)
    values = list(outputs)
    return _encode_values(values, keep_raw)


def concat(parts: Sequence[Encoded]) -> Encoded:
    """One sample from several chunks (coordinates missing in a chunk become NaN there)."""
    labels = list(dict.fromkeys(label for p in parts for label in p.numeric))
    numeric = {lab: np.concatenate([p.coordinate(lab) for p in parts]) for lab in labels}
    raws = [p.raw for p in parts]
    raw: Any = None
    if all(type(r) is Rows for r in raws) and len({(r.seed, tuple(r.labels)) for r in raws}) == 1:
        raw = Rows.join(raws)  # outputs of one shape, still not built
    elif all(r is not None for r in raws):
        raw = np.concatenate(raws) if all(isinstance(r, np.ndarray) for r in raws) else \
            [x for r in raws for x in r]
    return Encoded(sum(p.n for p in parts), np.concatenate([p.keys for p in parts]), numeric, raw)


# ---- numeric arrays --------------------------------------------------------------------------------

def _encode_array(a: np.ndarray, keep_raw: bool) -> Encoded:
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError("a sampler's numeric output must have shape (n,) or (n, k)")
    names = ["y"] if a.shape[1] == 1 else [f"y[{j}]" for j in range(a.shape[1])]
    return _encode_rows(np.ascontiguousarray(a, dtype=np.float64), names, a if keep_raw else None)


def _encode_rows(f: np.ndarray, names: list[str], raw: Any, exact: Any = None, seed: int = 0) -> Encoded:
    """Outputs that are rows of floats (coordinate j labelled names[j]): each output's key mixes
    `seed` (its shape's: `_shape_seed`) and its numbers' bits, -0.0 as 0.0 and every NaN as one
    NaN (one output each, as for `canonical`): a function of the output alone, whatever else
    the sample holds, so that a cell is the same set of outputs in every sample.
    `exact`: (flat indices, codes) of numbers that were exact rationals, whose codes replace
    their floats' bits (two rationals with one nearest float are two outputs)."""
    f = np.where(f == 0.0, 0.0, f)  # -0.0 and 0.0 are one output
    f[np.isnan(f)] = np.nan
    bits = f.view(np.int64)
    if exact is not None:
        bits = bits.copy()
        bits.reshape(-1)[exact[0]] = exact[1]
    keys = np.full(f.shape[0], seed & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    ubits = bits.view(np.uint64)
    for j in range(bits.shape[1]):  # distinct rows get distinct keys w.h.p.
        keys = _mix(keys ^ ubits[:, j])
    numeric = {name: f[:, j] for j, name in enumerate(names)}
    return Encoded(f.shape[0], keys.view(np.int64), numeric, raw)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64s: every input bit moves about half the output bits (a
    multiply-and-xor chain alone keeps a sign flip in two numbers as no change at all)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


# ---- outputs given coordinate by coordinate ------------------------------------------------------

class Rows(Sequence):
    """n outputs of one row shape (`row_shape`) whose numbers are floats, ints and exact
    rationals, given as what
    `_float_rows` makes of the outputs themselves: `floats`, an (n, k) float64 array (coordinate
    j labelled labels[j]); `is_exact`, an (n, k) bool array of the numbers that are exact
    rationals; `codes`, their codes (`_pair_codes`) where is_exact.  Encoding them gives the sample the
    outputs' own encoding gives, without building them; `value(i)` builds output i (for a
    witness's text, or a caller reading the outputs as a sequence)."""

    def __init__(self, floats: np.ndarray, is_exact: np.ndarray, codes: np.ndarray, labels: list[str],
                 value: Callable[[int], Any], seed: int):
        self.floats, self.is_exact, self.codes, self.labels, self.value = floats, is_exact, codes, labels, value
        self.seed = seed  # the outputs' shape's (`_shape_seed`)

    def __len__(self) -> int:
        return self.floats.shape[0]

    def __getitem__(self, i: Any) -> Any:
        n = len(self)
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                raise ValueError("Rows are sliced with step 1")
            value = self.value
            return Rows(self.floats[start:stop], self.is_exact[start:stop], self.codes[start:stop], self.labels,
                        lambda j: value(start + j), self.seed)
        if not -n <= i < n:
            raise IndexError("output index out of range")
        return self.value(i % n)

    def __eq__(self, other: Any) -> bool:  # as the list of the outputs
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))

    def encode(self, keep_raw: bool) -> Encoded:
        at = np.flatnonzero(self.is_exact)
        exact = (at, self.codes.reshape(-1)[at]) if at.size else None
        return _encode_rows(self.floats, self.labels, self if keep_raw else None, exact, self.seed)

    @staticmethod
    def of_columns(columns: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], first: Any,
                   value: Callable[[int], Any]) -> "Rows":
        """Coordinate j of every output from columns[j] = (nearest floats, which are exact
        rationals, those rationals' numerators and denominators, in order); `first`, the first
        output, gives the shape (every output has it) and the labels."""
        n = len(columns[0][0])
        floats = np.empty((n, len(columns)), dtype=np.float64)
        is_exact = np.empty((n, len(columns)), dtype=bool)
        codes = np.zeros((n, len(columns)), dtype=np.int64)
        for j, (f, e, num, den) in enumerate(columns):
            floats[:, j], is_exact[:, j] = f, e
            if len(num):
                codes[e, j] = _ratio_codes(num, den)
        return Rows(floats, is_exact, codes, number_labels(first), value, _shape_seed(row_shape(first)))

    @staticmethod
    def join(parts: list["Rows"]) -> "Rows":
        """The outputs of parts (of one shape), one after another."""
        ends = np.cumsum([len(p) for p in parts])

        def value(i: int) -> Any:
            k = int(np.searchsorted(ends, i, side="right"))
            return parts[k].value(i - (int(ends[k - 1]) if k else 0))

        return Rows(np.concatenate([p.floats for p in parts]), np.concatenate([p.is_exact for p in parts]),
                    np.concatenate([p.codes for p in parts]), parts[0].labels, value, parts[0].seed)


# ---- released values ---------------------------------------------------------------------------

_NUMBERS = {float, Fraction, int}  # as the exact type: a bool is not one


def row_shape(v: Any) -> Any:
    """The shape of an output whose numbers are floats, ints and exact rationals, encoded as a row
    of its numbers: ("tuple", length), ("tuples", the inner lengths) or ("dict", the keys in
    order) for a tuple of numbers, a tuple of tuples of numbers (a list of vectors) or a dict of
    numbers (a histogram); None for any other output (a bare number, strings, booleans...)."""
    t = type(v)
    if t is tuple and v:
        if all(type(x) in _NUMBERS for x in v):
            return ("tuple", len(v))
        if all(type(x) is tuple and all(type(y) in _NUMBERS for y in x) for x in v) and any(v):
            return ("tuples", tuple(len(x) for x in v))
    elif t is dict and v and all(type(x) in _NUMBERS for x in v.values()):
        return ("dict", tuple(v))
    return None


def _shape_seed(shape: Any) -> int:
    """A 64-bit code of a row shape, mixed into its outputs' keys: outputs of two shapes with the
    same numbers ((1, 2) and ((1,), (2,))) are two outputs."""
    return int.from_bytes(hashlib.blake2b(repr(shape).encode(), digest_size=8).digest(), "little", signed=True)


def _flat(values: list[Any], shape: Any) -> list[Any]:
    """The numbers of outputs of one row shape, output by output."""
    if shape[0] == "tuple":
        return list(chain.from_iterable(values))
    if shape[0] == "tuples":
        return [x for v in values for t in v for x in t]
    return list(chain.from_iterable(v.values() for v in values))


def _float_rows(values: list[Any], shape: Any) -> tuple[np.ndarray, Any]:
    """(an (n, k) float array, the exact codes or None) of outputs of one row shape: each number's
    nearest float (an int's too: 1 and 1.0 are one output, as for `canonical`), and for exact
    rationals their codes (a rational is not the float nearest to it)."""
    flat = _flat(values, shape)
    kinds = set(map(type, flat))
    try:  # float(x) of every number (correctly rounded); an infinity past the largest float
        floats = np.array(flat, dtype=np.float64)
    except OverflowError:
        floats = np.array([_nearest(x) for x in flat], dtype=np.float64)
    floats = floats.reshape(len(values), -1)
    if Fraction not in kinds:
        return floats, None
    at = np.array([i for i, x in enumerate(flat) if type(x) is Fraction], dtype=np.int64)
    return floats, (at, _exact_codes([flat[i] for i in at.tolist()]))


def _exact_codes(xs: list[Fraction]) -> np.ndarray:
    """The codes of exact rationals (Fractions are in lowest terms), as `_pair_codes`."""
    return _pair_codes([x.numerator for x in xs], [x.denominator for x in xs])


def _ratio_codes(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """The codes of num[i] / den[i] (arrays of Python ints, den > 0, not necessarily in lowest
    terms), as `_pair_codes`: reduced by a vectorised gcd, without building Fractions."""
    g = np.gcd(num, den)
    return _pair_codes(num // g, den // g)


def _pair_codes(num: Any, den: Any) -> np.ndarray:
    """A 64-bit code of each rational num[i] / den[i] in lowest terms: (p * 0x100000001B3) ^ q ^
    0x5851F42D4C957F2D, wrapping, of the integers' codes p and q (`_int_codes`).  Equal for equal
    values, distinct from a float's bits and from other values w.h.p."""
    n64, d64 = _int_codes(num).view(np.uint64), _int_codes(den).view(np.uint64)
    return (n64 * np.uint64(0x100000001B3) ^ d64 ^ np.uint64(0x5851F42D4C957F2D)).view(np.int64)


_LOW, _HIGH, _PRIME, _BIG = -(1 << 63), 1 << 63, (1 << 61) - 1, 1 << 62


def _int_codes(v: Any) -> np.ndarray:
    """Each Python int itself within 64 bits, else 2**62 + (v mod (2**61 - 1)), as int64: two
    integers share a code only by a coincidence of residues, which makes an output's key exact
    with high probability, as every 64-bit key is."""
    v = np.asarray(v, dtype=object)
    try:
        return v.astype(np.int64)  # raises when one is past 64 bits
    except OverflowError:
        small = ((v >= _LOW) & (v < _HIGH)).astype(bool)
        return np.where(small, v, _BIG + v % _PRIME).astype(np.int64)


def _encode_values(values: list[Any], keep_raw: bool) -> Encoded:
    """Outputs of a row shape (`row_shape`) are encoded as rows, a shape at a time (their keys
    from their numbers and shape alone, whatever else the sample holds); any other output by
    its canonical text."""
    n = len(values)
    groups: dict[Any, list[int]] = {}
    others = []
    for i, v in enumerate(values):
        shape = row_shape(v)
        if shape is None:
            others.append(i)
        else:
            groups.setdefault(shape, []).append(i)
    raw = values if keep_raw else None
    if len(groups) == 1 and not others:  # one shape: the sample is its rows
        shape = next(iter(groups))
        floats, exact = _float_rows(values, shape)
        return _encode_rows(floats, number_labels(values[0]), raw, exact, _shape_seed(shape))
    keys = np.empty(n, dtype=np.int64)
    columns: dict[str, np.ndarray] = {}

    def column(label: str) -> np.ndarray:
        if label not in columns:
            columns[label] = np.full(n, np.nan)
        return columns[label]

    for shape, idx in groups.items():
        part = [values[i] for i in idx]
        floats, exact = _float_rows(part, shape)
        enc = _encode_rows(floats, number_labels(part[0]), None, exact, _shape_seed(shape))
        keys[idx] = enc.keys
        for label, col in enc.numeric.items():
            column(label)[idx] = col
    for i in others:
        keys[i] = stable_key(values[i])
        for label, x in _numbers(values[i], "y"):
            column(label)[i] = x
    return Encoded(n, keys, columns, raw)


def stable_key(v: Any) -> int:
    """A 64-bit key of a value's canonical text: the same in every process (unlike hash())."""
    digest = hashlib.blake2b(canonical(v).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def canonical(v: Any) -> str:
    v = _plain(v)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return repr(v)
    if isinstance(v, (int, float)):
        x = _nearest(v)
        return repr(0.0 if x == 0 else x)  # one text per number: 1 and 1.0 are one output
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {canonical(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(canonical(x) for x in v) + ")"
    return repr(v)


def number_labels(v: Any) -> list[str]:
    """The coordinate labels of output v's numbers, in order."""
    return [label for label, _ in _numbers(v, "y")]


def _numbers(v: Any, label: str) -> Iterator[tuple[str, float]]:
    """(coordinate label, value) for every number inside v; booleans count as 0/1, and exact
    rationals (a program's post-processed releases) as their nearest float."""
    v = _plain(v)
    if isinstance(v, bool):
        yield label, float(v)
    elif isinstance(v, (int, float, Fraction)):
        yield label, _nearest(v)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _numbers(x, f"{label}.{k}")
    elif isinstance(v, (tuple, list)):
        for j, x in enumerate(v):
            yield from _numbers(x, f"{label}[{j}]")


def _nearest(x: Any) -> float:
    """A number's nearest float, an infinity beyond the largest (float() raises there)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


def output_text(v: Any) -> str:
    """A released value in fuzzpy's notation (short): true/false, numbers, "text", (a, b)."""
    v = _plain(v)
    if isinstance(v, np.ndarray):
        items = [output_text(x) for x in v.tolist()]
        text = items[0] if len(items) == 1 else "(" + ", ".join(items) + ")"
    elif isinstance(v, bool):
        text = "true" if v else "false"
    elif isinstance(v, float):
        text = repr(v) if math.isfinite(v) else str(v)
    elif isinstance(v, str):
        text = '"' + v.replace('"', '\\"') + '"'
    elif isinstance(v, dict):
        text = "{" + ", ".join(f'"{k}": {output_text(x)}' for k, x in v.items()) + "}"
    elif isinstance(v, (tuple, list)):
        text = "(" + ", ".join(output_text(x) for x in v) + ")"
    else:
        text = repr(v)
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 3] + "..."
