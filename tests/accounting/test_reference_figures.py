"""fuzzpy's accountant against dp-accounting's PLD accountant, figure by figure.

The references are constants: dp-accounting 0.6.0 (Google's differential privacy library,
`dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)`, which discretises the
privacy loss by "connecting the dots" and is tight up to that discretisation), run at delta = 1e-5
on continuous Gaussian noise. It is not a dependency of fuzzpy (it pins an old `attrs`); the
figures were computed once, in a separate virtual environment, with

    acc = pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(sigma), count))
    acc.get_epsilon(1e-5)

fuzzpy releases a discrete Gaussian, whose certified bound (docs/privacy-notions.md, Theorem DG
and the scaled pair) must be within 1% above these figures at any number of releases, and never
below them by more than dp-accounting's own rounding (1e-6 relative)."""

from fractions import Fraction as F

import pytest

from fuzzpy.accounting import ProvenLoss, epsilon_at_delta
from fuzzpy.runtime.noise import grid_sigma_lower

DELTA = F(1, 10**5)

# (releases of sensitivity 1 with sigma 1, dp-accounting 0.6.0's epsilon at 1e-5)
PLAIN_GAUSSIAN_SIGMA_1 = [
    (1, 4.37717810002493),
    (5, 11.480022811714345),
    (7, 14.191229930246307),
    (8, 15.456155825694436),
    (10, 17.85658683146691),
    (100, 91.81728962407377),
    (1000, 633.9298513669117),
]


@pytest.mark.parametrize("count,reference", PLAIN_GAUSSIAN_SIGMA_1, ids=[str(c) for c, _ in PLAIN_GAUSSIAN_SIGMA_1])
def test_gaussian_compositions_within_one_percent_of_pld_at_any_count(count, reference):
    """Each release: sensitivity 1, rho 1/2 (sigma 1), on the grid the runtime plans for it."""
    grid = grid_sigma_lower([(F(1), F(1, 2), 1)])
    loss = ProvenLoss.gaussian_releases(1, 1, count, grid_sigma=grid)
    conv = epsilon_at_delta(loss, DELTA)
    assert conv.method == "analytic Gaussian (GDP)"
    assert reference * (1 - 1e-6) <= conv.epsilon <= reference * 1.01


def test_the_same_budget_in_many_noisier_releases_gives_the_same_epsilon():
    """1,000 releases of sigma sqrt(1000) are one release of sigma 1: the scaled pair depends on
    the budget only, and its slack shrinks with a larger grid sigma."""
    one = epsilon_at_delta(ProvenLoss.gaussian_releases(1, 1, 1, grid_sigma=4097), DELTA).epsilon
    grid = grid_sigma_lower([(F(1), F(1, 2000), 1)])
    many = epsilon_at_delta(ProvenLoss.gaussian_releases(1, F(1000) ** F(1, 2), 1000, grid_sigma=grid), DELTA)
    assert abs(many.epsilon - one) <= one * F(1, 10**5)
