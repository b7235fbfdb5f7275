"""What the checker proves about one private input, in the units the accountant composes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ._num import as_fraction

Inventory = tuple[tuple[Fraction, int], ...]
# Releases on Poisson samples (rule Poisson subsampling): (kind, rate q, parameter, most releases),
# kind "laplace" (a scalar Laplace release of epsilon = parameter), "pure" (an epsilon-DP release)
# or "gauss" (Gaussian releases of rho = mu^2/2 = parameter).
SUBSAMPLED_KINDS = ("laplace", "pure", "gauss")
Subsampled = tuple[tuple[str, Fraction, Fraction, int], ...]


def _epsilon(x: Fraction | float | int) -> Fraction | float:
    if isinstance(x, float) and math.isinf(x) and x > 0:
        return math.inf
    return as_fraction(x, "epsilon")


def _inventory(entries: Any, name: str) -> Inventory | None:
    if entries is None:
        return None
    merged: dict[Fraction, int] = {}
    for eps, count in entries:
        e = as_fraction(eps, f"{name} epsilon")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"{name} counts must be whole numbers >= 0")
        if e > 0 and count > 0:
            merged[e] = merged.get(e, 0) + count
    return tuple(sorted(merged.items()))


def _subsampled(entries: Any) -> Subsampled | None:
    if entries is None:
        return None
    merged: dict[tuple[str, Fraction, Fraction], int] = {}
    for kind, q, param, count in entries:
        if kind not in SUBSAMPLED_KINDS:
            raise ValueError(f"subsampled kind must be one of {SUBSAMPLED_KINDS}")
        rate, value = as_fraction(q, "subsampled rate"), as_fraction(param, "subsampled parameter")
        if not 0 < rate < 1:
            raise ValueError("a subsampling rate must be in (0, 1)")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError("subsampled counts must be whole numbers >= 0")
        if value > 0 and count > 0:
            merged[(kind, rate, value)] = merged.get((kind, rate, value), 0) + count
    return tuple((k, r, v, c) for (k, r, v), c in sorted(merged.items()))


@dataclass(frozen=True)
class ProvenLoss:
    """A bound, over all executions, for ONE private input at neighbouring distance 1 (add or
    remove one row). Releases may be chosen from earlier released values (fully adaptive).

    - epsilon: pure-DP bound of all pure releases together (their epsilons summed; math.inf
      when unbounded).
    - pure_rho: a zCDP bound of the same pure releases (sum of eps_i^2/2, <= epsilon^2/2).
    - gauss_rho: sum of mu_i^2/2 over the Gaussian releases, mu_i = L2 sensitivity / sigma.
    - laplace: when known, every pure release as (epsilon of one release, maximum number of
      such releases), each being fuzzpy's scalar Laplace release whose input moves by at most
      its calibrated sensitivity between neighbours. None when not known.
    - pure: when known, every pure release as (epsilon, maximum number), whatever its mechanism
      (mechanism-agnostic: randomized-response domination). None when not known; derived from
      `laplace` when that is given.
    - gauss_grid_sigma: a lower bound on the grid sigma (sigma_g, in grid steps) of every
      discrete Gaussian release; the GDP conversion needs it (see docs/privacy-notions.md).
      None: unknown, the Gaussian part then converts through zCDP only.
    - delta: the total probability of the bad events of approximate releases (partition
      selection): releases that are, but for an event of that probability on the larger of two
      neighbouring tables, pure and counted in `epsilon` (docs/privacy-notions.md, "Partition
      selection"). 0 when there is none.
    - subsampled: releases made on Poisson samples (rule Poisson subsampling), as (kind, rate,
      parameter, maximum number): their plain cost (un-amplified) is also in `epsilon`,
      `pure_rho` and `gauss_rho`, but not in `laplace` and `pure`, which then list the other pure
      releases. None when not known (then `laplace` and `pure` are None too).
    - gauss_sampled_rho: the part of `gauss_rho` made on Poisson samples (the rest, gauss_rho -
      gauss_sampled_rho, is the other Gaussian releases'; the checker bounds the two apart).
    """

    epsilon: Fraction | float = Fraction(0)
    pure_rho: Fraction = Fraction(0)
    gauss_rho: Fraction = Fraction(0)
    laplace: Inventory | None = None
    pure: Inventory | None = None
    gauss_grid_sigma: Fraction | None = field(default=None)
    delta: Fraction = Fraction(0)
    subsampled: Subsampled | None = ()
    gauss_sampled_rho: Fraction = Fraction(0)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "epsilon", _epsilon(self.epsilon))
        set_(self, "pure_rho", as_fraction(self.pure_rho, "pure_rho"))
        set_(self, "gauss_rho", as_fraction(self.gauss_rho, "gauss_rho"))
        set_(self, "laplace", _inventory(self.laplace, "laplace"))
        pure = _inventory(self.pure, "pure")
        if pure is None and self.laplace is not None:
            pure = self.laplace
        set_(self, "pure", pure)
        if self.gauss_grid_sigma is not None:
            set_(self, "gauss_grid_sigma", as_fraction(self.gauss_grid_sigma, "gauss_grid_sigma"))
        set_(self, "delta", as_fraction(self.delta, "delta"))
        set_(self, "subsampled", _subsampled(self.subsampled))
        if self.subsampled is None:  # unknown releases on samples: the other inventories cannot be complete
            set_(self, "laplace", None)
            set_(self, "pure", None)
        set_(self, "gauss_sampled_rho", as_fraction(self.gauss_sampled_rho, "gauss_sampled_rho"))
        if not 0 <= self.gauss_sampled_rho <= self.gauss_rho:
            raise ValueError("gauss_sampled_rho must be in [0, gauss_rho]")
        if not 0 <= self.delta < 1:
            raise ValueError("delta must be in [0, 1)")
        if self.epsilon != math.inf and self.pure_rho > self.epsilon ** 2 / 2:
            raise ValueError("pure_rho must be at most epsilon^2/2")
        for name, inv in (("laplace", self.laplace), ("pure", self.pure)):
            if inv is not None and self.epsilon != math.inf \
                    and sum(e * c for e, c in inv) > self.epsilon:
                raise ValueError(f"the {name} inventory exceeds epsilon")
        if self.subsampled:
            sub_pure = sum(v * c for k, _, v, c in self.subsampled if k != "gauss")
            listed = sum(e * c for e, c in self.pure or ())
            if self.epsilon != math.inf and listed + sub_pure > self.epsilon:
                raise ValueError("the subsampled releases and the pure inventory exceed epsilon")

    # -- constructors ----------------------------------------------------------------------
    @staticmethod
    def laplace_releases(epsilon: Fraction | int | float, count: int = 1) -> "ProvenLoss":
        """`count` fuzzpy scalar Laplace releases of `epsilon` each."""
        e = as_fraction(epsilon, "epsilon")
        return ProvenLoss(e * count, e * e * count / 2, Fraction(0), ((e, count),))

    @staticmethod
    def gaussian_releases(sensitivity: Fraction | int | float, sigma: Fraction | int | float,
                          count: int = 1, grid_sigma: Fraction | int | None = None) -> "ProvenLoss":
        """`count` Gaussian releases with L2 sensitivity / sigma = mu each (rho = mu^2/2)."""
        s, g = as_fraction(sensitivity, "sensitivity"), as_fraction(sigma, "sigma")
        if g == 0:
            raise ValueError("sigma must be > 0")
        mu2 = (s / g) ** 2
        return ProvenLoss(gauss_rho=mu2 * count / 2, laplace=(), gauss_grid_sigma=grid_sigma)

    # -- composition -------------------------------------------------------------------------
    def _inv(self, name: str) -> Inventory | None:
        inv = getattr(self, name)
        if inv is None and self.epsilon == 0:
            return ()  # no pure release at all: the empty inventory is known
        return inv

    def add(self, other: "ProvenLoss") -> "ProvenLoss":
        """Sequential (adaptive) composition: everything adds, inventories merge."""
        def merge(name: str) -> Inventory | None:
            a, b = self._inv(name), other._inv(name)
            return None if a is None or b is None else a + b

        sig = [x.gauss_grid_sigma for x in (self, other) if x.gauss_rho > 0]
        grid = None if not sig or any(s is None for s in sig) else min(sig)
        eps = math.inf if math.inf in (self.epsilon, other.epsilon) \
            else self.epsilon + other.epsilon
        delta = min(self.delta + other.delta, Fraction(1) - Fraction(1, 10**30))  # below 1: unusable anyway
        sub = None if self.subsampled is None or other.subsampled is None else self.subsampled + other.subsampled
        return ProvenLoss(eps, self.pure_rho + other.pure_rho, self.gauss_rho + other.gauss_rho,
                          merge("laplace"), merge("pure"), grid, delta, sub,
                          self.gauss_sampled_rho + other.gauss_sampled_rho)

    def __add__(self, other: "ProvenLoss") -> "ProvenLoss":
        return self.add(other)

    def is_pure(self) -> bool:
        """True when there is no Gaussian release and no partition selection (the guarantee is
        pure epsilon)."""
        return self.gauss_rho == 0 and self.delta == 0

    def without_delta(self) -> "ProvenLoss":
        """The same releases with their bad events taken out (what the accountant composes)."""
        return ProvenLoss(self.epsilon, self.pure_rho, self.gauss_rho, self.laplace, self.pure,
                          self.gauss_grid_sigma, Fraction(0), self.subsampled, self.gauss_sampled_rho)

    def unamplified(self) -> "ProvenLoss":
        """The same releases with every subsampled pure release counted as the release it makes on
        its sample (its plain cost, an upper bound: rule Poisson subsampling) in the inventories,
        and no subsampled list: what every conversion that knows nothing of subsampling composes."""
        if not self.subsampled:
            return self
        lap = [(v, c) for k, _, v, c in self.subsampled if k == "laplace"]
        pure = [(v, c) for k, _, v, c in self.subsampled if k != "gauss"]
        others = any(k == "pure" for k, *_ in self.subsampled)
        return ProvenLoss(self.epsilon, self.pure_rho, self.gauss_rho,
                          None if self.laplace is None or others else self.laplace + tuple(lap),
                          None if self.pure is None else self.pure + tuple(pure),
                          self.gauss_grid_sigma, self.delta)

    # -- serialisation for the ledger --------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, exact (fractions as "p/q" strings)."""
        def inv(x: Inventory | None) -> list[list[Any]] | None:
            return None if x is None else [[str(e), c] for e, c in x]
        out = {"epsilon": "inf" if self.epsilon == math.inf else str(self.epsilon),
               "pure_rho": str(self.pure_rho), "gauss_rho": str(self.gauss_rho),
               "laplace": inv(self.laplace), "pure": inv(self.pure),
               "gauss_grid_sigma": None if self.gauss_grid_sigma is None
               else str(self.gauss_grid_sigma)}
        if self.delta:  # only then: a record without partition selection is as it always was
            out["delta"] = str(self.delta)
        if self.subsampled != ():  # likewise for releases on Poisson samples
            out["subsampled"] = None if self.subsampled is None else \
                [[k, str(q), str(v), c] for k, q, v, c in self.subsampled]
            out["gauss_sampled_rho"] = str(self.gauss_sampled_rho)
        return out

    @staticmethod
    def from_dict(data: dict[str, Any]) -> "ProvenLoss":
        def inv(x: Any) -> Inventory | None:
            return None if x is None else tuple((Fraction(e), int(c)) for e, c in x)
        eps = math.inf if data["epsilon"] == "inf" else Fraction(data["epsilon"])
        grid = data.get("gauss_grid_sigma")
        sub = data.get("subsampled", [])
        return ProvenLoss(eps, Fraction(data["pure_rho"]), Fraction(data["gauss_rho"]),
                          inv(data.get("laplace")), inv(data.get("pure")),
                          None if grid is None else Fraction(grid), Fraction(data.get("delta", "0")),
                          None if sub is None else tuple((k, Fraction(q), Fraction(v), int(c)) for k, q, v, c in sub),
                          Fraction(data.get("gauss_sampled_rho", "0")))
