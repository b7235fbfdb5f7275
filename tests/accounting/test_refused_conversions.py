"""The accountant says which conversion gave the number and, when a tighter one could not be used,
which and why (Conversion.refused); the report's head and JSON show it."""

from __future__ import annotations

from fractions import Fraction as F

from fuzzpy.accounting import ProvenLoss, epsilon_at_delta

DELTA = F(1, 10**5)


def test_gdp_refused_when_the_grid_sigma_is_unknown():
    conv = epsilon_at_delta(ProvenLoss.gaussian_releases(1, 1), DELTA)
    assert conv.method.startswith("zCDP")
    assert conv.refused == (("analytic Gaussian (GDP)", "the grid sigma of the Gaussian releases is not known"),)


def test_gdp_refused_below_the_smallest_grid_sigma():
    conv = epsilon_at_delta(ProvenLoss.gaussian_releases(1, 1, grid_sigma=10), DELTA)
    (method, why), = conv.refused
    assert method == "analytic Gaussian (GDP)" and "10" in why and "below 64" in why


def test_optimal_composition_refused_when_the_pure_releases_are_not_counted():
    conv = epsilon_at_delta(ProvenLoss(F(10), F(1, 2)), DELTA)
    assert [m for m, _ in conv.refused] == ["optimal composition (KOV)"]


def test_nothing_refused_when_the_tight_conversion_is_used():
    conv = epsilon_at_delta(ProvenLoss.gaussian_releases(1, 1, grid_sigma=4096), DELTA)
    assert conv.method == "analytic Gaussian (GDP)" and conv.refused == ()


def test_the_report_names_the_refused_conversion_and_why():
    from check_and_run import check

    from fuzzpy.pipeline.budget import apply_budget
    from fuzzpy.render.report import _privacy_json, guarantee_head

    r = check("function main (db : bag T) (e : bag T) : fuzzy num "
              "{ sample a = noisy_max 0.1 [1, 2] (fun c -> count db + count e); sample g = gaussian 0.5 (count db); "
              "laplace 0.1 (count db) }")
    assert r.ok
    apply_budget(r, None, DELTA)
    head = guarantee_head(r)
    assert "optimal composition (KOV) refused: not every pure release could be counted" in head
    refused = _privacy_json(r)["conversion_refused"]
    assert refused[0]["method"] == "optimal composition (KOV)" and refused[0]["reason"]
