"""The (epsilon, delta) claim an audit tests: `claimed_epsilon` is the certified accountant's figure
(the one `fuzzpy check` states); `rdp_claim`, the RDP conversion alone, is checked against an
independent high-precision minimisation, never below it, and bounds the accountant's from above."""

from __future__ import annotations

from fractions import Fraction as F

import mpmath as mp
import pytest

from fuzzpy.audit.claims import claimed_epsilon, rdp_claim


def conversion(rho: F, delta: F) -> mp.mpf:
    """min over alpha > 1 of alpha rho + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha-1),
    at 40 digits: a fine grid in log(alpha - 1), then Newton on the derivative."""
    mp.mp.dps = 40
    r, d = mp.mpf(rho.numerator) / rho.denominator, mp.mpf(delta.numerator) / delta.denominator

    def f(u):
        a = 1 + mp.e**u
        return a * r + mp.log((a - 1) / a) - (mp.log(d) + mp.log(a)) / (a - 1)

    u0 = min(mp.linspace(-12, 30, 2001), key=f)
    u = mp.findroot(lambda v: mp.diff(f, v), u0)
    return min(f(u), f(u0))


CASES = [(F(1, 2), F(1, 10**5)), (F(25, 8), F(1, 10**5)), (F(1, 20), F(1, 10**5)), (F(1, 20), F(1, 10**6)),
         (F(1, 1000), F(1, 10**9)), (F(1000), F(1, 10**5)), (F(3, 7), F(1, 3))]


@pytest.mark.parametrize("rho, delta", CASES)
def test_never_below_the_conversion_and_within_1e_9_of_it(rho, delta):
    exact = conversion(rho, delta)
    got = rdp_claim(rho, 0, delta)
    # The accountant's zCDP candidate is the same conversion, rounded its own way (1e-9 grid).
    assert isinstance(got, F) and claimed_epsilon(rho, 0, delta) <= got * (1 + F(1, 10**6))
    assert mp.mpf(got.numerator) / got.denominator >= exact
    assert float(got) - float(exact) < 1e-9 * max(1.0, float(exact))


def test_reference_figures_of_the_rdp_conversion():
    # One Gaussian release, sensitivity 1, sigma 1 (rho 1/2), and 100 with sigma 4 (rho 100/32),
    # at delta 1e-5: the RDP conversion gives 4.73 and 14.13 (the accountant will do better).
    assert float(rdp_claim(F(1, 2), 0, F(1, 10**5))) == pytest.approx(4.7284, abs=1e-4)
    assert float(rdp_claim(F(100, 32), 0, F(1, 10**5))) == pytest.approx(14.1305, abs=1e-4)
    # The accountant, told the releases' grid sigma (at least 4096 steps, as fuzzpy plans them),
    # certifies the Gaussian conversion: within 1% of the continuous figures 4.377 and 13.21.
    assert 4.377 <= float(claimed_epsilon(F(1, 2), 0, F(1, 10**5), F(4096))) <= 4.377 * 1.01
    # 100 releases of sigma 4 each: mu_i = 1/4, so each grid sigma is at least 4 * 4096.
    assert 13.2067 <= float(claimed_epsilon(F(100, 32), 0, F(1, 10**5), F(4 * 4096))) <= 13.21 * 1.01


def test_pure_and_mixed_claims():
    assert claimed_epsilon(0, F(1, 2), F(1, 10**5)) == F(1, 2)          # pure: delta plays no part
    assert claimed_epsilon(0, F(1, 2), 0) == F(1, 2)
    g = rdp_claim(F(1, 20), 0, F(1, 10**5))
    # basic composition: pure epsilon + the Gaussian part's epsilon at the same delta ...
    assert rdp_claim(F(1, 20), F(1, 2), F(1, 10**5)) == F(1, 2) + g
    # ... unless converting rho + eps^2/2 (the pure part as zCDP) is smaller: many tiny pure releases.
    mixed = rdp_claim(F(1, 20), F(1, 10), F(1, 10**5))
    assert mixed == rdp_claim(F(1, 20) + F(1, 200), 0, F(1, 10**5)) < F(1, 10) + g
    # The accountant's claim for the same mixed program is at most the RDP one.
    assert claimed_epsilon(F(1, 20), F(1, 10), F(1, 10**5)) <= mixed * (1 + F(1, 10**6))


def test_monotone_in_rho_and_delta():
    d = F(1, 10**5)
    assert claimed_epsilon(F(1, 20), 0, d) < claimed_epsilon(F(1, 10), 0, d)
    assert claimed_epsilon(F(1, 20), 0, F(1, 10**6)) > claimed_epsilon(F(1, 20), 0, d)
    assert rdp_claim(F(1, 10**9), 0, F(1, 2)) == 0  # a negative conversion is reported as 0


@pytest.mark.parametrize("args", [(F(1, 2), 0, 0), (F(1, 2), 0, 1), (F(1, 2), 0, F(-1, 10)), (-1, 0, F(1, 10)),
                                  (F(1, 2), -1, F(1, 10))])
def test_refusals(args):
    with pytest.raises(ValueError):
        claimed_epsilon(*args)
