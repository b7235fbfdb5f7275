"""Solo (Abuah, Darais, Near, OOPSLA 2022): the Laplace mechanism calibrated to the proven
sensitivity (eps = 2 on x + x costs 2), sequential releases add (2 + 3 = 5), a CDF over 100
buckets at eps = 1 costs 100, and MWEM costs 2 eps per round."""

from fractions import Fraction as F

import pytest
from conformance_cases import PROGRAMS, cases, plist, pnum
from conformance_support import assert_conforms, mechanisms

from fuzzpy.checking.program import check_file


@pytest.mark.parametrize("case", cases("Solo"), ids=lambda c: c.id)
def test_solo_program(case):
    assert_conforms(case)


def test_laplace_on_x_plus_x_is_calibrated_to_sensitivity_2():
    r = check_file(PROGRAMS / "solo.fz", entry="double_release")
    (m,) = [m for m in r.mechanisms if m.function == "double_release"]
    assert (m.sensitivity, m.epsilon, m.scale) == (2, 2, 1)
    assert [(i.name, i.epsilon) for i in r.inputs] == [("x", 2)]


@pytest.mark.parametrize("n, eps", [(100, F(1)), (10, F(1, 10)), (37, F(1, 2))])
def test_cdf_over_n_buckets_costs_n_eps(n, eps):
    r = check_file(PROGRAMS / "solo.fz", params={"bounds": plist(range(1, n + 1)), "cdf_eps": pnum(eps)})
    assert r.epsilon == n * eps


def test_mwem_round_is_an_exponential_choice_and_a_laplace_count():
    r = check_file(PROGRAMS / "solo_mwem.fz", params={"eps": "1 / 4", "rounds": "2"})
    assert r.epsilon == 2 * 2 * F(1, 4)
    assert mechanisms(r) == [("exponential", 1, F(1, 4), 8), ("laplace", 1, F(1, 4), 4)]
