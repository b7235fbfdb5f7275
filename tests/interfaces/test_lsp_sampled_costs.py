"""The language server's cost of a call shows the releases on Poisson samples the way `fuzzpy
check` counts them (rule Poisson subsampling): the Gaussian rho on samples (channel gs) within
the rho, and the pure releases on samples (channels LS:kind:rate:epsilon) with their counts."""

from __future__ import annotations

from fractions import Fraction as F

from fuzzpy.interfaces.lsp.analysis import render_call_cost
from fuzzpy.typesystem.quadratic import SAMPLED_GAUSS, shadow, subsampled_channel
from fuzzpy.typesystem.sens import INF
from fuzzpy.typesystem.types import Fuzzy, Num


class _Names:
    def describe(self, sym: str) -> str:
        return sym


def _cost(dist: dict) -> str:
    return render_call_cost(_Names(), Fuzzy(Num()), dist)


def test_a_gaussian_release_on_a_sample_counts_in_the_rho_and_is_named_amplified():
    dist = {"db": INF, shadow("db", "g"): F(1, 100), shadow("db", SAMPLED_GAUSS): F(27, 5)}
    assert _cost(dist) == ("it charges rho (zCDP) 5.41 on db (of which 5.4 on db on Poisson samples, "
                           "amplified)")


def test_only_gaussian_releases_on_samples_still_show_their_rho():
    assert _cost({"db": INF, shadow("db", SAMPLED_GAUSS): F(9, 100)}) == \
        "it charges rho (zCDP) 0.09 on db (of which 0.09 on db on Poisson samples, amplified)"


def test_laplace_releases_on_samples_are_listed_with_their_count_rate_and_epsilon():
    dist = {"db": F(3), shadow("db", subsampled_channel("laplace", F(1, 100), F(1))): F(3)}
    assert _cost(dist) == ("it charges epsilon 3 on db and 3 Laplace releases of epsilon 1 on Poisson "
                           "samples of rate 0.01 of db (amplified)")


def test_an_unknown_count_of_releases_on_samples_is_said_so():
    dist = {"db": INF, shadow("db", subsampled_channel("pure", F(1, 20), F(1, 2))): INF}
    assert "an unknown number of pure releases of epsilon 0.5 on Poisson samples of rate 0.05 of db" in _cost(dist)


def test_a_gaussian_release_not_on_a_sample_is_rendered_as_before():
    assert _cost({"db": INF, shadow("db", "g"): F(1, 20)}) == "it charges rho (zCDP) 0.05 on db"
