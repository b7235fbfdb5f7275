"""Evaluators of the linear-algebra primitives (declared in fuzzpy/primitives/linalg.py).

`vouter` is exact on exact numbers and numpy-generic in row functions (floats or whole columns),
as the vector primitives are.  The others are post-processing of released values and compute in
floats: a released number is public, so a float's rounding reveals nothing (docs/runtime.md).
Non-finite inputs give NaN rather than an error.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...primitives.registry import NO_TABLE, PER_LANE, kernel
from ..numbers import as_float
from .vectors import _times


def _vouter(v: tuple) -> tuple:
    return tuple(_times(a, b) for a in v for b in v)


def _vsize(v: tuple) -> int:
    return len(v)


def _sqrt(x: Any) -> float:
    x = float(as_float(x))
    return math.sqrt(x) if x > 0 else (0.0 if x <= 0 else math.nan)


def _symmetric(m: tuple) -> np.ndarray:
    """The symmetric part (M + M^T)/2 of the square matrix given row by row."""
    side = math.isqrt(len(m))
    matrix = np.array([float(as_float(x)) for x in m], dtype=np.float64).reshape(side, side)
    return (matrix + matrix.T) / 2


def _min_eigenvalue(m: tuple) -> float:
    s = _symmetric(m)
    if not np.isfinite(s).all():
        return math.nan
    return float(np.linalg.eigvalsh(s)[0])


def _ridge_solve(lam: Any, m: tuple, v: tuple) -> tuple:
    s = _symmetric(m)
    rhs = np.array([float(as_float(x)) for x in v], dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # an infinite ridge term: NaN below
        a = s + float(as_float(lam)) * np.eye(len(rhs))
    if not (np.isfinite(a).all() and np.isfinite(rhs).all()):
        return tuple(math.nan for _ in v)
    try:
        theta = np.linalg.solve(a, rhs)
    except np.linalg.LinAlgError:  # singular: the least-squares solution of smallest norm
        theta = np.linalg.lstsq(a, rhs, rcond=None)[0]
    return tuple(float(t) for t in theta)


kernel("vouter", reference=_vouter, batched=PER_LANE, dask=NO_TABLE)
kernel("vsize", reference=_vsize, batched=PER_LANE, dask=NO_TABLE)
kernel("sqrt", reference=_sqrt, batched=PER_LANE, dask=NO_TABLE)
kernel("min_eigenvalue", reference=_min_eigenvalue, batched=PER_LANE, dask=NO_TABLE)
kernel("ridge_solve", reference=_ridge_solve, batched=PER_LANE, dask=NO_TABLE)
