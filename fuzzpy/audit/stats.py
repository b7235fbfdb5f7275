"""The statistics of an audit: Clopper-Pearson bounds, the epsilon lower bound, sample sizes.

An audit tests m (pair, event) candidates on fresh samples.  For each it bounds P1 = P[M(A) in E]
from below and P2 = P[M(B) in E] from above, each one-sided at level alpha/(2m) (Bonferroni over
the 2m intervals), so with probability at least 1 - alpha every interval holds at once, and then
epsilon >= ln(lower(P1) / upper(P2)) for every candidate: the largest is a valid lower bound.

An (epsilon, delta) claim is tested the same way at its delta: (epsilon, delta)-DP means
P1 <= e^epsilon P2 + delta for every event, so epsilon >= ln((P1 - delta) / P2), and with the
same intervals epsilon >= ln((lower(P1) - delta) / upper(P2)) (nothing is shown when
lower(P1) <= delta).  delta = 0 is exactly the pure case.

Clopper-Pearson intervals are exact (conservative) for any n and any p: no normal approximation,
so they stay valid for the tiny probabilities of tail events.  Counts may be fractional in
`cp_lower` / `cp_upper`: the planning functions use expected counts.
"""

from __future__ import annotations

import functools
import math
from typing import Union

import numpy as np
from scipy import stats as _st

ArrayLike = Union[float, np.ndarray]


def cp_lower(k: ArrayLike, n: ArrayLike, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bound: P[p >= bound] >= 1 - alpha for k successes in n."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    out = np.zeros(k.shape)
    pos = k > 0
    out[pos] = _st.beta.ppf(alpha, k[pos], n[pos] - k[pos] + 1)
    return out


def cp_upper(k: ArrayLike, n: ArrayLike, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound: P[p <= bound] >= 1 - alpha for k successes in n."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    out = np.ones(k.shape)
    below = k < n
    out[below] = _st.beta.ppf(1 - alpha, k[below] + 1, n[below] - k[below])
    return out


def per_bound_alpha(confidence: float, tests: int) -> float:
    """Each of the 2 * tests one-sided intervals gets (1 - confidence) / (2 * tests)."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    return (1 - confidence) / (2 * max(1, tests))


def _safe_log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def _minus_delta(p: np.ndarray, delta: float) -> np.ndarray:
    """p - delta, floored at 0 (ln of it is then -inf: nothing shown).  delta = 0 leaves p as is."""
    return p if delta == 0 else np.maximum(p - delta, 0.0)


def epsilon_lower_bound(k1: ArrayLike, n1: ArrayLike, k2: ArrayLike, n2: ArrayLike, alpha: float,
                        delta: float = 0.0) -> np.ndarray:
    """ln((cp_lower(k1) - delta) / cp_upper(k2)): -inf when cp_lower(k1) <= delta (k1 = 0 among
    them: nothing seen, nothing shown)."""
    _check_delta(delta)
    return _safe_log(_minus_delta(cp_lower(k1, n1, alpha), delta)) - _safe_log(cp_upper(k2, n2, alpha))


def point_estimate(k1: ArrayLike, n1: ArrayLike, k2: ArrayLike, n2: ArrayLike, delta: float = 0.0) -> np.ndarray:
    """ln((p1_hat - delta) / p2_hat), inf when k2 = 0 and p1_hat > delta (for display only, never
    for the verdict)."""
    p1 = _minus_delta(np.asarray(k1, dtype=float) / np.asarray(n1, dtype=float), delta)
    p2 = np.asarray(k2, dtype=float) / np.asarray(n2, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p1 > 0, _safe_log(p1) - _safe_log(p2), -np.inf)


def _check_delta(delta: float) -> None:
    if not 0 <= delta < 1:
        raise ValueError("delta must be in [0, 1)")


# ---- planning: what a fresh sample of a given size can be expected to show ----------------------

def shrunk(k: ArrayLike, n: ArrayLike, q: float) -> np.ndarray:
    """The q-quantile of the Jeffreys posterior Beta(k + 1/2, n - k + 1/2): an estimate of p that
    a small count cannot push to 0 or 1.  Used to rank events, never in a reported bound."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    if k.ndim and k.size and (n == n.flat[0]).all():  # counts of many events on one sample
        size = float(n.flat[0])
        whole = ((k >= 0) & (k <= size) & (k == np.floor(k))).all()
        if size.is_integer() and 0 <= size <= _QUANTILE_TABLE and whole:
            return _jeffreys_quantiles(int(size), float(q))[k.astype(np.int64)]
    return _st.beta.ppf(q, k + 0.5, n - k + 0.5)


# At most this many draws: each count's quantile from one table.  The screening and climbing
# stages rank many pairs on a few hundred draws each; a table for a larger sample (exploring a
# few pairs) would cost more quantiles than the events it serves.
_QUANTILE_TABLE = 1 << 12


@functools.lru_cache(maxsize=8)
def _jeffreys_quantiles(n: int, q: float) -> np.ndarray:
    """`shrunk` of every count 0..n on n draws (the same elementwise computation, once for all
    the pairs a stage ranks on samples of one size)."""
    ks = np.arange(n + 1, dtype=float)
    table = _st.beta.ppf(q, ks + 0.5, n - ks + 0.5)
    table.setflags(write=False)
    return table


def predicted_bound(k1: ArrayLike, k2: ArrayLike, n: int, fresh: int, alpha: float,
                    delta: float = 0.0) -> np.ndarray:
    """The bound a fresh sample of `fresh` per side is expected to give for an event seen k1 and
    k2 times in n exploration draws per side: p1 taken pessimistically low, p2 high (Jeffreys
    quartiles), then Clopper-Pearson at the expected counts.  A ranking score only."""
    p1 = shrunk(k1, n, 0.25)
    p2 = shrunk(k2, n, 0.75)
    return epsilon_lower_bound(p1 * fresh, fresh, p2 * fresh, fresh, alpha, delta)


def expected_bound(p1: float, p2: float, n: int, alpha: float, delta: float = 0.0) -> float:
    """The bound obtained when the counts come out exactly at their expectations."""
    return float(epsilon_lower_bound(p1 * n, n, p2 * n, n, alpha, delta))


def samples_needed(p2: float, claimed: float, excess: float, *, confidence: float = 0.95, tests: int = 1,
                   limit: int = 10**12, delta: float = 0.0) -> int:
    """Fresh samples per side for an event with P2 = p2 and (P1 - delta) / P2 = exp(claimed + excess)
    to give, at expected counts, a lower bound above `claimed` at `delta` (`limit` if even that is
    too few).  For an event impossible on the other side (P2 = 0) use `samples_needed_support`."""
    if p2 <= 0 or excess <= 0:
        raise ValueError("need p2 > 0 and excess > 0 (use samples_needed_support for p2 = 0)")
    p1 = min(1.0, p2 * math.exp(claimed + excess) + delta)  # capped, as a probability must be
    alpha = per_bound_alpha(confidence, tests)
    return _bisect_n(lambda n: expected_bound(p1, p2, n, alpha, delta) > claimed, limit)


def samples_needed_support(p1: float, claimed: float, *, confidence: float = 0.95, tests: int = 1,
                           limit: int = 10**12) -> int:
    """Fresh samples per side when the event is impossible on the other side (P2 = 0)."""
    if not 0 < p1 <= 1:
        raise ValueError("need 0 < p1 <= 1")
    alpha = per_bound_alpha(confidence, tests)
    return _bisect_n(lambda n: expected_bound(p1, 0.0, n, alpha) > claimed, limit)


def _bisect_n(ok, limit: int) -> int:
    """The least n in [1, limit] with ok(n) (ok is monotone in n), or `limit`."""
    hi = 1
    while not ok(hi):
        if hi >= limit:
            return limit
        hi = min(limit, hi * 2)
    lo = hi // 2  # ok(lo) is false (or lo = 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
