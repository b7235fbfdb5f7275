"""DFuzz (Gaboardi, Haeberlen, Hsu, Narayan, Pierce, POPL 2013), examples/dfuzz: the cumulative
histogram (n eps), the interval histogram by splits (eps: DFuzz annotates i eps, fuzzpy proves
the true loss), k-means (3 i eps) and IDC (2 i eps), each at several parameter values."""

from fractions import Fraction as F

import pytest
from conformance_cases import PROGRAMS, cases, plist, pnum
from conformance_support import assert_conforms, mechanisms

from fuzzpy.checking.program import check_file, check_source


@pytest.mark.parametrize("case", cases("DFuzz"), ids=lambda c: c.id)
def test_dfuzz_program_checks_at_its_published_bound(case):
    assert_conforms(case)


@pytest.mark.parametrize("n", [1, 2, 8, 30])
def test_interval_histogram_is_eps_where_dfuzz_says_n_eps(n):
    params = {"eps": "1 / 4", "buckets": plist(range(1, n + 1))}
    r = check_file(PROGRAMS / "dfuzz_cdf.fz", params=params)
    assert r.epsilon == F(1, 4)
    assert mechanisms(r) == [("laplace", 1, F(1, 4), 4)]
    cumulative = check_file(PROGRAMS / "dfuzz_histogram.fz", params=params)
    assert cumulative.epsilon == n * F(1, 4)  # the same counts on the whole bag: n releases


def test_interval_histogram_equals_the_stdlib_interval_counts():
    src = ('import "stdlib/stats.fz"\nfunction main (db : bag num) : fuzzy (list num) '
           '{ interval_counts (1 / 4) [10, 20, 30] db }')
    assert check_source(src, "t.fz").epsilon == F(1, 4)


def test_kmeans_calibrates_counts_and_coordinate_sums():
    r = check_file(PROGRAMS / "dfuzz_kmeans.fz", params={"eps": pnum(F(1, 5)), "iters": "2"})
    assert r.epsilon == 3 * 2 * F(1, 5)
    assert mechanisms(r) == [("laplace", 1, F(1, 5), 5), ("laplace", 100, F(1, 5), 500)]


def test_idc_rounds_are_an_exponential_choice_and_a_laplace_measurement():
    r = check_file(PROGRAMS / "dfuzz_idc.fz", params={"iters": "4"})
    assert r.epsilon == 2 * 4 * F(1, 10)
    assert mechanisms(r) == [("exponential", 1, F(1, 10), 20), ("laplace", 1, F(1, 10), 10)]


def test_idc_with_zero_rounds_releases_nothing():
    r = check_file(PROGRAMS / "dfuzz_idc.fz", params={"iters": "0"})
    assert r.epsilon == 0
