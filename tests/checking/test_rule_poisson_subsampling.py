"""Rule Poisson subsampling (docs/soundness.md): `subsample q f db` counts f's one pure release in
the channel of its amplified pair, the accountant composes it by the subsampled PLD, and every
function whose release cannot be amplified is refused with E0333 saying what is allowed."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from fuzzpy.accounting import ProvenLoss, epsilon_at_delta
from fuzzpy.pipeline.guarantee import guarantee, proven_loss
from tests.conftest import check

S = "schema T { age : num[17, 90] }\nparam q : num = 0.02;\n"
ONE = "function one (s : bag T) : fuzzy num { laplace 1 (count s) }\n"
DELTA = F(1, 10**5)


def ok(src: str):
    r = check(S + src)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    return r


def refused(src: str, code: str, words: str):
    r = check(S + src)
    found = [(d.code, d.message) for d in r.diagnostics]
    assert not r.ok and any(c == code and words in m for c, m in found), found
    return r


def test_one_laplace_release_on_a_sample_is_counted_apart_and_amplified():
    r = ok("function main (db : bag T) : fuzzy num { subsample q (fun s -> laplace 1 (count s)) db }")
    inp = r.inputs[0]
    assert inp.epsilon == 1 and inp.laplace == () and inp.subsampled == (("laplace", F(1, 50), F(1), 1),)
    g = guarantee(r, DELTA)
    direct = epsilon_at_delta(ProvenLoss(1, F(1, 2), 0, laplace=(), subsampled=(("laplace", F(1, 50), 1, 1),)), DELTA)
    assert g.method == "Poisson-subsampled PLD" and g.epsilon == direct.epsilon < F(1, 10)


def test_the_pure_epsilon_without_a_delta_is_the_plain_cost():
    r = ok("function main (db : bag T) : fuzzy num { subsample 0.5 (fun s -> laplace 1 (count s)) db }")
    g = guarantee(r, None)
    assert g.method == "pure" and g.epsilon == 1


def test_releases_on_samples_compose_with_plain_releases_exactly_as_the_accountant_says():
    r = ok(ONE + "function main (db : bag T) : fuzzy num { sample a = one db; sample b = subsample 0.1 one db; "
           "return a + b }")
    loss = proven_loss(r)
    assert loss.laplace == ((F(1), 1),) and loss.subsampled == (("laplace", F(1, 10), F(1), 1),)
    direct = epsilon_at_delta(ProvenLoss(2, 1, 0, laplace=((1, 1),), subsampled=(("laplace", F(1, 10), 1, 1),)),
                              DELTA)
    assert guarantee(r, DELTA).epsilon == direct.epsilon < F(12, 10)


def test_a_distribution_sampled_twice_counts_two_releases():
    r = ok("function main (db : bag T) : fuzzy num { let d = subsample 0.1 (fun s -> laplace 1 (count s)) db; "
           "sample a = d; sample b = d; return a + b }")
    assert r.inputs[0].subsampled == (("laplace", F(1, 10), F(1), 2),)


def test_another_pure_mechanism_is_amplified_through_randomized_response():
    r = ok("function main (db : bag T) : fuzzy num { subsample 0.1 (fun s -> noisy_max 1 [1, 2] "
           "(fun k -> count (filter (fun r -> r.age > k) s))) db }")
    assert r.inputs[0].subsampled == (("pure", F(1, 10), F(1), 1),)
    assert guarantee(r, DELTA).method == "Poisson-subsampled PLD"


def test_a_table_moving_by_two_rows_is_not_amplified():
    r = ok("function main (db : bag T) : fuzzy num { subsample 0.1 (fun s -> laplace 1 (count s)) (union db db) }")
    assert r.inputs[0].subsampled is None and r.epsilon == 2
    assert guarantee(r, DELTA).epsilon == 2


def test_a_gaussian_release_on_a_sample_is_counted_in_its_own_channel_and_amplified():
    r = ok("function main (db : bag T) : fuzzy num { subsample 0.1 (fun s -> gaussian 1 (count s)) db }")
    inp = r.inputs[0]
    assert inp.rho_gauss == 1 and inp.rho_sampled == 1 and inp.subsampled == (("gauss", F(1, 10), F(1), 1),)
    g = guarantee(r, DELTA)
    loss = proven_loss(r)
    assert loss.gauss_sampled_rho == 1 and g.method == "Poisson-subsampled PLD"
    assert g.epsilon == epsilon_at_delta(loss, DELTA).epsilon < epsilon_at_delta(loss.unamplified(), DELTA).epsilon


def test_a_gaussian_release_beside_one_on_a_sample_is_composed_by_its_gdp_pair():
    r = ok("function main (db : bag T) : fuzzy num { sample a = gaussian 1 (count db); "
           "sample b = subsample 0.1 (fun s -> gaussian 1 (count s)) db; return a + b }")
    inp = r.inputs[0]
    assert inp.rho_gauss == 2 and inp.rho_sampled == 1
    g = guarantee(r, DELTA)
    plain_only = ok("function main (db : bag T) : fuzzy num { gaussian 1 (count db) }")
    two_plain = ok("function main (db : bag T) : fuzzy num { sample a = gaussian 1 (count db); "
                   "sample b = gaussian 1 (count db); return a + b }")
    assert guarantee(plain_only, DELTA).epsilon < g.epsilon < guarantee(two_plain, DELTA).epsilon
    assert g.method == "Poisson-subsampled PLD"


def test_a_branch_between_plain_and_sampled_gaussians_keeps_both_bounds():
    # the larger of the two arms in each channel: a plain release of rho 1 or one of rho 1 on a sample
    r = ok("function main (db : bag T) : fuzzy num { sample c = laplace 1 (count db); "
           "if c > 10 then gaussian 1 (count db) else subsample 0.1 (fun s -> gaussian 1 (count s)) db }")
    inp = r.inputs[0]
    assert inp.rho_gauss == 2 and inp.rho_sampled == 1  # g and gs each bound their own arm


def test_gaussian_releases_on_samples_in_a_recursion_are_counted():
    r = ok("param rho : num = 0.5;\n"
           "function steps (k : int) (db : bag T) (acc : num) : fuzzy num { if k <= 0 then return acc else "
           "sample c = subsample 0.01 (fun s -> gaussian rho (count s)) db; steps (k - 1) db (acc + c) }\n"
           "function main (db : bag T) : fuzzy num { steps 5 db 0 }")
    assert r.inputs[0].subsampled == (("gauss", F(1, 100), F(1, 2), 5),)


def test_a_declared_function_type_cannot_hide_a_gaussian_release_on_a_sample():
    refused("function app (f : bag T -o fuzzy num) (t : bag T) : fuzzy num { f t }\n"
            "function main (db : bag T) : fuzzy num { app (fun s -> subsample 0.1 (fun u -> gaussian 1 (count u)) s) "
            "db }", "E0313", "cannot make Gaussian releases on its arguments")


@pytest.mark.parametrize("q,code,words", [
    ("1.5", "E0213", "must be in (0, 1)"), ("0", "E0213", "must be in (0, 1)"), ("1", "E0213", "must be in (0, 1)"),
])
def test_a_rate_out_of_range_is_refused(q, code, words):
    refused(f"function main (db : bag T) : fuzzy num {{ subsample {q} (fun s -> laplace 1 (count s)) db }}",
            code, words)


def test_a_rate_from_the_data_is_refused():
    refused("function main (db : bag T) : fuzzy num { sample c = laplace 1 (count db); "
            "subsample (c / 1000) (fun s -> laplace 1 (count s)) db }", "E0209", "public constant")


def test_a_function_with_two_releases_on_the_sample_is_refused():
    refused("function two (s : bag T) : fuzzy num { sample a = laplace 1 (count s); sample b = laplace 1 (count s); "
            "return a + b }\nfunction main (db : bag T) : fuzzy num { subsample 0.1 two db }",
            "E0333", "more than one release on the sample")


def test_a_function_that_is_not_a_mechanism_is_refused():
    refused("function main (db : bag T) : fuzzy num { subsample 0.1 (fun s -> count s) db }",
            "E0333", "not a mechanism")


def test_a_function_that_captures_the_table_again_is_refused():
    refused("function main (db : bag T) : fuzzy num { subsample 0.1 (fun s -> laplace 1 (count s + count db)) db }",
            "E0333", "reads private data other than the sample")


def test_a_nested_subsample_is_refused():
    refused("function main (db : bag T) : fuzzy num { subsample 0.1 (fun s -> subsample 0.1 "
            "(fun u -> laplace 1 (count u)) s) db }", "E0333", "subsample nested in subsample")


def test_the_sample_read_twice_by_one_release_is_one_calibrated_release():
    # count s + count s moves by 2 = its calibrated sensitivity: still one Laplace pair of epsilon 1
    r = ok("function main (db : bag T) : fuzzy num { subsample 0.1 (fun s -> laplace 1 (count s + count s)) db }")
    assert r.inputs[0].subsampled == (("laplace", F(1, 10), F(1), 1),) and r.epsilon == 1


def test_a_function_that_releases_nothing_of_the_sample_is_refused():
    refused("function main (db : bag T) : fuzzy num { subsample 0.1 (fun s -> laplace 1 5) db }",
            "E0333", "releases nothing")
