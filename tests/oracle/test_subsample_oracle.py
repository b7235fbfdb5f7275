"""The soundness oracle's `subsample` theme (tests/oracle/subsample_theme.py): programs that
release on fresh Poisson samples, whose proven epsilon at delta is compared with the true
hockey-stick divergence of their exact output laws on a table and on the table plus one row."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from fuzzpy.accounting import convert, subsampled

from .choices import RandomChooser
from .subsample_theme import DELTA, Release, SubsampleProgram, check_against_laws, generate, observed_delta

# neighbouring tables (their rows' column n; the neighbour adds a row with n = 5): the empty
# table, where the amplified pair the accountant uses is exact, and small ones
TABLES = [[], [5], [2, 5, 0]]
# seeds whose programs check and compare in about a second (a sequence and a recursion of
# Laplace and Gaussian counts and sums on samples); the slow test runs many more
QUICK_SEEDS = [2, 3, 4, 7]

PROGRAM = """schema P { age : num[0, 100], n : int[0, 5] }
function steps (b : bag P) (t : int) : fuzzy num {
  if t <= 0 then return 0
  else
    sample g = subsample 0.05 (fun s -> laplace 1 (count s)) b;
    sample r = steps b (t - 1);
    return (g + r)
}
function main (db : bag P) {
  sample a = steps db 4;
  sample c = subsample 0.1 (fun s -> gaussian 0.5 (count s)) db;
  return (a, c)
}
"""


@pytest.mark.parametrize("seed", QUICK_SEEDS)
def test_releases_on_poisson_samples_stay_within_their_proven_loss(seed):
    program = generate(RandomChooser(seed))
    assert any(rel.rate is not None for rel in program.releases)
    assert check_against_laws(program, TABLES) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 140))
def test_many_programs_of_the_subsample_theme_stay_within_their_proven_loss(seed):
    assert check_against_laws(generate(RandomChooser(seed)), TABLES) == []


def _handwritten() -> SubsampleProgram:
    return SubsampleProgram(PROGRAM, (Release("laplace", F(1), "count", F(1, 20), 4),
                                      Release("gaussian", F(1, 2), "count", F(1, 10))))


def test_the_oracle_is_sharp_on_the_empty_table():
    """On an empty table plus one row the amplified pairs are exact: the true divergence at the
    proven epsilon is within a few percent of the proven delta, so a looser accountant would show."""
    from fuzzpy.api import check

    eps = float(check(PROGRAM, delta=DELTA).epsilon)
    assert 0.9 * float(DELTA) <= observed_delta(_handwritten(), [], eps) <= float(DELTA)


def test_a_wrong_rate_in_the_accountant_is_caught(monkeypatch):
    """A seeded bug: the accountant amplifies by 0.8 q instead of q. The oracle reports it."""
    lattice, gauss = subsampled.subsampled_lattice_pld, subsampled.subsampled_gaussian_pld
    monkeypatch.setattr(subsampled, "subsampled_lattice_pld",
                        lambda pair, q, h, remove: lattice(pair, 0.8 * q, h, remove))
    monkeypatch.setattr(subsampled, "subsampled_gaussian_pld",
                        lambda q, *rest, **kw: gauss(0.8 * q, *rest, **kw))
    convert._subsampled_plds.cache_clear()
    try:
        found = check_against_laws(_handwritten(), TABLES)
    finally:
        convert._subsampled_plds.cache_clear()
    assert found and "on 0 rows plus one" in found[0]
