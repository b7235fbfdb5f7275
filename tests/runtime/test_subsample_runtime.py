"""The evaluator of `subsample` (fuzzpy/runtime/kernels/sampling.py): one coin per row from the
run's RandomSource at each sampling (rule Poisson subsampling), the rate at most q, and the
release made on the sample alone."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pandas as pd
from scipy import stats

from fuzzpy import api
from fuzzpy.runtime.kernels.sampling import poisson_mask
from fuzzpy.runtime.noise import RandomSource

PROGRAM = """schema T { x : num[0, 1] }
function main (db : bag T) : fuzzy (num, num) {
  let d = subsample 0.25 (fun s -> laplace 10 (count s)) db;
  sample a = d;
  sample b = d;
  return (a, b)
}
"""


class CountingSource(RandomSource):
    """A seeded source that says how many bytes were drawn from it."""

    def __init__(self, seed: int):
        base = RandomSource.seeded(seed)
        self._gen, self._seed, self._numpy, self.drawn = base._gen, base._seed, None, 0

    def randbytes(self, n: int) -> bytes:
        self.drawn += n
        return super().randbytes(n)


def test_the_coins_have_the_rate_and_come_from_the_source_bytes():
    rng = CountingSource(3)
    mask = poisson_mask(rng, 200_000, F(1, 10))
    assert rng.drawn == 8 * 200_000 and rng._numpy is None  # numpy's generator is never made
    assert stats.binomtest(int(mask.sum()), 200_000, 0.1).pvalue > 1e-4


def test_the_rate_is_never_above_q():
    class AllBelow(RandomSource):  # words just below floor(q 2^64) and just at it
        def randbytes(self, n):
            edge = (2**64) // 3
            return np.array([edge - 1, edge], dtype="<u8").tobytes()[:n]
    keep = poisson_mask(AllBelow(), 2, F(1, 3))
    assert keep.tolist() == [True, False]


def test_each_sampling_draws_a_fresh_sample():
    frame = pd.DataFrame({"x": np.zeros(4000)})
    out = api.run(PROGRAM, frame, budget=100, delta=1e-5, seed=11)
    a, b = out.value
    # each is the size of a 25% sample (noise scale 1/10), and the two samples differ
    assert abs(a - 1000) < 150 and abs(b - 1000) < 150 and abs(a - b) > 0.5


def test_an_empty_table_gives_an_empty_sample():
    frame = pd.DataFrame({"x": np.zeros(0)})
    out = api.run(PROGRAM, frame, budget=100, delta=1e-5, seed=1, allow_empty=True)
    assert all(abs(v) < 5 for v in out.value)
