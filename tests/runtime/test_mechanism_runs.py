"""Runtimes of the mechanisms, called through the registry with a fake RunContext: a seeded
RandomSource and the `info` the checker wrote into the IR of a checked program.  Statistical
checks use fixed seeds, so they are deterministic."""

import math
from dataclasses import fields, is_dataclass
from fractions import Fraction as F

import pytest
from conftest import check
from scipy import stats

from fuzzpy.primitives.mechanisms import Accuracy, selection_accuracy, svt_accuracy
from fuzzpy.primitives.registry import lookup
from fuzzpy.runtime import kernels  # noqa: F401 - registers the mechanisms' evaluators
from fuzzpy.runtime.noise import RandomSource
from fuzzpy.runtime.values import MechanismDistribution
from fuzzpy.typesystem import ir as I

T = 'schema T { x : num[0, 10], k : cat{"a", "b", "c"}, flag : bool }\n'


class FakeRun:
    """A RunContext: functions are Python callables; releases are recorded in a list."""

    def __init__(self, info: dict, seed: int = 0):
        self.info = info
        self.span = None
        self.rng = RandomSource.seeded(seed)
        self.releases: list[dict] = []

    def call(self, fn, *args):
        return fn(*args)

    def record_release(self, mechanism, value, epsilon, scale, accuracy, **extra):
        self.releases.append(dict(mechanism=mechanism, value=value, epsilon=epsilon, scale=scale,
                                  accuracy=accuracy, **extra))


def checked_info(body: str, ret: str, name: str) -> dict:
    r = check(T + f"function main (db : bag T) : fuzzy {ret} {{ {body} }}")
    assert r.ok, [d.message for d in r.diagnostics]
    found = []

    def walk(node):
        if isinstance(node, I.IPrim) and node.name == name:
            found.append(node.info)
        if is_dataclass(node) and not isinstance(node, I.Instance):
            for f in fields(node):
                walk(getattr(node, f.name))
        elif isinstance(node, (list, tuple)):
            for x in node:
                walk(x)

    walk(r.entry_instance.body)
    (info,) = found
    return info


def run(name: str, info: dict, *args, seed: int = 0):
    ctx = FakeRun(info, seed)
    dist = lookup(name).run(ctx, *args)
    assert isinstance(dist, MechanismDistribution)
    return ctx, dist


# ---- laplace ------------------------------------------------------------------------------------

def test_laplace_is_calibrated_from_the_checker_info_not_recomputed():
    info = checked_info("laplace 0.5 (sum (map (fun r -> clip 0 5 r.x) db))", "num", "laplace")
    assert (info["sensitivity"], info["epsilon"], info["scale"]) == (5, F(1, 2), 10)
    ctx, dist = run("laplace", info, F(1, 2), 100)
    values = [dist.sample(ctx) for _ in range(4000)]
    assert all(isinstance(v, float) for v in values)
    assert {r["scale"] for r in ctx.releases} == {10}          # S/eps, exactly, from info
    assert {r["epsilon"] for r in ctx.releases} == {F(1, 2)}
    assert len(ctx.releases) == 4000                            # one record per draw
    # Laplace(10) has mean 0 and variance 200: the sample mean is within 5 sd of 100.
    assert abs(sum(values) / len(values) - 100) < 5 * math.sqrt(200 / 4000)
    # Changing info changes the noise: the runtime reads it and nothing else.
    ctx2, dist2 = run("laplace", dict(info, sensitivity=F(1)), F(1, 2), 100)
    dist2.sample(ctx2)
    assert ctx2.releases[0]["scale"] == 2


def test_laplace_on_a_tensor_returns_a_tuple_with_a_joint_accuracy():
    info = checked_info("laplace 1 (count db, count (filter (fun r -> r.flag) db))", "(num, num)", "laplace")
    assert info["sensitivity"] == 2
    ctx, dist = run("laplace", info, 1, (10, 20))
    out = dist.sample(ctx)
    assert isinstance(out, tuple) and len(out) == 2
    acc = ctx.releases[0]["accuracy"]
    assert isinstance(acc, Accuracy) and acc.beta == F(1, 20)
    # per coordinate at beta/2 (union bound): about scale * ln(40), scale a hair above 2
    assert 2 * math.log(40) < acc.bound < 2.01 * math.log(40) + 1


def test_laplace_on_a_public_value_releases_it_unchanged():
    info = checked_info("laplace 1 5", "num", "laplace")
    ctx, dist = run("laplace", info, 1, 5)
    assert dist.sample(ctx) == 5.0 and ctx.releases[0]["epsilon"] == 0


def test_a_distribution_does_not_show_its_inputs():
    info = checked_info("laplace 1 (count db)", "num", "laplace")
    ctx, dist = run("laplace", info, 1, 123456789)
    assert "123456789" not in repr(dist) and "123456789" not in str(dist)


# ---- exponential mechanism -----------------------------------------------------------------------

COUNTS = {"a": 4, "b": 2, "c": 0}


def test_exponential_frequencies_match_the_exact_probabilities():
    info = checked_info('exponential 1 ["a", "b", "c"] (fun c -> count (filter (fun r -> r.k == c) db))',
                        "string", "exponential")
    assert (info["sensitivity"], info["epsilon"], info["scale"]) == (1, 1, 2)
    calls = []

    def score(c):
        calls.append(c)
        return COUNTS[c]

    ctx, dist = run("exponential", info, 1, ("a", "b", "c"), score, seed=7)
    assert calls == ["a", "b", "c"]  # each score evaluated once, at run time
    n = 6000
    draws = [dist.sample(ctx) for _ in range(n)]
    weights = [math.exp(COUNTS[c] / 2) for c in "abc"]  # exp(eps * q / (2S))
    expected = [n * w / sum(weights) for w in weights]
    observed = [draws.count(c) for c in "abc"]
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert {r["value"] for r in ctx.releases} <= {"a", "b", "c"}
    assert ctx.releases[0]["epsilon"] == 1 and ctx.releases[0]["scale"] == 2


def test_exponential_with_a_public_score_picks_the_best():
    info = checked_info("exponential 1 [1, 2, 3] (fun c -> 0 - c)", "num", "exponential")
    assert info["sensitivity"] == 0
    ctx, dist = run("exponential", info, 1, (F(1), F(2), F(3)), lambda c: -c)
    assert {dist.sample(ctx) for _ in range(50)} == {F(1)}


# ---- report noisy max ----------------------------------------------------------------------------

def test_noisy_max_picks_a_clear_winner_and_releases_only_the_candidate():
    info = checked_info('noisy_max 1 ["a", "b", "c"] (fun c -> count (filter (fun r -> r.k == c) db))',
                        "string", "noisy_max")
    scores = {"a": 0, "b": 1000, "c": 3}
    ctx, dist = run("noisy_max", info, 1, ("a", "b", "c"), scores.get, seed=3)
    # A loser wins only if its Exponential(2) noise beats a gap of >= 997: probability < 3 e^-498.
    assert [dist.sample(ctx) for _ in range(300)] == ["b"] * 300
    assert all(r["value"] == "b" for r in ctx.releases)
    assert all(set(r) == {"mechanism", "value", "epsilon", "scale", "accuracy", "sensitivity", "candidates"}
               for r in ctx.releases)  # no score, no noise (the candidates are the public list)
    assert all(r["candidates"] == ("a", "b", "c") for r in ctx.releases)


def test_noisy_max_close_scores_each_get_chosen():
    info = checked_info("noisy_max 1 [1, 2] (fun c -> count (filter (fun r -> r.x < c) db))", "num", "noisy_max")
    ctx, dist = run("noisy_max", info, 1, (1, 2), {1: 5, 2: 5}.get, seed=11)
    draws = [dist.sample(ctx) for _ in range(2000)]
    # Equal scores: a fair choice.
    assert stats.binomtest(draws.count(1), 2000, 0.5).pvalue > 1e-3


def test_selection_accuracy_is_scale_times_log_n_over_beta():
    assert float(selection_accuracy(F(4), 3)) == pytest.approx(4 * math.log(60), rel=1e-9)
    assert selection_accuracy(F(4), 3) >= 4 * F(math.log(60))


# ---- sparse vector -------------------------------------------------------------------------------

SVT = "above_threshold 1 {c} 500 [1, 2, 3, 4, 5, 6] (fun q -> count (filter (fun r -> r.x < q) db))"


def test_svt_answers_in_order_and_stops_at_the_cutoff():
    info = checked_info(SVT.format(c=2), "(list bool)", "above_threshold")
    assert (info["cutoff"], info["threshold"], info["scale"], info["query_scale"]) == (2, 500, 2, 8)
    values = {1: 0, 2: 0, 3: 1000, 4: 1000, 5: 1000, 6: 0}
    ctx, dist = run("above_threshold", info, 1, 2, 500, (1, 2, 3, 4, 5, 6), values.get, seed=5)
    for _ in range(50):
        assert dist.sample(ctx) == (False, False, True, True)  # margins of 500 vs noise scale 8


def test_svt_output_never_has_more_trues_than_the_cutoff():
    info = checked_info(SVT.format(c=3), "(list bool)", "above_threshold")
    ctx, dist = run("above_threshold", info, 1, 3, 500, tuple(range(1, 7)), lambda q: 500, seed=9)
    for _ in range(200):
        out = dist.sample(ctx)
        assert sum(out) <= 3 and len(out) <= 6
        assert sum(out) < 3 or out[-1] is True  # the list stops right after the c-th True
    assert ctx.releases[0]["cutoff"] == 3 and ctx.releases[0]["query_scale"] == 12


def test_svt_all_above_stops_after_exactly_cutoff_answers():
    info = checked_info(SVT.format(c=3), "(list bool)", "above_threshold")
    ctx, dist = run("above_threshold", info, 1, 3, 500, tuple(range(1, 7)), lambda q: 10**6, seed=1)
    assert dist.sample(ctx) == (True, True, True)


def test_svt_accuracy_bound():
    info = {"sensitivity": F(1), "epsilon": F(1), "cutoff": 2}
    alpha = svt_accuracy(info, 6)
    # 2 ln 40 + 8 ln 240 plus three grid steps of at most 1/4096
    assert float(alpha) == pytest.approx(2 * math.log(40) + 8 * math.log(240) + 3 / 4096, rel=1e-9)


# ---- randomized response -------------------------------------------------------------------------

def test_randomized_response_keeps_with_probability_e_eps_over_1_plus_e_eps():
    info = checked_info("randomized_response 1 (count db > 5)", "bool", "randomized_response")
    keep = math.e / (1 + math.e)
    for bit in (True, False):
        ctx, dist = run("randomized_response", info, 1, bit, seed=13)
        n = 5000
        kept = sum(dist.sample(ctx) == bit for _ in range(n))
        assert stats.binomtest(kept, n, keep).pvalue > 1e-3
    assert ctx.releases[0]["epsilon"] == 1
    acc = ctx.releases[0]["accuracy"]
    assert float(acc.bound) == pytest.approx(1 / (1 + math.e), rel=1e-9) and acc.bound >= 1 / (1 + F(math.e))
