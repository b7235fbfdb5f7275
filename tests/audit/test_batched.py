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
PROGRAMS["sparse vector"] = SCHEMA + '''
function main (db : bag T) : fuzzy (list bool) {
  above_threshold 1 2 1 [0, 2, 4, 6, 8] (fun c -> count (filter (fun r -> r.x >= c) db)) }'''
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

# Mechanism inputs that depend on the run (they read an earlier release through a row function):
# the row function runs on every (run, row) pair at once, and the per-run mechanisms are drawn
# together with the vectorised samplers.
PROGRAMS["gradient steps on released weights"] = SCHEMA + '''
function step (db : bag T) (w : num) (t : int) : fuzzy (num, num) {
  if t <= 0 then return (w, 0)
  else
    sample g = laplace 1 (sum (map (fun r -> clip 0 1 (r.x / 10 - w)) db), count (filter (fun r -> r.n > w) db));
    let (a, b) = g;
    step db (w + a / 4 - b / 8) (t - 1)
}
function main (db : bag T) : fuzzy (num, num) {
  sample n = laplace 1 (count db);
  step db (n / 10) 2
}'''
PROGRAMS["gaussian of a per-run vsum"] = SCHEMA + '''
function main (db : bag T) : fuzzy vec[2] {
  sample a = gaussian 1 (count db);
  gaussian 1 (vsum 1 (fun r -> vec (clip 0 1 (a / 10), r.x / 10)) db)
}'''
PROGRAMS["each over parts of a per-run groupby"] = SCHEMA + '''
function main (db : bag T) : fuzzy (parts {"0", "1"} num) {
  sample c = laplace 1 (count db);
  each (fun g -> sample m = laplace 1 (count g); return (m + c)) (groupby (fun r -> if r.x < c * 3 then 0 else 1) db)
}'''
PER_RUN = {"gradient steps on released weights", "gaussian of a per-run vsum", "each over parts of a per-run groupby"}

# Programs the sampler must not batch (it falls back; the law is compared all the same).
FALLS_BACK = {"a distribution built before a split"}
SAMPLES = 600


def draw(report, batch: bool, seed: int, n: int = SAMPLES, largest: bool = False):
    """Draws on the first pair's smaller table, or (largest) on the largest table of the pairs."""
    if largest:
        pairs = program_pairs(report, np.random.default_rng(0), 40, delta=Fraction(0) if report.is_pure else Fraction(1, 10**5))
        tables = max((p.b for p in pairs), key=lambda t: sum(len(rows) for _, rows in t.tables))
    else:
        tables = program_pairs(report, np.random.default_rng(0), 4)[0].a
    return program_sampler(report, batch=batch)(tables, n, np.random.default_rng(seed))


@pytest.fixture
def per_run_draws(monkeypatch):
    """Records each vectorised draw of mechanisms built once per run (True: it drew them)."""
    outcome = []
    real = batched_module._draw_runs

    def spy(first, inputs, rng):
        out = real(first, inputs, rng)
        runs = len(out[0]) if type(out) is tuple else (0 if out is None else len(out))  # a tuple: columns
        outcome.append(out is not None and runs == len(inputs))
        return out

    monkeypatch.setattr(batched_module, "_draw_runs", spy)
    return outcome


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
def test_the_batched_sampler_has_the_law_of_interpreter_runs(name, batched_ran, per_run_draws):
    report = check_source(PROGRAMS[name], "t.fz")
    assert report.ok, report.diagnostics
    fast = draw(report, True, 11, largest=name in PER_RUN)
    assert per_run_draws == ([True] * len(per_run_draws) if name in PER_RUN else [])
    assert len(per_run_draws) >= (1 if name in PER_RUN else 0)  # drawn together, vectorised
    slow = draw(report, False, 12, largest=name in PER_RUN)
    assert batched_ran == [name not in FALLS_BACK]
    assert len(fast) == len(slow) == SAMPLES
    _same_law(fast, slow)


def _same_law(fast: list, slow: list) -> None:
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


@pytest.mark.parametrize("name,params", [("logistic_regression.fz", {"T": "2"}), ("logistic_regression_gauss.fz", {"T": "3"}),
                                         ("kmeans.fz", {"T": "2"}), ("kmeans_gauss.fz", {"T": "2"})])
def test_examples_whose_mechanisms_read_releases_are_batched_with_the_law_of_interpreter_runs(
        name, params, batched_ran, per_run_draws):
    """Gradient descent and k-means: each step's row function reads the released weights or
    centres, so it runs on every (run, row) pair, and each step's mechanisms are drawn together."""
    report = check_file(ROOT / "examples" / name, params=params)
    fast = draw(report, True, 21, 300, largest=True)
    slow = draw(report, False, 22, 300, largest=True)
    assert batched_ran == [True] and per_run_draws and all(per_run_draws)
    _same_law(fast, slow)


def test_each_run_reads_its_own_releases_in_its_row_functions(per_run_draws):
    """Per-run row functions must pair each run with its own release: later releases (nearly
    noiseless) are functions of the first one, checked run by run, so lanes swapped between runs
    would show."""
    src = SCHEMA + '''
function main (db : bag T) : fuzzy (num, num, num, num) {
  sample n = laplace 1 (count db);
  sample k = laplace 1000000 (count db);
  sample s = laplace 1000000 (sum (map (fun r -> clip 0 10 (n + 5)) db));
  sample g = each (fun p -> laplace 1000000 (count p)) (groupby (fun r -> if r.x < 2 * n then 0 else 1) db);
  return (n, k, s, part g "0")
}'''
    report = check_source(src, "t.fz")
    assert report.ok, report.diagnostics
    pairs = program_pairs(report, np.random.default_rng(0), 40)
    tables = max((p.b for p in pairs), key=lambda t: len(t.tables[0][1]))
    xs = [row[0] for row in tables.tables[0][1]]
    out = program_sampler(report)(tables, 400, np.random.default_rng(3))
    assert len(xs) == 2 and per_run_draws and all(per_run_draws)
    assert len({n for n, _, _, _ in out}) > 100
    assert len({sum(x < 2 * n for x in xs) for n, _, _, _ in out}) == 3  # 0, 1 and 2 rows below
    for n, k, total, below in out:
        assert round(k) == len(xs)
        assert abs(total - len(xs) * min(max(n + 5, 0), 10)) < 1e-3
        assert abs(below - sum(x < 2 * n for x in xs)) < 1e-3


WALK = SCHEMA + '''
function walk (db : bag T) (w : num) (t : int) : fuzzy num {
  if t <= 0 then return w
  else
    sample s = laplace 1000000 (sum (map (fun r -> clip 0 10 (2 * r.x / 10 + (if r.f then 1 else 0) + w)) db));
    walk db (s / 4) (t - 1)
}
function main (db : bag T) : fuzzy num {
  sample n = laplace 1 (count db);
  walk db n 3
}'''


def test_a_row_functions_operations_on_the_row_alone_are_done_once_across_steps(per_run_draws, monkeypatch):
    """Each step's row function runs on every (run, row) pair and reads that run's weight w; its
    operations on the row alone (`2 * r.x / 10`, the `if` on r.f) have the same arguments at
    every step and are computed once (VectorEvaluator's memo), those that read w at every step.
    Each run's result is checked against its own first release: a result kept for arguments that
    changed would show."""
    import fuzzpy.runtime.vectorize as V

    report = check_source(WALK, "t.fz")
    assert report.ok, report.diagnostics
    pairs = program_pairs(report, np.random.default_rng(0), 40)
    tables = max((p.b for p in pairs), key=lambda t: len(t.tables[0][1]))
    rows = [(row[0], row[3]) for row in tables.tables[0][1]]  # (x, f)
    computed, wheres = Counter(), []
    real_on_columns, real_where = V._on_columns, V.where

    def on_columns(prim, node, args):
        computed[prim.name] += 1
        return real_on_columns(prim, node, args)

    def where(*args):
        wheres.append(True)
        return real_where(*args)

    monkeypatch.setattr(V, "_on_columns", on_columns)
    monkeypatch.setattr(V, "where", where)
    out = program_sampler(report)(tables, 300, np.random.default_rng(4))
    assert len(rows) >= 2 and per_run_draws and all(per_run_draws)
    assert computed["mul"] == computed["div"] == 1 and len(wheres) == 1
    assert computed["add"] == 1 + 3 and computed["clip"] == 3  # `... + (if ...)` once, `+ w` per step
    # the same seed, the first release alone: each run's start
    starts = program_sampler(check_source(WALK.replace("walk db n 3", "return n"), "t.fz"))(
        tables, 300, np.random.default_rng(4))
    assert len({round(w, 6) for w in starts}) > 100
    for w, got in zip(starts, out):
        for _ in range(3):
            w = sum(min(max(2 * x / 10 + (1 if f else 0) + w, 0), 10) for x, f in rows) / 4
        assert abs(got - w) < 1e-3


SHAPED_WALK = SCHEMA + '''
function shape (r : T) : num { 2 * r.x / 10 + (if r.f then 1 else 0) }
function twice (r : T) : num { shape r + shape r }
function walk (db : bag T) (w : num) (t : int) : fuzzy num {
  if t <= 0 then return w
  else
    sample s = laplace 1000000 (sum (map (fun r -> clip 0 10 (shape r + twice r / 4 + w)) db));
    walk db (s / 4) (t - 1)
}
function main (db : bag T) : fuzzy num {
  sample n = laplace 1 (count db);
  walk db n 3
}'''


def test_a_function_of_operations_alone_on_the_row_is_evaluated_once_and_still_called(monkeypatch):
    """`shape r` (operations only) on the same row view gives its last result without evaluating
    its body again, but every call is still made (and counted against the row's budget);
    `twice r`, which calls, evaluates its body at every step.  Each run's result is checked."""
    from fuzzpy.runtime.interpreter import Interpreter

    report = check_source(SHAPED_WALK, "t.fz")
    assert report.ok, report.diagnostics
    pairs = program_pairs(report, np.random.default_rng(0), 40)
    tables = max((p.b for p in pairs), key=lambda t: len(t.tables[0][1]))
    rows = [(row[0], row[3]) for row in tables.tables[0][1]]
    bodies, calls = Counter(), Counter()
    real_body, real_call = Interpreter.call_body, Interpreter.call_instance

    def call_body(self, inst, args):
        bodies[inst.name] += 1
        return real_body(self, inst, args)

    def call_instance(self, node, args):
        calls[node.instance.name] += 1
        return real_call(self, node, args)

    monkeypatch.setattr(Interpreter, "call_body", call_body)
    monkeypatch.setattr(Interpreter, "call_instance", call_instance)
    out = program_sampler(report)(tables, 300, np.random.default_rng(4))
    assert len(rows) >= 2 and bodies["shape"] == 1 and bodies["twice"] == 3
    assert calls["shape"] == 3 * 3 and calls["twice"] == 3
    starts = program_sampler(check_source(SHAPED_WALK.replace("walk db n 3", "return n"), "t.fz"))(
        tables, 300, np.random.default_rng(4))
    for w, got in zip(starts, out):
        for _ in range(3):
            w = sum(min(max(1.5 * (2 * x / 10 + (1 if f else 0)) + w, 0), 10) for x, f in rows) / 4
        assert abs(got - w) < 1e-3


@pytest.mark.parametrize("budget", [4, 3])
def test_a_remembered_call_still_spends_the_rows_call_budget(budget, monkeypatch):
    """Each step's row function makes 4 calls (shape, twice, and twice's two shapes), remembered
    or not: with a budget of 4 calls a row the walk runs as usual; with 3, every row runs out,
    its value is missing (0 in the sum), and every run ends at 0, as one interpreter run per
    sample gives it."""
    from fuzzpy import limits

    monkeypatch.setattr(limits, "ROW_CALLS", budget)
    report = check_source(SHAPED_WALK, "t.fz")
    pairs = program_pairs(report, np.random.default_rng(0), 40)
    tables = max((p.b for p in pairs), key=lambda t: len(t.tables[0][1]))
    for batch in (True, False):
        out = program_sampler(report, batch=batch)(tables, 50, np.random.default_rng(4))
        ended_at_zero = [abs(x) < 1e-3 for x in out]
        assert all(ended_at_zero) if budget == 3 else not any(ended_at_zero)


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
    # as floats: the outputs mix released floats and exact Fractions (n + 1), which scipy >= 1.18
    # no longer takes in a list
    assert stats.ks_2samp(np.asarray(out, dtype=float), np.asarray(slow, dtype=float)).pvalue > 1e-3


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
