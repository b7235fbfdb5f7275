"""Sampling many inputs at once (`program_sampler(...).many`, `batched.draw_inputs`): each input's
runs in lanes of one evaluation, every input's run j with the same noise (common random numbers,
`SharedRuns`).  For a program whose draws do not depend on the lanes' values, that is exactly what
the per-input sampler gives each input from the same generator state, so the outputs are compared
bit for bit; a program whose runs split between branches draws its branches' noise per lane, and
is compared in law.  Programs that would evaluate per lane what each input evaluates once are
refused (None) and sampled input by input."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from fuzzpy.audit import programs as programs_module
from fuzzpy.audit.auditor import audit_program
from fuzzpy.audit.neighbours import Tables
from fuzzpy.audit.programs import _lane_table, program_pairs, program_sampler
from fuzzpy.audit.search import AuditConfig, _Run
from fuzzpy.checking.program import check_file, check_source
from fuzzpy.runtime.samplers import RandomSource, SharedRuns, runs_draw, shared_copies
from tests.audit.test_batched import PROGRAMS, SCHEMA, _same_law

ROOT = Path(__file__).resolve().parents[2]

# Drawn together, with the per-input sampler's outputs bit for bit.
IDENTICAL = ["two laplace and a quotient", "each histogram", "laplace on a pair, a list cased",
             "gradient steps on released weights", "gaussian of a per-run vsum", "each over parts of a per-run groupby"]
# Selection over scores read from the table: per lane together, once per input alone; refused.
REFUSED = ["exponential", "noisy max", "sparse vector"]
# Runs split between branches on released values: together, in law.
SPLIT = ["if on a release", "nested ifs on releases"]


def _inputs(report, k: int = 12) -> list[Tables]:
    """Both sides of k pairs spread over all the auditor's pairs (tables of 0 to 3 rows)."""
    delta = Fraction(0) if report.is_pure else Fraction(1, 10**5)
    pairs = program_pairs(report, np.random.default_rng(0), 160, delta=delta)
    return [x for p in pairs[::max(1, len(pairs) // k)][:k] for x in (p.a, p.b)]


def _both(report, inputs: list[Tables], n: int, seed: int):
    sampler = program_sampler(report)
    together = sampler.many(inputs, n, np.random.default_rng(seed))
    alone = [sampler(x, n, np.random.default_rng(seed)) for x in inputs]
    return together, alone


def test_the_tests_cover_every_program_of_the_batched_sampler_tests():
    assert set(IDENTICAL) | set(REFUSED) | set(SPLIT) | {"a distribution built before a split"} == set(PROGRAMS)


@pytest.mark.parametrize("name", IDENTICAL)
def test_inputs_drawn_together_get_what_each_gets_alone_from_the_same_seed(name):
    report = check_source(PROGRAMS[name], "t.fz")
    inputs = _inputs(report)
    assert len({sum(len(rows) for _, rows in t.tables) for t in inputs}) > 2  # tables of several sizes
    together, alone = _both(report, inputs, 50, 7)
    assert together is not None
    assert [repr(x) for x in together] == [repr(x) for x in alone]
    assert len({repr(v) for v in together[0]}) > 25  # each input's runs drew their own noise


@pytest.mark.parametrize("name", ["logistic_regression_gauss.fz", "kmeans.fz", "histogram.fz", "decision_tree.fz"])
def test_examples_drawn_together_get_what_each_gets_alone(name):
    path = ROOT / "examples" / name
    report = check_file(path, params={"T": "3"} if "T" in check_file(path).params else {})
    inputs = _inputs(report, 6)
    together, alone = _both(report, inputs, 40, 3)
    assert together is not None
    assert [repr(x) for x in together] == [repr(x) for x in alone]


@pytest.mark.parametrize("name", REFUSED + ["a distribution built before a split"])
def test_programs_that_would_do_per_lane_what_an_input_does_once_are_refused(name, monkeypatch):
    report = check_source(PROGRAMS[name], "t.fz")
    sampler = program_sampler(report)
    calls = []
    real = programs_module._merged_runs
    monkeypatch.setattr(programs_module, "_merged_runs", lambda *a: calls.append(1) or real(*a))
    inputs = _inputs(report, 3)
    assert sampler.many(inputs, 20, np.random.default_rng(1)) is None
    assert sampler.many(inputs, 20, np.random.default_rng(1)) is None
    assert calls == [1]  # not tried again
    assert len(sampler(inputs[0], 20, np.random.default_rng(1))) == 20  # input by input still works


def test_the_median_example_is_refused_without_evaluating_its_selection_per_lane():
    report = check_file(ROOT / "examples" / "median.fz")
    assert program_sampler(report).many(_inputs(report, 40), 400, np.random.default_rng(1)) is None


@pytest.mark.parametrize("name", SPLIT)
def test_runs_split_on_releases_keep_each_inputs_law(name):
    """Each branch draws its own runs' noise (no sharing inside a split): every input's outputs
    have the law of its own sampler."""
    report = check_source(PROGRAMS[name], "t.fz")
    pairs = program_pairs(report, np.random.default_rng(0), 40)
    inputs = [pairs[0].a, max((p.b for p in pairs), key=lambda t: len(t.tables[0][1]))]
    together, alone = _both(report, inputs, 600, 5)
    assert together is not None
    for mine, reference in zip(together, alone):
        _same_law(mine, reference)


def test_every_input_shares_each_runs_noise():
    """`laplace (count db)`: output minus the table's count is the noise, the same for every
    input in run j, and different between runs."""
    report = check_source(SCHEMA + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }", "t.fz")
    inputs = _inputs(report)
    sizes = [len(t.tables[0][1]) for t in inputs]
    together = program_sampler(report).many(inputs, 200, np.random.default_rng(4))
    noise = np.array([[v - size for v in out] for out, size in zip(together, sizes)])
    assert len(set(sizes)) > 2
    assert (noise == noise[0]).all()
    assert len(set(noise[0].tolist())) > 100


def test_groups_of_inputs_share_the_seed(monkeypatch):
    """More pairs than MANY_PAIRS: several merged draws, every one from the same seed."""
    report = check_source(PROGRAMS["two laplace and a quotient"], "t.fz")
    inputs = _inputs(report)
    monkeypatch.setattr(programs_module, "MANY_PAIRS", 150)
    groups = programs_module._groups(inputs, 50)
    assert len(groups) > 3 and [i for g in groups for i in g] == list(range(len(inputs)))
    assert all(sum(50 * max(1, len(inputs[i].tables[0][1])) for i in g) <= 150 or len(g) == 1 for g in groups)
    together, alone = _both(report, inputs, 50, 9)
    assert [repr(x) for x in together] == [repr(x) for x in alone]


def test_a_lane_table_puts_each_inputs_rows_in_its_runs():
    report = check_source(PROGRAMS["two laplace and a quotient"], "t.fz")
    schema = report.schemas["T"]
    row = (1.0, 2, "a", True, "s")
    bag = _lane_table(schema, [(row, row), (), (row,)], 3)
    assert bag.n == 9 and len(bag.base) == 3
    assert bag.lanes.tolist() == [0, 0, 1, 1, 2, 2, 6, 7, 8]
    assert bag.rows.tolist() == [0, 1, 0, 1, 0, 1, 2, 2, 2]


# ---- SharedRuns ------------------------------------------------------------------------------------

def test_shared_runs_repeat_a_draw_over_every_lane_and_nothing_else():
    base = RandomSource.seeded(5)
    shared = SharedRuns(base, 3, 4)
    assert shared_copies(shared, 12) == 3
    assert shared_copies(shared, 4) == shared_copies(shared, 8) == shared_copies(base, 12) == 1
    every = runs_draw(shared, 12, lambda k: np.arange(k) + 100 * k)
    assert every.tolist() == [400, 401, 402, 403] * 3
    some = runs_draw(shared, 8, lambda k: np.arange(k))  # some of the lanes: their own draws
    assert some.tolist() == list(range(8))
    two_d = runs_draw(shared, 12, lambda k: np.arange(2 * k).reshape(k, 2))
    assert two_d.shape == (12, 2) and (two_d[4:8] == two_d[:4]).all()


def test_shared_runs_read_the_base_sources_stream():
    a, b = RandomSource.seeded(8), RandomSource.seeded(8)
    shared = SharedRuns(a, 2, 3)
    assert shared.numpy_generator() is a.numpy_generator()
    first = runs_draw(shared, 6, shared.numpy_generator().random)
    assert first[:3].tolist() == b.numpy_generator().random(3).tolist() == first[3:].tolist()
    assert shared.randbits(30) == b.randbits(30)


# ---- the search ------------------------------------------------------------------------------------

def test_an_audit_with_inputs_drawn_together_equals_one_drawn_input_by_input(monkeypatch):
    """Screening, climbing, exploring and validating with `many` give the audit the draws the
    per-input path gives it: the same result, number for number."""
    report = check_file(ROOT / "examples" / "logistic_regression_gauss.fz", params={"T": "2"})
    cfg = dict(samples=3000, explore=2000, screen=200, climb=4, climb_samples=300, seed=12, chunk=1000)
    fast = audit_program(report, delta="1e-5", max_pairs=12, **cfg)
    calls = []
    real = programs_module.program_sampler

    def without_many(*a, **kw):
        sampler = real(*a, **kw)
        calls.append(sampler.many)
        return lambda x, n, rng: sampler(x, n, rng)

    monkeypatch.setattr("fuzzpy.audit.programs.program_sampler", without_many)
    slow = audit_program(report, delta="1e-5", max_pairs=12, **cfg)
    assert calls and fast.stats.screened == slow.stats.screened == 12
    assert fast.stats.samples == slow.stats.samples
    assert [(t.pair.label, str(t.event), t.k1, t.k2) for t in fast.tested] == \
           [(t.pair.label, str(t.event), t.k1, t.k2) for t in slow.tested]


class _Recorder:
    """A sampler x + noise that counts its calls (`many`: every input with the same noise)."""

    def __init__(self, many: bool):
        self.calls = 0
        if many:
            self.many = self._many

    def __call__(self, x, n, rng):
        self.calls += 1
        return x + rng.standard_normal(n)

    def _many(self, xs, n, rng):
        self.calls += 1
        noise = rng.standard_normal(n)
        return [x + noise for x in xs]


@pytest.mark.parametrize("many", [False, True])
def test_every_input_of_a_stage_is_drawn_from_one_seed(many):
    sampler = _Recorder(many)
    run = _Run(sampler, AuditConfig(chunk=100, seed=1), None)
    out = run.draw_inputs([0.0, 1.0, 5.0], 250, np.random.SeedSequence(3))
    values = [e.numeric[next(iter(e.numeric))] for e in out]
    assert [len(v) for v in values] == [250] * 3
    assert np.allclose(values[1] - 1.0, values[0]) and np.allclose(values[2] - 5.0, values[0])
    assert sampler.calls == (3 if many else 9)  # chunks of 100: 3 calls together, or 3 per input
    assert run.stats.samples == 750


def test_a_sampler_that_cannot_draw_together_is_used_input_by_input():
    sampler = _Recorder(False)
    sampler.many = lambda xs, n, rng: None
    run = _Run(sampler, AuditConfig(chunk=1000, seed=1), None)
    out = run.draw_inputs([0.0, 2.0], 50, np.random.SeedSequence(3))
    assert sampler.calls == 2 and run.stats.samples == 100 and all(e.n == 50 for e in out)


def test_a_mechanism_draws_the_same_from_sums_exact_values_as_from_their_list():
    """Lane sums over some empty bags read as Fractions and the float 0.0; a per-run mechanism
    takes their exact values (`Lanes.exact`) without building that list, and draws what the
    list would give it."""
    from fuzzpy.audit.batched import _input_ratios
    from fuzzpy.runtime.batch import _lane_sums
    from fuzzpy.runtime.noise import gaussian_release_runs, laplace_release_runs
    from fuzzpy.runtime.ratios import ExactColumns

    x = np.array([0.5, 1.25, 3.0, 0.75, 2.0])
    lanes = np.array([0, 0, 2, 3, 3])
    sums = _lane_sums(x, lanes, 5, Fraction(2))
    assert _input_ratios(sums) is sums.exact and sums._data is not None and type(sums._data) is not list
    for release, held in ((laplace_release_runs, sums.exact),
                          (gaussian_release_runs, ExactColumns((sums.exact,), True))):
        exact = release(held, Fraction(2), Fraction(1, 2), RandomSource.seeded(3))
        listed = release(sums.values(), Fraction(2), Fraction(1, 2), RandomSource.seeded(3))
        assert exact.tolist() == listed.tolist()
    assert sums.values() == [Fraction(7, 4), 0.0, Fraction(2), Fraction(11, 4), 0.0]


def test_the_exact_samplers_draw_input_by_input():
    """Exact samplers draw per lane: drawn together the inputs would not share their noise, so
    with `exact` each input is drawn alone, from the stage's one seed."""
    report = check_source(PROGRAMS["two laplace and a quotient"], "t.fz")
    assert hasattr(program_sampler(report), "many")
    assert not hasattr(program_sampler(report, exact=True), "many")


def test_programs_of_two_tables_drawn_together_get_what_each_input_gets_alone():
    """Every entry parameter is its own lane table, with the same lanes: input i's tables in
    lane i * n + j."""
    report = check_source(SCHEMA + "function main (a : bag T) (b : bag T) : fuzzy (num, num) {\n"
                                   "  sample x = laplace 0.5 (count a + count b);\n"
                                   "  sample y = laplace 1 (sum (map (fun r -> clip 0 5 (r.x + x / 10)) b));\n"
                                   "  return (x, y) }", "t.fz")
    assert report.ok, report.diagnostics
    inputs = _inputs(report, 17)  # an odd stride: pairs alternate between the two tables
    sizes = {tuple(len(rows) for _, rows in t.tables) for t in inputs}
    assert {len(s) for s in sizes} == {2}
    assert len({a for a, _ in sizes}) > 1 and len({b for _, b in sizes}) > 1  # both tables vary
    together, alone = _both(report, inputs, 60, 13)
    assert together is not None
    assert [repr(x) for x in together] == [repr(x) for x in alone]


def test_outputs_are_materialised_only_when_they_hold_a_lazy_bag():
    import pandas as pd

    from fuzzpy.audit.batched import _holds_bags
    from fuzzpy.runtime.values import MaskedBag

    bag = MaskedBag(pd.DataFrame({"x": [1.0, 2.0]}), np.array([True, False]))
    assert _holds_bags([((1.0, 2.0), {"a": (3.0,)})]) is False  # nested values, nothing lazy
    assert _holds_bags([(1.0, {"a": (bag,)})]) and _holds_bags([bag])
