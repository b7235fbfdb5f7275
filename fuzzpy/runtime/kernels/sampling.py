"""Evaluators of `subsample` (declared in fuzzpy/primitives/sampling.py).

The sample is drawn when the release is sampled, not when `subsample` is applied: a
distribution bound twice draws two independent samples, as the amplified pairs the checker
counts require (rule Poisson subsampling in docs/soundness.md).  Each row's coin is a 64-bit
word from the run's RandomSource (the operating system's generator), kept when it is below
floor(q * 2^64): a rate at most q, which only makes the release more private.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ...primitives.registry import PER_LANE, Refused, kernel
from ..values import Distribution, is_distribution, restrict

_WORD = 2**64


# rule Poisson subsampling: one fresh coin per row, from the OS generator
def poisson_mask(rng: Any, n: int, q: Fraction) -> np.ndarray:
    """n independent coins of rate floor(q 2^64) / 2^64 <= q, from the source's own bytes (never
    numpy's generator, never anything the data decides)."""
    words = np.frombuffer(rng.randbytes(8 * n), dtype="<u8")
    return words < np.uint64(Fraction(q * _WORD).__floor__())


class PoissonSampled(Distribution):
    """`subsample q f db`: f's release on a fresh Poisson sample of db, drawn at each sampling."""

    __slots__ = ("rate", "fn", "bag")

    def __init__(self, rate: Fraction, fn: Any, bag: Any):
        self.rate, self.fn, self.bag = rate, fn, bag

    def sample(self, ctx: Any) -> Any:
        keep = poisson_mask(ctx.rng, len(self.bag), self.rate)
        out = ctx.call(self.fn, restrict(self.bag, keep))
        return out.sample(ctx) if is_distribution(out) else out


def _subsample(ctx, q, f, db):
    return PoissonSampled(Fraction(q), f, db)


kernel("subsample", reference=_subsample, context=True, lazy_bags=True, batched=PER_LANE,
       dask=Refused("subsample draws one coin per row on the client; the Dask engine does not sample yet"))
