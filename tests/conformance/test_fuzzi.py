"""Fuzzi (Zhang, Roth, Haeberlen, Pierce, Roth, ICFP 2019): x is 1-sensitive, y 2-sensitive,
and z = 2x + y is 4-sensitive; Laplace on z is calibrated to 4."""

from fractions import Fraction as F

import pytest
from conformance_cases import PROGRAMS, cases
from conformance_support import assert_conforms, mechanisms

from fuzzpy.checking.program import check_file


@pytest.mark.parametrize("case", cases("Fuzzi"), ids=lambda c: c.id)
def test_fuzzi_arithmetic(case):
    assert_conforms(case)


@pytest.mark.parametrize("eps", [F(1, 2), F(1, 10)])
def test_releasing_z_calibrates_the_noise_to_4(eps):
    r = check_file(PROGRAMS / "fuzzi.fz", params={"eps": f"{eps.numerator} / {eps.denominator}"})
    assert r.epsilon == eps
    assert mechanisms(r) == [("laplace", 4, eps, 4 / eps)]
