"""Broken mechanisms (they live only here, never in the product): the auditor must report a lower
bound ABOVE the claimed epsilon for each.  Fixed seeds make every test deterministic; sample sizes
are stated per test.

Except for the first, their outputs are snapped to a dyadic grid (2^-20), so both inputs have
the same support and the violation has to be found in the shape of the distribution, not in the
low bits of floats (the first test is about exactly those bits)."""

from __future__ import annotations

import numpy as np
import pytest

from fuzzpy.audit.auditor import audit_sampler
from fuzzpy.audit.events import CellEvent

pytestmark = pytest.mark.slow

EPS = 0.5


def snap(y: np.ndarray) -> np.ndarray:
    return np.round(y * 2.0**20) / 2.0**20


def naive_laplace(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """x + numpy.random.laplace(1/eps): not DP at all (Mironov 2012)."""
    return x + rng.laplace(0.0, 1 / EPS, n)


def noisy_max_value(q: tuple, n: int, rng: np.random.Generator) -> np.ndarray:
    """Report noisy max with Lap(2/eps) noise, returning the noisy maximum VALUE instead of the
    index: its left tail max_i(q_i + L_i) < t has probability ~ F(t)^k, so shifting every q_i
    by 1 changes it by exp(k * eps / 2), not exp(eps)."""
    q = np.asarray(q, dtype=float)
    noisy = q[None, :] + rng.laplace(0.0, 2 / EPS, (n, q.size))
    return snap(noisy.max(axis=1))


def histogram_wrong_scale(h: tuple, n: int, rng: np.random.Generator) -> np.ndarray:
    """A histogram with noise of scale eps instead of 1/eps: true epsilon 1/eps = 2 at eps = 0.5."""
    h = np.asarray(h, dtype=float)
    return snap(h[None, :] + rng.laplace(0.0, EPS, (n, h.size)))


def svt_without_query_noise(answers: tuple, n: int, rng: np.random.Generator) -> list:
    """AboveThreshold (cutoff 1, threshold 0.5) with threshold noise Lap(2/eps) but no noise on
    the queries: the output (false, true) needs 0 < T~ <= 1 for answers (0, 1, 0) and is impossible
    for (1, 0, 1): infinite privacy loss."""
    noisy_t = 0.5 + rng.laplace(0.0, 2 / EPS, n)
    out = []
    for t in noisy_t:
        row = []
        for a in answers:
            row.append(bool(a >= t))
            if row[-1]:
                break
        out.append(tuple(row))
    return out


def test_naive_float_laplace_is_caught_by_its_float_bits():
    # 5,000 fresh samples per side.  The true epsilon is infinite: x = 1 cannot produce the odd
    # multiples of 2^-54 in (0, 1/2) that x = 0 produces.
    r = audit_sampler(naive_laplace, (0.0, 1.0), EPS, samples=5_000, seed=1)
    assert r.violation and r.verdict == "violation found"
    assert r.lower_bound > 3.0  # far above the claim of 0.5
    w = r.best
    assert isinstance(w.event, CellEvent) and w.event.family == "lattice"
    assert w.k2 == 0 and w.k1 > 500  # seen on one side only, often


def test_noisy_max_returning_the_value():
    # 5 queries: true epsilon 5 * 0.5 / 2 = 1.25 in the left tail; 50,000 fresh samples per side.
    zeros, ones = (0,) * 5, (1,) * 5
    r = audit_sampler(noisy_max_value, (zeros, ones), EPS, samples=50_000, seed=2)
    assert r.violation
    assert 0.5 < r.lower_bound < 1.25  # a valid bound lies below the truth
    assert r.best.direction == 1  # an event likelier for the lower queries: the left tail


def test_histogram_with_noise_scale_eps_instead_of_one_over_eps():
    # 20,000 fresh samples per side; true epsilon 2.
    r = audit_sampler(histogram_wrong_scale, ((3, 1, 0), (4, 1, 0)), EPS, samples=20_000, seed=3)
    assert r.violation
    assert 1.0 < r.lower_bound < 2.0
    assert r.best.event.text.startswith("y[0]")  # the bin that changed


def test_svt_without_query_noise():
    # 20,000 fresh samples per side; the witness is an output possible under one input only.
    r = audit_sampler(svt_without_query_noise, ((0, 1, 0), (1, 0, 1)), EPS, samples=20_000, seed=4)
    assert r.violation
    assert r.lower_bound > 2.0
    w = r.best
    assert w.k2 == 0 and "(false, true)" in w.event.text
