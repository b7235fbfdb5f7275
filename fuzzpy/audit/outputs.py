"""Mechanism outputs as arrays that events can be evaluated on, whole sample at a time.

A sampler returns n outputs: a numeric numpy array of shape (n,) or (n, k), or a list of
arbitrary released values (numbers, booleans, strings, tuples, lists, partitions as dicts).
`encode` turns either into an `Encoded` sample:

* `keys`: one int64 per output identifying the whole output exactly (a numeric row's bits, or
  a stable hash of the value's canonical text), for cell events on discrete outputs;
* `numeric`: coordinate label -> float64 array (NaN where an output has no such coordinate),
  for threshold, interval and float-lattice events.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

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
    values = list(outputs)
    return _encode_values(values, keep_raw)


def concat(parts: Sequence[Encoded]) -> Encoded:
    """One sample from several chunks (coordinates missing in a chunk become NaN there)."""
    labels = list(dict.fromkeys(label for p in parts for label in p.numeric))
    numeric = {lab: np.concatenate([p.coordinate(lab) for p in parts]) for lab in labels}
    raws = [p.raw for p in parts]
    raw = None
    if all(r is not None for r in raws):
        raw = np.concatenate(raws) if all(isinstance(r, np.ndarray) for r in raws) else \
            [x for r in raws for x in r]
    return Encoded(sum(p.n for p in parts), np.concatenate([p.keys for p in parts]), numeric, raw)


# ---- numeric arrays --------------------------------------------------------------------------------

def _encode_array(a: np.ndarray, keep_raw: bool) -> Encoded:
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError("a sampler's numeric output must have shape (n,) or (n, k)")
    f = np.ascontiguousarray(a, dtype=np.float64)
    f = np.where(f == 0.0, 0.0, f)  # -0.0 and 0.0 are one output
    bits = f.view(np.int64)
    keys = bits[:, 0].copy()
    for j in range(1, bits.shape[1]):  # mix the columns: distinct rows get distinct keys w.h.p.
        keys = keys * np.int64(0x100000001B3) ^ bits[:, j]
    names = ["y"] if f.shape[1] == 1 else [f"y[{j}]" for j in range(f.shape[1])]
    numeric = {name: f[:, j] for j, name in enumerate(names)}
    return Encoded(f.shape[0], keys, numeric, a if keep_raw else None)


# ---- released values ---------------------------------------------------------------------------

def _encode_values(values: list[Any], keep_raw: bool) -> Encoded:
    n = len(values)
    keys = np.empty(n, dtype=np.int64)
    columns: dict[str, np.ndarray] = {}
    for i, v in enumerate(values):
        keys[i] = stable_key(v)
        for label, x in _numbers(v, "y"):
            col = columns.get(label)
            if col is None:
                col = columns[label] = np.full(n, np.nan)
            col[i] = x
    return Encoded(n, keys, columns, values if keep_raw else None)


def stable_key(v: Any) -> int:
    """A 64-bit key of a value's canonical text: the same in every process (unlike hash())."""
    digest = hashlib.blake2b(canonical(v).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def canonical(v: Any) -> str:
    v = _plain(v)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return repr(v)
    if isinstance(v, (int, float)):
        x = float(v)
        return repr(0.0 if x == 0 else x)  # one text per number: 1 and 1.0 are one output
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {canonical(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(canonical(x) for x in v) + ")"
    return repr(v)


def _numbers(v: Any, label: str) -> Iterator[tuple[str, float]]:
    """(coordinate label, value) for every number inside v; booleans count as 0/1."""
    v = _plain(v)
    if isinstance(v, (bool, int, float)):
        yield label, float(v)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _numbers(x, f"{label}.{k}")
    elif isinstance(v, (tuple, list)):
        for j, x in enumerate(v):
            yield from _numbers(x, f"{label}[{j}]")


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
