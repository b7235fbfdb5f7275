"""The auditor's batched program sampler (fuzzpy/audit/batched.py) draws from the same law as one
interpreter run per sample: both samplers on the same synthetic tables, fixed seeds, compared
with two-sample tests on every coordinate of the output (Kolmogorov-Smirnov for numbers,
chi-square for discrete outputs).  Programs whose structure does not allow batching fall back to
the interpreter, with the same outputs."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from fuzzpy.audit import batched as batched_module
from fuzzpy.audit.outputs import encode
from fuzzpy.audit.programs import program_pairs, program_sampler
from fuzzpy.checking.program import check_file, check_source

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = 'schema T { x : num[0, 10], n : int[0, 5], k : cat{"a", "b", "c"}, f : bool, s : string }\n'

PROGRAMS = {
    "two laplace and a quotient": SCHEMA + '''
function main (db : bag T) : fuzzy (num, num) {
  sample n = laplace 0.5 (count db);
  sample t = laplace 0.5 (sum (map (fun r -> clip 0 5 r.x) db));
  return (n, t / n + 1)
}''',
    "each histogram": SCHEMA + '''
function main (db : bag T) : fuzzy (parts {"a", "b", "c"} num) {
  each (fun g -> laplace 0.5 (count g)) (groupby (fun r -> r.k) db) }''',
    "exponential": SCHEMA + '''
function main (db : bag T) : fuzzy num {
  exponential 1 [0, 2, 4, 6, 8, 10] (fun c -> 0 - abs (count (filter (fun r -> r.x < c) db) - 3)) }''',
    "noisy max": SCHEMA + '''
function main (db : bag T) : fuzzy string {
  noisy_max 1 ["a", "b", "c"] (fun c -> count (filter (fun r -> r.k == c) db)) }''',
    "laplace on a pair, a list cased": SCHEMA + '''
function total (xs : list num) : num { case xs of { [] => 0 | h :: t => h + total t } }
function main (db : bag T) : fuzzy num {
  sample p = laplace 1 (count db, count (filter (fun r -> r.f) db));
  let (a, b) = p;
  return (total [a, b, a])
}''',
}
# `if` on a released value: the runs are split between the branches, each branch's runs drawn
# together (nested, and with a mechanism in both branches, one reading a release).
PROGRAMS["if on a release"] = SCHEMA + '''
function main (db : bag T) : fuzzy num {
  sample n = laplace 0.5 (count db);
  if n > 3 then laplace 0.5 (count (filter (fun r -> r.f) db)) else return 0
}'''
PROGRAMS["nested ifs on releases"] = SCHEMA + '''
function main (db : bag T) : fuzzy (num, num) {
  sample n = laplace 0.5 (count db);
  if n > 3 then (sample m = laplace 0.5 (count (filter (fun r -> r.f) db));
                 if m > n / 2 then return (m, n) else (sample z = laplace 1 (count db); return (z, m)))
  else (sample m = laplace 1 (count db); return (m + n, 0))
}'''

# A distribution built before the split that reads an earlier release: drawn in a branch, it
# must pair each run with its own release (its environment holds every run's).
PROGRAMS["a distribution built before a split"] = SCHEMA + '''
function main (db : bag T) : fuzzy (num, num) {
  sample n = laplace 0.5 (count db);
  let d = (sample m = laplace 1 (count db); return (m + 100 * n, n));
  if n > 3 then d else return (0 - n, n)
}'''

# Programs the sampler must not batch (it falls back; the law is compared all the same).
FALLS_BACK = {"a distribution built before a split"}
SAMPLES = 600


def draw(report, batch: bool, seed: int, n: int = SAMPLES):
    pair = program_pairs(report, np.random.default_rng(0), 4)[0]
    return program_sampler(report, batch=batch)(pair.a, n, np.random.default_rng(seed))


@pytest.fixture
def batched_ran(monkeypatch):
    """Records whether draw_batch completed (so no test passes by silently falling back)."""
    outcome = []
    real = batched_module.draw_batch

    def spy(*args, **kw):
        try:
            out = real(*args, **kw)
        except Exception:
            outcome.append(False)
            raise
        outcome.append(True)
        return out

    monkeypatch.setattr(batched_module, "draw_batch", spy)
    return outcome


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_batched_sampler_has_the_law_of_interpreter_runs(name, batched_ran):
    report = check_source(PROGRAMS[name], "t.fz")
    assert report.ok, report.diagnostics
    fast, slow = draw(report, True, 11), draw(report, False, 12)
    assert batched_ran == [name not in FALLS_BACK]
    assert len(fast) == len(slow) == SAMPLES
    assert {_shape(v) for v in fast} == {_shape(v) for v in slow}  # same types, tuples, keys
    a, b = encode(fast), encode(slow)
    assert set(a.numeric) == set(b.numeric)
    if a.numeric:
        for label in a.numeric:  # NaN: the coordinate is absent (a branch of another shape)
            x, y = np.asarray(a.numeric[label], float), np.asarray(b.numeric[label], float)
            present = np.array([[np.isnan(x).sum(), (~np.isnan(x)).sum()], [np.isnan(y).sum(), (~np.isnan(y)).sum()]])
            assert stats.chi2_contingency(present + 1).pvalue > 1e-3, label
            if (~np.isnan(x)).sum() > 20 and (~np.isnan(y)).sum() > 20:
                assert stats.ks_2samp(x[~np.isnan(x)], y[~np.isnan(y)]).pvalue > 1e-3, label
    else:  # a discrete output: the same frequencies
        ca, cb = Counter(a.keys.tolist()), Counter(b.keys.tolist())
        keys = sorted(set(ca) | set(cb))
        table = np.array([[ca[k] for k in keys], [cb[k] for k in keys]])
        assert stats.chi2_contingency(table + 1).pvalue > 1e-3


def test_the_batched_sampler_has_power_against_a_wrong_law():
    """The comparison above would notice a sampler off by a shift of one noise scale."""
    report = check_source(PROGRAMS["two laplace and a quotient"], "t.fz")
    fast, slow = draw(report, True, 11, 500), draw(report, False, 12, 500)
    shifted = np.array([v[0] for v in fast]) + 2.0  # scale 2: epsilon 0.5, sensitivity 1
    assert stats.ks_2samp(shifted, [v[0] for v in slow]).pvalue < 1e-6


def test_the_quickstart_example_is_batched_and_keeps_exact_post_processing(batched_ran):
    report = check_file(ROOT / "examples" / "quickstart.fz")
    out = draw(report, True, 3, 200)
    assert batched_ran == [True]
    assert len({n for n, _ in out}) > 150  # fresh noise in every run
    for n, mean in out:
        assert type(n) is float and type(mean) is Fraction  # exact division, as the interpreter does


# `case` on sums whose side differs between runs: not batched.
CASE_ON_RELEASE = SCHEMA + '''
function main (db : bag T) : fuzzy num {
  sample n = laplace 0.5 (count db);
  let s = if n > 3 then inl n else inr (n + 1);
  case s of { inl a => laplace 0.5 (count (filter (fun r -> r.f) db)) | inr b => return b }
}'''


def test_control_flow_the_sampler_cannot_split_falls_back_to_interpreter_runs(batched_ran):
    report = check_source(CASE_ON_RELEASE, "t.fz")
    assert report.ok
    pair = program_pairs(report, np.random.default_rng(0), 4)[0]
    sampler = program_sampler(report)
    out = sampler(pair.a, 300, np.random.default_rng(5))
    assert batched_ran == [False] and len(out) == 300
    assert len(sampler(pair.b, 20, np.random.default_rng(7))) == 20
    assert batched_ran == [False]  # not tried again for this program
    slow = draw(report, False, 6, 300)
    assert stats.ks_2samp(out, slow).pvalue > 1e-3


def test_exact_sampling_without_the_vectorised_samplers():
    """vectorised=False draws every mechanism with its exact runtime sampler, one by one: with
    the same random source it gives exactly the interpreter's sequence of draws."""
    from fuzzpy.audit.batched import draw_batch
    from fuzzpy.audit.programs import _tables
    from fuzzpy.runtime.interpreter import Interpreter, RunState
    from fuzzpy.runtime.samplers import RandomSource

    report = check_source(PROGRAMS["exponential"], "t.fz")
    pair = program_pairs(report, np.random.default_rng(0), 4)[0]
    frames = pair.a.frames({inp.name: schema for inp, schema in _tables(report)})
    outs = []
    for batched in (True, False):
        state = RunState(RandomSource.seeded(9))
        interp = Interpreter(state)
        value = interp.eval(report.entry_instance.body, frames)
        if batched:
            outs.append(draw_batch(state, value, 50, state.rng, vectorised=False))
        else:
            outs.append([interp.draw(value) for _ in range(50)])
    assert outs[0] == outs[1]


def _shape(v):
    if isinstance(v, tuple):
        return ("tuple",) + tuple(_shape(x) for x in v)
    if isinstance(v, dict):
        return ("dict",) + tuple((k, _shape(x)) for k, x in v.items())
    return type(v).__name__


@pytest.mark.parametrize("exact", [False])  # --exact: the same at 3x the time (exact draws: the test above)
def test_program_audits_say_which_samplers_they_used(tmp_path, exact):
    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    prog = tmp_path / "e.fz"
    prog.write_text(SCHEMA + 'function main (db : bag T) : fuzzy num { laplace 1 (count db) }')
    args = ["audit", str(prog), "--samples", "500", "--seed", "1", "--max-pairs", "2"] + (["--exact"] if exact else [])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert ("every mechanism with its exact runtime sampler" in res.stdout) == exact
    assert ("vectorised Laplace, Gaussian, exponential and noisy_max samplers" in res.stdout) == (not exact)
