"""The reference figures at delta = 1e-5 (dp-accounting 0.6.0's PLD accountant, tight up to its
discretisation): every conversion must meet them within 1% and never go below."""

from fractions import Fraction as F

import mpmath
import pytest

from fuzzpy.accounting import ProvenLoss, epsilon_at_delta, gdp_delta_upper, laplace_rdp, rdp_epsilon, zcdp_epsilon
from fuzzpy.accounting.convert import _gauss_part

DELTA = F(1, 10**5)
GRID = 4096  # grid sigma of a sampler with 2**m >= 4096 * mu

CASES = [
    ("one Gaussian, sensitivity 1, sigma 1", ProvenLoss.gaussian_releases(1, 1, grid_sigma=GRID),
     4.377, 4.73),
    ("100 Gaussians, sigma 4", ProvenLoss.gaussian_releases(1, 4, 100, grid_sigma=4 * GRID),
     13.206712, 14.13),  # dp-accounting 0.6.0: 13.206712241909576
    ("100 Laplace, epsilon 0.1", ProvenLoss.laplace_releases(F(1, 10), 100), 4.22, 4.53),
]


@pytest.mark.parametrize("name,loss,reference,rdp", CASES, ids=[c[0] for c in CASES])
def test_reference_met_within_one_percent_and_never_below(name, loss, reference, rdp):
    conv = epsilon_at_delta(loss, DELTA)
    assert isinstance(conv.epsilon, F)
    assert reference <= conv.epsilon <= reference * 1.01
    assert conv.epsilon < rdp  # better than the RDP conversion alone


def test_rdp_conversion_alone_gives_the_issue_figures():
    assert abs(float(zcdp_epsilon(F(1, 2), DELTA)) - 4.73) < 0.005
    assert abs(float(zcdp_epsilon(F(100, 32), DELTA)) - 14.13) < 0.005
    eps, _ = rdp_epsilon(laplace_rdp(F(1, 10), 100), DELTA)
    assert abs(float(eps) - 4.53) < 0.005


def test_rdp_conversion_is_the_minimum_over_alpha_up_to_the_rounding():
    """An independent minimisation: a fine grid of alphas in mpmath at 50 digits."""
    rho = F(1, 2)
    got = zcdp_epsilon(rho, DELTA)
    with mpmath.workdps(50):
        best = min(a * mpmath.mpf(0.5) + mpmath.log1p(-1 / a)
                   - (mpmath.log(mpmath.mpf(10) ** -5) + mpmath.log(a)) / (a - 1)
                   for a in (1 + mpmath.mpf(k) / 500 for k in range(1, 3000)))
    assert float(best) - 1e-5 <= float(got) <= float(best) + 1e-6


@pytest.mark.parametrize("name,loss,reference,rdp", CASES[:2], ids=[c[0] for c in CASES[:2]])
def test_gaussian_certificate_at_returned_epsilon(name, loss, reference, rdp):
    """At the returned epsilon, the scaled GDP delta recomputed at 60 digits is <= delta."""
    conv = epsilon_at_delta(loss, DELTA)
    part = _gauss_part(loss, DELTA)
    assert 0 < part.log_c < 1e-5
    with mpmath.workdps(60):
        m, e = mpmath.mpf(part.mu), mpmath.mpf(conv.epsilon.numerator) / conv.epsilon.denominator
        c = mpmath.exp(mpmath.mpf(part.log_c))

        def scaled(x):
            x = x - mpmath.mpf(part.log_c)
            return c * (mpmath.ncdf(-x / m + m / 2) - mpmath.exp(x) * mpmath.ncdf(-x / m - m / 2))
        assert scaled(e) <= mpmath.mpf(DELTA.numerator) / DELTA.denominator
        # and it is tight: a little below, the certified bound fails
        assert scaled(e - mpmath.mpf("1e-3")) > mpmath.mpf(DELTA.numerator) / DELTA.denominator
    assert gdp_delta_upper(F(part.mu), conv.epsilon) <= float(DELTA)
