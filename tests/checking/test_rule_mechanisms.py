"""Rule Mechanisms (docs/soundness.md): a mechanism adds noise calibrated to its argument's proven
sensitivity (an infinite one is refused), the runtime reads that calibration from the IR, and
epsilons, bounds, cutoffs and candidates must be public constants (a released value is public but
not a constant).

Attacks found by the review rounds and pinned as regression tests (the everyday typing of each
mechanism is in test_mechanism_rules.py).  Neighbouring tables differ by one row (unbounded DP);
runs use RandomSource.seeded (tests only).
"""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

import pytest
from check_and_run import ROW_A, ROW_B, assert_accepted_exactly, assert_rejected, check, codes, make_tables

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


MAIN = "function main (db : bag T) : fuzzy num "

REJECTED = {
    # first review round: mechanisms' public arguments
    "with-pair-to-laplace": ("E0202", "function main (db : bag T) : fuzzy (num, num) { laplace 1 (| count db, count db |) }"),
    "private-epsilon": ("E0209", "function main (db : bag T) : fuzzy num { laplace (clip 0.5 1 (count db)) (count db) }"),
    "released-epsilon": ("E0209", "function main (db : bag T) : fuzzy num { sample e = laplace 1 1; laplace e (count db) }"),
    "zero-epsilon": ("E0213", "function main (db : bag T) : fuzzy num { laplace 0 (count db) }"),
    "svt-cutoff-zero": ("E0213", "function main (db : bag T) : fuzzy (list bool) { above_threshold 1 0 5 [1, 2] (fun q -> count db) }"),
    "noisy-max-private-candidates": ("E0209", "function main (db : bag T) : fuzzy num { noisy_max 1 [count db, 1] (fun c -> c) }"),
    # randomized response on a helper's num parameter (it may move by fractions)
    "rr-on-fractional-helper-parameter": ("E0302", "function f (x : num) : fuzzy bool { randomized_response 1 (x > 0) }\nfunction main (db : bag T) : fuzzy bool { f (count db / 2) }"),
    # the sparse vector's rounding on a helper's num parameter
    "svt-on-fractional-helper-parameter": ("E0302", "function f (x : num) : fuzzy (list bool) { above_threshold 1 1 0 [1] (fun q -> x) }\nfunction main (db : bag T) : fuzzy (list bool) { f (count db / 2) }"),
    # third review round: a released candidate has type num (unbounded): it cannot scale the private input
    "released-candidate-scaling-the-table": (
        "E0305", "function main (db : bag T) : fuzzy num { sample a = laplace 1 (count db); "
        "exponential 1 [a] (fun q -> q * count db) }"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_refused_with_the_exact_code(name):
    """First and third review rounds, handled: private, released or non-positive epsilons and
    cutoffs, private candidates, a with-pair given to laplace, randomized response and the sparse
    vector on a fractionally moving input, a released candidate scaling the table."""
    assert_rejected(*REJECTED[name])


ACCEPTED = {
    # name: (program, total epsilon, [mechanism sensitivities in order]); first review round
    "score-capturing-db-twice": ('function main (db : bag T) : fuzzy string { exponential 1 ["a", "b"] (fun c -> count db + count (filter (fun r -> r.k == c) db)) }', F(1), [2]),
    "sparse-vector": ("function main (db : bag T) : fuzzy (list bool) { above_threshold 1 2 5 [1, 2, 3] (fun q -> count (filter (fun r -> r.x < q) db)) }", F(1), [1]),
    "randomized-response-on-a-comparison": ("function main (db : bag T) : fuzzy bool { randomized_response 0.5 (count db > 5) }", F(1, 2), [1]),
    # third review round: a released candidate of a bounded type (from a constant list) bounds the
    # score: S = 3 (the count clipped, so that the exact product is a bounded integer: rule Exact)
    "released-candidate-of-bounded-type": (
        "function main (db : bag T) : fuzzy num { sample c = exponential 1 [1, 2, 3] (fun q -> q); "
        "noisy_max 1 [c, 1] (fun q -> q * clip 0 1000 (count db)) }",
        F(1), [0, 3]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_with_the_exact_bound(name):
    """First and third review rounds, handled: each mechanism charged exactly its true loss."""
    assert_accepted_exactly(*ACCEPTED[name])


def test_a_released_value_is_not_a_constant_epsilon():
    """Sixth review round (constants passed as constants): a branch on a released value whose arms
    are the same constant is still not a constant (E0209)."""
    r = check(MAIN + "{ sample a = laplace 1 (count db); laplace (if a > 0 then 1 else 1) (count db) }")
    assert not r.ok and "E0209" in codes(r)


# ---- the runtime reads the checker's calibration ---------------------------------------------------

def test_laplace_noise_follows_the_reported_calibration(tables):
    """First review round, handled: the runtime reads the checker's calibration: a 2-sensitive
    query moves by exactly 2 per row under the same seed, and the release records the reported
    scale."""
    r = check("function main (db : bag T) : fuzzy num { laplace 1 (count db + count db) }")
    a = run_program(r.entry_instance, {"db": tables("")}, RandomSource.seeded(7))
    b = run_program(r.entry_instance, {"db": tables(ROW_A)}, RandomSource.seeded(7))
    assert round(b.value - a.value) == 2
    assert a.releases[0].scale == r.mechanisms[0].scale == 2


def test_every_mechanism_releases_with_the_checkers_calibration(tables):
    """Second review round (the runtime), handled: ctx.info is the only calibration: each release
    records the epsilon and scale the report shows."""
    r = check("""function main (db : bag T) : fuzzy (num, string, string, list bool, bool) {
      sample a = laplace 0.5 (count db + count db);
      sample b = exponential 1 ["a", "b"] (fun c -> count (filter (fun r -> r.k == c) db));
      sample c = noisy_max 1 ["a", "b"] (fun c -> count (filter (fun r -> r.k == c) db));
      sample d = above_threshold 1 1 0 [1, 2] (fun q -> count (filter (fun r -> r.x < q) db));
      sample e = randomized_response 1 (count db > 3);
      return (a, b, c, d, e) }""")
    assert r.ok and r.epsilon == F(9, 2)
    res = run_program(r.entry_instance, {"db": tables(ROW_A + ROW_B)}, RandomSource.seeded(1))
    got = [(x.mechanism, x.epsilon, x.scale, x.extra["sensitivity"]) for x in res.releases]
    assert got == [(m.name, m.epsilon, m.scale, m.sensitivity) for m in r.mechanisms]
    assert got == [("laplace", F(1, 2), F(4), F(2)), ("exponential", F(1), F(2), F(1)), ("noisy_max", F(1), F(2), F(1)),
                   ("above_threshold", F(1), F(2), F(1)), ("randomized_response", F(1), F(1), F(1))]


# ---- randomized response at a large epsilon ----------------------------------------------------------

ONE_COLUMN = 'schema T { x : num[0, 1] }\n'


def test_randomized_response_with_a_large_epsilon_runs(tmp_path):
    """Fourth review round, finding 4 (low, runtime): randomized_response with epsilon above
    ~709.8 always failed after its charge.

    `rr_flip_upper` (primitives/mechanisms.py) computed the accuracy with math.exp(float(eps)),
    which overflows for eps > 709.78: the bit was drawn, record_release never reached, and the run
    ended in E0604 "internal error" (exit 4) with eps booked on the ledger as `failed`.  The
    failure did not depend on the data, but docs/runtime.md promises "All primitives are total, so
    a checked program should not fail on any data", and `fuzzpy audit --mechanism
    randomized_response --epsilon 800` died with the same OverflowError.  Suggested fix: bound the
    flip probability exactly (e.g. 1 / (1 + 2^floor(eps * log2 e)) with exact integers), or
    saturate to 0 when exp overflows."""
    r = check_source(ONE_COLUMN + "function main (db : bag T) : fuzzy bool { randomized_response 800 (count db > 3) }\n",
                     "t.fz")
    assert r.ok and r.epsilon == 800
    (tmp_path / "d.csv").write_text("x\n1\n")
    db = load_table(tmp_path / "d.csv", r.schemas["T"], table="db")
    assert run_program(r.entry_instance, {"db": db}, RandomSource.seeded(1)).value is False


def test_randomized_response_with_a_moderate_epsilon_runs(tmp_path):
    """Fourth review round, finding 4, the control: an epsilon below the overflow."""
    r = check_source(ONE_COLUMN + "function main (db : bag T) : fuzzy bool { randomized_response 700 (count db > 3) }\n",
                     "t.fz")
    (tmp_path / "d.csv").write_text("x\n1\n")
    db = load_table(tmp_path / "d.csv", r.schemas["T"], table="db")
    assert r.ok and run_program(r.entry_instance, {"db": db}, RandomSource.seeded(1)).value is False


# ---- what docs/mechanisms.md says about the report and the sparse vector -----------------------------

ROOT = Path(__file__).resolve().parents[2]
ROW = 'schema Row { x : num[0, 100], y : num[0, 100], k : cat{"a", "b", "c", "d"}, flag : bool }\n'
IMPORTS = "".join(f'import "stdlib/{n}.fz"\n' for n in ("bags", "lists", "stats", "groups", "select", "ml", "adaptive"))


def lib(body: str, ret: str = "fuzzy num", extra: str = ""):
    """`main (db : bag Row) : RET { BODY }` checked next to the whole standard library."""
    src = ROW + IMPORTS + extra + f"function main (db : bag Row) : {ret} {{ {body} }}\n"
    return check_source(src, str(ROOT / "probe.fz"))


MECHANISM_DOCS = {
    # docs/mechanisms.md: scale, extra, and the codes it names for the sparse vector's cutoff
    "above_threshold-report": ("fuzzy (list bool)",
                               "above_threshold 1 2 500 [10, 20, 30, 40] (fun q -> count (filter (fun r -> r.x < q) db))",
                               [("above_threshold", 1, 1, 2, {"cutoff": 2, "query_scale": 8})]),
    "exponential-report": ("fuzzy string", 'exponential 0.5 ["a", "b", "c"] (fun c -> count (filter (fun r -> r.k == c) db))',
                           [("exponential", 1, F(1, 2), 4, {"candidates": 3})]),
    "randomized_response-report": ("fuzzy bool", "randomized_response 0.75 (count db > 5)",
                                   [("randomized_response", 1, F(3, 4), F(4, 3), {})]),
}


@pytest.mark.parametrize("name", sorted(MECHANISM_DOCS))
def test_the_report_fields_are_the_documented_ones(name):
    """Fourth review round (the documentation against the code), handled."""
    ret, body, expected = MECHANISM_DOCS[name]
    r = lib(body, ret)
    assert r.ok
    assert [(m.name, m.sensitivity, m.epsilon, m.scale, dict(m.extra or {})) for m in r.mechanisms] == expected


@pytest.mark.parametrize("cutoff, code", [("0", "E0213"), ("1.5", "E0213"), ("(0 - 1)", "E0213"), ('"a"', "E0202"),
                                          ("(clip 1 2 (count db))", "E0209")])
def test_the_documented_cutoff_errors(cutoff, code):
    """Fourth review round, handled: the sparse vector's cutoff errors are the ones the docs name."""
    r = lib(f"above_threshold 1 {cutoff} 500 [10] (fun q -> count db)", "fuzzy (list bool)")
    assert not r.ok and code in codes(r)


def test_the_hand_written_sparse_vector_of_the_docs_is_refused():
    """Fourth review round, handled: the docs' example of a sparse vector written by hand (a
    private comparison with a noisy threshold) is refused (E0302)."""
    r = lib("sample t = laplace 1 5; if count db > t then return true else return false", "fuzzy bool")
    assert not r.ok and "E0302" in codes(r)
