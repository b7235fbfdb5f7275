"""ProvenLoss, refusals, monotonicity and the ledger's caps."""

import json
import math
import subprocess
import sys
from fractions import Fraction as F

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzpy.accounting import EpsilonCap, ProvenLoss, RhoCap, compose, epsilon_at_delta, fits, rho_of, spent

G1 = ProvenLoss.gaussian_releases(1, 1, grid_sigma=4096)


@pytest.mark.parametrize("delta,message", [(0, "delta must be > 0"), (0.0, "delta must be > 0"),
                                           (-1e-5, "delta must be > 0"), (1, "delta must be < 1"),
                                           (F(3, 2), "delta must be < 1"),
                                           (math.nan, "finite"), (math.inf, "finite")])
def test_bad_delta_is_a_clear_value_error(delta, message):
    with pytest.raises(ValueError, match=message):
        epsilon_at_delta(G1, delta)


def test_delta_zero_with_a_gaussian_release_spends_infinity_under_a_pure_cap():
    assert spent([G1], EpsilonCap(F(10))) == math.inf
    assert not fits([G1], EpsilonCap(F(10)))
    assert spent([ProvenLoss.laplace_releases(F(1, 2), 3)], EpsilonCap(F(2))) == F(3, 2)


def test_pure_loss_returns_its_epsilon_when_nothing_is_better():
    conv = epsilon_at_delta(ProvenLoss.laplace_releases(F(1, 2)), F(1, 10**9))
    assert conv.epsilon <= F(1, 2)
    assert ProvenLoss.laplace_releases(F(1, 2)).is_pure() and not G1.is_pure()


def test_unknown_grid_sigma_uses_zcdp_only():
    loss = ProvenLoss.gaussian_releases(1, 1)  # grid sigma not stated
    conv = epsilon_at_delta(loss, F(1, 10**5))
    assert conv.method.startswith("zCDP") and 4.72 < conv.epsilon < 4.74


def test_infinite_epsilon():
    loss = ProvenLoss(epsilon=math.inf, pure_rho=F(1, 8))
    conv = epsilon_at_delta(loss, F(1, 10**5))
    assert conv.method.startswith("zCDP") and conv.epsilon < 3
    assert (loss + G1).epsilon == math.inf


def test_validation_refuses_inconsistent_losses():
    with pytest.raises(ValueError, match="pure_rho"):
        ProvenLoss(epsilon=F(1), pure_rho=F(1))
    with pytest.raises(ValueError, match="inventory exceeds"):
        ProvenLoss(epsilon=F(1), pure_rho=F(1, 2), laplace=((F(1, 2), 3),))
    with pytest.raises(ValueError, match=">= 0"):
        ProvenLoss(gauss_rho=F(-1))
    with pytest.raises(TypeError):
        ProvenLoss(epsilon=True)


def test_add_sums_and_merges():
    a = ProvenLoss.laplace_releases(F(1, 10), 3)
    b = ProvenLoss.laplace_releases(F(1, 10), 2) + G1
    total = a + b
    assert total.epsilon == F(1, 2) and total.pure_rho == F(5, 200) and total.gauss_rho == F(1, 2)
    assert total.laplace == ((F(1, 10), 5),) and total.gauss_grid_sigma == 4096
    unknown = ProvenLoss(epsilon=F(1), pure_rho=F(1, 2))  # inventory not known
    assert (total + unknown).laplace is None
    assert (total + ProvenLoss.gaussian_releases(1, 2)).gauss_grid_sigma is None
    assert rho_of(total) == F(1, 2) + F(5, 200)


def test_serialisation_round_trips_through_strict_json():
    loss = ProvenLoss.laplace_releases(F(1, 3), 4) + G1
    again = ProvenLoss.from_dict(json.loads(json.dumps(loss.to_dict())))
    assert again == loss
    inf = ProvenLoss(epsilon=math.inf)
    assert ProvenLoss.from_dict(json.loads(json.dumps(inf.to_dict()))).epsilon == math.inf


def test_caps_on_mixed_histories():
    history = [ProvenLoss.laplace_releases(F(1, 10), 50), G1]
    rho = spent(history, RhoCap(F(1)))
    assert rho == F(1, 2) + 50 * F(1, 200)
    assert fits(history, RhoCap(F(3, 4))) and not fits(history, RhoCap(F(1, 2)))
    eps = spent(history, EpsilonCap(F(8), F(1, 10**5)))
    # composed before converting: well below the pure 5 + the Gaussian's 4.38
    assert eps < 5 + 4.38
    assert eps == epsilon_at_delta(compose(history), F(1, 10**5)).epsilon
    assert fits(history, EpsilonCap(F(8), F(1, 10**5)))


rhos = st.fractions(min_value=F(1, 1000), max_value=F(20), max_denominator=1000)
deltas = st.sampled_from([F(1, 10**k) for k in range(3, 12)])


@settings(max_examples=25, deadline=None)
@given(r1=rhos, r2=rhos, delta=deltas)
def test_more_rho_gives_more_epsilon(r1, r2, delta):
    lo, hi = sorted((r1, r2))
    a = epsilon_at_delta(ProvenLoss(gauss_rho=lo, gauss_grid_sigma=2**14), delta).epsilon
    b = epsilon_at_delta(ProvenLoss(gauss_rho=hi, gauss_grid_sigma=2**14), delta).epsilon
    assert a <= b


@settings(max_examples=25, deadline=None)
@given(rho=rhos, k1=st.integers(3, 11), k2=st.integers(3, 11), n=st.integers(1, 40))
def test_smaller_delta_gives_more_epsilon(rho, k1, k2, n):
    loss = ProvenLoss(gauss_rho=rho, gauss_grid_sigma=2**14) + ProvenLoss.laplace_releases(F(1, 20), n)
    big, small = F(1, 10**min(k1, k2)), F(1, 10**max(k1, k2))
    assert epsilon_at_delta(loss, big).epsilon <= epsilon_at_delta(loss, small).epsilon


def test_the_package_imports_nothing_else_from_fuzzpy():
    code = ("import sys, fuzzpy.accounting; "
            "print([m for m in sys.modules if m.startswith('fuzzpy') "
            "and m not in ('fuzzpy',) and not m.startswith('fuzzpy.accounting')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_loss_with_no_release_converts_to_zero():
    from fractions import Fraction

    from fuzzpy.accounting import ProvenLoss, epsilon_at_delta

    assert epsilon_at_delta(ProvenLoss(), Fraction(1, 10**5)).epsilon == 0
