"""Evaluator of `exp` (declared in fuzzpy/primitives/library.py)."""

from __future__ import annotations

import numpy as np

from ...primitives.registry import NO_TABLE, PER_LANE, kernel


def exp(x):
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out = np.exp(np.asarray(x, dtype=np.float64))  # total: overflow gives inf, NaN stays NaN
    return float(out) if out.ndim == 0 else out


kernel("exp", reference=exp, batched=PER_LANE, dask=NO_TABLE)
