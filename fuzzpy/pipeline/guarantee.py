"""The privacy guarantee a checked program states (docs/privacy-notions.md).

The checker proves, per private input, the pure epsilon of the pure releases and the zCDP rho
of the Gaussian and of the pure releases (rule Rho).  The guarantee is:

* pure epsilon-DP when no release is Gaussian and no delta is asked for;
* otherwise rho-zCDP, and (epsilon, delta)-DP at the delta asked for (`--delta`, or the
  program's `# fuzzpy: delta` pragma), epsilon being the best certified conversion of
  fuzzpy.accounting.  A pure program given a delta also gets the conversion when it is smaller
  than its pure epsilon (many small releases).

Every number here is an upper bound; the accounting package certifies the conversions.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

from ..typesystem.sens import INF


@dataclass(frozen=True)
class Guarantee:
    pure_epsilon: Any          # the pure releases' epsilon, summed over inputs (Fraction or INF)
    rho: Any                   # zCDP rho of all releases (Fraction or INF)
    delta: Optional[Fraction]  # the delta asked for, if any
    epsilon: Any               # the stated epsilon (at `delta` when given); None: needs a delta
    method: str                # how `epsilon` was obtained
    is_pure: bool              # no Gaussian release
    refused: tuple = ()        # (tighter method, why it could not be used), from the accountant

    @property
    def stated_delta(self) -> Fraction:
        """The delta of the stated (epsilon, delta): 0 for a pure epsilon."""
        return Fraction(0) if self.method == "pure" else (self.delta or Fraction(0))


def guarantee(report: Any, delta: Optional[Fraction]) -> Guarantee:
    """The guarantee of a checked program (`report.ok`, with an entry point).  A program with
    partition selections has no zCDP bound (its rho is infinite) but a certified (epsilon, delta)
    at a delta above their delta (rule Partition selection)."""
    pure_eps, rho, is_pure = report.epsilon, report.rho, report.is_pure
    if is_pure and delta is None:
        return Guarantee(pure_eps, rho, None, pure_eps, "pure", True)
    if delta is None:
        return Guarantee(pure_eps, rho, None, None, "needs delta", False)
    if INF in (pure_eps, _releases_rho(report), report.approx_delta):
        return Guarantee(pure_eps, rho, delta, INF, "unbounded", is_pure)
    from ..accounting import epsilon_at_delta

    conv = epsilon_at_delta(proven_loss(report), delta)
    if is_pure and pure_eps <= conv.epsilon:
        return Guarantee(pure_eps, rho, delta, pure_eps, "pure", True)
    return Guarantee(pure_eps, rho, delta, conv.epsilon, conv.method, is_pure, conv.refused)


# rule Inventory: the inventory of pure releases goes to the accountant
def proven_loss(report: Any) -> Any:
    """The checker's figures for all private inputs together (a person may be in several tables:
    their losses compose), with the smallest grid sigma of its discrete Gaussian releases (the
    Gaussian conversion's slack depends on it: docs/privacy-notions.md)."""
    from ..accounting import ProvenLoss

    total = ProvenLoss(Fraction(0), Fraction(0), Fraction(0))
    for inp in report.inputs:
        # InputReport.rho_releases keeps the pure part at most epsilon^2/2 (an epsilon-DP part is
        # epsilon^2/2-zCDP whatever the z channel's Cauchy-Schwarz bound says).
        pure_rho = inp.rho_releases - inp.rho_gauss
        delta = getattr(inp, "delta", Fraction(0))
        sampled = getattr(inp, "subsampled", ())  # rule Poisson subsampling
        try:  # the accountant refuses an inventory worth more than epsilon: then it is not used
            loss = ProvenLoss(inp.epsilon, pure_rho, inp.rho_gauss, laplace=inp.laplace,
                              pure=inp.pure if inp.laplace is None else None, delta=delta, subsampled=sampled,
                              gauss_sampled_rho=getattr(inp, "rho_sampled", Fraction(0)))
        except ValueError:
            loss = ProvenLoss(inp.epsilon, pure_rho, inp.rho_gauss, delta=delta,
                              subsampled=None if sampled != () else ())  # unknown only if there were some
        total = total.add(loss)
    return ProvenLoss(total.epsilon, total.pure_rho, total.gauss_rho, total.laplace, total.pure,
                      gauss_grid_sigma=gaussian_sites(report), delta=total.delta, subsampled=total.subsampled,
                      gauss_sampled_rho=total.gauss_sampled_rho)


def _releases_rho(report: Any) -> Any:
    """The zCDP rho of the releases of every input, partition selections by their epsilon."""
    total: Any = Fraction(0)
    for inp in report.inputs:
        r = getattr(inp, "rho_releases", inp.rho)
        total = INF if INF in (r, total) else total + r
    return total


def gaussian_sites(report: Any) -> Optional[Fraction]:
    """A lower bound on the grid sigma of every Gaussian release the checker saw, from the same
    public numbers the runtime plans them with (runtime/noise.plan_gaussian); None if none."""
    from ..runtime.noise import grid_sigma_lower

    return grid_sigma_lower((m.sensitivity, m.extra["rho"], m.extra.get("dimension", 1))
                            for m in report.mechanisms if m.name == "gaussian")


__all__ = ["Guarantee", "guarantee", "proven_loss"]
